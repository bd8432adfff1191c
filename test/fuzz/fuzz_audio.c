/* libFuzzer target for the audio layer (WAV, FLAC and whatever else libsndfile opens): bytes ->
 * audio_read_fs at any rate, and the same bytes read once from front to back through a file
 * descriptor (audio_stream_open_fd: what `espnet3 transcribe -` reads from a pipe). Accepted
 * audio is mono, has a positive rate, and finite samples in [-1, 1] for integer PCM (float files
 * may hold anything libsndfile decodes). The sequential read's errors name the stream; where both
 * accept, it delivers the file's samples at the file's rate (a header's placeholder length may let
 * it read on past them, never differ on them). */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/data/audio.h"
#include "core/data/audio_stream.h"
#include "test/fuzz/fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_scratch("audio");
    return 0;
}

static volatile float sink;

/* path read through its descriptor in blocks at fs Hz (resampled when the file's rate differs):
 * the samples, or NULL on an error, which must name the stream. */
static float *read_sequential(const char *path, int fs, size_t *n)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) abort();
    esp_err err;
    audio_stream *st = audio_stream_open_fd(fd, "<stdin>", fs, &err);
    float *x = NULL;
    size_t got = 0, block = 4096;
    long r = 0;
    if (st) {
        do {
            x = realloc(x, (got + block) * sizeof *x);
            r = audio_stream_read(st, x + got, block, &err);
            got += r > 0 ? (size_t)r : 0;
        } while (r == (long)block);
        audio_stream_close(st);
    }
    close(fd);
    if (!st || r < 0) {
        if (strncmp(err.msg, "<stdin>: ", 9)) abort();
        free(x);
        return NULL;
    }
    *n = got;
    return x;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("utt1.wav", data, size);
    float *x, *y;
    size_t n, ny;
    int fs;
    esp_err err;
    if (audio_read_fs(path, 0, "model.frontend_conf.fs", &x, &n, &fs, &err) != 0) {
        if (!strstr(err.msg, path)) abort(); /* every error names the file */
        free(read_sequential(path, 16000, &ny)); /* at a decoder's rate */
        return 0;
    }
    if (fs <= 0) abort();
    if ((y = read_sequential(path, fs, &ny))) {
        if (memcmp(x, y, (ny < n ? ny : n) * sizeof *x)) abort();
        free(y);
    }
    float acc = 0;
    for (size_t i = 0; i < n; i++) acc += x[i]; /* ASan sees every sample */
    sink = acc;
    free(x);
    return 0;
}
