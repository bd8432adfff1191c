/* The trainer's state across processes and time: checkpoints (rank 0 writes; fsdp gathers the
 * moments from every rank first), resume from `last` (or a checkpoint directory fit.ckpt_path names:
 * core/train/train_import.c), rank 0's state on every rank at the start,
 * and the check that every rank holds the same parameters. BatchNorm buffers (the Conformer's
 * running statistics) are model state but not parameters: each rank updates its own from its own
 * batches, rank 0's are the ones checkpoints keep and the ones every rank validates with. Parameters
 * and the optimizer's state live on the backend; they reach the host only through be->copy. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/hash.h"
#include "core/base/progress.h"
#include "core/nn/model_files.h"
#include "core/train/trainer_internal.h"

static size_t n_params(const trainer *t)
{
    return t->model.table.total;
}

static float *host_floats(size_t n)
{
    return xcalloc(n ? n : 1, sizeof(float));
}

static void dev_to_host(trainer *t, float *host, const float *dev, size_t n)
{
    t->be->synchronize(t->be);
    t->be->copy(t->be, host, dev, n * sizeof(float), BACKEND_DEVICE_TO_HOST);
}

static void free_buffers(float **host, size_t n)
{
    for (size_t i = 0; i < n; i++) free(host[i]), host[i] = NULL;
}

/* The optimizer's full state buffers on the host (host[i] for t->opt.buffers[i]). fsdp: every
 * rank's chunk gathered on the device first (all ranks take part). */
