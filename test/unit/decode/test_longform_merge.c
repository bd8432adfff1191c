/* The merge of long-form windows (core/decode/longform_merge.h) on simulated windows: a recording of
 * timed words is cut into overlapping windows; each window hears the words inside it with its own
 * timing jitter, and a word cut by its edge as a wrong word; the merge gives the recording's
 * tokens exactly (none lost, none twice), with and without separator tokens, at every overlap. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/decode/longform_merge.h"

#define SEP 2
#define GARBAGE 999

typedef struct truth {
    double s[400], e[400];
    int n;
} truth;

/* Words of 0.2 to 0.7 s with pauses of 0.03 to 0.25 s (a fixed pseudo-random sequence). */
static void make_truth(truth *t, double seconds)
{
    unsigned r = 12345;
    double x = 0.1;
    t->n = 0;
    while (x < seconds - 1 && t->n < 400) {
        r = r * 1103515245u + 12345u;
        double len = 0.2 + 0.5 * ((r >> 8) % 1000) / 1000.0;
        r = r * 1103515245u + 12345u;
        double gap = 0.03 + 0.22 * ((r >> 8) % 1000) / 1000.0;
        t->s[t->n] = x, t->e[t->n] = x + len;
        t->n++;
        x += len + gap;
    }
}

static void add_token(lf_piece *p, int id, double s, double e, int word)
{
    p->ids = realloc(p->ids, (p->n + 1) * sizeof *p->ids);
    p->start = realloc(p->start, (p->n + 1) * sizeof *p->start);
    p->end = realloc(p->end, (p->n + 1) * sizeof *p->end);
    p->score = realloc(p->score, (p->n + 1) * sizeof *p->score);
    p->word = realloc(p->word, (p->n + 1) * sizeof *p->word);
    p->ids[p->n] = id, p->start[p->n] = s, p->end[p->n] = e, p->score[p->n] = -0.1, p->word[p->n] = word;
    p->n++;
}

static void add_word(lf_piece *p, const int *ids, int n_tok, double s, double e, int sep)
{
    if (sep && p->n_words > 0) add_token(p, SEP, p->wend[p->n_words - 1] + 0.01, s - 0.01 > p->wend[p->n_words - 1] + 0.01 ? s - 0.01 : s, -1);
    p->wstart = realloc(p->wstart, (p->n_words + 1) * sizeof *p->wstart);
    p->wend = realloc(p->wend, (p->n_words + 1) * sizeof *p->wend);
    p->wstart[p->n_words] = s, p->wend[p->n_words] = e;
    for (int k = 0; k < n_tok; k++)
        add_token(p, ids[k], s + (e - s) * k / n_tok, s + (e - s) * (k + 1) / n_tok, (int)p->n_words);
    p->n_words++;
}

/* What window [t0, t1) hears: whole words with jitter (up to 0.02 s, the window's own), a word cut
 * by an edge as one wrong token over the part inside. *straddled counts the words cut by t1. */
static void hear(const truth *t, double t0, double t1, int window, int sep, lf_piece *p, int *straddled)
{
    memset(p, 0, sizeof *p);
    p->t0 = t0, p->t1 = t1, p->hyp_score = -1.0;
    for (int w = 0; w < t->n; w++) {
        if (t->e[w] <= t0 || t->s[w] >= t1) continue;
        if (t->s[w] < t0 || t->e[w] > t1) {
            int g = GARBAGE;
            add_word(p, &g, 1, fmax(t->s[w], t0), fmin(t->e[w], t1), sep);
            if (t->e[w] > t1) (*straddled)++;
            continue;
        }
        double j = 0.02 * sin(7.0 * window + 3.0 * w);
        int ids[2] = {100 + w, 600 + w};
        add_word(p, ids, 2, t->s[w] + j, t->e[w] + j, sep);
    }
}

static void check_merge(double window, double overlap, int sep)
{
    truth t;
    make_truth(&t, 61.0);
    lf_merge m = {0};
    int straddled = 0, k = 0;
    for (double t0 = 0; t0 < 61.0; t0 += window - overlap, k++) {
        lf_piece p;
        double t1 = fmin(t0 + window, 61.0);
        hear(&t, t0, t1, k, sep, &p, &straddled);
        lf_merge_add(&m, &p);
        if (t1 >= 61.0) break;
    }
    lf_merge_finish(&m);
    cr_assert_gt(straddled, 3, "the test needs words cut by window edges");
    size_t want = sep ? 3 * (size_t)t.n - 1 : 2 * (size_t)t.n, i = 0;
    cr_assert_eq(m.n, want, "window %g overlap %g: %zu tokens, the recording has %zu", window, overlap, m.n, want);
    for (int w = 0; w < t.n; w++) {
        if (sep && w > 0) cr_assert_eq(m.ids[i++], SEP, "no separator before word %d", w);
        cr_assert_eq(m.ids[i], 100 + w, "window %g overlap %g: token %zu is %d, word %d's is %d", window, overlap, i,
                     m.ids[i], w, 100 + w);
        cr_assert_eq(m.ids[i + 1], 600 + w);
        cr_assert_lt(fabs(m.start[i] - t.s[w]), 0.021, "token times are the recording's");
        i += 2;
    }
    cr_assert_float_eq(m.hyp_score, -(double)k - 1, 1e-9, "the windows' scores add up");
    lf_merge_free(&m);
}

Test(longform_merge, every_word_once_with_separators)
{
    check_merge(4.0, 1.0, 1);
    check_merge(3.0, 1.5, 1);
    check_merge(10.0, 2.0, 1);
}

Test(longform_merge, every_word_once_without_separators) { check_merge(4.0, 1.0, 0), check_merge(7.0, 0.5, 0); }

static lf_piece span_piece(double t0, double t1, const double (*w)[2], int n)
{
    lf_piece p = {.t0 = t0, .t1 = t1};
    for (int k = 0; k < n; k++) {
        int id = 1;
        add_word(&p, &id, 1, w[k][0], w[k][1], 0);
    }
    return p;
}

Test(longform_merge, the_cut_is_the_gap_nearest_the_middle)
{
    /* Overlap [8, 10): gaps of both windows' words at 8.3-8.4 and 9.7-9.8; the middle (9) is inside
     * a word of b, so the nearest gap's middle, 8.35. */
    double wa[][2] = {{7.0, 8.3}, {8.4, 9.2}}, wb[][2] = {{8.4, 9.7}, {9.8, 11}};
    lf_piece a = span_piece(2, 10, wa, 2), b = span_piece(8, 16, wb, 2);
    cr_assert_float_eq(lf_cut(&a, &b), 8.35, 1e-12);
    /* Words over the whole overlap: the middle. */
    double wc[][2] = {{7.5, 10}}, wd[][2] = {{8, 12}};
    lf_piece c = span_piece(2, 10, wc, 1), d = span_piece(8, 16, wd, 1);
    cr_assert_float_eq(lf_cut(&c, &d), 9.0, 1e-12);
    /* No words in the overlap: its middle. */
    lf_piece e = span_piece(2, 10, NULL, 0), f = span_piece(8, 16, NULL, 0);
    cr_assert_float_eq(lf_cut(&e, &f), 9.0, 1e-12);
    lf_piece_free(&a), lf_piece_free(&b), lf_piece_free(&c), lf_piece_free(&d), lf_piece_free(&e), lf_piece_free(&f);
}
