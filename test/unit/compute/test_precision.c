/* Mixed precision (trainer.precision bf16-mixed / 16-mixed) on the CPU: the 16-bit rounding of
 * core/compute/kernel_math_amp.h against torch's conversions, the CPU's GEMM emulation (16-bit
 * inputs, float accumulation) against a float GEMM of pre-rounded inputs, the unscale_grads op
 * with injected inf/NaN, and the loss scaler (core/train/grad_scaler.h) step by step against
 * torch.amp.GradScaler (fixtures of scripts/make_precision_fixtures.py in test/fixtures/precision).
 * Suite `precision`. */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/compute/backend.h"
#include "core/compute/ops_precision.h"
#include "core/train/grad_scaler.h"
#include "test/unit/test_util.h"

TestSuite(precision);

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* Equal bits, or both NaN. */
static int same(float a, float b)
{
    return (isnan(a) && isnan(b)) || bits_of(a) == bits_of(b);
}

static float *fixture_floats(const char *rel, uint32_t *n)
{
    char *path = path_join(test_root_dir(), rel);
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s (run scripts/make_precision_fixtures.py)", path);
    cr_assert_eq(fread(n, sizeof *n, 1, f), 1);
    float *v = malloc((size_t)*n * 3 * sizeof *v);
    cr_assert_eq(fread(v, sizeof *v, (size_t)*n * 3, f), (size_t)*n * 3);
    fclose(f);
    free(path);
    return v;
}

Test(precision, bf16_and_f16_rounding_match_torch)
{
    uint32_t n;
    float *v = fixture_floats("test/fixtures/precision/round.bin", &n);
    const float *x = v, *bf = v + n, *hf = v + 2 * n;
    cr_assert(n > 5000);
    for (uint32_t i = 0; i < n; i++) {
        float b = amp_round(x[i], AMP_BF16), h = amp_round(x[i], AMP_FP16);
        cr_assert(same(b, bf[i]), "bf16(%a) = %a, torch %a (#%u)", (double)x[i], (double)b, (double)bf[i], i);
        cr_assert(same(h, hf[i]), "f16(%a) = %a, torch %a (#%u)", (double)x[i], (double)h, (double)hf[i], i);
        cr_assert(same(amp_round(x[i], AMP_FP32), x[i]));
    }
    /* The round trip of every 16-bit pattern is exact (NaNs stay NaN). */
    for (uint32_t h = 0; h < 65536; h++) {
        float fb = amp_bf16_to_f32((uint16_t)h), fh = amp_f16_to_f32((uint16_t)h);
        if (!isnan(fb)) cr_assert_eq(amp_f32_to_bf16(fb), h, "bf16 %04x", h);
        if (!isnan(fh)) cr_assert_eq(amp_f32_to_f16(fh), h, "f16 %04x", h);
    }
    free(v);
}

static float *rand_floats(size_t n, unsigned seed)
{
    float *v = malloc(n * sizeof *v);
    srand(seed);
    for (size_t i = 0; i < n; i++) v[i] = (float)rand() / RAND_MAX * 4.0f - 2.0f;
    return v;
}

static float *rounded_copy(const float *x, size_t n, amp_precision p)
{
    float *r = malloc(n * sizeof *r);
    for (size_t i = 0; i < n; i++) r[i] = amp_round(x[i], p);
    return r;
}

/* The CPU's emulation is a float GEMM of the rounded inputs: the same bits, for every transpose
 * and a row stride wider than the matrix; and the rounding changes the result (it is on). */
