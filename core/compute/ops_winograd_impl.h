/* The Winograd form of conv2d 3x3 / stride 2, channels last, for more than one input channel (the
 * tiling and why it saves work: core/compute/conv_winograd.h). Included by core/compute/ops_impl.h, which defines
 * `real`, OPS_FN and GEMM; everything here is static.
 *
 * Per tile of mh x mw outputs, with the 1-D transforms BT (points from samples), G (points from
 * taps) and AT (outputs from points) along h and w:
 *   V[p] = sum_{a,b} BTh[ph][a] BTw[pw][b] x[a][b]          (a channel vector per point p = (ph, pw))
 *   U[p] = sum_{kh,kw} Gh[ph][kh] Gw[pw][kw] w[:, :, kh, kw] (ic x oc)
 *   y[i][j] = bias + sum_p ATh[i][ph] ATw[j][pw] (V[p] U[p])
 * The backward runs the transposes: dM[p] = sum_{i,j} ATh[i][ph] ATw[j][pw] dy[i][j];
 * dU[p] += V[p]^T dM[p] and dw = the G-transpose of dU; dx += the BT-transpose of dM[p] U[p]^T.
 * The V[p] U[p] products of all tiles of a chunk are GEMMs; points whose U is the same (every odd
 * point of a dimension uses the middle tap) share one GEMM with their rows stacked.
 * Output rows whose 3 input rows are all zero (an utterance's padded frames) are act(bias)
 * exactly, as a direct convolution gives them: through the transforms they would carry rounding
 * residue of the tile's other rows, and a LayerNorm (eps 1e-12) of an all-zero embedding row, as
 * a Conformer's at initialisation (zero biases), turns that residue into values of order 1. */

/* F(m, 2) on the even samples d[j] = x[2j], j <= m, with the taps (w0, w2):
 *   y = AT ((G (w0, w2)) * (BT d)), points 0, 1, -1 (, 2 (, -2)), infinity.
 * Rows of BT are scaled to small integers and G carries the inverse scale, so the fractions meet
 * only the kernel (derived by Toom-Cook; the conv2d tests check the exactness). */
static const double wino_f_bt[4][WINO_MAX_M + 1][WINO_MAX_M + 1] = {
    {{1, -1, 0}, {0, 1, 0}, {0, -1, 1}},
    {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, -1, 0, 1}},
    {{2, -1, -2, 1, 0}, {0, 2, 1, -1, 0}, {0, -2, 3, -1, 0}, {0, -1, 0, 1, 0}, {0, 2, -1, -2, 1}},
    {{4, 0, -5, 0, 1, 0},
     {0, 4, 4, -1, -1, 0},
     {0, -4, 4, 1, -1, 0},
     {0, -2, -1, 2, 1, 0},
     {0, 2, -1, -2, 1, 0},
     {0, 4, 0, -5, 0, 1}},
};
static const double wino_f_g[4][WINO_MAX_M + 1][2] = {
    {{1, 0}, {1, 1}, {0, 1}},
    {{1, 0}, {0.5, 0.5}, {0.5, -0.5}, {0, 1}},
    {{0.5, 0}, {0.5, 0.5}, {1.0 / 6, -1.0 / 6}, {1.0 / 6, 1.0 / 3}, {0, 1}},
    {{0.25, 0}, {1.0 / 6, 1.0 / 6}, {1.0 / 6, -1.0 / 6}, {1.0 / 24, 1.0 / 12}, {1.0 / 24, -1.0 / 12}, {0, 1}},
};
static const double wino_f_at[4][WINO_MAX_M][WINO_MAX_M + 1] = {
    {{1, 1, 0}, {0, 1, 1}},
    {{1, 1, 1, 0}, {0, 1, -1, 0}, {0, 1, 1, 1}},
    {{1, 1, 1, 1, 0}, {0, 1, -1, 2, 0}, {0, 1, 1, 4, 0}, {0, 1, -1, 8, 1}},
    {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 0}, {0, 1, 1, 16, 16, 1}},
};

/* The 1-D transform of the strided 3-tap correlation over the 2m + 1 samples of a tile: points
 * 0..m are F(m, 2)'s on the even samples; point m + 1 + i takes the odd sample 2i + 1 for output i
 * (the middle tap). */
typedef struct wino1d {
    int m, a;
    real bt[WINO_MAX_A][WINO_MAX_A]; /* a x a: points from samples */
    double g[WINO_MAX_A][3];         /* a x 3: points from taps */
    real at[WINO_MAX_M][WINO_MAX_A]; /* m x a: outputs from points */
    int cls[WINO_MAX_A];             /* kernel class: p for an even point, m + 1 for the odd ones */
} wino1d;

static void wino1d_make(wino1d *t, int m)
{
    ESP_CHECK(m >= 2 && m <= WINO_MAX_M);
    memset(t, 0, sizeof *t);
    t->m = m, t->a = 2 * m + 1;
    int f = m - 2;
    for (int p = 0; p <= m; p++) {
        for (int j = 0; j <= m; j++) t->bt[p][2 * j] = (real)wino_f_bt[f][p][j];
        t->g[p][0] = wino_f_g[f][p][0], t->g[p][2] = wino_f_g[f][p][1];
        for (int i = 0; i < m; i++) t->at[i][p] = (real)wino_f_at[f][i][p];
        t->cls[p] = p;
    }
    for (int i = 0; i < m; i++) {
        int p = m + 1 + i;
        t->bt[p][2 * i + 1] = 1, t->g[p][1] = 1, t->at[i][p] = 1, t->cls[p] = m + 1;
    }
}

/* A sparse row of a transform matrix: the non-zero coefficients and the indices they multiply. */
typedef struct wsparse {
    int n;
    int idx[WINO_MAX_A];
    real val[WINO_MAX_A];
} wsparse;

