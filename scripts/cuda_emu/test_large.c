/* Suite cuda_emu, linked only into scripts/cuda_emu/run's test binary: the CUDA backend against the
 * CPU backend at sizes test_backend_ops does not reach, where the work splits over many thread
 * blocks (sums over more than 32 blocks of SUM_SQUARES_BLOCK, a million dropout elements, Adam
 * over many blocks), and bit for bit where the backends promise the CPU's bits: sum_squares,
 * clip_grad_norm, Adam, dropout, scale and the embedding; the label-smoothing loss at a vocabulary
 * of 700 and its argmax's edge cases (ties, NaN, -inf). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/rng.h"
#include "core/compute/backend.h"

enum { N = 1000003 }; /* 245 blocks of 4096: 8 thread blocks of the blocked sum */

static backend *open_kind(const char *kind)
{
    esp_err err;
    backend *be = backend_open(kind, 0, 2, &err);
    cr_assert(be, "%s", err.msg);
    return be;
}

static float *host_rand(size_t n, uint64_t seed, double lo, double hi)
{
    rng g;
    rng_init(&g, seed);
    float *h = malloc(n * sizeof(float));
    cr_assert(h);
    for (size_t i = 0; i < n; i++) h[i] = (float)(lo + (hi - lo) * (double)(rng_next(&g) >> 11) * 0x1p-53);
    return h;
}

static float *upload(backend *be, const float *h, size_t n)
{
    float *d = be->alloc(be, n * sizeof(float));
    be->copy(be, d, h, n * sizeof(float), BACKEND_HOST_TO_DEVICE);
    return d;
}

static void expect_same_bits(backend *a, const float *da, backend *b, const float *db, size_t n, const char *what)
{
    float *ha = malloc(n * sizeof(float)), *hb = malloc(n * sizeof(float));
    cr_assert(ha && hb);
    a->synchronize(a);
    b->synchronize(b);
    a->copy(a, ha, da, n * sizeof(float), BACKEND_DEVICE_TO_HOST);
    b->copy(b, hb, db, n * sizeof(float), BACKEND_DEVICE_TO_HOST);
    size_t diff = 0;
    for (size_t i = 0; i < n; i++) diff += memcmp(&ha[i], &hb[i], sizeof(float)) != 0;
    cr_expect_eq(diff, 0, "%s: %zu of %zu elements differ from the CPU's bits", what, diff, n);
    free(ha);
    free(hb);
}

Test(cuda_emu, reductions_and_clipping_have_the_cpu_bits)
{
    backend *cpu = open_kind("cpu"), *cu = open_kind("cuda");
    float *h = host_rand(N, 1, -1, 1);
    float *xc = upload(cpu, h, N), *xg = upload(cu, h, N);
    double sc = cpu->sum_squares(cpu, xc, N), sg = cu->sum_squares(cu, xg, N);
    cr_expect(memcmp(&sc, &sg, sizeof sc) == 0, "sum_squares %.17g, the CPU %.17g", sg, sc);
    double tc = cpu->sum(cpu, xc, N), tg = cu->sum(cu, xg, N);
    cr_expect(fabs(tc - tg) <= 1e-12 * fabs(tc), "sum %.17g, the CPU %.17g", tg, tc);
    double nc = cpu->clip_grad_norm(cpu, xc, N, 0.5), ng = cu->clip_grad_norm(cu, xg, N, 0.5);
    cr_expect(memcmp(&nc, &ng, sizeof nc) == 0, "norm %.17g, the CPU %.17g", ng, nc);
    expect_same_bits(cpu, xc, cu, xg, N, "clipped gradients");
    cpu->scale(cpu, xc, xc, 1.0 / 3, N);
    cu->scale(cu, xg, xg, 1.0 / 3, N);
    expect_same_bits(cpu, xc, cu, xg, N, "scale");
    cpu->free(cpu, xc);
    cu->free(cu, xg);
    free(h);
    backend_close(cpu);
    backend_close(cu);
}