Test(precision, cpu_gemm_reads_16_bit_inputs_and_accumulates_in_float)
{
    esp_err err;
    backend *be = backend_open(BACKEND_CPU, 0, 1, &err);
    cr_assert(be, "%s", err.msg);
    enum { M = 7, N = 9, K = 33, LD = 40 };
    for (int p = AMP_BF16; p <= AMP_FP16; p++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) {
                float *a = rand_floats(K * LD, 1 + ta), *b = rand_floats(K * LD, 3 + tb);
                float *c0 = rand_floats(M * N, 5), *c1 = malloc(M * N * sizeof *c1), *c2 = malloc(M * N * sizeof *c2);
                memcpy(c1, c0, M * N * sizeof *c1);
                memcpy(c2, c0, M * N * sizeof *c2);
                float *ra = rounded_copy(a, K * LD, (amp_precision)p), *rb = rounded_copy(b, K * LD, (amp_precision)p);
                be->set_gemm_precision(be, (amp_precision)p);
                cr_assert_eq(ops_gemm_precision(), p);
                be->gemm(be, ta, tb, M, N, K, 0.5f, a, LD, b, LD, 0.25f, c1, N);
                be->set_gemm_precision(be, AMP_FP32);
                be->gemm(be, ta, tb, M, N, K, 0.5f, ra, LD, rb, LD, 0.25f, c2, N);
                cr_assert_eq(memcmp(c1, c2, M * N * sizeof *c1), 0, "precision %d ta %d tb %d", p, ta, tb);
                be->gemm(be, ta, tb, M, N, K, 0.5f, a, LD, b, LD, 0.25f, c0, N);
                cr_assert_neq(memcmp(c0, c1, M * N * sizeof *c1), 0, "rounding had no effect");
                free(a), free(b), free(c0), free(c1), free(c2), free(ra), free(rb);
            }
    /* The layers' GEMMs take it too: linear_forward of rounded x and w, bias added in float (ROWS
     * rows: more than core/compute/ops_rows.h takes in float32, whose sums run in another order). */
    enum { ROWS = 20 };
    float *x = rand_floats(ROWS * 16, 11), *w = rand_floats(8 * 16, 12), *bias = rand_floats(8, 13);
    float *y1 = calloc(ROWS * 8, sizeof *y1), *y2 = calloc(ROWS * 8, sizeof *y2);
    float *rx = rounded_copy(x, ROWS * 16, AMP_BF16), *rw = rounded_copy(w, 8 * 16, AMP_BF16);
    be->set_gemm_precision(be, AMP_BF16);
    be->linear_forward(be, y1, x, w, bias, ROWS, 16, 8);
    be->set_gemm_precision(be, AMP_FP32);
    be->linear_forward(be, y2, rx, rw, bias, ROWS, 16, 8);
    cr_assert_eq(memcmp(y1, y2, ROWS * 8 * sizeof *y1), 0);
    free(x), free(w), free(bias), free(y1), free(y2), free(rx), free(rw);
    /* Closing the backend puts the process back to float32 GEMMs. */
    be->set_gemm_precision(be, AMP_FP16);
    backend_close(be);
    cr_assert_eq(ops_gemm_precision(), AMP_FP32);
}

Test(precision, unscale_grads_scales_and_finds_injected_inf_and_nan)
{
    esp_err err;
    const backend_kind kinds[] = {BACKEND_CPU, BACKEND_REF64};
    for (int k = 0; k < 2; k++) {
        backend *be = backend_open(kinds[k], 0, 2, &err);
        cr_assert(be, "%s", err.msg);
        enum { N = 1000 };
        float host[N], out[N];
        for (int i = 0; i < N; i++) host[i] = (float)(i - 500) * 3.0f;
        float *g = be->alloc(be, N * sizeof(float));
        be->copy(be, g, host, sizeof host, BACKEND_HOST_TO_DEVICE);
        cr_assert_eq(be->unscale_grads(be, g, N, 1.0f / 65536), 0, "%s", be->name);
        be->copy(be, out, g, sizeof out, BACKEND_DEVICE_TO_HOST);
        for (int i = 0; i < N; i++) cr_assert_eq(out[i], host[i] / 65536, "%s %d", kinds[k], i);
        /* One inf (or NaN) anywhere is found; the others are scaled all the same, as torch does. */
        float injected[3] = {INFINITY, -INFINITY, NAN};
        int at[3] = {0, 517, N - 1};
        for (int j = 0; j < 3; j++) {
            be->copy(be, g, host, sizeof host, BACKEND_HOST_TO_DEVICE);
            be->copy(be, g + at[j], &injected[j], sizeof(float), BACKEND_HOST_TO_DEVICE);
            cr_assert_eq(be->unscale_grads(be, g, N, 0.5f), 1, "%s: %g at %d not found", kinds[k],
                         (double)injected[j], at[j]);
            be->copy(be, out, g, sizeof out, BACKEND_DEVICE_TO_HOST);
            cr_assert(!isfinite(out[at[j]]));
            cr_assert_eq(out[at[j] == 0 ? 1 : 0], host[at[j] == 0 ? 1 : 0] * 0.5f);
        }
        /* A finite value that the scale makes overflow is not "found": torch checks the input. */
        float big = FLT_MAX;
        be->copy(be, g, &big, sizeof big, BACKEND_HOST_TO_DEVICE);
        cr_assert_eq(be->unscale_grads(be, g, 1, 4.0f), 0);
        cr_assert_eq(be->unscale_grads(be, g, 0, 4.0f), 0);
        be->free(be, g);
        backend_close(be);
    }
}

