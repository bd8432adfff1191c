/* Stage 3 collect_stats: per-utterance feature shapes and the sums for global mean/variance over
 * train and valid (an LM task: the transcripts' token counts alone), computed through the runner (parallel:) and merged in manifest order so the
 * output is identical for any number of workers. Writes ESPnet's files under ${stats_dir}/<split>/:
 * feats_shape ("uid T,D"), feats_stats.npz (count, sum, sum_square), stats_keys, text_shape.<token_type> (char, word, bpe).
 * model_conf.extract_feats_in_collect_stats false: the waveform's samples stand for the features
 * ("uid L" shapes, scalar sums), as ESPnet2's collect_feats then does. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/config/config_python.h"
#include "core/data/asr_data.h"
#include "core/data/audio.h"
#include "core/data/augment_conf.h"
#include "core/data/noise_rir.h"
#include "core/data/dataset_src.h"
#include "core/data/frontend.h"
#include "core/data/speed_perturb.h"
#include "core/base/fsio.h"
#include "core/base/hash.h"
#include "core/base/log.h"
#include "core/formats/manifest.h"
#include "core/formats/npz.h"
#include "core/runner/runner.h"
#include "core/data/tokenizer.h"
#include "stages/stages.h"

#define FS_KEY "model.frontend_conf.fs"

typedef struct stats_job {
    const manifest *m;
    frontend_opts opts;
    int resample; /* dataset.resample */
    /* collect_stats_train_mode on the train split: training's augmentation of epoch 0 (NULL: off) */
    const augment_conf *aug;
    const noise_rir_conf *nr;
    uint64_t seed;
    int waveform; /* model_conf.extract_feats_in_collect_stats false: the samples are the "features" */
} stats_job;

/* What each worker builds once: the frontend (FFTW plans, mel matrix) and a feature buffer. */
typedef struct stats_env {
    const stats_job *job;
    frontend *fe;
    float *feats;
    size_t cap;
} stats_env;

static void *provide(void *arg, esp_err *err)
{
    (void)err;
    stats_env *env = xcalloc(1, sizeof *env);
    env->job = arg;
    env->fe = frontend_new(&env->job->opts);
    return env;
}

static void release(void *p)
{
    stats_env *env = p;
    frontend_free(env->fe);
    free(env->feats);
    free(env);
}

static const char *item_name(size_t idx, void *arg) { return ((stats_job *)arg)->m->items[idx].utt; }

/* One utterance's record: u32 T, u32 D, D sums, D sums of squares (double, over its frames). */
static int forward(size_t idx, void *p, runner_buf *out, esp_err *err)
{
    stats_env *env = p;
    const manifest_entry *e = &env->job->m->items[idx];
    float *x;
    size_t n;
    if (audio_read_span(e->wav, env->job->opts.fs, FS_KEY, env->job->resample, e->start, e->end, &x, &n, err) != 0)
        return -1;
    if (n < frontend_min_samples(env->fe)) {
        free(x);
        return esp_fail(err, "%s: %zu samples is shorter than the STFT needs (%zu; n_fft/2+1)", e->wav, n,
                        frontend_min_samples(env->fe));
    }
    if (env->job->aug || env->job->nr)
        asr_augment_waveform(env->job->aug, env->job->nr, env->job->seed, 0, e->utt, env->job->opts.fs,
                             frontend_min_samples(env->fe), &x, &n);
    uint32_t T = (uint32_t)frontend_num_frames(env->fe, n), D = (uint32_t)env->job->opts.n_mels;
    if (env->job->waveform) T = (uint32_t)n, D = 1;
    if ((size_t)T * D > env->cap) {
        env->cap = (size_t)T * D;
        env->feats = xrealloc(env->feats, env->cap * sizeof *env->feats);
    }
    if (env->job->waveform) memcpy(env->feats, x, n * sizeof *x);
    else frontend_logmel(env->feats, env->fe, x, n);
    free(x);
    double *acc = xcalloc(2 * (size_t)D, sizeof *acc);
    for (uint32_t t = 0; t < T; t++) {
        const float *row = env->feats + (size_t)t * D;
        for (uint32_t d = 0; d < D; d++) {
            acc[d] += row[d];
            acc[D + d] += (double)row[d] * row[d];
        }
    }
    runner_buf_append(out, &T, sizeof T);
    runner_buf_append(out, &D, sizeof D);
    runner_buf_append(out, acc, 2 * (size_t)D * sizeof *acc);
    free(acc);
    return 0;
}

