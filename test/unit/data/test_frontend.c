/* Audio reading and the log-mel frontend: parity with ESPnet2's DefaultFrontend (fixtures made
 * by scripts/make_frontend_fixtures.py with torch + librosa), shapes, window, mel matrix, batch
 * padding and the audio errors a user can hit. */
#include <criterion/criterion.h>
#include <math.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/data/audio.h"
#include "core/data/frontend.h"
#include "core/base/fsio.h"
#include "test/unit/test_util.h"

static char tmpdir[64];

static void setup(void)
{
    test_tmpdir_make(tmpdir, sizeof tmpdir, "fe");
    log_set_quiet(1);
}

static void teardown(void) { test_tmpdir_remove(tmpdir); }

TestSuite(frontend, .init = setup, .fini = teardown);

static char *fixture(const char *name)
{
    char *dir = path_join(test_root_dir(), "test/fixtures/frontend");
    char *p = path_join(dir, name);
    free(dir);
    return p;
}

static frontend_opts opts(int n_fft, int win, int hop)
{
    frontend_conf_cfg c = {.n_fft = n_fft, .win_length = win, .hop_length = hop};
    frontend_opts o;
    frontend_opts_from_cfg(&c, &o);
    return o;
}

/* Writes n samples at fs Hz with `ch` channels (interleaved) in the given libsndfile format. */
static char *write_audio(const char *name, int format, int fs, int ch, const float *x, size_t n)
{
    char *path = path_join(tmpdir, name);
    SF_INFO info = {.samplerate = fs, .channels = ch, .format = format};
    SNDFILE *sf = sf_open(path, SFM_WRITE, &info);
    cr_assert_not_null(sf, "%s: %s", path, sf_strerror(NULL));
    cr_assert_eq(sf_writef_float(sf, x, (sf_count_t)n), (sf_count_t)n);
    sf_close(sf);
    return path;
}

static float *tone(size_t n, int fs, double hz, int ch)
{
    float *x = xmalloc(n * (size_t)ch * sizeof *x);
    for (size_t i = 0; i < n; i++)
        for (int c = 0; c < ch; c++) x[i * ch + c] = (float)(0.5 * sin(2 * M_PI * hz * (double)i / fs));
    return x;
}

/* ---- parity with torch/librosa --------------------------------------------------------- */

