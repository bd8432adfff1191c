#include "core/data/asr_data.h"

#include <stdlib.h>
#include <string.h>

#include "core/data/audio.h"
#include "core/data/augment_conf.h"
#include "core/data/dataset_src.h"
#include "core/base/fsio.h"
#include "core/base/parallel.h"
#include "core/formats/npz.h"
#include "core/base/rng.h"

#define FS_KEY "model.frontend_conf.fs"

static int load_global_mvn(asr_data *d, const model_cfg *m, esp_err *err)
{
    const char *path = m->normalize_conf->stats_file;
    if (!path) return esp_fail(err, "model.normalize_conf.stats_file: missing (global_mvn needs feats_stats.npz)");
    if (!path_exists(path)) return esp_fail(err, "%s: no stats file (run collect_stats, stage 3, first)", path);
    npz_file f;
    if (npz_read(path, &f, err) != 0) return -1;
    double *count = NULL, *sum = NULL, *sq = NULL;
    size_t nc, ns, nq;
    int rc = -1;
    if (npz_get_doubles(&f, path, "count", &count, &nc, err) == 0 && npz_get_doubles(&f, path, "sum", &sum, &ns, err) == 0 &&
        npz_get_doubles(&f, path, "sum_square", &sq, &nq, err) == 0) {
        if (ns != (size_t)d->fo.n_mels || nq != ns)
            esp_fail(err, "%s: stats have %zu dims but the frontend makes %d (recollect stats)", path, ns, d->fo.n_mels);
        else
            rc = global_mvn_init(&d->gmvn, sum, sq, (int64_t)count[0], (int)ns,
                                 m->normalize_conf->norm_means, m->normalize_conf->norm_vars, d->norm_eps, err);
    }
    free(count);
    free(sum);
    free(sq);
    npz_free(&f);
    return rc;
}

int asr_data_open(asr_data *d, const training_cfg *cfg, const char *split, int train, esp_err *err)
{
    memset(d, 0, sizeof *d);
    if (!cfg->data_dir) return esp_fail(err, "data_dir: missing");
    tokenizer_spec ts;
    if (tokenizer_spec_resolve(&ts, cfg->tokenizer, dataset_token_type(cfg), dataset_bpemodel(cfg), "training config",
                               err) != 0)
        return -1;
    manifest m;
    char *mpath = NULL;
    int rc = dataset_split_load(cfg, split, &m, &mpath, err);
    if (rc == 0 && cfg->lm_task) { /* transcripts alone: no frontend, no features */
        if (!path_exists(ts.tokens_path))
            rc = esp_fail(err, "%s: no token list (run train_tokenizer, stage 2, first)", ts.tokens_path);
        else rc = token_list_read(ts.tokens_path, &d->tokens, err);
        if (rc == 0) d->m = m, d->text_only = 1, d->train = train;
        else manifest_free(&m);
    } else if (rc == 0) {
        rc = asr_data_open_files(d, cfg->model, NULL, ts.tokens_path, train, err);
        if (rc == 0) d->m = m;
        else manifest_free(&m);
    }
    if (rc == 0) d->resample = cfg->dataset && cfg->dataset->resample;
    if (rc == 0 && (rc = token_list_set_type(&d->tokens, ts.type, ts.model_path, err)) != 0) asr_data_close(d);
    if (rc == 0) { /* labels map unknown text to <unk>: say so once per split, not per batch */
        const char **texts = xmalloc((d->m.n ? d->m.n : 1) * sizeof *texts);
        for (size_t i = 0; i < d->m.n; i++) texts[i] = d->m.items[i].text;
        tokens_warn_unknown(&d->tokens, texts, d->m.n, mpath);
        free(texts);
    }
    free(mpath);
    tokenizer_spec_free(&ts);
    return rc;
}

