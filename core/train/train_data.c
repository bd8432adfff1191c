#include "core/train/train_data.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void split_close(split_data *s)
{
    asr_data_close(&s->data);
    batch_list_free(&s->batches);
    for (int64_t k = 0; k < s->n_shards; k++) batch_list_free(&s->shards[k]);
    free(s->shards);
    shape_table_free(&s->keys);
    free(s->row_to_item);
    memset(s, 0, sizeof *s);
}

int split_open(split_data *s, const training_cfg *cfg, const char *split, const loader_split_cfg *lc, int train,
               int sharded, esp_err *err)
{
    memset(s, 0, sizeof *s);
    char where[64];
    snprintf(where, sizeof where, "dataloader.%s.iter_factory.batches", split);
    if (!lc || !lc->iter_factory || !lc->iter_factory->batches || !lc->iter_factory->batches->n_shape_files)
        return esp_fail(err, "%s.shape_files: missing (point it at ${stats_dir}/%s/feats_shape)", where, split);
    if (asr_data_open(&s->data, cfg, split, train, err) != 0) return -1;
    int built;
    if (sharded) {
        s->n_shards = lc->total_shards;
        s->shards = xcalloc((size_t)s->n_shards, sizeof *s->shards);
        built = sampler_build_shards(s->shards, &s->keys, lc->iter_factory->batches, s->n_shards, where, err);
        for (int64_t k = 0; built == 0 && k < s->n_shards; k++) s->batches.n += s->shards[k].n;
    } else {
        built = sampler_build_files(&s->batches, &s->keys, lc->iter_factory->batches, where, err);
    }
    if (built != 0) {
        split_close(s);
        return -1;
    }
    s->row_to_item = xmalloc((s->keys.n + 1) * sizeof *s->row_to_item);
    for (size_t r = 0; r < s->keys.n; r++) s->row_to_item[r] = (size_t)-1;
    for (size_t i = 0; i < s->data.m.n; i++) {
        ptrdiff_t r = shape_table_find(&s->keys, s->data.m.items[i].utt);
        if (r >= 0) s->row_to_item[r] = i;
    }
    for (size_t r = 0; r < s->keys.n; r++) {
        if (s->row_to_item[r] == (size_t)-1) {
            esp_fail(err, "%s: utterance on line %zu is not in the %s split's data (rerun collect_stats)",
                     s->keys.path, s->keys.line[r], split);
            split_close(s);
            return -1;
        }
    }
    return 0;
}

size_t split_batch_items(const split_data *s, const batch_list *bl, size_t b, size_t *items)
{
    size_t n = batch_size_of(bl, b);
    for (size_t k = 0; k < n; k++) items[k] = s->row_to_item[bl->utt[bl->start[b] + k]];
    return n;
}

size_t limit_batches(double limit, size_t n)
{
    if (limit < 0) return (size_t)-limit < n ? (size_t)-limit : n; /* an integer count, 1 included */
    if (limit == 0 || limit == 1.0) return n;
    size_t k = limit < 1 ? (size_t)floor(limit * (double)n) : (size_t)limit;
    return k < n ? k : n;
}
