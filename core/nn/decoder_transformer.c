/* ESPnet2's TransformerDecoder: parameters, the teacher-forced forward, the label-smoothing loss
 * and the backward. See decoder_transformer.h; the beam-search step is in decoder_score.c. */
#include "core/nn/decoder_transformer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/nn/decoder_internal.h"
#include "core/nn/mha_input.h"

/* Dropout sites of the decoder: streams apart from the encoder's (core/nn/model.c uses 1, 2 and
 * 100 + 10 * block + site). */
enum { DSTREAM_POS = 50000, DSTREAM_LM_IN = 50001, DSTREAM_BLOCK0 = 50016 };
enum { DS_SELF = 0, DS_SELF_OUT, DS_SRC, DS_SRC_OUT, DS_FF_IN, DS_FF_OUT };
static uint64_t dstream(int l, int site) { return DSTREAM_BLOCK0 + 16 * (uint64_t)l + (uint64_t)site; }

decoder_acts *decoder_new(const asr_model *m)
{
    const model_dims *d = &m->dims;
    ESP_CHECK(d->dec_blocks > 0 && d->dec_heads > 0 && d->d % d->dec_heads == 0);
    decoder_acts *a = xcalloc(1, sizeof *a);
    a->nl = d->dec_blocks, a->d = d->d, a->heads = d->dec_heads, a->ff = d->dec_ff, a->vocab = d->vocab;
    a->layers = xcalloc((size_t)a->nl, sizeof *a->layers);
    if (d->lm) a->lm = 1, a->lm_pe = d->lm_pos_enc, a->E = d->lm_embed;
    return a;
}

static void free_acts(backend *be, decoder_acts *a)
{
    float **all[] = {&a->x, &a->h0, &a->lnf, &a->meanf, &a->rstdf, &a->logp, &a->dh, &a->dtmp, &a->dq, &a->dk,
                     &a->dv, &a->datt, &a->dff, &a->dln, &a->dlogits, &a->dkm, &a->dvm,
                     &a->e, &a->ea, &a->eln, &a->emean, &a->erstd, &a->er, &a->de};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) be->free(be, *all[i]), *all[i] = NULL;
    for (int l = 0; l < a->nl; l++) {
        dec_layer *y = &a->layers[l];
        float **ls[] = {&y->ln1, &y->mean1, &y->rstd1, &y->q1, &y->k1, &y->v1, &y->att1, &y->y1, &y->h1,
                        &y->ln2, &y->mean2, &y->rstd2, &y->q2, &y->km, &y->vm, &y->att2, &y->y2, &y->h2,
                        &y->ln3, &y->mean3, &y->rstd3, &y->f1, &y->h_out};
        for (size_t i = 0; i < sizeof ls / sizeof *ls; i++) be->free(be, *ls[i]), *ls[i] = NULL;
    }
    a->cap_rows = a->cap_mem = a->cap_self = a->cap_src = 0;
}

void decoder_free(backend *be, decoder_acts *a)
{
    if (!a) return;
    free_acts(be, a);
    dec_score_free(be, a->score);
    free(a->layers);
    free(a->ids_in);
    free(a->ys_out);
    free(a->lens_in);
    free(a);
}

/* Grows the teacher-forced activations for B x L targets over B x T memory frames (only ever
 * enlarged); `grads` adds the backward's work buffers. */
