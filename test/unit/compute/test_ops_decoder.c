/* The attention decoder's ops (core/compute/ops.h): mha with query and key lengths of their own
 * and the causal mask (a plain softmax loop as reference, central finite differences in double
 * with padding, causal masks and dropout held fixed by the seed, float against double, the
 * encoder's attention being mha with tq = tk), the embedding and ESPnet's label-smoothing loss
 * (values from the definition, finite differences through log_softmax), and a beam's few queries
 * against many keys (the scores from Q^T, core/compute/ops_sgemm.h: float against double, and the
 * bits of the other form where taken). Suite `ops`. */
#include <criterion/criterion.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cblas.h>

#include "core/compute/kernel_math.h"
#include "core/compute/ops.h"
#include "core/compute/ops_sgemm.h"
#include "test/unit/compute/ops_test_util.h"

/* ------------------------------------------------------------------ mha */

typedef struct {
    int nb, tq, tk, h, hd, causal, ldq, ldkv;
    const int *lens;
    float p;
    double *q, *k, *v, *r, *y, *att, *scr;
} mha_ctx;

#define MHA_SEED 21u
#define MHA_STREAM 5u

static double mha_loss(void *p)
{
    mha_ctx *c = p;
    ops_mha_forward_f64(c->y, c->att, c->q, c->ldq, c->k, c->v, c->ldkv, c->lens, c->nb, c->tq, c->tk, c->causal,
                        c->h, c->hd, c->p, MHA_SEED, MHA_STREAM, c->scr);
    return dsum_prod(c->y, c->r, (size_t)c->nb * c->tq * c->h * c->hd);
}

/* The forward against softmax over the keys each row sees (padding and, with causal, j <= i). */
static void mha_reference(const mha_ctx *c)
{
    int d = c->h * c->hd;
    for (int b = 0; b < c->nb; b++)
        for (int j = 0; j < c->h; j++)
            for (int i = 0; i < c->tq; i++) {
                int n = c->causal ? (i + 1 < c->lens[b] ? i + 1 : c->lens[b]) : c->lens[b];
                double s[64], mx = -INFINITY, z = 0;
                for (int t = 0; t < n; t++) {
                    s[t] = 0;
                    for (int e = 0; e < c->hd; e++)
                        s[t] += c->q[((size_t)b * c->tq + i) * c->ldq + j * c->hd + e] *
                                c->k[((size_t)b * c->tk + t) * c->ldkv + j * c->hd + e];
                    s[t] /= sqrt(c->hd);
                    mx = fmax(mx, s[t]);
                }
                for (int t = 0; t < n; t++) z += exp(s[t] - mx);
                const double *a = c->att + (((size_t)b * c->h + j) * c->tq + i) * c->tk;
                for (int t = 0; t < c->tk; t++)
                    cr_assert(fabs(a[t] - (t < n ? exp(s[t] - mx) / z : 0)) < 1e-14, "b %d head %d row %d key %d", b,
                              j, i, t);
                for (int e = 0; e < c->hd; e++) {
                    double yv = 0;
                    for (int t = 0; t < n; t++) yv += a[t] * c->v[((size_t)b * c->tk + t) * c->ldkv + j * c->hd + e];
                    cr_assert(fabs(c->y[((size_t)b * c->tq + i) * d + j * c->hd + e] - yv) < 1e-13);
                }
            }
}

