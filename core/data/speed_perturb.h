/* ESPnet2's speed perturbation of the training set (asr.sh --speed_perturb_factors "0.9 1.0 1.1"):
 * once, in data preparation, every training utterance gets a copy per factor f != 1.0, played f
 * times as fast (length n / f, pitch up by f, as sox's `speed`), resampled with libsamplerate
 * and written as a 16-bit WAV under ${data_dir}/speed_perturb/sp<f>/; its utterance id is
 * "sp<f>-<utt>" as ESPnet2's perturb_data_dir_speed.sh names it. The combined list (factor 1.0
 * keeps the originals) is ${data_dir}/manifest/train_sp.tsv, which collect_stats (stage 3) and
 * training (stage 5) then read as the "train" split. */
#ifndef ESPNET3_SPEED_PERTURB_H
#define ESPNET3_SPEED_PERTURB_H

#include <stddef.h>

#include "core/base/log.h"
#include "core/config/config_types.h"
#include "core/formats/manifest.h"

/* x (n samples) played `factor` times as fast: about n / factor samples (caller frees *y). */
int speed_perturb_wave(const float *x, size_t n, double factor, float **y, size_t *ny, esp_err *err);

/* "sp0.9-<utt>" (%g of the factor, as the factor list is written). Caller frees. */
char *speed_perturb_utt(double factor, const char *utt);

typedef struct sp_stats {
    size_t made, reused; /* copies written now, copies found from an earlier run */
} sp_stats;

/* The perturbed manifest of `in` (audio at fs Hz) in utterance-id order: the originals when 1.0 is
 * a factor, and a copy per other factor under out_dir/sp<f>/<utt>.wav. A copy newer than its
 * source is reused; others are (re)written through a temp file + rename. threads > 1 works on
 * that many utterances at once. */
int speed_perturb_manifest(const manifest *in, const double *factors, size_t n_factors, const char *out_dir, int fs,
                           int threads, manifest *out, sp_stats *st, esp_err *err);

/* The manifest of a split as the stages read it: ${data_dir}/manifest/<split>.tsv, and
 * train_sp.tsv for "train" when cfg->speed_perturb_factors is set. Caller frees. */
char *split_manifest_path(const training_cfg *cfg, const char *split);

/* Stage 3's data preparation: with speed_perturb_factors set, writes train_sp.tsv (and the copies)
 * from ${data_dir}/manifest/train.tsv; nothing otherwise. fs: the frontend's rate. */
int speed_perturb_prepare(const training_cfg *cfg, int fs, int threads, esp_err *err);

#endif
