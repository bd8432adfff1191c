/* ESPnet2's BeamSearchTransducer; see transducer_search.h. Hypotheses live in a per-utterance arena
 * and lists hold pointers to them, as Python's lists hold references: where ESPnet changes a
 * hypothesis' score in place (recombination, prefix search), every list that holds it sees it. */
#include "core/decode/transducer_search.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/nn/transducer.h"

const char *ts_type_name(int type)
{
    static const char *const names[] = {"default", "tsd", "alsd", "nsc", "maes"};
    return type >= 0 && type <= TS_MAES ? names[type] : "?";
}

void ts_result_free(ts_result *r)
{
    for (int i = 0; i < r->n; i++) free(r->hyps[i].ids);
    free(r->hyps);
    memset(r, 0, sizeof *r);
}

int ts_check(const ts_opts *o, int beam_size, int vocab, esp_err *err)
{
    if (beam_size > 1 && o->search_type == TS_MAES && vocab < beam_size + o->expansion_beta)
        return esp_fail(err, "transducer_conf: beam_size (%d) + expansion_beta (%d) should be smaller or equal to "
                             "the vocabulary size (%d) for maes", beam_size, o->expansion_beta, vocab);
    if (beam_size > 1 && (o->search_type == TS_TSD || o->search_type == TS_ALSD) && beam_size > vocab - 1)
        return esp_fail(err, "transducer_conf: %s takes the beam's best of the %d labels: beam_size %d is too large",
                        ts_type_name(o->search_type), vocab - 1, beam_size);
    return 0;
}

/* ---- hypotheses ----------------------------------------------------------------------------- */

typedef struct hyp {
    int *y;   /* yseq: the blank, then the labels */
    int n;
    double score;
} hyp;

typedef struct hlist {
    hyp **h;
    int n, cap;
} hlist;

/* The prediction network's output and state after a label sequence. */
typedef struct dec_entry {
    int *y;
    int n;
    uint64_t hash;
    float *out, *h, *c;
} dec_entry;

typedef struct ts {
    asr_model *m;
    int V, H, J, S; /* S: floats of a state (layers x hidden; 0: the stateless decoder) */
    const float *encp; /* host, T x J */
    /* the arena */
    hyp **all;
    int n_all, cap_all;
    /* the decoder cache: open addressing by hash */
    dec_entry *tab;
    size_t cap_tab, used_tab;
    float *zeros; /* the initial state */
    /* work */
    float *logp, *rows_enc, *rows_dec, *st_h, *st_c, *out, *h_out, *c_out;
    int *labels;
    size_t cap_rows;
    /* chunk-by-chunk (transducer_search_chunk): the hypotheses carried in (NULL: none), and
     * whether this is the last chunk (the n-best sorted; else the kept hypotheses as they are) */
    const ts_result *carry;
    int final;
} ts;

static hyp *hyp_new(ts *s, const int *y, int n, int extra, double score)
{
    hyp *h = xmalloc(sizeof *h);
    h->n = n + (extra >= 0);
    h->y = xmalloc((size_t)h->n * sizeof *h->y);
    memcpy(h->y, y, (size_t)n * sizeof *y);
    if (extra >= 0) h->y[n] = extra;
    h->score = score;
    if (s->n_all == s->cap_all) {
        s->cap_all = s->cap_all ? 2 * s->cap_all : 64;
        s->all = xrealloc(s->all, (size_t)s->cap_all * sizeof *s->all);
    }
    s->all[s->n_all++] = h;
    return h;
}

static void push(hlist *l, hyp *h)
{
    if (l->n == l->cap) l->cap = l->cap ? 2 * l->cap : 16, l->h = xrealloc(l->h, (size_t)l->cap * sizeof *l->h);
    l->h[l->n++] = h;
}

static int same_seq(const int *a, int na, const int *b, int nb)
{
    return na == nb && !memcmp(a, b, (size_t)na * sizeof *a);
}

/* np.logaddexp */
static double logaddexp(double a, double b)
{
    if (a == -INFINITY) return b;
    if (b == -INFINITY) return a;
    double mx = a > b ? a : b;
    return mx + log1p(exp(-fabs(a - b)));
}

/* A sort key: the score, or score / len(yseq) (score_norm). */
static double key_of(const hyp *h, int norm) { return norm ? h->score / h->n : h->score; }

