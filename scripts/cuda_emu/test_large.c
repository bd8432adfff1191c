/* Suite cuda_emu, linked only into scripts/cuda_emu/run's test binary: the CUDA backend against the
 * CPU backend at sizes test_backend_ops does not reach, where the work splits over many thread
 * blocks (sums over more than 32 blocks of SUM_SQUARES_BLOCK, a million dropout elements, Adam
 * over many blocks), and bit for bit where the backends promise the CPU's bits: sum_squares,
 * clip_grad_norm, Adam, dropout, scale and the embedding; the label-smoothing loss at a vocabulary
 * of 700 and its argmax's edge cases (ties, NaN, -inf); the Conformer's ops and the LSTM cell (at
 * the end). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/rng.h"
#include "core/compute/backend.h"
#include "core/compute/backend_profile.h"

enum { N = 1000003 }; /* 245 blocks of 4096: 8 thread blocks of the blocked sum */

static backend *open_kind(const char *name)
{
    esp_err err;
    backend_kind kind;
    cr_assert_eq(backend_kind_parse(name, &kind, &err), 0, "%s", err.msg);
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

/* trainer.accelerator auto (and an inference device of auto) takes the GPU where one is visible,
 * as Lightning does; cpu stays cpu. */
Test(cuda_emu, auto_accelerator_takes_the_gpu)
{
    esp_err err;
    cr_assert_gt(backend_cuda_devices(), 0);
    backend_kind k;
    cr_assert(backend_kind_for("auto", &k, &err) == 0 && k == BACKEND_CUDA);
    cr_assert(backend_kind_for(NULL, &k, &err) == 0 && k == BACKEND_CUDA);
    cr_assert(backend_kind_for("cpu", &k, &err) == 0 && k == BACKEND_CPU);
}

Test(cuda_emu, reductions_clipping_and_ema_have_the_cpu_bits)
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
    /* the EMA of the weights: torch's float products and sum */
    float *a = host_rand(N, 3, -1, 1);
    float *ac = upload(cpu, a, N), *ag = upload(cu, a, N);
    cpu->ema_update(cpu, ac, xc, N, 0.999f, (float)(1.0 - 0.999), 0);
    cu->ema_update(cu, ag, xg, N, 0.999f, (float)(1.0 - 0.999), 0);
    expect_same_bits(cpu, ac, cu, ag, N, "ema_update");
    cpu->free(cpu, ac);
    cu->free(cu, ag);
    free(a);
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

/* The profiler on a device backend times ops by marks (CUDA events) on the stream: no synchronize
 * around an op; the times are read at the next copy to the host or synchronize; a mark's time
 * runs forward; stop gives the backend its own entries back. */
Test(cuda_emu, profiler_times_device_ops_with_events)
{
    backend *cu = open_kind("cuda");
    cr_assert(cu->mark && cu->mark_seconds && cu->marks_reset);
    int a = cu->mark(cu), b = cu->mark(cu);
    cr_assert(b == a + 1 && cu->mark_seconds(cu, a, b) >= 0);
    cu->marks_reset(cu);
    cr_assert_eq(cu->mark(cu), 0, "marks count from 0 after a reset");
    cu->marks_reset(cu);
    backend before = *cu;
    /* given peaks: the profiler measures none (a 4096-square GEMM is hours on the emulation) */
    setenv("ESPNET3_PROFILE_PEAK_GFLOPS", "1000", 1);
    setenv("ESPNET3_PROFILE_PEAK_GBPS", "1000", 1);
    enum { M = 40, K = 30 };
    float *h = host_rand((size_t)M * K, 7, -1, 1), *x = upload(cu, h, (size_t)M * K);
    float *y = cu->alloc(cu, (size_t)M * M * sizeof(float));
    backend_profile_start(cu);
    cr_assert(cu->synchronize != before.synchronize && cu->mark == before.mark);
    prof_layer outer = backend_profile_enter(cu, PROF_LAYER_DECODER);
    for (int i = 0; i < 3; i++) cu->gemm(cu, 0, 1, M, M, K, 1.0f, x, K, x, K, 0.0f, y, M);
    backend_profile_leave(cu, outer);
    cu->add(cu, y, y, y, (size_t)M * M);
    float back[M * M];
    cu->copy(cu, back, y, sizeof back, BACKEND_DEVICE_TO_HOST);
    prof_counts g = backend_profile_counts(cu, BACKEND_OP_GEMM, PROF_LAYER_DECODER);
    cr_assert_eq(g.calls, 3);
    cr_assert(g.seconds > 0, "the GEMMs' event times were read: %g s", g.seconds);
    cr_assert_float_eq(g.flops, 3 * 2.0 * M * M * K, 0.5);
    prof_counts ad = backend_profile_counts(cu, BACKEND_OP_ADD, PROF_LAYER_OTHER);
    cr_assert(ad.calls == 1 && ad.seconds > 0);
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    backend_profile_report(cu, "emulated", mem);
    fclose(mem);
    cr_assert(strstr(text, "profile (cuda backend): emulated:") && strstr(text, "by events recorded around it"), "%s",
              text);
    free(text);
    backend_profile_stop(cu);
    unsetenv("ESPNET3_PROFILE_PEAK_GFLOPS");
    unsetenv("ESPNET3_PROFILE_PEAK_GBPS");
    cr_assert(cu->synchronize == before.synchronize && cu->gemm == before.gemm && cu->copy == before.copy);
    cr_assert_eq(cu->mark(cu), 0, "stop left no marks pending");
    cu->marks_reset(cu);
    free(h);
    cu->free(cu, x), cu->free(cu, y);
    backend_close(cu);
}

/* SGD (nesterov momentum after its first step, weight decay, maximize) and Adadelta, three updates
 * each on a million elements: the kernels compute sgd_update_one and adadelta_update_one as the
 * CPU loops do, to the bit. */
Test(cuda_emu, sgd_and_adadelta_have_the_cpu_bits)
{
    backend *bes[2] = {open_kind("cpu"), open_kind("cuda")};
    float *g = host_rand(N, 21, -0.5, 0.5), *p0 = host_rand(N, 22, -1, 1);
    float *st[2][4]; /* params, momentum_buffer, square_avg, acc_delta */
    float *dg[2];
    for (int b = 0; b < 2; b++) {
        dg[b] = upload(bes[b], g, N);
        st[b][0] = upload(bes[b], p0, N);
        for (int k = 1; k < 4; k++) st[b][k] = bes[b]->alloc(bes[b], N * sizeof(float)); /* zeroed */
    }
    for (int step = 1; step <= 3; step++) {
        sgd_coefs sc = {.weight_decay = 1e-2f, .momentum = 0.9f, .one_minus_dampening = 1.0f, .neg_lr = -0.05f,
                        .nesterov = 1, .maximize = 1, .first = step == 1};
        adadelta_coefs ac = {.weight_decay = 1e-3f, .rho = 0.9f, .one_minus_rho = (float)(1 - 0.9), .eps = 1e-6f,
                             .neg_lr = -1.0f, .maximize = 0};
        for (int b = 0; b < 2; b++) {
            bes[b]->sgd_update(bes[b], st[b][0], st[b][1], dg[b], N, &sc);
            bes[b]->adadelta_update(bes[b], st[b][0], st[b][2], st[b][3], dg[b], N, &ac);
        }
    }
    const char *names[4] = {"param", "momentum_buffer", "square_avg", "acc_delta"};
    for (int k = 0; k < 4; k++) expect_same_bits(bes[0], st[0][k], bes[1], st[1][k], N, names[k]);
    for (int b = 0; b < 2; b++) {
        for (int k = 0; k < 4; k++) bes[b]->free(bes[b], st[b][k]);
        bes[b]->free(bes[b], dg[b]);
        backend_close(bes[b]);
    }
    free(g), free(p0);
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

/* ---- the Conformer's ops. Swish and GLU within float rounding of the CPU (the kernels take expf
 * per element, the CPU a block at a time from libmvec, core/compute/vmath.h: a few ulp apart). Bit
 * for bit where the CUDA backend promises the CPU's bits: the depthwise
 * conv1d (per-element and per-weight ownership in the CPU's order; dw and db accumulated twice),
 * BatchNorm (per-channel sums in double in row order: y, mean, rstd, the running statistics,
 * the count, eval mode, the backward) and relpos_encoding; the rel-pos attention within float
 * rounding of the CPU (GEMM and softmax sums in another order). */

/* Both backends' copies of one host array. */
typedef struct pair {
    float *d[2];
    size_t n;
} pair;

static pair pair_up(backend *bes[2], const float *h, size_t n)
{
    pair p = {{upload(bes[0], h, n), upload(bes[1], h, n)}, n};
    return p;
}

static pair pair_rand(backend *bes[2], size_t n, uint64_t seed, double lo, double hi)
{
    float *h = host_rand(n, seed, lo, hi);
    pair p = pair_up(bes, h, n);
    free(h);
    return p;
}

static void pair_same(backend *bes[2], pair p, const char *what)
{
    expect_same_bits(bes[0], p.d[0], bes[1], p.d[1], p.n, what);
}

/* The largest difference within tol of the largest magnitude (n elements from the start), and
 * not all equal by accident of the inputs: the two sides really computed. */
static void expect_within(backend *bes[2], pair p, size_t n, double tol, const char *what)
{
    float *h[2];
    for (int b = 0; b < 2; b++) {
        h[b] = malloc(n * sizeof(float));
        cr_assert(h[b]);
        bes[b]->synchronize(bes[b]);
        bes[b]->copy(bes[b], h[b], p.d[b], n * sizeof(float), BACKEND_DEVICE_TO_HOST);
    }
    double big = 0, diff = 0;
    for (size_t i = 0; i < n; i++) {
        cr_assert(isfinite(h[0][i]) && isfinite(h[1][i]), "%s: element %zu not finite", what, i);
        big = fmax(big, fabs(h[0][i]));
        diff = fmax(diff, fabs((double)h[0][i] - h[1][i]));
    }
    cr_expect(big > 0 && diff <= tol * big, "%s: differs from the CPU by %g of its largest value %g", what,
              diff / big, big);
    free(h[0]);
    free(h[1]);
}

static void pair_free(backend *bes[2], pair p)
{
    for (int b = 0; b < 2; b++) bes[b]->free(bes[b], p.d[b]);
}

Test(cuda_emu, swish_glu_within_rounding_dwconv1d_with_the_cpu_bits)
{
    enum { NB = 3, T = 700, C = 96, K = 31 };
    size_t n = (size_t)NB * T * C;
    backend *bes[2] = {open_kind("cpu"), open_kind("cuda")};
    pair x = pair_rand(bes, n, 20, -12, 12), dy = pair_rand(bes, n, 21, -1, 1), y = pair_rand(bes, n, 22, 0, 1);
    pair w = pair_rand(bes, (size_t)C * K, 23, -1, 1), bias = pair_rand(bes, C, 24, -1, 1);
    pair dw = pair_rand(bes, (size_t)C * K, 25, -1, 1), db = pair_rand(bes, C, 26, -1, 1);
    for (int b = 0; b < 2; b++) bes[b]->swish_forward(bes[b], y.d[b], x.d[b], n);
    expect_within(bes, y, n, 1e-6, "swish_forward");
    for (int b = 0; b < 2; b++) bes[b]->swish_backward(bes[b], y.d[b], dy.d[b], x.d[b], n);
    expect_within(bes, y, n, 1e-6, "swish_backward");
    for (int b = 0; b < 2; b++) bes[b]->glu_forward(bes[b], y.d[b], x.d[b], NB * T / 2, C);
    expect_within(bes, y, n / 2, 1e-6, "glu_forward");
    for (int b = 0; b < 2; b++) bes[b]->glu_backward(bes[b], y.d[b], dy.d[b], x.d[b], NB * T / 2, C);
    expect_within(bes, y, n, 1e-6, "glu_backward");
    for (int b = 0; b < 2; b++) bes[b]->dwconv1d_forward(bes[b], y.d[b], x.d[b], w.d[b], bias.d[b], NB, T, C, K);
    pair_same(bes, y, "dwconv1d_forward");
    for (int b = 0; b < 2; b++)
        for (int k = 0; k < 2; k++)
            bes[b]->dwconv1d_backward(bes[b], y.d[b], dw.d[b], db.d[b], dy.d[b], x.d[b], w.d[b], NB, T, C, K);
    pair_same(bes, y, "dwconv1d_backward dx");
    pair_same(bes, dw, "dwconv1d_backward dw");
    pair_same(bes, db, "dwconv1d_backward db");
    pair all[] = {x, dy, y, w, bias, dw, db};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) pair_free(bes, all[i]);
    backend_close(bes[0]);
    backend_close(bes[1]);
}

/* The GRU cell within float rounding of the CPU (the CPU's exp and tanh a block at a time, the
 * kernels' per element): rows of an odd H over many thread blocks, the first step (h_prev NULL, no
 * dh_prev) and a later one; the backward (no exp) the CPU's bits. */
Test(cuda_emu, gru_cell_within_rounding)
{
    enum { LN = 97, LH = 1031 };
    size_t nh = (size_t)LN * LH;
    backend *bes[2] = {open_kind("cpu"), open_kind("cuda")};
    pair gi = pair_rand(bes, 3 * nh, 50, -6, 6), gh = pair_rand(bes, 3 * nh, 51, -6, 6);
    pair hp = pair_rand(bes, nh, 52, -1, 1), dh = pair_rand(bes, nh, 53, -1, 1), h = pair_rand(bes, nh, 54, -9, 9);
    pair act = pair_rand(bes, 4 * nh, 55, -9, 9), dgi = pair_rand(bes, 3 * nh, 56, -9, 9);
    pair dgh = pair_rand(bes, 3 * nh, 57, -9, 9), dhp = pair_rand(bes, nh, 58, -9, 9);
    for (int first = 0; first < 2; first++) {
        for (int b = 0; b < 2; b++)
            bes[b]->gru_cell_forward(bes[b], h.d[b], act.d[b], gi.d[b], gh.d[b], first ? NULL : hp.d[b], LN, LH);
        expect_within(bes, h, nh, 1e-6, "gru_cell_forward h");
        expect_within(bes, act, 4 * nh, 1e-6, "gru_cell_forward act");
        for (int b = 0; b < 2; b++)
            bes[b]->gru_cell_backward(bes[b], dgi.d[b], dgh.d[b], first ? NULL : dhp.d[b], dh.d[b], act.d[b],
                                      first ? NULL : hp.d[b], LN, LH);
        expect_within(bes, dgi, 3 * nh, 1e-6, "gru_cell_backward dgi");
        expect_within(bes, dgh, 3 * nh, 1e-6, "gru_cell_backward dgh");
        if (!first) expect_within(bes, dhp, nh, 1e-6, "gru_cell_backward dh_prev");
    }
    pair all[] = {gi, gh, hp, dh, h, act, dgi, dgh, dhp};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) pair_free(bes, all[i]);
    backend_close(bes[0]);
    backend_close(bes[1]);
}

