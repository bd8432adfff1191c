/* CTC prefix beam search: hand-computed cases, exactness against brute force over all alignments
 * (merging of prefixes), beam 1 against greedy on peaky outputs, length bonus and tie-breaking. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/decode/ctc_decode.h"
#include "core/decode/ctc_prefix_beam.h"
#include "core/base/rng.h"

/* Rows of probabilities -> log-probabilities. */
static float *logs(const double *p, int n)
{
    float *lp = malloc((size_t)n * sizeof *lp);
    for (int i = 0; i < n; i++) lp[i] = (float)log(p[i]);
    return lp;
}

static int decode(const float *lp, int T, int V, int beam, double penalty, int *out, double *score)
{
    ctc_beam *w = ctc_beam_new();
    ctc_beam_opts o = {.beam_size = beam, .penalty = penalty};
    int n = ctc_prefix_beam_search(w, lp, T, V, &o, out, score);
    ctc_beam_free(w);
    return n;
}

/* Two frames of blank 0.6 / a 0.4: the best path is blank-blank (""), but "a" has
 * aa + a- + -a = 0.16 + 0.24 + 0.24 = 0.64 > 0.36. */
Test(ctc_beam, sums_alignments_where_greedy_takes_the_best_path)
{
    double p[] = {0.6, 0.4, 0.6, 0.4};
    float *lp = logs(p, 4);
    int out[4];
    cr_assert_eq(ctc_greedy_decode(out, lp, 2, 2), 0);
    double score;
    int n = decode(lp, 2, 2, 2, 0, out, &score);
    cr_assert_eq(n, 1);
    cr_assert_eq(out[0], 1);
    cr_assert_float_eq(score, log(0.64), 1e-6);
    free(lp);
}

/* ESPnet's penalty adds a bonus per token: -1 per token makes "" (log 0.36) beat "a" (log 0.64 - 1). */
Test(ctc_beam, penalty_is_a_per_token_length_bonus)
{
    double p[] = {0.6, 0.4, 0.6, 0.4};
    float *lp = logs(p, 4);
    int out[4];
    double score;
    cr_assert_eq(decode(lp, 2, 2, 4, -1.0, out, &score), 0);
    cr_assert_float_eq(score, log(0.36), 1e-6);
    cr_assert_eq(decode(lp, 2, 2, 4, 0.5, out, &score), 1);
    cr_assert_float_eq(score, log(0.64) + 0.5, 1e-6);
    free(lp);
}

/* Repeats: "aa" needs a blank between the a's; with frames a, blank, a it is the best prefix, and
 * a, a, a collapses to "a". */
Test(ctc_beam, repeated_labels_need_a_blank_between)
{
    double p1[] = {0.05, 0.9, 0.05, 0.9, 0.05, 0.05, 0.05, 0.9, 0.05};
    float *lp = logs(p1, 9);
    int out[4];
    int n = decode(lp, 3, 3, 8, 0, out, NULL);
    cr_assert_eq(n, 2);
    cr_assert(out[0] == 1 && out[1] == 1);
    free(lp);
    double p2[] = {0.05, 0.9, 0.05, 0.05, 0.9, 0.05, 0.05, 0.9, 0.05};
    lp = logs(p2, 9);
    n = decode(lp, 3, 3, 8, 0, out, NULL);
    cr_assert_eq(n, 1);
    cr_assert_eq(out[0], 1);
    free(lp);
}

/* Equal scores go to the smaller id, whatever the order candidates are made in. */
Test(ctc_beam, ties_go_to_the_smaller_ids)
{
    double p[] = {0.2, 0.4, 0.4};
    float *lp = logs(p, 3);
    int out[2];
    for (int beam = 1; beam <= 3; beam++) {
        cr_assert_eq(decode(lp, 1, 3, beam, 0, out, NULL), 1);
        cr_assert_eq(out[0], 1, "beam %d picked %d", beam, out[0]);
    }
    free(lp);
}

/* Brute force: every alignment of T frames over V symbols, collapsed; the probability of each
 * prefix summed. With a beam that holds every prefix the search must find the most probable one
 * with exactly its total probability, which needs every merge of equal prefixes done right. */
