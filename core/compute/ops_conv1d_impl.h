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

/* Register blocks: DWC_ROWS rows x DWC_LANES channels of an output summed in registers over the
 * taps (each tap's weights loaded once for the rows), DWC_TAPS taps' weight gradients over the rows.
 * As GCC vectors, the sums stay in registers where arrays would not; each element's arithmetic
 * (which sums, in which order) is the row loops', so the bits are theirs. */
enum { DWC_LANES = 16, DWC_ROWS = 4, DWC_TAPS = 8 };
typedef real OPS_FN(dwc_vec) __attribute__((vector_size(DWC_LANES * sizeof(real))));

/* A strip's sum before its taps: the bias's DWC_LANES values, or zeros. */
OPS_CLONE_INLINE void OPS_FN(dwc_start)(OPS_FN(dwc_vec) *a, const real *b)
{
    if (b)
        memcpy(a, b, sizeof *a);
    else
        memset(a, 0, sizeof *a);
}

/* y[r] (rows ys apart) = (b or 0) + sum_jj w[jj] src[r + step jj] for r < DWC_ROWS over one strip
 * of DWC_LANES channels, taps in ascending order; source rows ss apart, weight rows ws apart. */
OPS_CLONE_INLINE void OPS_FN(dwc_block)(real *restrict y, size_t ys, const real *src, size_t ss, const real *w,
                                        size_t ws, const real *b, int k, int step)
{
    OPS_FN(dwc_vec) a0, a1, a2, a3, wv, x0, x1, x2, x3;
    OPS_FN(dwc_start)(&a0, b);
    a1 = a0, a2 = a0, a3 = a0;
    for (int jj = 0; jj < k; jj++) {
        const real *sj = src + (ptrdiff_t)step * jj * (ptrdiff_t)ss;
        memcpy(&wv, w + (size_t)jj * ws, sizeof wv);
        memcpy(&x0, sj, sizeof x0), memcpy(&x1, sj + ss, sizeof x1);
        memcpy(&x2, sj + 2 * ss, sizeof x2), memcpy(&x3, sj + 3 * ss, sizeof x3);
        a0 += wv * x0, a1 += wv * x1, a2 += wv * x2, a3 += wv * x3;
    }
    memcpy(y, &a0, sizeof a0), memcpy(y + ys, &a1, sizeof a1);
    memcpy(y + 2 * ys, &a2, sizeof a2), memcpy(y + 3 * ys, &a3, sizeof a3);
}

/* The taps j0 .. j1 - 1 of frame i whose source frame i + step (jj - pad) lies inside 0 .. t - 1. */
static inline void OPS_FN(dwc_taps_inside)(int i, int t, int k, int step, int *j0, int *j1)
{
    int pad = (k - 1) / 2, a = 0, e = k;
    while (a < k && (i + step * (a - pad) < 0 || i + step * (a - pad) >= t)) a++;
    while (e > a && (i + step * (e - 1 - pad) < 0 || i + step * (e - 1 - pad) >= t)) e--;
    *j0 = a, *j1 = e;
}

/* Rows lo .. hi - 1 of y = the depthwise conv of in (forward: x, step 1; dx: dy with the taps
 * mirrored, step -1, no bias). Per item and strip of DWC_LANES channels, the strip's source rows
 * and weights are copied side by side first: at 512 channels their rows lie 2 KB apart and a
 * block's 4 + 30 of them fell into two sets of L1 (1.9 ms against 1.2 at 528 channels). Then
 * DWC_ROWS rows at a time where all their taps lie inside the item, one row at a time at its edges;
 * the channels past the last whole strip with the plain loops. */
