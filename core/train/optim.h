/* The optimizer side of a training step, on flat float buffers (llm.c style):
 *   - Adam and AdamW exactly as torch.optim (1.13, foreach off) computes them, amsgrad included;
 *   - gradient clipping by the global L2 norm as torch.nn.utils.clip_grad_norm_;
 *   - gradient scaling for accumulate_grad_batches;
 *   - ESPnet3's NaN/Inf guard (skip the batch; stop after too many in a row).
 *
 * A training step, as Lightning + ESPnet3 run it:
 *     loss = forward(); if (!isfinite(loss)) -> nan_guard_update(NAN_GUARD_LOSS), skip backward
 *     backward() (summing into grads over accumulate_grad_batches micro-batches)
 *     grad_scale(grads, n, 1.0f / accumulate_grad_batches)
 *     norm = clip_grad_norm(grads, n, gradient_clip_val, threads)   (when gradient_clip_val > 0)
 *     nan_guard_update(isfinite(norm) ? NAN_GUARD_OK : NAN_GUARD_GRAD)
 *         -> GUARD_STEP: adam_step(params, &state, grads, &opts, scheduler_lr(&sched), threads)
 *     scheduler_on_step_end(&sched)
 *
 * Per-element math is `static inline` (OPTIM_HD) so the CUDA backend runs the same expressions. */
#ifndef ESPNET3_OPTIM_H
#define ESPNET3_OPTIM_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config/config_types.h"
#include "core/base/log.h"

#ifdef __CUDACC__
#define OPTIM_HD __host__ __device__ __forceinline__
#else
#define OPTIM_HD
#endif

/* ---- options ------------------------------------------------------------------------------ */

typedef enum optim_kind { OPTIM_ADAM, OPTIM_ADAMW } optim_kind;

typedef struct optim_opts {
    optim_kind kind;
    double lr;            /* base learning rate (the scheduler scales it) */
    double beta1, beta2;
    double eps;
    double weight_decay;  /* Adam: L2 added to the gradient; AdamW: decoupled decay */
    int amsgrad;
} optim_opts;

/* torch's defaults: lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 0, amsgrad off. */
optim_opts optim_opts_default(optim_kind kind);

/* Maps the `optimizer:` block (`_target_` torch.optim.Adam | torch.optim.AdamW). A field left out
 * of the YAML reads 0 in optimizer_cfg, so 0 means "torch's default" for lr (1e-3) and eps (1e-8),
 * and absent betas mean (0.9, 0.999). weight_decay 0 stays 0: for Adam that is torch's default; for
 * AdamW torch's default is 0.01, which an absent key cannot select here (the template config sets
 * weight_decay, so a recipe only lands on 0 by writing it). Out-of-range values are errors with
 * torch's wording ("Invalid learning rate: -1", ...). */
int optim_opts_from_cfg(const optimizer_cfg *c, optim_opts *out, esp_err *err);

/* ---- Adam / AdamW --------------------------------------------------------------------------- */

/* Optimizer state over n parameters: torch's state['step'|'exp_avg'|'exp_avg_sq'|'max_exp_avg_sq']
 * for all tensors at once. Checkpoints store `step` and the buffers as they are; an update reads
 * nothing else, so restoring them resumes bit-identically. */
typedef struct adam_state {
    size_t n;
    int64_t step;           /* updates done so far */
    float *exp_avg;         /* n */
    float *exp_avg_sq;      /* n */
    float *max_exp_avg_sq;  /* n when amsgrad, else NULL */
} adam_state;

/* Zeroed moments, step 0 (torch's lazy state init). */
void adam_state_init(adam_state *s, size_t n, int amsgrad);
void adam_state_free(adam_state *s);

/* Scalars of one update, computed in double as torch does in Python, then rounded to float
 * where torch hands them to a float kernel. */
typedef struct adam_coefs {
    float beta1, one_minus_beta1;
    float beta2, one_minus_beta2;
    float l2;             /* Adam: grad += l2 * param (0 for AdamW) */
    float decay;          /* AdamW: param *= 1 - lr * weight_decay (1 for Adam) */
    float bc2_sqrt;       /* sqrt(1 - beta2^step) */
    float eps;
    float neg_step_size;  /* -lr / (1 - beta1^step) */
} adam_coefs;

/* Coefficients for update number `step` (1-based: the first update is step 1) at learning rate lr. */
adam_coefs adam_coefs_for(const optim_opts *o, double lr, int64_t step);

/* One element of torch's _single_tensor_adam / _single_tensor_adamw (vmax: NULL without amsgrad).
 * torch's AVX2 CPU kernels compute add(x, alpha=a) as fma(x, a, self) and addcmul(g, g, value=c)
 * as fma(c*g, g, self) (checked op by op against torch 1.13); fmaf keeps that rounding (glibc's
 * and CUDA's fmaf are exact). The other operations are single IEEE operations in torch's order (-std=c11 does not
 * contract them), so the results are torch's to the last bit. */
