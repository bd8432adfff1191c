/* The beam search's decoder step (decoder_score_batch, see decoder_transformer.h): ESPnet's
 * TransformerDecoder.batch_score with keys and values cached.
 *
 * Caches (device): the source attention's keys/values of the utterance per layer (T x d each; when
 * the online search's source grew, only the new frames' are computed: the earlier rows are the same),
 * and the self-attention's keys/values of every prefix the last two calls scored, per layer, as
 * blocks of `stride` positions. A prefix is "fast" when a block of the previous call (else of the
 * one before: the online search rewinds its beam by a step) holds its first len - 1 positions
 * (its parent, or itself): only its last position is computed, one query row per hypothesis
 * against its block. Any other prefix is "slow": all its positions run as a
 * causal teacher-forced pass. Both groups write their keys/values into this call's blocks (the
 * next call's cache) and their last rows go through after_norm, output_layer and log_softmax.
 * The LM form (TransformerLM, decoder_internal.h) is the same without the source attention and with
 * its own input layer; it depends on no utterance (hs_dev NULL, T 0).
 *
 * Several utterances (decoder_score_utts): the source keys/values per utterance (its own GEMM over
 * its hlens[b] frames, as alone), a cached block belongs to one utterance (a parent is found only
 * in its own), and each group's hypotheses are ordered by utterance so that each utterance's rows
 * attend to its source in one call, keys [0, hlens[b]) as alone. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/compute/backend_profile.h"
#include "core/nn/decoder_internal.h"
#include "core/nn/decoder_transformer.h"
#include "core/nn/mha_input.h"

typedef struct kv_blocks {
    float *k, *v;   /* nl x n x stride x d */
    int n, stride;  /* blocks and positions per block (capacity) */
    int *tokens;    /* host: the prefix of each block (n x stride), its length in lens */
    int *lens;
    int *utt;       /* host: the utterance each block's prefix belongs to */
    int used;       /* blocks holding a scored prefix */
} kv_blocks;

struct dec_score {
    /* The utterances the source caches belong to; new_utterance: drop them at the next call;
     * grown: the next call's source is this utterance's, longer (keep the prefix caches). */
    const float *hs;
    int T, B, new_utterance, grown;
    int *hlens;     /* host, B */
    float *km, *vm; /* nl x B x mstride x d: frames [0, hlens[b]) of each slot */
    size_t cap_mem;
    int mstride;    /* frames per slot (grows by half, so a growing source seldom moves) */
    kv_blocks kv[3]; /* the blocks of the call before the previous, the previous call's and this call's */
    int prev;        /* the previous call's; this call writes into (prev + 1) % 3 */
    float *pe;      /* sinusoidal table, pe_len x d */
    int pe_len;
    /* Work of one group: rows R = hypotheses x query rows. */
    size_t cap_rows, cap_self, cap_src, cap_hyps;
    int row_budget; /* rows a slow group may take at once (decoder_score_reserve; 0: all of it) */
    float *x, *ln, *q, *k, *v, *y, *tmp, *f1, *mean, *rstd, *att, *last, *logits;
    float *emb; /* the LM's token embeddings (rows x E) */
};

static void kv_free(backend *be, kv_blocks *b)
{
    be->free(be, b->k);
    be->free(be, b->v);
    free(b->tokens);
    free(b->lens);
    free(b->utt);
    memset(b, 0, sizeof *b);
}

static void free_work(backend *be, dec_score *s)
{
    float **w[] = {&s->x, &s->ln, &s->q, &s->k, &s->v, &s->y, &s->tmp, &s->f1, &s->mean, &s->rstd, &s->att,
                   &s->last, &s->logits, &s->emb};
    for (size_t i = 0; i < sizeof w / sizeof *w; i++) be->free(be, *w[i]), *w[i] = NULL;
    s->cap_rows = s->cap_self = s->cap_src = s->cap_hyps = 0;
}