OPS_CLONE_INLINE void OPS_FN(dwc_rows)(real *y, const real *in, const real *wt, const real *b, int t, int k,
                                       int step, size_t c, size_t lo, size_t hi)
{
    int pad = (k - 1) / 2;
    size_t strips = c / DWC_LANES * DWC_LANES, L = DWC_LANES;
    real *xb = xmalloc(((size_t)t + (size_t)k) * L * sizeof *xb), *wb = xb + (size_t)t * L;
    for (size_t row = lo; row < hi;) {
        size_t n = row / (size_t)t, end = (n + 1) * (size_t)t < hi ? (n + 1) * (size_t)t : hi;
        int i0 = (int)(row - n * (size_t)t), i1 = (int)(end - n * (size_t)t);
        int f0 = i0 - pad > 0 ? i0 - pad : 0, f1 = i1 + pad < t ? i1 + pad : t; /* the source frames */
        const real *item = in + n * t * c;
        real *yi = y + n * t * c;
        for (size_t ch = 0; ch < strips; ch += L) {
            for (int f = f0; f < f1; f++) memcpy(xb + (size_t)(f - f0) * L, item + (size_t)f * c + ch, L * sizeof *xb);
            for (int jj = 0; jj < k; jj++) memcpy(wb + (size_t)jj * L, wt + (size_t)jj * c + ch, L * sizeof *wb);
            const real *bs = b ? b + ch : NULL;
            for (int i = i0; i < i1;) {
                if (i + DWC_ROWS <= i1 && i - pad >= 0 && i + DWC_ROWS - 1 + pad < t) {
                    OPS_FN(dwc_block)(yi + (size_t)i * c + ch, c, xb + (size_t)(i - step * pad - f0) * L, L, wb, L, bs,
                                      k, step);
                    i += DWC_ROWS;
                    continue;
                }
                int j0, j1;
                OPS_FN(dwc_taps_inside)(i, t, k, step, &j0, &j1);
                OPS_FN(dwc_vec) acc, wv, xv;
                OPS_FN(dwc_start)(&acc, bs);
                for (int jj = j0; jj < j1; jj++) {
                    memcpy(&wv, wb + (size_t)jj * L, sizeof wv);
                    memcpy(&xv, xb + (size_t)(i + step * (jj - pad) - f0) * L, sizeof xv);
                    acc += wv * xv;
                }
                memcpy(yi + (size_t)i * c + ch, &acc, sizeof acc);
                i++;
            }
        }
        for (int i = i0; i < i1 && strips < c; i++) { /* the channels past the last whole strip */
            real *yr = yi + (size_t)i * c;
            int j0, j1;
            OPS_FN(dwc_taps_inside)(i, t, k, step, &j0, &j1);
            for (size_t e = strips; e < c; e++) yr[e] = b ? b[e] : 0;
            for (int jj = j0; jj < j1; jj++) {
                const real *xr = item + (size_t)(i + step * (jj - pad)) * c, *wj = wt + (size_t)jj * c;
#pragma omp simd
                for (size_t e = strips; e < c; e++) yr[e] += wj[e] * xr[e];
            }
        }
        row = end;
    }
    free(xb);
}

OPS_SIMD_CLONES
static void OPS_FN(dwc_forward_part)(void *ctx, size_t lo, size_t hi, int part)
{
    (void)part;
    const OPS_FN(dwc_job) *j = ctx;
    OPS_FN(dwc_rows)(j->y, j->x, j->wt, j->b, j->t, j->k, 1, (size_t)j->c, lo, hi);
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
    OPS_FN(dwc_rows)(j->y, j->dy, j->wt, NULL, j->t, j->k, -1, (size_t)j->c, lo, hi);
}

/* acc[g] (DWC_TAPS vectors of DWC_LANES channels) += sum over the rows in order of dy[row] x[row +
 * taps[g] - pad], the rows whose source lies inside their item; taps[g] < 0: none (a group's unused
 * places). Rows of dy and x c apart. */
OPS_CLONE_INLINE void OPS_FN(dwc_dw_block)(real *restrict acc, const real *dy, const real *x, const int *taps,
                                           size_t rows, int t, int k, size_t c)
{
    int pad = (k - 1) / 2, first[DWC_TAPS], last[DWC_TAPS]; /* frames i whose source i + tap - pad is inside */
    for (int g = 0; g < DWC_TAPS; g++) {
        first[g] = taps[g] < 0 ? t : pad - taps[g] > 0 ? pad - taps[g] : 0;
        last[g] = taps[g] < 0 ? -1 : t - 1 + pad - taps[g] < t - 1 ? t - 1 + pad - taps[g] : t - 1;
    }
    OPS_FN(dwc_vec) v[DWC_TAPS], gv, xv;
    memcpy(v, acc, sizeof v);
    OPS_FN(dwc_vec) a0 = v[0], a1 = v[1], a2 = v[2], a3 = v[3], a4 = v[4], a5 = v[5], a6 = v[6], a7 = v[7];
    for (size_t row = 0; row < rows; row++) {
        int i = (int)(row % (size_t)t);
        const real *xr = x + row * c; /* tap g reads row + taps[g] - pad, inside the item */
        memcpy(&gv, dy + row * c, sizeof gv);
#define DWC_TAP(g, a)                                                                                            \
    if (i >= first[g] && i <= last[g]) {                                                                           \
        memcpy(&xv, xr + (ptrdiff_t)(taps[g] - pad) * (ptrdiff_t)c, sizeof xv);                                    \
        a += gv * xv;                                                                                              \
    }
        DWC_TAP(0, a0) DWC_TAP(1, a1) DWC_TAP(2, a2) DWC_TAP(3, a3) DWC_TAP(4, a4) DWC_TAP(5, a5) DWC_TAP(6, a6)
        DWC_TAP(7, a7)
#undef DWC_TAP
    }
    v[0] = a0, v[1] = a1, v[2] = a2, v[3] = a3, v[4] = a4, v[5] = a5, v[6] = a6, v[7] = a7;
    memcpy(acc, v, sizeof v);
}

