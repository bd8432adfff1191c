/* trainer_run: joins the ranks, opens the backend, the data, the model and the optimizer, resumes,
 * then runs the epochs (validation, checkpoints) and writes the k-best average. */
#include "core/train/trainer_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/compute/backend_profile.h"
#include "core/compute/blas_core.h"
#include "core/data/tokenizer.h"
#include "core/nn/model_files.h"
#include "core/nn/lm_conf.h"
#include "core/nn/model_plan.h"

static int steps_done(const trainer *t)
{
    return t->o->max_steps > 0 && t->step >= t->o->max_steps;
}

/* Whether this model's validation reports `monitor`; when it does not, `have` lists what it does
 * report (for the message). */
static int validation_reports(const trainer *t, const char *monitor, char *have, size_t cap)
{
    metric v[VALID_METRICS_MAX];
    size_t n = validation_metrics(t, v), used = 0;
    for (size_t k = 0; k < n; k++)
        if (monitor && !strcmp(v[k].name, monitor)) return 1;
    have[0] = '\0';
    for (size_t k = 0; k < n && used < cap; k++)
        used += (size_t)snprintf(have + used, cap - used, "%s%s", k ? ", " : "", v[k].name);
    return 0;
}

/* EarlyStopping's monitor must be among the validation metrics: an error when strict (Lightning
 * raises), else a warning and no early stopping. */
static int early_stopping_check_monitor(trainer *t, esp_err *err)
{
    char have[256];
    if (!t->es.monitor || validation_reports(t, t->es.monitor, have, sizeof have)) return 0;
    if (t->o->early_stop_strict)
        return esp_fail(err, "trainer.callbacks: EarlyStopping's monitor %s is not reported by this model's validation "
                        "(it reports %s; or strict: false)", t->es.monitor, have);
    if (t->rank == 0)
        log_warn("trainer.callbacks: EarlyStopping's monitor %s is not reported by this model's validation (%s); "
                 "no early stopping (strict: false)", t->es.monitor, have);
    t->es.monitor = NULL;
    return 0;
}

/* ReduceLROnPlateau's (and WarmupReduceLROnPlateau's) scheduler_monitor must be among the validation
 * metrics: Lightning raises at the first epoch end otherwise. */
static int scheduler_check_monitor(const trainer *t, esp_err *err)
{
    char have[256];
    if (!t->sched.monitor || validation_reports(t, t->sched.monitor, have, sizeof have)) return 0;
    return esp_fail(err, "%s: scheduler_monitor: %s is not reported by this model's validation (it reports %s; "
                         "Lightning raises: the scheduler is conditioned on a metric which is not available)",
                    t->o->scheduler_monitor_at ? t->o->scheduler_monitor_at : "training config", t->sched.monitor, have);
}

/* At an epoch's end the plateau schedulers step on their monitor's latest value (the same on every
 * rank), as Lightning reads it from callback_metrics: the epoch end's validation, else the last one
 * inside an epoch; none yet in this run is Lightning's error. */
static int scheduler_at_epoch_end(trainer *t, esp_err *err)
{
    if (!t->sched.monitor) return 0;
    if (!t->monitor_seen)
        return esp_fail(err, "scheduler_monitor: ReduceLROnPlateau conditioned on metric %s which is not available: "
                             "no validation ran before the end of epoch %" PRId64 " (Lightning raises; validate in "
                             "every epoch)", t->sched.monitor, t->epoch);
    scheduler_on_validation(&t->sched, t->monitor_latest);
    return 0;
}

/* Lightning's min_epochs / min_steps: EarlyStopping's stop waits until both are met. */
static int min_training_done(const trainer *t)
{
    return t->epoch >= t->o->min_epochs && t->step >= t->o->min_steps;
}

/* After a validation: EarlyStopping's verdict on its monitor (the same on every rank: the metrics
 * are summed over the ranks). */
