#include "core/data/audio.h"

#include <inttypes.h>
#include <math.h>
#include <samplerate.h>
#include <sndfile.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/data/audio_open.h"
#include "core/data/audio_riff.h"

/* The first buffer holds at most this many samples, whatever the header claims: a hostile header
 * must not make us allocate before the data is there (the buffer grows as samples arrive). */
#define FIRST_CHUNK (1u << 20)

int audio_read(const char *path, int expected_fs, const char *fs_key, float **samples, size_t *n,
               esp_err *err)
{
    return audio_read_fs(path, expected_fs, fs_key, samples, n, NULL, err);
}

/* The rate error of every reader: the file's rate is not the model's and resampling is off. */
static int rate_error(const char *name, int fs, int expected_fs, const char *fs_key, esp_err *err)
{
    return esp_fail(err, "%s: sample rate %d Hz, but %s is %d (resample the audio, set dataset.resample: true, "
                    "or set %s)", name, fs, fs_key ? fs_key : "fs", expected_fs, fs_key ? fs_key : "fs");
}

/* The checks of audio_open.h. */
int audio_check_opened(SNDFILE *sf, const SF_INFO *info, FILE *raw, const char *name, int expected_fs,
                        const char *fs_key, esp_err *err)
{
    int major = info->format & SF_FORMAT_TYPEMASK;
    uint32_t declared;
    long present;
    if (info->channels != 1)
        return esp_fail(err, "%s: %d channels, but espnet3 reads mono audio (downmix it, e.g. "
                             "`sox in.wav -c 1 out.wav`)", name, info->channels);
    if (info->samplerate <= 0)
        return esp_fail(err, "%s: sample rate %d Hz in the header (corrupt file?)", name, info->samplerate);
    if (expected_fs > 0 && info->samplerate != expected_fs)
        return rate_error(name, info->samplerate, expected_fs, fs_key, err);
    if ((major == SF_FORMAT_WAV || major == SF_FORMAT_WAVEX) && raw && audio_riff_data_truncated(raw, &declared, &present))
        return esp_fail(err, "%s: truncated WAV: the header declares %" PRIu32 " bytes of audio data, the file "
                             "holds %ld (re-copy or re-create the file)", name, declared, present);
    /* libsndfile's float reads normalize integer PCM by 1/2^(bits-1), as soundfile does; float
     * files come back unchanged. */
    sf_command(sf, SFC_SET_NORM_FLOAT, NULL, SF_TRUE);
    return 0;
}

/* libsndfile's handle on path, after the RIFF checks (audio_riff.h) of its bytes, which *raw reads
 * (NULL where it cannot be opened so: libsndfile's error says why); NULL with err on failure. */
static SNDFILE *open_path(const char *path, SF_INFO *info, FILE **raw, esp_err *err)
{
    memset(info, 0, sizeof *info);
    *raw = fopen(path, "rb");
    if (*raw && audio_riff_check_file(*raw, path, err) != 0) {
        fclose(*raw);
        return NULL;
    }
    SNDFILE *sf = sf_open(path, SFM_READ, info);
    if (!sf) {
        esp_fail(err, "%s: cannot read audio: %s", path, sf_strerror(NULL));
        if (*raw) fclose(*raw);
    }
    return sf;
}

SNDFILE *audio_open_checked(const char *path, int expected_fs, const char *fs_key, SF_INFO *info, esp_err *err)
{
    FILE *raw;
    SNDFILE *sf = open_path(path, info, &raw, err);
    if (!sf) return NULL;
    int rc = audio_check_opened(sf, info, raw, path, expected_fs, fs_key, err);
    if (raw) fclose(raw);
    if (rc == 0) return sf;
    sf_close(sf);
    return NULL;
}

/* The checks and the read of an opened file, named `name` in messages; raw reads the same bytes
 * (NULL: no truncation check). Closes sf. */
static int read_opened(SNDFILE *sf, const SF_INFO *ip, FILE *raw, const char *name, int expected_fs,
                       const char *fs_key, float **samples, size_t *n, int *fs_out, esp_err *err)
{
    SF_INFO info = *ip;
    if (audio_check_opened(sf, &info, raw, name, expected_fs, fs_key, err) != 0) {
        sf_close(sf);
        return -1;
    }
    if (fs_out) *fs_out = info.samplerate;
    size_t cap = info.frames <= 0 ? 16384 : info.frames < FIRST_CHUNK ? (size_t)info.frames : FIRST_CHUNK;
    float *buf = xmalloc(cap * sizeof *buf);
    size_t got = 0;
    for (;;) {
        if (got == cap) {
            /* Frame counts can be unknown or wrong (streamed or truncated files): grow as needed. */
            cap *= 2;
            buf = xrealloc(buf, cap * sizeof *buf);
        }
        sf_count_t r = sf_readf_float(sf, buf + got, (sf_count_t)(cap - got));
        if (r <= 0) break;
        got += (size_t)r;
    }
    int rc = sf_error(sf);
    if (rc != SF_ERR_NO_ERROR) esp_fail(err, "%s: cannot decode audio: %s", name, sf_error_number(rc));
    else if (info.frames > 0 && info.frames != SF_COUNT_MAX && (sf_count_t)got < info.frames)
        rc = esp_fail(err, "%s: truncated or corrupt audio: the header promises %lld samples, %zu could be decoded",
                      name, (long long)info.frames, got);
    sf_close(sf);
    if (rc != 0) {
        free(buf);
        return -1;
    }
    *samples = buf;
    *n = got;
    return 0;
}