static void ensure_acts(backend *be, decoder_acts *a, int B, int L, int T, int grads)
{
    size_t rows = (size_t)B * L, mem = (size_t)B * T, D = (size_t)a->d, FF = (size_t)a->ff, V = (size_t)a->vocab;
    size_t self = (size_t)B * a->heads * L * L, src = (size_t)B * a->heads * L * T;
    int have_grads = a->dh != NULL;
    if (rows <= a->cap_rows && mem <= a->cap_mem && self <= a->cap_self && src <= a->cap_src &&
        (have_grads || !grads))
        return;
    free_acts(be, a);
#define A(n) be->alloc(be, (n) * sizeof(float) + 64)
    a->x = A(rows * D), a->h0 = A(rows * D);
    for (int l = 0; l < a->nl; l++) {
        dec_layer *y = &a->layers[l];
        y->ln1 = A(rows * D), y->mean1 = A(rows), y->rstd1 = A(rows);
        y->q1 = A(rows * D), y->k1 = A(rows * D), y->v1 = A(rows * D);
        y->att1 = A(self), y->y1 = A(rows * D), y->h1 = A(rows * D);
        y->ln2 = A(rows * D), y->mean2 = A(rows), y->rstd2 = A(rows);
        y->q2 = A(rows * D), y->km = A(mem * D), y->vm = A(mem * D);
        y->att2 = A(src), y->y2 = A(rows * D), y->h2 = A(rows * D);
        y->ln3 = A(rows * D), y->mean3 = A(rows), y->rstd3 = A(rows);
        y->f1 = A(rows * FF), y->h_out = A(rows * D);
    }
    a->lnf = A(rows * D), a->meanf = A(rows), a->rstdf = A(rows), a->logp = A(rows * V);
    if (a->lm) {
        a->e = A(rows * a->E), a->ea = A(rows * D), a->eln = A(rows * D), a->er = A(rows * D);
        a->emean = A(rows), a->erstd = A(rows);
    }
    a->dtmp = A(rows * D); /* the forward's branch output too */
    if (grads || have_grads) {
        a->dh = A(rows * D), a->dq = A(rows * D), a->dk = A(rows * D), a->dv = A(rows * D);
        a->datt = A(rows * D), a->dff = A(rows * FF), a->dln = A(rows * D), a->dlogits = A(rows * V);
        a->dkm = A(mem * D), a->dvm = A(mem * D);
        if (a->lm) a->de = A(rows * a->E);
    }
#undef A
    a->cap_rows = rows, a->cap_mem = mem, a->cap_self = self, a->cap_src = src;
}

void decoder_reserve(asr_model *m, int B, int L, int T)
{
    ensure_acts(m->be, m->dec, B, L, T, !m->inference);
}

/* add_sos_eos: ys_in = <sos> + ys padded with <eos> (the LM's with 0, as ESPnetLanguageModel's
 * input), ys_out = ys + <eos> padded with -1, over L = max(label_lens) + 1 positions. Returns the
 * number of target tokens (sum of L_b + 1). */
static int64_t make_targets(decoder_acts *a, const int *labels, const int *label_lens, int stride, int B)
{
    int lmax = 0, sos = a->vocab - 1, eos = a->vocab - 1;
    for (int b = 0; b < B; b++) lmax = label_lens[b] > lmax ? label_lens[b] : lmax;
    int L = lmax + 1;
    size_t n = (size_t)B * L;
    a->ids_in = xrealloc(a->ids_in, n * sizeof *a->ids_in);
    a->ys_out = xrealloc(a->ys_out, n * sizeof *a->ys_out);
    a->lens_in = xrealloc(a->lens_in, (size_t)B * sizeof *a->lens_in);
    int64_t tokens = 0;
    for (int b = 0; b < B; b++) {
        int yl = label_lens[b];
        ESP_CHECK(yl >= 0 && yl <= stride);
        int *in = a->ids_in + (size_t)b * L, *out = a->ys_out + (size_t)b * L;
        const int *y = labels + (size_t)b * stride;
        in[0] = sos;
        for (int i = 0; i < yl; i++) {
            ESP_CHECK(y[i] >= 0 && y[i] < a->vocab);
            in[i + 1] = y[i], out[i] = y[i];
        }
        out[yl] = eos;
        for (int i = yl + 1; i < L; i++) in[i] = a->lm ? 0 : eos, out[i] = -1;
        a->lens_in[b] = yl + 1;
        tokens += yl + 1;
    }
    a->B = B, a->L = L;
    return tokens;
}

