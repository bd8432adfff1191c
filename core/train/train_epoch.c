/* One epoch of training steps: the batch plan (shuffled, striped over the ranks or one shard per
 * rank), the forward/loss/backward of each micro-batch, the step at accumulation boundaries
 * (gradients averaged across ranks, norm and clipping, the NaN guard, Adam, the scheduler), the
 * end-of-epoch agreement that lets ranks with unequal batch counts stop together, and the logs. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/compute/backend_profile.h"
#include "core/base/progress.h"
#include "core/base/rng.h"
#include "core/train/trainer_internal.h"

/* Device slot `slot` with room for n floats (grown: the arena planned the largest batch's). */
static float *feats_slot(trainer *t, int slot, size_t n)
{
    if (n > t->dev_cap[slot]) {
        t->be->free(t->be, t->dev_feats[slot]);
        t->dev_feats[slot] = t->be->alloc(t->be, n * sizeof(float));
        t->dev_cap[slot] = n;
    }
    return t->dev_feats[slot];
}

const float *trainer_to_device(trainer *t, const asr_batch *b, int slot)
{
    if (!b->feats) return NULL; /* an LM's batch: tokens alone */
    size_t n = (size_t)b->B * b->Tmax * (size_t)b->D;
    float *d = feats_slot(t, slot, n);
    t->be->copy(t->be, d, b->feats, n * sizeof(float), BACKEND_HOST_TO_DEVICE);
    return d;
}

/* The features of the batch at plan position k on the device. With uploads (a device backend and
 * the loading thread's page-locked copy) they travel on the upload stream into slot k % 2, and
 * the step's kernels wait for them on the device, not the host. */
static const float *batch_to_device(trainer *t, const asr_batch *b, size_t k, int in_pinned)
{
    int slot = (int)(k % BACKEND_UPLOAD_SLOTS);
    if (!in_pinned) return trainer_to_device(t, b, t->pinned[0] ? slot : 0); /* two slots were planned */
    size_t n = (size_t)b->B * b->Tmax * (size_t)b->D;
    float *d = feats_slot(t, slot, n);
    t->be->upload(t->be, slot, d, t->pinned[slot], n * sizeof(float));
    t->be->upload_wait(t->be, slot);
    return d;
}

/* Every random draw of the batch at plan position k comes from (seed, epoch, global position). */
static uint64_t batch_seed(const trainer *t, size_t k)
{
    return rng_derive((uint64_t)t->cfg->seed, (uint64_t)t->epoch, k * (size_t)t->world + (size_t)t->rank);
}

/* This rank's batches of the epoch: the plan's batch lists and how many of them train. */
typedef struct epoch_batches {
    const batch_list *bl;
    const size_t *plan;
    size_t nb;
} epoch_batches;

/* Starts loading the batch after plan position k beside the step (trainer.prefetch), into the
 * page-locked buffer of its slot once that buffer's last upload is done. */
static void prefetch_next(trainer *t, const epoch_batches *eb, size_t k, size_t *items)
{
    if (!t->prefetch || k + 1 >= eb->nb) return;
    size_t n = split_batch_items(&t->train, eb->bl, eb->plan[k + 1], items);
    int slot = (int)((k + 1) % BACKEND_UPLOAD_SLOTS);
    if (t->pinned[slot]) t->be->upload_done(t->be);
    batch_prefetch_start(&t->pf, &t->train.data, items, (int)n, batch_seed(t, k + 1), k + 1, t->pinned[slot],
                         t->pinned_floats);
}