/* The LSTM cell within float rounding of the CPU (its sigmoids take exp a block at a time from
 * libmvec, the kernels expf per element; tanh is the host's tanhf on both sides here): rows of an
 * odd H over many thread blocks, the first step (c_prev NULL, no dc, no dc_prev) and a later one. */
Test(cuda_emu, lstm_cell_within_rounding)
{
    enum { LN = 97, LH = 1031 };
    size_t nh = (size_t)LN * LH;
    backend *bes[2] = {open_kind("cpu"), open_kind("cuda")};
    pair g = pair_rand(bes, 4 * nh, 40, -6, 6), cp = pair_rand(bes, nh, 41, -2, 2), dh = pair_rand(bes, nh, 42, -1, 1);
    pair dc = pair_rand(bes, nh, 43, -1, 1), h = pair_rand(bes, nh, 44, -9, 9), c = pair_rand(bes, nh, 45, -9, 9);
    pair act = pair_rand(bes, 4 * nh, 46, -9, 9), dg = pair_rand(bes, 4 * nh, 47, -9, 9);
    pair dcp = pair_rand(bes, nh, 48, -9, 9);
    for (int first = 0; first < 2; first++) {
        for (int b = 0; b < 2; b++)
            bes[b]->lstm_cell_forward(bes[b], h.d[b], c.d[b], act.d[b], g.d[b], first ? NULL : cp.d[b], LN, LH);
        expect_within(bes, h, nh, 1e-6, "lstm_cell_forward h");
        expect_within(bes, c, nh, 1e-6, "lstm_cell_forward c");
        expect_within(bes, act, 4 * nh, 1e-6, "lstm_cell_forward act");
        for (int b = 0; b < 2; b++)
            bes[b]->lstm_cell_backward(bes[b], dg.d[b], first ? NULL : dcp.d[b], dh.d[b], first ? NULL : dc.d[b],
                                       act.d[b], first ? NULL : cp.d[b], c.d[b], LN, LH);
        expect_within(bes, dg, 4 * nh, 1e-6, "lstm_cell_backward dgates");
        if (!first) expect_within(bes, dcp, nh, 1e-6, "lstm_cell_backward dc_prev");
    }
    pair all[] = {g, cp, dh, dc, h, c, act, dg, dcp};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) pair_free(bes, all[i]);
    backend_close(bes[0]);
    backend_close(bes[1]);
}

