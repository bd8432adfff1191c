/* Suite cuda_emu, linked only into scripts/cuda_emu/run's test binary: the CUDA backend against the
 * CPU backend at sizes test_backend_ops does not reach, where the work splits over many thread
 * blocks (sums over more than 32 blocks of SUM_SQUARES_BLOCK, a million dropout elements, Adam
 * over many blocks), and bit for bit where the backends promise the CPU's bits: sum_squares,
 * clip_grad_norm, Adam, dropout and scale. */
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
