// Conv1d with kernel k, stride, dilation and groups, no padding, channels last
// (core/compute/ops_decl.h: conv1d_gen_*; ESPnet2's asr_transducer conv1d block), as im2col + one
// cuBLAS GEMM per group and chunk of batch items. A patch row of group g holds tap j's icg
// channels at column j * icg + ci; the weight is packed to (oc, k * icg) in that order
// (cu_conv_pack of cuda/ops_convg.cu: a k x 1 kernel on icg channels). The input
// gradient is a gather over the patches that cover each input (no atomics).
#include "cuda/cuda_common.cuh"

#include "core/compute/ops.h" // ops_conv1d_gen_len

typedef struct c1g_geom {
    int t, ic, oc, k, s, d, icg, ocg, ot;
    size_t kg; // patch length of one group
} c1g_geom;

static c1g_geom geom_of(int t, int ic, int oc, int k, int s, int d, int groups)
{
    c1g_geom g;
    g.t = t, g.ic = ic, g.oc = oc, g.k = k, g.s = s, g.d = d, g.icg = ic / groups, g.ocg = oc / groups;
    g.ot = ops_conv1d_gen_len(t, k, s, d), g.kg = (size_t)k * g.icg;
    return g;
}

// col[(item * ot + q) * kg + j * icg + ci] = x[item][s q + d j][c0 + ci].
static __global__ void c1g_im2col_kernel(float *col, const float *x, c1g_geom g, int c0, int items)
{
    CU_GRID_STRIDE(e, (size_t)items * g.ot * g.kg)
    {
        size_t pi = e / g.kg, kk = e % g.kg;
        int j = (int)(kk / g.icg), ci = (int)(kk % g.icg), q = (int)(pi % g.ot);
        size_t item = pi / g.ot;
        col[e] = x[(item * g.t + (size_t)g.s * q + (size_t)g.d * j) * g.ic + c0 + ci];
    }
}

// dx[item][tt][c0 + ci] (+)= the patch gradients of the outputs whose taps read it, in the order
// of the CPU's scatter (q ascending: j descending).
static __global__ void c1g_col2im_kernel(float *dx, const float *dcol, c1g_geom g, int c0, int items, int acc)
{
    CU_GRID_STRIDE(e, (size_t)items * g.t * g.icg)
    {
        int ci = (int)(e % g.icg);
        size_t r = e / g.icg;
        int tt = (int)(r % g.t);
        size_t item = r / g.t, at = (item * g.t + tt) * g.ic + c0 + ci;
        float s = acc ? dx[at] : 0.0f;
        for (int j = g.k - 1; j >= 0; j--) {
            int q2 = tt - g.d * j;
            if (q2 < 0 || q2 % g.s || q2 / g.s >= g.ot) continue;
            s += dcol[(item * g.ot + q2 / g.s) * g.kg + (size_t)j * g.icg + ci];
        }
        dx[at] = s;
    }
}

// y[r][o] = b[o] (or 0) before the GEMMs accumulate.
static __global__ void c1g_bias_kernel(float *y, const float *b, size_t n, int oc)
{
    CU_GRID_STRIDE(i, n) y[i] = b ? b[i % oc] : 0.0f;
}

void cu_conv1d_gen_forward(backend *be, float *y, const float *x, const float *w, const float *b, int nb, int t,
                           int ic, int oc, int k, int stride, int dil, int groups)
{
    c1g_geom g = geom_of(t, ic, oc, k, stride, dil, groups);
    if (g.ot == 0 || nb <= 0 || oc <= 0) return;
    int cb = cu_conv_chunk_items((size_t)g.ot * g.kg, nb);
    float *wp = (float *)cu_scratch(be, ((size_t)oc * g.kg + (size_t)cb * g.ot * g.kg) * sizeof(float));
    float *col = wp + (size_t)oc * g.kg;
    cudaStream_t st = cu_stream(be);
    cu_conv_pack(be, wp, w, g.icg, oc, k);
    size_t ny = (size_t)nb * g.ot * oc;
    c1g_bias_kernel<<<cu_blocks(be, ny), CU_THREADS, 0, st>>>(y, b, ny, oc);
    KERNEL_CHECK();
    for (int n0 = 0; n0 < nb; n0 += cb) {
        int c = nb - n0 < cb ? nb - n0 : cb;
        for (int gi = 0; gi < groups; gi++) {
            c1g_im2col_kernel<<<cu_blocks(be, (size_t)c * g.ot * g.kg), CU_THREADS, 0, st>>>(
                col, x + (size_t)n0 * t * ic, g, gi * g.icg, c);
            KERNEL_CHECK();
            cu_gemm_rm(be, 0, 1, c * g.ot, g.ocg, (int)g.kg, 1.0f, col, (int)g.kg, wp + (size_t)gi * g.ocg * g.kg,
                       (int)g.kg, 1.0f, y + (size_t)n0 * g.ot * oc + (size_t)gi * g.ocg, oc);
        }
    }
}

void cu_conv1d_gen_backward(backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                            const float *w, int nb, int t, int ic, int oc, int k, int stride, int dil, int groups,
                            int acc)
{
    c1g_geom g = geom_of(t, ic, oc, k, stride, dil, groups);
    cudaStream_t st = cu_stream(be);
    if (g.ot == 0 || nb <= 0) {
        if (dx && !acc && nb > 0) CUDA_CHECK(cudaMemsetAsync(dx, 0, (size_t)nb * t * ic * sizeof(float), st));
        return;
    }
    int cb = cu_conv_chunk_items((size_t)g.ot * g.kg, nb);
    size_t nw = (size_t)oc * g.kg;
    float *wp = (float *)cu_scratch(be, (2 * nw + (size_t)cb * g.ot * g.kg) * sizeof(float));
    float *dwp = wp + nw, *col = dwp + nw;
    cu_conv_pack(be, wp, w, g.icg, oc, k);
    for (int n0 = 0; n0 < nb; n0 += cb) {
        int c = nb - n0 < cb ? nb - n0 : cb, rows = c * g.ot;
        const float *gc = dy + (size_t)n0 * g.ot * oc;
        if (db) cu_colsum_add(be, db, gc, rows, oc);
        for (int gi = 0; gi < groups; gi++) {
            const float *gg = gc + (size_t)gi * g.ocg;
            if (dw) { // dwp_g (ocg x kg) = G^T col, summed over the chunks
                c1g_im2col_kernel<<<cu_blocks(be, (size_t)rows * g.kg), CU_THREADS, 0, st>>>(
                    col, x + (size_t)n0 * t * ic, g, gi * g.icg, c);
                KERNEL_CHECK();
                cu_gemm_rm(be, 1, 0, g.ocg, (int)g.kg, rows, 1.0f, gg, oc, col, (int)g.kg, n0 ? 1.0f : 0.0f,
                           dwp + (size_t)gi * g.ocg * g.kg, (int)g.kg);
            }
            if (dx) {
                cu_gemm_rm(be, 0, 0, rows, (int)g.kg, g.ocg, 1.0f, gg, oc, wp + (size_t)gi * g.ocg * g.kg, (int)g.kg,
                           0.0f, col, (int)g.kg);
                c1g_col2im_kernel<<<cu_blocks(be, (size_t)c * t * g.icg), CU_THREADS, 0, st>>>(
                    dx + (size_t)n0 * t * ic, col, g, gi * g.icg, c, acc);
                KERNEL_CHECK();
            }
        }
    }
    if (dw) cu_conv_unpack_add(be, dw, dwp, g.icg, oc, k);
}