/* Python's sorted(l, key, reverse=desc) in place: stable (equal keys keep their order, reverse too). */
static void sort_stable(hlist *l, int norm, int desc)
{
    for (int i = 1; i < l->n; i++) { /* insertion sort: the lists are a few beams long */
        hyp *h = l->h[i];
        double k = key_of(h, norm);
        int j = i - 1;
        while (j >= 0 && (desc ? key_of(l->h[j], norm) < k : key_of(l->h[j], norm) > k)) {
            l->h[j + 1] = l->h[j];
            j--;
        }
        l->h[j + 1] = h;
    }
}

static void truncate_list(hlist *l, int n) { if (l->n > n) l->n = n; }

/* The first hypothesis with the largest key (Python's max). */
static int argmax_of(const hlist *l, int norm)
{
    int best = 0;
    for (int i = 1; i < l->n; i++)
        if (key_of(l->h[i], norm) > key_of(l->h[best], norm)) best = i;
    return best;
}

static void remove_at(hlist *l, int i)
{
    memmove(l->h + i, l->h + i + 1, (size_t)(l->n - i - 1) * sizeof *l->h);
    l->n--;
}

/* ---- the decoder cache ---------------------------------------------------------------------- */

static uint64_t seq_hash(const int *y, int n)
{
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < n; i++) h = (h ^ (uint64_t)(uint32_t)y[i]) * 1099511628211ull;
    return h;
}

static dec_entry *cache_find(ts *s, const int *y, int n, uint64_t hash)
{
    if (!s->cap_tab) return NULL;
    for (size_t i = hash & (s->cap_tab - 1);; i = (i + 1) & (s->cap_tab - 1)) {
        dec_entry *e = &s->tab[i];
        if (!e->y) return NULL;
        if (e->hash == hash && same_seq(e->y, e->n, y, n)) return e;
    }
}

static void cache_grow(ts *s)
{
    size_t old = s->cap_tab;
    dec_entry *t = s->tab;
    s->cap_tab = old ? 2 * old : 256;
    s->tab = xcalloc(s->cap_tab, sizeof *s->tab);
    for (size_t i = 0; i < old; i++)
        if (t[i].y) {
            size_t j = t[i].hash & (s->cap_tab - 1);
            while (s->tab[j].y) j = (j + 1) & (s->cap_tab - 1);
            s->tab[j] = t[i];
        }
    free(t);
}

static dec_entry *cache_add(ts *s, const int *y, int n)
{
    if (2 * (s->used_tab + 1) > s->cap_tab) cache_grow(s);
    uint64_t hash = seq_hash(y, n);
    size_t i = hash & (s->cap_tab - 1);
    while (s->tab[i].y) i = (i + 1) & (s->cap_tab - 1);
    dec_entry *e = &s->tab[i];
    e->y = xmalloc((size_t)n * sizeof *y);
    memcpy(e->y, y, (size_t)n * sizeof *y);
    e->n = n, e->hash = hash;
    e->out = xmalloc((size_t)(s->H + 2 * s->S) * sizeof *e->out);
    e->h = e->out + s->H, e->c = e->h + s->S;
    s->used_tab++;
    return e;
}

static void ensure_rows(ts *s, size_t n)
{
    if (n <= s->cap_rows) return;
    s->cap_rows = n;
    s->logp = xrealloc(s->logp, n * (size_t)s->V * sizeof *s->logp);
    s->rows_enc = xrealloc(s->rows_enc, n * (size_t)s->J * sizeof *s->rows_enc);
    s->rows_dec = xrealloc(s->rows_dec, n * (size_t)s->H * sizeof *s->rows_dec);
    s->st_h = xrealloc(s->st_h, n * (size_t)s->S * sizeof *s->st_h);
    s->st_c = xrealloc(s->st_c, n * (size_t)s->S * sizeof *s->st_c);
    s->out = xrealloc(s->out, n * (size_t)s->H * sizeof *s->out);
    s->h_out = xrealloc(s->h_out, n * (size_t)s->S * sizeof *s->h_out);
    s->c_out = xrealloc(s->c_out, n * (size_t)s->S * sizeof *s->c_out);
    s->labels = xrealloc(s->labels, n * sizeof *s->labels);
}

