/* CTC prefix beam search; see ctc_prefix_beam.h. Prefixes live in a trie of (parent, token)
 * nodes made only for prefixes that enter the beam, so memory is at most 1 + frames x beam nodes.
 * The trie is canonical (a child is looked up before it is made), so one prefix is one node even
 * when it leaves the beam and comes back; equal node ids then mean equal prefixes. */
#include "core/decode/ctc_prefix_beam.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/log.h"

typedef struct hyp {
    int node;
    double pb, pnb;          /* log p of alignments ending in blank / in a label */
} hyp;

/* A prefix competing for the next beam: an existing node (kept) or parent + token (extended). */
typedef struct cand {
    int node;                /* >= 0: the prefix of a beam entry; -1: parent extended by token */
    int parent, token, len;
    double pb, pnb, score;
} cand;

struct ctc_beam {
    int *parent, *token, *len;
    size_t n_nodes, cap_nodes;
    int *slots;              /* open addressing: (parent, token) -> node, -1 = empty */
    size_t n_slots;          /* a power of two, at least twice n_nodes */
    hyp *beam;
    size_t n_beam, cap_beam;
    cand *cands;
    size_t cap_cands;
    int *top;                /* indices into cands, best first */
    unsigned char *merged;   /* beam x V: extension already merged into a kept prefix */
    size_t cap_merged;
    int *seq_a, *seq_b;      /* prefixes spelled out for tie-breaks */
    size_t cap_seq;
};

ctc_beam *ctc_beam_new(void) { return xcalloc(1, sizeof(ctc_beam)); }

void ctc_beam_free(ctc_beam *w)
{
    if (!w) return;
    free(w->parent), free(w->token), free(w->len), free(w->slots);
    free(w->beam), free(w->cands), free(w->top), free(w->merged);
    free(w->seq_a), free(w->seq_b);
    free(w);
}

static double log_add(double a, double b)
{
    if (a == -INFINITY) return b;
    if (b == -INFINITY) return a;
    return a > b ? a + log1p(exp(b - a)) : b + log1p(exp(a - b));
}

static size_t slot_of(const ctc_beam *w, int parent, int token)
{
    uint64_t h = ((uint64_t)(uint32_t)parent * 0x9E3779B97F4A7C15ull) ^
                 ((uint64_t)(uint32_t)token * 0xC2B2AE3D27D4EB4Full);
    size_t mask = w->n_slots - 1, k = (size_t)(h >> 17) & mask;
    for (int n; (n = w->slots[k]) >= 0 && !(w->parent[n] == parent && w->token[n] == token);) k = (k + 1) & mask;
    return k;
}

static void rehash(ctc_beam *w, size_t n_slots)
{
    free(w->slots);
    w->n_slots = n_slots;
    w->slots = xmalloc(n_slots * sizeof *w->slots);
    memset(w->slots, 0xff, n_slots * sizeof *w->slots);
    for (size_t n = 1; n < w->n_nodes; n++) w->slots[slot_of(w, w->parent[n], w->token[n])] = (int)n;
}

static void reset_trie(ctc_beam *w)
{
    w->n_nodes = 0;
    if (!w->slots) rehash(w, 1024);
    else memset(w->slots, 0xff, w->n_slots * sizeof *w->slots);
}

/* The node of parent's prefix extended by token (the root: parent -1), made when new. */
static int child(ctc_beam *w, int parent, int token)
{
    if (parent >= 0) {
        size_t k = slot_of(w, parent, token);
        if (w->slots[k] >= 0) return w->slots[k];
    }
    if (w->n_nodes == w->cap_nodes) {
        w->cap_nodes = w->cap_nodes ? 2 * w->cap_nodes : 256;
        w->parent = xrealloc(w->parent, w->cap_nodes * sizeof *w->parent);
        w->token = xrealloc(w->token, w->cap_nodes * sizeof *w->token);
        w->len = xrealloc(w->len, w->cap_nodes * sizeof *w->len);
    }
    int n = (int)w->n_nodes++;
    w->parent[n] = parent;
    w->token[n] = token;
    w->len[n] = parent < 0 ? 0 : w->len[parent] + 1;
    if (parent >= 0) {
        if (2 * w->n_nodes > w->n_slots) rehash(w, 2 * w->n_slots);
        else w->slots[slot_of(w, parent, token)] = n;
    }
    return n;
}

/* The ids of a node's prefix (plus `extra` when >= 0), in order; returns the length. */
static int spell(const ctc_beam *w, int node, int extra, int *buf)
{
    int n = node < 0 ? 0 : w->len[node];
    if (extra >= 0) buf[n] = extra;
    for (int k = n - 1; k >= 0; k--, node = w->parent[node]) buf[k] = w->token[node];
    return n + (extra >= 0);
}

/* 1 when a ranks before b: higher score, then shorter, then smaller ids. */
static int ranks_before(ctc_beam *w, const cand *a, const cand *b)
{
    if (a->score != b->score) return a->score > b->score;
    if (a->len != b->len) return a->len < b->len;
    int na = a->node >= 0 ? spell(w, a->node, -1, w->seq_a) : spell(w, a->parent, a->token, w->seq_a);
    int nb = b->node >= 0 ? spell(w, b->node, -1, w->seq_b) : spell(w, b->parent, b->token, w->seq_b);
    ESP_CHECK(na == nb);
    for (int k = 0; k < na; k++)
        if (w->seq_a[k] != w->seq_b[k]) return w->seq_a[k] < w->seq_b[k];
    return 0;
}

