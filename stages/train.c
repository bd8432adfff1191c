/* Stage 5 train (CPU backend, one or several ranks): batches from the shape files (ESPnet2 samplers),
 * features computed on the fly (log-mel -> SpecAugment -> global_mvn), the Transformer-CTC model,
 * Adam/AdamW + WarmupLR + gradient clipping + accumulation + the NaN guard, validation loss and
 * greedy CER every check_val_every_n_epoch, checkpoints at each epoch end (top-k, `last`, k-best
 * averaging), TensorBoard events and metrics.csv. Rerunning resumes from `last`; everything random
 * is derived from (seed, epoch, batch), so a resumed run computes what an uninterrupted one does.
 *
 * Several ranks (strategy ddp): rank 0's parameters and state are broadcast at the start; rank r
 * trains on batches r, r + W, ... of the epoch (global position k * W + r seeds its randomness,
 * so W ranks with one batch each compute what one rank accumulating W batches does); gradients
 * are averaged in buckets after the backward pass; every rank then takes the same step on the
 * same bits. strategy fsdp: gradients are reduce-scattered, each rank keeps the Adam moments of
 * its chunk of the parameters and updates that chunk, then the parameters are all-gathered.
 * Validation batches are striped over the ranks and their sums all-reduced. Rank 0 alone writes
 * checkpoints, metrics and TensorBoard events. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/data/asr_data.h"
#include "core/compute/backend.h"
#include "core/train/checkpoint.h"
#include "core/decode/ctc_decode.h"
#include "core/dist/dist.h"
#include "core/base/fsio.h"
#include "core/base/hash.h"
#include "core/formats/metrics_csv.h"
#include "core/nn/model.h"
#include "core/train/optim.h"
#include "core/base/progress.h"
#include "core/base/rng.h"
#include "core/data/sampler.h"
#include "core/train/scheduler.h"
#include "core/formats/tb_events.h"
#include "stages/stages.h"

/* One split's data and batches; rows of the shape table mapped to manifest entries. */
typedef struct split_data {
    asr_data data;
    batch_list batches;
    shape_table keys;
    size_t *row_to_item;
    batch_list *shards; /* sharded dataset (total_shards): each shard's batches; else NULL */
    int64_t n_shards;
} split_data;

static void split_close(split_data *s)
{
    asr_data_close(&s->data);
    batch_list_free(&s->batches);
    for (int64_t k = 0; k < s->n_shards; k++) batch_list_free(&s->shards[k]);
    free(s->shards);
    shape_table_free(&s->keys);
    free(s->row_to_item);
    memset(s, 0, sizeof *s);
}

static int split_open(split_data *s, const training_cfg *cfg, const char *split, const loader_split_cfg *lc, int train,
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
            esp_fail(err, "%s: utterance on line %zu is not in ${data_dir}/manifest/%s.tsv (rerun collect_stats)",
                     s->keys.path, s->keys.line[r], split);
            split_close(s);
            return -1;
        }
    }
    return 0;
}

/* Batch b of a batch list of the split as manifest indices. */
static size_t batch_items(const split_data *s, const batch_list *bl, size_t b, size_t *items)
{
    size_t n = batch_size_of(bl, b);
    for (size_t k = 0; k < n; k++) items[k] = s->row_to_item[bl->utt[bl->start[b] + k]];
    return n;
}

/* Lightning's limit_*_batches: 0 (unset) or 1.0 = all, a fraction < 1 of the batches, or a count. */
static size_t limit_batches(double limit, size_t n)
{
    if (limit <= 0 || limit == 1.0) return n;
    size_t k = limit < 1 ? (size_t)floor(limit * (double)n) : (size_t)limit;
    return k < n ? k : n;
}

static int cpu_threads(void)
{
    const char *omp = getenv("OMP_NUM_THREADS");
    int n = omp ? atoi(omp) : 0;
    if (n <= 0) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? n : 1;
}

typedef struct trainer {
    const training_cfg *cfg;
    backend be;
    asr_model model;
    split_data train, valid;
    optim_opts oo;
    adam_state opt;
    lr_scheduler sched;
    nan_guard guard;
    ckpt_manager ckpt;
    tb_writer tb;
    metrics_csv csv;
    err_calc ec;
    int64_t epoch, step;
    float *dev_feats;
    size_t dev_cap;
    dist_ctx dist;
    int rank, world, fsdp;
    size_t shard_lo, shard_hi; /* fsdp: this rank's chunk of the flat parameters */
    double audio_total;        /* seconds of audio trained on by all ranks, this epoch */
    int64_t first_epoch;       /* of this run (after resuming) */
} trainer;

/* DDP gradient buckets: all-reduced one after the other (bounded scratch in the transports). */
#define GRAD_BUCKET_FLOATS ((size_t)4 << 20)

