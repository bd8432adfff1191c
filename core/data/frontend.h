/* ESPnet2's DefaultFrontend (Stft + LogMel) on the CPU: the same math and defaults, FFTs through
 * FFTW single precision.
 *
 *   frames   torch.stft(center=True, pad_mode="reflect"): the signal is reflect-padded by n_fft/2
 *            on both sides; T = n_samples / hop_length + 1 frames, frame t starts at t*hop_length
 *   window   periodic Hann of win_length (torch.hann_window), zero-padded centred to n_fft
 *   power    re^2 + im^2 of the one-sided spectrum (n_fft/2 + 1 bins)
 *   mel      librosa.filters.mel(sr=fs, n_fft, n_mels, fmin, fmax): Slaney mel scale, Slaney norm
 *   log      natural log of max(mel, 1e-10)
 *
 * A batch is computed utterance by utterance (each reflects its own samples at the end), which
 * is what ESPnet2 gives for a batch of one; in a padded batch ESPnet2 reflects the zero padding
 * into the last n_fft/2/hop_length frames of the shorter utterances instead.
 *
 * Threads: a frontend object holds scratch buffers and may be used by one thread at a time; give
 * each thread its own (frontend_new/free may be called from any thread: FFTW planning is
 * serialized inside). */
#ifndef ESPNET3_FRONTEND_H
#define ESPNET3_FRONTEND_H

#include <stddef.h>

#include "core/config/config_types.h"
#include "core/base/log.h"

typedef struct frontend_opts {
    int fs, n_fft, win_length, hop_length, n_mels;
    double fmin, fmax;
} frontend_opts;

typedef struct frontend frontend;

/* ESPnet2's defaults for every field that is 0 in c (or all fields when c is NULL): fs 16000,
 * n_fft 512, win_length n_fft, hop_length 128, n_mels 80, fmin 0, fmax fs/2. */
void frontend_opts_from_cfg(const frontend_conf_cfg *c, frontend_opts *o);
/* Checks ranges; errors name the model.frontend_conf key. */
int frontend_opts_check(const frontend_opts *o, esp_err *err);

/* o must have passed frontend_opts_check. */
frontend *frontend_new(const frontend_opts *o);
void frontend_free(frontend *f);

/* Frames for n_samples of audio: n_samples / hop_length + 1. */
size_t frontend_num_frames(const frontend *f, size_t n_samples);
/* The shortest input frontend_logmel accepts: n_fft/2 + 1 samples (reflect padding by n_fft/2
 * needs that many, as in torch). Callers reject shorter utterances with an error naming them. */
size_t frontend_min_samples(const frontend *f);

/* out: frontend_num_frames(n_samples) x n_mels, row-major.
 * Precondition: n_samples >= frontend_min_samples(f) (checked: aborts otherwise). */
void frontend_logmel(float *out, frontend *f, const float *x, size_t n_samples);

/* B utterances into out: B x Tmax x n_mels with Tmax = max frame count; out_lens[b] gets each
 * utterance's frame count and its frames past that are zero (as ESPnet2 masks them). */
void frontend_logmel_batch(float *out, size_t *out_lens, frontend *f, const float *const *x,
                           const size_t *n, int B);

/* The mel filterbank, n_mels x (n_fft/2 + 1) row-major, as librosa.filters.mel builds it
 * (computed in double, rounded to float). Caller frees. */
float *frontend_mel_matrix(const frontend_opts *o);
/* The analysis window, n_fft values (periodic Hann of win_length, centred). Caller frees. */
float *frontend_window(const frontend_opts *o);

#endif