/* One pre-LN block, teacher forced: N = B * L rows of x_in; memory rows B x T. */
static void block_forward(asr_model *m, decoder_acts *a, int l, const float *x_in, float pd, float ps, float pc)
{
    backend *be = m->be;
    dec_layer *y = &a->layers[l];
    int B = a->B, L = a->L, T = a->T, N = B * L, D = a->d, H = a->heads, M = B * T;
    uint64_t seed = a->seed;
    const dec_block_tensors *p = &m->w.decoder.blocks[l];
    const nn_mha *sa = &p->self_attn, *ca = &p->src_attn;
    const nn_ffn *ff = &p->feed_forward;
    mha_input_forward(be, sa, NULL, &p->norm1, x_in, y->ln1, y->mean1, y->rstd1, y->q1, y->k1, y->v1, N, D);
    be->mha_forward(be, y->y1, y->att1, y->q1, D, y->k1, y->v1, D, a->lens_in, B, L, L, 1, H, D / H, ps, seed,
                    dstream(l, DS_SELF));
    be->linear_forward(be, a->dtmp, y->y1, sa->linear_out.weight, sa->linear_out.bias, N, D, D);
    const float *h2 = a->lm ? y->h1 : y->h2; /* the feed-forward's input */
    if (a->lm) /* no source attention: norm3 follows */
        be->dropout_add_layernorm(be, y->h1, y->ln3, y->mean3, y->rstd3, x_in, a->dtmp, p->norm3.weight,
                                  p->norm3.bias, N, D, 1e-12, 1.0, pd, seed, dstream(l, DS_SELF_OUT));
    else { /* source attention */
        be->dropout_add_layernorm(be, y->h1, y->ln2, y->mean2, y->rstd2, x_in, a->dtmp, p->norm2.weight,
                                  p->norm2.bias, N, D, 1e-12, 1.0, pd, seed, dstream(l, DS_SELF_OUT));
        be->linear_forward(be, y->q2, y->ln2, ca->linear_q.weight, ca->linear_q.bias, N, D, D);
        be->linear_forward(be, y->km, a->mem, ca->linear_k.weight, ca->linear_k.bias, M, D, D);
        be->linear_forward(be, y->vm, a->mem, ca->linear_v.weight, ca->linear_v.bias, M, D, D);
        be->mha_forward(be, y->y2, y->att2, y->q2, D, y->km, y->vm, D, a->hlens, B, L, T, 0, H, D / H, pc, seed,
                        dstream(l, DS_SRC));
        be->linear_forward(be, a->dtmp, y->y2, ca->linear_out.weight, ca->linear_out.bias, N, D, D);
        be->dropout_add_layernorm(be, y->h2, y->ln3, y->mean3, y->rstd3, y->h1, a->dtmp, p->norm3.weight,
                                  p->norm3.bias, N, D, 1e-12, 1.0, pd, seed, dstream(l, DS_SRC_OUT));
    }
    be->linear_forward(be, y->f1, y->ln3, ff->w_1.weight, ff->w_1.bias, N, D, a->ff);
    be->act_dropout_forward(be, y->f1, y->f1, (size_t)N * a->ff, 1, pd, seed, dstream(l, DS_FF_IN));
    be->linear_forward(be, a->dtmp, y->f1, ff->w_2.weight, ff->w_2.bias, N, a->ff, D);
    be->dropout_add(be, y->h_out, h2, a->dtmp, (size_t)N * D, 1.0, pd, seed, dstream(l, DS_FF_OUT));
}