void dec_score_free(backend *be, dec_score *s)
{
    if (!s) return;
    free_work(be, s);
    for (int i = 0; i < 3; i++) kv_free(be, &s->kv[i]);
    be->free(be, s->km);
    be->free(be, s->vm);
    be->free(be, s->pe);
    free(s->hlens);
    free(s);
}

#define ALLOC(n) be->alloc(be, (n) * sizeof(float) + 64)

static void ensure_work(backend *be, const decoder_acts *a, dec_score *s, size_t rows, size_t self, size_t src,
                        size_t hyps)
{
    if (rows <= s->cap_rows && self <= s->cap_self && src <= s->cap_src && hyps <= s->cap_hyps) return;
    free_work(be, s);
    size_t D = (size_t)a->d;
    s->x = ALLOC(rows * D), s->ln = ALLOC(rows * D), s->q = ALLOC(rows * D), s->k = ALLOC(rows * D);
    s->v = ALLOC(rows * D), s->y = ALLOC(rows * D), s->tmp = ALLOC(rows * D), s->f1 = ALLOC(rows * a->ff);
    s->mean = ALLOC(rows), s->rstd = ALLOC(rows);
    s->att = ALLOC(self > src ? self : src);
    s->last = ALLOC(hyps * D * 2), s->logits = ALLOC(hyps * a->vocab);
    if (a->lm) s->emb = ALLOC(rows * a->E);
    s->cap_rows = rows, s->cap_self = self, s->cap_src = src, s->cap_hyps = hyps;
}

/* This call's blocks: at least n of `stride` positions (the previous call's stay untouched). The
 * positions grow by half at least, up to limit (no hypothesis is longer; 0: none): a long
 * hypothesis (a stream's) reallocates, into fresh pages the kernel zeroes, a logarithmic number of
 * times, not every few steps; within limit + 8, the memory speech2text_batch_bytes plans. */
static void ensure_blocks(backend *be, const decoder_acts *a, kv_blocks *b, int n, int stride, int limit)
{
    if (n <= b->n && stride <= b->stride) return;
    int grown = b->stride + b->stride / 2;
    if (limit > 0 && grown > limit) grown = limit;
    kv_free(be, b);
    b->n = n, b->stride = (stride > grown ? stride : grown) + 8;
    size_t floats = (size_t)a->nl * b->n * b->stride * a->d;
    b->k = ALLOC(floats), b->v = ALLOC(floats);
    b->tokens = xcalloc((size_t)b->n * b->stride, sizeof *b->tokens);
    b->lens = xcalloc((size_t)b->n, sizeof *b->lens);
    b->utt = xcalloc((size_t)b->n, sizeof *b->utt);
}

static float *block_k(const decoder_acts *a, const kv_blocks *b, int l, int blk)
{
    return b->k + (((size_t)l * b->n + blk) * b->stride) * a->d;
}
static float *block_v(const decoder_acts *a, const kv_blocks *b, int l, int blk)
{
    return b->v + (((size_t)l * b->n + blk) * b->stride) * a->d;
}

static int same_utterances(const dec_score *s, const float *hs, const int *hlens, int B, int T)
{
    return s->km && !s->new_utterance && !s->grown && s->hs == hs && s->T == T && s->B == B &&
           !memcmp(s->hlens, hlens, (size_t)B * sizeof *hlens);
}

/* Room for the source keys/values of B utterances of up to T frames per layer; returns 1 when the
 * layout changed (what the slots held is gone). */
static int ensure_mem(backend *be, const decoder_acts *a, dec_score *s, int B, int T)
{
    int stride = s->mstride;
    if (T > stride) stride = T > stride + stride / 2 ? T : stride + stride / 2;
    size_t n = (size_t)B * stride * a->d * a->nl;
    if (stride == s->mstride && n <= s->cap_mem) return 0;
    s->mstride = stride;
    if (n > s->cap_mem) {
        be->free(be, s->km), be->free(be, s->vm);
        s->km = ALLOC(n), s->vm = ALLOC(n);
        s->cap_mem = n;
    }
    return 1;
}

