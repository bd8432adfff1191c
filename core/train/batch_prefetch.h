/* The next training batch loaded on a thread of its own while the step runs (asr_batch_load:
 * reading, waveform augmentation, features, SpecAugment, labels) and, for a device backend, its
 * features copied into page-locked memory that the upload stream reads. Every draw of a batch comes
 * from (seed, epoch, its plan position) and each utterance's id, and asr_batch_load's result does
 * not depend on the threads it runs on (the shared pool runs a busy caller's loop on that caller),
 * so a batch loaded early has the bits it would have had when loaded in turn. */
#ifndef ESPNET3_TRAIN_BATCH_PREFETCH_H
#define ESPNET3_TRAIN_BATCH_PREFETCH_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "core/data/asr_data.h"

typedef struct batch_prefetch {
    pthread_t th;
    int running;          /* a load was started and not taken yet */
    asr_data *d;
    size_t *items, items_cap;
    int n;
    uint64_t seed;
    size_t key;           /* what the caller calls this batch (its plan position) */
    float *pinned;        /* where the thread copies the features (NULL: nowhere) */
    size_t pinned_floats;
    int in_pinned;        /* the loaded batch's features are in pinned too */
    asr_batch b;
    int rc;
    esp_err err;
    double wait_s;        /* seconds the step waited for its batches (batch_prefetch_take; the caller adds
                           * the loads it makes itself), since the caller last reset it */
} batch_prefetch;

/* Starts loading items (n manifest indices, copied) with seed on a thread; pinned (NULL: none) gets
 * a copy of the features when they fit in pinned_floats. One load at a time (ESP_CHECK). */
void batch_prefetch_start(batch_prefetch *p, asr_data *d, const size_t *items, int n, uint64_t seed, size_t key,
                          float *pinned, size_t pinned_floats);
/* The batch started under key: 1 with *b (the caller frees it) and *in_pinned; 0 when none was
 * started under key (what was started is dropped: load it yourself); -1 with err when its load
 * failed. */
int batch_prefetch_take(batch_prefetch *p, size_t key, asr_batch *b, int *in_pinned, esp_err *err);
/* Waits for a running load and drops it; frees the item copy. */
void batch_prefetch_close(batch_prefetch *p);

#endif
