/* ESPnet's BatchBeamSearch with decoder, CTC prefix, length bonus and LM scorers, over one
 * utterance or a batch of them; see beam_search.h. Each utterance's running hypotheses own their
 * prefix and CTC state buffers (carved from two pools, one for the beam and one for the next
 * beam); slots are swapped, never copied, so no buffer is shared. */
#include "core/decode/beam_search.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/log.h"
#include "core/decode/beam_search_topk.h"
#include "core/decode/ctc_prefix_score.h"

#define END_DETECT_M 3
#define END_DETECT_D (-10.0) /* np.log(1 * np.exp(-10)) */

typedef struct hyp {
    int *yseq;         /* <sos> first */
    int len;
    double score, dec, ctc, lb, lm;
    double *r;         /* CTC state: T x 2 */
    double psi;        /* CTC prefix log-probability of yseq (ESPnet's s_prev) */
} hyp;

typedef struct ended {
    bs_hyp h;
    int yseq_len;      /* with <sos> and <eos>, as end_detect counts */
    int order;         /* when it ended: ties keep this order (Python's stable sort) */
} ended;

/* What every utterance's search shares: the scorers and their weights. */
typedef struct run_ctx {
    const bs_scorer *att, *lm;
    int V, beam, pre_beam;  /* pre_beam 0: CTC scores the whole vocabulary */
    int dec_on, ctc_on, lb_on, lm_on;
    double w_dec, w_ctc, w_lb, w_lm;
    double maxlenratio;
} run_ctx;

/* One utterance's search: its CTC scorer, lengths, beams (the running one and the next, their
 * prefix and CTC state buffers carved from two pools) and the hypotheses that ended. */
typedef struct utt_search {
    ctc_prefix_scorer cps;
    int maxlen, minlen;
    double minlenratio;
    hyp *run, *next;
    int n;             /* running hypotheses */
    int row0;          /* the first row of this step's scorer outputs */
    int done;
    int *yseq_pool;
    double *r_pool;
    size_t cap_beam, cap_len, cap_T;
    ended *ended;
    size_t n_ended, cap_ended;
} utt_search;

struct beam_search {
    utt_search *u;
    int cap_u;
    float *att, *lmp;                /* rows x V: the decoder's and the LM's log-probs, rows = every
                                      * running hypothesis of the batch */
    size_t cap_rows_v;
    double *wsc, *psi, *work;        /* beam x V, beam x V, T + 2V: one utterance at a time */
    int *pre, *top;                  /* beam x pre_beam, beam */
    size_t cap_bv, cap_work, cap_pre, cap_top;
    const int **prefixes;
    int *lens, *utt;
    size_t cap_rows;
};

beam_search *beam_search_new(void) { return xcalloc(1, sizeof(beam_search)); }

static void clear_ended(utt_search *u)
{
    for (size_t k = 0; k < u->n_ended; k++) free(u->ended[k].h.ids);
    u->n_ended = 0;
}

void beam_search_free(beam_search *w)
{
    if (!w) return;
    for (int k = 0; k < w->cap_u; k++) {
        utt_search *u = &w->u[k];
        clear_ended(u);
        free(u->run), free(u->next), free(u->yseq_pool), free(u->r_pool), free(u->ended);
    }
    free(w->u);
    free(w->att), free(w->lmp), free(w->wsc), free(w->psi), free(w->work), free(w->pre), free(w->top);
    free(w->prefixes), free(w->lens), free(w->utt);
    free(w);
}

void bs_nbest_free(bs_nbest *nb)
{
    if (!nb) return;
    for (int k = 0; k < nb->n; k++) free(nb->hyps[k].ids);
    free(nb->hyps);
    nb->hyps = NULL;
    nb->n = 0;
}

