/* Depthwise Conv1d over time, channels last (core/compute/ops_conformer_decl.h), instantiated by
 * core/compute/ops_f32.c and core/compute/ops_f64.c after core/compute/ops_impl.h. Every output
 * element sums its taps in ascending order from the bias, as a per-element GPU kernel would; the
 * innermost loops run over channels, which are contiguous. The weights (c x k, PyTorch's layout)
 * are read and their gradient accumulated through a taps-major copy (k x c), so that those loops
 * read and write contiguous memory and vectorize; the sums per element are the same.
 *
 * On threads: the forward and dx split by rows (item, frame), dw and db by channels (each
 * channel's sums over the rows in order). The serial entry points run the same parts as one. */

typedef struct OPS_FN(dwc_job) {
    real *y, *dwt, *db;
    const real *x, *wt, *b, *dy;
    int t, c, k;
    size_t rows;
} OPS_FN(dwc_job);

OPS_SIMD_CLONES
static void OPS_FN(dwc_forward_part)(void *ctx, size_t lo, size_t hi, int part)
{
    (void)part;
    const OPS_FN(dwc_job) *j = ctx;
    int t = j->t, c = j->c, k = j->k, pad = (k - 1) / 2;
    const real *b = j->b;
    for (size_t row = lo; row < hi; row++) {
        size_t n = row / (size_t)t;
        int i = (int)(row % (size_t)t);
        real *restrict yr = j->y + row * c;
        for (int ch = 0; ch < c; ch++) yr[ch] = b ? b[ch] : 0;
        for (int jj = 0; jj < k; jj++) {
            int src = i + jj - pad;
            if (src < 0 || src >= t) continue;
            const real *xr = j->x + (n * t + src) * c, *wj = j->wt + (size_t)jj * c;
#pragma omp simd
            for (int ch = 0; ch < c; ch++) yr[ch] += wj[ch] * xr[ch];
        }
    }
}

void OPS_FN(dwconv1d_forward_mt)(real *y, const real *x, const real *w, const real *b, int nb, int t, int c,
                                 int k, int threads)
{
    ESP_CHECK(k % 2 == 1);
    real *wt = xmalloc((size_t)c * k * sizeof *wt + 1);
    OPS_FN(swap12)(wt, w, 1, c, k, 1); /* c x k -> k x c */
    OPS_FN(dwc_job) j = {.y = y, .x = x, .wt = wt, .b = b, .t = t, .c = c, .k = k};
    parallel_parts((size_t)nb * t, 1 + OPS_MT_MIN_ELEMS / ((size_t)c * k + 1), threads, OPS_FN(dwc_forward_part),
                   &j);
    free(wt);
}

void OPS_FN(dwconv1d_forward)(real *y, const real *x, const real *w, const real *b, int nb, int t,
                              int c, int k)
{
    OPS_FN(dwconv1d_forward_mt)(y, x, w, b, nb, t, c, k, 1);
}

/* dx[i] = sum_j w[j] dy[i - j + pad] of rows lo .. hi - 1. */
OPS_SIMD_CLONES
static void OPS_FN(dwc_dx_part)(void *ctx, size_t lo, size_t hi, int part)
{
    (void)part;
    const OPS_FN(dwc_job) *j = ctx;
    int t = j->t, c = j->c, k = j->k, pad = (k - 1) / 2;
    for (size_t row = lo; row < hi; row++) {
        size_t n = row / (size_t)t;
        int i = (int)(row % (size_t)t);
        real *restrict dxr = j->y + row * c;
        for (int ch = 0; ch < c; ch++) dxr[ch] = 0;
        for (int jj = 0; jj < k; jj++) {
            int src = i - jj + pad;
            if (src < 0 || src >= t) continue;
            const real *g = j->dy + (n * t + src) * c, *wj = j->wt + (size_t)jj * c;
#pragma omp simd
            for (int ch = 0; ch < c; ch++) dxr[ch] += wj[ch] * g[ch];
        }
    }
}

/* dw[j] += sum_i dy[i] x[i + j - pad], db += sum_i dy[i] of channels lo .. hi - 1, over the rows
 * in order, into a private copy of those channels stored once at the end (as ops_impl.h's column
 * sums: the threads' channels would otherwise share cache lines at the split, written every row). */
OPS_SIMD_CLONES
static void OPS_FN(dwc_dw_part)(void *ctx, size_t lo, size_t hi, int part)
{
    (void)part;
    const OPS_FN(dwc_job) *j = ctx;
    int t = j->t, c = j->c, k = j->k, pad = (k - 1) / 2;
    size_t cn = hi - lo;
    real *acc = xmalloc(((size_t)k + 1) * cn * sizeof *acc), *db = j->db ? acc + (size_t)k * cn : NULL;
    for (int jj = 0; jj < k; jj++) memcpy(acc + (size_t)jj * cn, j->dwt + (size_t)jj * c + lo, cn * sizeof *acc);
    if (db) memcpy(db, j->db + lo, cn * sizeof *db);
    for (size_t row = 0; row < j->rows; row++) {
        size_t n = row / (size_t)t;
        int i = (int)(row % (size_t)t);
        const real *gr = j->dy + row * c + lo;
        if (db)
#pragma omp simd
            for (size_t ch = 0; ch < cn; ch++) db[ch] += gr[ch];
        for (int jj = 0; jj < k; jj++) {
            int src = i + jj - pad;
            if (src < 0 || src >= t) continue;
            const real *xr = j->x + (n * t + src) * c + lo;
            real *restrict dwj = acc + (size_t)jj * cn;
#pragma omp simd
            for (size_t ch = 0; ch < cn; ch++) dwj[ch] += gr[ch] * xr[ch];
        }
    }
    for (int jj = 0; jj < k; jj++) memcpy(j->dwt + (size_t)jj * c + lo, acc + (size_t)jj * cn, cn * sizeof *acc);
    if (db) memcpy(j->db + lo, db, cn * sizeof *db);
    free(acc);
}

void OPS_FN(dwconv1d_backward_mt)(real *dx, real *dw, real *db, const real *dy, const real *x, const real *w,
                                  int nb, int t, int c, int k, int threads)
{
    ESP_CHECK(k % 2 == 1);
    size_t ck = (size_t)c * k;
    real *wt = xmalloc(2 * ck * sizeof *wt + 1), *dwt = wt + ck;
    OPS_FN(swap12)(wt, w, 1, c, k, 1); /* c x k -> k x c */
    OPS_FN(swap12)(dwt, dw, 1, c, k, 1); /* the gradient accumulates onto what dw holds */
    OPS_FN(dwc_job) j = {.y = dx, .dwt = dwt, .db = db, .x = x, .wt = wt, .dy = dy, .t = t, .c = c, .k = k,
                         .rows = (size_t)nb * t};
    parallel_parts(j.rows, 1 + OPS_MT_MIN_ELEMS / (ck + 1), threads, OPS_FN(dwc_dx_part), &j);
    parallel_parts((size_t)c, 16, threads, OPS_FN(dwc_dw_part), &j);
    OPS_FN(swap12)(dw, dwt, 1, k, c, 1);
    free(wt);
}

void OPS_FN(dwconv1d_backward)(real *dx, real *dw, real *db, const real *dy, const real *x,
                               const real *w, int nb, int t, int c, int k)
{
    OPS_FN(dwconv1d_backward_mt)(dx, dw, db, dy, x, w, nb, t, c, k, 1);
}