Test(cuda_emu, dropout_and_adam_have_the_cpu_bits)
{
    backend *cpu = open_kind("cpu"), *cu = open_kind("cuda");
    float *h = host_rand(N, 2, 0.5, 2);
    float *xc = upload(cpu, h, N), *xg = upload(cu, h, N);
    cpu->dropout_forward(cpu, xc, xc, N, 0.3f, 1234, 77);
    cu->dropout_forward(cu, xg, xg, N, 0.3f, 1234, 77);
    expect_same_bits(cpu, xc, cu, xg, N, "dropout");
    adam_coefs c = {.beta1 = 0.9f, .one_minus_beta1 = 0.1f, .beta2 = 0.999f, .one_minus_beta2 = (float)(1 - 0.999),
                    .l2 = 0.01f, .decay = 1.0f, .bc2_sqrt = (float)sqrt(1 - pow(0.999, 5)), .eps = 1e-8f,
                    .neg_step_size = (float)(-1e-3 / (1 - pow(0.9, 5)))};
    float *st[2][4];
    backend *bes[2] = {cpu, cu};
    for (int k = 0; k < 4; k++) {
        float *v = host_rand(N, 10 + k, k == 0 ? -1 : 0, k == 0 ? 1 : 1e-3);
        for (int b = 0; b < 2; b++) st[b][k] = upload(bes[b], v, N);
        free(v);
    }
    for (int b = 0; b < 2; b++) bes[b]->adam_update(bes[b], st[b][0], st[b][1], st[b][2], st[b][3], b ? xg : xc, N, &c);
    const char *names[4] = {"param", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
    for (int k = 0; k < 4; k++) expect_same_bits(cpu, st[0][k], cu, st[1][k], N, names[k]);
    for (int b = 0; b < 2; b++)
        for (int k = 0; k < 4; k++) bes[b]->free(bes[b], st[b][k]);
    cpu->free(cpu, xc);
    cu->free(cu, xg);
    free(h);
    backend_close(cpu);
    backend_close(cu);
}

Test(cuda_emu, embedding_has_the_cpu_bits)
{
    /* 5000 rows over 300 ids: every id repeats ~17 times, so the backward's per-id row lists are
     * long; twice, so dw accumulates. The backward adds each element's rows in row order, as the
     * CPU does: the same bits. */
    enum { EN = 5000, EV = 300, ED = 40 };
    backend *cpu = open_kind("cpu"), *cu = open_kind("cuda");
    float *w = host_rand((size_t)EV * ED, 3, -1, 1), *dy = host_rand((size_t)EN * ED, 4, -1, 1);
    int *ids = malloc(EN * sizeof(int));
    cr_assert(ids);
    rng g;
    rng_init(&g, 5);
    for (int r = 0; r < EN; r++) ids[r] = (int)(rng_next(&g) % EV);
    backend *bes[2] = {cpu, cu};
    float *y[2], *dw[2], *dyd[2], *wd[2];
    for (int b = 0; b < 2; b++) {
        wd[b] = upload(bes[b], w, (size_t)EV * ED);
        dw[b] = upload(bes[b], w, (size_t)EV * ED);
        dyd[b] = upload(bes[b], dy, (size_t)EN * ED);
        y[b] = bes[b]->alloc(bes[b], (size_t)EN * ED * sizeof(float));
        bes[b]->embedding_forward(bes[b], y[b], wd[b], ids, EN, EV, ED);
        for (int k = 0; k < 2; k++) bes[b]->embedding_backward(bes[b], dw[b], dyd[b], ids, EN, EV, ED);
    }
    expect_same_bits(cpu, y[0], cu, y[1], (size_t)EN * ED, "embedding_forward");
    expect_same_bits(cpu, dw[0], cu, dw[1], (size_t)EV * ED, "embedding_backward");
    for (int b = 0; b < 2; b++) {
        bes[b]->free(bes[b], y[b]);
        bes[b]->free(bes[b], dw[b]);
        bes[b]->free(bes[b], dyd[b]);
        bes[b]->free(bes[b], wd[b]);
    }
    free(ids);
    free(w);
    free(dy);
    backend_close(cpu);
    backend_close(cu);
}

/* One row of log-probabilities (v values) on both backends: hits of the label-smoothing forward
 * with target tg (whether the row's first maximum is tg, NaN never winning except at index 0, as
 * the CPU's loop) must agree. */
static void expect_same_argmax(backend *cpu, backend *cu, const float *row, int v, int tg, const char *what)
{
    float *dc = upload(cpu, row, (size_t)v), *dg = upload(cu, row, (size_t)v);
    int64_t hc = -1, hg = -1;
    cpu->label_smoothing_forward(cpu, dc, &tg, 1, v, 0.1, &hc);
    cu->label_smoothing_forward(cu, dg, &tg, 1, v, 0.1, &hg);
    cr_expect_eq(hg, hc, "%s (target %d): cuda %lld hits, the CPU %lld", what, tg, (long long)hg, (long long)hc);
    cpu->free(cpu, dc);
    cu->free(cu, dg);
}

Test(cuda_emu, label_smoothing_matches_the_cpu)
{
    /* A vocabulary of 700 (22 columns per lane) and 300 rows, every 7th ignored: the loss (a sum in
     * double, rows added in order on the host) within 1e-12, the same hits, the gradient within
     * float rounding; then the argmax's edge cases row by row. */
    enum { LN = 300, LV = 700 };
    backend *cpu = open_kind("cpu"), *cu = open_kind("cuda");
    float *z = host_rand((size_t)LN * LV, 6, -4, 4);
    for (int r = 0; r < LN; r++) { /* log_softmax of z, in double */
        float *zr = z + (size_t)r * LV;
        double mx = -INFINITY, s = 0;
        for (int c = 0; c < LV; c++) mx = fmax(mx, zr[c]);
        for (int c = 0; c < LV; c++) s += exp(zr[c] - mx);
        for (int c = 0; c < LV; c++) zr[c] = (float)(zr[c] - mx - log(s));
    }
    int *tg = malloc(LN * sizeof(int));
    cr_assert(tg);
    rng g;
    rng_init(&g, 7);
    for (int r = 0; r < LN; r++) tg[r] = r % 7 == 3 ? -1 : (int)(rng_next(&g) % LV);
    for (int r = 0; r < LN; r += 5) /* some rows hit: the target is the row's maximum */
        if (tg[r] >= 0) z[(size_t)r * LV + tg[r]] = -1e-4f;
    float *lc = upload(cpu, z, (size_t)LN * LV), *lg = upload(cu, z, (size_t)LN * LV);
    int64_t hc = -1, hg = -1;
    double sc = cpu->label_smoothing_forward(cpu, lc, tg, LN, LV, 0.1, &hc);
    double sg = cu->label_smoothing_forward(cu, lg, tg, LN, LV, 0.1, &hg);
    cr_expect(fabs(sg - sc) <= 1e-12 * fabs(sc), "loss %.17g, the CPU %.17g", sg, sc);
    cr_expect(hc > 0 && hg == hc, "hits %lld, the CPU %lld", (long long)hg, (long long)hc);
    float *gc = cpu->alloc(cpu, (size_t)LN * LV * sizeof(float)), *gg = cu->alloc(cu, (size_t)LN * LV * sizeof(float));
    cpu->label_smoothing_backward(cpu, gc, lc, tg, LN, LV, 0.1, 0.5);
    cu->label_smoothing_backward(cu, gg, lg, tg, LN, LV, 0.1, 0.5);
    float *hgc = malloc((size_t)LN * LV * sizeof(float)), *hgg = malloc((size_t)LN * LV * sizeof(float));
    cr_assert(hgc && hgg);
    cpu->copy(cpu, hgc, gc, (size_t)LN * LV * sizeof(float), BACKEND_DEVICE_TO_HOST);
    cu->copy(cu, hgg, gg, (size_t)LN * LV * sizeof(float), BACKEND_DEVICE_TO_HOST);
    size_t bad = 0;
    for (size_t i = 0; i < (size_t)LN * LV; i++) bad += !(fabsf(hgg[i] - hgc[i]) <= 1e-6f * fabsf(hgc[i]) + 1e-30f);
    cr_expect_eq(bad, 0, "label_smoothing_backward: %zu elements differ from the CPU's beyond float rounding", bad);
    /* Argmax edge cases on one row of LV: ties (the first wins, across lanes and within one), a NaN
     * at index 0 (the CPU keeps index 0), NaNs elsewhere (never win), all -inf (index 0). */
    float *row = malloc(LV * sizeof(float));
    cr_assert(row);
    for (int c = 0; c < LV; c++) row[c] = -5.0f - (float)(c % 13) * 0.25f;
    row[40] = row[9] = row[600] = -0.5f; /* lanes 8 and 9, 40 and 600 on the same lane */
    expect_same_argmax(cpu, cu, row, LV, 9, "tie, first");
    expect_same_argmax(cpu, cu, row, LV, 40, "tie, second");
    row[9] = -0.75f;
    expect_same_argmax(cpu, cu, row, LV, 40, "tie on one lane, first");
    expect_same_argmax(cpu, cu, row, LV, 600, "tie on one lane, second");
    row[3] = NAN;
    expect_same_argmax(cpu, cu, row, LV, 40, "NaN elsewhere");
    row[0] = NAN;
    expect_same_argmax(cpu, cu, row, LV, 0, "NaN at 0");
    expect_same_argmax(cpu, cu, row, LV, 40, "NaN at 0, the maximum elsewhere");
    for (int c = 0; c < LV; c++) row[c] = -INFINITY;
    expect_same_argmax(cpu, cu, row, LV, 0, "all -inf");
    expect_same_argmax(cpu, cu, row, LV, 1, "all -inf, not the first");
    free(row);
    free(hgc);
    free(hgg);
    cpu->free(cpu, gc);
    cu->free(cu, gg);
    cpu->free(cpu, lc);
    cu->free(cu, lg);
    free(tg);
    free(z);
    backend_close(cpu);
    backend_close(cu);
}