/* rows of `nr` x `nc` matrix m (row stride `ld`), or its columns when `cols` is set. */
static void wsparse_make(wsparse *out, const real *m, int ld, int nr, int nc, int cols)
{
    int outer = cols ? nc : nr, inner = cols ? nr : nc;
    for (int r = 0; r < outer; r++) {
        out[r].n = 0;
        for (int c = 0; c < inner; c++) {
            real v = cols ? m[(size_t)c * ld + r] : m[(size_t)r * ld + c];
            if (v != 0) out[r].idx[out[r].n] = c, out[r].val[out[r].n++] = v;
        }
    }
}

/* A pass's tables: both 1-D transforms, their sparse rows and columns, and where each 2-D point is
 * stored. Points of one kernel class k = ch * (mw + 2) + cw occupy the adjacent slots
 * group_start[k] .. + group_n[k], so their (tiles x channels) matrices stack into one GEMM
 * operand. */
typedef struct wino {
    wino_plan plan;
    wino1d h, w;
    wsparse bt_h[WINO_MAX_A], bt_w[WINO_MAX_A];   /* rows: points from samples */
    wsparse btc_h[WINO_MAX_A], btc_w[WINO_MAX_A]; /* columns: samples from points (adjoint) */
    wsparse at_h[WINO_MAX_M], at_w[WINO_MAX_M];   /* rows: outputs from points */
    wsparse atc_h[WINO_MAX_A], atc_w[WINO_MAX_A]; /* columns: points from outputs (adjoint) */
    int slot[WINO_MAX_A][WINO_MAX_A];
    int group_start[WINO_MAX_CLASSES], group_n[WINO_MAX_CLASSES];
    real ktap[WINO_MAX_CLASSES][9]; /* class k's kernel: sum_q ktap[k][q] w[:, :, q] */
} wino;

static void wino_make(wino *W, int oh, int ow)
{
    W->plan = wino_plan_make(oh, ow);
    wino1d_make(&W->h, W->plan.mh);
    wino1d_make(&W->w, W->plan.mw);
    const wino1d *d[2] = {&W->h, &W->w};
    for (int i = 0; i < 2; i++) {
        wsparse_make(i ? W->bt_w : W->bt_h, &d[i]->bt[0][0], WINO_MAX_A, d[i]->a, d[i]->a, 0);
        wsparse_make(i ? W->btc_w : W->btc_h, &d[i]->bt[0][0], WINO_MAX_A, d[i]->a, d[i]->a, 1);
        wsparse_make(i ? W->at_w : W->at_h, &d[i]->at[0][0], WINO_MAX_A, d[i]->m, d[i]->a, 0);
        wsparse_make(i ? W->atc_w : W->atc_h, &d[i]->at[0][0], WINO_MAX_A, d[i]->m, d[i]->a, 1);
    }
    int s = 0, ncw = W->plan.mw + 2;
    for (int ch = 0; ch < W->plan.mh + 2; ch++)
        for (int cw = 0; cw < ncw; cw++) {
            int k = ch * ncw + cw;
            W->group_start[k] = s;
            for (int ph = 0; ph < W->h.a; ph++)
                for (int pw = 0; pw < W->w.a; pw++) {
                    if (W->h.cls[ph] != ch || W->w.cls[pw] != cw) continue;
                    if (s == W->group_start[k]) /* the class's first point gives its G rows */
                        for (int q = 0; q < 9; q++) W->ktap[k][q] = (real)(W->h.g[ph][q / 3] * W->w.g[pw][q % 3]);
                    W->slot[ph][pw] = s++;
                }
            W->group_n[k] = s - W->group_start[k];
        }
    ESP_CHECK(s == W->h.a * W->w.a);
}

/* ---- channel-vector helpers */

enum { WVEC_TERMS = 8 }; /* the most terms a transform combines: 6 coefficients of F(5, 2) and the odd
                              point's (+ the sum so far) */

/* d[i] = sum_e c[e] * s[e][i] for i < n, summed left to right and stored once, so the transformed
 * tiles cost one write each. d may be one of the sources (then it is read before it is written at
 * each i: `omp simd` vectorizes that). */
OPS_SIMD_CLONES /* one of the step's hottest passes */
static void wvec_combp(real *d, int k, const real *const *s, const real *c, size_t n)
{
    ESP_CHECK(k >= 1 && k <= WVEC_TERMS);
    const real *s0 = s[0], *s1 = s[k > 1], *s2 = s[k > 2 ? 2 : 0], *s3 = s[k > 3 ? 3 : 0], *s4 = s[k > 4 ? 4 : 0],
               *s5 = s[k > 5 ? 5 : 0], *s6 = s[k > 6 ? 6 : 0], *s7 = s[k > 7 ? 7 : 0];
    real c0 = c[0], c1 = c[k > 1], c2 = c[k > 2 ? 2 : 0], c3 = c[k > 3 ? 3 : 0], c4 = c[k > 4 ? 4 : 0],
         c5 = c[k > 5 ? 5 : 0], c6 = c[k > 6 ? 6 : 0], c7 = c[k > 7 ? 7 : 0];
    switch (k) {
    case 1:
#pragma omp simd
        for (size_t i = 0; i < n; i++) d[i] = c0 * s0[i];
        break;
    case 2:
#pragma omp simd
        for (size_t i = 0; i < n; i++) d[i] = c0 * s0[i] + c1 * s1[i];
        break;
    case 3:
#pragma omp simd
        for (size_t i = 0; i < n; i++) d[i] = c0 * s0[i] + c1 * s1[i] + c2 * s2[i];
        break;
    case 4:
#pragma omp simd
        for (size_t i = 0; i < n; i++) d[i] = c0 * s0[i] + c1 * s1[i] + c2 * s2[i] + c3 * s3[i];
        break;
    case 5:
#pragma omp simd
        for (size_t i = 0; i < n; i++) d[i] = c0 * s0[i] + c1 * s1[i] + c2 * s2[i] + c3 * s3[i] + c4 * s4[i];
        break;
    case 6:
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            d[i] = c0 * s0[i] + c1 * s1[i] + c2 * s2[i] + c3 * s3[i] + c4 * s4[i] + c5 * s5[i];
        break;
    case 7:
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            d[i] = c0 * s0[i] + c1 * s1[i] + c2 * s2[i] + c3 * s3[i] + c4 * s4[i] + c5 * s5[i] + c6 * s6[i];
        break;
    default:
#pragma omp simd
        for (size_t i = 0; i < n; i++)
            d[i] = c0 * s0[i] + c1 * s1[i] + c2 * s2[i] + c3 * s3[i] + c4 * s4[i] + c5 * s5[i] + c6 * s6[i] +
                   c7 * s7[i];
        break;
    }
}

