/* libFuzzer target for the PCM reader of `espnet3 transcribe --stream` (core/data/pcm_stream.h):
 * bytes fed whole and in pieces of sizes drawn from the input. The samples (and the error or not)
 * do not depend on the pieces; an error names the input; every sample is in [-1, 1). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/data/pcm_stream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Feeds data in pieces of 1 + (piece_seed >> k) % 97 bytes (piece_seed 0: whole); the samples into
 * a new array (*n of them), NULL on an error. */
static float *read_all(const uint8_t *data, size_t size, unsigned piece_seed, size_t *n)
{
    pcm_stream p;
    pcm_stream_init(&p, 16000, "<fuzz>");
    float *x = malloc((size / 2 + 4) * sizeof *x);
    size_t got = 0, at = 0, k;
    esp_err err;
    for (int i = 0; at < size; i++) {
        size_t piece = piece_seed ? 1 + ((piece_seed >> (i % 24)) + (unsigned)i) % 97 : size;
        if (piece > size - at) piece = size - at;
        if (pcm_stream_feed(&p, data + at, piece, x + got, &k, &err) != 0) {
            if (!strstr(err.msg, "<fuzz>")) abort();
            free(x);
            return NULL;
        }
        got += k, at += piece;
    }
    if (pcm_stream_end(&p, x + got, &k, &err) != 0) {
        if (!strstr(err.msg, "<fuzz>")) abort();
        free(x);
        return NULL;
    }
    got += k;
    if (got > size / 2 + 1) abort();
    for (size_t i = 0; i < got; i++)
        if (!(x[i] >= -1.0f && x[i] < 1.0f)) abort();
    *n = got;
    return x;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n, m;
    float *a = read_all(data, size, 0, &n);
    unsigned seed = size ? data[size - 1] * 2654435761u + 1 : 1;
    float *b = read_all(data, size, seed, &m);
    if (!a != !b || (a && (n != m || (n && memcmp(a, b, n * sizeof *a))))) abort();
    free(a), free(b);
    return 0;
}
