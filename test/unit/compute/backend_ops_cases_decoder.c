/* test_backend_ops cases of the attention decoder's ops (backend_ops_test.h): mha (query and key
 * lengths of their own, the causal mask, padded and empty key sets, dropout, strided rows; att is
 * what the backward needs of the forward, in the backend's own form, so the backward's case runs
 * the forward first and att is compared through it),
 * embedding (repeated ids accumulate) and the label-smoothing loss (ignored rows, smoothing 0). */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "core/compute/kernel_math.h"
#include "test/unit/compute/backend_ops_test.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ------------------------------------------------------------------ mha */

static const struct {
    int nb, tq, tk, h, hd, causal, pad; /* pad: extra columns of the q and k/v row strides */
    float p;
    int lens[3];
} MHA_S[] = {
    {2, 3, 7, 2, 3, 0, 0, 0, {7, 4}},          /* source attention: 3 queries over 7 frames */
    {3, 5, 5, 2, 4, 1, 1, 0, {5, 3, 1}},       /* causal self-attention, padded targets */
    {2, 6, 6, 4, 2, 1, 0, 0.25f, {6, 2}},      /* causal with dropout */
    {2, 4, 9, 1, 5, 0, 2, 0.1f, {9, 0}},       /* dropout, an empty key set */
    {1, 1, 12, 2, 3, 0, 0, 0, {5}},            /* one query against a padded cache block */
    /* head dims the CUDA backend's fused path takes (cuda/flash.cuh): odd lengths across its tiles */
    {2, 17, 17, 4, 32, 1, 1, 0, {17, 9}},          /* causal, padded targets, strided rows */
    {2, 64, 130, 1, 64, 0, 0, 0.1f, {130, 77}},    /* source attention with dropout */
    {3, 130, 130, 4, 16, 1, 0, 0.25f, {130, 64, 1}}, /* causal with dropout, one key */
    {2, 1, 64, 4, 64, 0, 2, 0, {64, 0}},           /* one query, an empty key set */
};

static void mha_sizes(int s, int *ldq, int *ldkv, size_t *nq, size_t *nkv)
{
    int d = MHA_S[s].h * MHA_S[s].hd;
    *ldq = d + MHA_S[s].pad, *ldkv = d + 2 * MHA_S[s].pad;
    *nq = (size_t)MHA_S[s].nb * MHA_S[s].tq * *ldq, *nkv = (size_t)MHA_S[s].nb * MHA_S[s].tk * *ldkv;
}

static void mha_forward_run(tb_run *r, int s)
{
    int nb = MHA_S[s].nb, tq = MHA_S[s].tq, tk = MHA_S[s].tk, h = MHA_S[s].h, hd = MHA_S[s].hd, ldq, ldkv;
    size_t nq, nkv;
    mha_sizes(s, &ldq, &ldkv, &nq, &nkv);
    uint64_t seed = tb_bits(r), stream = tb_bits(r);
    tb_shape(r, "nb %d tq %d tk %d h %d hd %d causal %d ldq %d ldkv %d p %g", nb, tq, tk, h, hd, MHA_S[s].causal,
             ldq, ldkv, MHA_S[s].p);
    float *q = tb_rand(r, nq, -1.5, 1.5), *k = tb_rand(r, nkv, -1.5, 1.5), *v = tb_rand(r, nkv, -1.5, 1.5);
    size_t ny = (size_t)nb * tq * h * hd, na = (size_t)nb * h * tq * tk;
    float *y = tb_rand(r, ny, -9, 9), *att = tb_rand(r, na, -9, 9);
    tb_be(r)->mha_forward(tb_be(r), y, att, q, ldq, k, v, ldkv, MHA_S[s].lens, nb, tq, tk, MHA_S[s].causal, h, hd,
                          MHA_S[s].p, seed, stream);
    tb_out(r, "y", y, ny);
}

static void mha_backward_run(tb_run *r, int s)
{
    int nb = MHA_S[s].nb, tq = MHA_S[s].tq, tk = MHA_S[s].tk, h = MHA_S[s].h, hd = MHA_S[s].hd, ldq, ldkv;
    size_t nq, nkv;
    mha_sizes(s, &ldq, &ldkv, &nq, &nkv);
    uint64_t seed = tb_bits(r), stream = tb_bits(r);
    tb_shape(r, "nb %d tq %d tk %d h %d hd %d causal %d ldq %d ldkv %d p %g", nb, tq, tk, h, hd, MHA_S[s].causal,
             ldq, ldkv, MHA_S[s].p);
    float *q = tb_rand(r, nq, -1.5, 1.5), *k = tb_rand(r, nkv, -1.5, 1.5), *v = tb_rand(r, nkv, -1.5, 1.5);
    /* att as this backend's forward leaves it (the same seed and stream: the same dropout mask). */
    size_t na = (size_t)nb * h * tq * tk, ny = (size_t)nb * tq * h * hd;
    float *att = tb_rand(r, na, -9, 9), *y = tb_rand(r, ny, -9, 9), *dy = tb_rand(r, ny, -1, 1);
    tb_be(r)->mha_forward(tb_be(r), y, att, q, ldq, k, v, ldkv, MHA_S[s].lens, nb, tq, tk, MHA_S[s].causal, h, hd,
                          MHA_S[s].p, seed, stream);
    /* Random: the backward overwrites every row's own columns; the gaps are compared too, so
     * they must come back as they went in on every backend. */
    float *dq = tb_rand(r, nq, -1, 1), *dk = tb_rand(r, nkv, -1, 1), *dv = tb_rand(r, nkv, -1, 1);
    tb_be(r)->mha_backward(tb_be(r), dq, dk, dv, dy, att, q, ldq, k, v, ldkv, MHA_S[s].lens, nb, tq, tk, h, hd,
                           MHA_S[s].p, seed, stream);
    tb_out(r, "dq", dq, nq);
    tb_out(r, "dk", dk, nkv);
    tb_out(r, "dv", dv, nkv);
}