/* The utterances' source keys/values per layer (each its own hlens[b] rows, as alone); new
 * utterances empty the prefix cache (a grown source keeps it, and its earlier frames' keys/values:
 * only the new frames go through the projections). */
static void prepare_utterances(const asr_model *m, dec_score *s, const float *hs, const int *hlens, int B, int T)
{
    backend *be = m->be;
    const decoder_acts *a = m->dec;
    size_t D = (size_t)a->d, per = (size_t)T * D;
    if (same_utterances(s, hs, hlens, B, T)) return;
    int keep = s->km && s->grown && !s->new_utterance && B == 1 && s->B == 1 && hlens[0] >= s->hlens[0] ? s->hlens[0]
                                                                                                         : 0;
    if (ensure_mem(be, a, s, B, T)) keep = 0;
    for (int l = 0; l < a->nl; l++) {
        const nn_mha *ca = &m->w.decoder.blocks[l].src_attn;
        for (int b = 0; b < B; b++) {
            size_t o = ((size_t)l * B + b) * s->mstride * D + keep * D, x = b * per + keep * D;
            ESP_CHECK(hlens[b] >= 1 && hlens[b] <= T);
            if (hlens[b] == keep) continue;
            be->linear_forward(be, s->km + o, hs + x, ca->linear_k.weight, ca->linear_k.bias, hlens[b] - keep, a->d,
                               a->d);
            be->linear_forward(be, s->vm + o, hs + x, ca->linear_v.weight, ca->linear_v.bias, hlens[b] - keep, a->d,
                               a->d);
        }
    }
    s->hlens = xrealloc(s->hlens, (size_t)B * sizeof *s->hlens);
    memcpy(s->hlens, hlens, (size_t)B * sizeof *hlens);
    if (!s->grown)
        for (int i = 0; i < 3; i++) s->kv[i].used = 0;
    s->hs = hs, s->T = T, s->B = B, s->new_utterance = s->grown = 0;
}

/* The positional table pe[0..len) (posenc over zeros with scale 1 is exactly pe). */
static void ensure_pe(backend *be, const decoder_acts *a, dec_score *s, int len)
{
    if (len <= s->pe_len) return;
    be->free(be, s->pe);
    int n = len + 64;
    s->pe = ALLOC((size_t)n * a->d);
    be->posenc_forward(be, s->pe, s->pe, 1.0, 1, n, a->d);
    s->pe_len = n;
}

/* A block of b holding the first len - 1 positions of p in utterance u, or -1. */
static int find_parent(const kv_blocks *b, const int *p, int len, int u)
{
    if (len < 2) return -1;
    for (int e = 0; e < b->used; e++)
        if (b->utt[e] == u && b->lens[e] >= len - 1 &&
            !memcmp(b->tokens + (size_t)e * b->stride, p, (size_t)(len - 1) * sizeof *p))
            return e;
    return -1;
}

/* A group of hypotheses scored together: blocks [first, first + n) of this call's kv, tq query
 * rows per hypothesis (1: fast, the last position only; else slow, positions 0..tq-1 causally). */
typedef struct group {
    int first, n, tq;
    const int *lens; /* n prefix lengths */
    const int *utt;  /* n utterances, in runs of one utterance */
} group;

/* The blocks of one layer: queries (rows g->n * tq of s->x) against this call's kv blocks, the
 * source attention against the utterance; s->x is updated in place (the residual stream). */