/* The LM's input layer, teacher forced: ids_in -> h0. */
static void lm_input_forward(asr_model *m, decoder_acts *a, float pd, float pp)
{
    backend *be = m->be;
    int N = a->B * a->L, D = a->d, E = a->E;
    const decoder_tensors *p = &m->w.decoder;
    float *relu_out = a->lm_pe ? a->er : a->h0;
    be->embedding_forward(be, a->e, p->embed, a->ids_in, N, a->vocab, E);
    be->linear_forward(be, a->ea, a->e, p->lm_in.weight, p->lm_in.bias, N, E, D);
    be->layernorm_forward(be, a->eln, a->emean, a->erstd, a->ea, p->lm_in_norm.weight, p->lm_in_norm.bias, N, D, 1e-5);
    be->dropout_forward(be, relu_out, a->eln, (size_t)N * D, pd, a->seed, DSTREAM_LM_IN);
    be->relu_forward(be, relu_out, relu_out, (size_t)N * D);
    if (!a->lm_pe) return;
    be->posenc_forward(be, a->h0, a->er, sqrt((double)D), a->B, a->L, D);
    be->dropout_forward(be, a->h0, a->h0, (size_t)N * D, pp, a->seed, DSTREAM_POS);
}

/* Its backward: a->dh holds the gradient of h0 (overwritten). */
static void lm_input_backward(asr_model *m, decoder_acts *a, float pd, float pp)
{
    backend *be = m->be;
    int N = a->B * a->L, D = a->d, E = a->E;
    if (a->lm_pe) {
        be->dropout_backward(be, a->dh, a->dh, (size_t)N * D, pp, a->seed, DSTREAM_POS);
        be->scale(be, a->dh, a->dh, sqrt((double)D), (size_t)N * D);
    }
    be->relu_backward(be, a->dh, a->dh, a->lm_pe ? a->er : a->h0, (size_t)N * D);
    be->dropout_backward(be, a->dh, a->dh, (size_t)N * D, pd, a->seed, DSTREAM_LM_IN);
    const decoder_tensors *p = &m->w.decoder, *g = &m->g.decoder;
    be->layernorm_backward(be, a->dtmp, g->lm_in_norm.weight, g->lm_in_norm.bias, a->dh, a->ea, p->lm_in_norm.weight,
                           a->emean, a->erstd, N, D, 0);
    be->linear_backward(be, a->de, g->lm_in.weight, g->lm_in.bias, a->dtmp, a->e, p->lm_in.weight, N, E, D, 0);
    be->embedding_backward(be, g->embed, a->de, a->ids_in, N, a->vocab, E);
}

int decoder_loss_argmax(const asr_model *m, int *ids)
{
    const decoder_acts *a = m->dec;
    size_t N = (size_t)a->B * (size_t)a->L, V = (size_t)a->vocab;
    float *lp = xmalloc(N * V * sizeof *lp);
    m->be->synchronize(m->be);
    m->be->copy(m->be, lp, a->logp, N * V * sizeof *lp, BACKEND_DEVICE_TO_HOST);
    for (size_t r = 0; r < N; r++) {
        const float *row = lp + r * V;
        size_t best = 0;
        for (size_t v = 1; v < V; v++)
            if (row[v] > row[best]) best = v;
        ids[r] = (int)best;
    }
    free(lp);
    return a->L;
}

static const float *block_input(const decoder_acts *a, int l) { return l == 0 ? a->h0 : a->layers[l - 1].h_out; }