/* The decoder's outputs of the n label sequences (y[i], len[i]) into rows_dec: cached ones copied,
 * the others computed in one batched step from their parents' states (each sequence's parent, the
 * sequence without its last label, is cached; the blank alone starts from zeros). */
static void dec_outs(ts *s, int *const *y, const int *len, int n)
{
    ensure_rows(s, (size_t)n);
    int k = 0;
    /* the new entries' buffers (heap: they stay put when the table grows) and sequences */
    float **miss = xmalloc((size_t)(n ? n : 1) * sizeof *miss);
    for (int i = 0; i < n; i++) {
        if (cache_find(s, y[i], len[i], seq_hash(y[i], len[i]))) continue; /* cached, or new in this batch */
        const float *ph = s->zeros, *pc = s->zeros;
        if (len[i] > 1) {
            dec_entry *p = cache_find(s, y[i], len[i] - 1, seq_hash(y[i], len[i] - 1));
            ESP_CHECK(p != NULL);
            ph = p->h, pc = p->c;
        }
        memcpy(s->st_h + (size_t)k * s->S, ph, (size_t)s->S * sizeof *ph);
        memcpy(s->st_c + (size_t)k * s->S, pc, (size_t)s->S * sizeof *pc);
        s->labels[k] = y[i][len[i] - 1];
        miss[k++] = cache_add(s, y[i], len[i])->out;
    }
    if (k > 0) {
        transducer_dec_step(s->m, s->labels, s->st_h, s->st_c, k, s->out, s->h_out, s->c_out);
        for (int j = 0; j < k; j++) { /* out, h, c lie together in the entry's buffer */
            memcpy(miss[j], s->out + (size_t)j * s->H, (size_t)s->H * sizeof(float));
            memcpy(miss[j] + s->H, s->h_out + (size_t)j * s->S, (size_t)s->S * sizeof(float));
            memcpy(miss[j] + s->H + s->S, s->c_out + (size_t)j * s->S, (size_t)s->S * sizeof(float));
        }
    }
    free(miss);
    for (int i = 0; i < n; i++) {
        dec_entry *e = cache_find(s, y[i], len[i], seq_hash(y[i], len[i]));
        memcpy(s->rows_dec + (size_t)i * s->H, e->out, (size_t)s->H * sizeof(float));
    }
}

/* The joint's log-probs (s->logp, n x V) of rows_dec against frames t[i] (one frame for all when
 * t is NULL: t0). */
static void joint_rows(ts *s, const int *t, int t0, int n)
{
    for (int i = 0; i < n; i++)
        memcpy(s->rows_enc + (size_t)i * s->J, s->encp + (size_t)(t ? t[i] : t0) * s->J, (size_t)s->J * sizeof(float));
    transducer_joint_logp(s->m, s->rows_enc, s->rows_dec, n, s->logp);
}

/* Scores the hypotheses of l at frame t: s->logp row i is hypothesis i's. */
static void score_list(ts *s, const hlist *l, int t)
{
    int **y = xmalloc((size_t)(l->n ? l->n : 1) * sizeof *y), *len = xmalloc((size_t)(l->n ? l->n : 1) * sizeof *len);
    for (int i = 0; i < l->n; i++) y[i] = l->h[i]->y, len[i] = l->h[i]->n;
    dec_outs(s, y, len, l->n);
    joint_rows(s, NULL, t, l->n);
    free(y), free(len);
}

/* The log-probs of the decoder output after the first `len` labels of y, at frame t, into row 0. */
static const float *score_prefix(ts *s, const int *y, int len, int t)
{
    int *yy = (int *)y;
    dec_outs(s, &yy, &len, 1);
    joint_rows(s, NULL, t, 1);
    return s->logp;
}

/* torch.topk(row, k) over row[lo .. V): indices (relative to lo) and values, largest first (the
 * first of equals first). */
static void topk(const float *row, int lo, int V, int k, int *idx, float *val)
{
    for (int j = 0; j < k; j++) idx[j] = -1;
    for (int c = lo; c < V; c++) {
        float v = row[c];
        int pos = k;
        while (pos > 0 && (idx[pos - 1] < 0 || val[pos - 1] < v)) pos--;
        if (pos >= k) continue;
        memmove(idx + pos + 1, idx + pos, (size_t)(k - pos - 1) * sizeof *idx);
        memmove(val + pos + 1, val + pos, (size_t)(k - pos - 1) * sizeof *val);
        idx[pos] = c - lo, val[pos] = v;
    }
}

