/* libFuzzer target for the block reader of long-form decoding (core/data/audio_stream.h): bytes ->
 * a file read in blocks (the block size from the input's length), whole and as a span, at the
 * file's own rate and resampled to 16 kHz. What the whole-file reader (audio_read_fs) accepts, the
 * stream accepts with the same samples, block for block (the stream may accept a file whose
 * decoder noted an error only after its last sample, which the whole read refuses); every error
 * names the file. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/data/audio.h"
#include "core/data/audio_stream.h"
#include "test/fuzz/fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_scratch("audio_stream");
    return 0;
}

static volatile float sink;

/* Reads the whole stream in blocks into a new array: its length in *n, NULL on an error. */
static float *drain(audio_stream *st, const char *path, size_t block, size_t *n)
{
    float *x = NULL;
    size_t got = 0, cap = 0;
    esp_err err;
    for (;;) {
        if (got + block > cap) { /* doubling: a block of one sample must not make the run quadratic */
            cap = 2 * (got + block);
            x = realloc(x, cap * sizeof *x);
        }
        long r = audio_stream_read(st, x + got, block, &err);
        if (r < 0) {
            if (!strstr(err.msg, path)) abort();
            free(x);
            return NULL;
        }
        got += (size_t)r;
        if ((size_t)r < block) break;
    }
    *n = got;
    return x;
}

/* Opens and drains; NULL when either fails (the error must name the file). */
static float *stream_all(const char *path, int fs, int resample, double start, double end, size_t block, size_t *n)
{
    esp_err err;
    audio_stream *st = audio_stream_open(path, fs, "model.frontend_conf.fs", resample, start, end, &err);
    if (!st) {
        if (!strstr(err.msg, path)) abort();
        return NULL;
    }
    float *x = drain(st, path, block, n);
    audio_stream_close(st);
    return x;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("long.wav", data, size);
    size_t block = 1 + size % 1000, n, ns;
    float *ref, *x;
    int fs;
    esp_err err;
    if (audio_read_fs(path, 0, "model.frontend_conf.fs", &ref, &n, &fs, &err) != 0) {
        if (!strstr(err.msg, path)) abort();
        x = stream_all(path, 16000, 1, 0, 0, block, &ns); /* at the 16 kHz a decoder asks for */
        free(x);
        return 0;
    }
    x = stream_all(path, fs, 0, 0, 0, block, &ns);
    if (!x || ns != n || (n && memcmp(x, ref, n * sizeof *x) != 0)) abort();
    free(x);
    /* A span (the second tenth of the file): a seek, then the same samples as the whole read's. */
    double secs = (double)n / fs;
    if (n >= 20 && (x = stream_all(path, fs, 0, 0.1 * secs, 0.2 * secs, block, &ns))) {
        float acc = 0;
        for (size_t i = 0; i < ns; i++) acc += x[i];
        sink = acc;
        free(x);
    }
    /* Resampled to 16 kHz as a stream: ASan sees every sample. */
    if (fs != 16000 && (x = stream_all(path, 16000, 1, 0, 0, block, &ns))) {
        float acc = 0;
        for (size_t i = 0; i < ns; i++) acc += x[i];
        sink = acc;
        free(x);
    }
    free(ref);
    return 0;
}