Test(cuda_emu, batchnorm_and_relpos_have_the_cpu_bits)
{
    enum { BN = 5000, BC = 300, RT = 600, RD = 256 };
    size_t n = (size_t)BN * BC;
    backend *bes[2] = {open_kind("cpu"), open_kind("cuda")};
    pair x = pair_rand(bes, n, 30, -3, 5), dy = pair_rand(bes, n, 31, -1, 1), y = pair_rand(bes, n, 32, 0, 1);
    pair w = pair_rand(bes, BC, 33, 0.5, 1.5), bias = pair_rand(bes, BC, 34, -1, 1);
    pair mean = pair_rand(bes, BC, 35, 0, 1), rstd = pair_rand(bes, BC, 36, 0, 1);
    pair rm = pair_rand(bes, BC, 37, -1, 1), rv = pair_rand(bes, BC, 38, 0.5, 2);
    pair dw = pair_rand(bes, BC, 39, -1, 1), db = pair_rand(bes, BC, 40, -1, 1);
    float cnt = 7;
    pair count = pair_up(bes, &cnt, 1);
    for (int b = 0; b < 2; b++)
        bes[b]->batchnorm_forward(bes[b], y.d[b], mean.d[b], rstd.d[b], x.d[b], w.d[b], bias.d[b], rm.d[b], rv.d[b],
                                  count.d[b], BN, BC, 1e-5, 0.1, 1);
    pair_same(bes, y, "batchnorm_forward (train) y");
    pair_same(bes, mean, "batchnorm_forward mean");
    pair_same(bes, rstd, "batchnorm_forward rstd");
    pair_same(bes, rm, "batchnorm_forward running mean");
    pair_same(bes, rv, "batchnorm_forward running var");
    pair_same(bes, count, "batchnorm_forward count");
    for (int b = 0; b < 2; b++)
        bes[b]->batchnorm_backward(bes[b], x.d[b], dw.d[b], db.d[b], dy.d[b], y.d[b], w.d[b], mean.d[b], rstd.d[b],
                                   BN, BC);
    pair_same(bes, x, "batchnorm_backward dx");
    pair_same(bes, dw, "batchnorm_backward dw");
    pair_same(bes, db, "batchnorm_backward db");
    for (int b = 0; b < 2; b++)
        bes[b]->batchnorm_forward(bes[b], y.d[b], NULL, NULL, dy.d[b], w.d[b], bias.d[b], rm.d[b], rv.d[b], NULL, BN,
                                  BC, 1e-5, 0.1, 0);
    pair_same(bes, y, "batchnorm_forward (eval) y");
    size_t np = (size_t)(2 * RT - 1) * RD;
    pair pe = {{bes[0]->alloc(bes[0], np * sizeof(float)), bes[1]->alloc(bes[1], np * sizeof(float))}, np};
    for (int b = 0; b < 2; b++) bes[b]->relpos_encoding(bes[b], pe.d[b], RT, RD);
    pair_same(bes, pe, "relpos_encoding");
    pair all[] = {x, dy, y, w, bias, mean, rstd, rm, rv, dw, db, count, pe};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) pair_free(bes, all[i]);
    backend_close(bes[0]);
    backend_close(bes[1]);
}

