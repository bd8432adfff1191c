/* Stage 5 train: config -> trainer_opts -> core/train/trainer.c. The stage checks what the config
 * asks for against what the trainer does (unused keys warn, unsupported ones fail), the launch
 * against trainer.devices x num_nodes, picks the backend from trainer.accelerator, and hands the
 * rest to the trainer, which writes checkpoints, logs and events under exp_dir. */
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/base/fsio.h"
#include "core/base/hash.h"
#include "core/base/proc.h"
#include "core/compute/backend.h"
#include "core/compute/backend_profile.h"
#include "core/data/augment_conf.h"
#include "core/data/dataset_src.h"
#include "core/data/frontend.h"
#include "core/data/sampler.h"
#include "core/data/tokenizer.h"
#include "core/dist/dist.h"
#include "core/nn/body_conf.h"
#include "core/nn/decoder_conf.h"
#include "core/nn/lm_conf.h"
#include "core/nn/model_params.h"
#include "core/train/scheduler.h"
#include "core/train/trainer.h"
#include "stages/stages.h"
#include "stages/train_callbacks.h"
#include "core/config/config_schema.h"

/* Lightning's limit_*_batches as written (checked at load): an integer is a count of batches
 * (passed on as -count, 1 meaning one batch), a float a fraction (1.0: all). NULL: all. */
static double limit_of(const char *s)
{
    if (!s) return 0;
    double v = strtod(s, NULL);
    int written_int = !strpbrk(s, ".eEnN");
    return written_int ? -v : v;
}

static int cpu_threads(void)
{
    const char *omp = getenv("OMP_NUM_THREADS");
    int n = omp ? atoi(omp) : 0;
    if (n <= 0) n = (int)sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? n : 1;
}

/* The ASR model's encoder keys (stage 5's own checks beyond the schema). An LM task's model keys
 * are the LM's (core/nn/lm_conf.c); an ASR model's keys in its config warn in check_unused_keys. */
static int check_model_keys(const model_cfg *m, const char *file, esp_err *err)
{
    const int *pre_ln = m && m->encoder_conf ? m->encoder_conf->normalize_before : NULL;
    if (pre_ln && !*pre_ln)
        return esp_fail(err, "%s: model.encoder_conf.normalize_before: false (post-LN blocks) is not supported (use true)",
                        file);
    if (pre_ln && m->encoder && !strcmp(m->encoder, "e_branchformer"))
        log_warn("%s: model.encoder_conf.normalize_before: not a key of EBranchformerEncoder (ESPnet2 would raise a "
                 "TypeError; its blocks are pre-LN, as true says): ignored", file);
    const int *feats_stats = m && m->model_conf ? m->model_conf->extract_feats_in_collect_stats : NULL;
    if (feats_stats && !*feats_stats && m->normalize && !strcmp(m->normalize, "global_mvn"))
        return esp_fail(err, "%s: model.model_conf.extract_feats_in_collect_stats: false leaves stage 3 the waveform's "
                        "statistics, which global_mvn would apply to the features (use utterance_mvn, or true)", file);
    esp_err why; /* the encoder keys, before any data is read */
    model_dims scratch = {0};
    if (body_in_cfg(m) ? body_dims_from_cfg(&scratch, m, &why) : encoder_dims_from_cfg(NULL, m, &why))
        return esp_fail(err, "%s: %s", file, why.msg);
    return 0;
}

/* Keys the config schema accepts for later issues but this trainer does not act on yet: say so
 * (one warning each) instead of ignoring them; refuse what would train a different model. */