/* The parent's merge: shape lines and the sums, in manifest order. */
typedef struct merge_ctx {
    const manifest *m;
    FILE *shape;
    double *sum, *sum_square;
    int64_t count;
    uint32_t dim;
    int waveform; /* shape lines "uid L", as ESPnet writes a 1-D speech's */
} merge_ctx;

static int merge_one(size_t idx, const void *data, size_t len, void *p, esp_err *err)
{
    merge_ctx *c = p;
    uint32_t T, D;
    if (len < 8) return esp_fail(err, "collect_stats: result of %s is truncated", c->m->items[idx].utt);
    memcpy(&T, data, 4);
    memcpy(&D, (const char *)data + 4, 4);
    if (len != 8 + 2 * (size_t)D * sizeof(double) || D != c->dim)
        return esp_fail(err, "collect_stats: result of %s has the wrong size", c->m->items[idx].utt);
    const double *acc = (const double *)((const char *)data + 8);
    for (uint32_t d = 0; d < D; d++) {
        c->sum[d] += acc[d];
        c->sum_square[d] += acc[D + d];
    }
    c->count += T;
    if (c->waveform) fprintf(c->shape, "%s %" PRIu32 "\n", c->m->items[idx].utt, T);
    else fprintf(c->shape, "%s %" PRIu32 ",%" PRIu32 "\n", c->m->items[idx].utt, T, D);
    return 0;
}

/* runner_for_each passes no error slot to its callback; carry one in the context. */
typedef struct merge_call {
    merge_ctx *c;
    esp_err *err;
} merge_call;

static int merge_cb(size_t idx, const void *data, size_t len, void *p)
{
    merge_call *mc = p;
    return merge_one(idx, data, len, mc->c, mc->err);
}

static int write_text_shape(const char *path, const manifest *m, const token_list *tl, esp_err *err)
{
    atomic_file af;
    if (atomic_open(&af, path, err) != 0) return -1;
    for (size_t i = 0; i < m->n; i++) {
        long *ids;
        size_t n;
        if (text_to_ids(tl, m->items[i].text, &ids, &n, NULL, err) != 0) {
            atomic_abort(&af);
            return -1;
        }
        free(ids);
        fprintf(af.fp, "%s %zu,%zu\n", m->items[i].utt, n, tl->n);
    }
    return atomic_commit(&af, err);
}

/* An LM task's shapes (ESPnet3's LMSystem.collect_stats): text_shape ("uid tokens,vocab", the
 * batching's shape file) and the same as text_shape.<token_type>. */
static int write_lm_shapes(const char *out_dir, const char *split, const manifest *m, const token_list *tl,
                           esp_err *err)
{
    char *plain = xasprintf("%s/text_shape", out_dir);
    char *typed = xasprintf("%s/text_shape.%s", out_dir, token_type_name(tl->type));
    int rc = write_text_shape(plain, m, tl, err) == 0 && write_text_shape(typed, m, tl, err) == 0 ? 0 : -1;
    if (rc == 0) log_info("collect_stats: %s: %zu transcripts (a language model's data) -> %s", split, m->n, plain);
    free(plain);
    free(typed);
    return rc;
}

/* The train preprocessor's augmentation, when collect_stats_train_mode asks for it on this split. */
typedef struct train_mode {
    augment_conf aug;
    noise_rir_conf nr;
    int aug_on, nr_on;
    uint64_t hash; /* of dataset.preprocessor as resolved: what the draws depend on */
} train_mode;