/* Grows an utterance's beams to B hypotheses of up to L ids over T frames. */
static void reserve_utt(utt_search *u, size_t B, size_t L, size_t T)
{
    if (B <= u->cap_beam && L <= u->cap_len && T <= u->cap_T) return;
    u->cap_beam = B > u->cap_beam ? B : u->cap_beam;
    u->cap_len = L > u->cap_len ? L : u->cap_len;
    u->cap_T = T > u->cap_T ? T : u->cap_T;
    size_t nb = 2 * u->cap_beam;
    free(u->yseq_pool), free(u->r_pool);
    u->yseq_pool = xmalloc(nb * u->cap_len * sizeof *u->yseq_pool);
    u->r_pool = xmalloc(nb * (2 * u->cap_T + 1) * sizeof *u->r_pool);
    u->run = xrealloc(u->run, u->cap_beam * sizeof *u->run);
    u->next = xrealloc(u->next, u->cap_beam * sizeof *u->next);
    for (size_t k = 0; k < nb; k++) {
        hyp *h = k < u->cap_beam ? &u->run[k] : &u->next[k - u->cap_beam];
        h->yseq = u->yseq_pool + k * u->cap_len;
        h->r = u->r_pool + k * (2 * u->cap_T + 1);
    }
}

/* Grows the shared buffers: `rows` scorer rows, beam B, T frames, V tokens, pre-beam P. */
static void reserve(beam_search *w, size_t rows, size_t B, size_t T, size_t V, size_t P)
{
    if (rows > w->cap_rows) {
        w->cap_rows = rows;
        w->prefixes = xrealloc(w->prefixes, rows * sizeof *w->prefixes);
        w->lens = xrealloc(w->lens, rows * sizeof *w->lens);
        w->utt = xrealloc(w->utt, rows * sizeof *w->utt);
    }
    if (rows * V > w->cap_rows_v) {
        w->cap_rows_v = rows * V;
        w->att = xrealloc(w->att, w->cap_rows_v * sizeof *w->att);
        w->lmp = xrealloc(w->lmp, w->cap_rows_v * sizeof *w->lmp);
    }
    if (B * V > w->cap_bv) {
        w->cap_bv = B * V;
        w->wsc = xrealloc(w->wsc, w->cap_bv * sizeof *w->wsc);
        w->psi = xrealloc(w->psi, w->cap_bv * sizeof *w->psi);
    }
    if (B > w->cap_top) {
        w->cap_top = B;
        w->top = xrealloc(w->top, B * sizeof *w->top);
    }
    if (T + 2 * V > w->cap_work) {
        w->cap_work = T + 2 * V;
        w->work = xrealloc(w->work, w->cap_work * sizeof *w->work);
    }
    if (B * P > w->cap_pre) {
        w->cap_pre = B * P;
        w->pre = xrealloc(w->pre, w->cap_pre * sizeof *w->pre);
    }
}

static void swap_hyp(hyp *a, hyp *b)
{
    hyp t = *a;
    *a = *b;
    *b = t;
}

/* A full scorer's log-probs of the n prefixes in w->prefixes into out (n x V), max_batch per call. */
static void score_full(beam_search *w, const run_ctx *c, const bs_scorer *sc, int n, float *out)
{
    int chunk = sc->max_batch > 0 ? sc->max_batch : n;
    for (int i0 = 0; i0 < n; i0 += chunk) {
        int m = n - i0 < chunk ? n - i0 : chunk;
        float *o = out + (size_t)i0 * c->V;
        if (sc->score_utts) sc->score_utts(sc->ctx, w->utt + i0, w->prefixes + i0, w->lens + i0, m, o);
        else sc->score(sc->ctx, w->prefixes + i0, w->lens + i0, m, o);
    }
}

/* Weighted scores of every (hypothesis, token) of u's beam into w->wsc, as BatchBeamSearch.search
 * sums them: full scorers (rows u->row0.. of w->att, w->lmp), then the CTC partial scores, then the
 * hypothesis' score. */