/* ---- the algorithms ------------------------------------------------------------------------- */

static void set_list(hlist *dst, const hlist *src)
{
    dst->n = 0;
    for (int i = 0; i < src->n; i++) push(dst, src->h[i]);
}

/* sort_nbest: by score / len(yseq) with score_norm, else by score; the first nbest. */
static void sort_nbest(const ts_opts *o, hlist *l)
{
    sort_stable(l, o->score_norm, 1);
    truncate_list(l, o->nbest);
}

static void greedy(ts *s, int T, hlist *out)
{
    hyp *h = hyp_new(s, (int[]){0}, 1, -1, 0.0);
    for (int t = 0; t < T; t++) {
        const float *lp = score_prefix(s, h->y, h->n, t);
        int best = 0;
        for (int c = 1; c < s->V; c++) best = lp[c] > lp[best] ? c : best;
        if (best != 0) {
            h->score += (double)lp[best];
            int *y = xmalloc(((size_t)h->n + 1) * sizeof *y);
            memcpy(y, h->y, (size_t)h->n * sizeof *y);
            y[h->n++] = best;
            free(h->y);
            h->y = y;
        }
    }
    push(out, h);
}

/* The hypotheses a search starts from: those carried from the last chunk (search_cache), else the
 * blank alone. */
static void start_list(ts *s, const ts_result *carry, hlist *l)
{
    if (!carry || carry->n == 0) {
        push(l, hyp_new(s, (int[]){0}, 1, -1, 0.0));
        return;
    }
    int longest = 0;
    for (int i = 0; i < carry->n; i++) {
        hyp *h = hyp_new(s, (int[]){0}, 1, -1, carry->hyps[i].score);
        h->y = xrealloc(h->y, ((size_t)carry->hyps[i].n + 1) * sizeof *h->y);
        memcpy(h->y + 1, carry->hyps[i].ids, (size_t)carry->hyps[i].n * sizeof *h->y);
        h->n = carry->hyps[i].n + 1;
        longest = h->n > longest ? h->n : longest;
        push(l, h);
    }
    /* the decoder cache is this call's: every prefix of the carried sequences again, a length at a
     * time (each one's parent is then cached) */
    int **y = xmalloc((size_t)l->n * sizeof *y), *len = xmalloc((size_t)l->n * sizeof *len);
    for (int n = 1; n <= longest; n++) {
        int k = 0;
        for (int i = 0; i < l->n; i++)
            if (l->h[i]->n >= n) y[k] = l->h[i]->y, len[k++] = n;
        dec_outs(s, y, len, k);
    }
    free(y), free(len);
}

static void default_beam(ts *s, int T, int beam_size, const ts_opts *o, hlist *out)
{
    int beam = beam_size < s->V ? beam_size : s->V, beam_k = beam < s->V - 1 ? beam : s->V - 1;
    int norm = o->score_norm_during, *idx = xmalloc((size_t)beam_k * sizeof *idx);
    float *val = xmalloc((size_t)beam_k * sizeof *val);
    hlist kept = {0}, hyps = {0}, most = {0};
    start_list(s, s->carry, &kept);
    for (int t = 0; t < T; t++) {
        set_list(&hyps, &kept);
        kept.n = 0;
        for (;;) {
            int mi = argmax_of(&hyps, norm);
            hyp *mx = hyps.h[mi];
            remove_at(&hyps, mi);
            const float *lp = score_prefix(s, mx->y, mx->n, t);
            topk(lp, 1, s->V, beam_k, idx, val);
            push(&kept, hyp_new(s, mx->y, mx->n, -1, mx->score + (double)lp[0]));
            for (int j = 0; j < beam_k; j++)
                push(&hyps, hyp_new(s, mx->y, mx->n, idx[j] + 1, mx->score + (double)val[j]));
            double hyps_max = hyps.h[argmax_of(&hyps, norm)]->score;
            most.n = 0;
            for (int i = 0; i < kept.n; i++)
                if (kept.h[i]->score > hyps_max) push(&most, kept.h[i]);
            sort_stable(&most, 0, 0); /* ascending, as ESPnet's sorted without reverse */
            if (most.n >= beam) {
                set_list(&kept, &most);
                break;
            }
        }
    }
    if (s->final) sort_nbest(o, &kept);
    set_list(out, &kept);
    free(kept.h), free(hyps.h), free(most.h), free(idx), free(val);
}

