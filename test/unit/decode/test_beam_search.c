/* The joint CTC/attention beam search (core/decode/beam_search.h):
 * - parity with ESPnet's own BatchBeamSearch on fixtures made by scripts/make_beam_fixtures.py
 *   (a trigram-table decoder reimplemented here, fixed CTC log-probs; ctc_weight 0.3/0.5 and the
 *   CTC-only and attention-only corners, beam 1/4/10, penalty, maxlenratio, minlenratio) and
 *   scripts/make_beam_lm_fixtures.py (the same with a bigram-table LM, lm_weight 0.3-1.0): the
 *   same n-best token sequences, scores and per-scorer scores within 1e-4;
 * - the CTC prefix score against a plain CTC forward over the whole prefix;
 * - beam 1 is greedy on the joint score; results do not depend on how hypotheses are batched into
 *   decoder calls, and a step is one call when the scorer takes them all;
 * - top-k order and ties; scores are the weighted sums of the per-scorer scores;
 * - a batch of utterances (beam_search_run_batch) gives each the n-best it gets alone, in one
 *   decoder call per step over all of them. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/base/rng.h"
#include "core/decode/beam_search.h"
#include "core/decode/beam_search_topk.h"
#include "core/decode/ctc_prefix_score.h"
#include "core/formats/npz.h"
#include "test/unit/test_util.h"

/* ------------------------------------------------------------------ the toy decoder */

/* dec[a][b] (V x V x V) is the next-token distribution after (..., a, b); a is <sos> (V - 1) for a
 * prefix of <sos> alone: the TableDecoder of make_beam_fixtures.py. */
typedef struct table_dec {
    const float *dec;
    int V;
    int calls, max_n, total;
} table_dec;

static void table_score(void *ctx, const int *const *prefixes, const int *lens, int n, float *logp)
{
    table_dec *d = ctx;
    d->calls++;
    d->total += n;
    if (n > d->max_n) d->max_n = n;
    for (int i = 0; i < n; i++) {
        const int *p = prefixes[i];
        cr_assert(lens[i] >= 1 && p[0] == d->V - 1, "prefixes start with <sos>");
        int a = lens[i] >= 2 ? p[lens[i] - 2] : d->V - 1, b = p[lens[i] - 1];
        memcpy(logp + (size_t)i * d->V, d->dec + ((size_t)a * d->V + (size_t)b) * d->V, (size_t)d->V * sizeof(float));
    }
}

/* lm[a] (V x V) is the next-token distribution after last token a (<sos> for <sos> alone): the
 * TableLM of make_beam_lm_fixtures.py. */
static void table_lm_score(void *ctx, const int *const *prefixes, const int *lens, int n, float *logp)
{
    const table_dec *d = ctx;
    for (int i = 0; i < n; i++)
        memcpy(logp + (size_t)i * d->V, d->dec + (size_t)prefixes[i][lens[i] - 1] * d->V, (size_t)d->V * sizeof(float));
}

/* ------------------------------------------------------------------ fixtures */

typedef struct fixture {
    npz_file npz;
    const float *logp, *dec, *lm; /* lm: the beam_lm fixtures' bigram LM, else NULL */
    int T, V, n_cases, nb, L;
    const double *cases, *score, *sc_dec, *sc_ctc, *sc_lb, *sc_lm;
    const int64_t *n_hyps, *yseq, *ylen;
} fixture;

static const npy_array *get(const fixture *f, const char *name, npy_dtype dt)
{
    const npy_array *a = npz_get(&f->npz, name);
    cr_assert_not_null(a, "fixture has no %s", name);
    cr_assert_eq(a->dtype, dt, "%s: dtype", name);
    return a;
}

/* test/fixtures/<dir>/<name>.npz: dir beam (make_beam_fixtures.py) or beam_lm (with an LM,
 * make_beam_lm_fixtures.py; its cases have a lm_weight column). */