static void score_step(beam_search *w, const run_ctx *c, const utt_search *u)
{
    const int V = c->V, P = c->pre_beam;
    for (int i = 0; i < u->n; i++) {
        const hyp *h = &u->run[i];
        double *ws = w->wsc + (size_t)i * V;
        size_t row = (size_t)(u->row0 + i) * V;
        const float *att = w->att + row, *lmp = w->lmp + row;
        for (int v = 0; v < V; v++) {
            double s = c->dec_on ? c->w_dec * att[v] : 0.0;
            if (c->lb_on) s += c->w_lb;
            ws[v] = c->lm_on ? s + c->w_lm * lmp[v] : s;
        }
        if (c->ctc_on) {
            int *ids = NULL;
            if (P > 0) {
                ids = w->pre + (size_t)i * P;
                bs_topk(ws, V, P, ids);
            }
            double *psi = w->psi + (size_t)i * V;
            ctc_prefix_psi(&u->cps, h->r, h->yseq[h->len - 1], h->len - 1, ids, P, psi, w->work);
            for (int v = 0; v < V; v++) ws[v] += c->w_ctc * (psi[v] - h->psi);
        }
        for (int v = 0; v < V; v++) ws[v] += h->score;
    }
}

/* The CTC state column ESPnet keeps for token v of hypothesis i: v's own, or, for a token the
 * pre-beam left out, the last pre-beam column (its scoring_idmap gives -1 there). */
static int ctc_state_column(const beam_search *w, const run_ctx *c, int i, int v)
{
    if (c->pre_beam == 0) return v;
    const int *ids = w->pre + (size_t)i * c->pre_beam;
    for (int k = 0; k < c->pre_beam; k++)
        if (ids[k] == v) return v;
    return ids[c->pre_beam - 1];
}

/* One step of u: scores, the beam_size best extensions into u->next; returns how many. */
static int search_step(beam_search *w, const run_ctx *c, utt_search *u, int last_step)
{
    const int V = c->V, n = u->n;
    score_step(w, c, u);
    int k = (size_t)n * V < (size_t)c->beam ? n * V : c->beam;
    bs_topk(w->wsc, n * V, k, w->top);
    for (int j = 0; j < k; j++) {
        int i = w->top[j] / V, v = w->top[j] % V;
        size_t row = (size_t)u->row0 * V + (size_t)w->top[j];
        const hyp *h = &u->run[i];
        hyp *g = &u->next[j];
        memcpy(g->yseq, h->yseq, (size_t)h->len * sizeof *g->yseq);
        g->yseq[h->len] = v;
        g->len = h->len + 1;
        g->score = w->wsc[w->top[j]];
        g->dec = h->dec + (c->dec_on ? w->att[row] : 0.0);
        g->lb = h->lb + (c->lb_on ? 1.0 : 0.0);
        g->lm = h->lm + (c->lm_on ? w->lmp[row] : 0.0);
        g->ctc = h->ctc;
        g->psi = h->psi;
        if (c->ctc_on) {
            double p = w->psi[w->top[j]];
            g->ctc = h->ctc + (p - h->psi);
            g->psi = p;
            /* An ended or last-step hypothesis never extends again: its state is not needed. */
            if (v != u->cps.eos && !last_step)
                ctc_prefix_extend(&u->cps, h->r, h->yseq[h->len - 1], h->len - 1, ctc_state_column(w, c, i, v),
                                  g->r);
        }
    }
    return k;
}

static void push_ended(utt_search *u, const hyp *h)
{
    if (u->n_ended == u->cap_ended) {
        u->cap_ended = u->cap_ended ? 2 * u->cap_ended : 64;
        u->ended = xrealloc(u->ended, u->cap_ended * sizeof *u->ended);
    }
    ended *e = &u->ended[u->n_ended];
    int n = h->len - 2;
    e->h = (bs_hyp){.ids = xmalloc(((size_t)n + 1) * sizeof(int)), .n_ids = n, .score = h->score,
                    .decoder = h->dec, .ctc = h->ctc, .length_bonus = h->lb, .lm = h->lm};
    memcpy(e->h.ids, h->yseq + 1, (size_t)n * sizeof(int));
    e->yseq_len = h->len;
    e->order = (int)u->n_ended++;
}

/* BatchBeamSearch.post_process: eos at the last step, ended hypotheses out of the beam (into the
 * ended list from step minlen on). The next beam becomes the running one; returns its size. */