int early_stopping_says_stop(trainer *t, const metric *m, size_t nm, const char *after)
{
    if (!t->es.monitor) return 0;
    for (size_t i = 0; i < nm; i++) {
        if (strcmp(m[i].name, t->es.monitor) != 0) continue;
        const char *why;
        if (!early_stopping_update(&t->es, m[i].value, &why)) return 0;
        if (!min_training_done(t)) {
            if (t->rank == 0)
                log_info("train: early stopping asked %s (%s), but trainer.min_epochs %" PRId64 " / min_steps %" PRId64
                         " are not reached yet: training goes on", after, why, t->o->min_epochs, t->o->min_steps);
            return 0;
        }
        if (t->rank == 0)
            log_info("train: early stopping %s: %s (%s %g, best %g, %" PRId64 " without improvement, patience %" PRId64
                     ")", after, why, m[i].name, m[i].value, (double)t->es.best, t->es.wait_count, t->es.patience);
        return 1;
    }
    return 0;
}

/* Lightning's sanity check (trainer.num_sanity_val_steps, default 2; -1: all): that many
 * validation batches before training, so a broken validation fails now and not after an epoch.
 * Nothing is logged or kept. */
static int sanity_check(trainer *t, esp_err *err)
{
    int64_t n = t->o->sanity_val_steps;
    if (n == 0 || t->valid.batches.n == 0) return 0;
    metric m[VALID_METRICS_MAX];
    size_t nm;
    if (validate_on_average(t, n < 0 ? 0 : (size_t)n, m, &nm, err) != 0) return -1;
    size_t ran = n < 0 || (size_t)n > t->valid.batches.n ? t->valid.batches.n : (size_t)n;
    if (t->rank == 0)
        log_info("train: sanity check: %zu validation batch%s ran before training (trainer.num_sanity_val_steps)", ran,
                 ran == 1 ? "" : "es");
    return 0;
}

/* Training stopped early with its checkpoint written (a signal, max_time): says so, once. */
static int stopped(const trainer *t)
{
    if (t->rank == 0)
        log_info("train: stopped by %s at epoch %" PRId64 " step %" PRId64 "; resume with the same command",
                 train_stop_cause(t), t->epoch + 1, t->step);
    return TRAINER_STOPPED;
}

static int run_training(trainer *t, esp_err *err)
{
    const trainer_opts *o = t->o;
    if (t->epoch >= o->max_epochs || steps_done(t)) {
        if (steps_done(t))
            log_info("train: already trained %" PRId64 " steps (trainer.max_steps %" PRId64 ")", t->step, o->max_steps);
        else
            log_info("train: already trained %" PRId64 " epochs (trainer.max_epochs %" PRId64 ")", t->epoch,
                     o->max_epochs);
        return t->rank == 0 ? ckpt_average(&t->ckpt, err) : 0;
    }
    train_clock_start(t);
    if (early_stopping_check_monitor(t, err) != 0 || scheduler_check_monitor(t, err) != 0 || sanity_check(t, err) != 0)
        return -1;
    while (t->epoch < o->max_epochs && !steps_done(t)) {
        int r = train_epoch(t, err);
        if (r < 0) return -1;
        if (r == TRAINER_STOPPED) return stopped(t);
        t->epoch++;
        if (check_ranks_agree(t, err) != 0) return -1;
        /* Lightning steps an epoch-interval scheduler after the epoch's last batch: not when
         * EarlyStopping ended the epoch after a validation inside it */
        if (t->sched.interval == SCHED_PER_EPOCH && !t->stopped_early) scheduler_on_epoch_end(&t->sched);
        if (scheduler_check(&t->sched, err) != 0) return -1;
        metric m[VALID_METRICS_MAX + 1];
        size_t nm = 0;
        if (val_check_at_epoch_end(t)) {
            if (validate_on_average(t, 0, m, &nm, err) != 0) return -1;
            char line[256];
            size_t used = 0;
            for (size_t i = 0; i < nm && used < sizeof line; i++)
                used += (size_t)snprintf(line + used, sizeof line - used, " %s %.4f", m[i].name, m[i].value);
            log_info("epoch %" PRId64 ":%s", t->epoch, line);
            note_monitor(t, m, nm);
        }
        if (scheduler_at_epoch_end(t, err) != 0) return -1;
        /* on_train_epoch_end: the EMA's epoch update (update_starting_at_epoch), after the validation */
        train_ema_epoch_end(t, t->epoch - 1);
        char after[64];
        snprintf(after, sizeof after, "after epoch %" PRId64, t->epoch);
        int early = t->stopped_early || (nm > 0 && early_stopping_says_stop(t, m, nm, after));
        m[nm++] = (metric){"epoch", (double)(t->epoch - 1), 1};
        trainer_log_metrics(t, m, nm);
        if (save_checkpoint(t, m, nm, err) != 0) return -1;
        if (early) break;
        /* A stop asked for in the epoch's last step or its validation: after this checkpoint. */
        float wants = train_wants_stop(t) ? 1.0f : 0.0f;
        if (t->world > 1 && host_all_reduce(t, &wants, 1, COMM_MAX, err) != 0) return -1;
        if (wants > 0 && (t->epoch < o->max_epochs && !steps_done(t))) {
            if (!t->stop_reason) t->stop_reason = TRAIN_STOP_PEER;
            return stopped(t);
        }
    }
    return t->rank == 0 ? ckpt_average(&t->ckpt, err) : 0;
}