static void mha_case(const int *lens, int nb, int tq, int tk, int h, int hd, int causal, int pad, float p)
{
    int d = h * hd;
    mha_ctx c = {.nb = nb, .tq = tq, .tk = tk, .h = h, .hd = hd, .causal = causal, .ldq = d + pad,
                 .ldkv = d + 2 * pad, .lens = lens, .p = p};
    size_t nq = (size_t)nb * tq * c.ldq, nkv = (size_t)nb * tk * c.ldkv, ny = (size_t)nb * tq * d;
    size_t na = (size_t)nb * h * tq * tk;
    c.q = drand(nq, -1.5, 1.5), c.k = drand(nkv, -1.5, 1.5), c.v = drand(nkv, -1.5, 1.5);
    c.r = drand(ny, -1, 1), c.y = dz(ny), c.att = dz(na), c.scr = dz(ops_mha_forward_scratch(tq, tk, p) + 1);
    mha_loss(&c);
    if (p == 0) mha_reference(&c);

    double *dq = dz(nq), *dk = dz(nkv), *dv = dz(nkv);
    ops_mha_backward_f64(dq, dk, dv, c.r, c.att, c.q, c.ldq, c.k, c.v, c.ldkv, lens, nb, tq, tk, h, hd, p, MHA_SEED,
                         MHA_STREAM, dz(ops_mha_backward_scratch(tq, tk)));
    const char *what = causal ? "causal mha" : "mha";
    fd_check(mha_loss, &c, c.q, dq, nq, what);
    fd_check(mha_loss, &c, c.k, dk, nkv, what);
    fd_check(mha_loss, &c, c.v, dv, nkv, what);

    /* Float against double. */
    float *fq = tof(c.q, nq), *fk = tof(c.k, nkv), *fv = tof(c.v, nkv), *fy = fz(ny), *fa = fz(na);
    ops_mha_forward_f32(fy, fa, fq, c.ldq, fk, fv, c.ldkv, lens, nb, tq, tk, causal, h, hd, p, MHA_SEED, MHA_STREAM,
                        fz(ops_mha_forward_scratch(tq, tk, p) + 1));
    mha_loss(&c);
    CHECK_F32(fy, c.y, ny, "mha y");
    CHECK_F32(fa, c.att, na, "mha att");
    float *fdq = fz(nq), *fdk = fz(nkv), *fdv = fz(nkv);
    ops_mha_backward_f32(fdq, fdk, fdv, tof(c.r, ny), fa, fq, c.ldq, fk, fv, c.ldkv, lens, nb, tq, tk, h, hd, p,
                         MHA_SEED, MHA_STREAM, fz(ops_mha_backward_scratch(tq, tk)));
    CHECK_F32(fdq, dq, nq, "mha dq");
    CHECK_F32(fdk, dk, nkv, "mha dk");
    CHECK_F32(fdv, dv, nkv, "mha dv");
}

Test(ops, mha_cross_and_causal)
{
    rng_init(&ops_rng, 31);
    static const int cross[2] = {7, 3};
    mha_case(cross, 2, 3, 7, 2, 3, 0, 0, 0); /* source attention: 3 queries, 7 frames */
    static const int causal[3] = {5, 3, 1};
    mha_case(causal, 3, 5, 5, 2, 2, 1, 1, 0); /* target self-attention with padding, strided rows */
    static const int drop[2] = {6, 4};
    mha_case(drop, 2, 6, 6, 1, 3, 1, 0, 0.3f); /* causal with attention dropout */
    static const int block[2] = {4, 1};
    mha_case(block, 2, 1, 9, 2, 2, 0, 2, 0.2f); /* one query per item against a cache block */
}

/* The encoder's self-attention is mha with tq = tk and no causal mask, to the bit. */
Test(ops, attention_is_mha_with_equal_lengths)
{
    rng_init(&ops_rng, 32);
    int nb = 2, t = 6, h = 2, hd = 3, d = h * hd;
    static const int lens[2] = {6, 4};
    size_t n = (size_t)nb * t * d, na = (size_t)nb * h * t * t;
    float *q = tof(drand(n, -1, 1), n), *k = tof(drand(n, -1, 1), n), *v = tof(drand(n, -1, 1), n);
    float *y1 = fz(n), *y2 = fz(n), *a1 = fz(na), *a2 = fz(na), *scr = fz(na + 1);
    ops_attention_forward_f32(y1, a1, q, k, v, d, lens, nb, t, h, hd, 0.2f, 3, 4, scr);
    ops_mha_forward_f32(y2, a2, q, d, k, v, d, lens, nb, t, t, 0, h, hd, 0.2f, 3, 4, scr);
    cr_assert(!memcmp(y1, y2, n * sizeof *y1) && !memcmp(a1, a2, na * sizeof *a1));
}

/* A beam's rows against the frames so far (4 heads of 64, strided rows as the decoder's are):
 * float against double, and where ops_sgemm_qt_takes, each head's scores in the bits of the
 * (NoTrans, Trans) product the attention ran before (what the streaming texts rely on). */
