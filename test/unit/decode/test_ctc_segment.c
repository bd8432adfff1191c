/* CTC segmentation (core/decode/ctc_segment.h) against the ctc_segmentation package 1.7.5 that
 * ESPnet2's asr_align.py calls, on the fixtures of scripts/make_ctc_segment_fixtures.py: the same
 * segments (start, end, score) to the last bit and the same printed lines, on a plain transcript,
 * gratis_blank, a first window too small (the backtracking leaves it and the window doubles), a
 * preamble and tail of unrelated frames, and a transcript with a wrong utterance (its score low). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/decode/ctc_segment.h"
#include "core/formats/npz.h"
#include "test/unit/test_util.h"

static double *get(npz_file *f, const char *path, const char *name, size_t *n)
{
    esp_err err;
    double *x;
    cr_assert_eq(npz_get_doubles(f, path, name, &x, n, &err), 0, "%s", err.msg);
    return x;
}

/* Runs one fixture; returns the segments' scores (n_utts) for the caller's own checks. */
static double *check_case(const char *name, int *n_utts)
{
    char *dir = path_join(test_root_dir(), "test/fixtures/ctc_segment"), *file = xasprintf("%s.npz", name);
    char *path = path_join(dir, file);
    npz_file f;
    esp_err err;
    cr_assert_eq(npz_read(path, &f, &err), 0, "%s", err.msg);
    const npy_array *lp = npz_get(&f, "lpz");
    cr_assert(lp && lp->dtype == NPY_F32 && lp->ndim == 2);
    int T = (int)lp->shape[0], V = (int)lp->shape[1];
    size_t n_ids, n_lens, n_opts, n_seg, n_text;
    double *ids = get(&f, path, "ids", &n_ids), *lens = get(&f, path, "lens", &n_lens), *op = get(&f, path, "opts", &n_opts);
    double *want = get(&f, path, "segments", &n_seg), *text = get(&f, path, "text", &n_text);
    cr_assert_eq(n_opts, 6);
    int n = (int)n_lens;
    int **utt = xcalloc((size_t)n, sizeof *utt);
    size_t *ul = xcalloc((size_t)n, sizeof *ul), at = 0;
    for (int i = 0; i < n; i++) {
        ul[i] = (size_t)lens[i];
        utt[i] = xmalloc((ul[i] + 1) * sizeof **utt);
        for (size_t k = 0; k < ul[i]; k++) utt[i][k] = (int)ids[at++];
    }
    ctcseg_text tx;
    ctcseg_text_build(&tx, (const int *const *)utt, ul, n, 0);
    ctcseg_opts o = {.min_window_size = (int)op[0], .max_window_size = (int)op[1], .scoring_length = (int)op[2],
                     .blank = (int)op[3], .gratis_blank = (int)op[4], .index_duration = op[5]};
    ctcseg_segment *seg = xcalloc((size_t)n, sizeof *seg);
    cr_assert_eq(ctcseg_run(&o, (const float *)lp->data, T, V, &tx, seg, &err), 0, "%s: %s", name, err.msg);
    cr_assert_eq(n_seg, 3 * (size_t)n);
    char *got = xstrdup(""), *want_text = xmalloc(n_text + 1);
    for (size_t i = 0; i < n_text; i++) want_text[i] = (char)text[i];
    want_text[n_text] = 0;
    double *scores = xmalloc((size_t)n * sizeof *scores);
    for (int i = 0; i < n; i++) {
        cr_expect_eq(seg[i].start, want[3 * i], "%s utt %d start %.17g, ESPnet %.17g", name, i, seg[i].start, want[3 * i]);
        cr_expect_eq(seg[i].end, want[3 * i + 1], "%s utt %d end %.17g, ESPnet %.17g", name, i, seg[i].end, want[3 * i + 1]);
        cr_expect_eq(seg[i].score, want[3 * i + 2], "%s utt %d score %.17g, ESPnet %.17g", name, i, seg[i].score,
                     want[3 * i + 2]);
        scores[i] = seg[i].score;
        /* the printed line: the transcript's tokens t<id> as the fixture's text */
        char *words = xstrdup(""), *uttn = xasprintf("utt%d", i);
        for (size_t k = 0; k < ul[i]; k++) {
            char *w = xasprintf("%s%st%d", words, k ? " " : "", utt[i][k]);
            free(words);
            words = w;
        }
        char *line = ctcseg_line(uttn, name, &seg[i], 1, words), *g = xasprintf("%s%s", got, line);
        free(got), free(line), free(words), free(uttn);
        got = g;
    }
    cr_expect_str_eq(got, want_text, "%s: printed segments differ", name);
    for (int i = 0; i < n; i++) free(utt[i]);
    free(utt), free(ul), free(seg), free(got), free(want_text);
    free(ids), free(lens), free(op), free(want), free(text);
    ctcseg_text_free(&tx);
    npz_free(&f);
    free(path), free(file), free(dir);
    *n_utts = n;
    return scores;
}

Test(ctc_segment, plain) { int n; free(check_case("plain", &n)); }
Test(ctc_segment, gratis_blank) { int n; free(check_case("gratis_blank", &n)); }
Test(ctc_segment, window_doubles) { int n; free(check_case("window", &n)); }
Test(ctc_segment, preamble_and_tail) { int n; free(check_case("preamble", &n)); }

Test(ctc_segment, wrong_words_score_low)
{
    int n;
    double *s = check_case("wrong_words", &n);
    for (int i = 0; i < n; i++)
        if (i != 2) cr_expect(s[i] > s[2] + 1.0, "utt %d scores %g, the wrong one %g", i, s[i], s[2]);
    free(s);
}

Test(ctc_segment, text_longer_than_audio)
{
    float lpz[4 * 3] = {0};
    int ids[] = {1, 2, 1, 2};
    const int *u[] = {ids};
    size_t len = 4;
    ctcseg_text tx;
    ctcseg_text_build(&tx, u, &len, 1, 0);
    ctcseg_opts o = CTCSEG_OPTS_DEFAULT;
    o.index_duration = 0.04;
    ctcseg_segment seg;
    esp_err err;
    cr_assert_eq(ctcseg_run(&o, lpz, 4, 3, &tx, &seg, &err), -1);
    cr_expect(strstr(err.msg, "shorter than the text"), "%s", err.msg);
    ctcseg_text_free(&tx);
}