static int check_unused_keys(const training_cfg *cfg, const char *file, esp_err *err)
{
    const model_cfg *m = cfg->model;
    int lm = cfg->lm_task;
    if (lm && m) { /* an LM task builds the LM alone, as ESPnet's LMTask does */
        const struct { const void *set; const char *key; } asr[] = {
            {m->frontend, "frontend"}, {m->frontend_conf, "frontend_conf"}, {m->specaug, "specaug"},
            {m->specaug_conf, "specaug_conf"}, {m->normalize, "normalize"}, {m->normalize_conf, "normalize_conf"},
            {m->encoder, "encoder"}, {m->encoder_conf, "encoder_conf"}, {m->decoder, "decoder"},
            {m->decoder_conf, "decoder_conf"}, {m->ctc_conf, "ctc_conf"}, {m->model_conf, "model_conf"}};
        for (size_t i = 0; i < sizeof asr / sizeof *asr; i++)
            if (asr[i].set)
                log_warn("%s: model.%s: an ASR model's key; the LM task (task: %s) does not use it: ignored", file,
                         asr[i].key, cfg->task ? cfg->task : "LMTask");
    }
    if (!lm && check_model_keys(m, file, err) != 0) return -1;
    int has_decoder = m && m->decoder && (!strcmp(m->decoder, "transformer") || transducer_in_cfg(m));
    if (!lm && !has_decoder && m && m->model_conf && m->model_conf->ctc_weight > 0 && m->model_conf->ctc_weight != 1.0)
        log_warn("%s: model.model_conf.ctc_weight: %g asks for an attention decoder, but model.decoder is not "
                 "transformer; training is CTC only (ctc_weight 1.0; set model.decoder: transformer for joint "
                 "CTC/attention)", file, m->model_conf->ctc_weight);
    if (!lm && !decoder_in_cfg(m) && m && m->model_conf && m->model_conf->lsm_weight > 0)
        log_warn("%s: model.model_conf.lsm_weight: label smoothing applies to the attention decoder; ignored by CTC%s",
                 file, transducer_in_cfg(m) ? " and the transducer (as in ESPnet2)" : "");
    if (m && m->token_list && cfg->tokenizer && cfg->tokenizer->save_path) {
        char *ours = xasprintf("%s/tokens.txt", cfg->tokenizer->save_path);
        char *a = path_absolute(ours), *b = path_absolute(m->token_list);
        if (strcmp(a, b))
            log_warn("%s: model.token_list: %s is not used; the token list is ${tokenizer.save_path}/tokens.txt (%s)",
                     file, m->token_list, ours);
        free(a), free(b), free(ours);
    }
    return 0;
}

/* encoder_conf rates: ESPnet2's defaults are 0.1, 0.1 and 0.0; a config that leaves the
 * encoder_conf block out gets them, one that writes the block states its own. */
static model_rates rates_from_cfg(const training_cfg *cfg)
{
    const model_cfg *m = cfg->model;
    if (cfg->lm_task) {
        model_rates r;
        lm_rates_from_cfg(&r, m);
        return r;
    }
    const encoder_conf_cfg *ec = m ? m->encoder_conf : NULL;
    const ctc_conf_cfg *cc = m ? m->ctc_conf : NULL;
    model_rates r = {.dropout = ec ? (float)ec->dropout_rate : 0.1f,
                     .pos_dropout = ec ? (float)ec->positional_dropout_rate : 0.1f,
                     .att_dropout = ec ? (float)ec->attention_dropout_rate : 0.0f,
                     .ctc_dropout = cc ? (float)cc->dropout_rate : 0,
                     .pre_dropout = m && m->preencoder && m->preencoder_conf ? (float)m->preencoder_conf->dropout : 0,
                     .layer_drop = ec && ec->layer_drop_rate ? (float)*ec->layer_drop_rate : 0.0f,
                     .ctc_keep_inf = cc && !cc->zero_infinity};
    decoder_rates_from_cfg(&r, m);
    if (body_in_cfg(m)) { /* the asr_transducer task's rates are its own keys' */
        r = (model_rates){.ctc_keep_inf = 0};
        body_rates_from_cfg(&r, m);
    }
    return r;
}

/* The model the sizes describe (with the least vocabulary; the token list adds vocab x width
 * later) is built in no stage before its parameter count is checked: a num_blocks or output_size
 * typo is refused at the model's line before stage 1, not as an allocation failure in stage 5. */
