/* `espnet3 align MODEL AUDIO TEXT` (cli/cmd_align.c) on the synthesized-speech fixture: two of its
 * utterances in one file, the segments ESPnet's asr_align.py prints (ids, the audio's stem, times
 * in order, scores, texts; plain text lines named <stem>_NNNN) and the CTM of their words; a line
 * with a deliberately wrong word is named in a warning and written commented out, never passed
 * off as an alignment; bad input (an unreadable audio file, a model folder missing its tokens, an
 * empty transcript) is one error line naming the file, and nothing is written. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/data/audio.h"
#include "test/unit/test_util.h"

static char dir[64];
static char *fx;

/* synth00 and synth01 one after the other (0.5 s of silence around) as <dir>/rec.wav. */
static void setup(void)
{
    test_tmpdir_make(dir, sizeof dir, "align_cli");
    fx = path_join(test_root_dir(), "test/fixtures/synth_model");
    esp_err err;
    float *a, *b;
    size_t na, nb;
    char *pa = xasprintf("%s/speech/synth00.flac", fx), *pb = xasprintf("%s/speech/synth01.flac", fx);
    cr_assert_eq(audio_read(pa, 16000, "fs", &a, &na, &err), 0, "%s", err.msg);
    cr_assert_eq(audio_read(pb, 16000, "fs", &b, &nb, &err), 0, "%s", err.msg);
    size_t n = 8000 + na + 8000 + nb + 8000;
    float *w = xcalloc(n, sizeof *w);
    memcpy(w + 8000, a, na * sizeof *w);
    memcpy(w + 16000 + na, b, nb * sizeof *w);
    cr_assert_eq(audio_write_wav16(test_path(dir, "rec.wav"), w, n, 16000, AUDIO_PCM16_EXACT, &err), 0, "%s", err.msg);
    free(a), free(b), free(w), free(pa), free(pb);
}

static void teardown(void)
{
    test_tmpdir_remove(dir);
    free(fx);
}

TestSuite(align_cli, .init = setup, .fini = teardown, .timeout = 120);

/* Runs espnet3 align with args in dir; stdout to out, stderr to err; returns the exit status. */
static int align(const char *args)
{
    return test_sh("cd '%s' && '%s' align %s >out 2>err", dir, test_bin_path(), args);
}

static char *file(const char *name) { return test_slurp_or_empty(test_path(dir, name)); }

Test(align_cli, segments_and_words)
{
    test_write_text(test_path(dir, "text"), "rec-a CHICKEN LITTLE ONLY HAS TO BE RIGHT ONCE\n"
                                            "rec-b I COULDN'T POSSIBLY FAIL TO DISAGREE WITH YOU LESS\n");
    char *args = xasprintf("'%s' rec.wav text --ctm words.ctm", fx);
    cr_assert_eq(align(args), 0, "%s", file("err"));
    char *out = file("out"), a[32], b[32], name[32], text[256];
    double s0, e0, sc0, s1, e1, sc1;
    int n = sscanf(out, "%31s %31s %lf %lf %lf %255[^\n]\n%31s %*s %lf %lf %lf", a, name, &s0, &e0, &sc0, text, b,
                   &s1, &e1, &sc1);
    cr_assert_eq(n, 10, "%s", out);
    cr_expect_str_eq(a, "rec-a");
    cr_expect_str_eq(b, "rec-b");
    cr_expect_str_eq(name, "rec", "the audio file's stem names the recording");
    cr_expect_str_eq(text, "CHICKEN LITTLE ONLY HAS TO BE RIGHT ONCE");
    cr_expect(s0 < 0.6 && e0 > 2.0 && e0 <= s1 && e1 > s1 + 2, "%s", out);
    cr_expect(sc0 > -1.2 && sc1 > -1.2, "%s", out);
    cr_expect_eq(test_count_lines(out), 2);
    char *ctm = file("words.ctm");
    cr_expect_eq(test_count_lines(ctm), 8 + 9, "%s", ctm);
    cr_expect(!strncmp(ctm, "rec 1 ", 6) && strstr(ctm, " CHICKEN ") && strstr(ctm, " COULDN'T "), "%s", ctm);
    free(ctm), free(out), free(args);
    /* plain lines: named <stem>_0000, ...; no score, no text */
    test_write_text(test_path(dir, "plain"), "CHICKEN LITTLE ONLY HAS TO BE RIGHT ONCE\n\n"
                                             "I COULDN'T POSSIBLY FAIL TO DISAGREE WITH YOU LESS\n");
    args = xasprintf("'%s' rec.wav plain --kaldi_style_text false --print_utt_score false --print_utt_text false", fx);
    cr_assert_eq(align(args), 0, "%s", file("err"));
    out = file("out");
    cr_expect(!strncmp(out, "rec_0000 rec ", 13) && strstr(out, "\nrec_0001 rec "), "%s", out);
    cr_expect_eq(sscanf(out, "%*s %*s %lf %lf %lf", &s0, &e0, &sc0), 2, "no score: %s", out);
    free(out), free(args);
}