/* The rel-pos attention at t = 70 (three key tiles, 139 relative positions), lens {70, 33, 0},
 * dropout 0.1, head dim 16 (the fused path, cuda/flash.cuh): within float rounding of the CPU
 * (NMSE below 1e-10), the backward's du / dvb accumulated onto their old values. att is each
 * backend's own (the weights on the CPU, the row logsumexps on the fused path): not compared. */
static void expect_close(backend *bes[2], pair p, const char *what)
{
    float *h[2];
    for (int b = 0; b < 2; b++) {
        h[b] = malloc(p.n * sizeof(float));
        cr_assert(h[b]);
        bes[b]->synchronize(bes[b]);
        bes[b]->copy(bes[b], h[b], p.d[b], p.n * sizeof(float), BACKEND_DEVICE_TO_HOST);
    }
    double e = 0, s = 0;
    for (size_t i = 0; i < p.n; i++) e += ((double)h[1][i] - h[0][i]) * ((double)h[1][i] - h[0][i]), s += (double)h[0][i] * h[0][i];
    cr_expect(e <= 1e-10 * s, "%s: NMSE %.3g against the CPU", what, s > 0 ? e / s : e);
    free(h[0]);
    free(h[1]);
}

/* chunk, left: the asr_transducer chunk mask (0: none; the fused path for HD 16 otherwise); simp:
 * simplified_att_score (no u / vb, p one scalar per head; never the fused path). */