/* Loads a host batch into the backend's feature buffer. */
static const float *to_device(trainer *t, const asr_batch *b)
{
    size_t n = (size_t)b->B * b->Tmax * (size_t)b->D;
    if (n > t->dev_cap) {
        t->be.free(&t->be, t->dev_feats);
        t->dev_feats = t->be.alloc(&t->be, n * sizeof(float));
        t->dev_cap = n;
    }
    t->be.copy(&t->be, t->dev_feats, b->feats, n * sizeof(float), BACKEND_HOST_TO_DEVICE);
    return t->dev_feats;
}

/* Logging failures (disk full under tensorboard/) warn but do not stop training. */
static void log_metrics(trainer *t, const metric *m, size_t n)
{
    if (t->rank != 0) return;
    const char *tags[8];
    float vals[8];
    ESP_CHECK(n <= 8);
    for (size_t i = 0; i < n; i++) tags[i] = m[i].name, vals[i] = (float)m[i].value;
    esp_err e2;
    if (tb_add_scalars(&t->tb, t->step, tb_wall_time(), tags, vals, n, &e2) != 0) log_warn("tensorboard: %s", e2.msg);
    if (metrics_csv_log(&t->csv, t->step, m, n, &e2) != 0) log_warn("metrics.csv: %s", e2.msg);
}

/* Validation: mean batch loss and greedy CER over the valid split. */
static int validate(trainer *t, double *loss_out, double *cer_out, esp_err *err)
{
    split_data *s = &t->valid;
    size_t nb = limit_batches(t->cfg->trainer->limit_val_batches, s->batches.n);
    size_t *items = xmalloc((s->keys.n + 1) * sizeof *items);
    double loss_sum = 0;
    size_t utts = 0;
    err_counts cer = {0};
    for (size_t b = (size_t)t->rank; b < nb; b += (size_t)t->world) {
        size_t n = batch_items(s, &s->batches, b, items);
        asr_batch ab;
        if (asr_batch_load(&ab, &s->data, items, (int)n, 0, err) != 0) {
            free(items);
            return -1;
        }
        asr_model *m = &t->model;
        asr_model_forward(m, to_device(t, &ab), ab.feat_lens, ab.B, (int)ab.Tmax, 0, 0);
        double loss = asr_model_loss(m, ab.labels, ab.label_lens, (int)ab.Lmax, NULL);
        loss_sum += loss * (double)n;
        utts += n;
        t->be.synchronize(&t->be);
        int *hyp = xmalloc(((size_t)m->T2 + 1) * sizeof *hyp);
        for (int i = 0; i < ab.B; i++) {
            int nh = ctc_greedy_decode(hyp, m->logp + (size_t)i * m->T2 * m->dims.vocab, m->hlens[i], m->dims.vocab);
            cer_add(&cer, &t->ec, hyp, (size_t)nh, ab.labels + (size_t)i * ab.Lmax, (size_t)ab.label_lens[i]);
        }
        free(hyp);
        asr_batch_free(&ab);
    }
    free(items);
    if (t->world > 1) {
        /* Every rank's sums, gathered as doubles and added in rank order: the same bits everywhere. */
        double mine[4] = {loss_sum, (double)utts, (double)cer.edits, (double)cer.ref_len};
        double *all = xcalloc((size_t)t->world * 4, sizeof *all);
        memcpy(all + (size_t)t->rank * 4, mine, sizeof mine);
        int rc = comm_all_gather(t->dist.comm, (float *)all, (size_t)t->world * 8, err);
        loss_sum = 0, utts = 0, cer.edits = 0, cer.ref_len = 0;
        for (int r = 0; r < t->world; r++) {
            loss_sum += all[r * 4];
            utts += (size_t)all[r * 4 + 1];
            cer.edits += (size_t)all[r * 4 + 2];
            cer.ref_len += (size_t)all[r * 4 + 3];
        }
        free(all);
        if (rc != 0) return -1;
    }
    *loss_out = utts ? loss_sum / (double)utts : NAN;
    *cer_out = err_rate(&cer);
    return 0;
}

/* Saves model weights, optimizer moments and the counters as the epoch's checkpoint. */
/* fsdp: the full Adam moments, gathered from every rank's chunk (all ranks take part). */
static int gather_moments(trainer *t, float **m1, float **m2, esp_err *err)
{
    size_t n = t->model.table.total, k = t->shard_hi - t->shard_lo;
    *m1 = xcalloc(n ? n : 1, sizeof(float));
    *m2 = xcalloc(n ? n : 1, sizeof(float));
    memcpy(*m1 + t->shard_lo, t->opt.exp_avg, k * sizeof(float));
    memcpy(*m2 + t->shard_lo, t->opt.exp_avg_sq, k * sizeof(float));
    if (comm_all_gather(t->dist.comm, *m1, n, err) != 0 || comm_all_gather(t->dist.comm, *m2, n, err) != 0) {
        free(*m1), free(*m2);
        return -1;
    }
    return 0;
}

