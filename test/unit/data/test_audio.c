/* Hostile and damaged audio files (found by test/fuzz/fuzz_audio.c or asked for by issue 16): every
 * one is an error naming the file, never a short read, a crash or a huge allocation. */
#include <criterion/criterion.h>
#include <sndfile.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/fsio.h"
#include "core/data/audio.h"
#include "test/unit/test_util.h"

static char dir[64];

static void setup(void) { test_tmpdir_make(dir, sizeof dir, "audio"); }
static void teardown(void) { test_tmpdir_remove(dir); }
TestSuite(audio, .init = setup, .fini = teardown);

/* A mono 16 kHz file of n samples; returns its path (test_path buffer). */
static const char *write_audio(const char *name, int format, int n)
{
    const char *path = test_path(dir, name);
    SF_INFO info = {.samplerate = 16000, .channels = 1, .format = format};
    SNDFILE *sf = sf_open(path, SFM_WRITE, &info);
    cr_assert_not_null(sf, "%s", sf_strerror(NULL));
    short *x = calloc((size_t)n, sizeof *x);
    for (int i = 0; i < n; i++) x[i] = (short)(i * 97 % 20000 - 10000);
    cr_assert_eq(sf_write_short(sf, x, n), n);
    free(x);
    sf_close(sf);
    return path;
}

static size_t file_size(const char *path)
{
    FILE *fp = fopen(path, "rb");
    cr_assert_not_null(fp);
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fclose(fp);
    return (size_t)n;
}

static void patch(const char *path, long off, const void *bytes, size_t n)
{
    FILE *fp = fopen(path, "r+b");
    cr_assert_not_null(fp);
    cr_assert_eq(fseek(fp, off, SEEK_SET), 0);
    cr_assert_eq(fwrite(bytes, 1, n, fp), n);
    fclose(fp);
}

static void expect_error(const char *path, const char *want)
{
    float *x = (float *)1;
    size_t n = 1;
    esp_err err = {{0}};
    cr_assert_eq(audio_read(path, 16000, "model.frontend_conf.fs", &x, &n, &err), -1, "read %s", path);
    cr_assert_null(x);
    cr_assert_eq(n, 0);
    cr_assert(strstr(err.msg, path), "the error names the file: %s", err.msg);
    cr_assert(strstr(err.msg, want), "%s", err.msg);
    cr_assert_null(strchr(err.msg, '\n'), "one line: %s", err.msg);
}

/* libsndfile reads a WAV whose data chunk runs past the end of the file as the shorter file,
 * silently; a copy cut short must be an error. */
Test(audio, wav_shorter_than_its_header_is_an_error)
{
    const char *path = write_audio("cut.wav", SF_FORMAT_WAV | SF_FORMAT_PCM_16, 1600);
    size_t full = file_size(path);
    cr_assert_eq(truncate(path, (off_t)(full - 1000)), 0);
    expect_error(path, "truncated WAV: the header declares 3200 bytes of audio data, the file holds 2200");
}

