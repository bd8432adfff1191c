/* Mixed precision on every backend under test (ESPNET3_TEST_BACKENDS, default "cpu,cuda"; cuda is
 * skipped where it does not open; scripts/cuda_emu/run runs it with "cuda"): with
 * set_gemm_precision bf16 or fp16, gemm and linear_forward (cuda: cublasGemmEx on 16-bit copies)
 * must equal the float64 reference fed the inputs rounded on the host (NMSE within TOL_ACC), and
 * differ from it fed the unrounded inputs (the rounding is on); the attention (cuda: the
 * strided-batched GemmEx) must agree with the CPU backend's emulation. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/compute/backend.h"
#include "test/unit/compute/backend_ops_test.h"

static double nmse(const float *a, const float *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        num += d * d, den += (double)b[i] * b[i];
    }
    return den > 0 ? num / den : num;
}

static float *host_rand(size_t n, unsigned seed, float lo, float hi)
{
    float *v = malloc(n * sizeof *v);
    srand(seed);
    for (size_t i = 0; i < n; i++) v[i] = lo + (hi - lo) * (float)rand() / (float)RAND_MAX;
    return v;
}

static float *dev_of(backend *be, const float *h, size_t n)
{
    float *d = be->alloc(be, n * sizeof *d);
    be->copy(be, d, h, n * sizeof *d, BACKEND_HOST_TO_DEVICE);
    return d;
}

static float *host_of(backend *be, const float *d, size_t n)
{
    float *h = malloc(n * sizeof *h);
    be->synchronize(be);
    be->copy(be, h, d, n * sizeof *h, BACKEND_DEVICE_TO_HOST);
    return h;
}

/* c = a b^T-style GEMMs through gemm (ta, tb, a row stride wider than the matrix). */
static float *run_gemm(backend *be, amp_precision p, const float *a, const float *b, int ta, int tb)
{
    enum { M = 13, N = 21, K = 67, LD = 70 };
    be->set_gemm_precision(be, p);
    float *da = dev_of(be, a, K * LD), *db = dev_of(be, b, K * LD), *dc = be->alloc(be, M * N * sizeof(float));
    be->gemm(be, ta, tb, M, N, K, 1.0f, da, LD, db, LD, 0.0f, dc, N);
    float *c = host_of(be, dc, M * N);
    be->free(be, da), be->free(be, db), be->free(be, dc);
    be->set_gemm_precision(be, AMP_FP32);
    return c;
}

static float *run_linear(backend *be, amp_precision p, const float *x, const float *w, const float *bias)
{
    enum { R = 9, IC = 48, OC = 24 };
    be->set_gemm_precision(be, p);
    float *dx = dev_of(be, x, R * IC), *dw = dev_of(be, w, OC * IC), *db = dev_of(be, bias, OC);
    float *dy = be->alloc(be, R * OC * sizeof(float));
    be->linear_forward(be, dy, dx, dw, db, R, IC, OC);
    float *y = host_of(be, dy, R * OC);
    be->free(be, dx), be->free(be, dw), be->free(be, db), be->free(be, dy);
    be->set_gemm_precision(be, AMP_FP32);
    return y;
}

static float *rounded(const float *x, size_t n, amp_precision p)
{
    float *r = malloc(n * sizeof *r);
    for (size_t i = 0; i < n; i++) r[i] = amp_round(x[i], p);
    return r;
}

/* attention_forward (the strided-batched GEMMs) of nb x t x (3 * h * hd) packed q, k, v. */
static float *run_attention(backend *be, amp_precision p, const float *qkv)
{
    enum { NB = 2, T = 11, H = 2, HD = 8, D = H * HD, LD = 3 * D };
    int lens[NB] = {T, T - 4};
    be->set_gemm_precision(be, p);
    float *d = dev_of(be, qkv, NB * T * LD), *y = be->alloc(be, NB * T * D * sizeof(float));
    float *att = be->alloc(be, (size_t)NB * H * T * T * sizeof(float));
    be->attention_forward(be, y, att, d, d + D, d + 2 * D, LD, lens, NB, T, H, HD, 0.0f, 1, 2);
    float *out = host_of(be, y, NB * T * D);
    be->free(be, d), be->free(be, y), be->free(be, att);
    be->set_gemm_precision(be, AMP_FP32);
    return out;
}