static int save_checkpoint(trainer *t, const metric *metrics, size_t n_metrics, esp_err *err)
{
    const param_table *pt = &t->model.table;
    float *m1 = t->opt.exp_avg, *m2 = t->opt.exp_avg_sq;
    if (t->fsdp && gather_moments(t, &m1, &m2, err) != 0) return -1;
    if (t->rank != 0) {
        if (t->fsdp) free(m1), free(m2);
        return 0;
    }
    st_tensor *model = xcalloc(pt->n, sizeof *model);
    for (size_t i = 0; i < pt->n; i++) {
        const param_info *p = &pt->items[i];
        model[i] = (st_tensor){.name = p->name, .dtype = ST_F32, .ndim = p->ndim, .data = t->model.params + p->offset};
        for (int k = 0; k < p->ndim; k++) model[i].shape[k] = p->shape[k];
    }
    st_tensor state[2] = {
        {.name = "optimizer.exp_avg", .dtype = ST_F32, .ndim = 1, .shape = {(int64_t)pt->total}, .data = m1},
        {.name = "optimizer.exp_avg_sq", .dtype = ST_F32, .ndim = 1, .shape = {(int64_t)pt->total}, .data = m2},
    };
    ckpt_counter counters[] = {{"optimizer.step", t->opt.step},
                               {"scheduler.last_epoch", t->sched.last_epoch},
                               {"nan_guard.countdown", t->guard.countdown}};
    ckpt_info info = {.epoch = t->epoch, .step = t->step, .metrics = metrics, .n_metrics = n_metrics,
                      .counters = counters, .n_counters = sizeof counters / sizeof *counters};
    int rc = ckpt_save(&t->ckpt, &info, model, pt->n, state, 2, err);
    free(model);
    if (t->fsdp) free(m1), free(m2);
    return rc;
}

static int resume(trainer *t, esp_err *err)
{
    ckpt_loaded c;
    int rc = ckpt_load_last(&t->ckpt, &c, err);
    if (rc != 0) return rc < 0 ? -1 : 0;
    const param_table *pt = &t->model.table;
    for (size_t i = 0; i < pt->n && rc == 0; i++) {
        const float *v;
        if (st_get_f32(&c.model, pt->items[i].name, pt->items[i].ndim, pt->items[i].shape, &v, err) != 0) rc = -1;
        else memcpy(t->model.params + pt->items[i].offset, v, pt->items[i].count * sizeof(float));
    }
    const float *m1, *m2;
    int64_t total = (int64_t)pt->total;
    if (rc == 0 && (st_get_f32(&c.state, "optimizer.exp_avg", 1, &total, &m1, err) != 0 ||
                    st_get_f32(&c.state, "optimizer.exp_avg_sq", 1, &total, &m2, err) != 0))
        rc = -1;
    if (rc == 0) {
        memcpy(t->opt.exp_avg, m1, pt->total * sizeof(float));
        memcpy(t->opt.exp_avg_sq, m2, pt->total * sizeof(float));
        t->opt.step = ckpt_counter_get(&c, "optimizer.step", 0);
        t->sched.last_epoch = ckpt_counter_get(&c, "scheduler.last_epoch", t->sched.last_epoch);
        t->guard.countdown = ckpt_counter_get(&c, "nan_guard.countdown", 0);
        t->epoch = c.epoch;
        t->step = c.step;
        log_info("train: resuming from %s (epoch %" PRId64 ", step %" PRId64 ")", c.dir, c.epoch, c.step);
    }
    ckpt_loaded_free(&c);
    return rc;
}