/* dw[j] += sum_i dy[i] x[i + j - pad], db += sum_i dy[i] of channels lo .. hi - 1, over the rows
 * in order, into a private copy of those channels stored once at the end (as ops_impl.h's column
 * sums: the threads' channels would otherwise share cache lines at the split, written every row).
 * Whole strips of DWC_LANES channels keep DWC_TAPS taps' sums in registers over all the rows. */
OPS_SIMD_CLONES
static void OPS_FN(dwc_dw_part)(void *ctx, size_t lo, size_t hi, int part)
{
    (void)part;
    const OPS_FN(dwc_job) *j = ctx;
    int t = j->t, c = j->c, k = j->k, pad = (k - 1) / 2;
    size_t cn = hi - lo, strips = cn / DWC_LANES * DWC_LANES;
    real *acc = xmalloc(((size_t)k + 1) * cn * sizeof *acc), *db = j->db ? acc + (size_t)k * cn : NULL;
    for (int jj = 0; jj < k; jj++) memcpy(acc + (size_t)jj * cn, j->dwt + (size_t)jj * c + lo, cn * sizeof *acc);
    if (db) memcpy(db, j->db + lo, cn * sizeof *db);
    /* per strip, its columns of dy and x side by side (rows 2 KB apart at 512 channels share L1
     * sets), then DWC_TAPS taps at a time over all the rows */
    real blk[DWC_TAPS * DWC_LANES], *gs = strips ? xmalloc(2 * j->rows * DWC_LANES * sizeof *gs) : NULL;
    real *xs = gs ? gs + j->rows * DWC_LANES : NULL;
    for (size_t s = 0; s < strips; s += DWC_LANES) {
        for (size_t row = 0; row < j->rows; row++) {
            memcpy(gs + row * DWC_LANES, j->dy + row * c + lo + s, DWC_LANES * sizeof *gs);
            memcpy(xs + row * DWC_LANES, j->x + row * c + lo + s, DWC_LANES * sizeof *xs);
        }
        for (int g0 = 0; g0 < k; g0 += DWC_TAPS) {
            int taps[DWC_TAPS];
            for (int g = 0; g < DWC_TAPS; g++) {
                taps[g] = g0 + g < k ? g0 + g : -1;
                if (taps[g] >= 0) memcpy(blk + g * DWC_LANES, acc + (size_t)taps[g] * cn + s, sizeof(real) * DWC_LANES);
            }
            OPS_FN(dwc_dw_block)(blk, gs, xs, taps, j->rows, t, k, DWC_LANES);
            for (int g = 0; g < DWC_TAPS && taps[g] >= 0; g++)
                memcpy(acc + (size_t)taps[g] * cn + s, blk + g * DWC_LANES, sizeof(real) * DWC_LANES);
        }
    }
    free(gs);
    for (size_t row = 0; row < j->rows; row++) {
        size_t n = row / (size_t)t;
        int i = (int)(row % (size_t)t);
        const real *gr = j->dy + row * c + lo;
        if (db)
#pragma omp simd
            for (size_t ch = 0; ch < cn; ch++) db[ch] += gr[ch];
        for (int jj = 0; jj < k && strips < cn; jj++) { /* the channels past the last whole strip */
            int src = i + jj - pad;
            if (src < 0 || src >= t) continue;
            const real *xr = j->x + (n * t + src) * c + lo;
            real *restrict dwj = acc + (size_t)jj * cn;
#pragma omp simd
            for (size_t ch = strips; ch < cn; ch++) dwj[ch] += gr[ch] * xr[ch];
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
