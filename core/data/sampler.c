#include "core/data/sampler.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- options ---------------------------------------------------------------------------- */

int sampler_opts_from_cfg(sampler_opts *o, const batches_cfg *c, const char *where, esp_err *err)
{
    memset(o, 0, sizeof *o);
    const char *t = c->type ? c->type : "numel";
    if (strcmp(t, "numel") == 0) o->type = SAMPLER_NUMEL;
    else if (strcmp(t, "length") == 0) o->type = SAMPLER_LENGTH;
    else if (strcmp(t, "sorted") == 0) o->type = SAMPLER_SORTED;
    else if (strcmp(t, "unsorted") == 0) o->type = SAMPLER_UNSORTED;
    else return esp_fail(err, "%s.type: not supported: %s (numel | length | sorted | unsorted)", where, t);
    if (c->n_shape_files == 0)
        return esp_fail(err, "%s.shape_files: no shape file is given (list e.g. ${stats_dir}/train/feats_shape)",
                        where);
    o->batch_size = c->batch_size;
    o->batch_bins = c->batch_bins;
    if ((o->type == SAMPLER_NUMEL || o->type == SAMPLER_LENGTH) && o->batch_bins <= 0)
        return esp_fail(err, "%s.batch_bins: must be > 0 for type %s (got %" PRId64 ")", where, t, o->batch_bins);
    if ((o->type == SAMPLER_SORTED || o->type == SAMPLER_UNSORTED) && o->batch_size <= 0)
        return esp_fail(err, "%s.batch_size: must be > 0 for type %s (got %" PRId64 ")", where, t, o->batch_size);
    return 0;
}

/* ---- helpers ------------------------------------------------------------------------------ */

typedef struct sort_item {
    int64_t len;
    size_t row;
} sort_item;

static int cmp_len_asc(const void *a, const void *b)
{
    const sort_item *x = a, *y = b;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    return (x->row > y->row) - (x->row < y->row); /* Python's sort is stable */
}

static int cmp_len_desc(const void *a, const void *b)
{
    const sort_item *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return (x->row > y->row) - (x->row < y->row);
}

/* Rows of t sorted by length, stably (Python's sorted(keys, key=len) / key=-len). */
static size_t *rows_by_length(const shape_table *t, int descending)
{
    sort_item *it = xmalloc((t->n ? t->n : 1) * sizeof *it);
    for (size_t i = 0; i < t->n; i++) it[i] = (sort_item){shape_length(t, i), i};
    qsort(it, t->n, sizeof *it, descending ? cmp_len_desc : cmp_len_asc);
    size_t *rows = xmalloc((t->n ? t->n : 1) * sizeof *rows);
    for (size_t i = 0; i < t->n; i++) rows[i] = it[i].row;
    free(it);
    return rows;
}

static void reverse(size_t *a, size_t n)
{
    for (size_t i = 0; i < n / 2; i++) {
        size_t t = a[i];
        a[i] = a[n - 1 - i];
        a[n - 1 - i] = t;
    }
}

static void list_alloc(batch_list *out, size_t n_batches, size_t n_utt)
{
    out->n = n_batches;
    out->start = xcalloc(n_batches + 1, sizeof *out->start);
    out->utt = xmalloc((n_utt ? n_utt : 1) * sizeof *out->utt);
}

/* Reverses the order of the batches (not of the utterances inside each). */
static void reverse_batches(batch_list *b)
{
    size_t total = b->start[b->n];
    size_t *utt = xmalloc((total ? total : 1) * sizeof *utt), *start = xmalloc((b->n + 1) * sizeof *start);
    size_t o = 0;
    for (size_t k = 0; k < b->n; k++) {
        size_t src = b->n - 1 - k, sz = batch_size_of(b, src);
        start[k] = o;
        memcpy(utt + o, b->utt + b->start[src], sz * sizeof *utt);
        o += sz;
    }
    start[b->n] = o;
    free(b->utt);
    free(b->start);
    b->utt = utt;
    b->start = start;
}

