// The Conformer's depthwise Conv1d over time, channels last (core/compute/ops_conformer_decl.h):
// x (nb, t, c), w (c, 1, k), k odd, padding (k - 1) / 2. Everything is per-element ownership in the
// CPU's order (core/compute/ops_conv1d_impl.h), so every result has the CPU's bits (a float multiply
// and add are one IEEE operation each; -fmad=false fuses nothing):
//  - y and dx: one thread per element, starting from the bias (or 0) and adding the taps j in
//    ascending order;
//  - dw (c, k) and db (c): one thread per weight (channel, tap) and per bias, adding its terms over
//    the nb * t rows in row order onto the old value, as the CPU's loop does. No atomics.
#include "cuda/cuda_common.cuh"

static __global__ void dwconv1d_forward_kernel(float *y, const float *x, const float *w, const float *b,
                                               size_t total, int t, int c, int k)
{
    const int pad = (k - 1) / 2;
    CU_GRID_STRIDE(o, total)
    {
        size_t row = o / c;
        int ch = (int)(o % c), i = (int)(row % t);
        const float *xb = x + (row - i) * c + ch; // channel ch of the utterance's first frame
        float acc = b ? b[ch] : 0.0f;
        for (int j = 0; j < k; j++) {
            int src = i + j - pad;
            if (src < 0 || src >= t) continue;
            acc += w[(size_t)ch * k + j] * xb[(size_t)src * c];
        }
        y[o] = acc;
    }
}

static __global__ void dwconv1d_dx_kernel(float *dx, const float *dy, const float *w, size_t total, int t, int c,
                                          int k)
{
    const int pad = (k - 1) / 2;
    CU_GRID_STRIDE(o, total)
    {
        size_t row = o / c;
        int ch = (int)(o % c), i = (int)(row % t);
        const float *gb = dy + (row - i) * c + ch;
        float acc = 0.0f;
        for (int j = 0; j < k; j++) {
            int src = i - j + pad;
            if (src < 0 || src >= t) continue;
            acc += w[(size_t)ch * k + j] * gb[(size_t)src * c];
        }
        dx[o] = acc;
    }
}

// Thread o < c * k owns dw[ch][j] (o = j * c + ch: neighbouring threads read neighbouring
// channels); threads o < c also own db[ch] when db is not NULL.
static __global__ void dwconv1d_dwdb_kernel(float *dw, float *db, const float *dy, const float *x, int nb, int t,
                                            int c, int k)
{
    const int pad = (k - 1) / 2;
    size_t total = (size_t)c * k;
    CU_GRID_STRIDE(o, total)
    {
        int ch = (int)(o % c), j = (int)(o / c);
        float aw = dw[(size_t)ch * k + j];
        for (int n = 0; n < nb; n++) {
            const float *gb = dy + (size_t)n * t * c + ch, *xb = x + (size_t)n * t * c + ch;
            for (int i = 0; i < t; i++) {
                int src = i + j - pad;
                if (src < 0 || src >= t) continue;
                aw += gb[(size_t)i * c] * xb[(size_t)src * c];
            }
        }
        dw[(size_t)ch * k + j] = aw;
        if (db && j == 0) {
            float ab = db[ch];
            for (size_t r = 0; r < (size_t)nb * t; r++) ab += dy[r * c + ch];
            db[ch] = ab;
        }
    }
}

void cu_dwconv1d_forward(backend *be, float *y, const float *x, const float *w, const float *b, int nb, int t,
                         int c, int k)
{
    ESP_CHECK(k % 2 == 1);
    if (nb <= 0 || t <= 0 || c <= 0) return;
    size_t total = (size_t)nb * t * c;
    dwconv1d_forward_kernel<<<cu_blocks(be, total), CU_THREADS, 0, cu_stream(be)>>>(y, x, w, b, total, t, c, k);
    KERNEL_CHECK();
}

void cu_dwconv1d_backward(backend *be, float *dx, float *dw, float *db, const float *dy, const float *x,
                          const float *w, int nb, int t, int c, int k)
{
    ESP_CHECK(k % 2 == 1);
    if (nb <= 0 || t <= 0 || c <= 0) return;
    size_t total = (size_t)nb * t * c;
    dwconv1d_dx_kernel<<<cu_blocks(be, total), CU_THREADS, 0, cu_stream(be)>>>(dx, dy, w, total, t, c, k);
    KERNEL_CHECK();
    dwconv1d_dwdb_kernel<<<cu_blocks(be, (size_t)c * k), CU_THREADS, 0, cu_stream(be)>>>(dw, db, dy, x, nb, t, c,
                                                                                        k);
    KERNEL_CHECK();
}
