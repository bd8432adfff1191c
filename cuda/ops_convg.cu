// Conv2d with any kernel (kh, kw) and stride (sh, sw), no padding, channels last
// (core/compute/ops_decl.h: conv2d_gen_*), as im2col + one cuBLAS GEMM per chunk of batch items;
// cuda/ops_conv2d.cu runs its 3x3 stride-2 case through it. A patch row is channels last: column
// k = (i * kw + j) * ic + ci; the weight is packed to (oc, kh * kw * ic) in that order. The input
// gradient is a gather over the patches that cover each input (no atomics).
#include "cuda/cuda_common.cuh"

#include "core/compute/ops.h" // ops_conv_len

typedef struct convg_geom {
    int ic, oc, h, wd, kh, kw, sh, sw, oh, ow;
    size_t p, kk; // output positions per item, patch length
} convg_geom;

static convg_geom geom_of(int ic, int oc, int h, int wd, int kh, int kw, int sh, int sw)
{
    convg_geom g;
    g.ic = ic, g.oc = oc, g.h = h, g.wd = wd, g.kh = kh, g.kw = kw, g.sh = sh, g.sw = sw;
    g.oh = ops_conv_len(h, kh, sh), g.ow = ops_conv_len(wd, kw, sw);
    g.p = (size_t)g.oh * g.ow, g.kk = (size_t)kh * kw * ic;
    return g;
}

int cu_conv_chunk_items(size_t per, int nb)
{
    size_t cb = per ? (size_t)CU_CONV_CHUNK_FLOATS / per : nb;
    if (cb < 1) cb = 1;
    return cb < (size_t)nb ? (int)cb : nb;
}

static int chunk_items(const convg_geom &g, int nb) { return cu_conv_chunk_items(g.p * g.kk, nb); }

// wp[o][t * ic + ci] = w[o][ci][t] (t = i * kw + j).
static __global__ void convg_pack_kernel(float *wp, const float *w, int ic, int oc, int taps)
{
    CU_GRID_STRIDE(e, (size_t)oc * ic * taps)
    {
        size_t o = e / ((size_t)ic * taps), r = e % ((size_t)ic * taps);
        wp[o * ic * taps + (r % taps) * ic + r / taps] = w[e];
    }
}

// w[o][ci][t] += wp[o][t * ic + ci].
static __global__ void convg_unpack_add_kernel(float *w, const float *wp, int ic, int oc, int taps)
{
    CU_GRID_STRIDE(e, (size_t)oc * ic * taps)
    {
        size_t o = e / ((size_t)ic * taps), r = e % ((size_t)ic * taps);
        w[e] += wp[o * ic * taps + (r % taps) * ic + r / taps];
    }
}

void cu_conv_pack(backend *be, float *wp, const float *w, int ic, int oc, int taps)
{
    convg_pack_kernel<<<cu_blocks(be, (size_t)oc * ic * taps), CU_THREADS, 0, cu_stream(be)>>>(wp, w, ic, oc, taps);
    KERNEL_CHECK();
}

void cu_conv_unpack_add(backend *be, float *w, const float *wp, int ic, int oc, int taps)
{
    convg_unpack_add_kernel<<<cu_blocks(be, (size_t)oc * ic * taps), CU_THREADS, 0, cu_stream(be)>>>(w, wp, ic, oc,
                                                                                                      taps);
    KERNEL_CHECK();
}

// col[(item * p + oy * ow + ox) * kk + (i * kw + j) * ic + ci] = x[item][sh oy + i][sw ox + j][ci].
static __global__ void convg_im2col_kernel(float *col, const float *x, convg_geom g, int items)
{
    CU_GRID_STRIDE(e, (size_t)items * g.p * g.kk)
    {
        size_t pi = e / g.kk, k = e % g.kk;
        int t = (int)(k / g.ic), ci = (int)(k % g.ic), i = t / g.kw, j = t % g.kw;
        size_t item = pi / g.p, q = pi % g.p;
        int oy = (int)(q / g.ow), ox = (int)(q % g.ow);
        col[e] = x[((item * g.h + (size_t)g.sh * oy + i) * g.wd + (size_t)g.sw * ox + j) * g.ic + ci];
    }
}

// dx[item][yy][xx][ci] (+)= the patch-matrix gradients of the positions covering it, in the
// order of the CPU's scatter (oy, then ox ascending: i, then j descending).
static __global__ void convg_col2im_kernel(float *dx, const float *dcol, convg_geom g, int items, int acc)
{
    CU_GRID_STRIDE(e, (size_t)items * g.h * g.wd * g.ic)
    {
        int ci = (int)(e % g.ic);
        size_t r = e / g.ic;
        int xx = (int)(r % g.wd), yy = (int)(r / g.wd % g.h);
        size_t item = r / ((size_t)g.wd * g.h);
        float s = acc ? dx[e] : 0.0f;
        for (int i = g.kh - 1; i >= 0; i--) {
            int oy2 = yy - i;
            if (oy2 < 0 || oy2 % g.sh || oy2 / g.sh >= g.oh) continue;
            for (int j = g.kw - 1; j >= 0; j--) {
                int ox2 = xx - j;
                if (ox2 < 0 || ox2 % g.sw || ox2 / g.sw >= g.ow) continue;
                size_t pi = item * g.p + (size_t)(oy2 / g.sh) * g.ow + ox2 / g.sw;
                s += dcol[pi * g.kk + (size_t)(i * g.kw + j) * g.ic + ci];
            }
        }
        dx[e] = s;
    }
}