double decoder_loss(asr_model *m, const float *hs, const int *hlens, int B, int T, const int *labels,
                    const int *label_lens, int stride, int train, uint64_t seed, int64_t *correct, int64_t *tokens)
{
    decoder_acts *a = m->dec;
    backend *be = m->be;
    const model_rates *r = &m->rates;
    int64_t ntok = make_targets(a, labels, label_lens, stride, B);
    ensure_acts(be, a, B, a->L, T, !m->inference);
    a->T = T, a->hlens = hlens, a->mem = hs, a->train = train, a->seed = seed;
    int N = B * a->L, D = a->d, V = a->vocab;
    float pp = train ? r->dec_pos_dropout : 0, pd = train ? r->dec_dropout : 0;
    float ps = train ? r->dec_self_att_dropout : 0, pc = train ? r->dec_src_att_dropout : 0;

    if (a->lm) {
        lm_input_forward(m, a, pd, pp);
    } else {
        be->embedding_forward(be, a->x, m->w.decoder.embed, a->ids_in, N, V, D);
        be->posenc_forward(be, a->h0, a->x, sqrt((double)D), B, a->L, D);
        be->dropout_forward(be, a->h0, a->h0, (size_t)N * D, pp, seed, DSTREAM_POS);
    }
    for (int l = 0; l < a->nl; l++) block_forward(m, a, l, block_input(a, l), pd, ps, pc);
    const decoder_tensors *p = &m->w.decoder;
    be->layernorm_forward(be, a->lnf, a->meanf, a->rstdf, block_input(a, a->nl), p->after_norm.weight,
                          p->after_norm.bias, N, D, 1e-12);
    be->linear_forward(be, a->logp, a->lnf, p->output_layer.weight, p->output_layer.bias, N, D, V);
    be->log_softmax_forward(be, a->logp, a->logp, N, V);

    int64_t hits = 0;
    double sum = be->label_smoothing_forward(be, a->logp, a->ys_out, N, V, a->lm ? 0.0 : r->lsm_weight, &hits);
    a->denom = r->length_normalized_loss || a->lm ? (double)ntok : (double)B;
    *correct = hits, *tokens = ntok;
    return sum / a->denom;
}

/* Backward of block l: a->dh holds the gradient of its output on entry, of its input on return;
 * the memory's gradient adds into dmem (the first write overwrites when *dmem_acc is 0). */
static void block_backward(asr_model *m, decoder_acts *a, int l, const float *x_in, float *dmem, int *dmem_acc,
                           float pd, float ps, float pc)
{
    backend *be = m->be;
    dec_layer *y = &a->layers[l];
    int B = a->B, L = a->L, T = a->T, N = B * L, D = a->d, H = a->heads, FF = a->ff, M = B * T;
    uint64_t seed = a->seed;
    const dec_block_tensors *p = &m->w.decoder.blocks[l], *g = &m->g.decoder.blocks[l];
    const nn_mha *sa = &p->self_attn, *gsa = &g->self_attn, *ca = &p->src_attn, *gca = &g->src_attn;
    const nn_ffn *ff = &p->feed_forward, *gff = &g->feed_forward;
    /* Feed-forward: h_out = h2 + drop(w2(drop(relu(w1(ln3(h2)))))). */
    be->dropout_backward(be, a->dtmp, a->dh, (size_t)N * D, pd, seed, dstream(l, DS_FF_OUT));
    be->linear_backward(be, a->dff, gff->w_2.weight, gff->w_2.bias, a->dtmp, y->f1, ff->w_2.weight, N, FF, D, 0);
    be->act_dropout_backward(be, a->dff, a->dff, y->f1, (size_t)N * FF, 1, pd, seed, dstream(l, DS_FF_IN));
    be->linear_backward(be, a->dln, gff->w_1.weight, gff->w_1.bias, a->dff, y->ln3, ff->w_1.weight, N, D, FF, 0);
    /* ... and the dropout of the residual before norm3: the source attention's, or the LM's self-attention's */
    be->layernorm_dropout_backward(be, a->dh, g->norm3.weight, g->norm3.bias, a->dtmp, a->dln, a->lm ? y->h1 : y->h2,
                                   p->norm3.weight, y->mean3, y->rstd3, N, D, 1.0, pd, seed,
                                   dstream(l, a->lm ? DS_SELF_OUT : DS_SRC_OUT));
    if (!a->lm) {
        /* Source attention: h2 = h1 + drop(out(att(q(ln2(h1)), k(mem), v(mem)))). */
        be->linear_backward(be, a->datt, gca->linear_out.weight, gca->linear_out.bias, a->dtmp, y->y2,
                            ca->linear_out.weight, N, D, D, 0);
        be->mha_backward(be, a->dq, a->dkm, a->dvm, a->datt, y->att2, y->q2, D, y->km, y->vm, D, a->hlens, B, L, T,
                         H, D / H, pc, seed, dstream(l, DS_SRC));
        be->linear_backward(be, a->dln, gca->linear_q.weight, gca->linear_q.bias, a->dq, y->ln2, ca->linear_q.weight,
                            N, D, D, 0);
        be->linear_backward(be, dmem, gca->linear_k.weight, gca->linear_k.bias, a->dkm, a->mem, ca->linear_k.weight, M,
                            D, D, *dmem_acc);
        be->linear_backward(be, dmem, gca->linear_v.weight, gca->linear_v.bias, a->dvm, a->mem, ca->linear_v.weight, M,
                            D, D, 1);
        *dmem_acc = 1;
        be->layernorm_dropout_backward(be, a->dh, g->norm2.weight, g->norm2.bias, a->dtmp, a->dln, y->h1,
                                       p->norm2.weight, y->mean2, y->rstd2, N, D, 1.0, pd, seed,
                                       dstream(l, DS_SELF_OUT));
    }
    /* Self-attention: h1 = x + drop(out(att(q, k, v of ln1(x)))), causal (a->dtmp: its dropout, above). */
    be->linear_backward(be, a->datt, gsa->linear_out.weight, gsa->linear_out.bias, a->dtmp, y->y1,
                        sa->linear_out.weight, N, D, D, 0);
    be->mha_backward(be, a->dq, a->dk, a->dv, a->datt, y->att1, y->q1, D, y->k1, y->v1, D, a->lens_in, B, L, L, H,
                     D / H, ps, seed, dstream(l, DS_SELF));
    mha_input_backward(be, sa, gsa, NULL, &p->norm1, &g->norm1,
                       &(mha_input_grads){a->dq, a->dk, a->dv, y->ln1, y->mean1, y->rstd1, x_in, a->dln, a->dh}, N, D);
}

