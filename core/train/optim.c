#include "core/train/optim.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- options ------------------------------------------------------------------------------ */

optim_opts optim_opts_default(optim_kind kind)
{
    return (optim_opts){.kind = kind, .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                        .weight_decay = 0.0, .amsgrad = 0};
}

int optim_opts_from_cfg(const optimizer_cfg *c, optim_opts *out, esp_err *err)
{
    if (!c || !c->target)
        return esp_fail(err, "optimizer._target_: missing (set torch.optim.Adam or torch.optim.AdamW)");
    optim_kind kind;
    if (strcmp(c->target, "torch.optim.Adam") == 0) kind = OPTIM_ADAM;
    else if (strcmp(c->target, "torch.optim.AdamW") == 0) kind = OPTIM_ADAMW;
    else
        return esp_fail(err, "optimizer._target_: '%s' is not supported (use torch.optim.Adam or "
                             "torch.optim.AdamW)", c->target);
    optim_opts o = optim_opts_default(kind);
    if (c->lr != 0) o.lr = c->lr;
    if (c->eps != 0) o.eps = c->eps;
    if (c->n_betas != 0) {
        if (c->n_betas != 2)
            return esp_fail(err, "optimizer.betas: expected two values [beta1, beta2], got %u", c->n_betas);
        o.beta1 = c->betas[0];
        o.beta2 = c->betas[1];
    }
    o.weight_decay = c->weight_decay;
    o.amsgrad = c->amsgrad != 0;
    /* torch.optim.Adam.__init__'s checks, with its wording. */
    if (!(o.lr >= 0) || !isfinite(o.lr))
        return esp_fail(err, "optimizer.lr: Invalid learning rate: %g (must be a finite value >= 0)", o.lr);
    if (!(o.eps >= 0) || !isfinite(o.eps))
        return esp_fail(err, "optimizer.eps: Invalid epsilon value: %g (must be >= 0)", o.eps);
    if (!(o.beta1 >= 0 && o.beta1 < 1))
        return esp_fail(err, "optimizer.betas: Invalid beta parameter at index 0: %g (must be in [0, 1))", o.beta1);
    if (!(o.beta2 >= 0 && o.beta2 < 1))
        return esp_fail(err, "optimizer.betas: Invalid beta parameter at index 1: %g (must be in [0, 1))", o.beta2);
    if (!(o.weight_decay >= 0) || !isfinite(o.weight_decay))
        return esp_fail(err, "optimizer.weight_decay: Invalid weight_decay value: %g (must be >= 0)",
                        o.weight_decay);
    *out = o;
    return 0;
}

/* ---- threads ------------------------------------------------------------------------------ */

/* Splits [0, n) into `threads` contiguous ranges run by fn(ctx, lo, hi). Work per element is a few
 * nanoseconds, so small buffers stay on the calling thread. */
typedef void (*range_fn)(void *ctx, size_t lo, size_t hi);

typedef struct range_job {
    range_fn fn;
    void *ctx;
    size_t lo, hi;
} range_job;

static void *range_main(void *arg)
{
    range_job *j = arg;
    j->fn(j->ctx, j->lo, j->hi);
    return NULL;
}

enum { MIN_PER_THREAD = 1 << 15, MAX_THREADS = 256 };