static void relattn_case(int chunk, int left, int simp)
{
    enum { NB = 3, T = 70, H = 4, HD = 16, D = H * HD, LD = 3 * D, TP = 2 * T - 1 };
    int lens[NB] = {70, 33, 0};
    backend *bes[2] = {open_kind("cpu"), open_kind("cuda")};
    size_t nq = (size_t)NB * T * LD, ny = (size_t)NB * T * D, na = (size_t)NB * H * T * T;
    pair qkv = pair_rand(bes, nq, 50, -1, 1), dqkv = pair_rand(bes, nq, 51, -1, 1), p = pair_rand(bes, (size_t)TP * (simp ? H : D), 52, -1, 1);
    pair u = pair_rand(bes, D, 53, -0.5, 0.5), vb = pair_rand(bes, D, 54, -0.5, 0.5), dy = pair_rand(bes, ny, 55, -1, 1);
    pair y = pair_rand(bes, ny, 56, 0, 1), att = pair_rand(bes, na, 57, 0, 1), dp = pair_rand(bes, (size_t)TP * (simp ? H : D), 58, 0, 1);
    pair du = pair_rand(bes, D, 59, -1, 1), dvb = pair_rand(bes, D, 60, -1, 1);
    for (int b = 0; b < 2; b++) {
        float *q = qkv.d[b], *dq = dqkv.d[b];
        float *ub = simp ? NULL : u.d[b], *vbb = simp ? NULL : vb.d[b];
        bes[b]->relattn_forward(bes[b], y.d[b], att.d[b], q, q + D, q + 2 * D, LD, p.d[b], ub, vbb, lens, NB, T, H, HD,
                                chunk, left, 0.1f, 99, 3);
        bes[b]->relattn_backward(bes[b], dq, dq + D, dq + 2 * D, dp.d[b], simp ? NULL : du.d[b], simp ? NULL : dvb.d[b],
                                 dy.d[b], att.d[b], q, q + D, q + 2 * D, LD, p.d[b], ub, vbb, lens, NB, T, H, HD, chunk,
                                 left, 0.1f, 99, 3);
    }
    expect_close(bes, y, "relattn_forward y");
    expect_close(bes, dqkv, "relattn_backward dq dk dv");
    expect_close(bes, dp, "relattn_backward dp");
    if (!simp) expect_close(bes, du, "relattn_backward du"), expect_close(bes, dvb, "relattn_backward dvb");
    pair all[] = {qkv, dqkv, p, u, vb, dy, y, att, dp, du, dvb};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) pair_free(bes, all[i]);
    backend_close(bes[0]);
    backend_close(bes[1]);
}