void decoder_backward(asr_model *m, float *dhs, int acc, float scale)
{
    ESP_CHECK(!m->inference);
    decoder_acts *a = m->dec;
    backend *be = m->be;
    const model_rates *r = &m->rates;
    int N = a->B * a->L, D = a->d, V = a->vocab, train = a->train;
    float pp = train ? r->dec_pos_dropout : 0, pd = train ? r->dec_dropout : 0;
    float ps = train ? r->dec_self_att_dropout : 0, pc = train ? r->dec_src_att_dropout : 0;

    /* The loss is sum / denom: the backend's backward gives the gradient of the logits. */
    be->label_smoothing_backward(be, a->dlogits, a->logp, a->ys_out, N, V, r->lsm_weight, scale / a->denom);
    const decoder_tensors *p = &m->w.decoder, *g = &m->g.decoder;
    be->linear_backward(be, a->dtmp, g->output_layer.weight, g->output_layer.bias, a->dlogits, a->lnf,
                        p->output_layer.weight, N, D, V, 0);
    be->layernorm_backward(be, a->dh, g->after_norm.weight, g->after_norm.bias, a->dtmp, block_input(a, a->nl),
                           p->after_norm.weight, a->meanf, a->rstdf, N, D, 0);
    for (int l = a->nl - 1; l >= 0; l--) block_backward(m, a, l, block_input(a, l), dhs, &acc, pd, ps, pc);
    if (a->lm) {
        lm_input_backward(m, a, pd, pp);
        return;
    }
    /* Embedding: h0 = drop(x * sqrt(d) + pe). */
    be->dropout_backward(be, a->dh, a->dh, (size_t)N * D, pp, a->seed, DSTREAM_POS);
    be->scale(be, a->dh, a->dh, sqrt((double)D), (size_t)N * D);
    be->embedding_backward(be, g->embed, a->dh, a->ids_in, N, V, D);
}
