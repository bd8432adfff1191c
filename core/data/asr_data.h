/* Training/validation data for the ASR model: a split's manifest turned into padded batches of
 * features and labels, computed as ESPnet2's preprocessor and encode() do: waveform augmentation
 * (training only, when asr_data_set_augment turned it on) -> frontend (log-mel) -> SpecAugment
 * (training only) -> normalization (global_mvn from feats_stats.npz, or utterance_mvn). */
#ifndef ESPNET3_ASR_DATA_H
#define ESPNET3_ASR_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "core/config/config_types.h"
#include "core/data/augment.h"
#include "core/data/noise_rir.h"
#include "core/data/frontend.h"
#include "core/base/log.h"
#include "core/formats/manifest.h"
#include "core/data/normalize.h"
#include "core/data/specaug.h"
#include "core/data/tokenizer.h"

typedef enum norm_kind { NORM_NONE, NORM_GLOBAL, NORM_UTTERANCE } norm_kind;

typedef struct asr_data {
    manifest m;
    token_list tokens;
    frontend *fe;
    frontend_opts fo;
    int specaug_on;          /* model.specaug set and this is training data */
    specaug_opts sa;
    norm_kind norm;
    global_mvn gmvn;
    int utt_norm_means, utt_norm_vars;
    double norm_eps;         /* normalize_conf.eps (both kinds) */
    int train;               /* opened as training data */
    int aug_on;              /* waveform augmentation (asr_data_set_augment) */
    noise_rir_conf nr;       /* reverberation and noise before it (asr_data_set_noise_rir) */
    int nr_on;
    augment_conf aug;
    uint64_t aug_seed;
    int64_t aug_epoch;
    int resample;            /* dataset.resample: audio at another rate is resampled to fo.fs */
    int threads;             /* asr_batch_load's threads (asr_data_set_threads; below 2: this one) */
    frontend **fe_slots;     /* one frontend per parallel part beyond the first (d->fe) */
    int n_fe_slots;
    int text_only;           /* an LM task's data (training_cfg.lm_task): transcripts alone, no audio, no
                              * frontend; batches hold labels only (feats NULL, feat_lens 0) */
} asr_data;

/* Opens the split (dataset.<split>'s sources, else ${data_dir}/manifest/<split>.tsv: core/data/dataset_src.h) with the model's frontend, SpecAugment (train only) and
 * normalization settings (an LM task's: transcripts alone, text_only); the token list comes from ${tokenizer.save_path}/tokens.txt and maps text
 * as the config's tokenizer does (tokenizer_spec_resolve); transcripts with text outside it get one
 * warning (their labels hold <unk>). */
int asr_data_open(asr_data *d, const training_cfg *cfg, const char *split, int train, esp_err *err);
/* The same from explicit files: a .tsv manifest and a tokens.txt, with the model's frontend and
 * normalization (m may be NULL: defaults, no normalization). manifest_path NULL opens no manifest
 * (d->m stays empty): the token list and the features of waveforms alone, as decoding needs. The
 * list maps text as char until token_list_set_type(&d->tokens, ...) says otherwise. */
int asr_data_open_files(asr_data *d, const model_cfg *m, const char *manifest_path, const char *tokens_path,
                        int train, esp_err *err);
void asr_data_close(asr_data *d);

/* Turns on ESPnet2's waveform augmentation (dataset.preprocessor.data_aug_*, core/data/augment.h)
 * for this split, before the frontend: a copy of c is kept. Only for training data (an error
 * otherwise); c's frequencies are checked against the frontend's rate. Each utterance's draws come
 * from (seed, the epoch of asr_data_set_epoch, its id), whatever batch, rank or worker loads it. */
int asr_data_set_augment(asr_data *d, const augment_conf *c, uint64_t seed, esp_err *err);
/* ESPnet's rir_scp / noise_scp step (core/data/noise_rir.h) on the training waveform, before the
 * data_aug effects, drawn from the same (seed, epoch, utterance id) key on its own stream. */
int asr_data_set_noise_rir(asr_data *d, const noise_rir_conf *c, uint64_t seed, esp_err *err);
/* The epoch (from 0) the next batches belong to. */
void asr_data_set_epoch(asr_data *d, int64_t epoch);

/* The training waveform augmentation of one utterance, drawn from (seed, epoch, utterance id)
 * alone: noise and reverberation (nr, NULL: none), then the data_aug_effects (aug, NULL: none). A
 * result shorter than min_samples (what the STFT needs) is padded with zeros to that length.
 * What training applies at that epoch; collect_stats_train_mode applies epoch 0's. */
void asr_augment_waveform(const augment_conf *aug, const noise_rir_conf *nr, uint64_t seed, int64_t epoch,
                          const char *utt, int fs, size_t min_samples, float **wav, size_t *n);
/* Threads asr_batch_load spreads a batch's utterances over (reading, augmentation, features); the
 * batch is the same bits for any count: each utterance's work depends on its own inputs alone. */
void asr_data_set_threads(asr_data *d, int threads);

/* Reads one audio file at the frontend's rate; one too short for the STFT is an error naming it. */
int asr_data_read_wav(const asr_data *d, const char *path, float **wav, size_t *n, esp_err *err);
/* The same for [start, end) seconds of it (a Kaldi segment; end 0: all of it). */
int asr_data_read_span(const asr_data *d, const char *path, double start, double end, float **wav, size_t *n,
                       esp_err *err);
/* Features of one waveform for decoding: log-mel, then normalization; never SpecAugment. x gets
 * frontend_num_frames(d->fe, n) rows of d->fo.n_mels; n comes from asr_data_read_wav (long enough). */
void asr_data_featurize(asr_data *d, float *x, const float *wav, size_t n);

typedef struct asr_batch {
    int B, D;
    size_t Tmax, Lmax;
    float *feats;            /* B x Tmax x D, padded frames zero */
    int *feat_lens;          /* frames per utterance */
    int *labels;             /* B x Lmax token ids, padded with -1 */
    int *label_lens;
    const char **utts;       /* ids, borrowed from the manifest */
} asr_batch;

/* Loads items (manifest indices); aug_seed makes SpecAugment reproducible per (seed, epoch, step). */
int asr_batch_load(asr_batch *b, asr_data *d, const size_t *items, int n, uint64_t aug_seed, esp_err *err);
void asr_batch_free(asr_batch *b);

#endif