/* The index in l of a hypothesis with y, or -1. */
static int find_seq(const hlist *l, int n_lim, const int *y, int n)
{
    for (int i = 0; i < n_lim; i++)
        if (same_seq(l->h[i]->y, l->h[i]->n, y, n)) return i;
    return -1;
}

static void tsd(ts *s, int T, int beam_size, const ts_opts *o, hlist *out)
{
    int beam = beam_size < s->V ? beam_size : s->V, norm = o->score_norm_during;
    int *idx = xmalloc((size_t)beam * sizeof *idx);
    float *val = xmalloc((size_t)beam * sizeof *val);
    hlist B = {0}, A = {0}, C = {0}, D = {0};
    start_list(s, s->carry, &B);
    for (int t = 0; t < T; t++) {
        A.n = 0;
        set_list(&C, &B);
        for (int v = 0; v < o->max_sym_exp; v++) {
            D.n = 0;
            score_list(s, &C, t);
            int n_seq_a = A.n; /* seq_A: A before this step */
            for (int i = 0; i < C.n; i++) {
                hyp *h = C.h[i];
                double sc = h->score + (double)s->logp[(size_t)i * s->V];
                int pos = find_seq(&A, n_seq_a, h->y, h->n);
                if (pos < 0) push(&A, hyp_new(s, h->y, h->n, -1, sc));
                else A.h[pos]->score = logaddexp(A.h[pos]->score, sc);
            }
            if (v < o->max_sym_exp - 1)
                for (int i = 0; i < C.n; i++) {
                    topk(s->logp + (size_t)i * s->V, 1, s->V, beam, idx, val);
                    for (int j = 0; j < beam; j++)
                        push(&D, hyp_new(s, C.h[i]->y, C.h[i]->n, idx[j] + 1, C.h[i]->score + (double)val[j]));
                }
            sort_stable(&D, norm, 1);
            truncate_list(&D, beam);
            set_list(&C, &D);
        }
        sort_stable(&A, norm, 1);
        truncate_list(&A, beam);
        set_list(&B, &A);
    }
    if (s->final) sort_nbest(o, &B);
    set_list(out, &B);
    free(A.h), free(B.h), free(C.h), free(D.h), free(idx), free(val);
}

/* recombine_hyps: a later hypothesis with an earlier one's yseq merges into it (np.logaddexp). */
static void recombine(hlist *l)
{
    int n = 0;
    for (int i = 0; i < l->n; i++) {
        int pos = find_seq(l, n, l->h[i]->y, l->h[i]->n);
        if (pos >= 0) l->h[pos]->score = logaddexp(l->h[pos]->score, l->h[i]->score);
        else l->h[n++] = l->h[i];
    }
    l->n = n;
}

static void alsd(ts *s, int T, int beam_size, const ts_opts *o, hlist *out)
{
    int beam = beam_size < s->V ? beam_size : s->V, norm = o->score_norm_during;
    int u_max = o->u_max < T - 1 ? o->u_max : T - 1;
    int *idx = xmalloc((size_t)beam * sizeof *idx), *tt = NULL, **ys = NULL, *lens = NULL;
    float *val = xmalloc((size_t)beam * sizeof *val);
    hlist B = {0}, A = {0}, B_ = {0}, fin = {0};
    push(&B, hyp_new(s, (int[]){0}, 1, -1, 0.0));
    for (int i = 0; i < T + u_max; i++) {
        A.n = 0, B_.n = 0;
        tt = xrealloc(tt, (size_t)(B.n ? B.n : 1) * sizeof *tt);
        for (int j = 0; j < B.n; j++) {
            int t = i - (B.h[j]->n - 1);
            if (t > T - 1) continue;
            tt[B_.n] = t;
            push(&B_, B.h[j]);
        }
        if (!B_.n) continue;
        ys = xrealloc(ys, (size_t)B_.n * sizeof *ys), lens = xrealloc(lens, (size_t)B_.n * sizeof *lens);
        for (int j = 0; j < B_.n; j++) ys[j] = B_.h[j]->y, lens[j] = B_.h[j]->n;
        dec_outs(s, ys, lens, B_.n);
        joint_rows(s, tt, 0, B_.n);
        for (int j = 0; j < B_.n; j++) {
            hyp *h = B_.h[j];
            const float *lp = s->logp + (size_t)j * s->V;
            hyp *nh = hyp_new(s, h->y, h->n, -1, h->score + (double)lp[0]);
            push(&A, nh);
            if (tt[j] == T - 1) push(&fin, nh);
            topk(lp, 1, s->V, beam, idx, val);
            for (int k = 0; k < beam; k++) push(&A, hyp_new(s, h->y, h->n, idx[k] + 1, h->score + (double)val[k]));
        }
        sort_stable(&A, norm, 1);
        truncate_list(&A, beam);
        set_list(&B, &A);
        recombine(&B);
    }
    if (fin.n) {
        sort_nbest(o, &fin);
        set_list(out, &fin);
    } else { /* espnet/asr's returns the last beam as it is; asr_transducer's __call__ sorts and cuts it */
        if (o->no_greedy) sort_nbest(o, &B);
        set_list(out, &B);
    }
    free(A.h), free(B.h), free(B_.h), free(fin.h), free(idx), free(val), free(tt), free(ys), free(lens);
}

