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

/* ---- on threads: the forward and dx split by rows (item, frame), dw and db by channels (each
 * channel's sums in the order of the loops above). */

typedef struct OPS_FN(dwc_job) {
    real *y, *dw, *db;
    const real *x, *w, *b, *dy;
    int nb, t, c, k;
} OPS_FN(dwc_job);

static void OPS_FN(dwc_forward_part)(void *ctx, size_t lo, size_t hi, int part)
{
    (void)part;
    const OPS_FN(dwc_job) *j = ctx;
    int t = j->t, c = j->c, k = j->k, pad = (k - 1) / 2;
    const real *w = j->w, *b = j->b;
    for (size_t row = lo; row < hi; row++) {
        size_t n = row / (size_t)t;
        int i = (int)(row % (size_t)t);
        real *yr = j->y + row * c;
        for (int ch = 0; ch < c; ch++) yr[ch] = b ? b[ch] : 0;
        for (int jj = 0; jj < k; jj++) {
            int src = i + jj - pad;
            if (src < 0 || src >= t) continue;
            const real *xr = j->x + (n * t + src) * c;
            for (int ch = 0; ch < c; ch++) yr[ch] += w[(size_t)ch * k + jj] * xr[ch];
        }
    }
}

void OPS_FN(dwconv1d_forward_mt)(real *y, const real *x, const real *w, const real *b, int nb, int t, int c,
                                 int k, int threads)
{
    ESP_CHECK(k % 2 == 1);
    OPS_FN(dwc_job) j = {.y = y, .x = x, .w = w, .b = b, .t = t, .c = c, .k = k};
    parallel_parts((size_t)nb * t, 1 + OPS_MT_MIN_ELEMS / ((size_t)c * k + 1), threads, OPS_FN(dwc_forward_part),
                   &j);
}

/* dx of rows lo .. hi - 1. */
static void OPS_FN(dwc_dx_part)(void *ctx, size_t lo, size_t hi, int part)
{
    (void)part;
    const OPS_FN(dwc_job) *j = ctx;
    int t = j->t, c = j->c, k = j->k, pad = (k - 1) / 2;
    const real *w = j->w;
    for (size_t row = lo; row < hi; row++) {
        size_t n = row / (size_t)t;
        int i = (int)(row % (size_t)t);
        real *dxr = j->y + row * c;
        for (int ch = 0; ch < c; ch++) dxr[ch] = 0;
        for (int jj = 0; jj < k; jj++) {
            int src = i - jj + pad;
            if (src < 0 || src >= t) continue;
            const real *g = j->dy + (n * t + src) * c;
            for (int ch = 0; ch < c; ch++) dxr[ch] += w[(size_t)ch * k + jj] * g[ch];
        }
    }
}

/* dw, db of channels lo .. hi - 1 over rows (nb * t of them, in order). */
static void OPS_FN(dwc_dw_part)(void *ctx, size_t lo, size_t hi, int part)
{
    (void)part;
    const OPS_FN(dwc_job) *j = ctx;
    int nb = j->nb, t = j->t, c = j->c, k = j->k, pad = (k - 1) / 2;
    real *dw = j->dw, *db = j->db;
    for (int n = 0; n < nb; n++)
        for (int i = 0; i < t; i++) {
            const real *gr = j->dy + ((size_t)n * t + i) * c;
            if (db)
                for (size_t ch = lo; ch < hi; ch++) db[ch] += gr[ch];
            for (int jj = 0; jj < k; jj++) {
                int src = i + jj - pad;
                if (src < 0 || src >= t) continue;
                const real *xr = j->x + ((size_t)n * t + src) * c;
                for (size_t ch = lo; ch < hi; ch++) dw[ch * k + jj] += gr[ch] * xr[ch];
            }
        }
}

void OPS_FN(dwconv1d_backward_mt)(real *dx, real *dw, real *db, const real *dy, const real *x, const real *w,
                                  int nb, int t, int c, int k, int threads)
{
    ESP_CHECK(k % 2 == 1);
    if (parallel_parts_count((size_t)nb * t * c, OPS_MT_MIN_ELEMS, threads) == 1) {
        OPS_FN(dwconv1d_backward)(dx, dw, db, dy, x, w, nb, t, c, k);
        return;
    }
    OPS_FN(dwc_job) j = {.y = dx, .dw = dw, .db = db, .x = x, .w = w, .dy = dy, .nb = nb, .t = t, .c = c, .k = k};
    parallel_parts((size_t)nb * t, 1, threads, OPS_FN(dwc_dx_part), &j);
    parallel_parts((size_t)c, 16, threads, OPS_FN(dwc_dw_part), &j);
}