/* Rank 0's parameters, moments and counters on every rank (after rank 0 initialized or resumed). */
static int sync_from_rank0(trainer *t, esp_err *err)
{
    if (t->world == 1) return 0;
    int64_t c[5] = {t->epoch, t->step, t->opt.step, t->sched.last_epoch, t->guard.countdown};
    comm *cm = t->dist.comm;
    size_t bytes = t->model.table.total * sizeof(float);
    if (comm_broadcast(cm, c, sizeof c, 0, err) != 0 || comm_broadcast(cm, t->model.params, bytes, 0, err) != 0 ||
        comm_broadcast(cm, t->opt.exp_avg, bytes, 0, err) != 0 || comm_broadcast(cm, t->opt.exp_avg_sq, bytes, 0, err) != 0 ||
        (t->opt.max_exp_avg_sq && comm_broadcast(cm, t->opt.max_exp_avg_sq, bytes, 0, err) != 0))
        return -1;
    t->epoch = c[0], t->step = c[1], t->opt.step = c[2], t->sched.last_epoch = c[3], t->guard.countdown = c[4];
    if (!t->fsdp) return 0;
    /* fsdp: keep only this rank's chunk of the optimizer state. */
    comm_chunk(t->model.table.total, t->world, t->rank, &t->shard_lo, &t->shard_hi);
    size_t k = t->shard_hi - t->shard_lo;
    adam_state shard;
    adam_state_init(&shard, k, t->oo.amsgrad);
    shard.step = t->opt.step;
    memcpy(shard.exp_avg, t->opt.exp_avg + t->shard_lo, k * sizeof(float));
    memcpy(shard.exp_avg_sq, t->opt.exp_avg_sq + t->shard_lo, k * sizeof(float));
    if (shard.max_exp_avg_sq) memcpy(shard.max_exp_avg_sq, t->opt.max_exp_avg_sq + t->shard_lo, k * sizeof(float));
    adam_state_free(&t->opt);
    t->opt = shard;
    return 0;
}

/* Averages the gradients over the ranks and returns their global L2 norm (clipping applied when
 * gradient_clip_val is set). ddp: all_reduce in buckets, every rank holds all averaged gradients;
 * fsdp: reduce_scatter, this rank holds its chunk; the norm's squares are gathered as doubles and
 * added in rank order so every rank gets the same bits. */
static int reduce_gradients(trainer *t, double *norm_out, esp_err *err)
{
    const trainer_cfg *tc = t->cfg->trainer;
    float *g = t->model.grads;
    size_t n = t->model.table.total;
    int th = t->be.threads;
    if (t->fsdp) {
        if (comm_reduce_scatter(t->dist.comm, g, n, COMM_AVG, err) != 0) return -1;
        size_t k = t->shard_hi - t->shard_lo;
        double *sq = xcalloc((size_t)t->world, sizeof *sq);
        sq[t->rank] = grad_sum_squares(g + t->shard_lo, k, th);
        int rc = comm_all_gather(t->dist.comm, (float *)sq, (size_t)t->world * 2, err);
        double total = 0;
        for (int r = 0; r < t->world; r++) total += sq[r];
        free(sq);
        if (rc != 0) return -1;
        *norm_out = sqrt(total);
        if (tc->gradient_clip_val > 0) clip_grad_norm_apply(g + t->shard_lo, k, *norm_out, tc->gradient_clip_val, th);
        return 0;
    }
    for (size_t off = 0; t->world > 1 && off < n; off += GRAD_BUCKET_FLOATS) {
        size_t len = n - off < GRAD_BUCKET_FLOATS ? n - off : GRAD_BUCKET_FLOATS;
        if (comm_all_reduce(t->dist.comm, g + off, len, COMM_AVG, err) != 0) return -1;
    }
    *norm_out = tc->gradient_clip_val > 0 ? clip_grad_norm(g, n, tc->gradient_clip_val, th) : sqrt(grad_sum_squares(g, n, th));
    return 0;
}

static int optimizer_step(trainer *t, double lr, esp_err *err)
{
    if (!t->fsdp) {
        adam_step(t->model.params, &t->opt, t->model.grads, &t->oo, lr, t->be.threads);
        return 0;
    }
    adam_step(t->model.params + t->shard_lo, &t->opt, t->model.grads + t->shard_lo, &t->oo, lr, t->be.threads);
    return comm_all_gather(t->dist.comm, t->model.params, t->model.table.total, err);
}

/* Whether every rank has batch k and batch k + 1: the end-of-epoch agreement (all_reduce MIN),
 * so ranks with unequal batch counts stop together. */
static int agree_has_next(trainer *t, size_t k, size_t nb, int *has, int *has_after, esp_err *err)
{
    float f[2] = {k < nb ? 1.0f : 0.0f, k + 1 < nb ? 1.0f : 0.0f};
    if (t->world > 1 && comm_all_reduce(t->dist.comm, f, 2, COMM_MIN, err) != 0) return -1;
    *has = f[0] > 0, *has_after = f[1] > 0;
    return 0;
}

