/* The memory arena of a training run, planned on the host without a device: for a model config
 * and a batch shape, the size and offset of every device buffer a training step uses, in four
 * kinds: the parameters (with the BatchNorm buffers behind them), the gradients, the optimizer's
 * state ("moments": Adam's exp_avg, exp_avg_sq and with amsgrad max_exp_avg_sq, SGD's
 * momentum_buffer, Adadelta's square_avg and acc_delta), and the activations of the forward,
 * loss and backward (their sizes follow from B, T and the longest label sequence); plus the
 * host-pinned staging one batch needs (features, labels, lengths). A device backend can take the
 * whole arena in one allocation and hand out these offsets.
 *
 * The plan is the model's own allocation code (asr_model_init, asr_model_reserve) run against a
 * backend that records sizes instead of allocating, so it cannot drift from the buffers the model
 * asks for; test/unit/nn/test_model_plan.c checks it against the CPU backend's buffers of a real
 * forward, loss and backward (Transformer, Conformer and the hybrid CTC/attention model). The
 * optimizer's state is planned as core/train/optim.c's optim_state_init allocates it:
 * n_optim_buffers buffers of one float per parameter (optim_buffer_count). Backend-internal
 * scratch (im2col chunks, the CTC workspace) is the backend's and not in the plan. */
#ifndef ESPNET3_NN_MODEL_PLAN_H
#define ESPNET3_NN_MODEL_PLAN_H

#include <stddef.h>

#include "core/nn/model.h"

#define ARENA_ALIGN 256 /* cudaMalloc's alignment: every region starts on it */

typedef enum arena_kind { ARENA_PARAMS, ARENA_GRADS, ARENA_MOMENTS, ARENA_ACTS, ARENA_KINDS } arena_kind;

typedef struct arena_region {
    arena_kind kind;
    size_t bytes;  /* as the model asks for it */
    size_t offset; /* from the arena's start, a multiple of ARENA_ALIGN */
} arena_region;

typedef struct arena_plan {
    arena_region *regions; /* in the order the model allocates them; kinds grouped in enum order */
    size_t n;
    size_t total;                   /* device bytes of the arena */
    size_t kind_bytes[ARENA_KINDS]; /* sum of the regions' bytes per kind (before alignment) */
    size_t staging_bytes;           /* host-pinned: features B x T x idim floats, labels B x Lmax ints, 2 x B lengths */
} arena_plan;

/* Plans the arena of training model `d` (rates as the trainer's) on batches of B utterances of T
 * feature frames with at most Lmax tokens each, with an optimizer that keeps n_optim_buffers. */
void model_arena_plan(arena_plan *p, const model_dims *d, const model_rates *r, int B, int T, int Lmax,
                      size_t n_optim_buffers);
void arena_plan_free(arena_plan *p);
/* The device bytes of the activations an inference model (asr_model_init_inference) of dims d
 * allocates for a forward of B utterances of T feature frames, planned the same way (the batched
 * decoder's memory estimate). */
size_t model_infer_act_bytes(const model_dims *d, int B, int T);
const char *arena_kind_name(arena_kind k); /* "params", "grads", "moments", "activations" */

#endif