static void group_layer(const asr_model *m, dec_score *s, const kv_blocks *kv, const group *g, int l)
{
    backend *be = m->be;
    const decoder_acts *a = m->dec;
    int R = g->n * g->tq, D = a->d, H = a->heads;
    const dec_block_tensors *p = &m->w.decoder.blocks[l];
    const nn_mha *sa = &p->self_attn, *ca = &p->src_attn;
    const nn_ffn *ff = &p->feed_forward;
    mha_input_forward(be, sa, &p->norm1, s->x, s->ln, s->mean, s->rstd, s->q, s->k, s->v, R, D);
    /* The new rows' keys/values into the blocks: the last position (fast) or all (slow). */
    for (int i = 0; i < g->n; i++) {
        int pos0 = g->tq == 1 ? g->lens[i] - 1 : 0, rows = g->tq == 1 ? 1 : g->lens[i];
        size_t src = (size_t)i * g->tq * D, dst = (size_t)pos0 * D, bytes = (size_t)rows * D * sizeof(float);
        be->copy(be, block_k(a, kv, l, g->first + i) + dst, s->k + src, bytes, BACKEND_DEVICE_TO_DEVICE);
        be->copy(be, block_v(a, kv, l, g->first + i) + dst, s->v + src, bytes, BACKEND_DEVICE_TO_DEVICE);
    }
    be->mha_forward(be, s->y, s->att, s->q, D, block_k(a, kv, l, g->first), block_v(a, kv, l, g->first), D, g->lens,
                    g->n, g->tq, kv->stride, g->tq > 1, H, D / H, 0, 0, 0);
    be->linear_forward(be, s->tmp, s->y, sa->linear_out.weight, sa->linear_out.bias, R, D, D);
    be->add(be, s->x, s->x, s->tmp, (size_t)R * D);
    if (!a->lm) {
        /* Source attention: the query rows of each utterance's run of hypotheses against its frames
         * (one batch item per run). */
        be->layernorm_forward(be, s->ln, s->mean, s->rstd, s->x, p->norm2.weight, p->norm2.bias, R, D, 1e-12);
        be->linear_forward(be, s->q, s->ln, ca->linear_q.weight, ca->linear_q.bias, R, D, D);
        for (int i0 = 0, i1; i0 < g->n; i0 = i1) {
            int u = g->utt[i0];
            for (i1 = i0 + 1; i1 < g->n && g->utt[i1] == u;) i1++;
            size_t mo = ((size_t)l * s->B + u) * s->mstride * D, r0 = (size_t)i0 * g->tq * D;
            const int *len_u = &s->hlens[u];
            be->mha_forward(be, s->y + r0, s->att, s->q + r0, D, s->km + mo, s->vm + mo, D, len_u, 1,
                            (i1 - i0) * g->tq, *len_u, 0, H, D / H, 0, 0, 0);
        }
        be->linear_forward(be, s->tmp, s->y, ca->linear_out.weight, ca->linear_out.bias, R, D, D);
        be->add(be, s->x, s->x, s->tmp, (size_t)R * D);
    }
    /* Feed-forward. */
    be->layernorm_forward(be, s->ln, s->mean, s->rstd, s->x, p->norm3.weight, p->norm3.bias, R, D, 1e-12);
    be->linear_forward(be, s->f1, s->ln, ff->w_1.weight, ff->w_1.bias, R, D, a->ff);
    be->relu_forward(be, s->f1, s->f1, (size_t)R * a->ff);
    be->linear_forward(be, s->tmp, s->f1, ff->w_2.weight, ff->w_2.bias, R, a->ff, D);
    be->add(be, s->x, s->x, s->tmp, (size_t)R * D);
}

/* The LM's input layer on R token ids into s->x, before any positional encoding. */
static void lm_embed(const asr_model *m, dec_score *s, const int *ids, int R)
{
    backend *be = m->be;
    const decoder_acts *a = m->dec;
    const decoder_tensors *p = &m->w.decoder;
    int D = a->d;
    be->embedding_forward(be, s->emb, p->embed, ids, R, a->vocab, a->E);
    be->linear_forward(be, s->ln, s->emb, p->lm_in.weight, p->lm_in.bias, R, a->E, D);
    be->layernorm_forward(be, s->x, s->mean, s->rstd, s->ln, p->lm_in_norm.weight, p->lm_in_norm.bias, R, D, 1e-5);
    be->relu_forward(be, s->x, s->x, (size_t)R * D);
}

/* The embedded inputs of a group into s->x: the last token at position len - 1 (fast), or every
 * position of the prefix padded with <eos> to tq (slow), as x * sqrt(d) + pe (the LM: its input
 * layer, then the same with pos_enc sinusoidal). */