/* The largest batch of a split's batch lists: utterances, feature frames (its shape file) and
 * tokens (its transcripts). 0 when the shape file holds no lengths. */
static int split_max_shape(const split_data *s, int *B, int *T, int *L, esp_err *err)
{
    const shape_table *k = &s->keys;
    if (!k->dims) return 0;
    size_t nl = s->n_shards ? (size_t)s->n_shards : 1;
    for (size_t l = 0; l < nl; l++) {
        const batch_list *bl = s->shards ? &s->shards[l] : &s->batches;
        for (size_t b = 0; b < bl->n; b++) {
            size_t n = batch_size_of(bl, b);
            if ((int)n > *B) *B = (int)n;
            for (size_t j = bl->start[b]; j < bl->start[b + 1]; j++) {
                size_t r = bl->utt[j];
                if (shape_length(k, r) > *T) *T = (int)shape_length(k, r);
                long *ids = NULL;
                size_t nid = 0, unk = 0;
                if (text_to_ids(&s->data.tokens, s->data.m.items[s->row_to_item[r]].text, &ids, &nid, &unk, err) != 0)
                    return -1;
                free(ids);
                if ((int)nid > *L) *L = (int)nid;
            }
        }
    }
    return 0;
}

/* The model the config trains: ESPnet2's ASR model, or its language model (an LM task). */
static int dims_from_cfg(const trainer *t, model_dims *dims, esp_err *err)
{
    int vocab = (int)t->train.data.tokens.n;
    if (t->cfg->lm_task) return lm_dims_from_cfg(dims, t->cfg->model, vocab, err);
    return model_dims_from_cfg(dims, t->cfg->model, t->train.data.fo.n_mels, vocab, err);
}

/* A device backend takes the run's memory at once (be->reserve): the arena the planner sizes for
 * the largest batch of the train and valid splits (parameters, gradients, Adam's moments,
 * activations) plus that batch's features, and the host-pinned staging of its copies. A batch
 * that needs more (speed perturbation lengthens utterances) is allocated past it, with a warning. */