static int check_model_size(const training_cfg *cfg, const char *file, const ynode *tree, int n_mels, esp_err *err)
{
    if (!cfg->model) return 0; /* the stage's own error */
    model_dims d;
    esp_err why;
    int rc = cfg->lm_task ? lm_dims_from_cfg(&d, cfg->model, 2, &why)
                                    : model_dims_from_cfg(&d, cfg->model, n_mels, 2, &why);
    if (rc == 0) return 0;
    const ynode *m = yt_get_path(tree, "model");
    if (m && m->mark.line > 0) return esp_fail(err, "%s:%d:%d: %s", m->mark.file, m->mark.line, m->mark.col, why.msg);
    return esp_fail(err, "%s: %s", file, why.msg);
}

/* The scheduler's class, its arguments and what it needs of the rest of the config, at the line of
 * the key its error names ("scheduler.T_0: ...", "scheduler_monitor: ...") when the config has
 * it, else at the scheduler block's line. */
static int check_scheduler(const training_cfg *cfg, const char *file, const ynode *tree, esp_err *err)
{
    lr_scheduler sched;
    esp_err why;
    if (scheduler_from_training_cfg(cfg, 1.0, &sched, &why) == 0) return 0;
    char key[96] = "";
    size_t k = strcspn(why.msg, ": ");
    if (k < sizeof key && why.msg[k] == ':') snprintf(key, sizeof key, "%.*s", (int)k, why.msg);
    const ynode *n = key[0] ? yt_get_path(tree, key) : NULL;
    if (!n) n = yt_get_path(tree, "scheduler");
    char where[600]; /* a file's line, or the command line's override that set it */
    return esp_fail(err, "%s: %s", n ? ymark_str(n->mark, where, sizeof where) : file, why.msg);
}

/* Lightning's validation points (core/train/val_check.h) from trainer.val_check_interval and
 * check_val_every_n_epoch as written (NULL: left out). */
static val_check_opts val_check_from_cfg(const trainer_cfg *tc)
{
    const char *every = tc ? tc->check_val_every_n_epoch : NULL;
    return (val_check_opts){.interval = limit_of(tc ? tc->val_check_interval : NULL),
                            .every_n_epochs = !every ? 1 : !strcmp(every, "null") ? 0 : strtoll(every, NULL, 10)};
}

/* check_val_every_n_epoch null counts val_check_interval's batches over epochs: a fraction of an
 * epoch has no meaning then (Lightning raises), and the points fall inside accumulations of
 * gradients wherever an epoch's batches are not a multiple of accumulate_grad_batches (their
 * checkpoints could not resume). */
static int check_val_points(const trainer_cfg *tc, const ynode *tree, esp_err *err)
{
    val_check_opts v = val_check_from_cfg(tc);
    if (v.every_n_epochs != 0) return 0;
    const ynode *n = yt_get_path(tree, "trainer.check_val_every_n_epoch");
    if (v.interval > 0 && tc->val_check_interval)
        return config_fail_node(err, yt_get_path(tree, "trainer.val_check_interval"), "trainer.val_check_interval",
                                "with trainer.check_val_every_n_epoch: null it must be an integer number of batches "
                                "(Lightning raises for a fraction)");
    if (tc->accumulate_grad_batches > 1)
        return config_fail_node(err, n, "trainer.check_val_every_n_epoch",
                                "null (batches counted over epochs) with trainer.accumulate_grad_batches %" PRId64
                                " is not built: validation would fall inside accumulations, where its checkpoint "
                                "could not resume (give an integer, or accumulate_grad_batches 1)",
                                tc->accumulate_grad_batches);
    return 0;
}

/* What the config alone decides about values, before any stage runs (stage_table's check):
 * ctc_conf.reduce and the waveform augmentation keys (the frontend's
 * sample rate bounds their frequencies; an LM task has none). Missing sections are the stage's own error, so that a
 * partial config still shows under --dry_run. */
/* fit.ckpt_path as Lightning's _parse_ckpt_path reads it: "last" and "hpc" are the run's newest
 * checkpoint (a SLURM requeue's too: ours is `last`); "best" only names a checkpoint the same
 * process saved, so a new run cannot use it; a path must exist. */