Test(frontend, parity_with_espnet2_fixtures)
{
    char *index_path = fixture("index.txt");
    esp_err err;
    char *index = read_file(index_path, READ_LIST, NULL, &err);
    cr_assert_not_null(index, "%s", err.msg);
    int cases = 0;
    double worst = 0;
    char *save = NULL;
    for (char *line = strtok_r(index, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char wav[128], f32[128];
        int n_fft, win, hop, n_mels;
        size_t n_samples, frames;
        if (sscanf(line, "logmel %127s %127s %d %d %d %d %zu %zu", wav, f32, &n_fft, &win, &hop, &n_mels,
                   &n_samples, &frames) != 8)
            continue;
        char *wav_path = fixture(wav), *f32_path = fixture(f32);
        float *x;
        size_t n;
        cr_assert_eq(audio_read(wav_path, 16000, "model.frontend_conf.fs", &x, &n, &err), 0, "%s", err.msg);
        cr_assert_eq(n, n_samples);
        size_t len;
        float *ref = (float *)read_file(f32_path, READ_LIST, &len, &err);
        cr_assert_not_null(ref, "%s", err.msg);
        cr_assert_eq(len, frames * (size_t)n_mels * sizeof(float));

        frontend_opts o = opts(n_fft, win, hop);
        cr_assert_eq(o.n_mels, n_mels);
        frontend *f = frontend_new(&o);
        cr_assert_eq(frontend_num_frames(f, n), frames);
        float *out = xmalloc(frames * (size_t)n_mels * sizeof *out);
        frontend_logmel(out, f, x, n);
        double maxdiff = test_err_abs_ff(out, ref, frames * (size_t)n_mels, NULL);
        cr_log_info("frontend parity %s: max abs diff %.3g", f32, maxdiff);
        cr_expect_lt(maxdiff, 1e-3, "%s: max abs diff %g", f32, maxdiff);
        worst = fmax(worst, maxdiff);
        cases++;
        frontend_free(f);
        free(out);
        free(ref);
        free(x);
        free(wav_path);
        free(f32_path);
    }
    cr_assert_eq(cases, 6, "fixture index has %d logmel cases", cases);
    free(index);
    free(index_path);
}

Test(frontend, mel_matrix_matches_librosa_rows)
{
    char *index_path = fixture("index.txt");
    esp_err err;
    char *index = read_file(index_path, READ_LIST, NULL, &err);
    cr_assert_not_null(index, "%s", err.msg);
    frontend_opts o = opts(0, 0, 0);
    float *mel = frontend_mel_matrix(&o);
    const int n_bins = 257;
    int rows = 0;
    char *save = NULL;
    for (char *line = strtok_r(index, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        int n_fft, row, argmax;
        double sum, maxv;
        if (sscanf(line, "melrow %d %d %lf %d %lf", &n_fft, &row, &sum, &argmax, &maxv) != 5) continue;
        const float *r = mel + (size_t)row * n_bins;
        double s = 0;
        int am = 0;
        for (int k = 0; k < n_bins; k++) {
            s += r[k];
            if (r[k] > r[am]) am = k;
        }
        cr_expect_float_eq(s, sum, 1e-6 * sum, "row %d sum %.9g vs %.9g", row, s, sum);
        cr_expect_eq(am, argmax, "row %d", row);
        cr_expect_float_eq(r[am], maxv, 1e-6 * maxv, "row %d max", row);
        rows++;
    }
    cr_assert_eq(rows, 5);
    /* Shape and sparsity: each bin feeds at most two bands, and the top band ends at Nyquist. */
    int nnz = 0;
    for (int i = 0; i < 80 * n_bins; i++) nnz += mel[i] != 0;
    cr_expect(nnz > 400 && nnz <= 2 * n_bins, "nonzeros %d", nnz);
    free(mel);
    free(index);
    free(index_path);
}

/* ---- shapes, window, batch ------------------------------------------------------------- */

Test(frontend, defaults_and_frame_count)
{
    frontend_opts o;
    frontend_opts_from_cfg(NULL, &o);
    cr_assert_eq(o.fs, 16000);
    cr_assert_eq(o.n_fft, 512);
    cr_assert_eq(o.win_length, 512);
    cr_assert_eq(o.hop_length, 128);
    cr_assert_eq(o.n_mels, 80);
    cr_assert_float_eq(o.fmin, 0, 0);
    cr_assert_float_eq(o.fmax, 8000, 0);
    frontend_opts r = opts(512, 400, 160);
    cr_assert_eq(r.win_length, 400);
    frontend *f = frontend_new(&r);
    cr_assert_eq(frontend_min_samples(f), 257);
    cr_assert_eq(frontend_num_frames(f, 16000), 101);
    cr_assert_eq(frontend_num_frames(f, 16159), 101);
    cr_assert_eq(frontend_num_frames(f, 16160), 102);
    cr_assert_eq(frontend_num_frames(f, 257), 2);
    /* The shortest input works and gives finite values. */
    float *x = tone(257, 16000, 440, 1), out[2 * 80];
    frontend_logmel(out, f, x, 257);
    for (int i = 0; i < 160; i++) cr_assert(isfinite(out[i]));
    free(x);
    frontend_free(f);
}

Test(frontend, opts_check_names_keys)
{
    esp_err err;
    frontend_opts o = opts(512, 600, 160);
    cr_assert_eq(frontend_opts_check(&o, &err), -1);
    cr_assert(strstr(err.msg, "model.frontend_conf.win_length"), "%s", err.msg);
    o = opts(511, 0, 0);
    cr_assert_eq(frontend_opts_check(&o, &err), -1);
    cr_assert(strstr(err.msg, "model.frontend_conf.n_fft"), "%s", err.msg);
    o = opts(512, 400, 160);
    o.fmax = 9000;
    cr_assert_eq(frontend_opts_check(&o, &err), -1);
    cr_assert(strstr(err.msg, "model.frontend_conf.fmax"), "%s", err.msg);
    o = opts(512, 400, 160);
    cr_assert_eq(frontend_opts_check(&o, &err), 0);
}

Test(frontend, window_is_periodic_hann_centred)
{
    frontend_opts o = opts(512, 400, 160);
    float *w = frontend_window(&o);
    for (int k = 0; k < 56; k++) cr_assert_eq(w[k], 0.0f);
    for (int k = 456; k < 512; k++) cr_assert_eq(w[k], 0.0f);
    cr_assert_eq(w[56], 0.0f);            /* periodic: starts at 0 ... */
    cr_assert_float_eq(w[56 + 200], 1.0f, 1e-7); /* ... peaks at win/2 ... */
    for (int k = 1; k < 400; k++)         /* ... and is symmetric about it */
        cr_assert_float_eq(w[56 + k], w[56 + 400 - k], 1e-6, "k=%d", k);
    cr_assert_float_eq(w[56 + 100], 0.5f, 1e-6);
    free(w);
}

Test(frontend, batch_zeroes_padding_and_matches_single)
{
    frontend_opts o = opts(512, 400, 160);
    frontend *f = frontend_new(&o);
    size_t n[3] = {16000, 4000, 9001};
    float *x[3];
    for (int b = 0; b < 3; b++) x[b] = tone(n[b], 16000, 300.0 * (b + 1), 1);
    size_t T_max = frontend_num_frames(f, 16000), lens[3];
    float *out = xmalloc(3 * T_max * 80 * sizeof *out);
    for (size_t i = 0; i < 3 * T_max * 80; i++) out[i] = NAN;
    frontend_logmel_batch(out, lens, f, (const float *const *)x, n, 3);
    for (int b = 0; b < 3; b++) {
        cr_assert_eq(lens[b], n[b] / 160 + 1);
        float *single = xmalloc(lens[b] * 80 * sizeof *single);
        frontend_logmel(single, f, x[b], n[b]);
        const float *ob = out + (size_t)b * T_max * 80;
        cr_assert_eq(memcmp(ob, single, lens[b] * 80 * sizeof *single), 0, "utterance %d", b);
        for (size_t i = lens[b] * 80; i < T_max * 80; i++) cr_assert_eq(ob[i], 0.0f, "utt %d value %zu", b, i);
        free(single);
        free(x[b]);
    }
    free(out);
    frontend_free(f);
}

/* ---- audio ----------------------------------------------------------------------------- */

Test(frontend, audio_rate_mismatch_names_file_rates_and_key)
{
    float *x = tone(2205, 22050, 440, 1);
    char *p = write_audio("fast.wav", SF_FORMAT_WAV | SF_FORMAT_PCM_16, 22050, 1, x, 2205);
    float *y = NULL;
    size_t n = 0;
    esp_err err;
    cr_assert_eq(audio_read(p, 16000, "model.frontend_conf.fs", &y, &n, &err), -1);
    cr_assert_null(y);
    cr_assert(strstr(err.msg, p), "%s", err.msg);
    cr_assert(strstr(err.msg, "sample rate 22050 Hz, but model.frontend_conf.fs is 16000 (resample the audio, "
                              "set dataset.resample: true, or set model.frontend_conf.fs)"), "%s", err.msg);
    /* dataset.resample: the same file comes back at 16 kHz (22050 -> 16000 samples' worth). */
    size_t n16 = 0;
    cr_assert_eq(audio_read_resampled(p, 16000, "model.frontend_conf.fs", 1, &y, &n16, &err), 0, "%s", err.msg);
    cr_assert_not_null(y);
    cr_assert(n16 >= 1599 && n16 <= 1601, "%zu samples", n16);
    /* a 440 Hz tone stays a 440 Hz tone: count sign changes over the middle 0.05 s */
    int crossings = 0;
    for (size_t i = 401; i < 1201; i++) crossings += (y[i - 1] < 0) != (y[i] < 0);
    cr_assert(crossings >= 42 && crossings <= 46, "%d zero crossings", crossings);
    free(y);
    y = NULL;
    cr_assert_eq(audio_read_resampled(p, 16000, "model.frontend_conf.fs", 0, &y, &n16, &err), -1);
    /* expected_fs <= 0 takes any rate. */
    int fs = 0;
    cr_assert_eq(audio_read_fs(p, 0, NULL, &y, &n, &fs, &err), 0, "%s", err.msg);
    cr_assert_eq(fs, 22050);
    cr_assert_eq(n, 2205);
    free(y);
    free(x);
    free(p);
}

Test(frontend, audio_multichannel_is_an_error)
{
    float *x = tone(1600, 16000, 440, 2);
    char *p = write_audio("stereo.wav", SF_FORMAT_WAV | SF_FORMAT_PCM_16, 16000, 2, x, 1600);
    float *y = NULL;
    size_t n;
    esp_err err;
    cr_assert_eq(audio_read(p, 16000, "model.frontend_conf.fs", &y, &n, &err), -1);
    cr_assert(strstr(err.msg, p), "%s", err.msg);
    cr_assert(strstr(err.msg, "2 channels"), "%s", err.msg);
    free(x);
    free(p);
}

Test(frontend, audio_missing_file)
{
    float *y;
    size_t n;
    esp_err err;
    cr_assert_eq(audio_read("/nonexistent/a.wav", 16000, "fs", &y, &n, &err), -1);
    cr_assert(strstr(err.msg, "/nonexistent/a.wav"), "%s", err.msg);
}

/* int16 samples k come back as k / 32768 exactly, from WAV and FLAC; float WAV unchanged. */
Test(frontend, audio_pcm16_flac_and_float)
{
    const size_t n = 3000;
    short *pcm = xmalloc(n * sizeof *pcm);
    float *x = xmalloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) {
        pcm[i] = (short)((int)(i * 37 % 65536) - 32768);
        x[i] = (float)pcm[i] / 32768.0f;
    }
    const struct { const char *name; int format; } cases[] = {
        {"a.wav", SF_FORMAT_WAV | SF_FORMAT_PCM_16},
        {"a.flac", SF_FORMAT_FLAC | SF_FORMAT_PCM_16},
        {"f.wav", SF_FORMAT_WAV | SF_FORMAT_FLOAT},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char *p = path_join(tmpdir, cases[c].name);
        SF_INFO info = {.samplerate = 16000, .channels = 1, .format = cases[c].format};
        SNDFILE *sf = sf_open(p, SFM_WRITE, &info);
        cr_assert_not_null(sf, "%s: %s", p, sf_strerror(NULL));
        /* libsndfile scales float writes to PCM by 32767, so PCM files get the int16 values. */
        sf_count_t wrote = (cases[c].format & SF_FORMAT_SUBMASK) == SF_FORMAT_FLOAT
                               ? sf_writef_float(sf, x, (sf_count_t)n)
                               : sf_writef_short(sf, pcm, (sf_count_t)n);
        cr_assert_eq(wrote, (sf_count_t)n);
        sf_close(sf);
        float *y;
        size_t m;
        esp_err err;
        cr_assert_eq(audio_read(p, 16000, "model.frontend_conf.fs", &y, &m, &err), 0, "%s", err.msg);
        cr_assert_eq(m, n, "%s", cases[c].name);
        for (size_t i = 0; i < n; i++) cr_assert_eq(y[i], x[i], "%s sample %zu: %g vs %g", cases[c].name, i, y[i], x[i]);
        free(y);
        free(p);
    }
    /* Float files keep values beyond [-1, 1] (soundfile does not clip them either). */
    float big[4] = {1.5f, -2.0f, 0.25f, 0};
    char *p = write_audio("big.wav", SF_FORMAT_WAV | SF_FORMAT_FLOAT, 16000, 1, big, 4);
    float *y;
    size_t m;
    esp_err err;
    cr_assert_eq(audio_read(p, 16000, "fs", &y, &m, &err), 0, "%s", err.msg);
    cr_assert_eq(m, 4);
    cr_assert_eq(y[0], 1.5f);
    cr_assert_eq(y[1], -2.0f);
    free(y);
    free(p);
    free(x);
    free(pcm);
}