static void group_embed(const asr_model *m, dec_score *s, const group *g, const int *const *pfx, int *ids)
{
    backend *be = m->be;
    const decoder_acts *a = m->dec;
    int D = a->d, V = a->vocab;
    for (int i = 0; i < g->n; i++)
        for (int j = 0; j < g->tq; j++) {
            int pos = g->tq == 1 ? g->lens[i] - 1 : j;
            ids[i * g->tq + j] = pos < g->lens[i] ? pfx[i][pos] : V - 1;
        }
    int R = g->n * g->tq;
    if (a->lm) lm_embed(m, s, ids, R);
    else be->embedding_forward(be, s->x, m->w.decoder.embed, ids, R, V, D);
    if (a->lm && !a->lm_pe) return;
    if (g->tq > 1) {
        be->posenc_forward(be, s->x, s->x, sqrt((double)D), g->n, g->tq, D);
        return;
    }
    be->scale(be, s->x, s->x, sqrt((double)D), (size_t)R * D);
    for (int i = 0; i < g->n; i++)
        be->add(be, s->x + (size_t)i * D, s->x + (size_t)i * D, s->pe + (size_t)(g->lens[i] - 1) * D, (size_t)D);
}

/* Runs a group and gathers each hypothesis' last row into s->last (rows out_row[i]). */
static void run_group(const asr_model *m, dec_score *s, const kv_blocks *kv, const group *g,
                      const int *const *pfx, int *ids, const int *out_row)
{
    if (g->n == 0) return;
    const decoder_acts *a = m->dec;
    backend *be = m->be;
    group_embed(m, s, g, pfx, ids);
    for (int l = 0; l < a->nl; l++) group_layer(m, s, kv, g, l);
    for (int i = 0; i < g->n; i++) {
        size_t row = (size_t)i * g->tq + (g->tq == 1 ? 0 : (size_t)g->lens[i] - 1);
        be->copy(be, s->last + (size_t)out_row[i] * a->d, s->x + row * a->d, (size_t)a->d * sizeof(float),
                 BACKEND_DEVICE_TO_DEVICE);
    }
}

/* Sorts the hypotheses into fast (a parent block found; its rows copied into this call's block)
 * and slow ones; fills order (block -> hypothesis), the groups' lens and this call's records. */
static void plan_blocks(const asr_model *m, dec_score *s, const int *const *pfx, const int *lens, const int *utt,
                        int n, int *order, int *glens, int *gutt, group *fast, group *slow)
{
    const decoder_acts *a = m->dec;
    kv_blocks *cur = &s->kv[(s->prev + 1) % 3], *last[2] = {&s->kv[s->prev], &s->kv[(s->prev + 2) % 3]};
    int *parent = xmalloc((size_t)n * sizeof *parent), *from = xmalloc((size_t)n * sizeof *from);
    int nf = 0, maxlen = 1, B = 1;
    for (int i = 0; i < n; i++) {
        from[i] = 0, parent[i] = find_parent(last[0], pfx[i], lens[i], utt[i]);
        if (parent[i] < 0) from[i] = 1, parent[i] = find_parent(last[1], pfx[i], lens[i], utt[i]);
        nf += parent[i] >= 0;
        maxlen = lens[i] > maxlen ? lens[i] : maxlen;
        B = utt[i] >= B ? utt[i] + 1 : B;
    }
    ensure_blocks(m->be, a, cur, n, maxlen, a->lm ? 0 : s->T + 2); /* <sos>, T tokens, <eos> at most */
    /* fast ones first, each group by utterance (in call order within one) */
    int f = 0, sl = nf;
    for (int u = 0; u < B; u++)
        for (int i = 0; i < n; i++)
            if (utt[i] == u) order[parent[i] >= 0 ? f++ : sl++] = i;
    for (int blk = 0; blk < n; blk++) {
        int i = order[blk], p = parent[i];
        glens[blk] = lens[i];
        gutt[blk] = utt[i];
        cur->lens[blk] = lens[i];
        cur->utt[blk] = utt[i];
        memcpy(cur->tokens + (size_t)blk * cur->stride, pfx[i], (size_t)lens[i] * sizeof *pfx[i]);
        if (p < 0) continue;
        size_t bytes = (size_t)(lens[i] - 1) * a->d * sizeof(float);
        const kv_blocks *prev = last[from[i]];
        for (int l = 0; l < a->nl; l++) {
            m->be->copy(m->be, block_k(a, cur, l, blk), block_k(a, prev, l, p), bytes, BACKEND_DEVICE_TO_DEVICE);
            m->be->copy(m->be, block_v(a, cur, l, blk), block_v(a, prev, l, p), bytes, BACKEND_DEVICE_TO_DEVICE);
        }
    }
    cur->used = n;
    int slow_len = 1;
    for (int blk = nf; blk < n; blk++) slow_len = glens[blk] > slow_len ? glens[blk] : slow_len;
    *fast = (group){.first = 0, .n = nf, .tq = 1, .lens = glens, .utt = gutt};
    *slow = (group){.first = nf, .n = n - nf, .tq = slow_len, .lens = glens + nf, .utt = gutt + nf};
    free(parent), free(from);
}