static int check_fit(const fit_cfg *fit, const ynode *tree, esp_err *err)
{
    const char *p = fit ? fit->ckpt_path : NULL;
    if (!p || !strcmp(p, "last") || !strcmp(p, "hpc")) return 0;
    const ynode *n = yt_get_path(tree, "fit.ckpt_path");
    if (!strcmp(p, "best"))
        return config_fail_node(err, n, "fit.ckpt_path", "'best' names the best checkpoint of the same process's "
                                "earlier fit, which a new run has not made (Lightning raises too): give the file, "
                                "or 'last'");
    if (!path_exists(p))
        return config_fail_node(err, n, "fit.ckpt_path", "%s does not exist (a checkpoint directory of espnet3, or "
                                "a .ckpt: ESPnet3's last.ckpt)", p);
    return 0;
}

/* fit.ckpt_path for the trainer: NULL for the run's own `last` ("last", "hpc": an error when there
 * is none, as Lightning's), else the path. */
static int fit_ckpt_path(const training_cfg *cfg, const char **out, esp_err *err)
{
    const char *p = cfg->fit ? cfg->fit->ckpt_path : NULL;
    *out = NULL;
    if (p && !strcmp(p, "hpc")) {
        char *last = path_join(cfg->exp_dir, "last");
        int have = path_exists(last);
        free(last);
        if (!have)
            return esp_fail(err, "fit.ckpt_path: 'hpc' is set but no checkpoint of a requeued job was found in %s "
                                 "(give a checkpoint path, or 'last')", cfg->exp_dir);
        return 0;
    }
    if (p && strcmp(p, "last")) *out = p;
    return 0;
}

static int check_static(const esp_config *training, esp_err *err)
{
    const training_cfg *cfg = training->typed;
    const char *file = training->path;
    const ynode *tree = training->tree;
    const trainer_cfg *tc = cfg->trainer;
    if (tc->max_epochs == -1 && tc->max_steps == -1) {
        const ynode *n = yt_get_path(tree, "trainer.max_epochs");
        char where[512];
        if (n && n->mark.line > 0) snprintf(where, sizeof where, "%s:%d:%d", n->mark.file, n->mark.line, n->mark.col);
        else snprintf(where, sizeof where, "%s", file);
        return esp_fail(err, "%s: trainer.max_epochs: -1 (no epoch limit) without trainer.max_steps would train "
                             "forever (set max_steps, or max_epochs >= 1)", where);
    }
    if (cfg->model && cfg->model->ctc_conf && !cfg->model->ctc_conf->reduce)
        return esp_fail(err, "%s: model.ctc_conf.reduce: false (a summed loss) is not supported (use true)", file);
    if (check_scheduler(cfg, file, tree, err) != 0) return -1;
    trainer_opts schedule;
    if (train_callbacks_to_opts(tc, tree, 1, &schedule, err) != 0 || check_val_points(tc, tree, err) != 0) return -1;
    if (check_fit(cfg->fit, tree, err) != 0) return -1;
    augment_conf aug;
    augment_conf_read(training, &aug);
    if (cfg->lm_task) {
        const preprocessor_cfg *pc = cfg->dataset ? cfg->dataset->preprocessor : NULL;
        const char *key = aug.n ? "dataset.preprocessor.data_aug_effects"
                        : pc && pc->n_rir_scp   ? "dataset.preprocessor.rir_scp"
                        : pc && pc->n_noise_scp ? "dataset.preprocessor.noise_scp"
                                                : NULL;
        augment_conf_free(&aug);
        if (key)
            return esp_fail(err, "%s: %s: a language model's data are text; waveform augmentation does not apply "
                                 "(remove it from the LM's config)", file, key);
        return check_model_size(cfg, file, tree, 0, err);
    }
    frontend_opts fo;
    frontend_opts_from_cfg(cfg->model ? cfg->model->frontend_conf : NULL, &fo);
    int rc = aug.n ? augment_conf_check_fs(&aug, fo.fs, "model.frontend_conf.fs", err) : 0;
    augment_conf_free(&aug);
    return rc != 0 ? rc : check_model_size(cfg, file, tree, fo.n_mels, err);
}

