#include "core/compute/ops_step.h"

#include <stdlib.h>

#include "core/base/log.h"
#include "core/base/parallel.h"

/* Below this many elements per thread a second thread costs more than it saves. */
enum { MIN_PER_THREAD = 1 << 15 };

/* ---- Adam / AdamW */

typedef struct adam_job {
    float *p, *m, *v, *vmax;
    const float *g;
    adam_coefs c;
} adam_job;

/* The loop with amsgrad fixed per call (no per-element test of it); the coefficients are copied
 * so stores through p cannot alias them. */
static inline void adam_loop(float *restrict p, float *restrict m, float *restrict v, float *restrict vmax,
                             const float *restrict g, size_t lo, size_t hi, const adam_coefs *c, int amsgrad)
{
    adam_coefs k = *c;
#pragma omp simd
    for (size_t i = lo; i < hi; i++) adam_update_one(&p[i], &m[i], &v[i], amsgrad ? &vmax[i] : NULL, g[i], &k);
}

static void adam_loop_generic(const adam_job *j, size_t lo, size_t hi)
{
    if (j->vmax)
        adam_loop(j->p, j->m, j->v, j->vmax, j->g, lo, hi, &j->c, 1);
    else
        adam_loop(j->p, j->m, j->v, NULL, j->g, lo, hi, &j->c, 0);
}

/* The same loop built for CPUs with FMA and AVX2: fmaf becomes one instruction instead of a libm
 * call, and the loop vectorizes. SGD's and Adadelta's loops below do the same. */
#if defined(__x86_64__) && defined(__GNUC__)
#define STEP_HAVE_FMA_LOOPS 1
#define FMA_LOOP __attribute__((target("avx2,fma")))
FMA_LOOP static void adam_loop_fma(const adam_job *j, size_t lo, size_t hi)
{
    if (j->vmax)
        adam_loop(j->p, j->m, j->v, j->vmax, j->g, lo, hi, &j->c, 1);
    else
        adam_loop(j->p, j->m, j->v, NULL, j->g, lo, hi, &j->c, 0);
}