Test(ops, mha_few_queries_many_keys, .fini = ops_arena_free)
{
    rng_init(&ops_rng, 33);
    static const int shapes[][3] = {{10, 300, 0}, {2, 1100, 0}, {16, 160, 1}, {7, 700, 0}}; /* tq, tk, causal */
    int h = 4, hd = 64, d = h * hd, ld = d + 16, taken = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int tq = shapes[s][0], tk = shapes[s][1], causal = shapes[s][2], lens[1] = {tk - 3};
        size_t nq = (size_t)tq * ld, nkv = (size_t)tk * ld, ny = (size_t)tq * d, na = (size_t)h * tq * tk;
        double *q = drand(nq, -1.5, 1.5), *k = drand(nkv, -1.5, 1.5), *v = drand(nkv, -1.5, 1.5), *y = dz(ny);
        double *att = dz(na);
        ops_mha_forward_f64(y, att, q, ld, k, v, ld, lens, 1, tq, tk, causal, h, hd, 0, 0, 0,
                            dz(ops_mha_forward_scratch(tq, tk, 0) + 1));
        float *fq = tof(q, nq), *fk = tof(k, nkv), *fv = tof(v, nkv), *fy = fz(ny), *fa = fz(na);
        ops_mha_forward_f32(fy, fa, fq, ld, fk, fv, ld, lens, 1, tq, tk, causal, h, hd, 0, 0, 0,
                            fz(ops_mha_forward_scratch(tq, tk, 0) + 1));
        CHECK_F32(fy, y, ny, "few-query mha y");
        CHECK_F32(fa, att, na, "few-query mha att");
        if (!ops_sgemm_qt_takes(tq, lens[0], hd, 0.125f)) continue;
        taken++;
        float *c0 = fz((size_t)tq * tk), *c1 = fz((size_t)tq * tk), *qt = fz((size_t)hd * tq);
        for (int j = 0; j < h; j++) {
            for (int i = 0; i < tq; i++)
                for (int c = 0; c < hd; c++) qt[(size_t)c * tq + i] = fq[(size_t)i * ld + j * hd + c];
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, tq, lens[0], hd, 0.125f, fq + j * hd, ld, fk + j * hd,
                        ld, 0, c0, tk);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasTrans, tq, lens[0], hd, 0.125f, qt, tq, fk + j * hd, ld, 0, c1,
                        tk);
            for (int i = 0; i < tq; i++)
                cr_assert(!memcmp(c0 + (size_t)i * tk, c1 + (size_t)i * tk, (size_t)lens[0] * sizeof *c0),
                          "%d x %d, head %d: the two forms' scores differ", tq, tk, j);
        }
    }
    /* What it leaves to the other form: one row (a matrix-vector product), more than 16, OpenBLAS'
     * small products, wide heads. */
    cr_assert(!ops_sgemm_qt_takes(1, 5000, 64, 0.125f) && !ops_sgemm_qt_takes(17, 5000, 64, 0.125f));
    cr_assert(!ops_sgemm_qt_takes(10, 120, 64, 0.125f) && !ops_sgemm_qt_takes(10, 5000, 256, 0.0625f));
    cr_log_info("few-query scores from Q^T taken in %d of 4 shapes", taken);
}

/* ------------------------------------------------------------------ embedding */

typedef struct {
    int n, v, d;
    const int *ids;
    double *w, *y, *r;
} emb_ctx;

static double emb_loss(void *p)
{
    emb_ctx *c = p;
    ops_embedding_forward_f64(c->y, c->w, c->ids, c->n, c->v, c->d);
    return dsum_prod(c->y, c->r, (size_t)c->n * c->d);
}