/* The scaler against torch.amp.GradScaler("cpu") over 4500 steps with inf gradients injected
 * (fixture): found_inf, the scale after each update and the unscaled gradient's bits. */
Test(precision, grad_scaler_follows_torch_grad_scaler_step_by_step)
{
    esp_err err;
    backend *be = backend_open(BACKEND_CPU, 0, 1, &err);
    cr_assert(be, "%s", err.msg);
    char *path = path_join(test_root_dir(), "test/fixtures/precision/scaler.txt");
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot open %s", path);
    grad_scaler s;
    grad_scaler_init(&s, 1);
    cr_assert_eq(grad_scaler_loss_scale(&s), 65536.0f);
    float *g = be->alloc(be, sizeof(float));
    long step;
    int found_ref, steps = 0, skipped = 0, grown = 0;
    float scale_ref;
    unsigned gbits;
    while (fscanf(f, "%ld %d %f %x", &step, &found_ref, &scale_ref, &gbits) == 4) {
        float before = s.scale;
        /* The gradient the backward would leave: 3 * scale, or an overflow (inf). */
        float v = (found_ref ? INFINITY : 3.0f * grad_scaler_loss_scale(&s));
        be->copy(be, g, &v, sizeof v, BACKEND_HOST_TO_DEVICE);
        int found = grad_scaler_unscale(&s, be, g, 1);
        float u;
        be->copy(be, &u, g, sizeof u, BACKEND_DEVICE_TO_HOST);
        cr_assert_eq(found, found_ref, "step %ld", step);
        cr_assert_eq(bits_of(u), gbits, "step %ld: unscaled %a", step, (double)u);
        grad_scaler_update(&s, found);
        cr_assert_eq(s.scale, scale_ref, "step %ld: scale %g, torch %g", step, (double)s.scale, (double)scale_ref);
        skipped += found, grown += s.scale > before;
        steps++;
    }
    fclose(f);
    free(path);
    cr_assert_eq(steps, 4500);
    cr_assert_eq(skipped, 6);
    cr_assert(grown >= 1, "the scale never grew");
    be->free(be, g);
    backend_close(be);
}

Test(precision, grad_scaler_growth_backoff_and_limits)
{
    grad_scaler s;
    grad_scaler_init(&s, 1);
    for (int i = 0; i < GRAD_SCALER_GROWTH_INTERVAL - 1; i++) grad_scaler_update(&s, 0);
    cr_assert_eq(s.scale, 65536.0f);
    cr_assert_eq(s.growth_tracker, GRAD_SCALER_GROWTH_INTERVAL - 1);
    grad_scaler_update(&s, 1); /* an overflow resets the tracker */
    cr_assert_eq(s.scale, 32768.0f);
    cr_assert_eq(s.growth_tracker, 0);
    for (int i = 0; i < GRAD_SCALER_GROWTH_INTERVAL; i++) grad_scaler_update(&s, 0);
    cr_assert_eq(s.scale, 65536.0f);
    cr_assert_eq(s.growth_tracker, 0);
    /* A doubling that would overflow float keeps the scale. */
    s.scale = 0x1p127f;
    for (int i = 0; i < GRAD_SCALER_GROWTH_INTERVAL; i++) grad_scaler_update(&s, 0);
    cr_assert_eq(s.scale, 0x1p127f);
    cr_assert_eq(s.growth_tracker, 0);
    /* Disabled (32, bf16-mixed): scale 1, nothing found, nothing changes. */
    grad_scaler d;
    grad_scaler_init(&d, 0);
    cr_assert_eq(grad_scaler_loss_scale(&d), 1.0f);
    cr_assert_eq(grad_scaler_unscale(&d, NULL, NULL, 0), 0);
    grad_scaler_update(&d, 1);
    cr_assert_eq(d.scale, 1.0f);
}