// y = act(y + b) after the GEMM (b may be NULL).
static __global__ void convg_bias_act_kernel(float *y, const float *b, size_t n, int oc, int relu)
{
    CU_GRID_STRIDE(i, n)
    {
        float v = b ? y[i] + b[i % oc] : y[i];
        y[i] = relu ? act_relu_f32(v) : v;
    }
}

static __global__ void convg_relu_mask_kernel(float *g, const float *dy, const float *y, size_t n)
{
    CU_GRID_STRIDE(i, n) g[i] = act_relu_grad_f32(dy[i], y[i]);
}

void cu_conv2d_gen_forward(backend *be, float *y, const float *x, const float *w, const float *b, int nb, int ic,
                           int oc, int h, int wd, int kh, int kw, int sh, int sw, int relu)
{
    convg_geom g = geom_of(ic, oc, h, wd, kh, kw, sh, sw);
    if (g.p == 0 || nb <= 0 || oc <= 0) return;
    int cb = chunk_items(g, nb), taps = kh * kw;
    float *wp = (float *)cu_scratch(be, ((size_t)oc * g.kk + (size_t)cb * g.p * g.kk) * sizeof(float));
    float *col = wp + (size_t)oc * g.kk;
    cudaStream_t st = cu_stream(be);
    cu_conv_pack(be, wp, w, ic, oc, taps);
    for (int n0 = 0; n0 < nb; n0 += cb) {
        int c = nb - n0 < cb ? nb - n0 : cb;
        size_t ncol = (size_t)c * g.p * g.kk;
        convg_im2col_kernel<<<cu_blocks(be, ncol), CU_THREADS, 0, st>>>(col, x + (size_t)n0 * h * wd * ic, g, c);
        KERNEL_CHECK();
        cu_gemm_rm(be, 0, 1, (int)(c * g.p), oc, (int)g.kk, 1.0f, col, (int)g.kk, wp, (int)g.kk, 0.0f,
                   y + (size_t)n0 * g.p * oc, oc);
    }
    size_t ny = (size_t)nb * g.p * oc;
    if (b || relu) {
        convg_bias_act_kernel<<<cu_blocks(be, ny), CU_THREADS, 0, st>>>(y, b, ny, oc, relu);
        KERNEL_CHECK();
    }
}

void cu_conv2d_gen_backward(backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                            const float *w, const float *y, int nb, int ic, int oc, int h, int wd, int kh, int kw,
                            int sh, int sw, int acc)
{
    convg_geom g = geom_of(ic, oc, h, wd, kh, kw, sh, sw);
    cudaStream_t st = cu_stream(be);
    if (g.p == 0 || nb <= 0) {
        if (dx && !acc && nb > 0)
            CUDA_CHECK(cudaMemsetAsync(dx, 0, (size_t)nb * h * wd * ic * sizeof(float), st));
        return;
    }
    int cb = chunk_items(g, nb), taps = kh * kw;
    size_t nw = (size_t)oc * g.kk;
    float *wp = (float *)cu_scratch(be, (2 * nw + (size_t)cb * g.p * (oc + g.kk)) * sizeof(float));
    float *dwp = wp + nw, *gm = dwp + nw, *col = gm + (size_t)cb * g.p * oc;
    cu_conv_pack(be, wp, w, ic, oc, taps);
    for (int n0 = 0; n0 < nb; n0 += cb) {
        int c = nb - n0 < cb ? nb - n0 : cb;
        int rows = (int)(c * g.p);
        const float *gc = dy + (size_t)n0 * g.p * oc;
        if (y) {
            convg_relu_mask_kernel<<<cu_blocks(be, (size_t)rows * oc), CU_THREADS, 0, st>>>(
                gm, gc, y + (size_t)n0 * g.p * oc, (size_t)rows * oc);
            KERNEL_CHECK();
            gc = gm;
        }
        if (db) cu_colsum_add(be, db, gc, rows, oc);
        convg_im2col_kernel<<<cu_blocks(be, (size_t)rows * g.kk), CU_THREADS, 0, st>>>(
            col, x + (size_t)n0 * h * wd * ic, g, c);
        KERNEL_CHECK();
        if (dw) // dwp (oc x kk) = g^T col, summed over the chunks
            cu_gemm_rm(be, 1, 0, oc, (int)g.kk, rows, 1.0f, gc, oc, col, (int)g.kk, n0 ? 1.0f : 0.0f, dwp,
                       (int)g.kk);
        if (dx) {
            cu_gemm_rm(be, 0, 0, rows, (int)g.kk, oc, 1.0f, gc, oc, wp, (int)g.kk, 0.0f, col, (int)g.kk);
            size_t nx = (size_t)c * h * wd * ic;
            convg_col2im_kernel<<<cu_blocks(be, nx), CU_THREADS, 0, st>>>(dx + (size_t)n0 * h * wd * ic, col, g, c,
                                                                          acc);
            KERNEL_CHECK();
        }
    }
    if (dw) cu_conv_unpack_add(be, dw, dwp, ic, oc, taps);
}
