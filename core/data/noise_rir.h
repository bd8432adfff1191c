/* Reverberation and additive noise as ESPnet2's CommonPreprocessor applies them to the training
 * waveform (espnet2/train/preprocessor.py, `rir_scp`, `rir_apply_prob`, `noise_scp`,
 * `noise_apply_prob`, `noise_db_range`, `short_noise_thres`), before data_aug_effects:
 *
 *   power = mean(x^2) over detect_non_silence(x)
 *   with rir_apply_prob:   x = convolve(x, rir)[:n]; x *= sqrt(power / max(power', 1e-10))
 *   with noise_apply_prob: db ~ U(noise_db_range); a noise segment of n samples (a random window
 *                          of a longer noise, a shorter one wrapped around a random offset);
 *                          x += 10^(-db/20) sqrt(power) / sqrt(max(mean(noise^2), 1e-10)) noise
 *   x /= max|x| when that is above 1
 *
 * Draws (in ESPnet's order: apply?, which rir, apply?, which noise, db, offset) come from the
 * utterance's generator (core/data/augment.h's augment_utt_seed), so any rank or worker draws the
 * same. RIRs and noises are read once, at the frontend's sample rate (another rate is refused). */
#ifndef ESPNET3_NOISE_RIR_H
#define ESPNET3_NOISE_RIR_H

#include <stddef.h>

#include "core/base/log.h"
#include "core/base/rng.h"
#include "core/config/config.h"

typedef struct nr_signal {
    double *x;
    size_t n;
    int fs;
    char *path;
} nr_signal;

typedef struct noise_rir_conf {
    nr_signal *rirs;
    size_t n_rirs;
    double rir_prob;        /* rir_apply_prob (ESPnet's default 1.0) */
    nr_signal *noises;
    size_t n_noises;
    double noise_prob;      /* noise_apply_prob (1.0) */
    double db_lo, db_hi;    /* noise_db_range "3_10" (SNR in dB) */
    double short_thres;     /* short_noise_thres (0.5): only ESPnet's warning, counted here */
} noise_rir_conf;

/* ESPnet's detect_non_silence on one channel (threshold 0.01, 1024-sample boxcar frames, shift
 * 512): mask[i] 1 where sample i is in a frame with power above 1% of the mean frame power. */
void nr_detect_non_silence(const double *x, size_t n, unsigned char *mask);
/* mean(x^2) over the non-silent samples. */
double nr_power(const double *x, size_t n);
/* _convolve_rir: x (n samples) convolved with rir (m), cut to n, rescaled to power. */
void nr_convolve_rir(double *x, size_t n, const double *rir, size_t m, double power);
/* _add_noise's mixing with a noise segment of n samples already cut. */
void nr_add_noise(double *x, size_t n, const double *noise, double power, double noise_db);
/* The n-sample segment of a noise of nn samples at offset (ESPnet's np.pad wrap / slice). */
void nr_noise_segment(const double *noise, size_t nn, size_t n, size_t offset, double *out);

/* An scp list's paths (caller frees with nr_scp_free); an empty list, a NUL byte or more than
 * 100000 entries is an error naming the file (and line). */
int nr_scp_read(const char *scp, char ***paths, size_t *n, esp_err *err);
void nr_scp_free(char **paths, size_t n);

/* The whole step on one waveform; NULL when the config has neither RIRs nor noises (or neither
 * was drawn), else a new array of n samples (caller frees). */
float *noise_rir_apply(const noise_rir_conf *c, const float *x, size_t n, rng *r);

/* rir_scp / noise_scp (lists of scp files; lines "<id> <path>" or "<path>") and the other keys of
 * a loaded training config's dataset.preprocessor (left out: their declared defaults); reads every
 * listed file (mono). No preprocessor: nothing. */
int noise_rir_conf_read(const esp_config *training, noise_rir_conf *out, esp_err *err);
/* Every file at the frontend's rate (ESPnet would resample with librosa; here: an error). */
int noise_rir_conf_check_fs(const noise_rir_conf *c, int fs, const char *fs_key, esp_err *err);
int noise_rir_conf_active(const noise_rir_conf *c);
void noise_rir_conf_copy(noise_rir_conf *dst, const noise_rir_conf *src);
void noise_rir_conf_free(noise_rir_conf *c);

#endif