static void check_backend(backend *be, backend *ref, backend *cpu)
{
    for (int p = AMP_BF16; p <= AMP_FP16; p++) {
        amp_precision pr = (amp_precision)p;
        for (int t = 0; t < 4; t++) {
            float *a = host_rand(67 * 70, 10 + t, -2, 2), *b = host_rand(67 * 70, 20 + t, -2, 2);
            float *ra = rounded(a, 67 * 70, pr), *rb = rounded(b, 67 * 70, pr);
            float *got = run_gemm(be, pr, a, b, t & 1, t >> 1);
            float *want = run_gemm(ref, AMP_FP32, ra, rb, t & 1, t >> 1);
            float *exact = run_gemm(ref, AMP_FP32, a, b, t & 1, t >> 1);
            double e = nmse(got, want, 13 * 21), off = nmse(got, exact, 13 * 21);
            fprintf(stderr, "gemm_precision: %s %s gemm ta %d tb %d: NMSE %.2e vs rounded inputs, %.2e vs float\n",
                    be->name, p == AMP_BF16 ? "bf16" : "fp16", t & 1, t >> 1, e, off);
            cr_expect(e < TOL_ACC, "%s gemm precision %d: NMSE %g", be->name, p, e);
            cr_expect(off > 1e2 * TOL_ACC, "%s gemm precision %d: inputs not rounded (NMSE %g)", be->name, p, off);
            free(a), free(b), free(ra), free(rb), free(got), free(want), free(exact);
        }
        float *x = host_rand(9 * 48, 31, -3, 3), *w = host_rand(24 * 48, 32, -1, 1), *bias = host_rand(24, 33, -1, 1);
        float *rx = rounded(x, 9 * 48, pr), *rw = rounded(w, 24 * 48, pr);
        float *got = run_linear(be, pr, x, w, bias), *want = run_linear(ref, AMP_FP32, rx, rw, bias);
        double e = nmse(got, want, 9 * 24);
        cr_expect(e < TOL_ACC, "%s linear precision %d: NMSE %g", be->name, p, e);
        free(x), free(w), free(bias), free(rx), free(rw), free(got), free(want);
        float *qkv = host_rand(2 * 11 * 48, 40 + p, -1.5f, 1.5f);
        float *ya = run_attention(be, pr, qkv), *yc = run_attention(cpu, pr, qkv), *y32 = run_attention(cpu, AMP_FP32, qkv);
        double ea = nmse(ya, yc, 2 * 11 * 16), e32 = nmse(yc, y32, 2 * 11 * 16);
        fprintf(stderr, "gemm_precision: %s %s attention: NMSE %.2e vs the CPU's emulation (CPU's vs float %.2e)\n",
                be->name, p == AMP_BF16 ? "bf16" : "fp16", ea, e32);
        /* 16-bit rounding of the probabilities may flip where the two backends' float softmax
         * differ in the last bit: well below the rounding's own effect. */
        cr_expect(ea < 1e-3 * e32 + TOL_ACC, "%s attention precision %d: NMSE %g (rounding itself %g)", be->name, p,
                  ea, e32);
        free(qkv), free(ya), free(yc), free(y32);
    }
}

TestSuite(backend_precision);

/* check_backend for each kind in list (each must open). */
static void check_kinds(char *list)
{
    esp_err err;
    backend *ref = backend_open(BACKEND_REF64, 0, 1, &err), *cpu = backend_open(BACKEND_CPU, 0, 2, &err);
    cr_assert(ref && cpu);
    for (char *save = NULL, *kind = strtok_r(list, ",", &save); kind; kind = strtok_r(NULL, ",", &save)) {
        backend_kind k;
        cr_assert_eq(backend_kind_parse(kind, &k, &err), 0, "%s", err.msg);
        backend *be = k != BACKEND_CPU ? backend_open(k, 0, 2, &err) : cpu;
        cr_assert_not_null(be, "%s", err.msg);
        check_backend(be, ref, cpu);
        if (be != cpu) backend_close(be);
    }
    backend_close(cpu);
    backend_close(ref);
}

/* ESPNET3_TEST_BACKENDS (comma-separated kinds), else cpu; cuda on its own below. */
Test(backend_precision, gemm, .timeout = 300)
{
    const char *env = getenv("ESPNET3_TEST_BACKENDS");
    char list[256];
    snprintf(list, sizeof list, "%s", env && *env ? env : "cpu");
    check_kinds(list);
}

/* A skipped test where cuda does not open, never a silent pass. */
Test(backend_precision, gemm_cuda, .timeout = 300)
{
    const char *env = getenv("ESPNET3_TEST_BACKENDS");
    if (env && *env) cr_skip_test("ESPNET3_TEST_BACKENDS names the backends: gemm checks them");
    esp_err err;
    backend *be = backend_open(BACKEND_CUDA, 0, 2, &err);
    if (!be) cr_skip_test("cuda does not open here: %s", err.msg);
    backend_close(be);
    char list[] = "cuda";
    check_kinds(list);
}
