/* libFuzzer target for the audio layer (WAV, FLAC and whatever else libsndfile opens): bytes ->
 * audio_read_fs at any rate, and the same bytes from memory (audio_read_memory: libsndfile's
 * virtual I/O, what `espnet3 transcribe -` reads from a pipe), which must agree with the file:
 * both accept or both refuse, and accepted audio has the same rate and samples. Accepted audio is
 * mono, has a positive rate, and finite samples in [-1, 1] for integer PCM (float files may hold
 * anything libsndfile decodes). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/data/audio.h"
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("utt1.wav", data, size);
    float *x;
    size_t n;
    int fs;
    esp_err err;
    float *y;
    size_t ny;
    int fy;
    esp_err merr;
    int mem_rc = audio_read_memory(data, size, "<stdin>", &y, &ny, &fy, &merr);
    if (mem_rc != 0 && strncmp(merr.msg, "<stdin>: ", 9)) abort(); /* its errors name the stream */
    if (audio_read_fs(path, 0, "model.frontend_conf.fs", &x, &n, &fs, &err) != 0) {
        if (!strstr(err.msg, path)) abort(); /* every error names the file */
        if (mem_rc == 0) abort();
        return 0;
    }
    if (mem_rc != 0 || fy != fs || ny != n || (n && memcmp(x, y, n * sizeof *x))) abort();
    free(y);
    if (fs <= 0) abort();
    float acc = 0;
    for (size_t i = 0; i < n; i++) acc += x[i]; /* ASan sees every sample */
    sink = acc;
    free(x);
    return 0;
}