Test(cuda_emu, relattn_matches_the_cpu) { relattn_case(0, 0, 0); }
/* 8-frame chunks with 2 left chunks: utterance 1's padded queries past frame 40 see no key */
Test(cuda_emu, relattn_chunk_mask_matches_the_cpu) { relattn_case(8, 2, 0); }
Test(cuda_emu, relattn_simplified_matches_the_cpu) { relattn_case(0, 0, 1), relattn_case(8, 2, 1); }

/* ---- the run's arena (be->reserve): a few training steps of a tiny Transformer with hybrid
 * CTC/attention on the CUDA backend whose parameters, gradients, Adam moments and activations
 * come from one arena of the planner's size (core/nn/model_plan.h) plus the batch's features,
 * and whose batch copies go through host-pinned staging: the same losses and parameters as the
 * CPU backend, the arena exactly full (nothing allocated past it), and no cudaMalloc in the
 * steady-state steps (emu.cpp counts them). */
#include "core/compute/backend_cuda.h"
#include "core/nn/model_plan.h"
#include "core/train/optim.h"

long emu_malloc_calls(void);

/* The first step's gradients: within 1e-4 of the largest one. */
static void grads_close(const asr_model *a, const asr_model *b)
{
    size_t n = a->table.total;
    float *ga = malloc(n * sizeof(float)), *gb = malloc(n * sizeof(float));
    cr_assert(ga && gb);
    a->be->copy(a->be, ga, a->grads, n * sizeof(float), BACKEND_DEVICE_TO_HOST);
    b->be->copy(b->be, gb, b->grads, n * sizeof(float), BACKEND_DEVICE_TO_HOST);
    double big = 0, worst = 0;
    for (size_t i = 0; i < n; i++) big = fmax(big, fabs(ga[i])), worst = fmax(worst, fabs((double)ga[i] - gb[i]));
    cr_expect(worst <= 1e-4 * big, "first step's gradients differ by up to %g (largest %g)", worst, big);
    free(ga), free(gb);
}