static void fixture_load_from(fixture *f, const char *dir, const char *name)
{
    memset(f, 0, sizeof *f);
    char *path = xasprintf("%s/test/fixtures/%s/%s.npz", test_root_dir(), dir, name);
    esp_err err;
    cr_assert_eq(npz_read(path, &f->npz, &err), 0, "%s (make it with scripts/make_%s_fixtures.py)", err.msg, dir);
    free(path);
    const npy_array *lp = get(f, "logp", NPY_F32), *y = get(f, "yseq", NPY_I64);
    f->T = (int)lp->shape[0], f->V = (int)lp->shape[1];
    f->logp = lp->data;
    f->dec = get(f, "dec", NPY_F32)->data;
    f->cases = get(f, "cases", NPY_F64)->data;
    f->n_cases = (int)y->shape[0], f->nb = (int)y->shape[1], f->L = (int)y->shape[2];
    f->yseq = y->data;
    f->n_hyps = get(f, "n_hyps", NPY_I64)->data;
    f->ylen = get(f, "ylen", NPY_I64)->data;
    f->score = get(f, "score", NPY_F64)->data;
    f->sc_dec = get(f, "sc_decoder", NPY_F64)->data;
    f->sc_ctc = get(f, "sc_ctc", NPY_F64)->data;
    f->sc_lb = get(f, "sc_length_bonus", NPY_F64)->data;
    if (npz_get(&f->npz, "lm")) {
        f->lm = get(f, "lm", NPY_F32)->data;
        f->sc_lm = get(f, "sc_lm", NPY_F64)->data;
        cr_assert_eq(get(f, "cases", NPY_F64)->shape[1], 7);
    }
}

static void fixture_load(fixture *f, const char *name) { fixture_load_from(f, "beam", name); }

static beam_search_opts case_opts(const fixture *f, int c)
{
    if (f->lm) { /* [beam, nbest, ctc_weight, lm_weight, penalty, maxlenratio, minlenratio] */
        const double *r = f->cases + (size_t)c * 7;
        return (beam_search_opts){.beam_size = (int)r[0], .nbest = (int)r[1], .ctc_weight = r[2], .lm_weight = r[3],
                                  .penalty = r[4], .maxlenratio = r[5], .minlenratio = r[6]};
    }
    const double *r = f->cases + (size_t)c * 6;
    return (beam_search_opts){.beam_size = (int)r[0], .nbest = (int)r[1], .ctc_weight = r[2], .penalty = r[3],
                              .maxlenratio = r[4], .minlenratio = r[5]};
}

/* A per-scorer score: NaN in the fixture means the scorer is off (ESPnet leaves it out); ours is 0. */
static void expect_scorer(double ours, double ref, const char *what, int c, int k)
{
    if (isnan(ref)) cr_assert_eq(ours, 0.0, "case %d hyp %d: %s is off but scored %g", c, k, what, ours);
    else cr_assert(fabs(ours - ref) <= 1e-4, "case %d hyp %d: %s %.6f, ESPnet %.6f", c, k, what, ours, ref);
}

static int check_fixture_in(const char *dir, const char *name)
{
    fixture f;
    fixture_load_from(&f, dir, name);
    beam_search *w = beam_search_new();
    table_dec td = {.dec = f.dec, .V = f.V}, tl = {.dec = f.lm, .V = f.V};
    bs_scorer att = {.score = table_score, .ctx = &td}, lm = {.score = table_lm_score, .ctx = &tl};
    double worst = 0.0;
    int checked = 0;
    for (int c = 0; c < f.n_cases; c++) {
        beam_search_opts o = case_opts(&f, c);
        bs_nbest nb;
        beam_search_run(w, f.logp, f.T, f.V, &att, f.lm ? &lm : NULL, &o, &nb);
        cr_assert_eq(nb.n, (int)f.n_hyps[c], "%s case %d (beam %d, ctc_weight %g, lm_weight %g, penalty %g, "
                     "maxlenratio %g): %d hypotheses, ESPnet %d", name, c, o.beam_size, o.ctc_weight, o.lm_weight,
                     o.penalty, o.maxlenratio, nb.n, (int)f.n_hyps[c]);
        for (int k = 0; k < nb.n; k++) {
            size_t at = (size_t)c * f.nb + (size_t)k;
            const bs_hyp *h = &nb.hyps[k];
            cr_assert_eq(h->n_ids, (int)f.ylen[at], "%s case %d hyp %d: length %d, ESPnet %d", name, c, k, h->n_ids,
                         (int)f.ylen[at]);
            for (int j = 0; j < h->n_ids; j++)
                cr_assert_eq(h->ids[j], (int)f.yseq[at * f.L + j], "%s case %d hyp %d: token %d differs", name, c, k, j);
            cr_assert(fabs(h->score - f.score[at]) <= 1e-4, "%s case %d hyp %d: score %.6f, ESPnet %.6f", name, c, k,
                      h->score, f.score[at]);
            worst = fmax(worst, fabs(h->score - f.score[at]));
            expect_scorer(h->decoder, f.sc_dec[at], "decoder", c, k);
            expect_scorer(h->ctc, f.sc_ctc[at], "ctc", c, k);
            expect_scorer(h->length_bonus, f.sc_lb[at], "length_bonus", c, k);
            if (f.lm) expect_scorer(h->lm, f.sc_lm[at], "lm", c, k);
            else cr_assert_eq(h->lm, 0.0);
            checked++;
        }
        bs_nbest_free(&nb);
    }
    cr_log_info("%s: %d cases, %d hypotheses, largest score difference %.3g", name, f.n_cases, checked, worst);
    beam_search_free(w);
    npz_free(&f.npz);
    return checked;
}