/* The sizes streaming writers leave (0xffffffff, 0) mean "to the end of the file". */
Test(audio, wav_with_a_streaming_data_size_is_read_to_the_end)
{
    const char *path = write_audio("stream.wav", SF_FORMAT_WAV | SF_FORMAT_PCM_16, 1600);
    size_t full = file_size(path);
    patch(path, (long)full - 3200 - 4, "\xff\xff\xff\xff", 4);
    float *x;
    size_t n;
    esp_err err;
    cr_assert_eq(audio_read(path, 16000, NULL, &x, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 1600);
    free(x);
}

Test(audio, flac_shorter_than_its_header_is_an_error)
{
    const char *path = write_audio("cut.flac", SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 8000);
    size_t full = file_size(path);
    cr_assert_eq(truncate(path, (off_t)(full / 2)), 0);
    expect_error(path, "truncated or corrupt audio: the header promises 8000 samples");
}

/* STREAMINFO's 36-bit sample count set to 2^36 - 1 over a few hundred bytes of data: reading must
 * not allocate for the claim (it was one xmalloc of 256 GiB, an abort) and must fail. */
Test(audio, flac_claiming_2_to_the_36_samples_allocates_nothing_for_it)
{
    const char *path = write_audio("huge.flac", SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 400);
    size_t len;
    esp_err err;
    unsigned char *b = (unsigned char *)read_file(path, READ_LIST, &len, &err);
    cr_assert_not_null(b, "%s", err.msg);
    cr_assert(len > 26 && !memcmp(b, "fLaC", 4));
    /* Bytes 18..25: sample rate (20 bits), channels - 1 (3), bits - 1 (5), total samples (36). */
    b[21] |= 0x0f;
    memset(b + 22, 0xff, 4);
    patch(path, 21, b + 21, 5);
    free(b);
    expect_error(path, "the header promises 68719476735 samples, 400 could be decoded");
}

/* A 16 kHz mono WAV of 100 samples with a LIST INFO chunk before its data holding one ISFT entry
 * that claims entry_len bytes (its 8 bytes of text there all the same). */
static const char *write_wav_with_list(const char *name, uint32_t entry_len)
{
    unsigned char b[12 + 24 + 28 + 8 + 200];
    size_t k = 0;
#define PUT(s, n) (memcpy(b + k, s, n), k += n)
#define PUT32(v) (b[k] = (unsigned char)(v), b[k + 1] = (unsigned char)((v) >> 8), \
                  b[k + 2] = (unsigned char)((v) >> 16), b[k + 3] = (unsigned char)((v) >> 24), k += 4)
    PUT("RIFF", 4), PUT32(4 + 8 + 16 + 8 + 20 + 8 + 200), PUT("WAVE", 4);
    PUT("fmt ", 4), PUT32(16), PUT("\x01\x00\x01\x00\x80\x3e\x00\x00\x00\x7d\x00\x00\x02\x00\x10\x00", 16);
    PUT("LIST", 4), PUT32(20), PUT("INFO", 4), PUT("ISFT", 4), PUT32(entry_len), PUT("espnet3\0", 8);
    PUT("data", 4), PUT32(200);
    memset(b + k, 0x11, 200), k += 200;
#undef PUT
#undef PUT32
    const char *path = test_path(dir, name);
    FILE *fp = fopen(path, "wb");
    cr_assert_not_null(fp);
    cr_assert_eq(fwrite(b, 1, k, fp), k);
    fclose(fp);
    return path;
}

/* What fuzz_audio found as a 13 s timeout, minimized (the seed test/fuzz/seeds/audio/
 * list_entry_loop.wav): a LIST chunk whose entries claim 2^32 - 1 and 2^32 - 17 bytes, which
 * libsndfile's list parser adds to a 32-bit count that wraps, and it never returns. It is an error
 * naming the file, before libsndfile sees it; a LIST chunk with a sane entry reads. */
Test(audio, a_list_entry_of_4_gib_is_an_error_not_a_hang)
{
    float *x;
    size_t n;
    esp_err err;
    cr_assert_eq(audio_read(write_wav_with_list("info.wav", 8), 16000, NULL, &x, &n, &err), 0, "%s", err.msg);
    cr_expect_eq(n, 100);
    free(x);
    char *path = path_join(test_root_dir(), "test/fuzz/seeds/audio/list_entry_loop.wav");
    expect_error(path, "malformed WAV: entry '?' of its LIST chunk at byte 20 claims 4294967295 bytes");
    free(path);
}

/* Two data chunks (fuzz_audio: libsndfile read the file by its second and a pipe of the same bytes
 * by its first, so the two disagreed on the samples): an error naming the file, on both. The
 * chunks after data that a WAV may hold (the seed chunks_after_data.wav) still read. */
Test(audio, a_second_data_chunk_is_an_error)
{
    char *path = path_join(test_root_dir(), "test/fuzz/seeds/audio/two_data_chunks.wav");
    expect_error(path, "malformed WAV: a second 'data' chunk at byte 144");
    free(path);
}