/* Logging failures (disk full under tensorboard/) warn but do not stop training. */
void trainer_log_metrics(trainer *t, const metric *m, size_t n)
{
    if (t->rank != 0) return;
    const char *tags[VALID_METRICS_MAX + 1]; /* validation's and the epoch (the train log's are fewer) */
    float vals[VALID_METRICS_MAX + 1];
    ESP_CHECK(n <= VALID_METRICS_MAX + 1);
    for (size_t i = 0; i < n; i++) tags[i] = m[i].name, vals[i] = (float)m[i].value;
    esp_err e2;
    if (tb_add_scalars(&t->tb, t->step, tb_wall_time(), tags, vals, n, &e2) != 0) log_warn("tensorboard: %s", e2.msg);
    if (metrics_csv_log(&t->csv, t->step, m, n, &e2) != 0) log_warn("metrics.csv: %s", e2.msg);
}

/* 16-mixed: the loss scaler's unscale of this rank's averaged gradients (all of them with ddp,
 * its chunk with fsdp, whose ranks then agree on the verdict). *found_inf: inf/NaN anywhere. */
static int unscale_gradients(trainer *t, float *g, size_t n, int *found_inf, esp_err *err)
{
    *found_inf = grad_scaler_unscale(&t->scaler, t->be, g, n);
    if (!t->scaler.enabled || !t->fsdp) return 0;
    float f = (float)*found_inf;
    if (host_all_reduce(t, &f, 1, COMM_MAX, err) != 0) return -1;
    *found_inf = f > 0;
    return 0;
}

/* Averages the gradients over the ranks and returns their global L2 norm (clipping applied when
 * gradient_clip_val is set). ddp: the buckets were all-reduced already (take_step finished them),
 * every rank holds all averaged gradients;
 * fsdp: reduce_scatter, this rank holds its chunk; the norm's squares are gathered as doubles and
 * added in rank order so every rank gets the same bits. 16-mixed: the gradients are unscaled
 * first; with inf/NaN among them (*found_inf) there is no norm (NaN) and no clipping. Clipping by
 * value (Lightning's gradient_clip_algorithm value) clamps each gradient after the norm is taken
 * (the log's grad_norm and the non-finite check), as Lightning clips after the unscale. */
static int reduce_gradients(trainer *t, double *norm_out, int *found_inf, esp_err *err)
{
    backend *be = t->be;
    float *g = t->model.grads;
    size_t n = t->model.table.total;
    double clip = t->o->clip;
    *found_inf = 0;
    if (t->fsdp) {
        if (comm_reduce_scatter(t->dist.comm, g, n, COMM_AVG, err) != 0) return -1;
        size_t k = t->shard_hi - t->shard_lo;
        if (unscale_gradients(t, g + t->shard_lo, k, found_inf, err) != 0) return -1;
        if (*found_inf) return 0;
        double *sq = xcalloc((size_t)t->world, sizeof *sq);
        sq[t->rank] = be->sum_squares(be, g + t->shard_lo, k);
        int rc = host_all_gather(t, sq, (size_t)t->world * sizeof *sq, err);
        double total = 0;
        for (int r = 0; r < t->world; r++) total += sq[r];
        free(sq);
        if (rc != 0) return -1;
        *norm_out = sqrt(total);
        if (clip > 0 && t->o->clip_by_value) {
            if (isfinite(*norm_out)) be->clip_grad_value(be, g + t->shard_lo, k, (float)clip);
            return 0;
        }
        float coef = clip > 0 ? clip_grad_coef(*norm_out, clip) : 1.0f;
        if (coef < 1.0f) be->scale(be, g + t->shard_lo, g + t->shard_lo, coef, k);
        return 0;
    }
    if (unscale_gradients(t, g, n, found_inf, err) != 0) return -1;
    if (*found_inf) return 0;
    if (clip > 0 && t->o->clip_by_value) {
        *norm_out = sqrt(be->sum_squares(be, g, n));
        if (isfinite(*norm_out)) be->clip_grad_value(be, g, n, (float)clip);
        return 0;
    }
    *norm_out = clip > 0 ? be->clip_grad_norm(be, g, n, clip) : sqrt(be->sum_squares(be, g, n));
    return 0;
}