TestSuite(beam_search);

Test(beam_search, espnet_parity_t24_v12) { cr_assert_gt(check_fixture_in("beam", "utt_t24_v12"), 50); }
Test(beam_search, espnet_parity_t32_v15) { cr_assert_gt(check_fixture_in("beam", "utt_t32_v15"), 50); }
Test(beam_search, espnet_parity_t40_v20) { cr_assert_gt(check_fixture_in("beam", "utt_t40_v20"), 50); }

/* Shallow fusion: ESPnet's search with a bigram-table LM beside the decoder, CTC and length bonus. */
Test(beam_search, espnet_parity_with_lm_t24_v12) { cr_assert_gt(check_fixture_in("beam_lm", "utt_t24_v12"), 50); }
Test(beam_search, espnet_parity_with_lm_t32_v15) { cr_assert_gt(check_fixture_in("beam_lm", "utt_t32_v15"), 50); }
Test(beam_search, espnet_parity_with_lm_t40_v20) { cr_assert_gt(check_fixture_in("beam_lm", "utt_t40_v20"), 50); }

/* ------------------------------------------------------------------ CTC prefix score */

static double unif(rng *r) { return (double)(rng_next(r) >> 11) / 9007199254740992.0; }

static double lse(double a, double b)
{
    if (a == -INFINITY) return b;
    if (b == -INFINITY) return a;
    return a > b ? a + log1p(exp(b - a)) : b + log1p(exp(a - b));
}

/* log P(the output starts with l[0..n)), from a plain CTC forward over l: the sum over the frame t
 * where l's last label is first emitted. n = 0 is the empty prefix (probability 1). */
static double naive_prefix(const float *lp, int T, int V, const int *l, int n)
{
    if (n == 0) return 0.0;
    int S = 2 * n + 1;
    double *a = malloc((size_t)S * sizeof *a), *b = malloc((size_t)S * sizeof *b), total = -INFINITY;
    for (int s = 0; s < S; s++) a[s] = -INFINITY;
    /* Frame 0 (before any frame: state "nothing emitted" is a[-1], handled as the start). */
    for (int t = 0; t < T; t++) {
        const float *x = lp + (size_t)t * V;
        for (int s = 0; s < S; s++) {
            int lab = s % 2 ? l[s / 2] : 0;
            double v;
            if (t == 0) v = s <= 1 ? 0.0 : -INFINITY;
            else {
                v = a[s];
                if (s >= 1) v = lse(v, a[s - 1]);
                if (s >= 2 && s % 2 && l[s / 2] != l[s / 2 - 1]) v = lse(v, a[s - 2]);
            }
            b[s] = v + x[lab];
            /* The last label's first frame: entered from a state before it. */
            if (s == S - 2) {
                double enter = t == 0 ? (S == 3 ? 0.0 : -INFINITY) : a[s - 1];
                if (t > 0 && s >= 2 && (n < 2 || l[n - 1] != l[n - 2])) enter = lse(enter, a[s - 2]);
                total = lse(total, enter + x[lab]);
            }
        }
        memcpy(a, b, (size_t)S * sizeof *a);
    }
    free(a), free(b);
    return total;
}