static int train_epoch(trainer *t, esp_err *err)
{
    const training_cfg *cfg = t->cfg;
    const trainer_cfg *tc = cfg->trainer;
    split_data *s = &t->train;
    int shuffle = cfg->dataloader->train->iter_factory->shuffle;
    size_t nplan;
    /* A sharded dataset gives each rank a whole shard, rotating every epoch (ESPnet3's
     * shard_idx = (epoch * world_size + rank) % total_shards); otherwise ranks stripe the batches. */
    const batch_list *bl = &s->batches;
    size_t *plan;
    if (s->shards) {
        size_t idx = shard_index(t->epoch, t->world, t->rank, s->n_shards);
        bl = &s->shards[idx];
        plan = sampler_epoch_plan(&nplan, bl, 1, 0, shuffle, cfg->seed, t->epoch, err);
        log_info("train: epoch %" PRId64 ": rank %d trains shard %zu of %" PRId64 " (%zu batches)", t->epoch + 1,
                 t->rank, idx, s->n_shards, nplan);
    } else {
        plan = sampler_epoch_plan(&nplan, bl, t->world, t->rank, shuffle, cfg->seed, t->epoch, err);
    }
    if (!plan) return -1;
    size_t nb = limit_batches(tc->limit_train_batches, nplan);
    int64_t accum = tc->accumulate_grad_batches > 0 ? tc->accumulate_grad_batches : 1;
    int64_t log_every = tc->log_every_n_steps > 0 ? tc->log_every_n_steps : 50;
    size_t *items = xmalloc((s->keys.n + 1) * sizeof *items);
    char label[160];
    snprintf(label, sizeof label, "train epoch %" PRId64, t->epoch + 1);
    progress pr;
    if (t->rank == 0) progress_start(&pr, label, nb);
    double audio_s = 0, t0 = now_seconds(), loss_acc = 0, step_loss = 0;
    t->audio_total = 0;
    if (t->world > 1 && t->rank == 0 && t->epoch == t->first_epoch && !s->shards && s->batches.n % (size_t)t->world)
        log_warn("train: %zu batches do not split evenly over %d ranks: the last %zu are dropped each epoch "
                 "(each rank trains on %zu)", s->batches.n, t->world, s->batches.n % (size_t)t->world, nplan);
    int64_t micro = 0, loss_n = 0, step_n = 0;
    int rc = 0, step_invalid = 0;
    asr_model_zero_grad(&t->model);
    for (size_t k = 0; rc == 0; k++) {
        int has, has_after;
        if (agree_has_next(t, k, nb, &has, &has_after, err) != 0) {
            rc = -1;
            break;
        }
        if (!has) break;
        size_t n = batch_items(s, bl, plan[k], items);
        asr_batch ab;
        /* Every random draw of this batch comes from (seed, epoch, global position). */
        uint64_t bseed = rng_derive((uint64_t)cfg->seed, (uint64_t)t->epoch, k * (size_t)t->world + (size_t)t->rank);
        if (asr_batch_load(&ab, &s->data, items, (int)n, bseed, err) != 0) {
            rc = -1;
            break;
        }
        for (int i = 0; i < ab.B; i++) audio_s += ab.feat_lens[i] * (double)s->data.fo.hop_length / s->data.fo.fs;
        asr_model_forward(&t->model, to_device(t, &ab), ab.feat_lens, ab.B, (int)ab.Tmax, 1, bseed);
        double loss = asr_model_loss(&t->model, ab.labels, ab.label_lens, (int)ab.Lmax, NULL);
        int invalid = isfinite(loss) ? NAN_GUARD_OK : NAN_GUARD_LOSS;
        if (!invalid) {
            asr_model_backward(&t->model, (float)(1.0 / (double)accum));
            step_loss += loss, step_n++;
        }
        step_invalid |= invalid;
        micro++;
        asr_batch_free(&ab);
        /* One rank decides alone when to step (an invalid loss steps at once); several ranks step
         * together at accumulation boundaries, skipping the step when any rank saw a bad loss. */
        if (t->world == 1 && micro % accum != 0 && has_after && !invalid) continue;
        if (t->world > 1 && micro % accum != 0 && has_after) continue;
        if (t->world > 1) {
            float red[4] = {(float)step_invalid, (float)step_loss, (float)step_n, (float)audio_s};
            if (comm_all_reduce(t->dist.comm, red, 4, COMM_SUM, err) != 0) {
                rc = -1;
                break;
            }
            invalid = red[0] > 0 ? NAN_GUARD_LOSS : NAN_GUARD_OK;
            loss_acc += red[1], loss_n += (int64_t)red[2];
            t->audio_total += red[3];
        } else {
            invalid = step_invalid;
            loss_acc += step_loss, loss_n += step_n;
            t->audio_total += audio_s;
        }
        step_invalid = 0, step_loss = 0, step_n = 0, audio_s = 0;
        double norm = NAN;
        if (!invalid && reduce_gradients(t, &norm, err) != 0) {
            rc = -1;
            break;
        }
        if (!invalid && !isfinite(norm)) invalid = NAN_GUARD_GRAD;
        guard_verdict v = nan_guard_update(&t->guard, invalid, (int64_t)k, t->epoch, err);
        if (v == GUARD_STOP) {
            rc = -1;
            break;
        }
        double lr = scheduler_lr(&t->sched);
        if (v == GUARD_STEP) {
            if (optimizer_step(t, lr, err) != 0) {
                rc = -1;
                break;
            }
            t->step++;
        }
        scheduler_on_step_end(&t->sched);
        asr_model_zero_grad(&t->model);
        double el = now_seconds() - t0, rate = el > 0 ? t->audio_total / el : 0;
        if (v == GUARD_STEP && t->step % log_every == 0) {
            metric m[] = {{"train/loss", loss_n ? loss_acc / (double)loss_n : NAN, 0},
                          {"train/lr", lr, 0},
                          {"train/grad_norm", norm, 0},
                          {"epoch", (double)t->epoch, 1}};
            log_metrics(t, m, 4);
            log_info("epoch %" PRId64 " step %" PRId64 " loss %.3f lr %.3g grad_norm %.3g %.1f audio-s/s",
                     t->epoch + 1, t->step, m[0].value, lr, norm, rate);
            loss_acc = 0, loss_n = 0;
        }
        /* The progress line carries the latest numbers (progress keeps a pointer to label). */
        snprintf(label, sizeof label, "train epoch %" PRId64 " step %" PRId64 " loss %.2f lr %.2e %.0f audio-s/s",
                 t->epoch + 1, t->step, loss, lr, rate);
        if (t->rank == 0) progress_update(&pr, k + 1);
    }
    if (rc == 0 && t->rank == 0) progress_finish(&pr);
    free(items);
    free(plan);
    return rc;
}

