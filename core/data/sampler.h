/* Mini-batches from shape files as ESPnet2's batch samplers, their per-epoch order as ESPnet2's
 * SequenceIterFactory, and ESPnet3's rank striding and shard rotation.
 *
 * Samplers (espnet2/samplers/ and build_batch_sampler.py; the batches are identical to theirs):
 * - numel  (NumElementsBatchSampler): utterances in ascending length of the first shape file
 *   (ties keep file order); an utterance joins the open batch, then the batch closes when
 *   bins = sum over shape files of (batch size x that utterance's length x prod(other dims))
 *   exceeds batch_bins (strictly) and it holds at least min_batch_size. The newest utterance is
 *   the longest in the first file, so this is "batch size x max length x dims" there; ESPnet2
 *   takes the newest utterance's length in the other files too, and so do we. A short tail batch
 *   spreads over the last batches; inside a batch the longest comes first.
 * - length (LengthBatchSampler): the same with prod(other dims) taken as 1.
 * - sorted (SortedBatchSampler): the first file's order by length (longest first), split
 *   evenly into max(n / batch_size, 1) batches, batch order reversed to ascending.
 * - unsorted (UnsortedBatchSampler): the first file's order, split evenly the same way.
 * Every sampler returns rows of the FIRST shape table; the other tables are matched by uid. */
#ifndef ESPNET3_SAMPLER_H
#define ESPNET3_SAMPLER_H

#include <stddef.h>
#include <stdint.h>
#include "core/config/config_types.h"
#include "core/base/log.h"
#include "core/formats/shapes.h"

typedef enum sampler_type { SAMPLER_NUMEL, SAMPLER_LENGTH, SAMPLER_SORTED, SAMPLER_UNSORTED } sampler_type;

/* ESPnet2's build_batch_sampler arguments; a zeroed struct holds ESPnet2's defaults. */
typedef struct sampler_opts {
    sampler_type type;
    int64_t batch_size;          /* sorted, unsorted */
    int64_t batch_bins;          /* numel, length */
    int64_t min_batch_size;      /* numel, length; 0 and 1 both mean 1 */
    int sort_in_batch_ascending; /* 0: sort_in_batch "descending" (longest first) */
    int sort_batch_descending;   /* 0: sort_batch "ascending" */
    int drop_last;
    int no_padding;              /* 0: padding=True */
} sampler_opts;

/* Maps dataloader.<split>.iter_factory.batches; `where` names it in errors
 * ("dataloader.train.iter_factory.batches"). Checks type, batch_size / batch_bins > 0. */
int sampler_opts_from_cfg(sampler_opts *o, const batches_cfg *c, const char *where, esp_err *err);

typedef struct batch_list {
    size_t n;      /* batches */
    size_t *start; /* [n + 1]: batch b is utt[start[b] .. start[b + 1]) */
    size_t *utt;   /* rows of the first shape table, in batch order */
} batch_list;

static inline size_t batch_size_of(const batch_list *b, size_t i) { return b->start[i + 1] - b->start[i]; }

/* The samplers on tables already read (shapes[0] drives; for unsorted it may be key-only). */
int sampler_build(batch_list *out, const sampler_opts *o, const shape_table *const *shapes, int n_shapes,
                  esp_err *err);
/* Reads cfg->shape_files (key-only for unsorted, as ESPnet2) and builds. *keys gets the first
 * table, whose rows the batches hold (shape_table_free it). */
int sampler_build_files(batch_list *out, shape_table *keys, const batches_cfg *cfg, const char *where,
                        esp_err *err);
void batch_list_free(batch_list *b);
/* ESPnet3's sharded datasets: the first table's rows split into total_shards contiguous shards
 * (shard_rows), each batched on its own; shards[s] holds rows of the whole first table (*keys). */
int sampler_build_shards(batch_list *shards /* [total_shards] */, shape_table *keys, const batches_cfg *cfg,
                         int64_t total_shards, const char *where, esp_err *err);

/* This epoch's order of n batches, as ESPnet3 + ESPnet2: epoch0 is the 0-based epoch
 * (Lightning's current_epoch); ESPnet3 passes epoch0 + 1 to SequenceIterFactory.build_iter, which
 * shuffles with np.random.RandomState(epoch0 + 1 + seed).shuffle. We reproduce numpy's legacy
 * MT19937 shuffle bit for bit: order[k] is the position shuffled into slot k. Seeds outside
 * [0, 2^32 - 1] are an error, as in numpy. */
int sampler_epoch_order(size_t *order, size_t n, int64_t seed, int64_t epoch0, esp_err *err);

/* ESPnet3's DataLoaderBuilder with world_size > 1: the tail n_batches % world_size batches are
 * dropped so every rank gets the same count, then rank r takes whole batches r, r + W, r + 2W...
 * Writes global batch indices to out (room for n_batches / world_size, or n_batches when W is 1)
 * and returns the count, equal on every rank. */
size_t batches_for_rank(size_t *out, size_t n_batches, int world_size, int rank);

/* Both of the above: this rank's global batch indices in this epoch's order (each rank shuffles
 * its own list with the same seed, as ESPnet3). Caller frees; *n_out gets the count. */
size_t *sampler_epoch_plan(size_t *n_out, const batch_list *b, int world_size, int rank, int shuffle,
                           int64_t seed, int64_t epoch0, esp_err *err);

/* ESPnet3's shard checks (DataLoaderBuilder._maybe_shard_dataset) on dataloader.<split>
 * (`where` names it). Returns 1 when total_shards is set and valid, 0 when it is unset (0: no
 * sharding; ESPnet3 then ignores dist_world_size too), -1 with ESPnet3's message in err. */
int shard_validate(const loader_split_cfg *c, const char *where, int world_size, esp_err *err);
/* shard_idx = (epoch0 * world_size + rank) % total_shards. */
size_t shard_index(int64_t epoch0, int world_size, int rank, int64_t total_shards);
/* Contiguous rows [begin, end) of shard `shard_idx` of n rows, as even as possible (sizes differ by
 * at most one; nothing dropped). */
void shard_rows(size_t n, int64_t total_shards, size_t shard_idx, size_t *begin, size_t *end);

#endif