/* A sparse row as sources for wvec_combp: base + idx[e] * stride, terms with idx >= valid dropped
 * (samples past the input's edge are zero); `prev`, when not NULL, comes first with coefficient 1
 * (d = prev + ...). Returns the number of terms. */
OPS_CLONE_INLINE int wvec_terms(const real **s, real *c, const real *prev, const wsparse *r, int valid,
                                const real *base, size_t stride)
{
    int k = 0;
    if (prev) s[k] = prev, c[k++] = 1;
    for (int e = 0; e < r->n && r->idx[e] < valid; e++) {
        ESP_CHECK(k < WVEC_TERMS);
        s[k] = base + (size_t)r->idx[e] * stride, c[k++] = r->val[e];
    }
    return k;
}

/* d (+)= sum_e val[e] * (base + idx[e] * stride) over n channels (acc: d adds to itself). */
OPS_CLONE_INLINE void wvec_comb(real *d, int acc, const wsparse *r, int valid, const real *base, size_t stride,
                                size_t n)
{
    const real *s[WVEC_TERMS];
    real c[WVEC_TERMS];
    int k = wvec_terms(s, c, acc ? d : NULL, r, valid, base, stride);
    if (k == 0)
        memset(d, 0, n * sizeof(real));
    else
        wvec_combp(d, k, s, c, n);
}

/* d = sum into a cached vector, then stored around the caches: the transformed tiles are far larger
 * than the caches and are read back only by the GEMM, so their lines need not be fetched first. */
OPS_CLONE_INLINE void wvec_comb_stream(real *d, const wsparse *r, const real *base, size_t stride, size_t n, real *tmp)
{
#if defined(__SSE2__)
    if (sizeof(real) == sizeof(float) && n % 4 == 0 && ((uintptr_t)d & 15) == 0) {
        wvec_comb(tmp, 0, r, WINO_MAX_A, base, stride, n);
        for (size_t i = 0; i < n; i += 4) _mm_stream_ps((float *)d + i, _mm_loadu_ps((const float *)tmp + i));
        return;
    }
#endif
    (void)tmp;
    wvec_comb(d, 0, r, WINO_MAX_A, base, stride, n);
}

/* Streamed stores are weakly ordered: fence them before other threads (the GEMM's) read them. */
static inline void wvec_stream_done(void)
{
#if defined(__SSE2__)
    _mm_sfence();
#endif
}

OPS_CLONE_INLINE void wvec_acc(real *restrict d, const real *restrict s, real c, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) d[i] += c * s[i];
}

/* ---- kernels */

/* The passes' loops run on the pool (core/base/parallel.h), split where every output element is
 * computed by the same arithmetic whatever the split: over kernel classes, taps, output channels,
 * bands of tiles or batch items. One job type carries every pass's arguments. */
typedef struct wino_job {
    const wino *W;
    real *out, *db, *tile;
    const real *in, *in2, *bias;
    const int *zero_from; /* forward outputs: per item, the first input row of its all-zero tail */
    size_t tile_n;
    int n0, cnt, h, wd, oh, ow, ic, oc, relu;
    int odd;        /* the input gradient's transform: the odd bands (else the even ones) */
    int acc;        /* the input gradient adds into dx (else stores where no band has written) */
    int transposed; /* the taps: as (oc x ic) matrices */
} wino_job;

/* wt[q][c][o] = w[o][c][q]: the taps as (ic x oc) matrices, so a class's kernel is a sum of whole
 * matrices; transposed (the input gradient's products take U_k^T), wt[q][o][c]. Output channels
 * lo .. hi - 1. */
static void wino_taps_part(void *ctx, size_t lo, size_t hi, int part)
{
    (void)part;
    const wino_job *j = ctx;
    real *restrict wt = j->out;
    const real *restrict w = j->in;
    int ic = j->ic, oc = j->oc;
    size_t co = (size_t)ic * oc;
    for (int o = (int)lo; o < (int)hi; o++)
        for (int c = 0; c < ic; c++)
            for (int q = 0; q < 9; q++) {
                size_t at = j->transposed ? (size_t)o * ic + c : (size_t)c * oc + o;
                wt[q * co + at] = w[((size_t)o * ic + c) * 9 + q];
            }
}

static void wino_taps(real *wt, const real *w, int ic, int oc, int transposed, int threads)
{
    wino_job j = {.out = wt, .in = w, .ic = ic, .oc = oc, .transposed = transposed};
    parallel_parts((size_t)oc, 16, threads, wino_taps_part, &j);
}

/* u[k] (ic x oc) = sum_q ktap[k][q] wt[q], classes lo .. hi - 1. */
static void wino_kernels_part(void *ctx, size_t lo, size_t hi, int part)
{
    (void)part;
    const wino_job *j = ctx;
    size_t co = (size_t)j->ic * j->oc;
    for (size_t k = lo; k < hi; k++) {
        wsparse r;
        wsparse_make(&r, j->W->ktap[k], 9, 1, 9, 0);
        wvec_comb(j->out + k * co, 0, &r, 9, j->in, co, co);
    }
}

static void wino_kernels(real *u, const real *wt, int ic, int oc, const wino *W, int threads)
{
    wino_job j = {.W = W, .out = u, .in = wt, .ic = ic, .oc = oc};
    parallel_parts((size_t)W->plan.classes, 1, threads, wino_kernels_part, &j);
}

