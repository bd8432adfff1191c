/* The beam search's decoder step (decoder_score_batch, see decoder_transformer.h): ESPnet's
 * TransformerDecoder.batch_score with keys and values cached.
 *
 * Caches (device): the source attention's keys/values of the utterance per layer (T x d each; when
 * the online search's source grew, only the new frames' are computed: the earlier rows are the same),
 * and the self-attention's keys/values of every prefix the last two calls scored, per layer, in
 * the slots of core/nn/decoder_kv.h (a hypothesis writes its new row into its parent's slot when
 * it is the first to extend it; others copy the parent's rows). A prefix is "fast" when a record
 * of the previous call (else of the one before: the online search rewinds its beam by a step)
 * holds its first len - 1 positions (its parent, or itself): only its last position is computed,
 * one query row per hypothesis against its slot. Any other prefix is "slow": all its positions run
 * as a causal teacher-forced pass. Both groups write their keys/values into their slots (the next
 * call's cache) and their last rows go through after_norm, output_layer and log_softmax.
 * The LM form (TransformerLM, decoder_internal.h) is the same without the source attention and with
 * its own input layer; it depends on no utterance (hs_dev NULL, T 0).
 *
 * Several utterances (decoder_score_utts): the source keys/values per utterance (its own GEMM over
 * its hlens[b] frames, as alone), a cached record belongs to one utterance (a parent is found only
 * in its own), and each group's hypotheses are ordered by utterance so that each utterance's rows
 * attend to its source in one call, keys [0, hlens[b]) as alone. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/compute/backend_profile.h"
#include "core/nn/decoder_internal.h"
#include "core/nn/decoder_kv.h"
#include "core/nn/decoder_transformer.h"
#include "core/nn/mha_input.h"

struct dec_score {
    /* The utterances the source caches belong to; new_utterance: drop them at the next call;
     * grown: the next call's source is this utterance's, longer (keep the prefix caches). */
    const float *hs;
    int T, B, new_utterance, grown;
    int *hlens;     /* host, B */
    float *km, *vm; /* nl x B x mstride x d: frames [0, hlens[b]) of each slot */
    size_t cap_mem;
    int mstride;    /* frames per slot (grows by half, so a growing source seldom moves) */
    dec_kv kv;      /* the self-attention's keys/values of the prefixes the last calls scored */
    float *pe;      /* sinusoidal table, pe_len x d */
    int pe_len;
    /* Work of one group: rows R = hypotheses x query rows. */
    size_t cap_rows, cap_self, cap_src, cap_hyps;
    int row_budget; /* rows a slow group may take at once (decoder_score_reserve; 0: all of it) */
    float *x, *ln, *q, *k, *v, *y, *tmp, *f1, *mean, *rstd, *att, *last, *logits;
    float *emb; /* the LM's token embeddings (rows x E) */
};

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
    dec_kv_free(be, &s->kv);
    be->free(be, s->km);
    be->free(be, s->vm);
    be->free(be, s->pe);
    free(s->hlens);
    free(s);
}

#define ALLOC(n) be->alloc(be, (n) * sizeof(float) + 64)

/* The step's state of decoder a, made on first use. */
static dec_score *score_state(decoder_acts *a)
{
    if (!a->score) {
        a->score = xcalloc(1, sizeof *a->score);
        dec_kv_init(&a->score->kv, a->nl, a->d);
    }
    return a->score;
}

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
    if (!s->grown) dec_kv_clear(&s->kv);
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

/* A group of hypotheses scored together: their slots of s->kv, tq query rows per hypothesis (1:
 * fast, the last position only; else slow, positions 0..tq-1 causally). */
typedef struct group {
    int n, tq;
    const int *slots; /* n */
    const int *lens; /* n prefix lengths */
    const int *utt;  /* n utterances, in runs of one utterance */
} group;

/* The blocks of one layer: queries (rows g->n * tq of s->x) against each hypothesis' slot, the
 * source attention against the utterance; s->x is updated in place (the residual stream). */