static inline OPTIM_HD void adam_update_one(float *p, float *m, float *v, float *vmax, float g,
                                            const adam_coefs *c)
{
    float param = *p;
    g = c->l2 != 0.0f ? fmaf(param, c->l2, g) : g;          /* grad.add(param, alpha=wd) (Adam) */
    param = param * c->decay;                                /* param.mul_(1 - lr*wd) (AdamW) */
    float mm = fmaf(g, c->one_minus_beta1, *m * c->beta1);   /* exp_avg.mul_(b1).add_(g, alpha=1-b1) */
    float vv = fmaf(c->one_minus_beta2 * g, g, *v * c->beta2); /* exp_avg_sq.mul_(b2).addcmul_(g, g, 1-b2) */
    float vd = vv;
    if (vmax) {                                              /* amsgrad */
        float a = *vmax;
        vd = a > vv ? a : vv;                                /* torch.maximum, */
        vd = a != a ? a : vd;                                /* which propagates NaN */
        *vmax = vd;
    }
    float denom = sqrtf(vd) / c->bc2_sqrt + c->eps;          /* (v.sqrt() / bc2_sqrt).add_(eps) */
    *p = param + (c->neg_step_size * mm) / denom;            /* param.addcdiv_(m, denom, -step_size) */
    *m = mm;
    *v = vv;
}

/* One optimizer step over the flat buffers: increments s->step and updates params and moments
 * at the given learning rate (the scheduler's current lr); grads are read only. Elementwise, so
 * the result is bit-identical for every thread count (threads <= 1: the calling thread only). */
void adam_step(float *params, adam_state *s, const float *grads, const optim_opts *o, double lr, int threads);

/* ---- gradients ------------------------------------------------------------------------------ */

/* grads *= scale. For accumulate_grad_batches k the trainer sums k micro-batch gradients and
 * scales by 1/k (Lightning divides each micro-batch loss by k: the same mean). */
void grad_scale(float *grads, size_t n, float scale, int threads);

/* Sum of squares of grads in double, summed in fixed blocks so the value does not depend on the
 * thread count. Sharded (FSDP) training all-reduces this before clip_grad_norm_apply. */
double grad_sum_squares(const float *grads, size_t n, int threads);

/* torch.nn.utils.clip_grad_norm_ (L2): total_norm = sqrt(sum of squares); when it is finite,
 * grads *= min(1, max_norm / (total_norm + 1e-6)) with torch's float32 coefficient. Returns
 * total_norm. A non-finite total norm leaves grads untouched: the caller skips the step. */
double clip_grad_norm(float *grads, size_t n, double max_norm, int threads);
/* The scaling half, for a total norm computed elsewhere (e.g. summed across ranks). */
void clip_grad_norm_apply(float *grads, size_t n, double total_norm, double max_norm, int threads);

/* ---- NaN/Inf guard -------------------------------------------------------------------------- */

#define NAN_GUARD_LIMIT 100
#define NAN_GUARD_MESSAGE "Too many NaNs loss iterations encountered, stopping!"

/* ESPnet3's LitESPnetModel.nan_countdown: starts at 0, is set to 1 by every valid batch and grows
 * by one per invalid batch; an invalid batch that finds it at 100 stops the run. So after a valid
 * batch the 100th invalid batch in a row stops the run (the 99 before it are skipped); at the very
 * start of a run it is the 101st. Save `countdown` with the trainer state to resume the same way. */
typedef struct nan_guard {
    int64_t countdown;
} nan_guard;

typedef enum guard_verdict { GUARD_STEP, GUARD_SKIP, GUARD_STOP } guard_verdict;

/* What made a batch invalid (OR-ed; with several ranks the trainer ORs the flags of all ranks). */
enum { NAN_GUARD_OK = 0, NAN_GUARD_LOSS = 1, NAN_GUARD_GRAD = 2 };

/* Call once per training batch: `invalid` is NAN_GUARD_OK for a finite loss and gradient norm,
 * else NAN_GUARD_LOSS and/or NAN_GUARD_GRAD. GUARD_SKIP logs a warning (for a loss ESPnet3's
 * "NaN loss in batch B of epoch E, skipping the whole batch across all workers."); the caller then
 * leaves parameters and optimizer state alone. GUARD_STOP fills err with NAN_GUARD_MESSAGE exactly. */
guard_verdict nan_guard_update(nan_guard *g, int invalid, int64_t batch_idx, int64_t epoch, esp_err *err);

#endif