/* wt[q] = sum_k ktap[k][q] du[k] for taps lo .. hi - 1. */
static void wino_kgrad_taps_part(void *ctx, size_t lo, size_t hi, int part)
{
    (void)part;
    const wino_job *j = ctx;
    const wino *W = j->W;
    size_t co = (size_t)j->ic * j->oc;
    for (size_t q = lo; q < hi; q++) {
        real *d = j->out + q * co;
        memset(d, 0, co * sizeof(real));
        for (int k = 0; k < W->plan.classes; k++)
            if (W->ktap[k][q] != 0) wvec_acc(d, j->in + k * co, W->ktap[k][q], co);
    }
}

/* dw[o][c][q] += wt[q][c][o] for output channels lo .. hi - 1. */
static void wino_kgrad_add_part(void *ctx, size_t lo, size_t hi, int part)
{
    (void)part;
    const wino_job *j = ctx;
    real *restrict dw = j->out;
    const real *restrict wt = j->in;
    int ic = j->ic, oc = j->oc;
    size_t co = (size_t)ic * oc;
    for (int o = (int)lo; o < (int)hi; o++)
        for (int c = 0; c < ic; c++)
            for (int q = 0; q < 9; q++) dw[((size_t)o * ic + c) * 9 + q] += wt[q * co + (size_t)c * oc + o];
}

/* dw[o][c][q] += sum_k ktap[k][q] du[k][c][o] (the transpose of wino_kernels), wt as scratch. */
static void wino_kernels_grad(real *dw, const real *du, real *wt, int ic, int oc, const wino *W, int threads)
{
    wino_job j = {.W = W, .out = wt, .in = du, .ic = ic, .oc = oc};
    parallel_parts(9, 1, threads, wino_kgrad_taps_part, &j);
    wino_job a = {.out = dw, .in = wt, .ic = ic, .oc = oc};
    parallel_parts((size_t)oc, 16, threads, wino_kgrad_add_part, &a);
}

/* ---- tile transforms over a chunk: items n0 .. n0 + cnt - 1, tile t = (item, ti, tj) in order;
 * slot s of tile t is at base + (s * T + t) * channels, T = the chunk's tiles. Channels last makes
 * every step a combination of contiguous channel vectors; along h the first step runs over a whole
 * band of the input row at once. */

/* Transformed inputs: V[p] = sum_{a,b} BTh[ph][a] BTw[pw][b] x[r0 + a][c0 + b], bands (item, ti)
 * lo .. hi - 1 of the chunk. z: the band's h-transform, ah x (2 mw tw + 1) x ic, then one channel
 * vector (wino_tile_scratch). */
OPS_SIMD_CLONES
static void wino_inputs_bands(real *v, const real *x, int n0, int cnt, int lo, int hi, int h, int wd, int ic,
                              const wino *W, real *z)
{
    const wino_plan *P = &W->plan;
    size_t T = (size_t)cnt * P->th * P->tw, C = (size_t)ic;
    int zw = 2 * P->mw * P->tw + 1, valid = zw < wd ? zw : wd; /* band columns; inside the input */
    real *tmp = z + wino_round((size_t)P->ah * zw * C); /* one channel vector */
    for (int band = lo; band < hi; band++) {
        int n = n0 + band / P->th, ti = band % P->th, r0 = 2 * P->mh * ti;
        size_t t = (size_t)band * P->tw;
        const real *x0 = x + ((size_t)n * h + r0) * wd * C;
        /* z[ph][col] = sum_a BTh[ph][a] x[r0 + a][col], rows past the edge being zero */
        for (int ph = 0; ph < P->ah; ph++) {
            real *zd = z + (size_t)ph * zw * C;
            wvec_comb(zd, 0, &W->bt_h[ph], h - r0, x0, (size_t)wd * C, (size_t)valid * C);
            if (valid < zw) memset(zd + (size_t)valid * C, 0, (size_t)(zw - valid) * C * sizeof(real));
        }
        /* V[slot(ph, pw)] = sum_b BTw[pw][b] z[ph][c0 + b] */
        for (int tj = 0; tj < P->tw; tj++, t++) {
            const real *zt = z + (size_t)2 * P->mw * tj * C;
            for (int ph = 0; ph < P->ah; ph++)
                for (int pw = 0; pw < P->aw; pw++)
                    wvec_comb_stream(v + ((size_t)W->slot[ph][pw] * T + t) * C, &W->bt_w[pw],
                                     zt + (size_t)ph * zw * C, C, C, tmp);
        }
    }
    wvec_stream_done();
}

static void wino_inputs_part(void *ctx, size_t lo, size_t hi, int part)
{
    const wino_job *j = ctx;
    wino_inputs_bands(j->out, j->in, j->n0, j->cnt, (int)lo, (int)hi, j->h, j->wd, j->ic, j->W,
                      j->tile + (size_t)part * j->tile_n);
}

static void wino_inputs(real *v, const real *x, int n0, int cnt, int h, int wd, int ic, const wino *W, real *tile,
                        size_t tile_n, int threads)
{
    wino_job j = {.W = W, .out = v, .in = x, .tile = tile, .tile_n = tile_n, .n0 = n0, .cnt = cnt, .h = h, .wd = wd,
                  .ic = ic};
    parallel_parts((size_t)cnt * W->plan.th, 1, threads, wino_inputs_part, &j);
}

/* Outputs: y[i][j] = act(sum_p ATh[i][ph] ATw[j][pw] M[p] + bias) inside (oh, ow), bands (item, ti)
 * lo .. hi - 1 of the chunk; bias may be NULL. Rows from item n's exact_from on (zero_from[n]:
 * their inputs are all zero) are act(bias) exactly. q: mh x aw x oc. */