int stage_train_check(const esp_configs *configs, esp_err *err)
{
    if (!training_of(configs)) return 0; /* no typed config: the stage says what is missing */
    return check_static(configs->training, err);
}

/* The sections the stage needs, the preprocessor, keys ESPnet would use that we would not, and the
 * ranks the launch started against trainer.devices x num_nodes. */
static int check_config(const training_cfg *cfg, const char *file, const dist_env *env, esp_err *err)
{
    if (!cfg->exp_dir) return esp_fail(err, "%s: exp_dir: missing (set exp_dir)", file);
    if (!cfg->dataloader || !cfg->dataloader->train || !cfg->dataloader->valid)
        return esp_fail(err, "%s: dataloader.train and dataloader.valid: missing", file);
    if (dataset_check_preprocessor(cfg, file, err) != 0) return -1;
    const trainer_cfg *tc = cfg->trainer;
    int64_t devices = tc->devices, nodes = tc->num_nodes;
    if (devices * nodes != env->world_size)
        return esp_fail(err, "%s: trainer.devices %" PRId64 " x trainer.num_nodes %" PRId64 " = %" PRId64
                             " ranks, but the launch (%s) has world size %d (make them match: trainer.devices "
                             "per node, trainer.num_nodes nodes)",
                        file, devices, nodes, devices * nodes, dist_source_name(env->source), env->world_size);
    return check_unused_keys(cfg, file, err);
}

/* trainer.precision (the config layer allows 32, 32-true, bf16-mixed, 16-mixed). Both mixed
 * modes run on the CPU too, emulated: GEMM inputs rounded to 16 bits, float32 accumulation
 * (core/compute/ops_precision.h), as torch.autocast runs bf16-mixed on a CPU. For 16-mixed
 * Lightning would switch a CPU run to bf16-mixed; espnet3 keeps fp16 with its loss scaler, so a
 * CPU run computes what the GPU run would, and says so. */
static amp_precision precision_from_cfg(const trainer_cfg *tc, backend_kind kind, const char *file)
{
    const char *p = tc->precision;
    if (!p || !strcmp(p, "32") || !strcmp(p, "32-true")) return AMP_FP32;
    int cpu = kind == BACKEND_CPU;
    if (!strcmp(p, "bf16-mixed")) {
        if (cpu)
            log_info("%s: trainer.precision: bf16-mixed on the CPU: GEMM inputs rounded to bfloat16, float32 "
                     "accumulation, everything else float32 (torch.autocast's CPU semantics; slower than 32 here, "
                     "the CPU has no bfloat16 GEMM)", file);
        return AMP_BF16;
    }
    if (cpu)
        log_warn("%s: trainer.precision: 16-mixed on the CPU is emulated (GEMM inputs rounded to float16, dynamic "
                 "loss scaling) to compute what a GPU run would; Lightning would switch a CPU run to bf16-mixed "
                 "(write bf16-mixed for that)", file);
    return AMP_FP16;
}

/* SIGUSR1 in a SLURM job (sbatch --signal=USR1@120 --requeue, as Lightning's auto-requeue reads
 * it): the job goes back to the queue, and its next start resumes from the checkpoint just written. */
static void requeue_slurm_job(void)
{
    const char *job = getenv("SLURM_JOB_ID");
    if (!job || !*job) return;
    char *argv[] = {"scontrol", "requeue", (char *)job, NULL};
    proc_buf out = {0}, errs = {0};
    int status = 0;
    esp_err why;
    int rc = proc_run_capture(argv, &out, &errs, 4096, &status, &why);
    if (rc == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0)
        log_info("train: SLURM job %s requeued (scontrol requeue); it resumes from this checkpoint", job);
    else
        log_warn("train: scontrol requeue %s failed (%s); resubmit the job to resume", job,
                 rc < 0 ? why.msg : errs.len ? (char *)errs.data : "no message");
    free(out.data), free(errs.data);
}