static int optimizer_step(trainer *t, double lr, esp_err *err)
{
    if (!t->fsdp) {
        optim_step(t->model.params, &t->opt, t->model.grads, &t->oo, lr);
        return 0;
    }
    optim_step(t->model.params + t->shard_lo, &t->opt, t->model.grads + t->shard_lo, &t->oo, lr);
    return comm_all_gather(t->dist.comm, t->model.params, t->model.table.total, err);
}

/* Whether every rank has batch k and batch k + 1: the end-of-epoch agreement (all_reduce MIN),
 * so ranks with unequal batch counts stop together. */
static int agree_has_next(trainer *t, size_t k, size_t nb, int *has, int *has_after, int *save, int *stop,
                          esp_err *err)
{
    /* Whether any rank wants a checkpoint or a stop rides along (0 for a wish: the minimum). */
    float f[4] = {k < nb ? 1.0f : 0.0f, k + 1 < nb ? 1.0f : 0.0f, train_wants_save(t) ? 0.0f : 1.0f,
                  train_wants_stop(t) ? 0.0f : 1.0f};
    if (t->world > 1 && host_all_reduce(t, f, 4, COMM_MIN, err) != 0) return -1;
    *has = f[0] > 0, *has_after = f[1] > 0;
    *save |= f[2] == 0;
    if (f[3] == 0 && !t->stop_reason) t->stop_reason = TRAIN_STOP_PEER;
    *stop |= f[3] == 0;
    return 0;
}

/* This rank's batch plan for the epoch. A sharded dataset gives each rank a whole shard, rotating
 * every epoch (ESPnet3's shard_idx = (epoch * world_size + rank) % total_shards); otherwise ranks
 * stripe the batches. */
static size_t *epoch_plan(trainer *t, const batch_list **bl, size_t *nplan, esp_err *err)
{
    split_data *s = &t->train;
    int shuffle = t->cfg->dataloader->train->iter_factory->shuffle;
    *bl = &s->batches;
    if (!s->shards) return sampler_epoch_plan(nplan, *bl, t->world, t->rank, shuffle, t->cfg->seed, t->epoch, err);
    size_t idx = shard_index(t->epoch, t->world, t->rank, s->n_shards);
    *bl = &s->shards[idx];
    size_t *plan = sampler_epoch_plan(nplan, *bl, 1, 0, shuffle, t->cfg->seed, t->epoch, err);
    log_info("train: epoch %" PRId64 ": rank %d trains shard %zu of %" PRId64 " (%zu batches)", t->epoch + 1, t->rank,
             idx, s->n_shards, *nplan);
    return plan;
}

/* The loss's parts of a micro-batch: an attention decoder's model's loss_ctc, loss_att and acc (a
 * transducer's loss_ctc and, in PART_ATT, loss_transducer; with lm_lin its auxiliary LM loss);
 * each intermediate CTC layer's loss. */
enum { PART_CTC, PART_ATT, PART_ACC, PART_LM, PART_IC0, PARTS = PART_IC0 + MODEL_MAX_INTERCTC };

/* Whether the model's loss has a decoder's parts (an ASR model with an attention decoder; an LM's
 * is one), or any parts at all (those, or intermediate CTC's). */
static int has_parts(const asr_model *m) { return m->dec && !m->dims.lm; }
static int has_any_parts(const asr_model *m) { return has_parts(m) || m->tr || interctc_metrics(m) > 0; }

/* Sums of the micro-batches since the last step, and of the steps since the last log line. */
typedef struct step_acc {
    double audio_s, loss_acc, step_loss;
    double step_part[PARTS], part_acc[PARTS];
    int64_t micro, loss_n, step_n;
    int step_invalid;
} step_acc;

/* Forward, loss and backward of plan entry k on this rank; an invalid loss skips the backward
 * (except with sync_batchnorm). */
