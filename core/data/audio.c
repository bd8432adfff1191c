#include "core/data/audio.h"

#include <sndfile.h>
#include <stdlib.h>

int audio_read(const char *path, int expected_fs, const char *fs_key, float **samples, size_t *n,
               esp_err *err)
{
    return audio_read_fs(path, expected_fs, fs_key, samples, n, NULL, err);
}

int audio_read_fs(const char *path, int expected_fs, const char *fs_key, float **samples, size_t *n,
                  int *fs_out, esp_err *err)
{
    *samples = NULL;
    *n = 0;
    SF_INFO info = {0};
    SNDFILE *sf = sf_open(path, SFM_READ, &info);
    if (!sf) return esp_fail(err, "%s: cannot read audio: %s", path, sf_strerror(NULL));
    if (info.channels != 1) {
        sf_close(sf);
        return esp_fail(err, "%s: %d channels, but espnet3 reads mono audio (downmix it, e.g. "
                             "`sox in.wav -c 1 out.wav`)", path, info.channels);
    }
    if (expected_fs > 0 && info.samplerate != expected_fs) {
        sf_close(sf);
        return esp_fail(err, "%s: sample rate %d Hz, but %s is %d (resample the audio or set %s)", path,
                        info.samplerate, fs_key ? fs_key : "fs", expected_fs, fs_key ? fs_key : "fs");
    }
    if (fs_out) *fs_out = info.samplerate;
    /* libsndfile's float reads normalize integer PCM by 1/2^(bits-1), as soundfile does; float
     * files come back unchanged. */
    sf_command(sf, SFC_SET_NORM_FLOAT, NULL, SF_TRUE);
    size_t cap = info.frames > 0 ? (size_t)info.frames : 0;
    float *buf = xmalloc((cap ? cap : 1) * sizeof *buf);
    size_t got = 0;
    for (;;) {
        if (got == cap) {
            /* Frame counts can be unknown or wrong (streamed or truncated files): grow as needed. */
            cap = cap ? cap * 2 : 16384;
            buf = xrealloc(buf, cap * sizeof *buf);
        }
        sf_count_t r = sf_readf_float(sf, buf + got, (sf_count_t)(cap - got));
        if (r <= 0) break;
        got += (size_t)r;
    }
    int rc = sf_error(sf);
    if (rc != SF_ERR_NO_ERROR) {
        esp_fail(err, "%s: cannot decode audio: %s", path, sf_error_number(rc));
        sf_close(sf);
        free(buf);
        return -1;
    }
    sf_close(sf);
    *samples = buf;
    *n = got;
    return 0;
}