int asr_data_open_files(asr_data *d, const model_cfg *m, const char *mpath, const char *tpath, int train,
                        esp_err *err)
{
    memset(d, 0, sizeof *d);
    int rc = -1;
    if (mpath && !path_exists(mpath)) esp_fail(err, "%s: no manifest (run create_dataset, stage 1, first)", mpath);
    else if (!path_exists(tpath)) esp_fail(err, "%s: no token list (run train_tokenizer, stage 2, first)", tpath);
    else if ((!mpath || manifest_read_tsv(mpath, &d->m, err) == 0) && token_list_read(tpath, &d->tokens, err) == 0)
        rc = 0;
    if (rc != 0) goto fail;

    frontend_opts_from_cfg(m ? m->frontend_conf : NULL, &d->fo);
    if (frontend_opts_check(&d->fo, err) != 0) goto fail;
    d->fe = frontend_new(&d->fo);
    d->train = train;
    if (train && m && m->specaug) {
        if (specaug_opts_from_cfg(m->specaug_conf, &d->sa, err) != 0) goto fail;
        d->specaug_on = 1;
    }
    if (m && m->normalize) {
        /* The loader makes normalize_conf with its declared defaults whenever normalize is set. */
        ESP_CHECK(m->normalize_conf && m->normalize_conf->eps > 0);
        d->norm_eps = m->normalize_conf->eps;
    }
    if (m && m->normalize && !strcmp(m->normalize, "global_mvn")) {
        d->norm = NORM_GLOBAL;
        if (load_global_mvn(d, m, err) != 0) goto fail;
    } else if (m && m->normalize && !strcmp(m->normalize, "utterance_mvn")) {
        d->norm = NORM_UTTERANCE;
        d->utt_norm_means = m->normalize_conf->norm_means;
        d->utt_norm_vars = m->normalize_conf->norm_vars;
    }
    return 0;
fail:
    asr_data_close(d);
    return -1;
}

void asr_data_close(asr_data *d)
{
    manifest_free(&d->m);
    token_list_free(&d->tokens);
    frontend_free(d->fe);
    for (int k = 0; k < d->n_fe_slots; k++) frontend_free(d->fe_slots[k]);
    free(d->fe_slots);
    if (d->norm == NORM_GLOBAL) global_mvn_free(&d->gmvn);
    augment_conf_free(&d->aug);
    noise_rir_conf_free(&d->nr);
    memset(d, 0, sizeof *d);
}

int asr_data_set_augment(asr_data *d, const augment_conf *c, uint64_t seed, esp_err *err)
{
    if (!d->train) return esp_fail(err, "data augmentation is for training data only");
    if (d->text_only)
        return esp_fail(err, "dataset.preprocessor.data_aug_*: a language model's data are text; waveform "
                             "augmentation does not apply (remove the keys from the LM's config)");
    if (augment_conf_check_fs(c, d->fo.fs, FS_KEY, err) != 0) return -1;
    augment_conf_free(&d->aug);
    augment_conf_copy(&d->aug, c);
    d->aug_on = c->n > 0 && c->prob > 0;
    d->aug_seed = seed;
    return 0;
}

int asr_data_set_noise_rir(asr_data *d, const noise_rir_conf *c, uint64_t seed, esp_err *err)
{
    if (!d->train) return esp_fail(err, "noise and reverberation are for training data only");
    if (d->text_only)
        return esp_fail(err, "dataset.preprocessor.rir_scp / noise_scp: a language model's data are text; noise "
                             "and reverberation do not apply (remove the keys from the LM's config)");
    if (noise_rir_conf_check_fs(c, d->fo.fs, FS_KEY, err) != 0) return -1;
    noise_rir_conf_free(&d->nr);
    noise_rir_conf_copy(&d->nr, c);
    d->nr_on = noise_rir_conf_active(c);
    d->aug_seed = seed;
    return 0;
}

void asr_data_set_epoch(asr_data *d, int64_t epoch) { d->aug_epoch = epoch; }

void asr_data_set_threads(asr_data *d, int threads) { d->threads = threads; }

void asr_augment_waveform(const augment_conf *aug, const noise_rir_conf *nr, uint64_t seed, int64_t epoch,
                          const char *utt, int fs, size_t min_samples, float **wav, size_t *n)
{
    uint64_t key = augment_utt_seed(seed, epoch, utt);
    if (nr) { /* its own stream: the effects draw as they do without it */
        rng rn;
        rng_init(&rn, rng_derive(key, 0x4E52, 0));
        float *z = noise_rir_apply(nr, *wav, *n, &rn);
        if (z) {
            free(*wav);
            *wav = z;
        }
    }
    if (!aug) return;
    rng r;
    rng_init(&r, key);
    size_t m;
    float *y = augment_apply(aug, *wav, *n, fs, &r, &m);
    if (!y) return;
    if (m < min_samples) {
        y = xrealloc(y, min_samples * sizeof *y);
        memset(y + m, 0, (min_samples - m) * sizeof *y);
        m = min_samples;
    }
    free(*wav);
    *wav = y;
    *n = m;
}