static int micro_batch(trainer *t, const epoch_batches *eb, size_t k, size_t *items, step_acc *a, double *loss,
                       int *invalid, esp_err *err)
{
    split_data *s = &t->train;
    asr_batch ab;
    uint64_t bseed = batch_seed(t, k);
    int in_pinned = 0, got = batch_prefetch_take(&t->pf, k, &ab, &in_pinned, err);
    if (got < 0) return -1;
    if (!got) { /* the epoch's first batch: the step waits for all of it */
        double t0 = now_seconds();
        size_t n = split_batch_items(s, eb->bl, eb->plan[k], items);
        if (asr_batch_load(&ab, &s->data, items, (int)n, bseed, err) != 0) return -1;
        t->pf.wait_s += now_seconds() - t0;
    }
    prefetch_next(t, eb, k, items);
    /* Throughput: seconds of audio, or an LM's tokens (with <eos>). */
    for (int i = 0; i < ab.B; i++)
        a->audio_s += s->data.text_only ? ab.label_lens[i] + 1.0
                                        : ab.feat_lens[i] * (double)s->data.fo.hop_length / s->data.fo.fs;
    asr_model_forward(&t->model, batch_to_device(t, &ab, k, in_pinned), ab.feat_lens, ab.B, (int)ab.Tmax, 1, bseed);
    *loss = asr_model_loss(&t->model, ab.labels, ab.label_lens, (int)ab.Lmax, NULL);
    *invalid = isfinite(*loss) ? NAN_GUARD_OK : NAN_GUARD_LOSS;
    /* With sync_batchnorm the backward all-reduces too, so every rank runs it (the step is skipped
     * on all ranks when any saw a bad loss; the gradients are not used then). */
    if (*invalid && t->model.sync.all_reduce)
        asr_model_backward(&t->model, (float)(1.0 / (double)t->o->accumulate));
    if (!*invalid) {
        /* Lightning divides the loss by accumulate_grad_batches; 16-mixed scales it up too. */
        asr_model_backward(&t->model, (float)((double)grad_scaler_loss_scale(&t->scaler) / (double)t->o->accumulate));
        a->step_loss += *loss, a->step_n++;
        const asr_model *m = &t->model;
        if (has_parts(m)) {
            a->step_part[PART_CTC] += m->dims.no_ctc ? 0 : m->loss_ctc;
            a->step_part[PART_ATT] += m->loss_att;
            a->step_part[PART_ACC] += (double)m->att_correct / (double)m->att_tokens;
        }
        if (m->tr) {
            a->step_part[PART_CTC] += m->dims.no_ctc ? 0 : m->loss_ctc;
            a->step_part[PART_ATT] += m->loss_transducer;
            if (m->dims.tr_lm_lin) a->step_part[PART_LM] += m->loss_aux_lm;
        }
        for (int k = 0; k < interctc_metrics(m); k++) a->step_part[PART_IC0 + k] += m->loss_interctc[k];
    }
    a->step_invalid |= *invalid;
    a->micro++;
    asr_batch_free(&ab);
    return 0;
}

/* The step after the last micro-batch of an accumulation: the ranks' flags and sums combined,
 * gradients reduced, the guard's verdict, Adam and the scheduler. *norm and *lr for the logs. */