static int collect_split(const training_cfg *cfg, const char *split, const token_list *tl, const train_mode *tm,
                         esp_err *err)
{
    char *manifest_path = NULL;
    char *out_dir = xasprintf("%s/%s", cfg->stats_dir, split);
    char *work_dir = xasprintf("%s/.runner", out_dir);
    manifest m = {0};
    merge_ctx mc = {0};
    int rc = -1;
    if (dataset_split_load(cfg, split, &m, &manifest_path, err) != 0 || mkdir_p(out_dir, err) != 0) goto out;
    if (cfg->lm_task) { /* a language model's data: transcripts, no features */
        rc = write_lm_shapes(out_dir, split, &m, tl, err);
        goto out;
    }

    stats_job job = {.m = &m, .resample = cfg->dataset && cfg->dataset->resample, .seed = (uint64_t)cfg->seed};
    if (tm && !strcmp(split, "train")) job.aug = tm->aug_on ? &tm->aug : NULL, job.nr = tm->nr_on ? &tm->nr : NULL;
    frontend_opts_from_cfg(cfg->model ? cfg->model->frontend_conf : NULL, &job.opts);
    if (frontend_opts_check(&job.opts, err) != 0) goto out;
    const model_conf_cfg *mcf = cfg->model ? cfg->model->model_conf : NULL;
    job.waveform = mcf && mcf->extract_feats_in_collect_stats && !*mcf->extract_feats_in_collect_stats;
    if (job.waveform)
        log_info("collect_stats: %s: model_conf.extract_feats_in_collect_stats false: the waveform's statistics "
                 "(ESPnet2's dummy stats), not the features'", split);
    /* Same utterances and frontend settings = same job: finished shards are reused on a rerun. */
    uint64_t h = FNV1A64_INIT;
    for (size_t i = 0; i < m.n; i++) {
        const manifest_entry *e = &m.items[i];
        h = fnv1a64_bytes(h, e->utt, strlen(e->utt) + 1);
        h = fnv1a64_bytes(h, e->wav, strlen(e->wav) + 1);
        h = fnv1a64_bytes(h, e->text, strlen(e->text) + 1);
        if (e->end > 0) h = fnv1a64_bytes(fnv1a64_bytes(h, &e->start, sizeof e->start), &e->end, sizeof e->end);
    }
    /* Augmented statistics are another job (its configuration is in the training config's hash). */
    char *aug_sig = job.aug || job.nr ? xasprintf(" train_mode seed %" PRIu64 " preprocessor %016" PRIx64, job.seed,
                                                 tm->hash)
                                      : xstrdup("");
    char *sig = xasprintf("manifest %016" PRIx64 " fs %d n_fft %d win %d hop %d mels %d fmin %g fmax %g%s%s", h,
                          job.opts.fs, job.opts.n_fft, job.opts.win_length, job.opts.hop_length, job.opts.n_mels,
                          job.opts.fmin, job.opts.fmax, job.resample ? " resample" : "", aug_sig);
    if (job.waveform) {
        char *s = xasprintf("%s waveform", sig);
        free(sig);
        sig = s;
    }
    free(aug_sig);
    char *label = xasprintf("collect_stats %s", split);
    runner_job rj = {.name = label, .n_items = m.n, .work_dir = work_dir, .signature = sig, .provide = provide,
                     .release = release, .forward = forward, .item_name = item_name, .arg = &job};
    log_info("collect_stats: %s: %zu utterances", split, m.n);
    int run_rc = runner_run(&rj, cfg->parallel, err);
    if (run_rc == RUNNER_PENDING) { /* SLURM jobs compute it; a rerun merges */
        free(sig);
        free(label);
        rc = 0;
        goto out;
    }

    mc.m = &m;
    mc.dim = job.waveform ? 1 : (uint32_t)job.opts.n_mels;
    mc.waveform = job.waveform;
    mc.sum = xcalloc(mc.dim, sizeof *mc.sum);
    mc.sum_square = xcalloc(mc.dim, sizeof *mc.sum_square);
    char *shape_path = xasprintf("%s/feats_shape", out_dir);
    atomic_file shape = {0};
    if (run_rc == 0 && atomic_open(&shape, shape_path, err) == 0) {
        mc.shape = shape.fp;
        merge_call call = {&mc, err};
        if (runner_for_each(&rj, merge_cb, &call, err) != 0) atomic_abort(&shape);
        else if (atomic_commit(&shape, err) == 0) rc = 0;
    }
    free(shape_path);
    free(sig);
    free(label);
    if (rc != 0) goto out;
    rc = -1;

    /* ESPnet3 stores the sums as float32 (accumulated here in double). */
    float *sum32 = xmalloc(mc.dim * sizeof *sum32), *sq32 = xmalloc(mc.dim * sizeof *sq32);
    for (uint32_t d = 0; d < mc.dim; d++) sum32[d] = (float)mc.sum[d], sq32[d] = (float)mc.sum_square[d];
    npy_array arrays[] = {
        {.name = "count", .dtype = NPY_I64, .ndim = 0, .count = 1, .data = &mc.count},
        {.name = "sum", .dtype = NPY_F32, .ndim = 1, .shape = {mc.dim}, .count = mc.dim, .data = sum32},
        {.name = "sum_square", .dtype = NPY_F32, .ndim = 1, .shape = {mc.dim}, .count = mc.dim, .data = sq32},
    };
    if (job.waveform) arrays[1].ndim = arrays[2].ndim = 0; /* ESPnet's sums of 1-D sequences are scalars */
    char *npz_path = xasprintf("%s/feats_stats.npz", out_dir);
    char *keys_path = xasprintf("%s/stats_keys", out_dir);
    char *text_path = xasprintf("%s/text_shape.%s", out_dir, token_type_name(tl->type));
    if (npz_write(npz_path, arrays, 3, err) == 0 && atomic_write_file(keys_path, "feats\n", 6, err) == 0 &&
        write_text_shape(text_path, &m, tl, err) == 0) {
        log_info("collect_stats: %s: %" PRId64 " frames of %u dims -> %s", split, mc.count, mc.dim, npz_path);
        rc = 0;
    }
    free(sum32);
    free(sq32);
    free(npz_path);
    free(keys_path);
    free(text_path);
out:
    free(mc.sum);
    free(mc.sum_square);
    manifest_free(&m);
    free(manifest_path);
    free(out_dir);
    free(work_dir);
    return rc;
}