static void augment_wav(const asr_data *d, const char *utt, float **wav, size_t *n)
{
    asr_augment_waveform(d->aug_on ? &d->aug : NULL, d->nr_on ? &d->nr : NULL, d->aug_seed, d->aug_epoch, utt,
                         d->fo.fs, frontend_min_samples(d->fe), wav, n);
}

int asr_data_read_wav(const asr_data *d, const char *path, float **wav, size_t *n, esp_err *err)
{
    return asr_data_read_span(d, path, 0, 0, wav, n, err);
}

int asr_data_read_span(const asr_data *d, const char *path, double start, double end, float **wav, size_t *n,
                       esp_err *err)
{
    if (audio_read_span(path, d->fo.fs, FS_KEY, d->resample, start, end, wav, n, err) != 0) return -1;
    if (*n >= frontend_min_samples(d->fe)) return 0;
    esp_fail(err, "%s: %zu samples is shorter than the STFT needs (%zu)", path, *n, frontend_min_samples(d->fe));
    free(*wav);
    *wav = NULL;
    return -1;
}

/* The one feature pipeline of training and decoding: log-mel, SpecAugment (aug non-NULL),
 * normalization. x has T_pad >= T rows (the batch's padded length; utterance_mvn's result depends
 * on it as ESPnet2's does on a padded batch); rows from T on are padding. */
static void featurize(const asr_data *d, frontend *fe, float *x, const float *wav, size_t n, rng *aug, size_t T_pad)
{
    size_t T = frontend_num_frames(fe, n);
    frontend_logmel(x, fe, wav, n);
    if (aug) specaug_apply(x, T, d->fo.n_mels, &d->sa, aug);
    if (d->norm == NORM_GLOBAL) global_mvn_apply(x, &d->gmvn, T, T);
    else if (d->norm == NORM_UTTERANCE)
        utterance_mvn_apply(x, T_pad, T, d->fo.n_mels, d->utt_norm_means, d->utt_norm_vars, d->norm_eps);
}

void asr_data_featurize(asr_data *d, float *x, const float *wav, size_t n)
{
    featurize(d, d->fe, x, wav, n, NULL, frontend_num_frames(d->fe, n));
}

void asr_batch_free(asr_batch *b)
{
    free(b->feats);
    free(b->feat_lens);
    free(b->labels);
    free(b->label_lens);
    free(b->utts);
    memset(b, 0, sizeof *b);
}

/* One batch's per-utterance work, handed out an utterance at a time (parallel_items: utterances
 * differ in length and augmentation, so fixed shares left a thread waiting): each writes only its
 * own slots, so the batch does not depend on how many threads ran. */
typedef struct batch_job {
    asr_data *d;
    asr_batch *b;
    const size_t *items;
    uint64_t aug_seed;
    float **wav;
    size_t *ns;
    long **ids;
    size_t *nids;
    int *rc;
    esp_err *errs;
} batch_job;

/* Reads, tokenizes and augments utterance i. */
static void read_item(void *ctx, size_t i, int slot)
{
    (void)slot;
    batch_job *j = ctx;
    const asr_data *d = j->d;
    const manifest_entry *e = &d->m.items[j->items[i]];
    j->b->utts[i] = e->utt;
    if (d->text_only) {
        if (text_to_ids(&d->tokens, e->text, &j->ids[i], &j->nids[i], NULL, &j->errs[i]) != 0) j->rc[i] = -1;
        return;
    }
    if (asr_data_read_span(d, e->wav, e->start, e->end, &j->wav[i], &j->ns[i], &j->errs[i]) != 0) j->rc[i] = -1;
    else if (text_to_ids(&d->tokens, e->text, &j->ids[i], &j->nids[i], NULL, &j->errs[i]) != 0) j->rc[i] = -1;
    if (j->rc[i] == 0 && (d->aug_on || d->nr_on)) augment_wav(d, e->utt, &j->wav[i], &j->ns[i]); /* before the frontend, as ESPnet */
}

