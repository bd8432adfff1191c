/* audio_stream: a file read in blocks of any size gives audio_read's samples exactly, a span gives
 * audio_read_span's, another rate is refused or (resample on) converted as audio_read_resampled
 * converts the whole file, and broken files fail as audio_read fails, naming the file; a pipe gives
 * the file's samples. */
#include <criterion/criterion.h>
#include <math.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/data/audio.h"
#include "core/data/audio_stream.h"
#include "test/unit/test_util.h"

static char dir[64];

static void setup(void) { test_tmpdir_make(dir, sizeof dir, "astream"); }
static void teardown(void) { test_tmpdir_remove(dir); }
TestSuite(audio_stream, .init = setup, .fini = teardown);

/* n frames of a test signal in `format` (16-bit), each sample repeated on `channels` channels. */
static const char *write_audio(const char *name, int fs, int n, int format, int channels)
{
    const char *path = test_path(dir, name);
    SF_INFO info = {.samplerate = fs, .channels = channels, .format = format | SF_FORMAT_PCM_16};
    SNDFILE *sf = sf_open(path, SFM_WRITE, &info);
    cr_assert_not_null(sf);
    short *s = malloc((size_t)n * channels * sizeof *s);
    for (int i = 0; i < n * channels; i++)
        s[i] = (short)(9000 * sin(2 * M_PI * 300 * (i / channels) / fs) +
                       3000 * sin(0.001 * (i / channels) * (double)(i / channels) / fs));
    cr_assert_eq(sf_writef_short(sf, s, n), n);
    sf_close(sf);
    free(s);
    return path;
}

static const char *write_wav(const char *name, int fs, int n) { return write_audio(name, fs, n, SF_FORMAT_WAV, 1); }

/* Every sample of the stream, read in blocks of `block`. */
static float *read_all(audio_stream *st, size_t block, size_t *n)
{
    float *x = NULL;
    size_t got = 0;
    esp_err err;
    for (;;) {
        x = realloc(x, (got + block) * sizeof *x);
        long r = audio_stream_read(st, x + got, block, &err);
        cr_assert_geq(r, 0, "%s", err.msg);
        got += (size_t)r;
        if ((size_t)r < block) break;
    }
    cr_assert_eq(audio_stream_read(st, x, block, &err), 0, "nothing after the end");
    *n = got;
    return x;
}

Test(audio_stream, blocks_of_any_size_are_the_whole_read)
{
    const char *path = write_wav("a.wav", 16000, 50001);
    float *ref;
    size_t nref;
    esp_err err;
    cr_assert_eq(audio_read(path, 16000, "fs", &ref, &nref, &err), 0, "%s", err.msg);
    static const size_t blocks[] = {1, 999, 8192, 50001, 100000};
    for (size_t b = 0; b < sizeof blocks / sizeof *blocks; b++) {
        audio_stream *st = audio_stream_open(path, 16000, "fs", 0, 0, 0, &err);
        cr_assert_not_null(st, "%s", err.msg);
        cr_assert_float_eq(audio_stream_seconds(st), 50001 / 16000.0, 1e-12);
        size_t n;
        float *x = read_all(st, blocks[b], &n);
        cr_assert_eq(n, nref, "block %zu: %zu samples, the whole read %zu", blocks[b], n, nref);
        cr_assert_eq(memcmp(x, ref, n * sizeof *x), 0, "block %zu: other samples", blocks[b]);
        free(x);
        audio_stream_close(st);
    }
    free(ref);
}