/* log P(the output is exactly l). */
static double naive_full(const float *lp, int T, int V, const int *l, int n)
{
    int S = 2 * n + 1;
    double *a = malloc((size_t)S * sizeof *a), *b = malloc((size_t)S * sizeof *b);
    for (int t = 0; t < T; t++) {
        const float *x = lp + (size_t)t * V;
        for (int s = 0; s < S; s++) {
            int lab = s % 2 ? l[s / 2] : 0;
            double v;
            if (t == 0) v = s <= 1 ? 0.0 : -INFINITY;
            else {
                v = a[s];
                if (s >= 1) v = lse(v, a[s - 1]);
                if (s >= 2 && s % 2 && l[s / 2] != l[s / 2 - 1]) v = lse(v, a[s - 2]);
            }
            b[s] = v + x[lab];
        }
        memcpy(a, b, (size_t)S * sizeof *a);
    }
    double r = S >= 2 ? lse(a[S - 1], a[S - 2]) : a[0];
    free(a), free(b);
    return r;
}

static float *random_logp(rng *r, int T, int V, double blank_bias)
{
    float *lp = malloc((size_t)T * V * sizeof *lp);
    for (int t = 0; t < T; t++) {
        double z[64], m = -INFINITY, s = 0;
        for (int c = 0; c < V; c++) z[c] = 2.0 * (unif(r) - 0.5) * 3 + (c == 0 ? blank_bias : 0), m = fmax(m, z[c]);
        for (int c = 0; c < V; c++) s += exp(z[c] - m);
        for (int c = 0; c < V; c++) lp[t * V + c] = (float)(z[c] - m - log(s));
    }
    return lp;
}

Test(beam_search, ctc_prefix_score_is_the_prefix_probability)
{
    rng r;
    rng_init(&r, 3);
    enum { T = 9, V = 5 };
    float *lp = random_logp(&r, T, V, 1.0);
    ctc_prefix_scorer s = {.logp = lp, .T = T, .V = V, .blank = 0, .eos = V - 1};
    double state[2 * T], next[2 * T], psi[V], work[T + 2 * V];
    for (int trial = 0; trial < 200; trial++) {
        /* A random prefix g of labels 1..V-2, built up through the scorer's own states. */
        int g[8], n = (int)(unif(&r) * 6);
        ctc_prefix_init_state(&s, state);
        int last = V - 1;
        for (int k = 0; k < n; k++) {
            g[k] = 1 + (int)(unif(&r) * (V - 2));
            ctc_prefix_extend(&s, state, last, k, g[k], next);
            memcpy(state, next, sizeof state);
            last = g[k];
        }
        int ids[] = {1, 3, V - 1, 0};
        int all = trial % 2;
        ctc_prefix_psi(&s, state, last, n, all ? NULL : ids, 4, psi, work);
        for (int c = 0; c < V; c++) {
            g[n] = c;
            double want;
            if (c == 0) want = CTC_LOGZERO;
            else if (c == V - 1) want = naive_full(lp, T, V, g, n);
            else if (!all && c != 1 && c != 3) want = CTC_LOGZERO;
            else want = naive_prefix(lp, T, V, g, n + 1);
            if (want < -1e9) {
                cr_assert(psi[c] < -1e9, "trial %d c %d: %g for an impossible prefix", trial, c, psi[c]);
                continue;
            }
            cr_assert(fabs(psi[c] - want) < 1e-9 * (1 + fabs(want)), "trial %d (|g| %d) c %d: psi %.12g, CTC forward %.12g",
                      trial, n, c, psi[c], want);
        }
    }
    free(lp);
}

/* ------------------------------------------------------------------ search invariants */

/* Greedy on the joint score as ESPnet's beam 1 has it: the pre-beam keeps the decoder's best
 * token (int(1.5 * 1) = 1), CTC scores it and eos; the best of those is taken, until eos or maxlen. */