/* "uid a,b,c" style text of row i's dims for error messages. */
static const char *dims_text(char *buf, size_t cap, const shape_table *t, size_t i)
{
    size_t o = 0;
    buf[0] = '\0';
    for (unsigned d = 0; d < t->ndim[i] && o + 24 < cap; d++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%" PRId64, d ? "," : "", t->dims[t->off[i] + d]);
    return buf;
}

/* ESPnet2: `if set(d) != set(first_utt2shape): raise RuntimeError("keys are mismatched ...")`.
 * Fills map[f][row of shapes[0]] = row of shapes[f]. */
static int match_keys(size_t **map, const shape_table *const *shapes, int n_shapes, esp_err *err)
{
    const shape_table *t0 = shapes[0];
    for (int f = 1; f < n_shapes; f++) {
        const shape_table *tf = shapes[f];
        map[f] = xmalloc((t0->n ? t0->n : 1) * sizeof *map[f]);
        for (size_t i = 0; i < t0->n; i++) {
            ptrdiff_t r = shape_table_find(tf, t0->keys[i]);
            if (r < 0)
                return esp_fail(err, "%s: uid %s of %s:%zu is missing (keys are mismatched; every shape file "
                                     "must list the same utterances)",
                                tf->path, t0->keys[i], t0->path, t0->line[i]);
            map[f][i] = (size_t)r;
        }
        if (tf->n != t0->n) /* every uid of t0 is in tf and uids are unique: tf has extra ones */
            for (size_t j = 0; j < tf->n; j++)
                if (shape_table_find(t0, tf->keys[j]) < 0)
                    return esp_fail(err, "%s:%zu: uid %s is missing from %s (keys are mismatched; every shape "
                                         "file must list the same utterances)",
                                    tf->path, tf->line[j], tf->keys[j], t0->path);
    }
    return 0;
}

/* ---- numel and length ----------------------------------------------------------------------- */

/* NumElementsBatchSampler (numel = 1) and LengthBatchSampler (numel = 0), newest ESPnet2 form. */
static int build_bins(batch_list *out, const sampler_opts *o, const shape_table *const *shapes, int n_shapes,
                      int numel, esp_err *err)
{
    const shape_table *t0 = shapes[0];
    for (int f = 0; f < n_shapes; f++)
        if (!shapes[f]->dims) return esp_fail(err, "%s: read without dims (a bug)", shapes[f]->path);
    size_t **map = xcalloc((size_t)n_shapes, sizeof *map);
    size_t *keys = NULL, *sizes = NULL;
    int64_t *feat_dim = xcalloc((size_t)n_shapes, sizeof *feat_dim);
    int rc = match_keys(map, shapes, n_shapes, err);
    if (rc == 0 && t0->n == 0) rc = esp_fail(err, "%s: 0 lines found (no utterances to batch)", t0->path);
    if (rc != 0) goto done;
#define ROW(f, i) ((f) == 0 ? (i) : map[f][i])
    keys = rows_by_length(t0, 0);
    int padding = !o->no_padding;
    /* padding: the feature dims (all but the length) must be the same for every utterance; the
     * first utterance's product is used. np.prod of no dims is 1. */
    for (int f = 0; f < n_shapes; f++) {
        feat_dim[f] = 1;
        const shape_table *t = shapes[f];
        size_t r0 = ROW(f, keys[0]);
        if (numel && padding)
            for (unsigned d = 1; d < t->ndim[r0]; d++) feat_dim[f] *= t->dims[t->off[r0] + d];
    }
    /* Decide batch sizes. */
    sizes = xmalloc(t0->n * sizeof *sizes);
    size_t n_sizes = 0, cur = 0;
    int64_t acc = 0; /* no padding: the running sum over the open batch */
    int64_t min_bs = o->min_batch_size > 1 ? o->min_batch_size : 1;
    for (size_t k = 0; k < t0->n; k++) {
        size_t key = keys[k];
        cur++;
        int64_t bins = 0;
        if (padding) {
            for (int f = 0; f < n_shapes && numel; f++) {
                const shape_table *t = shapes[f];
                size_t r = ROW(f, key), r0 = ROW(f, keys[0]);
                int same = t->ndim[r] == t->ndim[r0];
                for (unsigned d = 1; same && d < t->ndim[r]; d++)
                    same = t->dims[t->off[r] + d] == t->dims[t->off[r0] + d];
                if (!same) {
                    char a[96], b[96];
                    rc = esp_fail(err,
                                  "%s:%zu: uid %s has shape %s but uid %s has %s (with padding the feature "
                                  "dimension must be unified)",
                                  t->path, t->line[r], t->keys[r], dims_text(a, sizeof a, t, r), t->keys[r0],
                                  dims_text(b, sizeof b, t, r0));
                    goto done;
                }
            }
            for (int f = 0; f < n_shapes; f++)
                bins += (int64_t)cur * shape_length(shapes[f], ROW(f, key)) * feat_dim[f];
        } else {
            for (int f = 0; f < n_shapes; f++) {
                const shape_table *t = shapes[f];
                size_t r = ROW(f, key);
                int64_t p = 1;
                for (unsigned d = 0; d < (numel ? t->ndim[r] : 1u); d++) p *= t->dims[t->off[r] + d];
                acc += p;
            }
            bins = acc;
        }
        if (bins > o->batch_bins && (int64_t)cur >= min_bs) {
            sizes[n_sizes++] = cur;
            cur = 0;
            acc = 0;
        }
    }
    if (cur != 0 && (!o->drop_last || n_sizes == 0)) sizes[n_sizes++] = cur;
#undef ROW
    ESP_CHECK(n_sizes > 0); /* ESPnet2: "0 batches" cannot happen with n > 0 */
    /* A tail smaller than min_batch_size is spread over the last batches, one utterance each. */
    if (n_sizes > 1 && (int64_t)sizes[n_sizes - 1] < min_bs) {
        size_t extra = sizes[--n_sizes];
        for (size_t i = 0; i < extra; i++) sizes[n_sizes - 1 - i % n_sizes]++;
    }
    size_t total = 0;
    for (size_t b = 0; b < n_sizes; b++) total += sizes[b];
    ESP_CHECK(total <= t0->n && (o->drop_last || total == t0->n));
    list_alloc(out, n_sizes, total);
    for (size_t b = 0, s = 0; b < n_sizes; b++) {
        out->start[b] = s;
        memcpy(out->utt + s, keys + s, sizes[b] * sizeof *keys);
        if (!o->sort_in_batch_ascending) reverse(out->utt + s, sizes[b]);
        s += sizes[b];
    }
    out->start[n_sizes] = total;
    if (o->sort_batch_descending) reverse_batches(out);
done:
    for (int f = 1; f < n_shapes; f++) free(map[f]);
    free(map);
    free(keys);
    free(sizes);
    free(feat_dim);
    return rc;
}

/* ---- sorted and unsorted ---------------------------------------------------------------------- */

/* N = max(n // batch_size, 1) batches: keys[i*n//N : (i+1)*n//N], or fixed batch_size slices
 * with drop_last (the rest dropped). */
static void split_even(batch_list *out, const size_t *keys, size_t n, int64_t batch_size, int drop_last)
{
    size_t bs = (size_t)batch_size, N = n / bs > 1 ? n / bs : 1, total = 0;
    for (size_t i = 0; i < N; i++) {
        size_t a = drop_last ? i * bs : i * n / N, b = drop_last ? (i + 1) * bs : (i + 1) * n / N;
        if (a > n) a = n;
        if (b > n) b = n;
        total += b - a;
    }
    list_alloc(out, N, total);
    for (size_t i = 0, o = 0; i < N; i++) {
        size_t a = drop_last ? i * bs : i * n / N, b = drop_last ? (i + 1) * bs : (i + 1) * n / N;
        if (a > n) a = n;
        if (b > n) b = n;
        out->start[i] = o;
        memcpy(out->utt + o, keys + a, (b - a) * sizeof *keys);
        o += b - a;
    }
    out->start[N] = total;
}

static int build_sorted(batch_list *out, const sampler_opts *o, const shape_table *t, esp_err *err)
{
    if (!t->dims) return esp_fail(err, "%s: read without dims (a bug)", t->path);
    if (t->n == 0) return esp_fail(err, "%s: 0 lines found (no utterances to batch)", t->path);
    size_t *keys = rows_by_length(t, !o->sort_in_batch_ascending);
    split_even(out, keys, t->n, o->batch_size, o->drop_last);
    free(keys);
    /* Keys run in sort_in_batch's direction; batches are flipped when sort_batch differs. */
    if (!o->sort_in_batch_ascending != !!o->sort_batch_descending) reverse_batches(out);
    return 0;
}

static int build_unsorted(batch_list *out, const sampler_opts *o, const shape_table *t, esp_err *err)
{
    if (t->n == 0) return esp_fail(err, "%s: 0 lines found (no utterances to batch)", t->path);
    size_t *keys = xmalloc(t->n * sizeof *keys);
    for (size_t i = 0; i < t->n; i++) keys[i] = i;
    split_even(out, keys, t->n, o->batch_size, o->drop_last);
    free(keys);
    return 0;
}

int sampler_build(batch_list *out, const sampler_opts *o, const shape_table *const *shapes, int n_shapes,
                  esp_err *err)
{
    memset(out, 0, sizeof *out);
    ESP_CHECK(n_shapes >= 1);
    int rc;
    switch (o->type) {
    case SAMPLER_NUMEL:
    case SAMPLER_LENGTH:
        ESP_CHECK(o->batch_bins > 0);
        rc = build_bins(out, o, shapes, n_shapes, o->type == SAMPLER_NUMEL, err);
        break;
    case SAMPLER_SORTED:
        ESP_CHECK(o->batch_size > 0);
        rc = build_sorted(out, o, shapes[0], err);
        break;
    case SAMPLER_UNSORTED:
        ESP_CHECK(o->batch_size > 0);
        rc = build_unsorted(out, o, shapes[0], err);
        break;
    default:
        ESP_CHECK(!"sampler type");
    }
    if (rc != 0) batch_list_free(out);
    return rc;
}

int sampler_build_files(batch_list *out, shape_table *keys, const batches_cfg *cfg, const char *where,
                        esp_err *err)
{
    memset(out, 0, sizeof *out);
    memset(keys, 0, sizeof *keys);
    sampler_opts o;
    if (sampler_opts_from_cfg(&o, cfg, where, err) != 0) return -1;
    /* sorted and unsorted read only the first file, unsorted only its first column. */
    int n = (o.type == SAMPLER_NUMEL || o.type == SAMPLER_LENGTH) ? (int)cfg->n_shape_files : 1;
    shape_table *t = xcalloc((size_t)n, sizeof *t);
    const shape_table **tp = xcalloc((size_t)n, sizeof *tp);
    int rc = 0;
    for (int f = 0; f < n && rc == 0; f++) {
        rc = shape_table_read(&t[f], cfg->shape_files[f], o.type == SAMPLER_UNSORTED, err);
        tp[f] = &t[f];
    }
    if (rc == 0) rc = sampler_build(out, &o, tp, n, err);
    for (int f = 1; f < n; f++) shape_table_free(&t[f]);
    if (rc == 0) *keys = t[0];
    else shape_table_free(&t[0]);
    free(t);
    free(tp);
    return rc;
}

int sampler_build_shards(batch_list *shards, shape_table *keys, const batches_cfg *cfg, int64_t total_shards,
                         const char *where, esp_err *err)
{
    memset(shards, 0, (size_t)total_shards * sizeof *shards);
    memset(keys, 0, sizeof *keys);
    sampler_opts o;
    if (sampler_opts_from_cfg(&o, cfg, where, err) != 0) return -1;
    int n = (o.type == SAMPLER_NUMEL || o.type == SAMPLER_LENGTH) ? (int)cfg->n_shape_files : 1;
    shape_table *t = xcalloc((size_t)n, sizeof *t), *sl = xcalloc((size_t)n, sizeof *sl);
    const shape_table **tp = xcalloc((size_t)n, sizeof *tp);
    int rc = 0;
    for (int f = 0; f < n && rc == 0; f++) rc = shape_table_read(&t[f], cfg->shape_files[f], o.type == SAMPLER_UNSORTED, err);
    for (int64_t s = 0; s < total_shards && rc == 0; s++) {
        size_t b, e;
        shard_rows(t[0].n, total_shards, (size_t)s, &b, &e);
        int made = 0;
        for (int f = 0; f < n && rc == 0; f++, made++) {
            rc = shape_table_slice(&sl[f], &t[f], &t[0], b, e, err);
            tp[f] = &sl[f];
        }
        if (rc == 0) rc = sampler_build(&shards[s], &o, tp, n, err);
        /* Rows of the slice are rows b.. of the whole first table. */
        for (size_t i = 0; rc == 0 && i < shards[s].start[shards[s].n]; i++) shards[s].utt[i] += b;
        for (int f = 0; f < made; f++) shape_table_free(&sl[f]);
    }
    for (int f = 1; f < n; f++) shape_table_free(&t[f]);
    if (rc == 0) *keys = t[0];
    else {
        shape_table_free(&t[0]);
        for (int64_t s = 0; s < total_shards; s++) batch_list_free(&shards[s]);
    }
    free(t);
    free(sl);
    free(tp);
    return rc;
}

void batch_list_free(batch_list *b)
{
    free(b->start);
    free(b->utt);
    memset(b, 0, sizeof *b);
}

/* ---- epoch order: numpy's legacy RandomState(seed).shuffle ------------------------------------ */

/* MT19937 (Matsumoto & Nishimura 1998) as numpy's mt19937.c: init_genrand seeding and the
 * standard tempered 32-bit output. Written out because no common C library exposes it with
 * numpy's seeding (GSL's mt19937 maps seed 0 to 4357). */
enum { MT_N = 624, MT_M = 397 };
typedef struct mt19937 {
    uint32_t key[MT_N];
    int pos;
} mt19937;

static void mt_seed(mt19937 *s, uint32_t seed)
{
    for (int i = 0; i < MT_N; i++) {
        s->key[i] = seed;
        seed = 1812433253u * (seed ^ (seed >> 30)) + (uint32_t)i + 1u;
    }
    s->pos = MT_N;
}

static uint32_t mt_next32(mt19937 *s)
{
    if (s->pos == MT_N) { /* regenerate the whole block */
        for (int i = 0; i < MT_N; i++) {
            uint32_t y = (s->key[i] & 0x80000000u) | (s->key[(i + 1) % MT_N] & 0x7fffffffu);
            s->key[i] = s->key[(i + MT_M) % MT_N] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
        }
        s->pos = 0;
    }
    uint32_t y = s->key[s->pos++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    return y ^ (y >> 18);
}

/* numpy's random_interval: uniform in [0, max] by masked rejection (max < 2^32 here). */
static uint32_t mt_interval(mt19937 *s, uint32_t max)
{
    if (max == 0) return 0;
    uint32_t mask = max;
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    uint32_t v;
    while ((v = mt_next32(s) & mask) > max) {
    }
    return v;
}

int sampler_epoch_order(size_t *order, size_t n, int64_t seed, int64_t epoch0, esp_err *err)
{
    /* ESPnet3 builds the iterator for epoch0 + 1; SequenceIterFactory seeds with epoch + seed. */
    int64_t s = epoch0 + 1 + seed;
    if (s < 0 || s > (int64_t)UINT32_MAX)
        return esp_fail(err, "seed: %" PRId64 " + epoch %" PRId64 " is outside numpy's seed range (Seed must be "
                             "between 0 and 2**32 - 1)",
                        seed, epoch0 + 1);
    ESP_CHECK(n <= UINT32_MAX);
    for (size_t i = 0; i < n; i++) order[i] = i;
    mt19937 mt;
    mt_seed(&mt, (uint32_t)s);
    /* RandomState.shuffle: for i in reversed(range(1, n)): j = random_interval(i); swap. */
    for (size_t i = n > 1 ? n - 1 : 0; i >= 1; i--) {
        size_t j = mt_interval(&mt, (uint32_t)i), t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
    return 0;
}

/* ---- ranks and shards (ESPnet3 DataLoaderBuilder) ---------------------------------------------- */

size_t batches_for_rank(size_t *out, size_t n_batches, int world_size, int rank)
{
    ESP_CHECK(world_size >= 1 && rank >= 0 && rank < world_size);
    size_t w = (size_t)world_size, keep = n_batches - n_batches % w, k = 0;
    for (size_t b = (size_t)rank; b < keep; b += w) out[k++] = b;
    return k;
}

size_t *sampler_epoch_plan(size_t *n_out, const batch_list *b, int world_size, int rank, int shuffle,
                           int64_t seed, int64_t epoch0, esp_err *err)
{
    size_t *mine = xmalloc((b->n ? b->n : 1) * sizeof *mine);
    size_t n = batches_for_rank(mine, b->n, world_size, rank);
    size_t *plan = xmalloc((n ? n : 1) * sizeof *plan);
    if (!shuffle) {
        memcpy(plan, mine, n * sizeof *plan);
    } else {
        size_t *order = xmalloc((n ? n : 1) * sizeof *order);
        if (sampler_epoch_order(order, n, seed, epoch0, err) != 0) {
            free(order);
            free(mine);
            free(plan);
            return NULL;
        }
        for (size_t k = 0; k < n; k++) plan[k] = mine[order[k]];
        free(order);
    }
    free(mine);
    *n_out = n;
    return plan;
}

int shard_validate(const loader_split_cfg *c, const char *where, int world_size, esp_err *err)
{
    /* ESPnet3 checks in this order; the texts after "<where>: " are its own. */
    if (c->total_shards == 0) return 0;
    if (c->dist_world_size == 0)
        return esp_fail(err, "%s: ShardedDataset requires dist_world_size to be set when used with "
                             "DataLoaderBuilder.",
                        where);
    if (c->dist_world_size < 1) return esp_fail(err, "%s: dist_world_size must be an integer >= 1.", where);
    if (c->dist_world_size != world_size)
        return esp_fail(err,
                        "%s: dist_world_size must match the distributed world_size (configured %" PRId64
                        ", got %d).",
                        where, c->dist_world_size, world_size);
    if (c->total_shards < 1) return esp_fail(err, "%s: total_shards must be an integer >= 1.", where);
    if (c->total_shards % world_size != 0)
        return esp_fail(err, "%s: total_shards must be divisible by world_size for sharded training.", where);
    return 1;
}

size_t shard_index(int64_t epoch0, int world_size, int rank, int64_t total_shards)
{
    ESP_CHECK(epoch0 >= 0 && world_size >= 1 && rank >= 0 && rank < world_size && total_shards >= 1);
    /* 128-bit, so no epoch overflows epoch0 * world_size (Python's ints do not overflow). */
    unsigned __int128 v = (unsigned __int128)(uint64_t)epoch0 * (uint64_t)world_size + (uint64_t)rank;
    return (size_t)(v % (uint64_t)total_shards);
}

void shard_rows(size_t n, int64_t total_shards, size_t shard_idx, size_t *begin, size_t *end)
{
    ESP_CHECK(total_shards >= 1 && shard_idx < (size_t)total_shards);
    size_t s = (size_t)total_shards;
    *begin = shard_idx * n / s;
    *end = (shard_idx + 1) * n / s;
}
