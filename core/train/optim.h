/* The optimizer side of a training step, on flat float buffers (llm.c style):
 *   - Adam and AdamW exactly as torch.optim (1.13, foreach off) computes them, amsgrad included;
 *   - gradient clipping by the global L2 norm as torch.nn.utils.clip_grad_norm_;
 *   - gradient scaling for accumulate_grad_batches;
 *   - ESPnet3's NaN/Inf guard (skip the batch; stop after too many in a row).
 *
 * A training step, as Lightning + ESPnet3 run it:
 *     loss = forward(); if (!isfinite(loss)) -> nan_guard_update(NAN_GUARD_LOSS), skip backward
 *     backward(1 / accumulate_grad_batches) (summing into grads over the micro-batches)
 *     norm = be->clip_grad_norm(be, grads, n, gradient_clip_val)   (when gradient_clip_val > 0)
 *     nan_guard_update(isfinite(norm) ? NAN_GUARD_OK : NAN_GUARD_GRAD)
 *         -> GUARD_STEP: adam_step(params, &state, grads, &opts, scheduler_lr(&sched))
 *     scheduler_on_step_end(&sched)
 *
 * The per-element update (adam_update_one) lives in core/compute/kernel_math.h, shared with the
 * CUDA kernels; the loops over the buffers are the backend's. */
#ifndef ESPNET3_OPTIM_H
#define ESPNET3_OPTIM_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "core/base/log.h"
#include "core/compute/backend.h"
#include "core/config/config_types.h"

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
    backend *be;            /* owns the buffers */
    size_t n;
    int64_t step;           /* updates done so far */
    float *exp_avg;         /* device, n */
    float *exp_avg_sq;      /* device, n */
    float *max_exp_avg_sq;  /* device, n when amsgrad, else NULL */
} adam_state;

/* Zeroed moments on the backend, step 0 (torch's lazy state init). */
void adam_state_init(adam_state *s, backend *be, size_t n, int amsgrad);
void adam_state_free(adam_state *s);

/* Coefficients (core/compute/kernel_math.h) for update number `step` (1-based: the first update
 * is step 1) at learning rate lr. */
adam_coefs adam_coefs_for(const optim_opts *o, double lr, int64_t step);

/* One optimizer step over the flat device buffers: increments s->step and updates params and
 * moments at the given learning rate (the scheduler's current lr) with the backend's adam_update;
 * grads are read only. Elementwise, so the result is bit-identical for every thread count. */
void adam_step(float *params, adam_state *s, const float *grads, const optim_opts *o, double lr);

/* ---- gradients ------------------------------------------------------------------------------ */

/* Gradient clipping and the gradient norm are backend ops (be->clip_grad_norm, be->sum_squares,
 * be->scale with clip_grad_coef for a norm summed across ranks); accumulate_grad_batches k sums
 * k micro-batch gradients with the loss scaled by 1/k (Lightning divides each micro-batch loss by
 * k: the same mean). */

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