static int greedy_joint(const float *lp, int T, int V, const float *dec, double cw, double pen, int *out)
{
    int y[128] = {V - 1}, len = 1, eos = V - 1;
    for (int i = 0; i < T; i++) {
        int a = len >= 2 ? y[len - 2] : eos, b = y[len - 1];
        const float *d = dec + ((size_t)a * V + b) * V;
        int top = 0;
        for (int c = 1; c < V; c++) top = d[c] > d[top] ? c : top;
        double prev = naive_prefix(lp, T, V, y + 1, len - 1);
        int cands[2] = {top, eos}, best = -1;
        double best_s = -INFINITY;
        for (int k = 0; k < 2; k++) {
            int c = cands[k];
            y[len] = c;
            double psi = c == 0 ? CTC_LOGZERO : c == eos ? naive_full(lp, T, V, y + 1, len - 1)
                                                         : naive_prefix(lp, T, V, y + 1, len);
            double s = (1 - cw) * d[c] + pen + cw * (psi - prev);
            if (s > best_s) best_s = s, best = c;
        }
        if (best == eos) break;
        y[len++] = best;
    }
    memcpy(out, y + 1, (size_t)(len - 1) * sizeof *out);
    return len - 1;
}

Test(beam_search, beam_1_is_greedy_on_the_joint_score)
{
    fixture f;
    fixture_load(&f, "utt_t24_v12");
    beam_search *w = beam_search_new();
    table_dec td = {.dec = f.dec, .V = f.V};
    bs_scorer att = {.score = table_score, .ctx = &td};
    double weights[] = {0.3, 0.5, 0.8}, pens[] = {0.0, 0.5, -0.5};
    for (int i = 0; i < 3; i++) {
        for (int j = 0; j < 3; j++) {
            beam_search_opts o = {.beam_size = 1, .nbest = 1, .ctc_weight = weights[i], .penalty = pens[j]};
            bs_nbest nb;
            beam_search_run(w, f.logp, f.T, f.V, &att, NULL, &o, &nb);
            int want[128], n = greedy_joint(f.logp, f.T, f.V, f.dec, weights[i], pens[j], want);
            cr_assert_eq(nb.n, 1);
            cr_assert_eq(nb.hyps[0].n_ids, n, "ctc_weight %g penalty %g: length %d, greedy %d", weights[i], pens[j],
                         nb.hyps[0].n_ids, n);
            cr_assert_arr_eq(nb.hyps[0].ids, want, (size_t)n * sizeof(int));
            bs_nbest_free(&nb);
        }
    }
    beam_search_free(w);
    npz_free(&f.npz);
}

static void same_nbest(const bs_nbest *a, const bs_nbest *b, const char *what)
{
    cr_assert_eq(a->n, b->n, "%s", what);
    for (int k = 0; k < a->n; k++) {
        cr_assert_eq(a->hyps[k].n_ids, b->hyps[k].n_ids, "%s", what);
        cr_assert_arr_eq(a->hyps[k].ids, b->hyps[k].ids, (size_t)a->hyps[k].n_ids * sizeof(int), "%s", what);
        cr_assert_eq(a->hyps[k].score, b->hyps[k].score, "%s: scores must be bit-identical", what);
        cr_assert_eq(a->hyps[k].ctc, b->hyps[k].ctc, "%s", what);
        cr_assert_eq(a->hyps[k].decoder, b->hyps[k].decoder, "%s", what);
    }
}