static void group_layer(const asr_model *m, dec_score *s, const group *g, int l)
{
    backend *be = m->be;
    const decoder_acts *a = m->dec;
    int R = g->n * g->tq, D = a->d, H = a->heads;
    const dec_block_tensors *p = &m->w.decoder.blocks[l];
    const nn_mha *sa = &p->self_attn, *ca = &p->src_attn;
    const nn_ffn *ff = &p->feed_forward;
    mha_input_forward(be, sa, NULL, &p->norm1, s->x, s->ln, s->mean, s->rstd, s->q, s->k, s->v, R, D);
    /* The new rows' keys/values into the slots (the last position, fast, or all, slow), then each
     * hypothesis' queries against its slot (the slots lie anywhere: one attention each). */
    const dec_kv *kv = &s->kv;
    for (int i = 0; i < g->n; i++) {
        int pos0 = g->tq == 1 ? g->lens[i] - 1 : 0, rows = g->tq == 1 ? 1 : g->lens[i];
        size_t src = (size_t)i * g->tq * D, dst = (size_t)pos0 * D, bytes = (size_t)rows * D * sizeof(float);
        float *k = dec_kv_k(kv, g->slots[i], l), *v = dec_kv_v(kv, g->slots[i], l);
        be->copy(be, k + dst, s->k + src, bytes, BACKEND_DEVICE_TO_DEVICE);
        be->copy(be, v + dst, s->v + src, bytes, BACKEND_DEVICE_TO_DEVICE);
        be->mha_forward(be, s->y + src, s->att, s->q + src, D, k, v, D, &g->lens[i], 1, g->tq, kv->stride, g->tq > 1,
                        H, D / H, 0, 0, 0);
    }
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
static void run_group(const asr_model *m, dec_score *s, const group *g,
                      const int *const *pfx, int *ids, const int *out_row)
{
    if (g->n == 0) return;
    const decoder_acts *a = m->dec;
    backend *be = m->be;
    group_embed(m, s, g, pfx, ids);
    for (int l = 0; l < a->nl; l++) group_layer(m, s, g, l);
    for (int i = 0; i < g->n; i++) {
        size_t row = (size_t)i * g->tq + (g->tq == 1 ? 0 : (size_t)g->lens[i] - 1);
        be->copy(be, s->last + (size_t)out_row[i] * a->d, s->x + row * a->d, (size_t)a->d * sizeof(float),
                 BACKEND_DEVICE_TO_DEVICE);
    }
}

/* Sorts the hypotheses into fast (a parent's rows found: in its slot, or copied) and slow ones;
 * fills order (group position -> hypothesis), the groups' lens, utterances and slots, and this
 * call's records. */
static void plan_blocks(const asr_model *m, dec_score *s, const int *const *pfx, const int *lens, const int *utt,
                        int n, int *order, int *glens, int *gutt, int *gslot, group *fast, group *slow)
{
    dec_kv *kv = &s->kv;
    int *parent = xmalloc((size_t)n * sizeof *parent);
    int nf = 0, maxlen = 1, B = 1;
    dec_kv_begin(kv);
    for (int i = 0; i < n; i++) {
        parent[i] = dec_kv_find_parent(kv, pfx[i], lens[i], utt[i]);
        nf += parent[i] >= 0;
        maxlen = lens[i] > maxlen ? lens[i] : maxlen;
        B = utt[i] >= B ? utt[i] + 1 : B;
    }
    dec_kv_reserve(m->be, kv, n, maxlen, m->dec->lm ? 0 : s->T + 2); /* <sos>, T tokens, <eos> at most */
    /* fast ones first, each group by utterance (in call order within one) */
    int f = 0, sl = nf;
    for (int u = 0; u < B; u++)
        for (int i = 0; i < n; i++)
            if (utt[i] == u) order[parent[i] >= 0 ? f++ : sl++] = i;
    for (int k = 0; k < n; k++) {
        int i = order[k];
        glens[k] = lens[i], gutt[k] = utt[i];
        gslot[k] = dec_kv_add(m->be, kv, pfx[i], lens[i], utt[i], parent[i]);
    }
    int slow_len = 1;
    for (int k = nf; k < n; k++) slow_len = glens[k] > slow_len ? glens[k] : slow_len;
    *fast = (group){.n = nf, .tq = 1, .slots = gslot, .lens = glens, .utt = gutt};
    *slow = (group){.n = n - nf, .tq = slow_len, .slots = gslot + nf, .lens = glens + nf, .utt = gutt + nf};
    free(parent);
}

void decoder_score_reserve(const asr_model *m, int n_hyps, int len, int T)
{
    decoder_acts *a = m->dec;
    ESP_CHECK(a != NULL && n_hyps >= 1 && len >= 1);
    dec_score *s = score_state(a);
    /* slots for the records of the last two calls and this call's, none shared */
    dec_kv_reserve(m->be, &s->kv, 3 * n_hyps - (s->kv.nslots - s->kv.n_free), len, len);
    ensure_pe(m->be, a, s, len);
    if (!a->lm && ensure_mem(m->be, a, s, 1, T)) s->B = 0; /* the slots moved: the next call computes them */
    /* A step's slow hypotheses (computed whole) go in groups of at most len rows (one prefix of
     * the longest, or several shorter), so the work rows never exceed what is reserved here. */
    s->row_budget = len > s->row_budget ? len : s->row_budget;
    size_t rows = (size_t)(n_hyps > s->row_budget ? n_hyps : s->row_budget), hk = rows * a->heads;
    ensure_work(m->be, a, s, rows, hk * (size_t)s->kv.stride, hk * (size_t)(a->lm ? 1 : T), (size_t)n_hyps);
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
    dec_score *s = score_state(a);
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
        dec_kv_clear(&s->kv);
        s->new_utterance = 0;
    }
    ensure_pe(be, a, s, maxlen);
    int *order = xmalloc((size_t)n_hyps * sizeof *order), *glens = xmalloc((size_t)n_hyps * sizeof *glens);
    int *gutt = xmalloc((size_t)n_hyps * sizeof *gutt), *gslot = xmalloc((size_t)n_hyps * sizeof *gslot);
    group fast, slow;
    plan_blocks(m, s, prefixes, lens, utt, n_hyps, order, glens, gutt, gslot, &fast, &slow);
    size_t stride = (size_t)s->kv.stride;
    int chunk = slow.n; /* slow hypotheses per group: all, or as many as the row budget holds */
    if (s->row_budget > 0 && (size_t)slow.n * slow.tq > (size_t)s->row_budget)
        chunk = s->row_budget / slow.tq > 1 ? s->row_budget / slow.tq : 1;
    size_t rows = (size_t)chunk * slow.tq;
    if (rows < (size_t)n_hyps) rows = (size_t)n_hyps; /* the last rows' layernorm uses mean/rstd too */
    size_t self = chunk < slow.n ? rows * a->heads * stride /* chunk x tq query rows */
                                 : (size_t)n_hyps * a->heads * (size_t)(slow.n ? slow.tq : 1) * stride;
    ensure_work(be, a, s, rows, self, rows * a->heads * (size_t)T, (size_t)n_hyps);

    const int **pfx = xmalloc((size_t)n_hyps * sizeof *pfx);
    int *ids = xmalloc(rows * sizeof *ids), *out_row = xmalloc((size_t)n_hyps * sizeof *out_row);
    for (int blk = 0; blk < n_hyps; blk++) pfx[blk] = prefixes[order[blk]], out_row[blk] = order[blk];
    run_group(m, s, &fast, pfx, ids, out_row);
    for (int i = 0; i < slow.n; i += chunk) { /* the same tq for each: the rows' arithmetic as at once */
        group g = {.n = slow.n - i < chunk ? slow.n - i : chunk, .tq = slow.tq, .slots = slow.slots + i,
                   .lens = slow.lens + i, .utt = slow.utt + i};
        run_group(m, s, &g, pfx + fast.n + i, ids, out_row + fast.n + i);
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
    dec_kv_end(&s->kv);
    free(order), free(glens), free(gutt), free(gslot), free(pfx), free(ids), free(out_row), free(utt0);
    backend_profile_leave(be, outer);
}