/* Features and labels of utterance i into the padded batch, with the slot's frontend. */
static void feature_item(void *ctx, size_t i, int slot)
{
    batch_job *j = ctx;
    asr_data *d = j->d;
    asr_batch *b = j->b;
    frontend *fe = slot == 0 || d->text_only ? d->fe : d->fe_slots[slot - 1];
    size_t D = (size_t)b->D;
    rng r;
    rng_init(&r, rng_derive(j->aug_seed, 0x5A, j->items[i])); /* same draw on resume */
    if (!d->text_only)
        featurize(d, fe, b->feats + i * b->Tmax * D, j->wav[i], j->ns[i], d->specaug_on ? &r : NULL, b->Tmax);
    for (size_t k = 0; k < j->nids[i]; k++) b->labels[i * b->Lmax + k] = (int)j->ids[i][k];
}

/* Frontends for parts 1 .. parts - 1 (each has its own FFT buffers), made here on one thread. */
static void ensure_frontend_slots(asr_data *d, int parts)
{
    if (parts - 1 <= d->n_fe_slots) return;
    d->fe_slots = xrealloc(d->fe_slots, (size_t)(parts - 1) * sizeof *d->fe_slots);
    for (int k = d->n_fe_slots; k < parts - 1; k++) d->fe_slots[k] = frontend_new(&d->fo);
    d->n_fe_slots = parts - 1;
}

int asr_batch_load(asr_batch *b, asr_data *d, const size_t *items, int n, uint64_t aug_seed, esp_err *err)
{
    memset(b, 0, sizeof *b);
    b->B = n;
    b->D = d->fo.n_mels;
    batch_job j = {.d = d, .b = b, .items = items, .aug_seed = aug_seed};
    j.wav = xcalloc((size_t)n, sizeof *j.wav);
    j.ns = xcalloc((size_t)n, sizeof *j.ns);
    j.ids = xcalloc((size_t)n, sizeof *j.ids);
    j.nids = xcalloc((size_t)n, sizeof *j.nids);
    j.rc = xcalloc((size_t)n, sizeof *j.rc);
    j.errs = xcalloc((size_t)n, sizeof *j.errs);
    b->feat_lens = xcalloc((size_t)n, sizeof *b->feat_lens);
    b->label_lens = xcalloc((size_t)n, sizeof *b->label_lens);
    b->utts = xcalloc((size_t)n, sizeof *b->utts);
    parallel_items((size_t)n, d->threads, read_item, &j); /* threads 0 (never set): this thread */
    int rc = 0;
    for (int i = 0; i < n; i++) { /* the first failing utterance's error, whatever the threads */
        if (j.rc[i] != 0) {
            *err = j.errs[i];
            rc = -1;
            break;
        }
        b->feat_lens[i] = d->text_only ? 0 : (int)frontend_num_frames(d->fe, j.ns[i]);
        b->label_lens[i] = (int)j.nids[i];
        if ((size_t)b->feat_lens[i] > b->Tmax) b->Tmax = (size_t)b->feat_lens[i];
        if (j.nids[i] > b->Lmax) b->Lmax = j.nids[i];
    }
    if (rc == 0) {
        b->feats = d->text_only ? NULL : xcalloc((size_t)n * b->Tmax * (size_t)b->D, sizeof *b->feats);
        b->labels = xmalloc(((size_t)n * b->Lmax + 1) * sizeof *b->labels);
        for (size_t k = 0; k < (size_t)n * b->Lmax; k++) b->labels[k] = -1;
        if (!d->text_only) ensure_frontend_slots(d, parallel_parts_count((size_t)n, 1, d->threads));
        parallel_items((size_t)n, d->threads, feature_item, &j);
    }
    for (int i = 0; i < n; i++) free(j.wav[i]), free(j.ids[i]);
    free(j.wav);
    free(j.ns);
    free(j.ids);
    free(j.nids);
    free(j.rc);
    free(j.errs);
    if (rc != 0) asr_batch_free(b);
    return rc;
}