Test(align_cli, a_wrong_word_is_reported_not_stretched)
{
    test_write_text(test_path(dir, "text"), "rec-a CHICKEN LITTLE ONLY HAS TO BE RIGHT ONCE\n"
                                            "rec-b ELEPHANT COULDN'T POSSIBLY FAIL TO DISAGREE WITH YOU LESS\n");
    char *args = xasprintf("'%s' rec.wav text -o segments", fx);
    cr_assert_eq(align(args), 0, "%s", file("err"));
    char *seg = file("segments"), *err = file("err");
    cr_expect(!strncmp(seg, "rec-a rec ", 10), "%s", seg);
    cr_expect(strstr(seg, "\n;; rec-b rec "), "the wrong line is commented out: %s", seg);
    cr_expect(strstr(err, "warning: segments: line 2 (rec-b) scores") && strstr(err, "below --min_score"), "%s", err);
    free(seg), free(err), free(args);
}

/* One line on stderr, `espnet3: error: ` and naming what; exit 1; no output file. */
static void expect_one_error(const char *args, const char *names)
{
    char *cmd = xasprintf("%s -o segments", args);
    cr_expect_eq(align(cmd), 1, "%s", args);
    char *err = file("err");
    cr_expect_eq(test_count_lines(err), 1, "%s", err);
    cr_expect(!strncmp(err, "espnet3: error: ", 16) && strstr(err, names), "want one line naming %s: %s", names, err);
    cr_expect(!test_exists(test_path(dir, "segments")), "%s: segments written", args);
    free(err), free(cmd);
}

Test(align_cli, bad_input_is_one_line_each)
{
    test_write_text(test_path(dir, "text"), "rec-a CHICKEN LITTLE ONLY HAS TO BE RIGHT ONCE\n");
    test_write_text(test_path(dir, "noise.wav"), "RIFF, but not audio at all\n");
    test_write_text(test_path(dir, "empty"), "\n\n");
    cr_assert_eq(test_sh("cp -r '%s' '%s/broken' && rm '%s/broken/tokens/tokens.txt'", fx, dir, dir), 0);
    char *a = xasprintf("'%s' noise.wav text", fx), *b = xasprintf("broken rec.wav text"),
         *c = xasprintf("'%s' rec.wav empty", fx), *d = xasprintf("'%s' missing.flac text", fx);
    expect_one_error(a, "noise.wav");
    expect_one_error(b, "tokens.txt");
    expect_one_error(c, "empty");
    expect_one_error(d, "missing.flac");
    free(a), free(b), free(c), free(d);
    /* usage: two operands */
    cr_expect_eq(test_sh("cd '%s' && '%s' align '%s' rec.wav >out 2>err", dir, test_bin_path(), fx), 2 << 8 >> 8);
}
