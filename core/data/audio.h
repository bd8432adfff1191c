/* Audio files in: WAV and FLAC (16/24/32-bit PCM or float) read through libsndfile into mono
 * float samples scaled like soundfile/ESPnet (int16 / 32768). No resampling, no downmixing:
 * a rate or channel count the model does not expect is a user error. */
#ifndef ESPNET3_AUDIO_H
#define ESPNET3_AUDIO_H

#include <stddef.h>

#include "core/base/log.h"

/* Reads `path` into a new array (*samples, caller frees; *n samples, may be 0).
 * expected_fs > 0: another rate is an error naming the file, both rates and fs_key (the config
 * key to change, e.g. "model.frontend_conf.fs"); expected_fs <= 0 accepts any rate.
 * More than one channel is an error naming the file and the channel count. */
int audio_read(const char *path, int expected_fs, const char *fs_key, float **samples, size_t *n,
               esp_err *err);

/* Like audio_read, also returning the file's rate (fs_out may be NULL). */
int audio_read_fs(const char *path, int expected_fs, const char *fs_key, float **samples, size_t *n,
                  int *fs_out, esp_err *err);

/* Like audio_read; with resample != 0 audio at another rate than expected_fs (> 0) is converted
 * to it with libsamplerate's best sinc converter instead of refused (dataset.resample). */
int audio_read_resampled(const char *path, int expected_fs, const char *fs_key, int resample, float **samples,
                         size_t *n, esp_err *err);

/* *samples (mono, *n of them, from_fs Hz; replaced, freed on error) at to_fs Hz, with libsamplerate's
 * best sinc converter; `name` for messages. */
int audio_resample(const char *name, float **samples, size_t *n, int from_fs, int to_fs, esp_err *err);

/* [start, end) seconds of path (a Kaldi segment), then as audio_read_resampled. end <= 0: the whole
 * file. An end past the file is clipped when within 0.1 s or when end is 1e300 (segments' -1),
 * else an error naming the file, the segment and the duration. */
int audio_read_span(const char *path, int expected_fs, const char *fs_key, int resample, double start, double end,
                    float **samples, size_t *n, esp_err *err);

/* Audio files out: mono 16-bit PCM WAV written through a temp file and renamed (no half-written
 * file on error). The samples' conversion to int16: */
typedef enum audio_pcm16 {
    AUDIO_PCM16_EXACT,      /* x 32768, rounded to nearest, saturated: audio_read reads x back */
    AUDIO_PCM16_LIBSNDFILE, /* libsndfile's float conversion with clipping (SFC_SET_CLIPPING) */
} audio_pcm16;
int audio_write_wav16(const char *path, const float *x, size_t n, int fs, audio_pcm16 conv, esp_err *err);

#endif