/* Inserts candidate ci into the sorted top list (at most k entries). */
static void offer(ctc_beam *w, int ci, size_t *n_top, size_t k)
{
    const cand *c = &w->cands[ci];
    if (c->score == -INFINITY) return;
    size_t pos = *n_top;
    while (pos > 0 && ranks_before(w, c, &w->cands[w->top[pos - 1]])) pos--;
    if (pos >= k) return;
    size_t end = *n_top < k ? *n_top : k - 1;
    memmove(w->top + pos + 1, w->top + pos, (end - pos) * sizeof *w->top);
    w->top[pos] = ci;
    if (*n_top < k) (*n_top)++;
}

static void reserve(ctc_beam *w, size_t B, int V, int hlen)
{
    size_t nc = B + B * (size_t)V;
    if (nc > w->cap_cands) {
        w->cap_cands = nc;
        w->cands = xrealloc(w->cands, nc * sizeof *w->cands);
    }
    if (B > w->cap_beam) {
        w->cap_beam = B;
        w->beam = xrealloc(w->beam, B * sizeof *w->beam);
        w->top = xrealloc(w->top, B * sizeof *w->top);
    }
    if (B * (size_t)V > w->cap_merged) {
        w->cap_merged = B * (size_t)V;
        free(w->merged);
        w->merged = xcalloc(w->cap_merged, 1);
    }
    if ((size_t)hlen + 2 > w->cap_seq) {
        w->cap_seq = (size_t)hlen + 2;
        w->seq_a = xrealloc(w->seq_a, w->cap_seq * sizeof *w->seq_a);
        w->seq_b = xrealloc(w->seq_b, w->cap_seq * sizeof *w->seq_b);
    }
}

int ctc_prefix_beam_search(ctc_beam *w, const float *logp, int hlen, int V, const ctc_beam_opts *o, int *out,
                           double *score)
{
    ESP_CHECK(o->beam_size >= 1 && V >= 1 && hlen >= 0);
    size_t B = (size_t)o->beam_size;
    reserve(w, B, V, hlen);
    reset_trie(w);
    w->beam[0] = (hyp){child(w, -1, -1), 0.0, -INFINITY};
    w->n_beam = 1;
    for (int t = 0; t < hlen; t++) {
        const float *lp = logp + (size_t)t * V;
        size_t nb = w->n_beam, nc = 0;
        /* Kept prefixes: a blank, or the repeat of the last label, adds no output. */
        for (size_t j = 0; j < nb; j++) {
            const hyp *h = &w->beam[j];
            int last = w->token[h->node];
            double total = log_add(h->pb, h->pnb);
            w->cands[nc++] = (cand){.node = h->node, .parent = w->parent[h->node], .token = last,
                                    .len = w->len[h->node], .pb = total + lp[0],
                                    .pnb = last > 0 ? h->pnb + lp[last] : -INFINITY};
        }
        /* An extension that spells a kept prefix (its parent is in the beam) merges into it. */
        for (size_t j = 0; j < nb; j++) {
            int p = w->parent[w->beam[j].node], c = w->token[w->beam[j].node];
            for (size_t i = 0; i < nb && p >= 0; i++) {
                if (w->beam[i].node != p) continue;
                const hyp *h = &w->beam[i];
                double from = (c == w->token[p] ? h->pb : log_add(h->pb, h->pnb)) + lp[c];
                w->cands[j].pnb = log_add(w->cands[j].pnb, from);
                w->merged[i * (size_t)V + (size_t)c] = 1;
            }
        }
        for (size_t j = 0; j < nb; j++) {
            cand *c = &w->cands[j];
            c->score = log_add(c->pb, c->pnb) + o->penalty * c->len;
        }
        /* New prefixes: every label after every beam entry. */
        for (size_t i = 0; i < nb; i++) {
            const hyp *h = &w->beam[i];
            int last = w->token[h->node], len = w->len[h->node] + 1;
            double total = log_add(h->pb, h->pnb);
            for (int c = 1; c < V; c++) {
                if (w->merged[i * (size_t)V + (size_t)c]) {
                    w->merged[i * (size_t)V + (size_t)c] = 0;
                    continue;
                }
                /* After the same label, only alignments ending in blank start a new token. */
                double v = (c == last ? h->pb : total) + lp[c];
                w->cands[nc++] = (cand){.node = -1, .parent = h->node, .token = c, .len = len, .pb = -INFINITY,
                                        .pnb = v, .score = v + o->penalty * len};
            }
        }
        size_t n_top = 0;
        for (size_t k = 0; k < nc; k++) offer(w, (int)k, &n_top, B);
        if (n_top == 0) break; /* every path impossible: keep the last beam */
        for (size_t k = 0; k < n_top; k++) {
            const cand *c = &w->cands[w->top[k]];
            int node = c->node >= 0 ? c->node : child(w, c->parent, c->token);
            w->beam[k] = (hyp){node, c->pb, c->pnb};
        }
        w->n_beam = n_top;
    }
    return ctc_prefix_beam_nth(w, 0, o, out, score);
}

int ctc_prefix_beam_nth(ctc_beam *w, int k, const ctc_beam_opts *o, int *out, double *score)
{
    if (k < 0 || (size_t)k >= w->n_beam) return -1;
    const hyp *h = &w->beam[k];
    if (score) *score = log_add(h->pb, h->pnb) + o->penalty * w->len[h->node];
    return spell(w, h->node, -1, out);
}