OPS_SIMD_CLONES
static void wino_outputs_bands(real *y, const real *mp, const real *bias, int relu, const int *zero_from, int n0,
                               int cnt, int lo, int hi, int oh, int ow, int oc, const wino *W, real *q)
{
    const wino_plan *P = &W->plan;
    size_t T = (size_t)cnt * P->th * P->tw, C = (size_t)oc, ss = T * C;
    const real *s[WVEC_TERMS];
    real c[WVEC_TERMS];
    for (int band = lo; band < hi; band++) {
        int n = n0 + band / P->th, ti = band % P->th;
        int exact_from = (zero_from[n] + 1) / 2; /* output row r reads input rows 2r .. 2r + 2 */
        size_t t = (size_t)band * P->tw;
        for (int r = ti * P->mh > exact_from ? ti * P->mh : exact_from; r < oh && r < (ti + 1) * P->mh; r++)
            for (int j = 0; j < ow; j++) {
                real *yo = y + (((size_t)n * oh + r) * ow + j) * C;
                for (size_t o = 0; o < C; o++) yo[o] = !bias ? 0 : relu ? (bias[o] > 0 ? bias[o] : 0) : bias[o];
            }
        for (int tj = 0; tj < P->tw; tj++, t++) {
            int rows = oh - ti * P->mh, cols = ow - tj * P->mw;
            rows = rows < P->mh ? rows : P->mh, cols = cols < P->mw ? cols : P->mw;
            rows = exact_from - ti * P->mh < rows ? exact_from - ti * P->mh : rows;
            /* q[i][pw] = sum_ph ATh[i][ph] M[slot(ph, pw)] */
            for (int i = 0; i < rows; i++)
                for (int pw = 0; pw < P->aw; pw++) {
                    const wsparse *r = &W->at_h[i];
                    for (int e = 0; e < r->n; e++) s[e] = mp + (size_t)W->slot[r->idx[e]][pw] * ss + t * C, c[e] = r->val[e];
                    wvec_combp(q + ((size_t)i * P->aw + pw) * C, r->n, s, c, C);
                }
            /* y[i][j] = act(sum_pw ATw[j][pw] q[i][pw] + bias) */
            for (int i = 0; i < rows; i++)
                for (int j = 0; j < cols; j++) {
                    real *yo = y + (((size_t)n * oh + ti * P->mh + i) * ow + tj * P->mw + j) * C;
                    wvec_comb(yo, 0, &W->at_w[j], WINO_MAX_A, q + (size_t)i * P->aw * C, C, C);
                    if (bias) wvec_acc(yo, bias, 1, C);
                    if (relu) {
#pragma omp simd
                        for (size_t o = 0; o < C; o++) yo[o] = yo[o] > 0 ? yo[o] : 0;
                    }
                }
        }
    }
}

static void wino_outputs_part(void *ctx, size_t lo, size_t hi, int part)
{
    const wino_job *j = ctx;
    wino_outputs_bands(j->out, j->in, j->bias, j->relu, j->zero_from, j->n0, j->cnt, (int)lo, (int)hi, j->oh, j->ow,
                       j->oc, j->W, j->tile + (size_t)part * j->tile_n);
}

static void wino_outputs(real *y, const real *mp, const real *bias, int relu, const int *zero_from, int n0, int cnt,
                         int oh, int ow, int oc, const wino *W, real *tile, size_t tile_n, int threads)
{
    wino_job j = {.W = W, .out = y, .in = mp, .bias = bias, .relu = relu, .zero_from = zero_from, .tile = tile,
                  .tile_n = tile_n, .n0 = n0, .cnt = cnt, .oh = oh, .ow = ow, .oc = oc};
    parallel_parts((size_t)cnt * W->plan.th, 1, threads, wino_outputs_part, &j);
}

/* Output gradients to points: dM[p] = sum_{i,j} ATh[i][ph] ATw[j][pw] g[i][j], g = dy masked by
 * y > 0 when y is given and zero past the edge, bands (item, ti) lo .. hi - 1 of the chunk; dbb
 * (NULL: none) gets each band's sum of g, band by band (oc apart), while g is at hand: the bias
 * gradient adds them up in band order (wino_grad_outputs), whatever the split. tmp: mh x (mw + aw)
 * x oc and one channel vector (wino_tile_scratch). */
OPS_SIMD_CLONES
static void wino_grad_outputs_bands(real *dm, real *dbb, const real *dy, const real *y, int n0, int cnt, int lo,
                                    int hi, int oh, int ow, int oc, const wino *W, real *tmp)
{
    const wino_plan *P = &W->plan;
    size_t T = (size_t)cnt * P->th * P->tw, C = (size_t)oc;
    real *g = tmp, *r = g + wino_round((size_t)P->mh * P->mw * C); /* g: mh x mw x oc; r: mh x aw x oc */
    tmp = r + wino_round((size_t)P->mh * P->aw * C);
    for (int band = lo; band < hi; band++) {
        int n = n0 + band / P->th, ti = band % P->th;
        size_t t = (size_t)band * P->tw;
        real *db = dbb ? dbb + (size_t)band * C : NULL;
        if (db) memset(db, 0, C * sizeof(real));
        for (int tj = 0; tj < P->tw; tj++, t++) {
            int rows = oh - ti * P->mh, cols = ow - tj * P->mw;
            for (int i = 0; i < P->mh; i++)
                for (int j = 0; j < P->mw; j++) {
                    real *gd = g + ((size_t)i * P->mw + j) * C;
                    if (i >= rows || j >= cols) {
                        memset(gd, 0, C * sizeof(real));
                        continue;
                    }
                    size_t off = (((size_t)n * oh + ti * P->mh + i) * ow + tj * P->mw + j) * C;
                    const real *gs = dy + off;
                    if (y) {
                        const real *ys = y + off;
#pragma omp simd
                        for (size_t o = 0; o < C; o++) {
                            real gv = gs[o]; /* unconditional load: a select, not a branch */
                            gd[o] = ys[o] > 0 ? gv : 0;
                        }
                    } else {
                        memcpy(gd, gs, C * sizeof(real));
                    }
                    if (db) wvec_acc(db, gd, 1, C);
                }
            /* r[i][pw] = sum_j ATw[j][pw] g[i][j]; dM[slot(ph, pw)] = sum_i ATh[i][ph] r[i][pw] */
            for (int i = 0; i < P->mh; i++)
                for (int pw = 0; pw < P->aw; pw++)
                    wvec_comb(r + ((size_t)i * P->aw + pw) * C, 0, &W->atc_w[pw], WINO_MAX_A,
                              g + (size_t)i * P->mw * C, C, C);
            for (int ph = 0; ph < P->ah; ph++)
                for (int pw = 0; pw < P->aw; pw++)
                    wvec_comb_stream(dm + ((size_t)W->slot[ph][pw] * T + t) * C, &W->atc_h[ph],
                                     r + (size_t)pw * C, (size_t)P->aw * C, C, tmp);
        }
    }
    wvec_stream_done();
}