/* ESPnet2's ASR task takes a transducer's blank id from model_conf.sym_blank's place in the token
 * list (0 when the list lacks it); espnet3's transducer's blank is token 0, so a sym_blank listed
 * elsewhere is refused at its line (the asr_transducer task's blank is 0 whatever sym_blank says,
 * and its error calculator reads sym_blank as text, as espnet3 does: core/decode/transducer_errors.h). */
static int check_sym_blank(const training_cfg *cfg, const ynode *tree, esp_err *err)
{
    const model_cfg *m = cfg->model;
    const char *sym = m && m->model_conf ? m->model_conf->sym_blank : NULL;
    if (!sym || !transducer_in_cfg(m) || body_in_cfg(m) || !cfg->tokenizer || !cfg->tokenizer->save_path) return 0;
    char *path = xasprintf("%s/tokens.txt", cfg->tokenizer->save_path);
    token_list tl = {0};
    long at = token_list_read(path, &tl, err) == 0 ? token_list_find(&tl, sym) : 0;
    token_list_free(&tl);
    free(path);
    if (at <= 0) return 0; /* not listed: blank 0, as ESPnet2; an unreadable list is the trainer's error */
    return config_fail_node(err, yt_get_path(tree, "model.model_conf.sym_blank"), "model.model_conf.sym_blank",
                            "'%s' is token %ld of the token list, which ESPnet2 would take as the transducer's "
                            "blank; espnet3's transducer blank is token 0 (name token 0, or leave sym_blank out)",
                            sym, at);
}