static int take_step(trainer *t, size_t k, step_acc *a, guard_verdict *v, double *norm, double *lr, esp_err *err)
{
    int invalid;
    /* ddp: the buckets the backward started, then the rest, on every rank before anything else
     * (also when a rank's loss was invalid: the ranks' collectives stay in step). */
    if (t->buckets.armed && grad_buckets_finish(&t->buckets, err) != 0) return -1;
    if (t->world > 1) {
        float red[4 + PARTS] = {(float)a->step_invalid, (float)a->step_loss, (float)a->step_n, (float)a->audio_s};
        for (int i = 0; i < PARTS; i++) red[4 + i] = (float)a->step_part[i];
        /* A model without parts keeps its four values (the parts are zeros it does not send). */
        if (host_all_reduce(t, red, has_any_parts(&t->model) ? 4 + PARTS : 4, COMM_SUM, err) != 0) return -1;
        invalid = red[0] > 0 ? NAN_GUARD_LOSS : NAN_GUARD_OK;
        a->loss_acc += red[1], a->loss_n += (int64_t)red[2];
        t->audio_total += red[3];
        for (int i = 0; i < PARTS; i++) a->part_acc[i] += red[4 + i];
    } else {
        invalid = a->step_invalid;
        a->loss_acc += a->step_loss, a->loss_n += a->step_n;
        t->audio_total += a->audio_s;
        for (int i = 0; i < PARTS; i++) a->part_acc[i] += a->step_part[i];
    }
    a->step_invalid = 0, a->step_loss = 0, a->step_n = 0, a->audio_s = 0;
    memset(a->step_part, 0, sizeof a->step_part);
    *norm = NAN;
    int found_inf = 0;
    if (!invalid && reduce_gradients(t, norm, &found_inf, err) != 0) return -1;
    if (!invalid && !found_inf && !isfinite(*norm)) invalid = NAN_GUARD_GRAD;
    *v = nan_guard_update(&t->guard, invalid, (int64_t)k, t->epoch, err);
    if (*v == GUARD_STOP) return -1;
    *lr = scheduler_lr(&t->sched);
    t->oo.beta1 = scheduler_beta1(&t->sched, t->oo.beta1); /* OneCycleLR sets Adam's betas[0] as torch does */
    if (*v == GUARD_STEP) {
        /* 16-mixed: inf/NaN gradients skip Adam (torch's GradScaler.step); the step still counts,
         * as Lightning's global_step does, and the scale backs off. */
        if (found_inf)
            log_info("train: step %" PRId64 ": inf/NaN gradients at loss scale %g: optimizer step skipped, scale %g",
                     t->step + 1, (double)t->scaler.scale, (double)(t->scaler.scale * t->scaler.backoff_factor));
        else if (optimizer_step(t, *lr, err) != 0)
            return -1;
        grad_scaler_update(&t->scaler, found_inf);
        t->step++;
    }
    scheduler_on_step_end(&t->sched);
    if (scheduler_check(&t->sched, err) != 0) return -1;
    asr_model_zero_grad(&t->model);
    return 0;
}

/* What the throughput counts: seconds of audio, or an LM's tokens. */
static const char *rate_unit(const trainer *t) { return t->train.data.text_only ? "tokens/s" : "audio-s/s"; }

/* The train/ metrics of the steps since the last log line (with a decoder also loss_ctc,
 * loss_att and acc, with a transducer loss_transducer and loss_ctc, with intermediate CTC each
 * layer's loss: means over the micro-batches as
 * train/loss). */
