/* `espnet3 transcribe` through the binary: every model form decodes to ESPnet's own hypotheses; WAV,
 * FLAC, another rate and standard input; each output format read back for its content; bad input
 * is one error line each. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/data/audio.h"
#include "test/unit/cli/transcribe_fixture.h"
#include "test/unit/test_util.h"

static tr_fixture fx;
static char *out, *err;

static void setup(void) { tr_fixture_make(&fx); }

static void teardown(void)
{
    free(out), free(err);
    out = err = NULL;
    tr_fixture_free(&fx);
}

TestSuite(transcribe, .init = setup, .fini = teardown);

/* Runs `espnet3 transcribe ARGS` in the ESPnet2 model's folder (its config's relative paths), with
 * TMPDIR inside the test's folder; out and err get stdout and stderr. Returns the exit status. */
static int tr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int tr(const char *fmt, ...)
{
    char args[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    free(out), free(err);
    int rc = test_sh("mkdir -p '%s/tmp' && cd '%s' && TMPDIR='%s/tmp' timeout 120 '%s' transcribe %s >'%s/out' 2>'%s/err'",
                     fx.dir, fx.espnet, fx.dir, test_bin_path(), args, fx.dir, fx.dir);
    out = test_slurp(test_path(fx.dir, "out"));
    err = test_slurp(test_path(fx.dir, "err"));
    return rc;
}

/* "<wav>\t<ESPnet's text>" for the three utterances. */
static void expect_espnet_lines(const char *form)
{
    char want[2048] = "";
    for (int i = 0; i < 3; i++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s\t%s\n", fx.wav[i], fx.text[i]);
    cr_expect_str_eq(out, want, "%s:\n%s\nstderr:\n%s", form, out, err);
}

Test(transcribe, every_model_form_decodes_to_espnets_hypotheses)
{
    const char *w = "'%s' '%s' '%s'";
    char wavs[2048];
    snprintf(wavs, sizeof wavs, w, fx.wav[0], fx.wav[1], fx.wav[2]);
    /* the pack's conf/inference.yaml says beam 4, ctc_weight 0.3 */
    cr_assert_eq(tr("-q '%s' %s", fx.pack, wavs), 0, "%s", err);
    expect_espnet_lines("pack folder");
    cr_assert_eq(tr("-q '%s' %s", fx.pack_zip, wavs), 0, "%s", err);
    expect_espnet_lines("pack zip");
    /* the unpacked copy is gone */
    cr_assert_eq(test_sh("test -z \"$(ls -A '%s/tmp')\"", fx.dir), 0, "left in TMPDIR");
    cr_assert_eq(tr("-q --beam 4 --ctc_weight 0.3 '%s' %s", fx.espnet2_zip, wavs), 0, "%s", err);
    expect_espnet_lines("ESPnet2 packed zip");
    cr_assert_eq(tr("-q --beam_size 4 --ctc_weight=0.3 exp/asr_train %s", wavs), 0, "%s", err);
    expect_espnet_lines("experiment folder");
    /* one file: the text alone */
    cr_assert_eq(tr("-q '%s' '%s'", fx.pack, fx.wav[1]), 0, "%s", err);
    char want[128];
    snprintf(want, sizeof want, "%s\n", fx.text[1]);
    cr_expect_str_eq(out, want);
}

/* utt<k> as FLAC (lossless: the same samples) and as 16-bit WAV at 22.05 kHz (resampled back). */
static void write_variants(int k)
{
    float *x;
    size_t n;
    int fs;
    esp_err e;
    cr_assert_eq(audio_read_fs(fx.wav[k], 0, NULL, &x, &n, &fs, &e), 0, "%s", e.msg);
    SF_INFO info = {.samplerate = fs, .channels = 1, .format = SF_FORMAT_FLAC | SF_FORMAT_PCM_16};
    SNDFILE *sf = sf_open(test_path(fx.dir, "a.flac"), SFM_WRITE, &info);
    cr_assert_not_null(sf, "%s", sf_strerror(NULL));
    cr_assert_eq(sf_writef_float(sf, x, (sf_count_t)n), (sf_count_t)n);
    sf_close(sf);
    cr_assert_eq(audio_resample("x", &x, &n, fs, 22050, &e), 0, "%s", e.msg);
    cr_assert_eq(audio_write_wav16(test_path(fx.dir, "a22k.wav"), x, n, 22050, AUDIO_PCM16_EXACT, &e), 0, "%s", e.msg);
    free(x);
}

Test(transcribe, wav_flac_another_rate_and_stdin)
{
    write_variants(2);
    char want[128];
    snprintf(want, sizeof want, "%s\n", fx.text[2]);
    cr_assert_eq(tr("-q '%s' '%s/a.flac'", fx.pack, fx.dir), 0, "%s", err);
    cr_expect_str_eq(out, want, "FLAC");
    cr_assert_eq(tr("-q '%s' - <'%s'", fx.pack, fx.wav[2]), 0, "%s", err);
    cr_expect_str_eq(out, want, "WAV on stdin");
    cr_assert_eq(tr("-q '%s' - <'%s/a.flac'", fx.pack, fx.dir), 0, "%s", err);
    cr_expect_str_eq(out, want, "FLAC on stdin (libsndfile's virtual I/O)");
    cr_assert_eq(tr("-q '%s' '%s/a22k.wav'", fx.pack, fx.dir), 0, "%s", err);
    cr_expect_str_eq(out, want, "22.05 kHz, resampled to the model's 16 kHz");
    /* a pipe is read to its end: stdin with another file */
    cr_assert_eq(tr("-q '%s' - '%s' <'%s'", fx.pack, fx.wav[0], fx.wav[2]), 0, "%s", err);
    char both[1400];
    snprintf(both, sizeof both, "-\t%s\n%s\t%s\n", fx.text[2], fx.wav[0], fx.text[0]);
    cr_expect_str_eq(out, both);
}

Test(transcribe, json_has_text_tokens_scores_and_the_nbest)
{
    cr_assert_eq(tr("-q -o json --nbest 3 '%s' '%s' '%s'", fx.pack, fx.wav[0], fx.wav[1]), 0, "%s", err);
    cr_assert_eq(test_count_lines(out), 2, "one JSON line per file:\n%s", out);
    char *save = NULL, *line = strtok_r(out, "\n", &save);
    for (int k = 0; k < 2; k++, line = strtok_r(NULL, "\n", &save)) {
        json_error_t je;
        json_t *o = json_loads(line, 0, &je);
        cr_assert_not_null(o, "%s: %s", je.text, line);
        cr_expect_str_eq(json_string_value(json_object_get(o, "file")), fx.wav[k]);
        cr_expect_str_eq(json_string_value(json_object_get(o, "text")), fx.text[k]);
        cr_expect(json_real_value(json_object_get(o, "duration")) > 0.1);
        cr_expect(json_is_real(json_object_get(o, "score")));
        /* the tokens are ESPnet's ids, each with its token text */
        char ids[64] = "";
        json_t *tok = json_object_get(o, "tokens"), *t;
        size_t i;
        double dur = json_real_value(json_object_get(o, "duration")), prev_end = 0;
        json_array_foreach(tok, i, t) {
            snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%s%lld", i ? " " : "",
                     (long long)json_integer_value(json_object_get(t, "id")));
            cr_expect_eq(strlen(json_string_value(json_object_get(t, "token"))), 1, "char tokens");
            /* times from the CTC alignment: in order, inside the audio, scores are log-posteriors */
            double a = json_real_value(json_object_get(t, "start")), b = json_real_value(json_object_get(t, "end"));
            cr_expect(json_is_real(json_object_get(t, "start")) && prev_end <= a && a < b && b <= dur + 1e-9,
                      "token %zu: %g-%g after %g, in %g s", i, a, b, prev_end, dur);
            cr_expect(json_real_value(json_object_get(t, "score")) <= 0);
            prev_end = b;
        }
        cr_expect_str_eq(ids, fx.ids[k]);
        /* a char model without <space> in these: the text is one word, spanning its tokens */
        json_t *words = json_object_get(o, "words"), *w0 = json_array_get(words, 0);
        cr_expect_eq(json_array_size(words), 1);
        cr_expect_str_eq(json_string_value(json_object_get(w0, "word")), fx.text[k]);
        cr_expect(json_real_value(json_object_get(w0, "start")) ==
                      json_real_value(json_object_get(json_array_get(tok, 0), "start")) &&
                      json_real_value(json_object_get(w0, "end")) == prev_end,
                  "%s", line);
        json_t *nb = json_object_get(o, "nbest");
        cr_expect_eq(json_array_size(nb), 3, "--nbest 3");
        cr_expect_str_eq(json_string_value(json_object_get(json_array_get(nb, 0), "text")), fx.text[k]);
        double s0 = json_real_value(json_object_get(json_array_get(nb, 0), "score"));
        double s2 = json_real_value(json_object_get(json_array_get(nb, 2), "score"));
        cr_expect(s0 >= s2, "best first: %g, %g", s0, s2);
        json_decref(o);
    }
}

Test(transcribe, ctm_srt_vtt_and_output_dir)
{
    /* CTM: one line per word, the recording named by the file's stem, a confidence in (0, 1] */
    cr_assert_eq(tr("-q -o ctm '%s' '%s' '%s'", fx.pack, fx.wav[0], fx.wav[2]), 0, "%s", err);
    cr_assert_eq(test_count_lines(out), 2, "%s", out);
    char *save = NULL, *l = strtok_r(out, "\n", &save);
    for (int k = 0; k < 3; k += 2, l = strtok_r(NULL, "\n", &save)) {
        char rec[32], word[64], want_rec[16];
        double start, dur, conf;
        cr_assert_eq(sscanf(l, "%31s 1 %lf %lf %63s %lf", rec, &start, &dur, word, &conf), 5, "%s", l);
        snprintf(want_rec, sizeof want_rec, "utt%d", k + 1);
        cr_expect(!strcmp(rec, want_rec) && !strcmp(word, fx.text[k]) && start >= 0 && dur > 0 && conf > 0 &&
                      conf <= 1, "%s", l);
    }
    cr_assert_eq(tr("-q -o srt '%s' '%s'", fx.pack, fx.wav[0]), 0, "%s", err);
    char want[256];
    snprintf(want, sizeof want, "\n%s\n\n", fx.text[0]);
    /* one cue, from the word's start to its end (the CTM's times, to the millisecond) */
    int h0, m0, s0, ms0, h1, m1, s1, ms1;
    cr_assert_eq(sscanf(out, "1\n%d:%d:%d,%d --> %d:%d:%d,%d\n", &h0, &m0, &s0, &ms0, &h1, &m1, &s1, &ms1), 8, "%s", out);
    cr_expect(h0 == 0 && m0 == 0 && s0 == 0 && ms0 > 0 && ms1 > ms0 && strstr(out, want), "%s", out);
    cr_assert_eq(tr("-q -o vtt '%s' '%s'", fx.pack, fx.wav[0]), 0, "%s", err);
    cr_expect(!strncmp(out, "WEBVTT\n\n00:00:0", 15) && strstr(out, ".") && strstr(out, want), "%s", out);
    /* subtitles of several files need a folder: one file each, written whole */
    cr_assert_eq(tr("-q -o srt '%s' '%s' '%s'", fx.pack, fx.wav[0], fx.wav[1]), 2);
    cr_assert_eq(tr("-q -o srt --output_dir '%s' '%s' '%s' '%s'", fx.dir, fx.pack, fx.wav[0], fx.wav[1]), 0, "%s", err);
    cr_expect_str_eq(out, "");
    for (int k = 0; k < 2; k++) {
        char name[32];
        snprintf(name, sizeof name, "utt%d.srt", k + 1);
        char *srt = test_slurp(test_path(fx.dir, name));
        snprintf(want, sizeof want, "\n%s\n\n", fx.text[k]);
        cr_expect(!strncmp(srt, "1\n", 2) && strstr(srt, want), "%s: %s", name, srt);
        free(srt);
    }
}

/* stderr holds exactly one line, an error that contains piece. */
static void one_error_line(const char *piece)
{
    cr_expect(!strncmp(err, "espnet3: error: ", 16) && strstr(err, piece) && test_count_lines(err) == 1,
              "want one line with '%s', got:\n%s", piece, err);
}

Test(transcribe, bad_input_is_one_line_each)
{
    /* an unreadable audio file: the others still decode, exit 1 */
    cr_assert_eq(tr("-q '%s' nosuch.wav '%s'", fx.pack, fx.wav[0]), 1);
    one_error_line("nosuch.wav: cannot read audio: ");
    cr_expect(strstr(out, fx.text[0]) && test_count_lines(out) == 1, "%s", out);
    /* an empty file, and a WAV of zero samples */
    test_write_text(test_path(fx.dir, "empty.wav"), "");
    cr_assert_eq(tr("-q '%s' '%s/empty.wav'", fx.pack, fx.dir), 1);
    one_error_line("empty.wav: cannot read audio: ");
    esp_err e;
    cr_assert_eq(audio_write_wav16(test_path(fx.dir, "zero.wav"), NULL, 0, 16000, AUDIO_PCM16_EXACT, &e), 0);
    cr_assert_eq(tr("-q '%s' '%s/zero.wav'", fx.pack, fx.dir), 1);
    one_error_line("zero.wav: no audio samples (an empty recording)");
    /* a model folder missing its tokens.txt */
    cr_assert_eq(test_sh("cp -r '%s' '%s/broken' && rm '%s/broken/tokens/tokens.txt'", fx.pack, fx.dir, fx.dir), 0);
    cr_assert_eq(tr("'%s/broken' '%s'", fx.dir, fx.wav[0]), 1);
    one_error_line("broken/tokens/tokens.txt: no token list (named by tokenizer.save_path in ");
    /* not a model at all */
    cr_assert_eq(tr("'%s' '%s'", fx.wav[0], fx.wav[0]), 1);
    one_error_line("utt1.wav: not a model (give a pack folder or zip");
    /* an empty transcript (silence): its line, and one warning */
    float sil[16000] = {0};
    cr_assert_eq(audio_write_wav16(test_path(fx.dir, "sil.wav"), sil, 16000, 16000, AUDIO_PCM16_EXACT, &e), 0);
    cr_assert_eq(tr("'%s' '%s/sil.wav'", fx.pack, fx.dir), 0, "%s", err);
    cr_expect_str_eq(out, "\n");
    cr_expect(strstr(err, "espnet3: warning: ") && strstr(err, "sil.wav: empty transcript") &&
              test_count_lines(err) == 1, "%s", err);
    /* bad options: the error line, then the usage line; exit 2 */
    const char *bad[][2] = {{"--output xml", "--output 'xml': use text, json, ctm, srt or vtt"},
                            {"--beam x", "--beam 'x': use 1 to 10000"},
                            {"--ctc_weight 2", "--ctc_weight '2': use a weight in [0, 1]"},
                            {"--device tpu", "--device 'tpu': use cpu, cuda or cuda:N"},
                            {"--bem 3", "unknown option '--bem' (did you mean --beam?)"}};
    for (int i = 0; i < 5; i++) {
        cr_assert_eq(tr("%s '%s' '%s'", bad[i][0], fx.pack, fx.wav[0]), 2, "%s", bad[i][0]);
        cr_expect(!strncmp(err, "espnet3: error: ", 16) && strstr(err, bad[i][1]) && test_count_lines(err) == 2 &&
                      strstr(err, "\nusage: espnet3 transcribe "),
                  "%s:\n%s", bad[i][0], err);
        cr_expect_str_eq(out, "");
    }
    cr_assert_eq(tr("'%s'", fx.pack), 2);
    cr_expect(strstr(err, "give a MODEL and at least one audio FILE"), "%s", err);
}

Test(transcribe, help_and_the_command_list)
{
    cr_assert_eq(tr("--help"), 0);
    cr_expect(strstr(out, "usage: espnet3 transcribe ") && strstr(out, "--ctc_weight W") && strstr(out, "--output_dir DIR"),
              "%s", out);
    cr_assert_eq(test_sh("'%s' --help >'%s/help' 2>&1", test_bin_path(), fx.dir), 0);
    char *h = test_slurp(test_path(fx.dir, "help"));
    cr_expect(strstr(h, "Commands (espnet3 <command> --help):\n  transcribe "), "%s", h);
    free(h);
}
