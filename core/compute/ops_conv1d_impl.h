/* Depthwise Conv1d over time, channels last (core/compute/ops_conformer_decl.h), instantiated by
 * core/compute/ops_f32.c and core/compute/ops_f64.c after core/compute/ops_impl.h. Every output
 * element sums its taps in ascending order from the bias, as a per-element GPU kernel would; the
 * innermost loops run over channels, which are contiguous. */

void OPS_FN(dwconv1d_forward)(real *y, const real *x, const real *w, const real *b, int nb, int t,
                              int c, int k)
{
    ESP_CHECK(k % 2 == 1);
    int pad = (k - 1) / 2;
    for (int n = 0; n < nb; n++)
        for (int i = 0; i < t; i++) {
            real *yr = y + ((size_t)n * t + i) * c;
            for (int ch = 0; ch < c; ch++) yr[ch] = b ? b[ch] : 0;
            for (int j = 0; j < k; j++) {
                int src = i + j - pad;
                if (src < 0 || src >= t) continue;
                const real *xr = x + ((size_t)n * t + src) * c;
                for (int ch = 0; ch < c; ch++) yr[ch] += w[(size_t)ch * k + j] * xr[ch];
            }
        }
}

void OPS_FN(dwconv1d_backward)(real *dx, real *dw, real *db, const real *dy, const real *x,
                               const real *w, int nb, int t, int c, int k)
{
    /* dx[i] = sum_j w[j] dy[i - j + pad];  dw[j] += sum_i dy[i] x[i + j - pad];  db += sum_i dy[i]. */
    ESP_CHECK(k % 2 == 1);
    int pad = (k - 1) / 2;
    for (int n = 0; n < nb; n++)
        for (int i = 0; i < t; i++) {
            const real *gr = dy + ((size_t)n * t + i) * c;
            real *dxr = dx + ((size_t)n * t + i) * c;
            for (int ch = 0; ch < c; ch++) dxr[ch] = 0;
            for (int j = 0; j < k; j++) {
                int src = i - j + pad;
                if (src < 0 || src >= t) continue;
                const real *g = dy + ((size_t)n * t + src) * c;
                for (int ch = 0; ch < c; ch++) dxr[ch] += w[(size_t)ch * k + j] * g[ch];
            }
            if (db)
                for (int ch = 0; ch < c; ch++) db[ch] += gr[ch];
            for (int j = 0; j < k; j++) {
                int src = i + j - pad;
                if (src < 0 || src >= t) continue;
                const real *xr = x + ((size_t)n * t + src) * c;
                for (int ch = 0; ch < c; ch++) dw[(size_t)ch * k + j] += gr[ch] * xr[ch];
            }
        }
}
