/* ESPnet2's TransformerEncoder blocks (pre-LN):
 *   x += dropout(MHA(LN(x)));  x += dropout(W2(dropout(ReLU(W1(LN(x))))))
 * forward and backward on the backend, parameters through the model's typed views (m->w, m->g). */
#include <stdlib.h>
#include <string.h>

#include "core/nn/encoder.h"

enum { SITE_ATT = 0, SITE_ATT_OUT = 1, SITE_FF_IN = 2, SITE_FF_OUT = 3 };

typedef struct block_acts {
    float *ln1, *mean1, *rstd1, *q, *k, *v, *att, *atty, *h1, *ln2, *mean2, *rstd2, *f1;
    float *h_out; /* the block's output (the next block's input) */
} block_acts;

struct encoder_acts {
    block_acts *blocks;
    size_t cap_rows, cap_att;
    /* Backward work. */
    float *dq, *dk, *dv, *datt, *dff, *dln;
};

static encoder_acts *acts(asr_model *m)
{
    if (!m->enc) {
        m->enc = xcalloc(1, sizeof *m->enc);
        m->enc->blocks = xcalloc((size_t)m->dims.blocks, sizeof *m->enc->blocks);
    }
    return m->enc;
}

static void release(asr_model *m)
{
    encoder_acts *e = m->enc;
    if (!e) return;
    backend *be = m->be;
    float **work[] = {&e->dq, &e->dk, &e->dv, &e->datt, &e->dff, &e->dln};
    for (size_t i = 0; i < sizeof work / sizeof *work; i++) {
        be->free(be, *work[i]);
        *work[i] = NULL;
    }
    for (int l = 0; l < m->dims.blocks; l++) {
        block_acts *b = &e->blocks[l];
        if (m->inference && l > 0) { /* aliases of blocks[0] */
            memset(b, 0, sizeof *b);
            continue;
        }
        float **bs[] = {&b->ln1, &b->mean1, &b->rstd1, &b->q, &b->k, &b->v, &b->att, &b->atty,
                        &b->h1, &b->ln2, &b->mean2, &b->rstd2, &b->f1, &b->h_out};
        for (size_t i = 0; i < sizeof bs / sizeof *bs; i++) {
            be->free(be, *bs[i]);
            *bs[i] = NULL;
        }
    }
    e->cap_rows = e->cap_att = 0;
}

static void destroy(asr_model *m)
{
    release(m);
    if (m->enc) free(m->enc->blocks);
    free(m->enc);
    m->enc = NULL;
}

static void ensure(asr_model *m, int B, int T2)
{
    const model_dims *d = &m->dims;
    encoder_acts *e = acts(m);
    size_t rows = (size_t)B * (size_t)T2, att = (size_t)B * d->heads * (size_t)T2 * T2;
    if (rows <= e->cap_rows && att <= e->cap_att) return;
    release(m);
    backend *be = m->be;
    size_t D = (size_t)d->d, FF = (size_t)d->ff;
#define A(n) be->alloc(be, (n) * sizeof(float) + 64)
    for (int l = 0; l < d->blocks; l++) {
        block_acts *b = &e->blocks[l];
        if (m->inference && l > 0) {
            *b = e->blocks[0];
            continue;
        }
        b->ln1 = A(rows * D), b->mean1 = A(rows), b->rstd1 = A(rows);
        b->q = A(rows * D), b->k = A(rows * D), b->v = A(rows * D);
        b->att = A(att), b->atty = A(rows * D), b->h1 = A(rows * D);
        b->ln2 = A(rows * D), b->mean2 = A(rows), b->rstd2 = A(rows);
        b->f1 = A(rows * FF), b->h_out = A(rows * D);
    }
    e->cap_rows = rows, e->cap_att = att;
    if (m->inference) return;
    e->dq = A(rows * D), e->dk = A(rows * D), e->dv = A(rows * D);
    e->datt = A(rows * D), e->dff = A(rows * FF), e->dln = A(rows * D);
#undef A
}

static const float *block_input(const asr_model *m, int l) { return l == 0 ? m->h0 : m->enc->blocks[l - 1].h_out; }