static int reserve_arena(trainer *t, esp_err *err)
{
    int B = 0, T = 0, L = 0;
    if (split_max_shape(&t->train, &B, &T, &L, err) != 0 || split_max_shape(&t->valid, &B, &T, &L, err) != 0)
        return -1;
    if (!B || !T) {
        log_info("train: %s backend: the shape files hold no lengths; buffers are allocated as batches need them",
                 t->be->name);
        return 0;
    }
    model_dims dims;
    optim_opts oo;
    if (dims_from_cfg(t, &dims, err) != 0 || optim_opts_from_cfg(t->cfg->optimizer, &oo, err) != 0)
        return -1;
    arena_plan p;
    model_arena_plan(&p, &dims, &t->o->rates, B, T, L, optim_buffer_count(&oo));
    size_t feats = ((size_t)B * T * dims.idim * sizeof(float) + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
    /* Uploads beside the step: a second device buffer (the step before may still read the first)
     * and a page-locked host copy per slot, which the loading thread fills. */
    if (t->prefetch && t->be->pinned_alloc) {
        feats *= BACKEND_UPLOAD_SLOTS;
        t->pinned_floats = (size_t)B * T * dims.idim;
        for (int i = 0; i < BACKEND_UPLOAD_SLOTS; i++)
            t->pinned[i] = t->be->pinned_alloc(t->be, t->pinned_floats * sizeof(float));
    }
    /* EMAWeightAveraging: the average and, during a validation, the model's weights set aside */
    size_t ema = t->o->ema.on ? 2 * ((p.kind_bytes[ARENA_PARAMS] + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN) : 0;
    t->be->reserve(t->be, p.total + feats + ema, p.staging_bytes);
    if (t->rank == 0)
        log_info("train: %s arena %zu bytes for batches up to %d x %d frames x %d tokens (parameters %zu, gradients "
                 "%zu, moments %zu, activations %zu, features %zu, EMA %zu), %zu bytes of pinned staging", t->be->name,
                 p.total + feats + ema, B, T, L, p.kind_bytes[ARENA_PARAMS], p.kind_bytes[ARENA_GRADS],
                 p.kind_bytes[ARENA_MOMENTS], p.kind_bytes[ARENA_ACTS], feats, ema, p.staging_bytes);
    arena_plan_free(&p);
    return 0;
}

/* Validation's error calculators as ESPnet2's model classes build them (validate.c): the attention
 * decoder's (report_cer / report_wer), and whether the CTC one exists (ESPnetASRModel: with either
 * key; with a transducer decoder: with neither, as its constructor's indentation has it; the
 * asr_transducer task and LMs: never), its blank and space ids those of sym_blank and sym_space. */
static void open_error_calculators(trainer *t, const model_dims *dims, const model_conf_cfg *mc)
{
    const token_list *tl = &t->train.data.tokens;
    err_calculator_from_cfg(&t->atterr, ERR_ATTENTION, tl, mc);
    int reported = t->atterr.cer || t->atterr.wer;
    if (!t->model.dec || dims->lm) t->atterr.cer = t->atterr.wer = 0;
    t->cer_ctc = !dims->no_ctc && !dims->lm && !dims->body && (t->model.tr ? !reported : reported);
    t->ec = (err_calc){.tl = tl, .blank = (int)token_list_find(tl, t->atterr.blank),
                       .space = (int)token_list_find(tl, t->atterr.space)};
}

/* The model with initialized parameters (initialized on the host, then copied to the device). */
static int open_model(trainer *t, esp_err *err)
{
    const training_cfg *cfg = t->cfg;
    model_dims dims;
    if (dims_from_cfg(t, &dims, err) != 0) return -1;
    asr_model_init(&t->model, t->be, &dims, &t->o->rates);
    const model_conf_cfg *mc = cfg->model ? cfg->model->model_conf : NULL;
    if (t->model.tr && tr_err_calc_from_cfg(&t->trerr, &t->train.data.tokens, dims.body, mc, err) != 0) return -1;
    open_error_calculators(t, &dims, mc);
    /* DDP: the gradient buckets start their all-reduce as the backward finishes them. */
    grad_buckets_init(&t->buckets, t->model.table.total, grad_bucket_floats(t->model.table.total));
    if (t->world > 1 && !t->fsdp) {
        t->model.grads_final = grad_buckets_final;
        t->model.grads_final_ctx = &t->buckets;
    }
    if (t->o->sync_batchnorm && t->world > 1) t->model.sync = (bn_sync){bn_all_reduce, t};
    const param_table *pt = &t->model.table;
    float *host = xcalloc(pt->state_total ? pt->state_total : 1, sizeof *host);
    int rc = param_init(host, pt, cfg->init, (uint64_t)cfg->seed, err);
    /* ESPnet's init_param: pretrained tensors (buffers too) over the initialization */
    for (unsigned i = 0; i < cfg->n_init_param && rc == 0; i++) {
        size_t n = 0;
        if (i == 0) param_buffers_init(host, pt);
        rc = model_init_param(pt, host, cfg->init_param[i], cfg->ignore_init_mismatch, &n, err);
        if (rc == 0 && t->rank == 0) log_info("train: init_param %s: %zu tensors", cfg->init_param[i], n);
    }
    if (rc == 0 && cfg->n_init_param) asr_model_state_from_host(&t->model, host);
    else if (rc == 0) asr_model_params_from_host(&t->model, host);
    free(host);
    return rc;
}

/* A best_model_criterion monitor that validation never reports keeps no checkpoint: say so. */
static void check_monitors(const trainer *t)
{
    for (size_t i = 0; i < t->cfg->n_best_model_criterion; i++) {
        const char *mon = t->cfg->best_model_criterion[i].monitor;
        char have[256];
        if (validation_reports(t, mon, have, sizeof have)) continue;
        log_warn("best_model_criterion[%zu]: %s is not reported by this model's validation (%s); no checkpoint is "
                 "kept or averaged for it", i, mon ? mon : "", have);
    }
}

/* Rank 0 opens the experiment's logs and trains; the other ranks train without them. */
static int train_with_logs(trainer *t, esp_err *err)
{
    if (t->rank != 0) return run_training(t, err);
    int rc = -1;
    if (tb_open(&t->tb, t->o->tb_dir, t->step, err) != 0) return -1;
    check_monitors(t);
    if (metrics_csv_open(&t->csv, t->o->csv_path, t->step, err) == 0) {
        static const char *const prec[] = {"32", "bf16-mixed", "16-mixed"};
        log_info("train: %zu parameters, %zu train / %zu valid batches, %s backend, %d threads, precision %s, "
                 "exp_dir %s", t->model.table.total, t->train.batches.n, t->valid.batches.n, t->be->name,
                 t->o->threads, prec[t->o->precision], t->cfg->exp_dir);
        if (blas_core_detected())
            log_info("train: OpenBLAS runs its %s kernels (its own detection chose %s on this CPU; "
                     "core/compute/blas_core.h)", blas_core_name(), blas_core_detected());
        rc = run_training(t, err);
        metrics_csv_close(&t->csv);
    }
    tb_close(&t->tb);
    return rc;
}

/* Everything after the backend is open; frees what it opened. */
static int train_on_backend(trainer *t, esp_err *err)
{
    const training_cfg *cfg = t->cfg;
    int rc = -1;
    /* Validation batches are striped over the ranks either way (every batch is scored once). */
    if (split_open(&t->train, cfg, "train", cfg->dataloader->train, 1, t->o->sharded_train, err) != 0) return -1;
    if (t->o->augment && t->o->augment->n &&
        asr_data_set_augment(&t->train.data, t->o->augment, (uint64_t)cfg->seed, err) != 0)
        goto out_train;
    if (t->o->noise_rir && noise_rir_conf_active(t->o->noise_rir) &&
        asr_data_set_noise_rir(&t->train.data, t->o->noise_rir, (uint64_t)cfg->seed, err) != 0)
        goto out_train;
    if (split_open(&t->valid, cfg, "valid", cfg->dataloader->valid, 0, 0, err) != 0) goto out_train;
    /* A batch's utterances are read and featurized on the step's threads, not on one of them. */
    asr_data_set_threads(&t->train.data, t->o->threads);
    asr_data_set_threads(&t->valid.data, t->o->threads);
    t->prefetch = t->o->prefetch;
    t->be->set_gemm_precision(t->be, t->o->precision);
    if (t->o->profile) backend_profile_start(t->be); /* its GEMM peak at the run's precision */
    grad_scaler_init(&t->scaler, t->o->precision == AMP_FP16);
    if (t->be->reserve && reserve_arena(t, err) != 0) goto out_model;
    if (open_model(t, err) != 0) goto out_model;
    train_ema_open(t); /* Lightning's AveragedModel: a copy of the model as training starts */
    if (optim_opts_from_cfg(cfg->optimizer, &t->oo, err) != 0) goto out_model;
    optim_state_init(&t->opt, t->be, t->model.table.total, &t->oo);
    if (scheduler_from_training_cfg(cfg, t->oo.lr, &t->sched, err) != 0) goto out_opt;
    /* Rank 0 alone owns the experiment folder: checkpoints, resume, logs. */
    if (t->rank == 0 && ckpt_open(&t->ckpt, cfg->exp_dir, cfg->best_model_criterion, cfg->n_best_model_criterion, err) != 0)
        goto out_opt;
    int resumed = t->rank != 0 ? 0 : t->o->fit_ckpt_path ? resume_named(t, t->o->fit_ckpt_path, err) : resume(t, err);
    if (resumed == 0 && sync_from_rank0(t, err) == 0 && train_ema_sync(t, err) == 0 &&
        (!t->imported || save_imported(t, err) == 0)) {
        t->first_epoch = t->epoch;
        rc = train_with_logs(t, err);
    }
    if (t->rank == 0) ckpt_close(&t->ckpt);
out_opt:
    optim_state_free(&t->opt);
out_model:
    for (int i = 0; i < BACKEND_UPLOAD_SLOTS; i++) {
        t->be->free(t->be, t->dev_feats[i]);
        if (t->pinned[i]) t->be->pinned_free(t->be, t->pinned[i]);
    }
    t->be->free(t->be, t->dev_scratch);
    train_ema_free(t);
    asr_model_free(&t->model);
    grad_buckets_free(&t->buckets);
    split_close(&t->valid);
out_train:
    split_close(&t->train);
    return rc;
}

/* The comm that reduces the backend's buffers: NCCL for CUDA's device memory, the CPU comm for the
 * host backends. A new kind must say which (the switch has no default). */
static comm_kind comm_kind_for(backend_kind kind)
{
    switch (kind) {
    case BACKEND_CUDA: return COMM_KIND_NCCL;
    case BACKEND_CPU:
    case BACKEND_REF64:
    case BACKEND_KINDS: break;
    }
    return COMM_KIND_CPU;
}

/* The profiler's report of this rank's training (trainer_opts.profile), as a file in exp_dir; rank 0's
 * also in the log. A file that cannot be written is a warning: the training it describes is done. */
static void write_profile(trainer *t)
{
    char what[96];
    snprintf(what, sizeof what, "train, %" PRId64 " optimizer steps, rank %d", t->step, t->rank);
    char *path = t->rank ? xasprintf("%s/profile.rank%d.txt", t->cfg->exp_dir, t->rank)
                         : xasprintf("%s/profile.txt", t->cfg->exp_dir);
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    backend_profile_report(t->be, what, mem);
    fclose(mem);
    esp_err werr = {0};
    if (atomic_write_file(path, text, len, &werr) != 0) log_warn("train: profile: %s", werr.msg);
    else if (t->rank == 0) log_info("train: per-op profile (%s):\n%s", path, text);
    free(text);
    free(path);
}

int trainer_run(const trainer_opts *o, esp_err *err)
{
    trainer *t = xcalloc(1, sizeof *t);
    t->o = o;
    t->cfg = o->cfg;
    t->rank = o->env->rank, t->world = o->env->world_size, t->fsdp = o->fsdp && o->env->world_size > 1;
    t->es = o->early_stop; /* its state comes back from a checkpoint on resume */
    if (dist_join(&t->dist, o->env, o->run_id, comm_kind_for(o->backend), o->dist_timeout, err) != 0) {
        free(t);
        return -1;
    }
    if (t->world > 1)
        log_info("train: rank %d of %d (local %d of %d, node %d) via %s, strategy %s", t->rank, t->world,
                 o->env->local_rank, o->env->local_world_size, o->env->node_rank, dist_source_name(o->env->source),
                 t->fsdp ? "fsdp" : "ddp");
    int rc = -1;
    t->be = backend_open(o->backend, o->device, o->threads, err);
    if (t->be) {
        comm_attach(t->dist.comm, t->be); /* a device comm orders its collectives after the backend's work */
        train_signals_install();
        rc = train_on_backend(t, err);
        train_signals_restore();
        if (o->profile && rc >= 0) write_profile(t);
        comm_attach(t->dist.comm, NULL);
        backend_close(t->be);
    }
    /* The last barrier keeps rank 0's store up until every rank is done with it. */
    if (rc >= 0 && dist_leave(&t->dist, err) != 0) rc = -1;
    if (rc < 0) dist_abort(&t->dist);
    free(t);
    return rc;
}