/* ------------------------------------------------------------------ embedding */

static const struct {
    int n, v, d;
} EMB_S[] = {{7, 5, 3}, {33, 12, 32}, {1, 1, 1}};

static int *emb_ids(tb_run *r, int s)
{
    int *ids = tb_host(r, (size_t)EMB_S[s].n * sizeof(int));
    for (int i = 0; i < EMB_S[s].n; i++) ids[i] = (int)(tb_bits(r) % (uint64_t)EMB_S[s].v); /* repeats */
    return ids;
}

static void embedding_forward_run(tb_run *r, int s)
{
    int n = EMB_S[s].n, v = EMB_S[s].v, d = EMB_S[s].d;
    tb_shape(r, "n %d v %d d %d", n, v, d);
    float *w = tb_rand(r, (size_t)v * d, -1, 1), *y = tb_rand(r, (size_t)n * d, -9, 9);
    tb_be(r)->embedding_forward(tb_be(r), y, w, emb_ids(r, s), n, v, d);
    tb_out_exact(r, "y", y, (size_t)n * d);
}

static void embedding_backward_run(tb_run *r, int s)
{
    int n = EMB_S[s].n, v = EMB_S[s].v, d = EMB_S[s].d;
    tb_shape(r, "n %d v %d d %d", n, v, d);
    float *dy = tb_rand(r, (size_t)n * d, -1, 1), *dw = tb_rand(r, (size_t)v * d, -1, 1); /* accumulates */
    tb_be(r)->embedding_backward(tb_be(r), dw, dy, emb_ids(r, s), n, v, d);
    tb_out(r, "dw", dw, (size_t)v * d);
}

/* ------------------------------------------------------------------ label smoothing */

static const struct {
    int n, v, ignored; /* ignored: every ignored-th row has target -1 (0: none) */
    double smoothing, scale;
} LSM_S[] = {{9, 12, 3, 0.1, 1.0}, {40, 31, 0, 0.0, 0.25}, {5, 2, 2, 0.3, 2.0}};

static int *lsm_targets(tb_run *r, int s)
{
    int *t = tb_host(r, (size_t)LSM_S[s].n * sizeof(int));
    for (int i = 0; i < LSM_S[s].n; i++)
        t[i] = LSM_S[s].ignored && i % LSM_S[s].ignored == 1 ? -1 : (int)(tb_bits(r) % (uint64_t)LSM_S[s].v);
    return t;
}

static void label_smoothing_forward_run(tb_run *r, int s)
{
    int n = LSM_S[s].n, v = LSM_S[s].v;
    tb_shape(r, "n %d v %d smoothing %g", n, v, LSM_S[s].smoothing);
    float *logp = tb_upload(r, tb_host_logp(r, n, v, 3), (size_t)n * v);
    int64_t hits = -1;
    double out[2];
    out[0] = tb_be(r)->label_smoothing_forward(tb_be(r), logp, lsm_targets(r, s), n, v, LSM_S[s].smoothing, &hits);
    out[1] = (double)hits;
    tb_out_host(r, "loss, hits", out, 2);
}

static void label_smoothing_backward_run(tb_run *r, int s)
{
    int n = LSM_S[s].n, v = LSM_S[s].v;
    tb_shape(r, "n %d v %d smoothing %g scale %g", n, v, LSM_S[s].smoothing, LSM_S[s].scale);
    float *logp = tb_upload(r, tb_host_logp(r, n, v, 3), (size_t)n * v), *g = tb_rand(r, (size_t)n * v, -9, 9);
    tb_be(r)->label_smoothing_backward(tb_be(r), g, logp, lsm_targets(r, s), n, v, LSM_S[s].smoothing,
                                       LSM_S[s].scale);
    tb_out(r, "dlogits", g, (size_t)n * v);
}

/* ------------------------------------------------------------------ the cases: tb_case_<op> */

const tb_case tb_case_mha_forward = {LEN(MHA_S), TOL_ACC, mha_forward_run};
const tb_case tb_case_mha_backward = {LEN(MHA_S), TOL_ACC, mha_backward_run};
const tb_case tb_case_embedding_forward = {LEN(EMB_S), 0, embedding_forward_run};
const tb_case tb_case_embedding_backward = {LEN(EMB_S), TOL_ELEM, embedding_backward_run};
const tb_case tb_case_label_smoothing_forward = {LEN(LSM_S), TOL_ELEM, label_smoothing_forward_run};
const tb_case tb_case_label_smoothing_backward = {LEN(LSM_S), TOL_ELEM, label_smoothing_backward_run};