static void wino_grad_outputs_part(void *ctx, size_t lo, size_t hi, int part)
{
    const wino_job *j = ctx;
    wino_grad_outputs_bands(j->out, j->db, j->in, j->in2, j->n0, j->cnt, (int)lo, (int)hi, j->oh, j->ow, j->oc, j->W,
                            j->tile + (size_t)part * j->tile_n);
}

/* dM of a chunk's bands on threads; db (NULL: none) += the bands' sums (dbb: one per band), in
 * band order. */
static void wino_grad_outputs(real *dm, real *db, real *dbb, const real *dy, const real *y, int n0, int cnt, int oh,
                              int ow, int oc, const wino *W, real *tile, size_t tile_n, int threads)
{
    size_t bands = (size_t)cnt * W->plan.th;
    wino_job j = {.W = W, .out = dm, .db = db ? dbb : NULL, .in = dy, .in2 = y, .tile = tile, .tile_n = tile_n,
                  .n0 = n0, .cnt = cnt, .oh = oh, .ow = ow, .oc = oc};
    parallel_parts(bands, 1, threads, wino_grad_outputs_part, &j);
    if (db)
        for (size_t b = 0; b < bands; b++) wvec_acc(db, dbb + b * (size_t)oc, 1, (size_t)oc);
}

/* Point gradients back to the input: dx[r0 + a][c0 + b] += sum_p BTh[ph][a] BTw[pw][b] dV[p] inside
 * the input, for the bands (item, ti) of the chunk whose ti has the parity `odd`, band numbers
 * lo .. hi - 1 among them (band k: item k / bh, ti = 2 (k % bh) + odd, bh = bands of that parity
 * per item). Neighbouring tiles of a band share an edge sample and add into it in tile order;
 * neighbouring bands share an edge row, so the even bands run first and the odd ones add after
 * them: no two bands running at once touch the same row, whatever the split. z: the band's sums,
 * ah x (2 mw tw + 1) x ic, added into dx once the band's tiles are done. Unless `acc`, dx is not
 * read where no band has written before: the even bands store their rows, the odd ones store
 * theirs but the edge rows an even band has stored (wino_grad_inputs_clear zeroes what no band
 * covers), which saves a pass zeroing dx and a read of it. */
static void wino_grad_inputs_bands(real *dx, const real *dv, int n0, int cnt, int odd, int acc, int lo, int hi, int h,
                                   int wd, int ic, const wino *W, real *z)
{
    const wino_plan *P = &W->plan;
    size_t T = (size_t)cnt * P->th * P->tw, C = (size_t)ic, ss = T * C;
    int zw = 2 * P->mw * P->tw + 1, valid = zw < wd ? zw : wd, bh = (P->th - odd + 1) / 2;
    const real *s[WVEC_TERMS];
    real c[WVEC_TERMS];
    for (int k = lo; k < hi; k++) {
        int item = k / bh, ti = 2 * (k % bh) + odd, n = n0 + item;
        int r0 = 2 * P->mh * ti, rows = h - r0 < P->ah ? h - r0 : P->ah;
        size_t t = ((size_t)item * P->th + ti) * P->tw;
        /* z[ph][c0 + b] = sum_pw BTw[pw][b] dV[slot(ph, pw)]; a tile's first column adds to the
         * previous tile's last */
        for (int tj = 0; tj < P->tw; tj++, t++) {
            real *zt = z + (size_t)2 * P->mw * tj * C;
            for (int ph = 0; ph < P->ah; ph++)
                for (int b = 0; b < P->aw; b++) {
                    const wsparse *r = &W->btc_w[b];
                    real *zd = zt + ((size_t)ph * zw + b) * C;
                    int e0 = 0;
                    if (b == 0 && tj > 0) s[e0] = zd, c[e0++] = 1;
                    for (int e = 0; e < r->n; e++)
                        s[e0 + e] = dv + (size_t)W->slot[ph][r->idx[e]] * ss + t * C, c[e0 + e] = r->val[e];
                    wvec_combp(zd, e0 + r->n, s, c, C);
                }
        }
        /* dx[r0 + a][col] (+)= sum_ph BTh[ph][a] z[ph][col] over the columns inside the input */
        real *x0 = dx + ((size_t)n * h + r0) * wd * C;
        for (int a = 0; a < rows; a++) {
            int shared = odd && (a == 0 || (a == 2 * P->mh && ti + 1 < P->th)); /* an even band's edge row */
            wvec_comb(x0 + (size_t)a * wd * C, acc || shared, &W->btc_h[a], WINO_MAX_A, z, (size_t)zw * C,
                      (size_t)valid * C);
        }
    }
}

static void wino_grad_inputs_part(void *ctx, size_t lo, size_t hi, int part)
{
    const wino_job *j = ctx;
    wino_grad_inputs_bands(j->out, j->in, j->n0, j->cnt, j->odd, j->acc, (int)lo, (int)hi, j->h, j->wd, j->ic, j->W,
                           j->tile + (size_t)part * j->tile_n);
}