/* Several ranks must hold the same parameter bits after every step; checked at each epoch end by
 * gathering a hash of every rank's parameters (cheap next to an epoch). */
static int check_ranks_agree(trainer *t, esp_err *err)
{
    if (t->world == 1) return 0;
    uint64_t *h = xcalloc((size_t)t->world, sizeof *h);
    h[t->rank] = fnv1a64_bytes(FNV1A64_INIT, t->model.params, t->model.table.total * sizeof(float));
    int rc = comm_all_gather(t->dist.comm, (float *)h, (size_t)t->world * 2, err);
    for (int r = 1; r < t->world && rc == 0; r++)
        if (h[r] != h[0])
            rc = esp_fail(err, "train: parameters differ between rank 0 and rank %d after epoch %" PRId64
                               " (hash %016" PRIx64 " vs %016" PRIx64 "): the ranks diverged",
                          r, t->epoch, h[0], h[r]);
    if (rc == 0)
        log_info("train: epoch %" PRId64 ": parameters identical on all %d ranks (hash %016" PRIx64 ")", t->epoch,
                 t->world, h[0]);
    free(h);
    return rc;
}

static int run_training(trainer *t, esp_err *err)
{
    const training_cfg *cfg = t->cfg;
    const trainer_cfg *tc = cfg->trainer;
    int64_t max_epochs = tc->max_epochs > 0 ? tc->max_epochs : 1000; /* Lightning's default */
    int64_t val_every = tc->check_val_every_n_epoch > 0 ? tc->check_val_every_n_epoch : 1;
    if (t->epoch >= max_epochs) {
        log_info("train: already trained %" PRId64 " epochs (trainer.max_epochs %" PRId64 ")", t->epoch, max_epochs);
        return t->rank == 0 ? ckpt_average(&t->ckpt, err) : 0;
    }
    for (; t->epoch < max_epochs;) {
        if (train_epoch(t, err) != 0) return -1;
        t->epoch++;
        if (check_ranks_agree(t, err) != 0) return -1;
        if (t->sched.interval == SCHED_PER_EPOCH) scheduler_on_epoch_end(&t->sched);
        metric m[3];
        size_t nm = 0;
        if (t->epoch % val_every == 0) {
            double vloss, vcer;
            if (validate(t, &vloss, &vcer, err) != 0) return -1;
            m[nm++] = (metric){"valid/loss", vloss, 0};
            m[nm++] = (metric){"valid/cer", vcer, 0};
            log_info("epoch %" PRId64 ": valid/loss %.3f valid/cer %.4f", t->epoch, vloss, vcer);
        }
        m[nm++] = (metric){"epoch", (double)(t->epoch - 1), 1};
        log_metrics(t, m, nm);
        if (save_checkpoint(t, m, nm, err) != 0) return -1;
    }
    return t->rank == 0 ? ckpt_average(&t->ckpt, err) : 0;
}

/* Keys the config schema accepts for later issues but this trainer does not act on yet: say so
 * (one warning each) instead of ignoring them; refuse what would train a different model. */
