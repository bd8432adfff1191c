/* One split's data for the trainer: the manifest and features (core/data/asr_data.h), the batches
 * from the shape files (ESPnet2's samplers, or one batch list per shard with total_shards), and the
 * map from shape-file rows to manifest items. */
#ifndef ESPNET3_TRAIN_TRAIN_DATA_H
#define ESPNET3_TRAIN_TRAIN_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "core/data/asr_data.h"
#include "core/data/sampler.h"

typedef struct split_data {
    asr_data data;
    batch_list batches;
    shape_table keys;
    size_t *row_to_item;
    batch_list *shards; /* sharded dataset (total_shards): each shard's batches; else NULL */
    int64_t n_shards;
} split_data;

/* Opens split `split` ("train" | "valid") with its dataloader block; train enables the training
 * features (SpecAugment); sharded builds one batch list per shard. */
int split_open(split_data *s, const training_cfg *cfg, const char *split, const loader_split_cfg *lc, int train,
               int sharded, esp_err *err);
void split_close(split_data *s);

/* Batch b of a batch list of the split as manifest indices (items holds keys.n entries). */
size_t split_batch_items(const split_data *s, const batch_list *bl, size_t b, size_t *items);

/* Lightning's limit_*_batches: 0 (unset) or 1.0 = all, a fraction < 1 of the batches, or a count. */
size_t limit_batches(double limit, size_t n);

#endif