static void wino_grad_inputs(real *dx, const real *dv, int n0, int cnt, int acc, int h, int wd, int ic, const wino *W,
                             real *tile, size_t tile_n, int threads)
{
    for (int odd = 0; odd < 2; odd++) { /* the even bands, then the odd ones */
        wino_job j = {.W = W, .out = dx, .in = dv, .tile = tile, .tile_n = tile_n, .n0 = n0, .cnt = cnt, .h = h,
                      .wd = wd, .ic = ic, .odd = odd, .acc = acc};
        parallel_parts((size_t)cnt * ((W->plan.th - odd + 1) / 2), 1, threads, wino_grad_inputs_part, &j);
    }
}

/* ---- the products of a chunk, on the pool
 * Handed out one at a time to whichever thread is free (parallel_items), so that a thread slowed
 * down, or classes whose products run at different rates, do not leave the other waiting: the
 * forward's and the input gradient's products by blocks of rows of each class's stacked rows
 * (class k: group_n[k] * T rows of V or dM from row group_start[k] * T), in class order, so that
 * both threads read a class's kernel at about the same time. The blocks do not depend on the thread
 * count and the last one takes the rest, so none is shorter than the whole product (a block of
 * rows gives the bits of the whole GEMM, as ops_sgemm.h's split). The weight gradient's products
 * sum over the rows and are not cut: whole classes, the largest first, so that the last ones handed
 * out are the smallest. The split in halves this replaces left one thread waiting 9-13 ms per step
 * for the other, and cut some products into pieces too short for libxsmm's kernels, which OpenBLAS
 * then ran: 5 threads gave other bits than 1 at 144 channels. Rows per block: 7 x 16 (libxsmm's
 * 7-row kernels, OpenBLAS' 16-row units) where libxsmm reads the operands in place; where every
 * call copies them first (OpenBLAS packs the kernel, mixed precision rounds both) the blocks are 4
 * times as tall (112-row blocks made OpenBLAS' forward 2.5% slower). */
enum { WINO_GEMM_ROWS = 112, WINO_GEMM_ROWS_COPIED = 448 };
typedef enum wino_gemm_kind {
    WG_FORWARD, /* m = v U_k */
    WG_DX,      /* v = dm U_k^T (u holds the U_k^T) */
    WG_DW,      /* du_k += v^T dm */
} wino_gemm_kind;

typedef struct wino_gemm_job {
    const wino *W;
    wino_gemm_kind kind;
    size_t T;
    int ic, oc;
    real *v, *m, *du; /* v: what WG_DX writes */
    const real *vr, *u; /* vr: the V that WG_FORWARD and WG_DW read */
    size_t block;                      /* rows per block */
    size_t boff[WINO_MAX_CLASSES + 1]; /* class k's row blocks: items boff[k] .. boff[k + 1] - 1 */
    int order[WINO_MAX_CLASSES];       /* the weight gradient's classes, largest first */
} wino_gemm_job;

static void wino_gemm_item(void *ctx, size_t i, int slot)
{
    (void)slot;
    const wino_gemm_job *j = ctx;
    const wino *W = j->W;
    size_t co = (size_t)j->ic * j->oc, T = j->T, ic = (size_t)j->ic, oc = (size_t)j->oc;
    if (j->kind == WG_DW) {
        int k = j->order[i];
        size_t first = (size_t)W->group_start[k] * T, rows = (size_t)W->group_n[k] * T;
        GEMM_SERIAL(ROWMAJOR, TR, NT, j->ic, j->oc, (int)rows, 1, j->vr + first * ic, j->ic, j->m + first * oc,
                    j->oc, 1, j->du + k * co, j->oc);
        return;
    }
    int k = 0;
    while (j->boff[k + 1] <= i) k++;
    size_t rows = (size_t)W->group_n[k] * T, r0 = (i - j->boff[k]) * j->block;
    size_t n = i + 1 == j->boff[k + 1] ? rows - r0 : j->block, row = (size_t)W->group_start[k] * T + r0;
    if (j->kind == WG_FORWARD)
        GEMM_SERIAL(ROWMAJOR, NT, NT, (int)n, j->oc, j->ic, 1, j->vr + row * ic, j->ic, j->u + k * co, j->oc, 0,
                    j->m + row * oc, j->oc);
    else
        GEMM_SERIAL(ROWMAJOR, NT, NT, (int)n, j->ic, j->oc, 1, j->m + row * oc, j->oc, j->u + k * co, j->ic, 0,
                    j->v + row * ic, j->ic);
}

/* v: the V read (WG_FORWARD, WG_DW) or written (WG_DX). */
static void wino_gemms(const wino *W, wino_gemm_kind kind, size_t T, int ic, int oc, const real *vr, real *v, real *m,
                       const real *u, real *du, int threads)
{
    wino_gemm_job j = {.W = W, .kind = kind, .T = T, .ic = ic, .oc = oc, .v = v, .vr = vr, .m = m, .du = du, .u = u,
                       .block = GEMM_COPIES_OPERANDS() ? WINO_GEMM_ROWS_COPIED : WINO_GEMM_ROWS};
    int classes = W->plan.classes;
    for (int k = 0; k < classes; k++) {
        size_t blocks = (size_t)W->group_n[k] * T / j.block; /* the last one takes the rest */
        j.boff[k + 1] = j.boff[k] + (blocks > 0 ? blocks : 1);
        int at = k; /* insertion by decreasing size, ties in class order */
        while (at > 0 && W->group_n[j.order[at - 1]] < W->group_n[k]) j.order[at] = j.order[at - 1], at--;
        j.order[at] = k;
    }
    parallel_items(kind == WG_DW ? (size_t)classes : j.boff[classes], threads, wino_gemm_item, &j);
}

/* ---- the passes */

/* The first row of an item's all-zero tail (h when its last row holds a nonzero): its padding. */
static int wino_zero_tail(const real *x, int h, size_t row)
{
    int r = h;
    for (; r > 0; r--) {
        const real *xr = x + (size_t)(r - 1) * row;
        size_t k = 0;
        while (k < row && xr[k] == 0) k++;
        if (k < row) break;
    }
    return r;
}