/* Whether this CPU runs the FMA_LOOP builds (checked per range: a cached cpuid bit). */
static int use_fma_loops(void)
{
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#endif

static void adam_range(void *ctx, size_t lo, size_t hi)
{
    const adam_job *j = ctx;
#ifdef STEP_HAVE_FMA_LOOPS
    if (use_fma_loops()) {
        adam_loop_fma(j, lo, hi);
        return;
    }
#endif
    adam_loop_generic(j, lo, hi);
}

void ops_adam_update_f32(float *params, float *exp_avg, float *exp_avg_sq, float *max_exp_avg_sq,
                         const float *grads, size_t n, const adam_coefs *c, int threads)
{
    adam_job j = {params, exp_avg, exp_avg_sq, max_exp_avg_sq, grads, *c};
    parallel_ranges(n, MIN_PER_THREAD, threads, adam_range, &j);
}

/* ---- SGD */

typedef struct sgd_job {
    float *p, *buf;
    const float *g;
    sgd_coefs c;
} sgd_job;

/* The loop with and without a momentum buffer fixed per call, as Adam's amsgrad. */
static inline void sgd_loop(float *restrict p, float *restrict buf, const float *restrict g, size_t lo, size_t hi,
                            const sgd_coefs *c, int has_buf)
{
    sgd_coefs k = *c;
#pragma omp simd
    for (size_t i = lo; i < hi; i++) sgd_update_one(&p[i], has_buf ? &buf[i] : NULL, g[i], &k);
}

static void sgd_loop_generic(const sgd_job *j, size_t lo, size_t hi)
{
    if (j->buf)
        sgd_loop(j->p, j->buf, j->g, lo, hi, &j->c, 1);
    else
        sgd_loop(j->p, NULL, j->g, lo, hi, &j->c, 0);
}

#ifdef STEP_HAVE_FMA_LOOPS
FMA_LOOP static void sgd_loop_fma(const sgd_job *j, size_t lo, size_t hi)
{
    if (j->buf)
        sgd_loop(j->p, j->buf, j->g, lo, hi, &j->c, 1);
    else
        sgd_loop(j->p, NULL, j->g, lo, hi, &j->c, 0);
}
#endif

static void sgd_range(void *ctx, size_t lo, size_t hi)
{
    const sgd_job *j = ctx;
#ifdef STEP_HAVE_FMA_LOOPS
    if (use_fma_loops()) {
        sgd_loop_fma(j, lo, hi);
        return;
    }
#endif
    sgd_loop_generic(j, lo, hi);
}

void ops_sgd_update_f32(float *params, float *momentum_buffer, const float *grads, size_t n, const sgd_coefs *c,
                        int threads)
{
    sgd_job j = {params, momentum_buffer, grads, *c};
    parallel_ranges(n, MIN_PER_THREAD, threads, sgd_range, &j);
}

/* ---- Adadelta */

typedef struct adadelta_job {
    float *p, *sq, *acc;
    const float *g;
    adadelta_coefs c;
} adadelta_job;

static inline void adadelta_loop(float *restrict p, float *restrict sq, float *restrict acc, const float *restrict g,
                                 size_t lo, size_t hi, const adadelta_coefs *c)
{
    adadelta_coefs k = *c;
#pragma omp simd
    for (size_t i = lo; i < hi; i++) adadelta_update_one(&p[i], &sq[i], &acc[i], g[i], &k);
}

#ifdef STEP_HAVE_FMA_LOOPS
FMA_LOOP static void adadelta_loop_fma(const adadelta_job *j, size_t lo, size_t hi)
{
    adadelta_loop(j->p, j->sq, j->acc, j->g, lo, hi, &j->c);
}
#endif

static void adadelta_range(void *ctx, size_t lo, size_t hi)
{
    const adadelta_job *j = ctx;
#ifdef STEP_HAVE_FMA_LOOPS
    if (use_fma_loops()) {
        adadelta_loop_fma(j, lo, hi);
        return;
    }
#endif
    adadelta_loop(j->p, j->sq, j->acc, j->g, lo, hi, &j->c);
}

void ops_adadelta_update_f32(float *params, float *square_avg, float *acc_delta, const float *grads, size_t n,
                             const adadelta_coefs *c, int threads)
{
    adadelta_job j = {params, square_avg, acc_delta, grads, *c};
    parallel_ranges(n, MIN_PER_THREAD, threads, adadelta_range, &j);
}

/* ---- sums of squares */

typedef struct sq_job {
    const float *x;
    size_t n;
    double *partial; /* one per block */
} sq_job;

static void sq_range(void *ctx, size_t lo, size_t hi)
{
    sq_job *j = ctx;
    for (size_t b = lo; b < hi; b++) {
        size_t end = (b + 1) * SUM_SQUARES_BLOCK < j->n ? (b + 1) * SUM_SQUARES_BLOCK : j->n;
        double acc = 0;
        for (size_t i = b * SUM_SQUARES_BLOCK; i < end; i++) acc += (double)j->x[i] * (double)j->x[i];
        j->partial[b] = acc;
    }
}

double ops_sum_squares_blocked_f32(const float *x, size_t n, int threads)
{
    size_t blocks = (n + SUM_SQUARES_BLOCK - 1) / SUM_SQUARES_BLOCK;
    if (blocks == 0) return 0.0;
    double *partial = xmalloc(blocks * sizeof *partial);
    sq_job j = {x, n, partial};
    parallel_ranges(blocks, MIN_PER_THREAD / SUM_SQUARES_BLOCK, threads, sq_range, &j);
    double sum = 0;
    for (size_t b = 0; b < blocks; b++) sum += partial[b];
    free(partial);
    return sum;
}

/* ---- scaling */

typedef struct scale_job {
    float *y;
    const float *x;
    float s;
} scale_job;

static void scale_range(void *ctx, size_t lo, size_t hi)
{
    scale_job *j = ctx;
#pragma omp simd
    for (size_t i = lo; i < hi; i++) j->y[i] = j->x[i] * j->s;
}

void ops_scale_threaded_f32(float *y, const float *x, double s, size_t n, int threads)
{
    scale_job j = {y, x, (float)s};
    parallel_ranges(n, MIN_PER_THREAD, threads, scale_range, &j);
}

void ops_clip_grad_value_f32(float *g, size_t n, float v)
{
    for (size_t i = 0; i < n; i++) g[i] = clip_grad_value_one(g[i], v);
}

void ops_clip_grad_value_f64(double *g, size_t n, double v)
{
    for (size_t i = 0; i < n; i++) g[i] = g[i] < -v ? -v : g[i] > v ? v : g[i];
}

/* ---- Lightning's EMA of the weights */

typedef struct ema_job {
    float *avg;
    const float *cur;
    float decay, one_minus_decay;
    int counts;
} ema_job;

static void ema_range(void *ctx, size_t lo, size_t hi)
{
    ema_job *j = ctx;
    for (size_t i = lo; i < hi; i++)
        j->avg[i] = ema_update_one(j->avg[i], j->cur[i], j->decay, j->one_minus_decay, j->counts);
}

void ops_ema_update_f32(float *avg, const float *cur, size_t n, float decay, float one_minus_decay, int counts,
                        int threads)
{
    ema_job j = {avg, cur, decay, one_minus_decay, counts};
    parallel_ranges(n, MIN_PER_THREAD, threads, ema_range, &j);
}

void ops_ema_update_f64(double *avg, const double *cur, size_t n, double decay, double one_minus_decay, int counts)
{
    for (size_t i = 0; i < n; i++)
        avg[i] = counts ? ema_update_one((float)avg[i], (float)cur[i], (float)decay, (float)one_minus_decay, 1)
                        : decay * avg[i] + one_minus_decay * cur[i];
}
