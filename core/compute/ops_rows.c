/* Linear layers over a few rows without packing the weights; see core/compute/ops_rows.h. */
#include "core/compute/ops_rows.h"

#include <stddef.h>

#include "core/base/log.h"
#include "core/base/parallel.h"
#include "core/compute/ops_precision.h"

enum {
    ROWS_MAX = 16,   /* rows taken */
    ROWS_PASS = 12,  /* rows per pass over W: 24 accumulators (2 outputs) of the 32 registers */
    PAIRS_PART = 16, /* output pairs below which a part is not worth a thread */
};

static int cpu_avx512(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    return __builtin_cpu_supports("avx512f") != 0;
#else
    return 0;
#endif
}

int ops_rows_linear_takes(int n, int ic)
{
    return n >= 1 && n <= ROWS_MAX && ic > 0 && ic % 16 == 0 && ops_gemm_precision() == AMP_FP32 && cpu_avx512();
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* The sixteen lanes' sum in one fixed order (halves added, then their halves, ...). */
__attribute__((target("avx512f"), always_inline)) static inline float lanes_sum(__m512 a)
{
    __m256 h = _mm256_add_ps(_mm512_castps512_ps256(a), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    __m128 p = _mm_add_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_add_ss(p, _mm_shuffle_ps(p, p, 1)));
}

/* Outputs o0, o1 (the same when only one is left) of rows [0, R): R constant in each caller, so
 * the accumulators stay in registers. */
__attribute__((target("avx512f"), always_inline)) static inline void pair_rows(float *y, const float *x,
                                                                              const float *w0, const float *w1,
                                                                              float b0, float b1, int R, int ic,
                                                                              int oc, int o0, int both)
{
    __m512 acc[ROWS_PASS][2];
#pragma GCC unroll 12
    for (int r = 0; r < R; r++) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    for (int i = 0; i < ic; i += 16) {
        /* the next pair's rows (W is read in order): one line each per line read */
        _mm_prefetch((const char *)(w0 + 2 * (size_t)ic + i), _MM_HINT_T0);
        _mm_prefetch((const char *)(w1 + 2 * (size_t)ic + i), _MM_HINT_T0);
        __m512 a = _mm512_loadu_ps(w0 + i), c = _mm512_loadu_ps(w1 + i);
#pragma GCC unroll 12
        for (int r = 0; r < R; r++) {
            __m512 xv = _mm512_loadu_ps(x + (size_t)r * ic + i);
            acc[r][0] = _mm512_fmadd_ps(xv, a, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(xv, c, acc[r][1]);
        }
    }
#pragma GCC unroll 12
    for (int r = 0; r < R; r++) {
        y[(size_t)r * oc + o0] = b0 + lanes_sum(acc[r][0]);
        if (both) y[(size_t)r * oc + o0 + 1] = b1 + lanes_sum(acc[r][1]);
    }
}

#define PAIR_CASE(R)                                                                                             \
    case R:                                                                                                      \
        pair_rows(y, x, w0, w1, b0, b1, R, ic, oc, o, both);                                                     \
        break;

/* Outputs [2 lo, 2 hi) of rows [0, R), R <= ROWS_PASS. */
__attribute__((target("avx512f"))) static void rows_pass(float *y, const float *x, const float *w, const float *b,
                                                        int R, int ic, int oc, size_t lo, size_t hi)
{
    for (size_t p = lo; p < hi; p++) {
        int o = (int)(2 * p), both = o + 1 < oc;
        const float *w0 = w + (size_t)o * ic, *w1 = both ? w0 + ic : w0;
        float b0 = b ? b[o] : 0.0f, b1 = b && both ? b[o + 1] : 0.0f;
        switch (R) {
            PAIR_CASE(1) PAIR_CASE(2) PAIR_CASE(3) PAIR_CASE(4) PAIR_CASE(5) PAIR_CASE(6)
            PAIR_CASE(7) PAIR_CASE(8) PAIR_CASE(9) PAIR_CASE(10) PAIR_CASE(11) PAIR_CASE(12)
        default:
            ESP_CHECK(0);
        }
    }
}
#else
static void rows_pass(float *y, const float *x, const float *w, const float *b, int R, int ic, int oc, size_t lo,
                      size_t hi)
{
    (void)y, (void)x, (void)w, (void)b, (void)R, (void)ic, (void)oc, (void)lo, (void)hi;
    ESP_CHECK(0); /* never taken (ops_rows_linear_takes) */
}
#endif

typedef struct rows_job {
    float *y;
    const float *x, *w, *b;
    int n, ic, oc;
} rows_job;

/* Output pairs [lo, hi) of every row: the rows in passes of at most ROWS_PASS (as even as can be). */
static void rows_part(void *ctx, size_t lo, size_t hi, int part)
{
    (void)part;
    const rows_job *j = ctx;
    int passes = (j->n + ROWS_PASS - 1) / ROWS_PASS, per = (j->n + passes - 1) / passes;
    for (int r0 = 0; r0 < j->n; r0 += per) {
        int R = j->n - r0 < per ? j->n - r0 : per;
        rows_pass(j->y + (size_t)r0 * j->oc, j->x + (size_t)r0 * j->ic, j->w, j->b, R, j->ic, j->oc, lo, hi);
    }
}

void ops_rows_linear(float *y, const float *x, const float *w, const float *b, int n, int ic, int oc, int threads)
{
    ESP_CHECK(ops_rows_linear_takes(n, ic) && oc >= 0);
    rows_job j = {y, x, w, b, n, ic, oc};
    parallel_parts(((size_t)oc + 1) / 2, PAIRS_PART, threads, rows_part, &j);
}
