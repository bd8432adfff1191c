// Conv2d, kernel 3, stride 2, no padding, channels last (core/compute/ops_decl.h), as im2col + one
// cuBLAS GEMM per chunk of batch items; the CPU's Winograd form is its own optimization, not part
// of the contract. A patch row is channels last too: column k = (kh * 3 + kw) * ic + ci, so the
// gather reads runs of 3 * ic contiguous inputs; the weight is packed to (oc, 9 * ic) in that
// order. The input gradient is a gather (each input sums the at most 2 x 2 patches that cover it,
// in the CPU's patch order), so there are no atomics.
#include "cuda/cuda_common.cuh"

#include "core/compute/ops.h" // ops_conv_out_len

typedef struct conv_geom {
    int ic, oc, h, wd, oh, ow;
    size_t p, kk; // output positions per item, patch length
} conv_geom;

static conv_geom geom_of(int ic, int oc, int h, int wd)
{
    conv_geom g;
    g.ic = ic, g.oc = oc, g.h = h, g.wd = wd;
    g.oh = ops_conv_out_len(h), g.ow = ops_conv_out_len(wd);
    g.p = (size_t)g.oh * g.ow, g.kk = (size_t)9 * ic;
    return g;
}

static int chunk_items(const conv_geom &g, int nb)
{
    size_t per = g.p * g.kk, cb = per ? (size_t)CU_CONV_CHUNK_FLOATS / per : nb;
    if (cb < 1) cb = 1;
    return cb < (size_t)nb ? (int)cb : nb;
}

// wp[o][t * ic + ci] = w[o][ci][t] (t = kh * 3 + kw): torch's layout to the patch order.
static __global__ void conv_pack_kernel(float *wp, const float *w, int ic, int oc)
{
    CU_GRID_STRIDE(i, (size_t)oc * ic * 9)
    {
        size_t o = i / ((size_t)ic * 9), r = i % ((size_t)ic * 9);
        wp[o * ic * 9 + (r % 9) * ic + r / 9] = w[i];
    }
}

// w[o][ci][t] += wp[o][t * ic + ci]: the packed weight gradient back in torch's layout.
static __global__ void conv_unpack_add_kernel(float *w, const float *wp, int ic, int oc)
{
    CU_GRID_STRIDE(i, (size_t)oc * ic * 9)
    {
        size_t o = i / ((size_t)ic * 9), r = i % ((size_t)ic * 9);
        w[i] += wp[o * ic * 9 + (r % 9) * ic + r / 9];
    }
}

// col[(item * p + oy * ow + ox) * kk + (kh * 3 + kw) * ic + ci] = x[item][2oy + kh][2ox + kw][ci].
static __global__ void im2col_kernel(float *col, const float *x, conv_geom g, int items)
{
    CU_GRID_STRIDE(e, (size_t)items * g.p * g.kk)
    {
        size_t pi = e / g.kk, k = e % g.kk;
        int t = (int)(k / g.ic), ci = (int)(k % g.ic), kh = t / 3, kw = t % 3;
        size_t item = pi / g.p, q = pi % g.p;
        int oy = (int)(q / g.ow), ox = (int)(q % g.ow);
        col[e] = x[((item * g.h + 2 * oy + kh) * g.wd + 2 * ox + kw) * g.ic + ci];
    }
}

// dx[item][yy][xx][ci] (+)= the patch-matrix gradients of the positions covering it, in the order
// of the CPU's scatter (oy, then ox ascending: kh, then kw descending).
static __global__ void col2im_kernel(float *dx, const float *dcol, conv_geom g, int items, int acc)
{
    CU_GRID_STRIDE(e, (size_t)items * g.h * g.wd * g.ic)
    {
        int ci = (int)(e % g.ic);
        size_t r = e / g.ic;
        int xx = (int)(r % g.wd), yy = (int)(r / g.wd % g.h);
        size_t item = r / ((size_t)g.wd * g.h);
        float s = acc ? dx[e] : 0.0f;
        for (int kh = 2; kh >= 0; kh--) {
            int oy2 = yy - kh;
            if (oy2 < 0 || (oy2 & 1) || oy2 / 2 >= g.oh) continue;
            for (int kw = 2; kw >= 0; kw--) {
                int ox2 = xx - kw;
                if (ox2 < 0 || (ox2 & 1) || ox2 / 2 >= g.ow) continue;
                size_t pi = item * g.p + (size_t)(oy2 / 2) * g.ow + ox2 / 2;
                s += dcol[pi * g.kk + (size_t)(kh * 3 + kw) * g.ic + ci];
            }
        }
        dx[e] = s;
    }
}

// y = act(y + b): the bias (may be NULL) and the fused ReLU after the GEMM.
static __global__ void bias_act_kernel(float *y, const float *b, size_t n, int oc, int relu)
{
    CU_GRID_STRIDE(i, n)
    {
        float v = b ? y[i] + b[i % oc] : y[i];
        y[i] = relu ? act_relu_f32(v) : v;
    }
}