static const float *forward(asr_model *m)
{
    const model_dims *d = &m->dims;
    backend *be = m->be;
    encoder_acts *e = m->enc;
    int N = m->B * m->T2, D = d->d;
    enc_rates r = enc_rates_of(m);
    uint64_t seed = m->seed;
    for (int l = 0; l < d->blocks; l++) {
        block_acts *b = &e->blocks[l];
        const enc_block_tensors *p = &m->w.blocks[l];
        const nn_mha *sa = &p->self_attn;
        const float *h = block_input(m, l);
        be->layernorm_forward(be, b->ln1, b->mean1, b->rstd1, h, p->norm1.weight, p->norm1.bias, N, D, 1e-12);
        be->linear_forward(be, b->q, b->ln1, sa->linear_q.weight, sa->linear_q.bias, N, D, D);
        be->linear_forward(be, b->k, b->ln1, sa->linear_k.weight, sa->linear_k.bias, N, D, D);
        be->linear_forward(be, b->v, b->ln1, sa->linear_v.weight, sa->linear_v.bias, N, D, D);
        be->attention_forward(be, b->atty, b->att, b->q, b->k, b->v, D, m->hlens, m->B, m->T2, d->heads,
                              D / d->heads, r.pa, seed, block_stream(l, SITE_ATT));
        be->linear_forward(be, m->dtmp, b->atty, sa->linear_out.weight, sa->linear_out.bias, N, D, D);
        be->dropout_forward(be, m->dtmp, m->dtmp, (size_t)N * D, r.pd, seed, block_stream(l, SITE_ATT_OUT));
        be->add(be, b->h1, h, m->dtmp, (size_t)N * D);

        be->layernorm_forward(be, b->ln2, b->mean2, b->rstd2, b->h1, p->norm2.weight, p->norm2.bias, N, D, 1e-12);
        be->linear_forward(be, b->f1, b->ln2, p->feed_forward.w_1.weight, p->feed_forward.w_1.bias, N, D, d->ff);
        be->relu_forward(be, b->f1, b->f1, (size_t)N * d->ff);
        be->dropout_forward(be, b->f1, b->f1, (size_t)N * d->ff, r.pd, seed, block_stream(l, SITE_FF_IN));
        be->linear_forward(be, m->dtmp, b->f1, p->feed_forward.w_2.weight, p->feed_forward.w_2.bias, N, d->ff, D);
        be->dropout_forward(be, m->dtmp, m->dtmp, (size_t)N * D, r.pd, seed, block_stream(l, SITE_FF_OUT));
        be->add(be, b->h_out, b->h1, m->dtmp, (size_t)N * D);
        interctc_after_block(m, l, b->h_out);
    }
    return block_input(m, d->blocks);
}

static void backward(asr_model *m)
{
    const model_dims *d = &m->dims;
    backend *be = m->be;
    encoder_acts *e = m->enc;
    int N = m->B * m->T2, D = d->d, FF = d->ff;
    enc_rates r = enc_rates_of(m);
    uint64_t seed = m->seed;
    for (int l = d->blocks - 1; l >= 0; l--) {
        block_acts *b = &e->blocks[l];
        const enc_block_tensors *p = &m->w.blocks[l], *g = &m->g.blocks[l];
        const nn_mha *sa = &p->self_attn, *gsa = &g->self_attn;
        const float *h = block_input(m, l);
        interctc_before_block_backward(m, l);
        /* Feed-forward branch: h_out = h1 + drop(w2(drop(relu(w1(ln2(h1)))))). */
        be->dropout_backward(be, m->dtmp, m->dh, (size_t)N * D, r.pd, seed, block_stream(l, SITE_FF_OUT));
        be->linear_backward(be, e->dff, g->feed_forward.w_2.weight, g->feed_forward.w_2.bias, m->dtmp, b->f1,
                            p->feed_forward.w_2.weight, N, FF, D, 0);
        be->dropout_backward(be, e->dff, e->dff, (size_t)N * FF, r.pd, seed, block_stream(l, SITE_FF_IN));
        be->relu_backward(be, e->dff, e->dff, b->f1, (size_t)N * FF);
        be->linear_backward(be, e->dln, g->feed_forward.w_1.weight, g->feed_forward.w_1.bias, e->dff, b->ln2,
                            p->feed_forward.w_1.weight, N, D, FF, 0);
        be->layernorm_backward(be, m->dh, g->norm2.weight, g->norm2.bias, e->dln, b->h1, p->norm2.weight, b->mean2,
                               b->rstd2, N, D, 1);
        /* Attention branch: h1 = h + drop(linear_out(att(q, k, v))). */
        be->dropout_backward(be, m->dtmp, m->dh, (size_t)N * D, r.pd, seed, block_stream(l, SITE_ATT_OUT));
        be->linear_backward(be, e->datt, gsa->linear_out.weight, gsa->linear_out.bias, m->dtmp, b->atty,
                            sa->linear_out.weight, N, D, D, 0);
        be->attention_backward(be, e->dq, e->dk, e->dv, e->datt, b->att, b->q, b->k, b->v, D, m->hlens, m->B, m->T2,
                               d->heads, D / d->heads, r.pa, seed, block_stream(l, SITE_ATT));
        be->linear_backward(be, e->dln, gsa->linear_q.weight, gsa->linear_q.bias, e->dq, b->ln1, sa->linear_q.weight,
                            N, D, D, 0);
        be->linear_backward(be, e->dln, gsa->linear_k.weight, gsa->linear_k.bias, e->dk, b->ln1, sa->linear_k.weight,
                            N, D, D, 1);
        be->linear_backward(be, e->dln, gsa->linear_v.weight, gsa->linear_v.bias, e->dv, b->ln1, sa->linear_v.weight,
                            N, D, D, 1);
        be->layernorm_backward(be, m->dh, g->norm1.weight, g->norm1.bias, e->dln, h, p->norm1.weight, b->mean1,
                               b->rstd1, N, D, 1);
        asr_model_block_grads_final(m, l);
    }
}

const encoder_impl encoder_transformer = {
    .ensure = ensure,
    .release = release,
    .destroy = destroy,
    .forward = forward,
    .backward = backward,
};