Test(beam_search, results_do_not_depend_on_decoder_batching)
{
    fixture f;
    fixture_load(&f, "utt_t40_v20");
    beam_search *w = beam_search_new();
    beam_search_opts o = {.beam_size = 10, .nbest = 5, .ctc_weight = 0.3, .penalty = 0.5};
    table_dec all = {.dec = f.dec, .V = f.V};
    bs_scorer att = {.score = table_score, .ctx = &all};
    bs_nbest ref;
    beam_search_run(w, f.logp, f.T, f.V, &att, NULL, &o, &ref);
    cr_assert_gt(ref.n, 1);
    /* One call per step, every running hypothesis in it (the beam fills up at once here). */
    cr_assert(all.max_n > 4 && all.max_n <= 10, "%d", all.max_n);
    cr_assert_leq(all.calls, f.T);
    for (int mb = 1; mb <= 4; mb++) {
        table_dec td = {.dec = f.dec, .V = f.V};
        att = (bs_scorer){.score = table_score, .ctx = &td, .max_batch = mb};
        bs_nbest nb;
        beam_search_run(w, f.logp, f.T, f.V, &att, NULL, &o, &nb);
        cr_assert_leq(td.max_n, mb);
        cr_assert_eq(td.total, all.total, "the same prefixes are scored");
        same_nbest(&ref, &nb, "max_batch");
        bs_nbest_free(&nb);
    }
    /* A workspace reused after a larger search, and a fresh one, agree. */
    beam_search *fresh = beam_search_new();
    bs_nbest nb;
    att = (bs_scorer){.score = table_score, .ctx = &all};
    beam_search_run(fresh, f.logp, f.T, f.V, &att, NULL, &o, &nb);
    same_nbest(&ref, &nb, "fresh workspace");
    bs_nbest_free(&nb);
    beam_search_free(fresh);
    bs_nbest_free(&ref);
    beam_search_free(w);
    npz_free(&f.npz);
}

Test(beam_search, score_is_the_weighted_sum_and_nbest_is_sorted)
{
    fixture f;
    fixture_load(&f, "utt_t32_v15");
    beam_search *w = beam_search_new();
    table_dec td = {.dec = f.dec, .V = f.V};
    bs_scorer att = {.score = table_score, .ctx = &td};
    beam_search_opts o = {.beam_size = 6, .nbest = 6, .ctc_weight = 0.4, .penalty = 0.7};
    bs_nbest nb;
    beam_search_run(w, f.logp, f.T, f.V, &att, NULL, &o, &nb);
    cr_assert_gt(nb.n, 2);
    for (int k = 0; k < nb.n; k++) {
        const bs_hyp *h = &nb.hyps[k];
        cr_assert_float_eq(h->score, 0.6 * h->decoder + 0.4 * h->ctc + 0.7 * h->length_bonus, 1e-9);
        cr_assert_eq(h->length_bonus, h->n_ids + 1.0, "every token and the eos get the bonus");
        /* ctc sums to log P(the output is exactly ids) */
        cr_assert_float_eq(h->ctc, naive_full(f.logp, f.T, f.V, h->ids, h->n_ids), 1e-9);
        if (k > 0) cr_assert_geq(nb.hyps[k - 1].score, h->score);
    }
    bs_nbest_free(&nb);
    beam_search_free(w);
    npz_free(&f.npz);
}

Test(beam_search, maxlen_and_minlen)
{
    fixture f;
    fixture_load(&f, "utt_t24_v12");
    beam_search *w = beam_search_new();
    table_dec td = {.dec = f.dec, .V = f.V};
    bs_scorer att = {.score = table_score, .ctx = &td};
    /* A fixed maxlen of 2: nothing longer, and hypotheses cut there still end (eos appended). */
    beam_search_opts o = {.beam_size = 4, .nbest = 4, .ctc_weight = 0.5, .maxlenratio = -2.0};
    bs_nbest nb;
    beam_search_run(w, f.logp, f.T, f.V, &att, NULL, &o, &nb);
    cr_assert_gt(nb.n, 0);
    for (int k = 0; k < nb.n; k++) cr_assert_leq(nb.hyps[k].n_ids, 2);
    bs_nbest_free(&nb);
    /* minlen beyond maxlen: no hypothesis can end, so minlenratio steps down by 0.1 until one does. */
    o = (beam_search_opts){.beam_size = 4, .nbest = 4, .ctc_weight = 0.5, .maxlenratio = 0.5, .minlenratio = 0.95};
    beam_search_run(w, f.logp, f.T, f.V, &att, NULL, &o, &nb);
    cr_assert_gt(nb.n, 0);
    for (int k = 0; k < nb.n; k++) cr_assert_geq(nb.hyps[k].n_ids, 8, "%d", nb.hyps[k].n_ids);
    bs_nbest_free(&nb);
    /* minlenratio below 0.1 and no room: nothing (ESPnet returns an empty n-best). */
    o = (beam_search_opts){.beam_size = 2, .nbest = 2, .ctc_weight = 0.5, .maxlenratio = -1.0, .minlenratio = -3.0};
    beam_search_run(w, f.logp, f.T, f.V, &att, NULL, &o, &nb);
    cr_assert_eq(nb.n, 0);
    bs_nbest_free(&nb);
    /* No frames, maxlen T: no step runs. */
    o = (beam_search_opts){.beam_size = 2, .nbest = 2, .ctc_weight = 0.5};
    beam_search_run(w, f.logp, 0, f.V, &att, NULL, &o, &nb);
    cr_assert_eq(nb.n, 0);
    bs_nbest_free(&nb);
    beam_search_free(w);
    npz_free(&f.npz);
}