/* sorted(l, key=len(yseq), reverse=True): stable. */
static void sort_by_len_desc(hlist *l)
{
    for (int i = 1; i < l->n; i++) {
        hyp *h = l->h[i];
        int j = i - 1;
        while (j >= 0 && l->h[j]->n < h->n) {
            l->h[j + 1] = l->h[j];
            j--;
        }
        l->h[j + 1] = h;
    }
}

/* prefix_search (NSC, mAES): a hypothesis that extends a shorter one in the list by at most
 * prefix_alpha labels gains the shorter one's path through those labels at frame t. */
static void prefix_search(ts *s, hlist *l, int t, int prefix_alpha)
{
    for (int j = 0; j + 1 < l->n; j++) {
        hyp *hj = l->h[j];
        for (int i = j + 1; i < l->n; i++) {
            hyp *hi = l->h[i];
            int curr = hj->n, pref = hi->n;
            if (!(pref < curr && !memcmp(hj->y, hi->y, (size_t)pref * sizeof *hi->y)) || curr - pref > prefix_alpha)
                continue;
            double cs = hi->score + (double)score_prefix(s, hi->y, hi->n, t)[hj->y[pref]];
            for (int k = pref; k < curr - 1; k++) cs += (double)score_prefix(s, hj->y, k + 1, t)[hj->y[k + 1]];
            hj->score = logaddexp(hj->score, cs);
        }
    }
}

/* The first hypothesis: the blank, its decoder output computed. */
static hyp *start(ts *s)
{
    hyp *h = hyp_new(s, (int[]){0}, 1, -1, 0.0);
    int *y = h->y, n = 1;
    dec_outs(s, &y, &n, 1);
    return h;
}

static void nsc(ts *s, int T, int beam_size, const ts_opts *o, hlist *out)
{
    int beam = beam_size < s->V ? beam_size : s->V, beam_k = beam < s->V - 1 ? beam : s->V - 1;
    int *idx = xmalloc((size_t)beam_k * sizeof *idx);
    float *val = xmalloc((size_t)beam_k * sizeof *val);
    hlist kept = {0}, hyps = {0}, S = {0}, V = {0};
    push(&kept, start(s));
    for (int t = 0; t < T; t++) {
        set_list(&hyps, &kept);
        sort_by_len_desc(&hyps);
        prefix_search(s, &hyps, t, o->prefix_alpha);
        kept.n = 0, S.n = 0, V.n = 0;
        for (int n = 0; n < o->nstep; n++) {
            score_list(s, &hyps, t);
            for (int i = 0; i < hyps.n; i++) {
                hyp *h = hyps.h[i];
                const float *lp = s->logp + (size_t)i * s->V;
                push(&S, hyp_new(s, h->y, h->n, -1, h->score + (double)lp[0]));
                topk(lp, 1, s->V, beam_k, idx, val);
                for (int k = 0; k < beam_k; k++)
                    push(&V, hyp_new(s, h->y, h->n, idx[k] + 1, h->score + (double)val[k]));
            }
            sort_stable(&V, 0, 1);
            int m = 0; /* subtract(V, hyps) */
            for (int i = 0; i < V.n; i++)
                if (find_seq(&hyps, hyps.n, V.h[i]->y, V.h[i]->n) < 0) V.h[m++] = V.h[i];
            V.n = m;
            truncate_list(&V, beam);
            if (n < o->nstep - 1) {
                set_list(&hyps, &V); /* their decoder outputs come with the next score_list */
            } else {
                score_list(s, &V, t);
                if (o->nstep != 1)
                    for (int i = 0; i < V.n; i++) V.h[i]->score += (double)s->logp[(size_t)i * s->V];
            }
        }
        for (int i = 0; i < S.n; i++) push(&kept, S.h[i]);
        for (int i = 0; i < V.n; i++) push(&kept, V.h[i]);
        sort_stable(&kept, 0, 1);
        truncate_list(&kept, beam);
    }
    sort_nbest(o, &kept);
    set_list(out, &kept);
    free(kept.h), free(hyps.h), free(S.h), free(V.h), free(idx), free(val);
}