static int optim_state_to_host(trainer *t, float *host[OPTIM_MAX_BUFFERS], esp_err *err)
{
    size_t n = n_params(t), nb = t->opt.n_buffers;
    for (size_t i = 0; i < nb; i++) host[i] = host_floats(n);
    if (!t->fsdp) {
        for (size_t i = 0; i < nb; i++) dev_to_host(t, host[i], t->opt.buffers[i], n);
        return 0;
    }
    size_t k = t->shard_hi - t->shard_lo;
    float *full = nb ? t->be->alloc(t->be, (n ? n : 1) * sizeof(float)) : NULL;
    int rc = 0;
    for (size_t i = 0; i < nb && rc == 0; i++) {
        t->be->copy(t->be, full + t->shard_lo, t->opt.buffers[i], k * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
        rc = comm_all_gather(t->dist.comm, full, n, err);
        if (rc == 0) dev_to_host(t, host[i], full, n);
    }
    if (full) t->be->free(t->be, full);
    if (rc != 0) free_buffers(host, nb);
    return rc;
}

/* EMAWeightAveraging's average as state tensors "ema.<name>" (ESPnet2 names; what Lightning's full
 * checkpoint holds as its state_dict), appended to state at *n; names are freed by the caller. */
static void ema_tensors(const trainer *t, const float *avg, int64_t *counts, st_tensor *state, size_t *n)
{
    const param_table *pt = &t->model.table;
    model_state_tensors(pt, avg, counts, state + *n);
    for (size_t i = 0; i < pt->n; i++) state[*n + i].name = xasprintf("ema.%s", pt->items[i].name);
    *n += pt->n;
}

static int save_at(trainer *t, const metric *metrics, size_t n_metrics, int64_t batch, esp_err *err)
{
    const param_table *pt = &t->model.table;
    size_t nb = t->opt.n_buffers;
    float *opt_host[OPTIM_MAX_BUFFERS] = {NULL}, *avg = NULL;
    if ((t->fsdp || t->rank == 0) && optim_state_to_host(t, opt_host, err) != 0) return -1;
    if (t->ema.avg) { /* every rank takes part (fsdp gathers the chunks) */
        avg = host_floats(pt->state_total);
        if (train_ema_to_host(t, avg, err) != 0) {
            free_buffers(opt_host, nb), free(avg);
            return -1;
        }
    }
    char name[64]; /* ckpt_save's directory name */
    snprintf(name, sizeof name, "epoch=%" PRId64 "-step=%" PRId64, t->epoch, t->step);
    if (t->rank != 0 || (batch > 0 && t->ckpt.last && !strcmp(t->ckpt.last, name))) {
        /* inside an epoch with no step since the last checkpoint (the NaN guard skipped them): it stays */
        if (t->rank == 0) log_info("train: %s holds this state already (no optimizer step since): not saved again", name);
        free_buffers(opt_host, nb), free(avg);
        return 0;
    }
    /* Parameters and BatchNorm buffers (rank 0's running statistics). */
    float *params = host_floats(pt->state_total);
    asr_model_state_to_host(&t->model, params);
    st_tensor *model = xcalloc(pt->n ? pt->n : 1, sizeof *model);
    int64_t *counts = xcalloc(pt->n ? pt->n : 1, sizeof *counts);
    model_state_tensors(pt, params, counts, model);
    /* The optimizer's buffers by torch's names (optimizer.exp_avg, optimizer.momentum_buffer, ...);
     * 16-mixed: the loss scaler's state too (torch keeps GradScaler.state_dict() in the checkpoint). */
    float scale = t->scaler.scale;
    st_tensor *state = xcalloc(OPTIM_MAX_BUFFERS + 1 + pt->n, sizeof *state);
    int64_t total = (int64_t)pt->total;
    size_t n_state = 0;
    for (size_t i = 0; i < nb; i++)
        state[n_state++] = (st_tensor){.name = xasprintf("optimizer.%s", t->opt.buffer_names[i]), .dtype = ST_F32,
                                       .ndim = 1, .shape = {total}, .data = opt_host[i]};
    if (t->scaler.enabled)
        state[n_state++] =
            (st_tensor){.name = "grad_scaler.scale", .dtype = ST_F32, .ndim = 1, .shape = {1}, .data = &scale};
    size_t ema_at = n_state;
    int64_t *ema_counts = xcalloc(pt->n ? pt->n : 1, sizeof *ema_counts);
    if (avg) ema_tensors(t, avg, ema_counts, state, &n_state);
    /* train.batch_in_epoch: the plan index a mid-epoch checkpoint's epoch goes on at (0 at an epoch
     * end); with trainer.max_time, train.time_elapsed_ms: what it has counted so far (left out
     * otherwise, so that a checkpoint's state stays a function of the training alone). */
    ckpt_counter counters[13 + SCHED_STATE_MAX] = {{"optimizer.step", t->opt.step},
                                {"scheduler.last_epoch", t->sched.last_epoch},
                                {"nan_guard.countdown", t->guard.countdown},
                                {"train.batch_in_epoch", batch}};
    size_t n_counters = 4;
    if (t->o->max_time_s > 0)
        counters[n_counters++] = (ckpt_counter){"train.time_elapsed_ms", (int64_t)(train_elapsed(t) * 1000)};
    if (t->scaler.enabled) counters[n_counters++] = (ckpt_counter){"grad_scaler.growth_tracker", t->scaler.growth_tracker};
    if (t->started_from) counters[n_counters++] = (ckpt_counter){"train.started_from", t->started_from};
    if (t->es.monitor) { /* EarlyStopping's state: its count and its best (float32 bits) */
        int32_t best_bits;
        memcpy(&best_bits, &t->es.best, sizeof best_bits);
        counters[n_counters++] = (ckpt_counter){"early_stopping.wait_count", t->es.wait_count};
        counters[n_counters++] = (ckpt_counter){"early_stopping.best_bits", best_bits};
    }
    const char *sched_names[SCHED_STATE_MAX]; /* the plateau schedulers' lr, best and counts */
    int64_t sched_values[SCHED_STATE_MAX];
    size_t n_sched = scheduler_state(&t->sched, sched_names, sched_values);
    for (size_t i = 0; i < n_sched; i++) counters[n_counters++] = (ckpt_counter){sched_names[i], sched_values[i]};
    if (avg) { /* AveragedModel.n_averaged and the callback's latest_update_step */
        counters[n_counters++] = (ckpt_counter){"ema.n_averaged", t->ema.n_averaged};
        counters[n_counters++] = (ckpt_counter){"ema.latest_update_step", t->ema.latest_step};
    }
    /* check_val_every_n_epoch null counts batches over epochs */
    if (t->o->val_check.every_n_epochs == 0)
        counters[n_counters++] = (ckpt_counter){"train.total_batches", t->total_batches};
    /* a checkpoint inside the epoch that ranks: ESPnet3's name counts this epoch (epoch{E}_step{S}) */
    ckpt_info info = {.epoch = t->epoch, .step = t->step, .metrics = metrics, .n_metrics = n_metrics,
                      .counters = counters, .n_counters = n_counters, .in_epoch = batch > 0};
    int rc = ckpt_save(&t->ckpt, &info, model, pt->n, state, n_state, err);
    for (size_t i = 0; i < nb; i++) free((char *)state[i].name);
    for (size_t i = ema_at; i < n_state; i++) free((char *)state[i].name);
    free(state);
    free(ema_counts);
    free(avg);
    free(model);
    free(counts);
    free(params);
    free_buffers(opt_host, nb);
    return rc;
}

int save_checkpoint(trainer *t, const metric *metrics, size_t n_metrics, esp_err *err)
{
    int rc = save_at(t, metrics, n_metrics, 0, err);
    t->last_ckpt_time = now_seconds();
    return rc;
}

int save_checkpoint_validated_in_epoch(trainer *t, int64_t batch, const metric *metrics, size_t n_metrics, esp_err *err)
{
    int rc = save_at(t, metrics, n_metrics, batch, err);
    t->last_ckpt_time = now_seconds();
    return rc;
}

int save_checkpoint_in_epoch(trainer *t, int64_t batch, esp_err *err)
{
    if (t->rank == 0)
        log_info("train: checkpoint inside epoch %" PRId64 " at step %" PRId64 " (batch %" PRId64 ")", t->epoch + 1,
                 t->step, batch);
    int rc = save_at(t, NULL, 0, batch, err);
    t->last_ckpt_time = now_seconds();
    return rc;
}

int save_imported(trainer *t, esp_err *err)
{
    if (t->rank == 0)
        log_info("train: the state taken from fit.ckpt_path saved as our checkpoint of epoch %" PRId64 " step %" PRId64,
                 t->epoch, t->step);
    return save_at(t, NULL, 0, t->resume_batch, err);
}

/* 16-mixed: the scaler as the checkpoint left it; a checkpoint without one (a run in another
 * precision) leaves the initial scale. A scale that is not a positive finite float, or a negative
 * tracker, makes the checkpoint unusable. */
static int resume_scaler(trainer *t, const ckpt_loaded *c, esp_err *err)
{
    if (!t->scaler.enabled) return 0;
    const st_tensor *s = st_get(&c->state, "grad_scaler.scale");
    if (!s) {
        log_info("train: %s has no loss scaler state: 16-mixed starts at scale %g", c->dir, (double)t->scaler.scale);
        return 0;
    }
    float scale = 0;
    if (s->dtype == ST_F32 && st_numel(s) == 1) memcpy(&scale, s->data, sizeof scale);
    int64_t tracker = ckpt_counter_get(c, "grad_scaler.growth_tracker", 0);
    if (!(scale > 0 && isfinite(scale)) || tracker < 0)
        return esp_fail(err, "%s: grad_scaler.scale %g / growth_tracker %" PRId64 " is not a loss scaler's state "
                             "(a positive finite F32 scale of one element, a tracker >= 0)", c->dir, (double)scale,
                        tracker);
    t->scaler.scale = scale;
    t->scaler.growth_tracker = tracker;
    return 0;
}

/* EMAWeightAveraging's average from the checkpoint's "ema.*" tensors; a checkpoint without them (a
 * run without the callback) starts it from the resumed model, not yet averaged, as Lightning
 * initializes both from the state_dict then. */
static int resume_ema(trainer *t, const ckpt_loaded *c, const float *params, esp_err *err)
{
    if (!t->ema.avg) return 0;
    const param_table *pt = &t->model.table;
    char name[128];
    snprintf(name, sizeof name, "ema.%s", pt->n ? pt->items[0].name : "");
    if (!pt->n || !st_get(&c->state, name)) {
        log_warn("train: %s has no EMAWeightAveraging state: the average starts from the resumed weights", c->dir);
        train_ema_from_host(t, params, 0, 0);
        return 0;
    }
    float *avg = host_floats(pt->state_total);
    int rc = 0;
    for (size_t i = 0; i < pt->n && rc == 0; i++) {
        snprintf(name, sizeof name, "ema.%s", pt->items[i].name);
        rc = model_tensor_get(&c->state, name, &pt->items[i], avg + pt->items[i].offset, err);
    }
    int64_t n_avg = ckpt_counter_get(c, "ema.n_averaged", 0), latest = ckpt_counter_get(c, "ema.latest_update_step", 0);
    if (rc == 0 && (n_avg < 0 || latest < 0))
        rc = esp_fail(err, "%s: ema.n_averaged %" PRId64 " / ema.latest_update_step %" PRId64 ": negative (not a "
                           "checkpoint espnet3 wrote)", c->dir, n_avg, latest);
    if (rc == 0) train_ema_from_host(t, avg, n_avg, latest);
    free(avg);
    return rc;
}

/* The saved buffers of the run's optimizer (saved[i] for t->opt.buffers[i], in the checkpoint's
 * mapping). A checkpoint of another optimizer is refused; one of an AMSGrad run written before
 * espnet3 saved max_exp_avg_sq leaves it at zeros (saved[i] NULL), as those runs resumed. */
static int resume_optimizer_buffers(trainer *t, const ckpt_loaded *c, const float *saved[OPTIM_MAX_BUFFERS],
                                    esp_err *err)
{
    int64_t total = (int64_t)t->model.table.total;
    for (size_t i = 0; i < t->opt.n_buffers; i++) {
        char *name = xasprintf("optimizer.%s", t->opt.buffer_names[i]);
        int rc = 0;
        saved[i] = NULL;
        if (st_get(&c->state, name))
            rc = st_get_f32(&c->state, name, 1, &total, &saved[i], err);
        else if (!strcmp(t->opt.buffer_names[i], "max_exp_avg_sq"))
            log_warn("train: %s has no %s (written before espnet3 saved AMSGrad's maximum): it starts again from "
                     "zeros, so this run is not bit-identical to an uninterrupted one", c->dir, name);
        else
            rc = esp_fail(err, "%s: no %s in trainer_state.safetensors: the checkpoint was written with another "
                               "optimizer or other optimizer settings than this config's %s (resume with those it was "
                               "trained with, or start a new exp_dir)", c->dir, name, optim_kind_name(t->oo.kind));
        free(name);
        if (rc != 0) return -1;
    }
    return 0;
}

int resume(trainer *t, esp_err *err)
{
    ckpt_loaded c;
    int rc = ckpt_load_last(&t->ckpt, &c, err);
    if (rc != 0) return rc < 0 ? -1 : 0;
    rc = resume_loaded(t, &c, err);
    ckpt_loaded_free(&c);
    return rc;
}

int resume_loaded(trainer *t, const ckpt_loaded *c_in, esp_err *err)
{
    const ckpt_loaded c = *c_in;
    int rc = 0;
    const param_table *pt = &t->model.table;
    float *params = host_floats(pt->state_total);
    for (size_t i = 0; i < pt->n && rc == 0; i++)
        if (model_tensor_get(&c.model, pt->items[i].name, &pt->items[i], params + pt->items[i].offset, err) != 0) rc = -1;
    const float *opt_saved[OPTIM_MAX_BUFFERS];
    if (rc == 0 && resume_optimizer_buffers(t, &c, opt_saved, err) != 0) rc = -1;
    if (rc == 0 && resume_scaler(t, &c, err) != 0) rc = -1;
    if (rc == 0 && resume_ema(t, &c, params, err) != 0) rc = -1;
    if (rc == 0) {
        asr_model_state_from_host(&t->model, params);
        for (size_t i = 0; i < t->opt.n_buffers; i++)
            if (opt_saved[i])
                t->be->copy(t->be, t->opt.buffers[i], opt_saved[i], pt->total * sizeof(float), BACKEND_HOST_TO_DEVICE);
        t->opt.step = ckpt_counter_get(&c, "optimizer.step", 0);
        t->sched.last_epoch = ckpt_counter_get(&c, "scheduler.last_epoch", t->sched.last_epoch);
        const char *sched_names[SCHED_STATE_MAX];
        int64_t sched_values[SCHED_STATE_MAX];
        size_t n_sched = scheduler_state(&t->sched, sched_names, sched_values);
        for (size_t i = 0; i < n_sched; i++) sched_values[i] = ckpt_counter_get(&c, sched_names[i], sched_values[i]);
        scheduler_set_state(&t->sched, sched_values);
        t->guard.countdown = ckpt_counter_get(&c, "nan_guard.countdown", 0);
        t->resume_batch = ckpt_counter_get(&c, "train.batch_in_epoch", 0);
        t->time_before = (double)ckpt_counter_get(&c, "train.time_elapsed_ms", 0) / 1000.0;
        t->started_from = ckpt_counter_get(&c, "train.started_from", 0);
        t->total_batches = ckpt_counter_get(&c, "train.total_batches", 0);
        if (t->es.monitor) {
            int32_t best_bits;
            memcpy(&best_bits, &t->es.best, sizeof best_bits);
            t->es.wait_count = ckpt_counter_get(&c, "early_stopping.wait_count", 0);
            best_bits = (int32_t)ckpt_counter_get(&c, "early_stopping.best_bits", best_bits);
            memcpy(&t->es.best, &best_bits, sizeof best_bits);
        }
        if (t->resume_batch < 0 || t->time_before < 0 || t->total_batches < 0)
            rc = esp_fail(err, "%s: train.batch_in_epoch %" PRId64 " / train.time_elapsed_ms / train.total_batches: "
                               "negative (not a checkpoint espnet3 wrote; remove it to start from the one before)",
                          c.dir, t->resume_batch);
        t->epoch = c.epoch;
        t->step = c.step;
        log_info("train: resuming from %s (epoch %" PRId64 ", step %" PRId64 ")", c.dir, c.epoch, c.step);
    }
    free(params);
    return rc;
}

int sync_buffers_from_rank0(trainer *t, esp_err *err)
{
    const param_table *pt = &t->model.table;
    if (t->world == 1 || pt->state_total == pt->total) return 0;
    return comm_broadcast(t->dist.comm, t->model.params + pt->total, (pt->state_total - pt->total) * sizeof(float), 0,
                          err);
}

/* fsdp: keep only this rank's chunk of the optimizer state. */
static void shard_optimizer(trainer *t)
{
    comm_chunk(n_params(t), t->world, t->rank, &t->shard_lo, &t->shard_hi);
    size_t k = t->shard_hi - t->shard_lo, bytes = k * sizeof(float);
    optim_state shard;
    optim_state_init(&shard, t->be, k, &t->oo);
    shard.step = t->opt.step;
    for (size_t i = 0; i < shard.n_buffers; i++)
        t->be->copy(t->be, shard.buffers[i], t->opt.buffers[i] + t->shard_lo, bytes, BACKEND_DEVICE_TO_DEVICE);
    optim_state_free(&t->opt);
    t->opt = shard;
}

int sync_from_rank0(trainer *t, esp_err *err)
{
    if (t->world == 1) return 0;
    int32_t scale_bits;
    memcpy(&scale_bits, &t->scaler.scale, sizeof scale_bits);
    int32_t best_bits;
    memcpy(&best_bits, &t->es.best, sizeof best_bits);
    int64_t c[13 + SCHED_STATE_MAX] = {t->epoch, t->step, t->opt.step, t->sched.last_epoch, t->guard.countdown,
                                       t->scaler.growth_tracker, scale_bits, t->resume_batch,
                                       (int64_t)(t->time_before * 1000), t->es.wait_count, best_bits, t->imported,
                                       t->total_batches};
    const char *sched_names[SCHED_STATE_MAX]; /* the plateau schedulers' state rides behind */
    scheduler_state(&t->sched, sched_names, c + 13);
    comm *cm = t->dist.comm;
    size_t bytes = n_params(t) * sizeof(float), state_bytes = t->model.table.state_total * sizeof(float);
    /* Device buffers go to the comm as they are: it works on the backend's memory. The parameters
     * go with the BatchNorm buffers behind them. */
    if (host_broadcast(t, c, sizeof c, err) != 0 || comm_broadcast(cm, t->model.params, state_bytes, 0, err) != 0)
        return -1;
    for (size_t i = 0; i < t->opt.n_buffers; i++)
        if (comm_broadcast(cm, t->opt.buffers[i], bytes, 0, err) != 0) return -1;
    t->epoch = c[0], t->step = c[1], t->opt.step = c[2], t->sched.last_epoch = c[3], t->guard.countdown = c[4];
    t->scaler.growth_tracker = c[5];
    scale_bits = (int32_t)c[6];
    t->resume_batch = c[7], t->time_before = (double)c[8] / 1000.0;
    t->es.wait_count = c[9], best_bits = (int32_t)c[10], t->imported = (int)c[11], t->total_batches = c[12];
    memcpy(&t->es.best, &best_bits, sizeof best_bits);
    memcpy(&t->scaler.scale, &scale_bits, sizeof scale_bits);
    scheduler_set_state(&t->sched, c + 13);
    if (t->fsdp) shard_optimizer(t);
    return 0;
}

/* Several ranks must hold the same parameter bits after every step; checked at each epoch end by
 * gathering a hash of every rank's parameters (cheap next to an epoch). */
int check_ranks_agree(trainer *t, esp_err *err)
{
    if (t->world == 1) return 0;
    float *params = host_floats(n_params(t));
    asr_model_params_to_host(&t->model, params);
    uint64_t *h = xcalloc((size_t)t->world, sizeof *h);
    h[t->rank] = fnv1a64_bytes(FNV1A64_INIT, params, n_params(t) * sizeof(float));
    free(params);
    int rc = host_all_gather(t, h, (size_t)t->world * sizeof *h, err);
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