Test(beam_search, topk_is_sorted_and_ties_go_to_the_lower_index)
{
    double v[] = {1.0, 3.0, NAN, 3.0, -INFINITY, 2.0, 3.0};
    int out[7];
    bs_topk(v, 7, 7, out);
    int want[] = {1, 3, 6, 5, 0, 4, 2};
    cr_assert_arr_eq(out, want, sizeof want);
    bs_topk(v, 7, 2, out);
    cr_assert(out[0] == 1 && out[1] == 3);
    rng r;
    rng_init(&r, 5);
    double big[500];
    for (int i = 0; i < 500; i++) big[i] = (double)(int)(unif(&r) * 40);
    int top[37];
    bs_topk(big, 500, 37, top);
    for (int k = 1; k < 37; k++)
        cr_assert(big[top[k - 1]] > big[top[k]] || (big[top[k - 1]] == big[top[k]] && top[k - 1] < top[k]));
    for (int i = 0, kth = top[36]; i < 500; i++) {
        int in = 0;
        for (int k = 0; k < 37; k++) in |= top[k] == i;
        if (!in) cr_assert(big[i] < big[kth] || (big[i] == big[kth] && i > kth));
    }
}

/* ------------------------------------------------------------------ batches of utterances */

/* A decoder that depends on the utterance: utterance u's distribution after (a, b) is the table's
 * row (a * V + b + 7 * (u + base)) mod V^2 (a valid log-softmax row of another context). */
typedef struct utt_dec {
    const float *dec;
    int V, base;
    int calls;
} utt_dec;

static void utt_dec_score(void *ctx, const int *utt, const int *const *prefixes, const int *lens, int n, float *logp)
{
    utt_dec *d = ctx;
    d->calls++;
    size_t VV = (size_t)d->V * d->V;
    for (int i = 0; i < n; i++) {
        const int *p = prefixes[i];
        int a = lens[i] >= 2 ? p[lens[i] - 2] : d->V - 1, b = p[lens[i] - 1];
        size_t row = ((size_t)a * d->V + (size_t)b + 7 * (size_t)(utt[i] + d->base)) % VV;
        memcpy(logp + (size_t)i * d->V, d->dec + row * d->V, (size_t)d->V * sizeof(float));
    }
}

static void expect_same_nbest(const bs_nbest *a, const bs_nbest *b, const char *what)
{
    cr_assert_eq(a->n, b->n, "%s: %d hypotheses batched, %d alone", what, a->n, b->n);
    for (int k = 0; k < a->n; k++) {
        const bs_hyp *x = &a->hyps[k], *y = &b->hyps[k];
        cr_assert_eq(x->n_ids, y->n_ids, "%s hyp %d: length", what, k);
        cr_assert_arr_eq(x->ids, y->ids, (size_t)x->n_ids * sizeof *x->ids, "%s hyp %d: tokens", what, k);
        cr_assert(x->score == y->score && x->decoder == y->decoder && x->ctc == y->ctc && x->lm == y->lm &&
                  x->length_bonus == y->length_bonus, "%s hyp %d: score %.17g batched, %.17g alone", what, k,
                  x->score, y->score);
    }
}

/* Five utterances of mixed lengths (the fixture's first T - 3u frames), each with its own decoder,
 * with and without the LM, every case of the fixture: batches of every size from every start
 * give each utterance exactly the n-best it gets alone (the scorers here give a prefix the same
 * log-probs in any call, so nothing may differ, scores included), in one decoder call per step. */