static int post_process(utt_search *u, int n, int i)
{
    int eos = u->cps.eos, kept = 0;
    for (int j = 0; j < n; j++) {
        hyp *h = &u->next[j];
        if (i == u->maxlen - 1) h->yseq[h->len++] = eos;
        if (h->yseq[h->len - 1] == eos) {
            if (i >= u->minlen) push_ended(u, h);
        } else {
            swap_hyp(&u->run[kept++], h);
        }
    }
    return kept;
}

/* espnet/nets/e2e_asr_common.py end_detect: for each of the last M lengths, the best ended
 * hypothesis of that length is more than |D_end| below the best overall. */
static int end_detect(const utt_search *u, int i)
{
    if (u->n_ended == 0) return 0;
    double best = -INFINITY;
    for (size_t k = 0; k < u->n_ended; k++) best = u->ended[k].h.score > best ? u->ended[k].h.score : best;
    int count = 0;
    for (int m = 0; m < END_DETECT_M; m++) {
        double same = -INFINITY;
        int found = 0;
        for (size_t k = 0; k < u->n_ended; k++) {
            if (u->ended[k].yseq_len != i - m) continue;
            same = !found || u->ended[k].h.score > same ? u->ended[k].h.score : same;
            found = 1;
        }
        if (found && same - best < END_DETECT_D) count++;
    }
    return count == END_DETECT_M;
}

/* The start of BeamSearch.forward for one minlen: <sos> alone in the beam, nothing ended. */
static void start_utt(const run_ctx *c, utt_search *u)
{
    clear_ended(u);
    u->minlen = u->minlenratio < 0 ? (int)(-u->minlenratio) : (int)(u->minlenratio * u->cps.T);
    hyp *h0 = &u->run[0];
    h0->yseq[0] = u->cps.eos; /* <sos> = <eos> */
    h0->len = 1;
    h0->score = h0->dec = h0->ctc = h0->lb = h0->lm = h0->psi = 0.0;
    if (c->ctc_on) ctc_prefix_init_state(&u->cps, h0->r);
    u->n = 1;
    u->done = u->maxlen <= 0;
}

/* The running prefixes of every utterance still searching into w->prefixes (rows in utterance
 * order, u->row0 the first of each); returns how many. */
static int gather_rows(beam_search *w, const int *todo, int m)
{
    int rows = 0;
    for (int k = 0; k < m; k++) {
        utt_search *u = &w->u[todo[k]];
        if (u->done) continue;
        u->row0 = rows;
        for (int i = 0; i < u->n; i++, rows++)
            w->prefixes[rows] = u->run[i].yseq, w->lens[rows] = u->run[i].len, w->utt[rows] = todo[k];
    }
    return rows;
}

/* BeamSearch.forward's loop for utterances todo[0..m) together: one scorer call per step over all
 * their running hypotheses, the rest per utterance; each stops on its own. */
static void search(beam_search *w, const run_ctx *c, const int *todo, int m)
{
    for (int k = 0; k < m; k++) start_utt(c, &w->u[todo[k]]);
    for (int i = 0;; i++) {
        int rows = gather_rows(w, todo, m);
        if (rows == 0) break;
        if (c->dec_on) score_full(w, c, c->att, rows, w->att);
        if (c->lm_on) score_full(w, c, c->lm, rows, w->lmp);
        for (int k = 0; k < m; k++) {
            utt_search *u = &w->u[todo[k]];
            if (u->done) continue;
            int n = search_step(w, c, u, i == u->maxlen - 1);
            u->n = post_process(u, n, i);
            if (c->maxlenratio == 0.0 && end_detect(u, i)) u->done = 1;
            if (u->n == 0 || i + 1 >= u->maxlen) u->done = 1;
        }
    }
}

static int by_score(const void *pa, const void *pb)
{
    const ended *a = pa, *b = pb;
    if (a->h.score != b->h.score) return a->h.score > b->h.score ? -1 : 1;
    return (a->order > b->order) - (a->order < b->order);
}

static int max_len(double maxlenratio, int T)
{
    if (maxlenratio == 0) return T;
    if (maxlenratio < 0) return (int)(-maxlenratio) ;
    int m = (int)(maxlenratio * T);
    return m > 1 ? m : 1;
}

