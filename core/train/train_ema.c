/* The trainer's side of Lightning's EMAWeightAveraging (core/train/ema.h): the average lives on
 * the backend beside the model (the parameters, then the BatchNorm buffers, as the model's flat
 * state), starts as a copy of the model (AveragedModel's deepcopy at setup), is updated after the
 * optimizer steps and epoch ends that should_update picks, and is swapped into the model for every
 * validation (on_validation_epoch_start / _end). fsdp: each rank averages its chunk of the
 * parameters (the chunk of the Adam moments) and the buffers; a validation gathers the chunks
 * into the model, a checkpoint gathers them for rank 0. ddp: every rank averages all of it (the
 * same bits: every rank holds the same parameters); the buffers' average is each rank's own, and
 * rank 0's is the one validation uses and checkpoints keep, as for the buffers themselves. */
#include <stdlib.h>
#include <string.h>

#include "core/train/trainer_internal.h"

/* The buffers in runs of floats and of counters (offsets from the buffers' start). */
static void build_spans(trainer *t)
{
    const param_table *pt = &t->model.table;
    train_ema *e = &t->ema;
    e->spans = xcalloc(pt->n ? pt->n : 1, sizeof *e->spans);
    e->n_spans = 0;
    for (size_t i = 0; i < pt->n; i++) {
        const param_info *p = &pt->items[i];
        if (p->kind == PARAM_TRAINED || !p->count) continue;
        int counts = p->kind == PARAM_COUNTER;
        size_t off = p->offset - pt->total;
        ema_span *last = e->n_spans ? &e->spans[e->n_spans - 1] : NULL;
        if (last && last->counts == counts && last->offset + last->count == off) last->count += p->count;
        else e->spans[e->n_spans++] = (ema_span){off, p->count, counts};
    }
}

/* Floats of this rank's average before its buffers: all parameters, or the fsdp chunk. */
static size_t param_floats(const trainer *t)
{
    return t->fsdp && t->ema.sharded ? t->shard_hi - t->shard_lo : t->model.table.total;
}

static size_t buffer_floats(const trainer *t) { return t->model.table.state_total - t->model.table.total; }

