/* DDP gradient buckets, all-reduced (averaged) while the backward pass still runs: the flat
 * gradients split into buckets of `size` floats; the model reports ranges whose gradients are
 * final (asr_model.grads_final), and a bucket is started (comm_all_reduce_start) once all of its
 * floats are final. Buckets start in one fixed order, from the last bucket down to the first,
 * a ready bucket waiting for the ones above it, so every rank issues the same sequence of
 * collectives whatever its backward reported (a rank whose loss was invalid skipped it and starts
 * them all in grad_buckets_finish). finish starts the rest and waits for all. The CPU comm
 * reduces inside each start, the NCCL comm on its own stream overlapped with the backward. */
#ifndef ESPNET3_TRAIN_GRAD_BUCKETS_H
#define ESPNET3_TRAIN_GRAD_BUCKETS_H

#include <stddef.h>
#include "core/dist/comm.h"

/* Floats per bucket for n gradient floats: an eighth of them, at least 4 Ki and at most 4 Mi
 * (16 MB, near torch DDP's 25 MB cap), so small models overlap too. Bucket boundaries do not
 * change a bit of the result: the all-reduce is element by element. */
size_t grad_bucket_floats(size_t n);

typedef struct grad_buckets {
    comm *c;
    float *g;            /* the flat gradients (backend memory) */
    size_t n, size, nb;  /* floats, floats per bucket, buckets */
    size_t *ready;       /* final floats of each bucket */
    size_t started;      /* buckets nb-1 .. nb-started have been started */
    int armed, failed;
    esp_err err;         /* the first failure of a start from inside the backward */
} grad_buckets;

void grad_buckets_init(grad_buckets *b, size_t n, size_t size);
void grad_buckets_free(grad_buckets *b);
/* Before the backward whose gradients the step uses: nothing final, nothing started. */
void grad_buckets_arm(grad_buckets *b, comm *c, float *g);
/* [lo, hi) is final: starts what became startable (the asr_model.grads_final callback; ctx is b).
 * A failure is kept for grad_buckets_finish. */
void grad_buckets_final(void *ctx, size_t lo, size_t hi);
/* Starts the buckets not yet started, in order, and waits for all; disarms. */
int grad_buckets_finish(grad_buckets *b, esp_err *err);

#endif