/* The sorted n-best of u into out; u's ended list is emptied. */
static void take_nbest(utt_search *u, int nbest, bs_nbest *out)
{
    qsort(u->ended, u->n_ended, sizeof *u->ended, by_score);
    out->n = (int)(u->n_ended < (size_t)nbest ? u->n_ended : (size_t)nbest);
    out->hyps = xcalloc((size_t)out->n + 1, sizeof *out->hyps);
    for (int k = 0; k < out->n; k++) {
        out->hyps[k] = u->ended[k].h;
        u->ended[k].h.ids = NULL; /* moved */
    }
    clear_ended(u);
}

void beam_search_run_batch(beam_search *w, const bs_utt *utts, int n, int V, const bs_scorer *att,
                           const bs_scorer *lm, const beam_search_opts *o, bs_nbest *out)
{
    ESP_CHECK(n >= 1 && o->beam_size >= 1 && o->nbest >= 1 && V >= 2);
    ESP_CHECK(o->ctc_weight >= 0.0 && o->ctc_weight <= 1.0 && o->lm_weight >= 0.0);
    run_ctx c = {.att = att, .lm = lm, .V = V, .beam = o->beam_size, .w_dec = 1.0 - o->ctc_weight,
                 .w_ctc = o->ctc_weight, .w_lb = o->penalty, .w_lm = o->lm_weight, .maxlenratio = o->maxlenratio};
    c.dec_on = c.w_dec != 0.0, c.ctc_on = c.w_ctc != 0.0, c.lb_on = c.w_lb != 0.0, c.lm_on = c.w_lm != 0.0;
    ESP_CHECK(!c.dec_on || (att && (att->score || att->score_utts)));
    ESP_CHECK(!c.lm_on || (lm && (lm->score || lm->score_utts)));
    int pre = (int)(1.5 * o->beam_size);
    c.pre_beam = c.ctc_on && c.dec_on && pre < V ? pre : 0;
    if (n > w->cap_u) {
        w->u = xrealloc(w->u, (size_t)n * sizeof *w->u);
        memset(w->u + w->cap_u, 0, (size_t)(n - w->cap_u) * sizeof *w->u);
        w->cap_u = n;
    }
    int maxT = 0, *todo = xmalloc((size_t)n * sizeof *todo);
    for (int k = 0; k < n; k++) {
        utt_search *u = &w->u[k];
        ESP_CHECK(utts[k].T >= 0 && (!c.ctc_on || utts[k].ctc_logp));
        u->cps = (ctc_prefix_scorer){.logp = utts[k].ctc_logp, .T = utts[k].T, .V = V, .blank = 0, .eos = V - 1};
        u->maxlen = max_len(o->maxlenratio, utts[k].T);
        u->minlenratio = o->minlenratio;
        reserve_utt(u, (size_t)o->beam_size, (size_t)u->maxlen + 2, (size_t)utts[k].T);
        maxT = utts[k].T > maxT ? utts[k].T : maxT;
        todo[k] = k;
    }
    reserve(w, (size_t)n * o->beam_size, (size_t)o->beam_size, (size_t)maxT, (size_t)V, (size_t)c.pre_beam);
    for (int m = n; m > 0;) {
        search(w, &c, todo, m);
        /* None ended: ESPnet tries again with a smaller minlenratio, down to below 0.1. */
        int again = 0;
        for (int k = 0; k < m; k++) {
            utt_search *u = &w->u[todo[k]];
            if (u->n_ended > 0 || u->minlenratio < 0.1) continue;
            u->minlenratio = u->minlenratio - 0.1 > 0.0 ? u->minlenratio - 0.1 : 0.0;
            todo[again++] = todo[k];
        }
        m = again;
    }
    free(todo);
    for (int k = 0; k < n; k++) take_nbest(&w->u[k], o->nbest, &out[k]);
}

void beam_search_run(beam_search *w, const float *ctc_logp, int T, int V, const bs_scorer *att, const bs_scorer *lm,
                     const beam_search_opts *o, bs_nbest *out)
{
    bs_utt u = {.ctc_logp = ctc_logp, .T = T};
    beam_search_run_batch(w, &u, 1, V, att, lm, o, out);
}