Test(cuda_emu, arena_training_steps_match_the_cpu)
{
    enum { B = 3, T = 70, L = 8, STEPS = 4 };
    model_dims d = {.idim = 20, .d = 32, .heads = 4, .ff = 64, .blocks = 2, .vocab = 23, .dec_blocks = 1,
                    .dec_heads = 4, .dec_ff = 64};
    d.f2 = ((d.idim - 1) / 2 - 1) / 2;
    model_rates rates = {.ctc_weight = 0.3f, .lsm_weight = 0.1f};
    arena_plan plan;
    optim_opts oo = optim_opts_default(OPTIM_ADAM);
    model_arena_plan(&plan, &d, &rates, B, T, L, optim_buffer_count(&oo));
    size_t nfeat = (size_t)B * T * d.idim, feat_bytes = (nfeat * sizeof(float) + 255) / 256 * 256;

    backend *bes[2] = {open_kind("cpu"), open_kind("cuda")};
    bes[1]->reserve(bes[1], plan.total + feat_bytes, plan.staging_bytes);
    float *host = host_rand(nfeat, 11, -1, 1);
    int lens[B], llens[B], labels[B * L];
    for (int b = 0; b < B; b++) {
        lens[b] = T - 9 * b, llens[b] = L - 2 * b;
        for (int i = 0; i < L; i++) labels[b * L + i] = i < llens[b] ? 1 + (5 * b + 3 * i) % (d.vocab - 2) : -1;
    }
    asr_model m[2];
    optim_state opt[2];
    float *feats[2];
    double loss[2][STEPS];
    long mallocs_after_first = 0;
    for (int k = 0; k < 2; k++) {
        asr_model_init(&m[k], bes[k], &d, &rates);
        optim_state_init(&opt[k], bes[k], m[k].table.total, &oo);
        asr_model_reserve(&m[k], B, T, L);
        feats[k] = bes[k]->alloc(bes[k], nfeat * sizeof(float));
        float *p0 = host_rand(m[k].table.state_total, 3, -0.2, 0.2);
        asr_model_params_from_host(&m[k], p0);
        free(p0);
    }
    for (int s = 0; s < STEPS; s++)
        for (int k = 0; k < 2; k++) {
            if (k == 1 && s == 1) mallocs_after_first = emu_malloc_calls();
            bes[k]->copy(bes[k], feats[k], host, nfeat * sizeof(float), BACKEND_HOST_TO_DEVICE);
            asr_model_zero_grad(&m[k]);
            asr_model_forward(&m[k], feats[k], lens, B, T, 1, 5 + (uint64_t)s);
            loss[k][s] = asr_model_loss(&m[k], labels, llens, L, NULL);
            asr_model_backward(&m[k], 1.0f);
            if (s == 0 && k == 1) grads_close(&m[0], &m[1]);
            optim_step(m[k].params, &opt[k], m[k].grads, &oo, 1e-3);
        }
    long steady = emu_malloc_calls() - mallocs_after_first;
    for (int s = 0; s < STEPS; s++)
        cr_expect(fabs(loss[0][s] - loss[1][s]) <= 1e-4 * fabs(loss[0][s]), "step %d: loss %.9g on cuda, %.9g on cpu",
                  s, loss[1][s], loss[0][s]);
    size_t n = m[0].table.total;
    float *pa = malloc(n * sizeof(float)), *pb = malloc(n * sizeof(float));
    cr_assert(pa && pb);
    asr_model_params_to_host(&m[0], pa);
    asr_model_params_to_host(&m[1], pb);
    double worst = 0;
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)pa[i] - pb[i]));
    /* Adam's first updates are about lr x sign(gradient) wherever the gradient is tiny, so a
     * rounding difference there moves a parameter by up to lr: 5% of STEPS x lr is the bound. */
    cr_expect(worst <= 0.05 * STEPS * 1e-3, "parameters after %d steps differ by up to %g", STEPS, worst);
    size_t arena = 0, used = 0, outside = 0;
    backend_cuda_arena_stats(bes[1], &arena, &used, &outside);
    cr_expect_eq(arena, plan.total + feat_bytes, "arena %zu bytes, plan %zu + features %zu", arena, plan.total,
                 feat_bytes);
    cr_expect_eq(used, arena, "the model used %zu of the arena's %zu bytes", used, arena);
    cr_expect_eq(outside, 0, "%zu buffers allocated past the arena", outside);
    cr_expect_eq(steady, 0, "%ld cudaMalloc calls in steps 2..%d", steady, STEPS);
    fprintf(stderr, "cuda_emu arena: %zu bytes (plan %zu + features %zu), all used; losses %.6f .. %.6f equal the "
            "CPU's within 1e-4, first gradients too, parameters within %.2g; %ld cudaMalloc calls in the steady-state steps\n", arena,
            plan.total, feat_bytes, loss[1][0], loss[1][STEPS - 1], worst, steady);
    free(pa), free(pb), free(host);
    for (int k = 0; k < 2; k++) {
        bes[k]->free(bes[k], feats[k]);
        optim_state_free(&opt[k]);
        asr_model_free(&m[k]);
        backend_close(bes[k]);
    }
    arena_plan_free(&plan);
}