// g = dy where the fused ReLU's output y > 0, else 0.
static __global__ void relu_mask_kernel(float *g, const float *dy, const float *y, size_t n)
{
    CU_GRID_STRIDE(i, n) g[i] = act_relu_grad_f32(dy[i], y[i]);
}

void cu_conv2d_forward(backend *be, float *y, const float *x, const float *w, const float *b, int nb, int ic,
                       int oc, int h, int wd, int relu)
{
    conv_geom g = geom_of(ic, oc, h, wd);
    if (g.p == 0 || nb <= 0 || oc <= 0) return;
    int cb = chunk_items(g, nb);
    float *wp = (float *)cu_scratch(be, ((size_t)oc * g.kk + (size_t)cb * g.p * g.kk) * sizeof(float));
    float *col = wp + (size_t)oc * g.kk;
    cudaStream_t st = cu_stream(be);
    conv_pack_kernel<<<cu_blocks(be, (size_t)oc * g.kk), CU_THREADS, 0, st>>>(wp, w, ic, oc);
    KERNEL_CHECK();
    for (int n0 = 0; n0 < nb; n0 += cb) {
        int c = nb - n0 < cb ? nb - n0 : cb;
        size_t ncol = (size_t)c * g.p * g.kk;
        im2col_kernel<<<cu_blocks(be, ncol), CU_THREADS, 0, st>>>(col, x + (size_t)n0 * h * wd * ic, g, c);
        KERNEL_CHECK();
        cu_gemm_rm(be, 0, 1, (int)(c * g.p), oc, (int)g.kk, 1.0f, col, (int)g.kk, wp, (int)g.kk, 0.0f,
                   y + (size_t)n0 * g.p * oc, oc);
    }
    size_t ny = (size_t)nb * g.p * oc;
    if (b || relu) {
        bias_act_kernel<<<cu_blocks(be, ny), CU_THREADS, 0, st>>>(y, b, ny, oc, relu);
        KERNEL_CHECK();
    }
}

void cu_conv2d_backward(backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                        const float *w, const float *y, int nb, int ic, int oc, int h, int wd, int acc)
{
    conv_geom g = geom_of(ic, oc, h, wd);
    cudaStream_t st = cu_stream(be);
    if (g.p == 0 || nb <= 0) {
        // No output position: dx gets no gradient (overwritten with zeros unless it accumulates).
        if (dx && !acc && nb > 0)
            CUDA_CHECK(cudaMemsetAsync(dx, 0, (size_t)nb * h * wd * ic * sizeof(float), st));
        return;
    }
    int cb = chunk_items(g, nb);
    size_t nw = (size_t)oc * g.kk;
    float *wp = (float *)cu_scratch(be, (2 * nw + (size_t)cb * g.p * (oc + g.kk)) * sizeof(float));
    float *dwp = wp + nw, *gm = dwp + nw, *col = gm + (size_t)cb * g.p * oc;
    conv_pack_kernel<<<cu_blocks(be, nw), CU_THREADS, 0, st>>>(wp, w, ic, oc);
    KERNEL_CHECK();
    for (int n0 = 0; n0 < nb; n0 += cb) {
        int c = nb - n0 < cb ? nb - n0 : cb;
        int rows = (int)(c * g.p);
        const float *gc = dy + (size_t)n0 * g.p * oc;
        if (y) {
            relu_mask_kernel<<<cu_blocks(be, (size_t)rows * oc), CU_THREADS, 0, st>>>(
                gm, gc, y + (size_t)n0 * g.p * oc, (size_t)rows * oc);
            KERNEL_CHECK();
            gc = gm;
        }
        if (db) cu_colsum_add(be, db, gc, rows, oc);
        im2col_kernel<<<cu_blocks(be, (size_t)rows * g.kk), CU_THREADS, 0, st>>>(
            col, x + (size_t)n0 * h * wd * ic, g, c);
        KERNEL_CHECK();
        if (dw) // dwp (oc x kk) = g^T col, summed over the chunks
            cu_gemm_rm(be, 1, 0, oc, (int)g.kk, rows, 1.0f, gc, oc, col, (int)g.kk, n0 ? 1.0f : 0.0f, dwp,
                       (int)g.kk);
        if (dx) { // dcol = g wp, gathered back onto the chunk's inputs
            cu_gemm_rm(be, 0, 0, rows, (int)g.kk, oc, 1.0f, gc, oc, wp, (int)g.kk, 0.0f, col, (int)g.kk);
            size_t nx = (size_t)c * h * wd * ic;
            col2im_kernel<<<cu_blocks(be, nx), CU_THREADS, 0, st>>>(dx + (size_t)n0 * h * wd * ic, col, g, c, acc);
            KERNEL_CHECK();
        }
    }
    if (dw) {
        conv_unpack_add_kernel<<<cu_blocks(be, nw), CU_THREADS, 0, st>>>(dw, dwp, ic, oc);
        KERNEL_CHECK();
    }
}