static void maes(ts *s, int T, int beam_size, const ts_opts *o, hlist *out)
{
    int beam = beam_size < s->V ? beam_size : s->V, cand = beam_size + o->expansion_beta;
    /* asr_transducer's (no_greedy): nstep as given, no prefix search or duplication check, and
     * the hypotheses kept recombined */
    int at = o->no_greedy, nstep = at || o->nstep > 1 ? o->nstep : 2;
    int *idx = xmalloc((size_t)cand * sizeof *idx), *order = xmalloc((size_t)cand * sizeof *order);
    float *val = xmalloc((size_t)cand * sizeof *val);
    double *sc = xmalloc((size_t)cand * sizeof *sc);
    hlist kept = {0}, hyps = {0}, list_b = {0}, exp_l = {0}, dup = {0};
    if (s->carry && s->carry->n) start_list(s, s->carry, &kept);
    else push(&kept, start(s));
    for (int t = 0; t < T; t++) {
        set_list(&hyps, &kept);
        if (!at) sort_by_len_desc(&hyps), prefix_search(s, &hyps, t, o->prefix_alpha);
        kept.n = 0, list_b.n = 0;
        dup.n = 0;
        if (!at) set_list(&dup, &hyps); /* duplication_check: their yseqs, as they are now */
        for (int n = 0; n < nstep; n++) {
            score_list(s, &hyps, t);
            exp_l.n = 0;
            for (int i = 0; i < hyps.n; i++) {
                hyp *h = hyps.h[i];
                topk(s->logp + (size_t)i * s->V, 0, s->V, cand, idx, val);
                /* select_k_expansions: within expansion_gamma of the best, best first (stable) */
                double best = -INFINITY;
                for (int k = 0; k < cand; k++) sc[k] = h->score + (double)val[k], best = sc[k] > best ? sc[k] : best;
                int m = 0;
                for (int k = 0; k < cand; k++)
                    if (best - o->expansion_gamma <= sc[k]) order[m++] = k;
                for (int a = 1; a < m; a++) {
                    int x = order[a], b = a - 1;
                    while (b >= 0 && sc[order[b]] < sc[x]) order[b + 1] = order[b], b--;
                    order[b + 1] = x;
                }
                for (int a = 0; a < m; a++) {
                    int k = idx[order[a]];
                    if (k == 0) {
                        push(&list_b, hyp_new(s, h->y, h->n, -1, sc[order[a]]));
                        continue;
                    }
                    int seen = 0;
                    for (int d = 0; d < dup.n && !seen; d++)
                        seen = dup.h[d]->n == h->n + 1 && !memcmp(dup.h[d]->y, h->y, (size_t)h->n * sizeof *h->y) &&
                               dup.h[d]->y[h->n] == k;
                    if (!seen) push(&exp_l, hyp_new(s, h->y, h->n, k, sc[order[a]]));
                }
            }
            if (!exp_l.n) {
                set_list(&kept, &list_b);
                if (at) recombine(&kept);
                sort_stable(&kept, 0, 1);
                truncate_list(&kept, beam);
                break;
            }
            if (n < nstep - 1) {
                set_list(&hyps, &exp_l);
            } else {
                score_list(s, &exp_l, t);
                for (int i = 0; i < exp_l.n; i++) exp_l.h[i]->score += (double)s->logp[(size_t)i * s->V];
                set_list(&kept, &list_b);
                for (int i = 0; i < exp_l.n; i++) push(&kept, exp_l.h[i]);
                if (at) recombine(&kept);
                sort_stable(&kept, 0, 1);
                truncate_list(&kept, beam);
            }
        }
    }
    if (s->final) sort_nbest(o, &kept);
    set_list(out, &kept);
    free(kept.h), free(hyps.h), free(list_b.h), free(exp_l.h), free(dup.h), free(idx), free(order), free(val), free(sc);
}