static void brute_force(const float *lp, int T, int V, int *best, int *nbest, double *best_lp)
{
    int n_paths = 1;
    for (int t = 0; t < T; t++) n_paths *= V;
    /* A prefix's key: its labels in base V, times (T + 1), plus its length (for leading zeros). */
    long n_keys = (long)n_paths * (T + 1);
    double *sum = calloc((size_t)n_keys, sizeof *sum);
    for (int path = 0; path < n_paths; path++) {
        int code = path, prev = -1, len = 0;
        long key = 0;
        double l = 0;
        for (int t = 0; t < T; t++) {
            int c = code % V;
            code /= V;
            l += lp[t * V + c];
            if (c != 0 && c != prev) key = key * V + c, len++;
            prev = c;
        }
        sum[key * (T + 1) + len] += exp(l);
    }
    double top = -1;
    long top_key = 0;
    for (long k = 0; k < n_keys; k++)
        if (sum[k] > top) top = sum[k], top_key = k;
    *nbest = (int)(top_key % (T + 1));
    long k = top_key / (T + 1);
    for (int i = *nbest - 1; i >= 0; i--) best[i] = (int)(k % V), k /= V;
    *best_lp = log(top);
    free(sum);
}

Test(ctc_beam, exhaustive_beam_equals_the_sum_over_alignments)
{
    rng r;
    rng_init(&r, 7);
    enum { T = 5, V = 3 };
    for (int trial = 0; trial < 50; trial++) {
        double p[T * V];
        for (int t = 0; t < T; t++) {
            double s = 0;
            for (int c = 0; c < V; c++) s += p[t * V + c] = 0.05 + (double)(rng_next(&r) % 1000) / 1000.0;
            for (int c = 0; c < V; c++) p[t * V + c] /= s;
        }
        float *lp = logs(p, T * V);
        int want[T], got[T], nw;
        double want_lp, got_lp;
        brute_force(lp, T, V, want, &nw, &want_lp);
        int ng = decode(lp, T, V, 1000, 0, got, &got_lp);
        cr_assert_float_eq(got_lp, want_lp, 1e-5, "trial %d", trial);
        cr_assert_eq(ng, nw, "trial %d", trial);
        for (int i = 0; i < ng; i++) cr_assert_eq(got[i], want[i], "trial %d", trial);
        free(lp);
    }
}

/* When every frame's best token has probability 0.9 or more, the one-prefix beam follows the
 * best path, so beam 1 gives the greedy result (on flatter outputs it may not: it sums paths). */
Test(ctc_beam, beam_one_is_greedy_on_peaky_outputs)
{
    rng r;
    rng_init(&r, 11);
    enum { T = 60, V = 6 };
    for (int trial = 0; trial < 100; trial++) {
        double p[T * V];
        for (int t = 0; t < T; t++) {
            int top = (int)(rng_next(&r) % V);
            if (rng_next(&r) % 2) top = 0; /* blanks dominate as in trained models */
            double rest = 0;
            for (int c = 0; c < V; c++) rest += p[t * V + c] = c == top ? 0 : 1.0 + (double)(rng_next(&r) % 100);
            for (int c = 0; c < V; c++) p[t * V + c] = c == top ? 0.9 + 0.09 * (double)(rng_next(&r) % 100) / 100.0 : 0;
            double left = 1 - p[t * V + top];
            for (int c = 0; c < V; c++)
                if (c != top) p[t * V + c] = left * (1.0 + (double)(rng_next(&r) % 100)) / (rest + 1e-9) * 0.5 + 1e-6;
            double s = 0;
            for (int c = 0; c < V; c++) s += p[t * V + c];
            for (int c = 0; c < V; c++) p[t * V + c] /= s;
        }
        float *lp = logs(p, T * V);
        int g[T], b[T];
        int ng = ctc_greedy_decode(g, lp, T, V);
        int nb = decode(lp, T, V, 1, 0, b, NULL);
        cr_assert_eq(nb, ng, "trial %d", trial);
        cr_assert_eq(memcmp(g, b, (size_t)ng * sizeof *g), 0, "trial %d", trial);
        free(lp);
    }
}

/* One workspace serves many utterances (the decoder keeps one per worker); no frames = "". */
Test(ctc_beam, workspace_reuse_and_empty_input)
{
    ctc_beam *w = ctc_beam_new();
    ctc_beam_opts o = {.beam_size = 3, .penalty = 0};
    double p[] = {0.1, 0.8, 0.1, 0.1, 0.1, 0.8};
    float *lp = logs(p, 6);
    int out[4];
    double s1, s2;
    int n1 = ctc_prefix_beam_search(w, lp, 2, 3, &o, out, &s1);
    cr_assert_eq(n1, 2);
    cr_assert(out[0] == 1 && out[1] == 2);
    cr_assert_eq(ctc_prefix_beam_search(w, lp, 0, 3, &o, out, &s2), 0);
    cr_assert_float_eq(s2, 0.0, 1e-12);
    int n3 = ctc_prefix_beam_search(w, lp, 2, 3, &o, out, &s2);
    cr_assert_eq(n3, 2);
    cr_assert_eq(s1, s2);
    free(lp);
    ctc_beam_free(w);
}