static int check_unused_keys(const training_cfg *cfg, const char *file, esp_err *err)
{
    const trainer_cfg *tc = cfg->trainer;
    const model_cfg *m = cfg->model;
    if (m && m->encoder_conf && !m->encoder_conf->normalize_before)
        return esp_fail(err, "%s: model.encoder_conf.normalize_before: false (post-LN blocks) is not supported (use true)",
                        file);
    if (tc->max_steps > 0)
        log_warn("%s: trainer.max_steps: not implemented yet; training stops at trainer.max_epochs", file);
    if (tc->val_check_interval > 0 && tc->val_check_interval != 1.0)
        log_warn("%s: trainer.val_check_interval: not implemented yet; validation runs at epoch ends "
                 "(trainer.check_val_every_n_epoch)", file);
    if (tc->num_sanity_val_steps > 0)
        log_warn("%s: trainer.num_sanity_val_steps: not implemented; no sanity validation runs", file);
    if (tc->precision && strcmp(tc->precision, "32") && strcmp(tc->precision, "32-true"))
        log_warn("%s: trainer.precision: %s is for GPUs (the CUDA backend); the CPU trains in float32", file,
                 tc->precision);
    if (m && m->model_conf && m->model_conf->ctc_weight > 0 && m->model_conf->ctc_weight != 1.0)
        log_warn("%s: model.model_conf.ctc_weight: %g asks for an attention decoder, which espnet3 does not have; "
                 "training is CTC only (ctc_weight 1.0)", file, m->model_conf->ctc_weight);
    if (m && m->model_conf && m->model_conf->lsm_weight > 0)
        log_warn("%s: model.model_conf.lsm_weight: label smoothing applies to the attention decoder; ignored by CTC",
                 file);
    if (m && m->token_list && cfg->tokenizer && cfg->tokenizer->save_path) {
        char *ours = xasprintf("%s/tokens.txt", cfg->tokenizer->save_path);
        char *a = path_absolute(ours), *b = path_absolute(m->token_list);
        if (strcmp(a, b))
            log_warn("%s: model.token_list: %s is not used; the token list is ${tokenizer.save_path}/tokens.txt (%s)",
                     file, m->token_list, ours);
        free(a), free(b), free(ours);
    }
    const loader_split_cfg *tr = cfg->dataloader->train;
    if (tr->iter_factory && tr->iter_factory->num_workers > 0)
        log_warn("%s: dataloader.train.iter_factory.num_workers: not implemented yet; features are computed in the "
                 "training process", file);
    return 0;
}