void decoder_score_reserve(const asr_model *m, int n_hyps, int len, int T)
{
    decoder_acts *a = m->dec;
    ESP_CHECK(a != NULL && n_hyps >= 1 && len >= 1);
    if (!a->score) a->score = xcalloc(1, sizeof *a->score);
    dec_score *s = a->score;
    for (int k = 0; k < 3; k++) { /* the blocks of the last two calls and this call's: kept only while a search runs */
        kv_blocks *b = &s->kv[k];
        int have = b->stride > 8 ? b->stride - 8 : 0; /* ensure_blocks' room beyond what it was asked */
        ensure_blocks(m->be, a, b, n_hyps > b->n ? n_hyps : b->n, len > have ? len : have, len);
    }
    ensure_pe(m->be, a, s, len);
    if (!a->lm && ensure_mem(m->be, a, s, 1, T)) s->B = 0; /* the slots moved: the next call computes them */
    /* A step's slow hypotheses (computed whole) go in groups of at most len rows (one prefix of
     * the longest, or several shorter), so the work rows never exceed what is reserved here. */
    s->row_budget = len > s->row_budget ? len : s->row_budget;
    size_t rows = (size_t)(n_hyps > s->row_budget ? n_hyps : s->row_budget), hk = rows * a->heads;
    ensure_work(m->be, a, s, rows, hk * (size_t)s->kv[0].stride, hk * (size_t)(a->lm ? 1 : T), (size_t)n_hyps);
}

void decoder_score_new_utterance(const asr_model *m)
{
    if (m->dec && m->dec->score) m->dec->score->new_utterance = 1; /* no score state yet: nothing cached */
}

void decoder_score_source_grew(const asr_model *m)
{
    if (m->dec && m->dec->score) m->dec->score->grown = 1;
}

void decoder_score_batch(const asr_model *m, const float *hs_dev, int T, const int *const *prefixes, const int *lens,
                         int n_hyps, float *logp_host)
{
    decoder_score_utts(m, hs_dev, &T, 1, T, NULL, prefixes, lens, n_hyps, logp_host);
}