int stage_train(const stage_ctx *ctx, esp_err *err)
{
    const training_cfg *cfg = training_of(ctx->configs);
    const char *file = ctx->configs->training->path;
    const dist_env *env = dist_process_env(err);
    if (!env || check_config(cfg, file, env, err) != 0) return -1;
    if (check_sym_blank(cfg, ctx->configs->training->tree, err) != 0) return -1;
    const trainer_cfg *tc = cfg->trainer;
    if (tc->max_epochs == -1) log_info("train: no epoch limit (trainer.max_epochs -1): training stops after %" PRId64
                                       " optimizer steps (trainer.max_steps)", tc->max_steps);
    int sharded[2];
    for (int k = 0; k < 2; k++) {
        const loader_split_cfg *lc = k ? cfg->dataloader->valid : cfg->dataloader->train;
        if ((sharded[k] = shard_validate(lc, k ? "dataloader.valid" : "dataloader.train", env->world_size, err)) < 0)
            return -1;
    }
    backend_kind kind = ctx->backend;
    int device = env->local_rank;
    if (kind == BACKEND_CUDA) {
        int visible = backend_cuda_devices();
        if ((device = dist_local_device(env, visible)) < 0) {
            const char *vis = getenv("CUDA_VISIBLE_DEVICES");
            return esp_fail(err, "%s: trainer.devices: %d rank%s on this node (local rank %d) but %d GPU%s visible "
                                 "(CUDA_VISIBLE_DEVICES=%s; give each node trainer.devices GPUs, e.g. sbatch "
                                 "--gpus-per-node)", file, env->local_world_size, env->local_world_size == 1 ? "" : "s",
                            env->local_rank, visible, visible == 1 ? " is" : "s are", vis ? vis : "(unset)");
        }
    }
    /* Ranks started by separate commands agree on the run by the experiment they train. */
    char *abs_exp = path_absolute(cfg->exp_dir);
    char *run_id = xasprintf("exp-%016" PRIx64 "-w%d", fnv1a64_str(abs_exp), env->world_size);
    free(abs_exp);
    const logger_cfg *lg = tc->n_logger ? &tc->logger[0] : NULL;
    char *tb_dir = xasprintf("%s/%s/version_0", lg && lg->save_dir ? lg->save_dir : cfg->exp_dir,
                             lg && lg->name ? lg->name : "tensorboard");
    char *csv = xasprintf("%s/metrics.csv", cfg->exp_dir);
    trainer_opts o = {
        .cfg = cfg,
        .env = env,
        .run_id = run_id,
        .backend = kind,
        .device = device,
        .threads = cpu_threads(),
        /* ESPnet's DataLoader workers load batches ahead of the step: here one thread (spreading a
         * batch over the run's threads) loads the next; a GPU's step never waits for the host. */
        .prefetch = kind == BACKEND_CUDA || (cfg->dataloader->train->iter_factory &&
                                             cfg->dataloader->train->iter_factory->num_workers > 0),
        .profile = tc->profiler != NULL || backend_profile_requested(),
        .fsdp = tc->strategy && !strcmp(tc->strategy, "fsdp"),
        .sharded_train = sharded[0],
        .rates = rates_from_cfg(cfg),
        /* The config layer resolved Lightning's meaning: >= 1, or -1 for no epoch limit (then
         * max_steps, when set, ends training). */
        .max_epochs = tc->max_epochs == -1 ? INT64_MAX : tc->max_epochs,
        .max_steps = tc->max_steps,
        .val_check = val_check_from_cfg(tc),
        .accumulate = tc->accumulate_grad_batches,
        .sync_batchnorm = tc->sync_batchnorm,
        .log_every = tc->log_every_n_steps,
        .clip = tc->gradient_clip_val,
        .clip_by_value = tc->gradient_clip_algorithm && !strcmp(tc->gradient_clip_algorithm, "value"),
        .precision = precision_from_cfg(tc, kind, file),
        .limit_train = limit_of(tc->limit_train_batches),
        .limit_val = limit_of(tc->limit_val_batches),
        .dist_timeout = tc->dist_timeout,
        .tb_dir = tb_dir,
        .csv_path = csv,
        .min_epochs = tc->min_epochs,
        .min_steps = tc->min_steps,
        .sanity_val_steps = tc->num_sanity_val_steps,
    };
    augment_conf aug = {0};
    int rc = fit_ckpt_path(cfg, &o.fit_ckpt_path, err);
    if (rc == 0) augment_conf_read(ctx->configs->training, &aug);
    if (rc == 0 && aug.n) {
        if (aug.prob > 0)
            log_info("train: waveform augmentation of the training split: %zu data_aug_effects entries, %d to %d per "
                     "utterance, data_aug_prob %g", aug.n, aug.num[0], aug.num[1], aug.prob);
        else
            log_warn("%s: dataset.preprocessor.data_aug_effects: data_aug_prob is 0 (ESPnet's default), so no "
                     "utterance is augmented (set data_aug_prob, e.g. 1.0)", file);
        o.augment = &aug;
    }
    noise_rir_conf nr = {0};
    if (rc == 0) rc = noise_rir_conf_read(ctx->configs->training, &nr, err);
    if (rc == 0 && noise_rir_conf_active(&nr)) {
        log_info("train: reverberation (%zu RIRs, rir_apply_prob %g) and noise (%zu files, noise_apply_prob %g, "
                 "SNR %g..%g dB) on the training split", nr.n_rirs, nr.rir_prob, nr.n_noises, nr.noise_prob,
                 nr.db_lo, nr.db_hi);
        o.noise_rir = &nr;
    }
    char monitor_at[600]; /* where scheduler_monitor is set: a file's line, or the command line's override */
    const ynode *mon = yt_get_path(ctx->configs->training->tree, "scheduler_monitor");
    o.scheduler_monitor_at = mon ? ymark_str(mon->mark, monitor_at, sizeof monitor_at) : file;
    if (rc == 0) rc = train_callbacks_to_opts(tc, ctx->configs->training->tree, 0, &o, err);
    if (rc == 0) rc = trainer_run(&o, err);
    if (rc == TRAINER_STOPPED) { /* a signal or max_time: resumable */
        rc = STAGE_STOPPED;
        if (trainer_stop_signal() == SIGUSR1 && env->rank == 0) requeue_slurm_job();
    }
    noise_rir_conf_free(&nr);
    augment_conf_free(&aug);
    free(run_id), free(tb_dir), free(csv);
    return rc;
}