void train_ema_open(trainer *t)
{
    train_ema *e = &t->ema;
    memset(e, 0, sizeof *e);
    if (!t->o->ema.on) return;
    size_t n = t->model.table.state_total;
    e->avg = t->be->alloc(t->be, (n ? n : 1) * sizeof(float));
    if (n) t->be->copy(t->be, e->avg, t->model.params, n * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
    build_spans(t);
}

void train_ema_free(trainer *t)
{
    if (t->ema.avg) t->be->free(t->be, t->ema.avg);
    free(t->ema.spans);
    memset(&t->ema, 0, sizeof t->ema);
}

static void update(trainer *t)
{
    train_ema *e = &t->ema;
    const param_table *pt = &t->model.table;
    size_t lo = t->fsdp && e->sharded ? t->shard_lo : 0, k = param_floats(t);
    ema_update(t->be, &t->o->ema, e->n_averaged, e->avg, t->model.params + lo, k, e->avg + k,
               t->model.params + pt->total, e->spans, e->n_spans);
    e->n_averaged++;
}

void train_ema_after_step(trainer *t)
{
    train_ema *e = &t->ema;
    /* on_train_batch_end: global_step past the last update's, and should_update(global_step - 1) */
    if (!e->avg || t->step <= e->latest_step || !ema_should_update_step(&t->o->ema, t->step - 1)) return;
    update(t);
    e->latest_step = t->step;
}

void train_ema_epoch_end(trainer *t, int64_t epoch_idx)
{
    if (t->ema.avg && ema_should_update_epoch(&t->o->ema, epoch_idx)) update(t);
}

int train_ema_swap_in(trainer *t, float **saved, esp_err *err)
{
    *saved = NULL;
    train_ema *e = &t->ema;
    if (!e->avg) return 0;
    const param_table *pt = &t->model.table;
    size_t n = pt->state_total, k = param_floats(t), nb = buffer_floats(t);
    backend *be = t->be;
    *saved = be->alloc(be, (n ? n : 1) * sizeof(float));
    if (n) be->copy(be, *saved, t->model.params, n * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
    float *dst = t->model.params + (t->fsdp && e->sharded ? t->shard_lo : 0);
    if (k) be->copy(be, dst, e->avg, k * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
    if (nb) be->copy(be, t->model.params + pt->total, e->avg + k, nb * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
    /* fsdp: every rank's chunk of the average into every rank's model */
    if (t->fsdp && e->sharded && comm_all_gather(t->dist.comm, t->model.params, pt->total, err) != 0) {
        train_ema_swap_out(t, *saved);
        *saved = NULL;
        return -1;
    }
    return 0;
}

void train_ema_swap_out(trainer *t, float *saved)
{
    if (!saved) return;
    size_t n = t->model.table.state_total;
    if (n) t->be->copy(t->be, t->model.params, saved, n * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
    t->be->free(t->be, saved);
}

int train_ema_to_host(trainer *t, float *host, esp_err *err)
{
    train_ema *e = &t->ema;
    const param_table *pt = &t->model.table;
    backend *be = t->be;
    size_t k = param_floats(t), nb = buffer_floats(t);
    be->synchronize(be);
    if (!(t->fsdp && e->sharded)) {
        if (t->rank == 0 && pt->state_total)
            be->copy(be, host, e->avg, pt->state_total * sizeof(float), BACKEND_DEVICE_TO_HOST);
        return 0;
    }
    float *full = be->alloc(be, (pt->total ? pt->total : 1) * sizeof(float));
    if (k) be->copy(be, full + t->shard_lo, e->avg, k * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
    int rc = comm_all_gather(t->dist.comm, full, pt->total, err);
    if (rc == 0 && t->rank == 0) {
        be->synchronize(be);
        if (pt->total) be->copy(be, host, full, pt->total * sizeof(float), BACKEND_DEVICE_TO_HOST);
        if (nb) be->copy(be, host + pt->total, e->avg + k, nb * sizeof(float), BACKEND_DEVICE_TO_HOST);
    }
    be->free(be, full);
    return rc;
}

void train_ema_from_host(trainer *t, const float *host, int64_t n_averaged, int64_t latest_step)
{
    size_t n = t->model.table.state_total;
    if (n) t->be->copy(t->be, t->ema.avg, host, n * sizeof(float), BACKEND_HOST_TO_DEVICE);
    t->ema.n_averaged = n_averaged;
    t->ema.latest_step = latest_step;
}

int train_ema_sync(trainer *t, esp_err *err)
{
    train_ema *e = &t->ema;
    if (!e->avg) return 0;
    if (t->world > 1) {
        int64_t c[2] = {e->n_averaged, e->latest_step};
        size_t bytes = t->model.table.state_total * sizeof(float);
        if (host_broadcast(t, c, sizeof c, err) != 0 ||
            (bytes && comm_broadcast(t->dist.comm, e->avg, bytes, 0, err) != 0))
            return -1;
        e->n_averaged = c[0], e->latest_step = c[1];
    }
    if (!t->fsdp) return 0;
    /* fsdp: keep this rank's chunk of the parameters' average (and the buffers') */
    size_t k = t->shard_hi - t->shard_lo, nb = buffer_floats(t), total = t->model.table.total;
    float *mine = t->be->alloc(t->be, (k + nb ? k + nb : 1) * sizeof(float));
    if (k) t->be->copy(t->be, mine, e->avg + t->shard_lo, k * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
    if (nb) t->be->copy(t->be, mine + k, e->avg + total, nb * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
    t->be->free(t->be, e->avg);
    e->avg = mine;
    e->sharded = 1;
    return 0;
}
