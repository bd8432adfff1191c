/* The PCM reader of `espnet3 transcribe --stream` (core/data/pcm_stream.h): a WAV header's parts
 * split anywhere, a pipe writer's data size (0xFFFFFFFF) after an odd-sized chunk, raw samples
 * that begin like "RIFF" but are not, and the errors. */
#include <criterion/criterion.h>
#include <string.h>

#include "core/data/pcm_stream.h"

/* A WAV as a writer that cannot seek leaves it: a LIST chunk of 3 bytes (padded), data of unknown
 * size holding 1, 32767, -32768, 0x1234. */
static const unsigned char piped[] = {'R', 'I', 'F', 'F', 0xFF, 0xFF, 0xFF, 0xFF, 'W', 'A', 'V', 'E', 'f', 'm', 't', ' ',
                                      16, 0, 0, 0, 1, 0, 1, 0, 0x40, 0x1F, 0, 0, 0x80, 0x3E, 0, 0, 2, 0, 16, 0,
                                      'L', 'I', 'S', 'T', 3, 0, 0, 0, 'a', 'b', 'c', 0, 'd', 'a', 't', 'a', 0xFF, 0xFF,
                                      0xFF, 0xFF, 1, 0, 0xFF, 0x7F, 0, 0x80, 0x34, 0x12};

/* Feeds bytes in pieces of `piece`; returns the samples (or -1 with err). */
static long feed(const unsigned char *b, size_t n, size_t piece, float *x, pcm_stream *p, esp_err *err)
{
    pcm_stream_init(p, 16000, "in.wav");
    size_t got = 0, k;
    for (size_t at = 0; at < n; at += piece) {
        size_t m = piece < n - at ? piece : n - at;
        if (pcm_stream_feed(p, b + at, m, x + got, &k, err) != 0) return -1;
        got += k;
    }
    if (pcm_stream_end(p, x + got, &k, err) != 0) return -1;
    return (long)(got + k);
}

Test(pcm_stream, a_piped_wav_in_any_pieces)
{
    const float want[4] = {1 / 32768.0f, 32767 / 32768.0f, -1.0f, 0x1234 / 32768.0f};
    for (size_t piece = 1; piece <= sizeof piped; piece++) {
        float x[64];
        pcm_stream p;
        esp_err err;
        cr_assert_eq(feed(piped, sizeof piped, piece, x, &p, &err), 4, "pieces of %zu: %s", piece, err.msg);
        cr_expect_arr_eq(x, want, sizeof want, "pieces of %zu", piece);
        cr_expect_eq(pcm_stream_rate(&p), 8000);
    }
}

Test(pcm_stream, raw_samples_and_errors)
{
    float x[64];
    pcm_stream p;
    esp_err err;
    /* "RI" then not "FF": raw samples at the caller's rate, the held-back bytes included. */
    const unsigned char raw[] = {'R', 'I', 0, 0, 7};
    cr_assert_eq(feed(raw, sizeof raw, 1, x, &p, &err), 2, "%s", err.msg);
    cr_expect_eq(x[0], (float)('R' | 'I' << 8) / 32768.0f);
    cr_expect_eq(pcm_stream_rate(&p), 16000);
    cr_assert_eq(feed(raw, 2, 2, x, &p, &err), 1, "two bytes that could begin RIFF, then the end: a sample");
    unsigned char bad[sizeof piped];
    memcpy(bad, piped, sizeof bad);
    bad[22] = 2; /* channels */
    cr_expect_eq(feed(bad, sizeof bad, 5, x, &p, &err), -1);
    cr_expect_str_eq(err.msg, "in.wav: WAV has more than one channel (give 16-bit mono PCM: a WAV, or raw samples)");
    cr_expect_eq(feed(piped, 40, 40, x, &p, &err), -1);
    cr_expect(strstr(err.msg, "ended inside its WAV header") != NULL, "%s", err.msg);
    memcpy(bad, piped, sizeof bad);
    bad[34] = 24; /* bits */
    cr_expect_eq(feed(bad, sizeof bad, 64, x, &p, &err), -1);
    cr_expect(strstr(err.msg, "not 16-bit") != NULL, "%s", err.msg);
}
