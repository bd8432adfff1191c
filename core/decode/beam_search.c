/* ESPnet's BatchBeamSearch with decoder, CTC prefix, length bonus and LM scorers; see beam_search.h:
 * its steps (beam_search_steps.h) and the whole-utterance loop over them, for one utterance or a
 * batch of them (each in a workspace of its own, one scorer call per step over all of them). */
#include "core/decode/beam_search.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/log.h"
#include "core/decode/beam_search_topk.h"
#include "core/decode/beam_search_steps.h"

#define END_DETECT_M 3
#define END_DETECT_D (-10.0) /* np.log(1 * np.exp(-10)) */

/* One utterance of beam_search_run_batch: its workspace, its CTC scorer and lengths, its beam. */
struct bs_batch_utt {
    beam_search *w;
    bs_ctx c;
    int n;             /* running hypotheses */
    int row0;          /* the first of this step's scorer rows that are its own */
    int done;
    double minlenratio;
};

beam_search *beam_search_new(void) { return xcalloc(1, sizeof(beam_search)); }

void bs_clear_ended(beam_search *w)
{
    for (size_t k = 0; k < w->n_ended; k++) free(w->ended[k].h.ids);
    w->n_ended = 0;
}

void beam_search_free(beam_search *w)
{
    if (!w) return;
    bs_clear_ended(w);
    free(w->run), free(w->next), free(w->prev), free(w->yseq_pool), free(w->r_pool);
    free(w->att), free(w->lmp), free(w->wsc), free(w->psi), free(w->work), free(w->pre), free(w->top);
    free(w->prefixes), free(w->lens), free(w->ended);
    for (int k = 0; k < w->cap_batch; k++) beam_search_free(w->batch[k].w);
    free(w->batch), free(w->row_pfx), free(w->row_len), free(w->row_utt), free(w->row_att), free(w->row_lmp);
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

/* A slot's buffers at index k of the pools of cap_len ids and cap_T frames. */
static void carve(const beam_search *w, bs_slot *h, size_t k, int *yseq_pool, double *r_pool)
{
    h->yseq = yseq_pool + k * w->cap_len;
    h->r = r_pool + k * (2 * w->cap_T + 1);
}

/* The slots: beam B, prefixes of up to L ids, CTC states of T frames (kept as they grow). */
static void reserve_slots(beam_search *w, size_t B, size_t L, size_t T)
{
    if (B > w->cap_beam || L > w->cap_len || T > w->cap_T) {
        size_t ob = w->cap_beam, ol = w->cap_len, ot = w->cap_T;
        bs_slot *old[3] = {w->run, w->next, w->prev};
        w->cap_beam = B > w->cap_beam ? B : w->cap_beam;
        w->cap_len = L > w->cap_len ? L : w->cap_len;
        w->cap_T = T > w->cap_T ? T : w->cap_T;
        size_t nb = 3 * w->cap_beam;
        int *yp = xmalloc(nb * w->cap_len * sizeof *yp);
        double *rp = xmalloc(nb * (2 * w->cap_T + 1) * sizeof *rp);
        bs_slot *arr[3];
        for (int a = 0; a < 3; a++) {
            arr[a] = xcalloc(w->cap_beam, sizeof *arr[a]);
            for (size_t k = 0; k < w->cap_beam; k++) {
                bs_slot *h = &arr[a][k];
                if (k < ob) *h = old[a][k]; /* the hypothesis it holds, copied below */
                carve(w, h, (size_t)a * w->cap_beam + k, yp, rp);
                if (k < ob) {
                    memcpy(h->yseq, old[a][k].yseq, ol * sizeof *yp);
                    memcpy(h->r, old[a][k].r, (2 * ot + 1) * sizeof *rp);
                }
            }
            free(old[a]);
        }
        free(w->yseq_pool), free(w->r_pool);
        w->yseq_pool = yp, w->r_pool = rp;
        w->run = arr[0], w->next = arr[1], w->prev = arr[2];
    }
}

/* A step's work buffers: beam B, T frames, V tokens, pre-beam P. */
static void reserve_scratch(beam_search *w, size_t B, size_t T, size_t V, size_t P)
{
    if (B > w->cap_top) {
        w->cap_top = B;
        w->prefixes = xrealloc(w->prefixes, B * sizeof *w->prefixes);
        w->lens = xrealloc(w->lens, B * sizeof *w->lens);
        w->top = xrealloc(w->top, B * sizeof *w->top);
    }
    if (B * V > w->cap_bv) {
        w->cap_bv = B * V;
        w->att = xrealloc(w->att, w->cap_bv * sizeof *w->att);
        w->lmp = xrealloc(w->lmp, w->cap_bv * sizeof *w->lmp);
        w->wsc = xrealloc(w->wsc, w->cap_bv * sizeof *w->wsc);
        w->psi = xrealloc(w->psi, w->cap_bv * sizeof *w->psi);
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

void bs_reserve(beam_search *w, size_t B, size_t L, size_t T, size_t V, size_t P)
{
    reserve_slots(w, B, L, T);
    reserve_scratch(w, B, T, V, P);
}

static void swap_hyp(bs_slot *a, bs_slot *b)
{
    bs_slot t = *a;
    *a = *b;
    *b = t;
}

/* A full scorer's log-probs of n prefixes into out (n x V), max_batch prefixes per call; utt[i] is
 * prefix i's utterance (NULL: all 0). */
static void score_full(const bs_scorer *sc, int V, const int *utt, const int *const *pfx, const int *lens, int n,
                       float *out)
{
    int chunk = sc->max_batch > 0 ? sc->max_batch : n;
    for (int i0 = 0; i0 < n; i0 += chunk) {
        int m = n - i0 < chunk ? n - i0 : chunk;
        float *o = out + (size_t)i0 * V;
        if (sc->score_utts) sc->score_utts(sc->ctx, utt ? utt + i0 : NULL, pfx + i0, lens + i0, m, o);
        else sc->score(sc->ctx, pfx + i0, lens + i0, m, o);
    }
}

/* Weighted scores of every (hypothesis, token) of w's beam into x->wsc (x: the workspace whose
 * step buffers are used), as BatchBeamSearch.search sums them: the full scorers' (att, lmp: n x V,
 * already computed), then the CTC partial scores, then the hypothesis' score. */
static void score_step(const beam_search *w, beam_search *x, const bs_ctx *c, int n, const float *att_rows,
                       const float *lmp_rows)
{
    const int V = c->V, P = c->pre_beam;
    for (int i = 0; i < n; i++) {
        const bs_slot *h = &w->run[i];
        double *ws = x->wsc + (size_t)i * V;
        const float *att = att_rows + (size_t)i * V, *lmp = lmp_rows + (size_t)i * V;
        for (int v = 0; v < V; v++) {
            double s = c->dec_on ? c->w_dec * att[v] : 0.0;
            if (c->lb_on) s += c->w_lb;
            ws[v] = c->lm_on ? s + c->w_lm * lmp[v] : s;
        }
        if (c->ctc_on) {
            int *ids = NULL;
            if (P > 0) {
                ids = x->pre + (size_t)i * P;
                bs_topk(ws, V, P, ids);
            }
            double *psi = x->psi + (size_t)i * V;
            ctc_prefix_psi(&c->cps, h->r, h->yseq[h->len - 1], h->len - 1, ids, P, psi, x->work);
            for (int v = 0; v < V; v++) ws[v] += c->w_ctc * (psi[v] - h->psi);
        }
        for (int v = 0; v < V; v++) ws[v] += h->score;
    }
}

/* The CTC state column ESPnet keeps for token v of hypothesis i: v's own, or, for a token the
 * pre-beam left out, the last pre-beam column (its scoring_idmap gives -1 there). */
static int ctc_state_column(const beam_search *w, const bs_ctx *c, int i, int v)
{
    if (c->pre_beam == 0) return v;
    const int *ids = w->pre + (size_t)i * c->pre_beam;
    for (int k = 0; k < c->pre_beam; k++)
        if (ids[k] == v) return v;
    return ids[c->pre_beam - 1];
}

/* bs_search_step once the full scorers' log-probs of the n running hypotheses are in att, lmp;
 * x's step buffers (w's own, or the batch's shared ones). */
static int step_scored(beam_search *w, beam_search *x, const bs_ctx *c, int n, const float *att, const float *lmp,
                       int last_step)
{
    const int V = c->V;
    score_step(w, x, c, n, att, lmp);
    int k = (size_t)n * V < (size_t)c->beam ? n * V : c->beam;
    bs_topk(x->wsc, n * V, k, x->top);
    for (int j = 0; j < k; j++) {
        int i = x->top[j] / V, v = x->top[j] % V;
        const bs_slot *h = &w->run[i];
        bs_slot *g = &w->next[j];
        memcpy(g->yseq, h->yseq, (size_t)h->len * sizeof *g->yseq);
        g->yseq[h->len] = v;
        g->len = h->len + 1;
        g->score = x->wsc[x->top[j]];
        g->dec = h->dec + (c->dec_on ? att[x->top[j]] : 0.0);
        g->lb = h->lb + (c->lb_on ? 1.0 : 0.0);
        g->lm = h->lm + (c->lm_on ? lmp[x->top[j]] : 0.0);
        g->ctc = h->ctc;
        g->psi = h->psi;
        if (c->ctc_on) {
            double p = x->psi[x->top[j]];
            g->ctc = h->ctc + (p - h->psi);
            g->psi = p;
            /* An ended or last-step hypothesis never extends again: its state is not needed. */
            if (v != c->cps.eos && !last_step)
                ctc_prefix_extend(&c->cps, h->r, h->yseq[h->len - 1], h->len - 1, ctc_state_column(x, c, i, v),
                                  g->r);
        }
    }
    return k;
}

int bs_search_step(beam_search *w, const bs_ctx *c, int n, int last_step)
{
    for (int i = 0; i < n; i++) w->prefixes[i] = w->run[i].yseq, w->lens[i] = w->run[i].len;
    if (c->dec_on) score_full(c->att, c->V, NULL, w->prefixes, w->lens, n, w->att);
    if (c->lm_on) score_full(c->lm, c->V, NULL, w->prefixes, w->lens, n, w->lmp);
    return step_scored(w, w, c, n, w->att, w->lmp, last_step);
}

void bs_push_ended(beam_search *w, const bs_slot *h)
{
    if (w->n_ended == w->cap_ended) {
        w->cap_ended = w->cap_ended ? 2 * w->cap_ended : 64;
        w->ended = xrealloc(w->ended, w->cap_ended * sizeof *w->ended);
    }
    bs_ended *e = &w->ended[w->n_ended];
    int n = h->len - 2;
    e->h = (bs_hyp){.ids = xmalloc(((size_t)n + 1) * sizeof(int)), .n_ids = n, .score = h->score,
                    .decoder = h->dec, .ctc = h->ctc, .length_bonus = h->lb, .lm = h->lm};
    memcpy(e->h.ids, h->yseq + 1, (size_t)n * sizeof(int));
    e->yseq_len = h->len;
    e->order = (int)w->n_ended++;
}

int bs_post_process(beam_search *w, const bs_ctx *c, int n, int i)
{
    int eos = c->cps.eos, kept = 0;
    for (int j = 0; j < n; j++) {
        bs_slot *h = &w->next[j];
        if (i == c->maxlen - 1) h->yseq[h->len++] = eos;
        if (h->yseq[h->len - 1] == eos) {
            if (i >= c->minlen) bs_push_ended(w, h);
        } else {
            swap_hyp(&w->run[kept++], h);
        }
    }
    return kept;
}

/* espnet/nets/e2e_asr_common.py end_detect: for each of the last M lengths, the best ended
 * hypothesis of that length is more than |D_end| below the best overall. */
int bs_end_detect(const beam_search *w, int i)
{
    if (w->n_ended == 0) return 0;
    double best = -INFINITY;
    for (size_t k = 0; k < w->n_ended; k++) best = w->ended[k].h.score > best ? w->ended[k].h.score : best;
    int count = 0;
    for (int m = 0; m < END_DETECT_M; m++) {
        double same = -INFINITY;
        int found = 0;
        for (size_t k = 0; k < w->n_ended; k++) {
            if (w->ended[k].yseq_len != i - m) continue;
            same = !found || w->ended[k].h.score > same ? w->ended[k].h.score : same;
            found = 1;
        }
        if (found && same - best < END_DETECT_D) count++;
    }
    return count == END_DETECT_M;
}

void bs_start(beam_search *w, const bs_ctx *c)
{
    bs_slot *h0 = &w->run[0];
    h0->yseq[0] = c->cps.eos; /* <sos> = <eos> */
    h0->len = 1;
    h0->score = h0->dec = h0->ctc = h0->lb = h0->lm = h0->psi = 0.0;
    if (c->ctc_on) ctc_prefix_init_state(&c->cps, h0->r);
    w->n_prev = 0;
}

/* The running prefixes of every utterance still searching into w's scorer rows (utterance by
 * utterance, row0 the first of each); returns how many. */
static int gather_rows(beam_search *w, const int *todo, int m)
{
    int rows = 0;
    for (int k = 0; k < m; k++) {
        struct bs_batch_utt *u = &w->batch[todo[k]];
        if (u->done) continue;
        u->row0 = rows;
        for (int i = 0; i < u->n; i++, rows++)
            w->row_pfx[rows] = u->w->run[i].yseq, w->row_len[rows] = u->w->run[i].len, w->row_utt[rows] = todo[k];
    }
    return rows;
}

/* BeamSearch.forward's loop for one minlen, for utterances todo[0..m) together: one scorer call per
 * step over all their running hypotheses, the rest per utterance; each stops on its own and its
 * ended list holds what it found. */
static void search(beam_search *w, const bs_ctx *c, const int *todo, int m, double maxlenratio)
{
    for (int k = 0; k < m; k++) {
        struct bs_batch_utt *u = &w->batch[todo[k]];
        u->c.minlen = u->minlenratio < 0 ? (int)(-u->minlenratio) : (int)(u->minlenratio * u->c.cps.T);
        bs_clear_ended(u->w);
        bs_start(u->w, &u->c);
        u->n = 1;
        u->done = u->c.maxlen <= 0;
    }
    for (int i = 0;; i++) {
        int rows = gather_rows(w, todo, m);
        if (rows == 0) break;
        if (c->dec_on) score_full(c->att, c->V, w->row_utt, w->row_pfx, w->row_len, rows, w->row_att);
        if (c->lm_on) score_full(c->lm, c->V, w->row_utt, w->row_pfx, w->row_len, rows, w->row_lmp);
        for (int k = 0; k < m; k++) {
            struct bs_batch_utt *u = &w->batch[todo[k]];
            if (u->done) continue;
            size_t r0 = (size_t)u->row0 * c->V;
            int n = step_scored(u->w, w, &u->c, u->n, w->row_att + r0, w->row_lmp + r0, i == u->c.maxlen - 1);
            u->n = bs_post_process(u->w, &u->c, n, i);
            if (maxlenratio == 0.0 && bs_end_detect(u->w, i)) u->done = 1;
            if (u->n == 0 || i + 1 >= u->c.maxlen) u->done = 1;
        }
    }
}

static int by_score(const void *pa, const void *pb)
{
    const bs_ended *a = pa, *b = pb;
    if (a->h.score != b->h.score) return a->h.score > b->h.score ? -1 : 1;
    return (a->order > b->order) - (a->order < b->order);
}

int beam_search_maxlen(double maxlenratio, int T)
{
    if (maxlenratio == 0) return T;
    if (maxlenratio < 0) return (int)(-maxlenratio);
    int m = (int)(maxlenratio * T);
    return m > 1 ? m : 1;
}

void bs_ctx_init(bs_ctx *c, const float *ctc_logp, int T, int V, const bs_scorer *att, const bs_scorer *lm,
                 const beam_search_opts *o)
{
    ESP_CHECK(o->beam_size >= 1 && o->nbest >= 1 && V >= 2 && T >= 0);
    ESP_CHECK(o->ctc_weight >= 0.0 && o->ctc_weight <= 1.0 && o->lm_weight >= 0.0);
    *c = (bs_ctx){.cps = {.logp = ctc_logp, .T = T, .V = V, .blank = 0, .eos = V - 1}, .att = att, .lm = lm, .V = V,
                  .beam = o->beam_size, .w_dec = 1.0 - o->ctc_weight, .w_ctc = o->ctc_weight, .w_lb = o->penalty,
                  .w_lm = o->lm_weight};
    c->dec_on = c->w_dec != 0.0, c->ctc_on = c->w_ctc != 0.0, c->lb_on = c->w_lb != 0.0, c->lm_on = c->w_lm != 0.0;
    ESP_CHECK(!c->dec_on || (att && (att->score || att->score_utts)));
    ESP_CHECK(!c->lm_on || (lm && (lm->score || lm->score_utts)));
    int pre = (int)(1.5 * o->beam_size);
    c->pre_beam = c->ctc_on && c->dec_on && pre < V ? pre : 0;
}

void bs_take_nbest(beam_search *w, int nbest, bs_nbest *out)
{
    if (w->n_ended > 1) qsort(w->ended, w->n_ended, sizeof *w->ended, by_score); /* none: ended may be NULL */
    out->n = (int)(w->n_ended < (size_t)nbest ? w->n_ended : (size_t)nbest);
    out->hyps = xcalloc((size_t)out->n + 1, sizeof *out->hyps);
    for (int k = 0; k < out->n; k++) {
        out->hyps[k] = w->ended[k].h;
        w->ended[k].h.ids = NULL; /* moved */
    }
    bs_clear_ended(w);
}

/* Room for n utterances' workspaces and `rows` scorer rows of V log-probs. */
static void reserve_batch(beam_search *w, int n, size_t rows, size_t V)
{
    if (n > w->cap_batch) {
        w->batch = xrealloc(w->batch, (size_t)n * sizeof *w->batch);
        memset(w->batch + w->cap_batch, 0, (size_t)(n - w->cap_batch) * sizeof *w->batch);
        for (int k = w->cap_batch; k < n; k++) w->batch[k].w = beam_search_new();
        w->cap_batch = n;
    }
    if (rows > w->cap_rows || rows * V > w->cap_rows * w->cap_v) {
        w->cap_rows = rows > w->cap_rows ? rows : w->cap_rows;
        w->cap_v = V > w->cap_v ? V : w->cap_v;
        w->row_pfx = xrealloc(w->row_pfx, w->cap_rows * sizeof *w->row_pfx);
        w->row_len = xrealloc(w->row_len, w->cap_rows * sizeof *w->row_len);
        w->row_utt = xrealloc(w->row_utt, w->cap_rows * sizeof *w->row_utt);
        w->row_att = xrealloc(w->row_att, w->cap_rows * w->cap_v * sizeof *w->row_att);
        w->row_lmp = xrealloc(w->row_lmp, w->cap_rows * w->cap_v * sizeof *w->row_lmp);
    }
}

void beam_search_run_batch(beam_search *w, const bs_utt *utts, int n, int V, const bs_scorer *att,
                           const bs_scorer *lm, const beam_search_opts *o, bs_nbest *out)
{
    ESP_CHECK(n >= 1);
    bs_ctx c;
    bs_ctx_init(&c, NULL, 0, V, att, lm, o);
    reserve_batch(w, n, (size_t)n * o->beam_size, (size_t)V);
    int *todo = xmalloc((size_t)n * sizeof *todo), maxT = 0;
    for (int k = 0; k < n; k++) {
        struct bs_batch_utt *u = &w->batch[k];
        int T = utts[k].T;
        ESP_CHECK(T >= 0 && (!c.ctc_on || utts[k].ctc_logp));
        u->c = c;
        u->c.cps.logp = utts[k].ctc_logp, u->c.cps.T = T;
        u->c.maxlen = beam_search_maxlen(o->maxlenratio, T);
        u->minlenratio = o->minlenratio;
        reserve_slots(u->w, (size_t)o->beam_size, (size_t)u->c.maxlen + 2, (size_t)T);
        maxT = T > maxT ? T : maxT;
        todo[k] = k;
    }
    /* the utterances' steps run one after another on w's step buffers */
    reserve_scratch(w, (size_t)o->beam_size, (size_t)maxT, (size_t)V, (size_t)c.pre_beam);
    for (int m = n; m > 0;) {
        search(w, &c, todo, m, o->maxlenratio);
        /* None ended: ESPnet tries again with a smaller minlenratio, down to below 0.1. */
        int again = 0;
        for (int k = 0; k < m; k++) {
            struct bs_batch_utt *u = &w->batch[todo[k]];
            if (u->w->n_ended > 0 || u->minlenratio < 0.1) continue;
            u->minlenratio = u->minlenratio - 0.1 > 0.0 ? u->minlenratio - 0.1 : 0.0;
            todo[again++] = todo[k];
        }
        m = again;
    }
    free(todo);
    for (int k = 0; k < n; k++) bs_take_nbest(w->batch[k].w, o->nbest, &out[k]);
}

void beam_search_run(beam_search *w, const float *ctc_logp, int T, int V, const bs_scorer *att, const bs_scorer *lm,
                     const beam_search_opts *o, bs_nbest *out)
{
    bs_utt u = {.ctc_logp = ctc_logp, .T = T};
    beam_search_run_batch(w, &u, 1, V, att, lm, o, out);
}