void decoder_score_utts(const asr_model *m, const float *hs_dev, const int *hlens, int B, int T, const int *utt,
                        const int *const *prefixes, const int *lens, int n_hyps, float *logp_host)
{
    decoder_acts *a = m->dec;
    ESP_CHECK(a != NULL && (a->lm || (T > 0 && B >= 1)) && n_hyps >= 0);
    if (n_hyps == 0) return;
    backend *be = m->be;
    prof_layer outer = backend_profile_enter(be, a->lm ? PROF_LAYER_LM : PROF_LAYER_DECODER);
    if (!a->score) a->score = xcalloc(1, sizeof *a->score);
    dec_score *s = a->score;
    int maxlen = 1, *utt0 = NULL;
    if (!utt) utt = utt0 = xcalloc((size_t)n_hyps, sizeof *utt0);
    for (int i = 0; i < n_hyps; i++) {
        ESP_CHECK(lens[i] >= 1 && prefixes[i][0] == a->vocab - 1); /* <sos> first */
        ESP_CHECK(utt[i] >= 0 && (a->lm || utt[i] < B));
        maxlen = lens[i] > maxlen ? lens[i] : maxlen;
    }
    if (!a->lm) {
        prepare_utterances(m, s, hs_dev, hlens, B, T);
    } else if (s->new_utterance) {
        for (int i = 0; i < 3; i++) s->kv[i].used = 0;
        s->new_utterance = 0;
    }
    ensure_pe(be, a, s, maxlen);
    int *order = xmalloc((size_t)n_hyps * sizeof *order), *glens = xmalloc((size_t)n_hyps * sizeof *glens);
    int *gutt = xmalloc((size_t)n_hyps * sizeof *gutt);
    group fast, slow;
    plan_blocks(m, s, prefixes, lens, utt, n_hyps, order, glens, gutt, &fast, &slow);
    const kv_blocks *cur = &s->kv[(s->prev + 1) % 3];
    int chunk = slow.n; /* slow hypotheses per group: all, or as many as the row budget holds */
    if (s->row_budget > 0 && (size_t)slow.n * slow.tq > (size_t)s->row_budget)
        chunk = s->row_budget / slow.tq > 1 ? s->row_budget / slow.tq : 1;
    size_t rows = (size_t)chunk * slow.tq;
    if (rows < (size_t)n_hyps) rows = (size_t)n_hyps; /* the last rows' layernorm uses mean/rstd too */
    size_t self = chunk < slow.n ? rows * a->heads * cur->stride /* chunk x tq query rows */
                                 : (size_t)n_hyps * a->heads * (size_t)(slow.n ? slow.tq : 1) * cur->stride;
    ensure_work(be, a, s, rows, self, rows * a->heads * (size_t)T, (size_t)n_hyps);

    const int **pfx = xmalloc((size_t)n_hyps * sizeof *pfx);
    int *ids = xmalloc(rows * sizeof *ids), *out_row = xmalloc((size_t)n_hyps * sizeof *out_row);
    for (int blk = 0; blk < n_hyps; blk++) pfx[blk] = prefixes[order[blk]], out_row[blk] = order[blk];
    run_group(m, s, cur, &fast, pfx, ids, out_row);
    for (int i = 0; i < slow.n; i += chunk) { /* the same tq for each: the rows' arithmetic as at once */
        group g = {.first = slow.first + i, .n = slow.n - i < chunk ? slow.n - i : chunk, .tq = slow.tq,
                   .lens = slow.lens + i, .utt = slow.utt + i};
        run_group(m, s, cur, &g, pfx + fast.n + i, ids, out_row + fast.n + i);
    }

    /* after_norm -> output_layer -> log_softmax on the last rows, in the caller's order. */
    int D = a->d, V = a->vocab;
    float *ln = s->last + (size_t)n_hyps * D;
    const decoder_tensors *p = &m->w.decoder;
    be->layernorm_forward(be, ln, s->mean, s->rstd, s->last, p->after_norm.weight, p->after_norm.bias, n_hyps, D,
                          1e-12);
    be->linear_forward(be, s->logits, ln, p->output_layer.weight, p->output_layer.bias, n_hyps, D, V);
    be->log_softmax_forward(be, s->logits, s->logits, n_hyps, V);
    be->synchronize(be);
    be->copy(be, logp_host, s->logits, (size_t)n_hyps * V * sizeof(float), BACKEND_DEVICE_TO_HOST);
    be->synchronize(be);
    s->prev = (s->prev + 1) % 3;
    free(order), free(glens), free(gutt), free(pfx), free(ids), free(out_row), free(utt0);
    backend_profile_leave(be, outer);
}