/* One search over T frames (T may be 0 for a chunk), from carry's hypotheses (NULL: the blank). */
static void search(asr_model *m, const float *enc, int T, int beam_size, const ts_opts *o, const ts_result *carry,
                   int final, ts_result *out)
{
    ESP_CHECK(m->tr != NULL && (T >= 1 || carry));
    ESP_CHECK(!carry || (o->no_greedy && o->search_type != TS_ALSD && o->search_type != TS_NSC));
    const model_dims *d = &m->dims;
    ts s = {.m = m, .V = d->vocab, .H = d->tr_hidden, .J = d->tr_joint, .S = d->tr_layers * d->tr_hidden,
            .carry = carry, .final = final};
    float *encp = xmalloc(((size_t)T * s.J + 1) * sizeof *encp);
    if (T > 0) transducer_enc_proj(m, enc, T, encp);
    s.encp = encp;
    s.zeros = xcalloc((size_t)s.S, sizeof *s.zeros);
    hlist res = {0};
    if (beam_size <= 1 && !o->no_greedy) greedy(&s, T, &res);
    else if (o->search_type == TS_TSD) tsd(&s, T, beam_size, o, &res);
    else if (o->search_type == TS_ALSD) alsd(&s, T, beam_size, o, &res);
    else if (o->search_type == TS_NSC) nsc(&s, T, beam_size, o, &res);
    else if (o->search_type == TS_MAES) maes(&s, T, beam_size, o, &res);
    else default_beam(&s, T, beam_size, o, &res);
    out->n = res.n;
    out->hyps = xcalloc((size_t)(res.n ? res.n : 1), sizeof *out->hyps);
    for (int i = 0; i < res.n; i++) {
        ts_hyp *h = &out->hyps[i];
        h->n = res.h[i]->n - 1;
        h->ids = xmalloc((size_t)(h->n + 1) * sizeof *h->ids);
        memcpy(h->ids, res.h[i]->y + 1, (size_t)h->n * sizeof *h->ids);
        h->score = res.h[i]->score;
    }
    free(res.h);
    for (int i = 0; i < s.n_all; i++) free(s.all[i]->y), free(s.all[i]);
    free(s.all);
    for (size_t i = 0; i < s.cap_tab; i++) free(s.tab[i].y), free(s.tab[i].out);
    free(s.tab), free(s.zeros), free(encp);
    free(s.logp), free(s.rows_enc), free(s.rows_dec), free(s.st_h), free(s.st_c), free(s.out), free(s.h_out);
    free(s.c_out), free(s.labels);
}

void transducer_search(asr_model *m, const float *enc, int T, int beam_size, const ts_opts *o, ts_result *out)
{
    search(m, enc, T, beam_size, o, NULL, 1, out);
}

/* A copy of r's hypotheses into dst (freed first). */
static void copy_result(ts_result *dst, const ts_result *r)
{
    ts_result_free(dst);
    dst->n = r->n;
    dst->hyps = xcalloc((size_t)(r->n ? r->n : 1), sizeof *dst->hyps);
    for (int i = 0; i < r->n; i++) {
        dst->hyps[i] = r->hyps[i];
        dst->hyps[i].ids = xmalloc(((size_t)r->hyps[i].n + 1) * sizeof *r->hyps[i].ids);
        memcpy(dst->hyps[i].ids, r->hyps[i].ids, (size_t)r->hyps[i].n * sizeof *r->hyps[i].ids);
    }
}

void transducer_search_chunk(asr_model *m, const float *enc, int T, int beam_size, const ts_opts *o, ts_result *carry,
                             int is_final, ts_result *out)
{
    search(m, enc, T, beam_size, o, carry, is_final, out);
    if (is_final) ts_result_free(carry);
    else copy_result(carry, out);
}