/* saved (NULL: none): each chunk's V goes there, chunk after chunk (wino_saved_floats), for the
 * backward, instead of into the scratch. */
/* The transformed kernels of w for outputs of oh x ow into u (the taps reordered in scratch). */
static void wino_forward_kernels(real *u, const real *w, int ic, int oc, int oh, int ow, real *scratch, int threads)
{
    wino W;
    wino_make(&W, oh, ow);
    wino_layout l = wino_layout_make(&W.plan, ic, oc, 0, threads);
    wino_taps(scratch + l.wt, w, ic, oc, 0, threads);
    wino_kernels(u, scratch + l.wt, ic, oc, &W, threads);
}

/* u_ready (NULL: made here): the transformed kernels of w for these outputs (wino_forward_kernels). */
static void wino_forward(real *y, const real *x, const real *w, const real *u_ready, const real *b, int nb, int ic,
                         int oc, int h, int wd, int relu, real *saved, real *scratch, int threads)
{
    int oh = ops_conv_out_len(h), ow = ops_conv_out_len(wd);
    wino W;
    wino_make(&W, oh, ow);
    const wino_plan *P = &W.plan;
    wino_layout l = wino_layout_make(P, ic, oc, 0, threads);
    real *v = scratch + l.v, *m = scratch + l.m, *tile = scratch + l.tile;
    const real *u = u_ready;
    if (!u) {
        wino_forward_kernels(scratch + l.u, w, ic, oc, oh, ow, scratch, threads);
        u = scratch + l.u;
    }
    int *zero_from = xmalloc((size_t)nb * sizeof *zero_from);
    for (int n = 0; n < nb; n++) zero_from[n] = wino_zero_tail(x + (size_t)n * h * wd * ic, h, (size_t)wd * ic);
    for (int n0 = 0; n0 < nb; n0 += P->items) {
        int cnt = nb - n0 < P->items ? nb - n0 : P->items;
        size_t T = (size_t)cnt * P->th * P->tw;
        real *vc = saved ? saved + wino_plan_saved(P, n0, ic) : v;
        wino_inputs(vc, x, n0, cnt, h, wd, ic, &W, tile, l.tile_n, threads);
        wino_gemms(&W, WG_FORWARD, T, ic, oc, vc, NULL, m, u, NULL, threads);
        wino_outputs(y, m, b, relu, zero_from, n0, cnt, oh, ow, oc, &W, tile, l.tile_n, threads);
    }
    free(zero_from);
}

/* Zeroes what no band of wino_grad_inputs writes: input rows below the last tile row, columns right
 * of the last tile column (inputs no output reads). */
static void wino_grad_inputs_clear(real *dx, int nb, int h, int wd, int ic, const wino *W)
{
    const wino_plan *P = &W->plan;
    int rows = 2 * P->mh * P->th + 1, cols = 2 * P->mw * P->tw + 1;
    size_t C = (size_t)ic;
    for (int n = 0; n < nb; n++)
        for (int r = 0; r < h; r++) {
            real *xr = dx + ((size_t)n * h + r) * wd * C;
            if (r >= rows)
                memset(xr, 0, (size_t)wd * C * sizeof(real));
            else if (cols < wd)
                memset(xr + (size_t)cols * C, 0, (size_t)(wd - cols) * C * sizeof(real));
        }
}

/* saved (NULL: none): the V a forward of this x kept (wino_forward), read instead of transforming
 * x again for the weight gradient. acc: dx += the input gradient (else dx = it, not read first). */
static void wino_backward(real *dx, real *dw, real *db, const real *dy, const real *x, const real *w,
                          const real *y, int nb, int ic, int oc, int h, int wd, int acc, const real *saved,
                          real *scratch, int threads)
{
    int oh = ops_conv_out_len(h), ow = ops_conv_out_len(wd);
    wino W;
    wino_make(&W, oh, ow);
    const wino_plan *P = &W.plan;
    wino_layout l = wino_layout_make(P, ic, oc, 1, threads);
    real *u = scratch + l.u, *du = scratch + l.du, *wt = scratch + l.wt, *v = scratch + l.v, *dm = scratch + l.m,
         *dbb = scratch + l.dbb, *tile = scratch + l.tile;
    size_t co = (size_t)ic * oc;
    if (dx) { /* u holds the U_k^T (oc x ic) */
        wino_taps(wt, w, ic, oc, 1, threads);
        wino_kernels(u, wt, ic, oc, &W, threads);
        if (!acc) wino_grad_inputs_clear(dx, nb, h, wd, ic, &W);
    }
    if (dw) memset(du, 0, (size_t)P->classes * co * sizeof(real));
    for (int n0 = 0; n0 < nb; n0 += P->items) {
        int cnt = nb - n0 < P->items ? nb - n0 : P->items;
        size_t T = (size_t)cnt * P->th * P->tw;
        wino_grad_outputs(dm, db, dbb, dy, y, n0, cnt, oh, ow, oc, &W, tile, l.tile_n, threads);
        if (dw) {
            const real *vc = saved ? saved + wino_plan_saved(P, n0, ic) : v;
            if (!saved) wino_inputs(v, x, n0, cnt, h, wd, ic, &W, tile, l.tile_n, threads);
            wino_gemms(&W, WG_DW, T, ic, oc, vc, NULL, dm, NULL, du, threads);
        }
        if (dx) { /* dV overwrites V in the scratch: the weight gradient above has used it */
            wino_gemms(&W, WG_DX, T, ic, oc, NULL, v, dm, u, NULL, threads);
            wino_grad_inputs(dx, v, n0, cnt, acc, h, wd, ic, &W, tile, l.tile_n, threads);
        }
    }
    if (dw) wino_kernels_grad(dw, du, wt, ic, oc, &W, threads);
}