static void log_step(trainer *t, step_acc *a, double lr, double norm, double rate)
{
    double n = a->loss_n ? (double)a->loss_n : NAN;
    metric m[7 + MODEL_MAX_INTERCTC] = {{"train/loss", a->loss_acc / n, 0},
                   {"train/lr", lr, 0},
                   {"train/grad_norm", norm, 0},
                   {"epoch", (double)t->epoch, 1}};
    size_t nm = 4;
    char parts[96] = "";
    if (has_parts(&t->model)) {
        m[nm++] = (metric){"train/loss_att", a->part_acc[PART_ATT] / n, 0};
        m[nm++] = (metric){"train/acc", a->part_acc[PART_ACC] / n, 0};
        if (!t->model.dims.no_ctc) m[nm++] = (metric){"train/loss_ctc", a->part_acc[PART_CTC] / n, 0};
        snprintf(parts, sizeof parts, " (ctc %.3f att %.3f acc %.3f)", t->model.dims.no_ctc ? NAN : m[6].value,
                 m[4].value, m[5].value);
    }
    if (t->model.tr) { /* loss_transducer and loss_ctc (ESPnetASRTransducerModel's loss_aux_ctc) */
        m[nm++] = (metric){"train/loss_transducer", a->part_acc[PART_ATT] / n, 0};
        if (!t->model.dims.no_ctc)
            m[nm++] = (metric){t->model.dims.body ? "train/loss_aux_ctc" : "train/loss_ctc", a->part_acc[PART_CTC] / n, 0};
        snprintf(parts, sizeof parts, " (ctc %.3f transducer %.3f)", t->model.dims.no_ctc ? NAN : m[5].value,
                 m[4].value);
        if (t->model.dims.tr_lm_lin) m[nm++] = (metric){"train/loss_aux_lm", a->part_acc[PART_LM] / n, 0};
    }
    for (int k = 0; k < interctc_metrics(&t->model); k++)
        m[nm++] = (metric){interctc_metric_name(&t->model, IC_TRAIN_LOSS, k), a->part_acc[PART_IC0 + k] / n, 0};
    trainer_log_metrics(t, m, nm);
    log_info("epoch %" PRId64 " step %" PRId64 " loss %.3f%s lr %.3g grad_norm %.3g %.1f %s", t->epoch + 1,
             t->step, m[0].value, parts, lr, norm, rate, rate_unit(t));
    a->loss_acc = 0, a->loss_n = 0;
    memset(a->part_acc, 0, sizeof a->part_acc);
}