/* The fused attention (cuda/flash.cuh) is what the CUDA backend takes at head dim 32 and equals
 * its unfused path (ESPNET3_CUDA_FLASH=0) within float rounding: causal self-attention over padded
 * keys with dropout 0.1 (the same mask on both paths), forward and backward. The fused att holds
 * the rows' logsumexp (row 0 sees key 0 alone: q_0 . k_0 / sqrt(hd)) and the causal flag after
 * them; the unfused att holds the weights (row 0: 1). */
Test(cuda_emu, fused_attention_is_taken_and_matches_the_unfused_path)
{
    enum { NB = 2, T = 70, H = 2, HD = 32, D = H * HD, LD = 3 * D };
    int lens[NB] = {70, 41};
    cr_assert_eq(setenv("ESPNET3_CUDA_FLASH", "0", 1), 0);
    backend *unfused = open_kind("cuda");
    cr_assert_eq(unsetenv("ESPNET3_CUDA_FLASH"), 0);
    backend *bes[2] = {unfused, open_kind("cuda")};
    size_t nq = (size_t)NB * T * LD, ny = (size_t)NB * T * D, na = (size_t)NB * H * T * T;
    float *hq = host_rand(nq, 70, -1, 1);
    pair qkv = pair_up(bes, hq, nq), dqkv = pair_rand(bes, nq, 71, -1, 1), dy = pair_rand(bes, ny, 72, -1, 1);
    pair y = pair_rand(bes, ny, 73, 0, 1), att = pair_rand(bes, na, 74, 0, 1);
    for (int b = 0; b < 2; b++) {
        float *q = qkv.d[b], *dq = dqkv.d[b];
        bes[b]->mha_forward(bes[b], y.d[b], att.d[b], q, LD, q + D, q + 2 * D, LD, lens, NB, T, T, 1, H, HD, 0.1f, 7,
                            11);
        bes[b]->mha_backward(bes[b], dq, dq + D, dq + 2 * D, dy.d[b], att.d[b], q, LD, q + D, q + 2 * D, LD, lens, NB,
                             T, T, H, HD, 0.1f, 7, 11);
    }
    expect_close(bes, y, "mha_forward y, fused against unfused");
    expect_close(bes, dqkv, "mha_backward dq dk dv, fused against unfused");
    float a0[2], flag;
    for (int b = 0; b < 2; b++) bes[b]->copy(bes[b], &a0[b], att.d[b], sizeof(float), BACKEND_DEVICE_TO_HOST);
    bes[1]->copy(bes[1], &flag, att.d[1] + (size_t)NB * H * T, sizeof(float), BACKEND_DEVICE_TO_HOST);
    double s = 0;
    for (int e = 0; e < HD; e++) s += (double)hq[e] * hq[D + e];
    s /= sqrt((double)HD);
    cr_expect(fabs(a0[1] - s) <= 1e-5 * (1 + fabs(s)), "fused att[0] %g, not the logsumexp %g of row 0", a0[1], s);
    cr_expect_eq(flag, 1.0f, "fused att's causal flag %g", flag);
    cr_expect_eq(a0[0], 1.0f, "unfused att[0] %g, not row 0's one weight", a0[0]);
    free(hq);
    pair all[] = {qkv, dqkv, dy, y, att};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) pair_free(bes, all[i]);
    backend_close(bes[0]);
    backend_close(bes[1]);
}