Test(audio_stream, a_span_is_read_span)
{
    const char *path = write_wav("a.wav", 16000, 48000);
    static const double spans[][2] = {{0.5, 2.1}, {0, 1.0}, {2.25, 3.05}, {1.0, 1e300}};
    for (size_t k = 0; k < sizeof spans / sizeof *spans; k++) {
        float *ref, *x;
        size_t nref, n;
        esp_err err;
        cr_assert_eq(audio_read_span(path, 16000, "fs", 0, spans[k][0], spans[k][1], &ref, &nref, &err), 0, "%s", err.msg);
        audio_stream *st = audio_stream_open(path, 16000, "fs", 0, spans[k][0], spans[k][1], &err);
        cr_assert_not_null(st, "%s", err.msg);
        cr_assert_float_eq(audio_stream_seconds(st), nref / 16000.0, 1e-12);
        x = read_all(st, 1000, &n);
        cr_assert_eq(n, nref, "span %zu: %zu samples, read_span %zu", k, n, nref);
        cr_assert_eq(memcmp(x, ref, n * sizeof *x), 0);
        free(x), free(ref);
        audio_stream_close(st);
    }
}

Test(audio_stream, another_rate_is_refused_or_resampled_as_the_whole_file)
{
    const char *path = write_wav("8k.wav", 8000, 24000);
    esp_err err;
    cr_assert_null(audio_stream_open(path, 16000, "model.frontend_conf.fs", 0, 0, 0, &err));
    cr_assert(strstr(err.msg, path) && strstr(err.msg, "8000 Hz") && strstr(err.msg, "dataset.resample"), "%s", err.msg);
    float *ref, *x;
    size_t nref, n;
    cr_assert_eq(audio_read_resampled(path, 16000, "fs", 1, &ref, &nref, &err), 0, "%s", err.msg);
    audio_stream *st = audio_stream_open(path, 16000, "fs", 1, 0, 0, &err);
    cr_assert_not_null(st, "%s", err.msg);
    x = read_all(st, 3001, &n);
    audio_stream_close(st);
    /* The converter run as a stream is the one src_simple runs over the whole file. */
    cr_assert_eq(n, nref, "%zu samples streamed, %zu whole", n, nref);
    long bad;
    double e = test_err_abs_ff(x, ref, n, &bad);
    cr_assert_leq(e, 1e-6, "max |diff| %g at %ld", e, bad);
    free(x), free(ref);
}

Test(audio_stream, broken_files_and_spans_fail_naming_the_file)
{
    const char *path = write_wav("a.wav", 16000, 16000);
    esp_err err;
    cr_assert_null(audio_stream_open(path, 16000, "fs", 0, 0.5, 2.0, &err));
    cr_assert(strstr(err.msg, path) && strstr(err.msg, "runs past the end"), "%s", err.msg);
    cr_assert_null(audio_stream_open(path, 16000, "fs", 0, 1.02, 1.05, &err));
    cr_assert(strstr(err.msg, path) && strstr(err.msg, "holds no samples"), "%s", err.msg);
    cr_assert_null(audio_stream_open(test_path(dir, "none.wav"), 16000, "fs", 0, 0, 0, &err));
    cr_assert(strstr(err.msg, "none.wav"), "%s", err.msg);
    /* A WAV cut short: its data chunk declares more than the file holds. */
    cr_assert_eq(test_sh("head -c 20000 '%s' > '%s/cut.wav'", path, dir), 0);
    cr_assert_null(audio_stream_open(test_path(dir, "cut.wav"), 16000, "fs", 0, 0, 0, &err));
    cr_assert(strstr(err.msg, "cut.wav") && strstr(err.msg, "truncated"), "%s", err.msg);
}

/* A file read through its descriptor as from a pipe (never seeking): cmd's output on a pipe. */
static audio_stream *open_piped(const char *cmd, int fs, FILE **pp, esp_err *err)
{
    *pp = popen(cmd, "r");
    cr_assert_not_null(*pp, "%s", cmd);
    return audio_stream_open_fd(fileno(*pp), "<stdin>", fs, err);
}

/* WAV and FLAC through a pipe give the file's samples, in blocks of any size, resampled as the file
 * is; the samples read to decide put back come first; broken input fails in one line naming the
 * stream (nothing, not audio, a WAV cut short, stereo). */