int train_epoch(trainer *t, esp_err *err)
{
    split_data *s = &t->train;
    size_t nplan;
    const batch_list *bl;
    size_t *plan = epoch_plan(t, &bl, &nplan, err);
    if (!plan) return -1;
    asr_data_set_epoch(&s->data, t->epoch); /* waveform augmentation draws from (seed, epoch, utterance) */
    size_t nb = limit_batches(t->o->limit_train, nplan);
    int64_t accum = t->o->accumulate;
    t->stopped_early = 0;
    if (val_check_epoch_start(t, nb, err) != 0) {
        free(plan);
        return -1;
    }
    size_t *items = xmalloc((s->keys.n + 1) * sizeof *items);
    char label[160];
    snprintf(label, sizeof label, "train epoch %" PRId64, t->epoch + 1);
    progress pr;
    if (t->rank == 0) progress_start(&pr, label, nb);
    double t0 = now_seconds();
    t->audio_total = 0;
    if (t->world > 1 && t->rank == 0 && t->epoch == t->first_epoch && !s->shards && s->batches.n % (size_t)t->world)
        log_warn("train: %zu batches do not split evenly over %d ranks: the last %zu are dropped each epoch "
                 "(each rank trains on %zu)", s->batches.n, t->world, s->batches.n % (size_t)t->world, nplan);
    /* A mid-epoch checkpoint's epoch goes on at its batch: the plan, the dropout and augmentation
     * draws are functions of (seed, epoch, position), the step's state is in the checkpoint. */
    size_t k0 = (size_t)t->resume_batch;
    t->resume_batch = 0;
    if (k0 > 0) log_info("train: epoch %" PRId64 " goes on at batch %zu of %zu", t->epoch + 1, k0 + 1, nb);
    step_acc a = {.micro = (int64_t)k0};
    epoch_batches eb = {bl, plan, nb};
    t->pf.wait_s = 0;
    t->epoch_batches = (int64_t)k0;
    int rc = 0, save = 0, stop = 0, stopped = 0;
    asr_model_zero_grad(&t->model);
    for (size_t k = k0; rc == 0; k++) {
        int has, has_after;
        if (agree_has_next(t, k, nb, &has, &has_after, &save, &stop, err) != 0) {
            rc = -1;
            break;
        }
        if (!has) break;
        double loss;
        int invalid;
        /* Several ranks step after this micro-batch (the test below): its backward starts the
         * ddp buckets. */
        if (t->world > 1 && !t->fsdp && ((a.micro + 1) % accum == 0 || !has_after))
            grad_buckets_arm(&t->buckets, t->dist.comm, t->model.grads);
        if (micro_batch(t, &eb, k, items, &a, &loss, &invalid, err) != 0) {
            rc = -1;
            break;
        }
        t->epoch_batches = (int64_t)k + 1, t->total_batches++;
        /* One rank decides alone when to step (an invalid loss steps at once); several ranks step
         * together at accumulation boundaries, skipping the step when any rank saw a bad loss. */
        if (t->world == 1 && a.micro % accum != 0 && has_after && !invalid) continue;
        if (t->world > 1 && a.micro % accum != 0 && has_after) continue;
        guard_verdict v;
        double norm, lr;
        prof_layer outer = backend_profile_enter(t->be, PROF_LAYER_OPTIMIZER);
        int stepped = take_step(t, k, &a, &v, &norm, &lr, err);
        backend_profile_leave(t->be, outer);
        if (stepped != 0) {
            rc = -1;
            break;
        }
        train_ema_after_step(t); /* EMAWeightAveraging's on_train_batch_end */
        double el = now_seconds() - t0, rate = el > 0 ? t->audio_total / el : 0;
        if (v == GUARD_STEP && t->step % t->o->log_every == 0) log_step(t, &a, lr, norm, rate);
        /* The progress line carries the latest numbers (progress keeps a pointer to label). */
        snprintf(label, sizeof label, "train epoch %" PRId64 " step %" PRId64 " loss %.2f lr %.2e %.0f %s",
                 t->epoch + 1, t->step, loss, lr, rate, rate_unit(t));
        if (t->rank == 0) progress_update(&pr, k + 1);
        /* Lightning's max_steps: the epoch ends with the step that reaches it (every rank steps
         * together, so all stop here). */
        if (t->o->max_steps > 0 && t->step >= t->o->max_steps) break;
        /* Validation inside the epoch (trainer.val_check_interval) with its checkpoint, which stands
         * for any other this step would have; EarlyStopping may end the epoch here. */
        if (has_after && val_check_after_batch(t)) {
            if (validate_in_epoch(t, err) != 0) {
                rc = -1;
                break;
            }
            save = 0;
            if (t->stopped_early) break;
            if (!stop) continue;
            stopped = 1;
            break;
        }
        /* A checkpoint inside the epoch after this step (the epoch's last step has the epoch end's):
         * every n steps, on rank 0's clock, or to stop (a signal, max_time). */
        if (t->o->ckpt_every_steps > 0 && v == GUARD_STEP && t->step % t->o->ckpt_every_steps == 0) save = 1;
        if ((save || stop) && has_after) {
            if (save_checkpoint_in_epoch(t, (int64_t)k + 1, err) != 0) {
                rc = -1;
                break;
            }
            save = 0;
            if (stop) {
                stopped = 1;
                break;
            }
        }
    }
    batch_prefetch_close(&t->pf); /* a batch loaded for a step that did not come */
    if (rc == 0 && t->rank == 0) progress_finish(&pr);
    /* The data stall: the host's wait for batches, against the epoch's wall time. */
    double batches = (double)(t->epoch_batches - (int64_t)k0), wall = now_seconds() - t0;
    if (rc == 0 && t->prefetch && t->rank == 0 && batches > 0 && wall > 0)
        log_info("train: epoch %" PRId64 ": the step waited %.2f ms per batch for it, %.1f%% of the epoch's %.1f ms "
                 "per batch (loaded beside the step%s)", t->epoch + 1, 1e3 * t->pf.wait_s / batches,
                 100 * t->pf.wait_s / wall, 1e3 * wall / batches,
                 t->be->upload ? ", its features uploaded on a second stream" : "");
    free(items);
    free(plan);
    return rc == 0 && stopped ? TRAINER_STOPPED : rc;
}
