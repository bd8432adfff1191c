/* Waveform data augmentation as ESPnet2's CommonPreprocessor does it on the training split
 * (espnet2/layers/augmentation.py, `data_aug_effects`): each effect computes what the torchaudio
 * function ESPnet calls computes (biquad filters through lfilter with its [-1, 1] clamp, contrast,
 * sinc-interpolation resampling with a Hann window for speed_perturb, ...), checked against
 * torchaudio on fixtures (scripts/make_augment_fixtures.py, test/unit/data/test_augment.c).
 *
 * The random choices (whether to augment, how many effects, which ones) follow
 * DataAugmentation.__call__; the draws come from an rng keyed by (seed, epoch, utterance id)
 * (augment_utt_seed), so an utterance gets the same augmentation whatever rank, worker or batch
 * loads it. The effects' kinds and arguments are the config's (core/config/config_aug.h, parsed when the
 * config loads); augment_conf.c takes them with data_aug_num and data_aug_prob. */
#ifndef ESPNET3_AUGMENT_H
#define ESPNET3_AUGMENT_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/rng.h"
#include "core/config/config_aug.h"

/* speed_perturb's resampling: int(factor * fs) -> fs, divided by their gcd (orig, new may be
 * NULL); -1 when int(factor * fs) is not positive. */
int aug_speed_rates(double factor, int fs, int *orig, int *new_freq);

/* Applies e to x (n samples at fs Hz): a new array of *n_out samples (caller frees). r: the
 * utterance's generator (corrupt_phase draws its noise from it; the others draw nothing). */
float *aug_effect_apply(const aug_effect *e, const float *x, size_t n, int fs, rng *r, size_t *n_out);
/* time_stretch, pitch_shift, corrupt_phase (core/data/augment_stft.c). An input not longer than
 * n_fft / 2 (too short for torch.stft's reflect padding) comes back unchanged. */
float *aug_stft_effect(const aug_effect *e, const float *x, size_t n, int fs, rng *r, size_t *n_out);

/* The parts, for tests. */
/* Biquad coefficients of a filter kind as torchaudio designs them (b[3], a[3], not normalized). */
void aug_biquad_design(const aug_effect *e, int fs, double b[3], double a[3]);
/* torchaudio.functional.lfilter of order 2 (b and a divided by a[0]; FIR then IIR, zero initial
 * state), clamped to [-1, 1] when clamp. y may not alias x. */
void aug_lfilter2(float *y, const float *x, size_t n, const double b[3], const double a[3], int clamp);
/* torchaudio.functional.resample(x, orig, new) with its defaults (sinc_interp_hann,
 * lowpass_filter_width 6, rolloff 0.99): ceil(new * n / orig) samples (caller frees). */
float *aug_resample(const float *x, size_t n, int orig, int new_freq, size_t *n_out);
/* torch.quantile(x, q) with linear interpolation, 0 <= q <= 1, n > 0. */
double aug_quantile(const float *x, size_t n, double q);

typedef struct augment_conf {
    size_t n;
    aug_entry *entries;
    int num[2];        /* data_aug_num: [lo, hi] effects per utterance */
    double prob;       /* data_aug_prob: 0 never augments */
} augment_conf;

void augment_conf_free(augment_conf *c);
/* A deep copy of src into dst. */
void augment_conf_copy(augment_conf *dst, const augment_conf *src);

/* The generator of one utterance's augmentation: keyed by the run's seed, the epoch (from 0) and
 * the utterance id only. */
uint64_t augment_utt_seed(uint64_t seed, int64_t epoch, const char *utt);

/* A uniform double in [0, 1) (53 bits), as numpy's random(). */
double aug_uniform(rng *r);

/* ESPnet's weighted_sample_without_replacement: key u^(1/w) per item, the k largest, returned in
 * increasing key order (the order ESPnet applies them). out gets k indices; k <= n. */
void aug_weighted_sample(rng *r, const double *weights, size_t n, size_t k, size_t *out);

/* CommonPreprocessor._speech_process's data_aug step on one waveform: with probability prob
 * (prob >= u), data_aug_num effects sampled by weight (a group contributes one member), applied
 * in ESPnet's order. Returns the new waveform (caller frees) and its length, or NULL when this
 * utterance is left as it is. */
float *augment_apply(const augment_conf *c, const float *x, size_t n, int fs, rng *r, size_t *n_out);

#endif
