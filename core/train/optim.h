/* The optimizer side of a training step, on flat float buffers (llm.c style):
 *   - torch.optim.Adam and AdamW as torch 1.13 computes them (foreach off; amsgrad, maximize),
 *     SGD and Adadelta as torch 2.11's single-tensor update computes them (foreach off);
 *   - gradient clipping by the global L2 norm as torch.nn.utils.clip_grad_norm_;
 *   - gradient scaling for accumulate_grad_batches;
 *   - ESPnet3's NaN/Inf guard (skip the batch; stop after too many in a row).
 *
 * A training step, as Lightning + ESPnet3 run it:
 *     loss = forward(); if (!isfinite(loss)) -> nan_guard_update(NAN_GUARD_LOSS), skip backward
 *     backward(1 / accumulate_grad_batches) (summing into grads over the micro-batches)
 *     norm = be->clip_grad_norm(be, grads, n, gradient_clip_val)   (when gradient_clip_val > 0)
 *     nan_guard_update(isfinite(norm) ? NAN_GUARD_OK : NAN_GUARD_GRAD)
 *         -> GUARD_STEP: optim_step(params, &state, grads, &opts, scheduler_lr(&sched))
 *     scheduler_on_step_end(&sched)
 *
 * The per-element updates (adam_update_one, sgd_update_one, adadelta_update_one) live in
 * core/compute/kernel_math.h, shared with the CUDA kernels; the loops over the buffers are the
 * backend's. */
#ifndef ESPNET3_OPTIM_H
#define ESPNET3_OPTIM_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "core/base/log.h"
#include "core/compute/backend.h"
#include "core/config/config_types.h"

/* ---- options ------------------------------------------------------------------------------ */

typedef enum optim_kind { OPTIM_ADAM, OPTIM_ADAMW, OPTIM_SGD, OPTIM_ADADELTA } optim_kind;

typedef struct optim_opts {
    optim_kind kind;
    double lr;            /* base learning rate (the scheduler scales it) */
    double weight_decay;  /* Adam, SGD, Adadelta: L2 added to the gradient; AdamW: decoupled decay */
    int maximize;         /* the gradient negated before anything else */
    double eps;           /* Adam, AdamW, Adadelta */
    double beta1, beta2;  /* Adam, AdamW */
    int amsgrad;
    double momentum, dampening; /* SGD */
    int nesterov;
    double rho;           /* Adadelta */
} optim_opts;

/* torch's defaults: Adam/AdamW lr 1e-3, betas (0.9, 0.999), eps 1e-8; SGD lr 1e-3, momentum 0,
 * dampening 0; Adadelta lr 1.0, rho 0.9, eps 1e-6; weight_decay 0, every switch off. */
optim_opts optim_opts_default(optim_kind kind);

/* Maps the `optimizer:` block (`_target_` torch.optim.Adam | AdamW | SGD | Adadelta; Adam with
 * decoupled_weight_decay is AdamW). A field left out of the YAML reads 0 in optimizer_cfg, so 0
 * means "torch's default" for lr and eps, and absent betas mean (0.9, 0.999). rho is taken as
 * written (0 is a valid rho; the config loader writes torch's 0.9 into an Adadelta block that
 * leaves it out). weight_decay 0 stays 0: for AdamW torch's default is 0.01, which an absent key
 * cannot select here (the template config sets weight_decay, so a recipe only lands on 0 by
 * writing it). Out-of-range values are errors with torch's wording ("Invalid learning rate: -1",
 * "Nesterov momentum requires a momentum and zero dampening", ...); the config loader reports the
 * same at their lines (core/config/config_values.c), with the options that change torch's bits
 * (fused, capturable, differentiable) refused there. */
int optim_opts_from_cfg(const optimizer_cfg *c, optim_opts *out, esp_err *err);

/* "Adam", "AdamW", "SGD", "Adadelta". */
const char *optim_kind_name(optim_kind kind);

/* ---- state ---------------------------------------------------------------------------------- */

enum { OPTIM_MAX_BUFFERS = 3 };

/* Optimizer state over n parameters, torch's per-parameter state for all tensors at once: `step`
 * and, by torch's names, Adam's exp_avg, exp_avg_sq (and max_exp_avg_sq with amsgrad), SGD's
 * momentum_buffer (when momentum is not 0) or Adadelta's square_avg and acc_delta. Checkpoints
 * store `step` and the buffers as they are; an update reads nothing else, so restoring them
 * resumes bit-identically. SGD's buffer is the gradient itself at the first step (step 0), as
 * torch creates it then: a restored step >= 1 makes the buffer be read. */
typedef struct optim_state {
    backend *be;            /* owns the buffers */
    size_t n;
    int64_t step;           /* updates done so far */
    size_t n_buffers;
    float *buffers[OPTIM_MAX_BUFFERS];           /* device, n floats each */
    const char *buffer_names[OPTIM_MAX_BUFFERS]; /* torch's state names */
} optim_state;

/* How many buffers of n floats the optimizer keeps (0 for SGD without momentum); the state's
 * buffers are allocated in this order (core/nn/model_plan.c plans them). */
size_t optim_buffer_count(const optim_opts *o);

/* Zeroed buffers on the backend, step 0 (torch's lazy state init). */
void optim_state_init(optim_state *s, backend *be, size_t n, const optim_opts *o);
void optim_state_free(optim_state *s);
/* The buffer torch names `name`, or NULL when this optimizer keeps none by that name. */
float *optim_state_buffer(const optim_state *s, const char *name);

/* Coefficients (core/compute/kernel_math.h) for update number `step` (1-based: the first update
 * is step 1) at learning rate lr: the Python side of torch's update, in double, then rounded to
 * float where torch hands a value to a float kernel. */
adam_coefs adam_coefs_for(const optim_opts *o, double lr, int64_t step);
sgd_coefs sgd_coefs_for(const optim_opts *o, double lr, int64_t step);
adadelta_coefs adadelta_coefs_for(const optim_opts *o, double lr);

/* One optimizer step over the flat device buffers: increments s->step and updates params and the
 * state at the given learning rate (the scheduler's current lr) with the backend's adam_update,
 * sgd_update or adadelta_update; grads are read only. Elementwise, so the result is
 * bit-identical for every thread count. */
void optim_step(float *params, optim_state *s, const float *grads, const optim_opts *o, double lr);

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