Test(audio_stream, a_pipe_is_read_front_to_back)
{
    const char *wav = write_wav("a.wav", 22050, 30000), *flac = write_audio("a.flac", 22050, 30000, SF_FORMAT_FLAC, 1),
               *stereo = write_audio("st.wav", 22050, 3000, SF_FORMAT_WAV, 2);
    char *loop = path_join(test_root_dir(), "test/fuzz/seeds/audio/list_entry_loop.wav"),
         *spin = path_join(test_root_dir(), "test/fuzz/seeds/audio/pipe_parse_without_reads.wav");
    esp_err err;
    size_t n, nf, np;
    FILE *pp;
    audio_stream *st = audio_stream_open(wav, 22050, "fs", 0, 0, 0, &err);
    cr_assert_not_null(st, "%s", err.msg);
    float *want = read_all(st, 4096, &n);
    audio_stream_close(st);
    const char *files[] = {wav, flac};
    for (int k = 0; k < 2; k++) {
        char *cmd = xasprintf("cat '%s'", files[k]);
        st = open_piped(cmd, 22050, &pp, &err);
        cr_assert_not_null(st, "%s: %s", files[k], err.msg);
        cr_expect_eq(audio_stream_seconds(st), 30000.0 / 22050, "the header's length");
        float *got = read_all(st, 1 + 777 * (size_t)k, &np);
        cr_expect(np == n && !memcmp(got, want, n * sizeof *got), "%s piped: %zu samples, %zu from the file", files[k],
                  np, n);
        audio_stream_close(st), pclose(pp), free(got), free(cmd);
    }
    /* resampled to 16 kHz as the file is; a head read and put back comes first */
    st = audio_stream_open(wav, 16000, "fs", 1, 0, 0, &err);
    free(want);
    want = read_all(st, 4096, &n);
    audio_stream_close(st);
    char *cmd = xasprintf("cat '%s'", wav);
    st = open_piped(cmd, 16000, &pp, &err);
    float *head = malloc(1000 * sizeof *head);
    cr_assert_eq(audio_stream_read(st, head, 1000, &err), 1000);
    audio_stream_unread(st, head, 1000);
    float *got = read_all(st, 4096, &nf);
    cr_expect(nf == n && !memcmp(got, want, n * sizeof *got), "resampled piped: %zu samples, %zu from the file", nf,
              n);
    audio_stream_close(st), pclose(pp), free(got), free(want), free(cmd);
    /* broken input */
    const char *bad[][2] = {{"true", "no audio (0 bytes)"},
                            {"echo not audio", "cannot read audio"},
                            {"head -c 20000 '%s'", "truncated or corrupt audio"},
                            {"cat '%s'", "2 channels"},
                            /* chunks past the end: libsndfile's parse stops at the end, not at memory's */
                            {"printf 'RIFFH\\001\\000\\000WAVELIST I\\020'", "No 'data' chunk"},
                            {"(printf 'RIFF\\377\\377\\377\\177WAVEjunk\\160\\021\\001\\000'; head -c 70000 /dev/zero | tr '\\0' A; "
                             "printf 'LIST I\\020')", "No 'data' chunk"},
                            /* a LIST entry libsndfile's parser would loop on for ever (test_audio.c) */
                            {"cat '%s'", "malformed WAV: entry '?' of its LIST chunk"},
                            /* a LIST of 4 GiB: the parse spun on its header buffer without a read */
                            {"cat '%s'", "No 'data' chunk"}};
    for (int k = 0; k < 8; k++) {
        cmd = xasprintf(bad[k][0], k == 3 ? stereo : k == 6 ? loop : k == 7 ? spin : wav);
        st = open_piped(cmd, 22050, &pp, &err);
        if (st) {
            float *x = malloc(40000 * sizeof *x);
            cr_expect_lt(audio_stream_read(st, x, 40000, &err), 0, "%s: read", cmd);
            audio_stream_close(st), free(x);
        }
        cr_expect(!strncmp(err.msg, "<stdin>: ", 9) && strstr(err.msg, bad[k][1]) && !strchr(err.msg, '\n'), "%s: %s",
                  cmd, err.msg);
        pclose(pp), free(cmd);
    }
    free(loop), free(spin);
}