Test(ops, embedding)
{
    rng_init(&ops_rng, 33);
    static const int ids[6] = {3, 0, 3, 4, 1, 3}; /* 3 repeats: its gradient rows add */
    emb_ctx c = {.n = 6, .v = 5, .d = 4, .ids = ids};
    size_t nw = (size_t)c.v * c.d, ny = (size_t)c.n * c.d;
    c.w = drand(nw, -1, 1), c.y = dz(ny), c.r = drand(ny, -1, 1);
    emb_loss(&c);
    for (int i = 0; i < c.n; i++)
        cr_assert(!memcmp(c.y + (size_t)i * c.d, c.w + (size_t)ids[i] * c.d, (size_t)c.d * sizeof(double)));
    double *dw = drand(nw, -1, 1), *dw0 = dz(nw);
    memcpy(dw0, dw, nw * sizeof *dw);
    ops_embedding_backward_f64(dw, c.r, ids, c.n, c.v, c.d);
    for (size_t i = 0; i < nw; i++) dw[i] -= dw0[i]; /* it accumulates */
    fd_check(emb_loss, &c, c.w, dw, nw, "embedding dw");
    for (int e = 0; e < c.d; e++) cr_assert_eq(dw[2 * c.d + e], 0.0); /* token 2 never occurs */
}

/* ------------------------------------------------------------------ label smoothing */

typedef struct {
    int n, v;
    const int *target;
    double smoothing, scale;
    double *z, *logp;
} ls_ctx;

static double ls_loss(void *p)
{
    ls_ctx *c = p;
    ops_log_softmax_forward_f64(c->logp, c->z, c->n, c->v);
    return c->scale * ops_label_smoothing_forward_f64(c->logp, c->target, c->n, c->v, c->smoothing, NULL);
}

static void ls_case(double smoothing)
{
    static const int target[5] = {2, -1, 0, 6, 2};
    ls_ctx c = {.n = 5, .v = 7, .target = target, .smoothing = smoothing, .scale = 0.4};
    size_t n = (size_t)c.n * c.v;
    c.z = drand(n, -3, 3), c.logp = dz(n);
    c.z[2 * c.v + 4] = 9; /* row 2 predicts 4, not its label 0 */
    c.z[3 * c.v + 6] = 9; /* row 3 predicts its label 6 */
    ls_loss(&c);
    /* The definition: sum over counted rows of sum_c t_c (log t_c - logp_c). */
    double want = 0, conf = 1 - smoothing, off = smoothing / (c.v - 1);
    for (int r = 0; r < c.n; r++) {
        if (target[r] < 0) continue;
        for (int k = 0; k < c.v; k++) {
            double t = k == target[r] ? conf : off;
            want += t > 0 ? t * (log(t) - c.logp[r * c.v + k]) : 0;
        }
    }
    int64_t hits = -1;
    double got = ops_label_smoothing_forward_f64(c.logp, target, c.n, c.v, smoothing, &hits);
    cr_assert(fabs(got - want) < 1e-12, "%.15g vs %.15g", got, want);
    int64_t want_hits = 0;
    for (int r = 0; r < c.n; r++) {
        if (target[r] < 0) continue;
        int best = 0;
        for (int k = 1; k < c.v; k++) best = c.logp[r * c.v + k] > c.logp[r * c.v + best] ? k : best;
        want_hits += best == target[r];
    }
    cr_assert_eq(hits, want_hits);
    cr_assert(hits >= 1 && hits <= 3);
    if (smoothing == 0) { /* plain cross entropy */
        double nll = 0;
        for (int r = 0; r < c.n; r++)
            if (target[r] >= 0) nll -= c.logp[r * c.v + target[r]];
        cr_assert(fabs(got - nll) < 1e-12);
    }
    double *g = drand(n, -1, 1);
    ops_label_smoothing_backward_f64(g, c.logp, target, c.n, c.v, smoothing, c.scale);
    for (int k = 0; k < c.v; k++) cr_assert_eq(g[c.v + k], 0.0); /* the ignored row */
    fd_check(ls_loss, &c, c.z, g, n, "label smoothing dlogits");
    float *fg = fz(n);
    ops_label_smoothing_backward_f32(fg, tof(c.logp, n), target, c.n, c.v, smoothing, c.scale);
    CHECK_F32(fg, g, n, "label smoothing dlogits");
    double fl = ops_label_smoothing_forward_f32(tof(c.logp, n), target, c.n, c.v, smoothing, NULL);
    cr_assert(fabs(fl - want) / want < 1e-6);
}

Test(ops, label_smoothing)
{
    rng_init(&ops_rng, 34);
    ls_case(0.1);
    ls_case(0.0);
    ls_case(0.3);
}