int audio_read_fs(const char *path, int expected_fs, const char *fs_key, float **samples, size_t *n,
                  int *fs_out, esp_err *err)
{
    *samples = NULL;
    *n = 0;
    SF_INFO info;
    FILE *raw;
    SNDFILE *sf = open_path(path, &info, &raw, err);
    if (!sf) return -1;
    int rc = read_opened(sf, &info, raw, path, expected_fs, fs_key, samples, n, fs_out, err);
    if (raw) fclose(raw);
    return rc;
}

int audio_resample(const char *name, float **samples, size_t *n, int from_fs, int to_fs, esp_err *err)
{
    if (from_fs == to_fs || *n == 0) return 0;
    double ratio = (double)to_fs / from_fs;
    size_t cap = (size_t)((double)*n * ratio) + 16;
    float *out = xmalloc(cap * sizeof *out);
    SRC_DATA d = {.data_in = *samples, .data_out = out, .input_frames = (long)*n, .output_frames = (long)cap,
                  .src_ratio = ratio};
    int rc = src_simple(&d, SRC_SINC_BEST_QUALITY, 1);
    free(*samples);
    *samples = NULL;
    *n = 0;
    if (rc != 0) {
        free(out);
        return esp_fail(err, "%s: cannot resample %d Hz to %d Hz: %s", name, from_fs, to_fs, src_strerror(rc));
    }
    *samples = out;
    *n = (size_t)d.output_frames_gen;
    return 0;
}

int audio_read_resampled(const char *path, int expected_fs, const char *fs_key, int resample, float **samples,
                         size_t *n, esp_err *err)
{
    if (!resample || expected_fs <= 0) return audio_read(path, expected_fs, fs_key, samples, n, err);
    int fs;
    if (audio_read_fs(path, 0, fs_key, samples, n, &fs, err) != 0) return -1;
    return audio_resample(path, samples, n, fs, expected_fs, err);
}

int audio_read_span(const char *path, int expected_fs, const char *fs_key, int resample, double start, double end,
                    float **samples, size_t *n, esp_err *err)
{
    if (end <= 0) return audio_read_resampled(path, expected_fs, fs_key, resample, samples, n, err);
    *samples = NULL;
    *n = 0;
    int fs;
    float *all;
    size_t total;
    /* The whole file's checks (channels, truncation) first; then the span is cut out of it. */
    if (audio_read_fs(path, 0, fs_key, &all, &total, &fs, err) != 0) return -1;
    if (expected_fs > 0 && fs != expected_fs && !resample) {
        free(all);
        return rate_error(path, fs, expected_fs, fs_key, err);
    }
    double dur = (double)total / fs;
    if (end > dur && end != 1e300 && end - dur > 0.1) {
        free(all);
        return esp_fail(err, "%s: segment %.3f-%.3f s runs past the end of the audio (%.3f s)", path, start, end, dur);
    }
    size_t a = (size_t)llround(start * fs), b = end >= dur ? total : (size_t)llround(end * fs);
    if (a >= b || a >= total) {
        free(all);
        return esp_fail(err, "%s: segment %.3f-%.3f s holds no samples (the audio is %.3f s)", path, start,
                        end == 1e300 ? dur : end, dur);
    }
    float *cut = xmalloc((b - a) * sizeof *cut);
    memcpy(cut, all + a, (b - a) * sizeof *cut);
    free(all);
    *samples = cut;
    *n = b - a;
    if (expected_fs <= 0) return 0;
    return audio_resample(path, samples, n, fs, expected_fs, err);
}

int audio_write_wav16(const char *path, const float *x, size_t n, int fs, audio_pcm16 conv, esp_err *err)
{
    atomic_file af;
    if (atomic_open(&af, path, err) != 0) return -1;
    SF_INFO info = {.samplerate = fs, .channels = 1, .format = SF_FORMAT_WAV | SF_FORMAT_PCM_16};
    SNDFILE *sf = sf_open_fd(fileno(af.fp), SFM_WRITE, &info, SF_FALSE);
    if (!sf) {
        atomic_abort(&af);
        return esp_fail(err, "%s: cannot write WAV: %s", path, sf_strerror(NULL));
    }
    sf_count_t wrote;
    if (conv == AUDIO_PCM16_EXACT) {
        short *s = xmalloc((n ? n : 1) * sizeof *s);
        for (size_t i = 0; i < n; i++)
            s[i] = (short)fmax(-32768.0, fmin(32767.0, nearbyint((double)x[i] * 32768.0)));
        wrote = sf_write_short(sf, s, (sf_count_t)n);
        free(s);
    } else {
        sf_command(sf, SFC_SET_CLIPPING, NULL, SF_TRUE); /* saturate instead of wrapping around */
        wrote = sf_writef_float(sf, x, (sf_count_t)n);
    }
    if (sf_close(sf) != 0 || wrote != (sf_count_t)n) {
        atomic_abort(&af);
        return esp_fail(err, "%s: WAV write failed (check free disk space)", path);
    }
    return atomic_commit(&af, err);
}