static void batch_is_each_alone(const char *dir, const char *name)
{
    fixture f;
    fixture_load_from(&f, dir, name);
    enum { U = 5 };
    bs_utt u[U];
    for (int k = 0; k < U; k++) u[k] = (bs_utt){.ctc_logp = f.logp, .T = f.T - 3 * k};
    beam_search *w = beam_search_new(), *w1 = beam_search_new();
    table_dec tl = {.dec = f.lm, .V = f.V};
    bs_scorer lm = {.score = table_lm_score, .ctx = &tl};
    int compared = 0;
    for (int c = 0; c < f.n_cases; c += test_sanitized() ? 4 : 1) { /* a quarter of the cases under ASan */
        beam_search_opts o = case_opts(&f, c);
        bs_nbest alone[U], batch[U];
        for (int k = 0; k < U; k++) {
            utt_dec d = {.dec = f.dec, .V = f.V, .base = k};
            bs_scorer att = {.score_utts = utt_dec_score, .ctx = &d};
            beam_search_run(w1, u[k].ctc_logp, u[k].T, f.V, &att, f.lm ? &lm : NULL, &o, &alone[k]);
        }
        for (int n = 1; n <= U; n++)
            for (int k0 = 0; k0 + n <= U; k0 += n) {
                utt_dec d = {.dec = f.dec, .V = f.V, .base = k0};
                bs_scorer att = {.score_utts = utt_dec_score, .ctx = &d};
                beam_search_run_batch(w, u + k0, n, f.V, &att, f.lm ? &lm : NULL, &o, batch);
                for (int k = 0; k < n; k++) {
                    char what[96];
                    snprintf(what, sizeof what, "%s case %d batch of %d from %d, utterance %d", name, c, n, k0, k0 + k);
                    expect_same_nbest(&batch[k], &alone[k0 + k], what);
                    bs_nbest_free(&batch[k]);
                    compared++;
                }
            }
        for (int k = 0; k < U; k++) bs_nbest_free(&alone[k]);
    }
    cr_log_info("%s/%s: %d batched searches compared with their utterance alone", dir, name, compared);
    beam_search_free(w);
    beam_search_free(w1);
    npz_free(&f.npz);
}

Test(beam_search, batch_of_utterances_is_each_alone) { batch_is_each_alone("beam", "utt_t32_v15"); }
Test(beam_search, batch_of_utterances_is_each_alone_with_lm) { batch_is_each_alone("beam_lm", "utt_t24_v12"); }

/* One scorer call per step over every running hypothesis of the batch. */
Test(beam_search, batch_scores_all_utterances_in_one_call_per_step)
{
    fixture f;
    fixture_load(&f, "utt_t40_v20");
    bs_utt u[3] = {{f.logp, f.T}, {f.logp, f.T - 5}, {f.logp, f.T - 9}};
    beam_search *w = beam_search_new();
    beam_search_opts o = {.beam_size = 4, .nbest = 2, .ctc_weight = 0.3, .maxlenratio = -6};
    utt_dec d = {.dec = f.dec, .V = f.V};
    bs_scorer att = {.score_utts = utt_dec_score, .ctx = &d};
    bs_nbest nb[3];
    beam_search_run_batch(w, u, 3, f.V, &att, NULL, &o, nb);
    int alone = 0;
    for (int k = 0; k < 3; k++) {
        bs_nbest_free(&nb[k]);
        utt_dec dk = {.dec = f.dec, .V = f.V, .base = k};
        bs_scorer ak = {.score_utts = utt_dec_score, .ctx = &dk};
        beam_search_run(w, u[k].ctc_logp, u[k].T, f.V, &ak, NULL, &o, &nb[k]);
        bs_nbest_free(&nb[k]);
        cr_assert_leq(dk.calls, 6);
        alone = dk.calls > alone ? dk.calls : alone;
    }
    cr_assert_eq(d.calls, alone, "the batch took %d decoder calls, its longest search alone %d", d.calls, alone);
    beam_search_free(w);
    npz_free(&f.npz);
}