/* A direct transcription of the algorithm with prefixes as explicit id arrays compared by value:
 * slow, but with no trie to get wrong. */
enum { NT = 40, NV = 4, NMAX = 6 * NV + 6 };
typedef struct naive_hyp {
    int seq[NT], len;
    double pb, pnb, score;
} naive_hyp;

static double lae(double a, double b)
{
    if (a == -INFINITY) return b;
    if (b == -INFINITY) return a;
    return a > b ? a + log1p(exp(b - a)) : b + log1p(exp(a - b));
}

static naive_hyp *find_or_add(naive_hyp *c, int *n, const int *seq, int len)
{
    for (int i = 0; i < *n; i++)
        if (c[i].len == len && !memcmp(c[i].seq, seq, (size_t)len * sizeof *seq)) return &c[i];
    naive_hyp *h = &c[(*n)++];
    memcpy(h->seq, seq, (size_t)len * sizeof *seq);
    h->len = len, h->pb = h->pnb = -INFINITY;
    return h;
}

static int naive_before(const naive_hyp *a, const naive_hyp *b)
{
    if (a->score != b->score) return a->score > b->score;
    if (a->len != b->len) return a->len < b->len;
    for (int k = 0; k < a->len; k++)
        if (a->seq[k] != b->seq[k]) return a->seq[k] < b->seq[k];
    return 0;
}

static int naive_search(const float *lp, int T, int V, int B, double penalty, int *out, double *score)
{
    static naive_hyp beam[NMAX], cand[NMAX];
    int nb = 1, nc;
    beam[0].len = 0, beam[0].pb = 0, beam[0].pnb = -INFINITY;
    for (int t = 0; t < T; t++) {
        const float *l = lp + t * V;
        nc = 0;
        for (int i = 0; i < nb; i++) {
            naive_hyp h = beam[i];
            double total = lae(h.pb, h.pnb);
            int last = h.len ? h.seq[h.len - 1] : -1;
            naive_hyp *k = find_or_add(cand, &nc, h.seq, h.len);
            k->pb = lae(k->pb, total + l[0]);
            if (last > 0) k->pnb = lae(k->pnb, h.pnb + l[last]);
            for (int c = 1; c < V; c++) {
                h.seq[h.len] = c;
                naive_hyp *e = find_or_add(cand, &nc, h.seq, h.len + 1);
                e->pnb = lae(e->pnb, (c == last ? h.pb : total) + l[c]);
            }
        }
        for (int i = 0; i < nc; i++) cand[i].score = lae(cand[i].pb, cand[i].pnb) + penalty * cand[i].len;
        for (int i = 1; i < nc; i++) /* insertion sort, best first */
            for (int j = i; j > 0 && naive_before(&cand[j], &cand[j - 1]); j--) {
                naive_hyp tmp = cand[j];
                cand[j] = cand[j - 1], cand[j - 1] = tmp;
            }
        nb = nc < B ? nc : B;
        memcpy(beam, cand, (size_t)nb * sizeof *beam);
    }
    memcpy(out, beam[0].seq, (size_t)beam[0].len * sizeof *out);
    *score = beam[0].score;
    return beam[0].len;
}

/* Small beams on flat outputs drop prefixes and bring them back (a prefix's parent can leave the
 * beam while the prefix stays): the trie must still merge equal prefixes. */
Test(ctc_beam, small_beams_match_a_search_over_explicit_prefixes)
{
    rng r;
    rng_init(&r, 23);
    int beams[] = {2, 3, 4, 6};
    for (int trial = 0; trial < 400; trial++) {
        int B = beams[trial % 4];
        double p[NT * NV];
        for (int t = 0; t < NT; t++) {
            double s = 0;
            for (int c = 0; c < NV; c++) {
                p[t * NV + c] = 0.05 + (double)(rng_next(&r) % 1000) / 1000.0;
                if (c == 0) p[t * NV + c] *= trial % 3; /* no, some, or dominant blanks */
                s += p[t * NV + c];
            }
            for (int c = 0; c < NV; c++) p[t * NV + c] /= s;
        }
        float *lp = logs(p, NT * NV);
        double penalty = (trial % 4) * 0.25;
        int want[NT], got[NT];
        double want_s, got_s;
        int nw = naive_search(lp, NT, NV, B, penalty, want, &want_s);
        int ng = decode(lp, NT, NV, B, penalty, got, &got_s);
        cr_assert_float_eq(got_s, want_s, 1e-9, "trial %d", trial);
        cr_assert_eq(ng, nw, "trial %d: length %d, want %d", trial, ng, nw);
        cr_assert_eq(memcmp(got, want, (size_t)ng * sizeof *got), 0, "trial %d", trial);
        free(lp);
    }
}