static void parallel_ranges(size_t n, size_t min_per_thread, int threads, range_fn fn, void *ctx)
{
    size_t t = threads < 1 ? 1 : (size_t)threads;
    if (t > MAX_THREADS) t = MAX_THREADS;
    if (t > n / min_per_thread) t = n / min_per_thread;
    if (t <= 1) {
        fn(ctx, 0, n);
        return;
    }
    range_job jobs[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    for (size_t i = 0; i < t; i++) jobs[i] = (range_job){fn, ctx, n * i / t, n * (i + 1) / t};
    size_t started = 1;
    for (; started < t; started++)
        if (pthread_create(&tid[started], NULL, range_main, &jobs[started]) != 0) break;
    range_main(&jobs[0]);
    /* A range whose thread could not start runs here: same results, only slower. */
    for (size_t i = started; i < t; i++) range_main(&jobs[i]);
    for (size_t i = 1; i < started; i++) pthread_join(tid[i], NULL);
}

/* ---- Adam / AdamW --------------------------------------------------------------------------- */

void adam_state_init(adam_state *s, size_t n, int amsgrad)
{
    s->n = n;
    s->step = 0;
    s->exp_avg = xcalloc(n ? n : 1, sizeof(float));
    s->exp_avg_sq = xcalloc(n ? n : 1, sizeof(float));
    s->max_exp_avg_sq = amsgrad ? xcalloc(n ? n : 1, sizeof(float)) : NULL;
}

void adam_state_free(adam_state *s)
{
    free(s->exp_avg);
    free(s->exp_avg_sq);
    free(s->max_exp_avg_sq);
    memset(s, 0, sizeof *s);
}

adam_coefs adam_coefs_for(const optim_opts *o, double lr, int64_t step)
{
    ESP_CHECK(step >= 1);
    /* The Python side of torch's update, in double: step is a float, `**` is C pow. */
    double bias_correction1 = 1 - pow(o->beta1, (double)step);
    double bias_correction2 = 1 - pow(o->beta2, (double)step);
    double step_size = lr / bias_correction1;
    int adamw = o->kind == OPTIM_ADAMW;
    return (adam_coefs){
        .beta1 = (float)o->beta1,
        .one_minus_beta1 = (float)(1 - o->beta1),
        .beta2 = (float)o->beta2,
        .one_minus_beta2 = (float)(1 - o->beta2),
        .l2 = adamw ? 0.0f : (float)o->weight_decay,
        .decay = adamw ? (float)(1 - lr * o->weight_decay) : 1.0f,
        .bc2_sqrt = (float)sqrt(bias_correction2),
        .eps = (float)o->eps,
        .neg_step_size = (float)-step_size,
    };
}

typedef struct adam_job {
    float *params;
    adam_state *s;
    const float *grads;
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

static void adam_loop_generic(float *p, float *m, float *v, float *vmax, const float *g, size_t lo, size_t hi,
                              const adam_coefs *c)
{
    if (vmax)
        adam_loop(p, m, v, vmax, g, lo, hi, c, 1);
    else
        adam_loop(p, m, v, NULL, g, lo, hi, c, 0);
}

/* The same loop built for CPUs with FMA and AVX2 (picked at run time): fmaf becomes one instruction
 * instead of a libm call, and the loop vectorizes. FMA, sqrt and division are correctly rounded in
 * both, so the result is bit-identical to the generic loop's. */
#if defined(__x86_64__) && defined(__GNUC__)
#define ADAM_HAVE_FMA_LOOP 1
__attribute__((target("avx2,fma"))) static void adam_loop_fma(float *p, float *m, float *v, float *vmax,
                                                               const float *g, size_t lo, size_t hi,
                                                               const adam_coefs *c)
{
    if (vmax)
        adam_loop(p, m, v, vmax, g, lo, hi, c, 1);
    else
        adam_loop(p, m, v, NULL, g, lo, hi, c, 0);
}
#endif

static void adam_range(void *ctx, size_t lo, size_t hi)
{
    adam_job *j = ctx;
    adam_state *s = j->s;
#ifdef ADAM_HAVE_FMA_LOOP
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        adam_loop_fma(j->params, s->exp_avg, s->exp_avg_sq, s->max_exp_avg_sq, j->grads, lo, hi, &j->c);
        return;
    }
#endif
    adam_loop_generic(j->params, s->exp_avg, s->exp_avg_sq, s->max_exp_avg_sq, j->grads, lo, hi, &j->c);
}

void adam_step(float *params, adam_state *s, const float *grads, const optim_opts *o, double lr, int threads)
{
    ESP_CHECK((o->amsgrad != 0) == (s->max_exp_avg_sq != NULL)); /* state made for these opts */
    s->step++;
    adam_job j = {params, s, grads, adam_coefs_for(o, lr, s->step)};
    parallel_ranges(s->n, MIN_PER_THREAD, threads, adam_range, &j);
}

/* ---- gradients ------------------------------------------------------------------------------ */

typedef struct scale_job {
    float *x;
    float scale;
} scale_job;

static void scale_range(void *ctx, size_t lo, size_t hi)
{
    scale_job *j = ctx;
    for (size_t i = lo; i < hi; i++) j->x[i] *= j->scale;
}

void grad_scale(float *grads, size_t n, float scale, int threads)
{
    if (scale == 1.0f) return;
    scale_job j = {grads, scale};
    parallel_ranges(n, MIN_PER_THREAD, threads, scale_range, &j);
}

/* Blocks of fixed size make the summation order independent of how blocks go to threads. */
enum { SQ_BLOCK = 4096 };

typedef struct sq_job {
    const float *x;
    size_t n;
    double *partial; /* one per block */
} sq_job;

static void sq_range(void *ctx, size_t lo, size_t hi)
{
    sq_job *j = ctx;
    for (size_t b = lo; b < hi; b++) {
        size_t end = (b + 1) * SQ_BLOCK < j->n ? (b + 1) * SQ_BLOCK : j->n;
        double acc = 0;
        for (size_t i = b * SQ_BLOCK; i < end; i++) acc += (double)j->x[i] * (double)j->x[i];
        j->partial[b] = acc;
    }
}

double grad_sum_squares(const float *grads, size_t n, int threads)
{
    size_t blocks = (n + SQ_BLOCK - 1) / SQ_BLOCK;
    if (blocks == 0) return 0.0;
    double *partial = xmalloc(blocks * sizeof *partial);
    sq_job j = {grads, n, partial};
    parallel_ranges(blocks, MIN_PER_THREAD / SQ_BLOCK, threads, sq_range, &j);
    double sum = 0;
    for (size_t b = 0; b < blocks; b++) sum += partial[b];
    free(partial);
    return sum;
}

void clip_grad_norm_apply(float *grads, size_t n, double total_norm, double max_norm, int threads)
{
    if (!isfinite(total_norm)) return;
    /* torch: clip_coef = max_norm / (total_norm + 1e-6) on a float32 tensor, which Python evaluates
     * as reciprocal(total_norm + 1e-6) * max_norm; then clamp(max=1) and grads *= coef. */
    float tn = (float)total_norm;
    float coef = isfinite(tn) ? (1.0f / (tn + 1e-6f)) * (float)max_norm
                              : (float)(max_norm / total_norm); /* beyond float range: torch would have inf */
    if (coef < 1.0f) grad_scale(grads, n, coef, threads);
}

double clip_grad_norm(float *grads, size_t n, double max_norm, int threads)
{
    double total_norm = sqrt(grad_sum_squares(grads, n, threads));
    clip_grad_norm_apply(grads, n, total_norm, max_norm, threads);
    return total_norm;
}

/* ---- NaN/Inf guard -------------------------------------------------------------------------- */

guard_verdict nan_guard_update(nan_guard *g, int invalid, int64_t batch_idx, int64_t epoch, esp_err *err)
{
    if (invalid == NAN_GUARD_OK) {
        g->countdown = 1;
        return GUARD_STEP;
    }
    if (g->countdown >= NAN_GUARD_LIMIT) {
        esp_fail(err, "%s", NAN_GUARD_MESSAGE);
        return GUARD_STOP;
    }
    if (invalid & NAN_GUARD_LOSS)
        log_warn("NaN loss in batch %lld of epoch %lld, skipping the whole batch across all workers.",
                 (long long)batch_idx, (long long)epoch);
    else
        log_warn("Non-finite gradient norm in batch %lld of epoch %lld, skipping the whole batch across all "
                 "workers.", (long long)batch_idx, (long long)epoch);
    g->countdown++;
    return GUARD_SKIP;
}