int stage_train(const stage_ctx *ctx, esp_err *err)
{
    const training_cfg *cfg = training_of(ctx->configs);
    const char *file = ctx->configs->training->path;
    if (!cfg->exp_dir) return esp_fail(err, "%s: exp_dir: missing (set exp_dir)", file);
    if (!cfg->trainer) return esp_fail(err, "%s: trainer: missing (the template conf/training.yaml sets it)", file);
    if (!cfg->dataloader || !cfg->dataloader->train || !cfg->dataloader->valid)
        return esp_fail(err, "%s: dataloader.train and dataloader.valid: missing", file);
    const dist_env *env = dist_process_env(err);
    if (!env) return -1;
    const trainer_cfg *tc = cfg->trainer;
    int64_t devices = tc->devices > 0 ? tc->devices : 1, nodes = tc->num_nodes > 0 ? tc->num_nodes : 1;
    if (devices * nodes != env->world_size)
        return esp_fail(err, "%s: trainer.devices %" PRId64 " x trainer.num_nodes %" PRId64 " = %" PRId64
                             " ranks, but the launch (%s) has world size %d (make them match: trainer.devices "
                             "per node, trainer.num_nodes nodes)",
                        file, devices, nodes, devices * nodes, dist_source_name(env->source), env->world_size);
    int fsdp = tc->strategy && !strcmp(tc->strategy, "fsdp");
    if (check_unused_keys(cfg, file, err) != 0) return -1;
    if (cfg->model && cfg->model->ctc_conf && !cfg->model->ctc_conf->reduce)
        return esp_fail(err, "%s: model.ctc_conf.reduce: false (a summed loss) is not supported (use true)", file);
    int sharded[2];
    for (int k = 0; k < 2; k++) {
        const loader_split_cfg *lc = k ? cfg->dataloader->valid : cfg->dataloader->train;
        if ((sharded[k] = shard_validate(lc, k ? "dataloader.valid" : "dataloader.train", env->world_size, err)) < 0)
            return -1;
    }

    trainer *t = xcalloc(1, sizeof *t);
    t->cfg = cfg;
    t->rank = env->rank, t->world = env->world_size, t->fsdp = fsdp && env->world_size > 1;
    int rc = -1;
    /* Ranks started by separate commands agree on the run by the experiment they train. */
    char *abs_exp = path_absolute(cfg->exp_dir);
    char *fallback_id = xasprintf("exp-%016" PRIx64 "-w%d", fnv1a64_str(abs_exp), env->world_size);
    free(abs_exp);
    int joined = dist_join(&t->dist, env, fallback_id, tc->dist_timeout, err);
    free(fallback_id);
    if (joined != 0) {
        free(t);
        return -1;
    }
    if (t->world > 1)
        log_info("train: rank %d of %d (local %d of %d, node %d) via %s, strategy %s", t->rank, t->world,
                 env->local_rank, env->local_world_size, env->node_rank, dist_source_name(env->source),
                 t->fsdp ? "fsdp" : "ddp");
    if (backend_cpu_init(&t->be, cpu_threads(), err) != 0) {
        dist_abort(&t->dist);
        free(t);
        return -1;
    }
    /* Validation batches are striped over the ranks either way (every batch is scored once). */
    if (split_open(&t->train, cfg, "train", cfg->dataloader->train, 1, sharded[0], err) != 0) goto out_be;
    if (split_open(&t->valid, cfg, "valid", cfg->dataloader->valid, 0, 0, err) != 0) goto out_train;

    model_dims dims;
    if (model_dims_from_cfg(&dims, cfg->model, t->train.data.fo.n_mels, (int)t->train.data.tokens.n, err) != 0)
        goto out_valid;
    const encoder_conf_cfg *ec = cfg->model ? cfg->model->encoder_conf : NULL;
    /* encoder_conf rates: ESPnet2's defaults are 0.1, 0.1 and 0.0; a config that leaves the
     * encoder_conf block out gets them, one that writes the block states its own. */
    model_rates rates = {.dropout = ec ? (float)ec->dropout_rate : 0.1f,
                         .pos_dropout = ec ? (float)ec->positional_dropout_rate : 0.1f,
                         .att_dropout = ec ? (float)ec->attention_dropout_rate : 0.0f,
                         .ctc_dropout = cfg->model && cfg->model->ctc_conf ? (float)cfg->model->ctc_conf->dropout_rate : 0,
                         .ctc_keep_inf = cfg->model && cfg->model->ctc_conf && !cfg->model->ctc_conf->zero_infinity};
    asr_model_init(&t->model, &t->be, &dims, &rates);
    if (param_init(t->model.params, &t->model.table, cfg->init, (uint64_t)cfg->seed, err) != 0) goto out_model;
    if (optim_opts_from_cfg(cfg->optimizer, &t->oo, err) != 0) goto out_model;
    adam_state_init(&t->opt, t->model.table.total, t->oo.amsgrad);
    if (scheduler_from_cfg(cfg->scheduler, cfg->scheduler_interval, t->oo.lr, &t->sched, err) != 0) goto out_opt;
    /* Rank 0 alone owns the experiment folder: checkpoints, resume, logs. */
    if (t->rank == 0 && ckpt_open(&t->ckpt, cfg->exp_dir, cfg->best_model_criterion, cfg->n_best_model_criterion, err) != 0)
        goto out_opt;
    if (t->rank == 0 && resume(t, err) != 0) goto out_ckpt;
    if (sync_from_rank0(t, err) != 0) goto out_ckpt;
    t->first_epoch = t->epoch;
    err_calc_init(&t->ec, &t->train.data.tokens);

    const logger_cfg *lg = cfg->trainer->n_logger ? &cfg->trainer->logger[0] : NULL;
    char *tbdir = xasprintf("%s/%s/version_0", lg && lg->save_dir ? lg->save_dir : cfg->exp_dir,
                            lg && lg->name ? lg->name : "tensorboard");
    char *csv = xasprintf("%s/metrics.csv", cfg->exp_dir);
    if (t->rank != 0) {
        rc = run_training(t, err);
    } else if (tb_open(&t->tb, tbdir, t->step, err) == 0) {
        if (metrics_csv_open(&t->csv, csv, t->step, err) == 0) {
            log_info("train: %zu parameters, %zu train / %zu valid batches, %d threads, exp_dir %s",
                     t->model.table.total, t->train.batches.n, t->valid.batches.n, t->be.threads, cfg->exp_dir);
            rc = run_training(t, err);
            metrics_csv_close(&t->csv);
        }
        tb_close(&t->tb);
    }
    free(tbdir);
    free(csv);
out_ckpt:
    if (t->rank == 0) ckpt_close(&t->ckpt);
out_opt:
    adam_state_free(&t->opt);
out_model:
    t->be.free(&t->be, t->dev_feats);
    asr_model_free(&t->model);
out_valid:
    split_close(&t->valid);
out_train:
    split_close(&t->train);
out_be:
    t->be.destroy(&t->be);
    /* The last barrier keeps rank 0's store up until every rank is done with it. */
    if (rc == 0 && dist_leave(&t->dist, err) != 0) rc = -1;
    if (rc != 0) dist_abort(&t->dist);
    free(t);
    return rc;
}