int stage_collect_stats(const stage_ctx *ctx, esp_err *err)
{
    const training_cfg *cfg = training_of(ctx->configs);
    const char *file = ctx->configs->training->path;
    if (!cfg->data_dir) return esp_fail(err, "%s: data_dir: missing (set data_dir)", file);
    if (!cfg->stats_dir) return esp_fail(err, "%s: stats_dir: missing (set stats_dir)", file);
    if (!cfg->tokenizer || !cfg->tokenizer->save_path)
        return esp_fail(err, "%s: tokenizer.save_path: missing (the token list sizes text_shape.<token_type>)", file);
    /* text_shape.<token_type> counts the tokens the training labels will have (ESPnet's name:
     * text_shape.char, text_shape.word, text_shape.bpe). */
    tokenizer_spec ts;
    if (dataset_check_preprocessor(cfg, file, err) != 0) return -1;
    if (tokenizer_spec_resolve(&ts, cfg->tokenizer, dataset_token_type(cfg), dataset_bpemodel(cfg), file, err) != 0)
        return -1;
    token_list tl = {0};
    int rc;
    if (!path_exists(ts.tokens_path))
        rc = esp_fail(err, "%s: no token list (run train_tokenizer, stage 2, first)", ts.tokens_path);
    else if ((rc = token_list_read(ts.tokens_path, &tl, err)) == 0)
        rc = token_list_set_type(&tl, ts.type, ts.model_path, err);
    /* ESPnet2's asr.sh makes the speed-perturbed training set after data preparation: here, once,
     * before its shapes are collected (a rerun reuses the copies). */
    if (rc == 0 && cfg->n_speed_perturb_factors) {
        frontend_opts fo;
        frontend_opts_from_cfg(cfg->model ? cfg->model->frontend_conf : NULL, &fo);
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        /* speed_perturb_factors were checked when the config loaded */
        if (speed_perturb_prepare(cfg, fo.fs, cpus > 0 ? (int)cpus : 1, err) != 0) rc = -1;
    }
    /* ESPnet3's collect_stats_train_mode: the train split's statistics of augmented audio (epoch 0's
     * draws, as training makes them); off, ESPnet2's: the audio as it is. */
    train_mode tm = {0};
    int use_tm = rc == 0 && cfg->collect_stats_train_mode && !cfg->lm_task;
    if (use_tm) augment_conf_read(ctx->configs->training, &tm.aug);
    if (use_tm && (rc = noise_rir_conf_read(ctx->configs->training, &tm.nr, err)) == 0) {
        tm.aug_on = tm.aug.n > 0 && tm.aug.prob > 0;
        char *pre = config_tree_json(yt_get_path(ctx->configs->training->tree, "dataset.preprocessor"), NULL);
        tm.hash = fnv1a64_str(pre);
        free(pre);
        tm.nr_on = noise_rir_conf_active(&tm.nr);
        if (!tm.aug_on && !tm.nr_on)
            log_warn("%s: collect_stats_train_mode: true, but the preprocessor augments nothing (no data_aug_effects "
                     "with data_aug_prob > 0, no rir_scp / noise_scp): the statistics are of the audio as it is", file);
        else log_info("collect_stats: train: statistics of the augmented audio (collect_stats_train_mode)");
    }
    static const char *const splits[] = {"train", "valid"};
    for (size_t i = 0; i < 2 && rc == 0; i++) rc = collect_split(cfg, splits[i], &tl, use_tm ? &tm : NULL, err);
    augment_conf_free(&tm.aug);
    noise_rir_conf_free(&tm.nr);
    token_list_free(&tl);
    tokenizer_spec_free(&ts);
    return rc;
}
