/* ESPnet2's TransformerEncoder blocks (pre-LN):
 *   x += dropout(MHA(LN(x)));  x += dropout(W2(dropout(ReLU(W1(LN(x))))))
 * forward and backward on the backend, parameters by their ESPnet2 names. */
#include <stdio.h>
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
        const float *h = block_input(m, l);
        char a[96];
        be->layernorm_forward(be, b->ln1, b->mean1, b->rstd1, h, P("encoder.encoders.%d.norm1", l, "weight"),
                              P("encoder.encoders.%d.norm1", l, "bias"), N, D, 1e-12);
        snprintf(a, sizeof a, "encoder.encoders.%%d.self_attn.linear_q");
        be->linear_forward(be, b->q, b->ln1, P(a, l, "weight"), P(a, l, "bias"), N, D, D);
        snprintf(a, sizeof a, "encoder.encoders.%%d.self_attn.linear_k");
        be->linear_forward(be, b->k, b->ln1, P(a, l, "weight"), P(a, l, "bias"), N, D, D);
        snprintf(a, sizeof a, "encoder.encoders.%%d.self_attn.linear_v");
        be->linear_forward(be, b->v, b->ln1, P(a, l, "weight"), P(a, l, "bias"), N, D, D);
        be->attention_forward(be, b->atty, b->att, b->q, b->k, b->v, D, m->hlens, m->B, m->T2, d->heads,
                              D / d->heads, r.pa, seed, block_stream(l, SITE_ATT));
        snprintf(a, sizeof a, "encoder.encoders.%%d.self_attn.linear_out");
        be->linear_forward(be, m->dtmp, b->atty, P(a, l, "weight"), P(a, l, "bias"), N, D, D);
        be->dropout_forward(be, m->dtmp, m->dtmp, (size_t)N * D, r.pd, seed, block_stream(l, SITE_ATT_OUT));
        be->add(be, b->h1, h, m->dtmp, (size_t)N * D);

        be->layernorm_forward(be, b->ln2, b->mean2, b->rstd2, b->h1, P("encoder.encoders.%d.norm2", l, "weight"),
                              P("encoder.encoders.%d.norm2", l, "bias"), N, D, 1e-12);
        be->linear_forward(be, b->f1, b->ln2, P("encoder.encoders.%d.feed_forward.w_1", l, "weight"),
                           P("encoder.encoders.%d.feed_forward.w_1", l, "bias"), N, D, d->ff);
        be->relu_forward(be, b->f1, b->f1, (size_t)N * d->ff);
        be->dropout_forward(be, b->f1, b->f1, (size_t)N * d->ff, r.pd, seed, block_stream(l, SITE_FF_IN));
        be->linear_forward(be, m->dtmp, b->f1, P("encoder.encoders.%d.feed_forward.w_2", l, "weight"),
                           P("encoder.encoders.%d.feed_forward.w_2", l, "bias"), N, d->ff, D);
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
        const float *h = block_input(m, l);
        char a[96];
        interctc_before_block_backward(m, l);
        /* Feed-forward branch: h_out = h1 + drop(w2(drop(relu(w1(ln2(h1)))))). */
        be->dropout_backward(be, m->dtmp, m->dh, (size_t)N * D, r.pd, seed, block_stream(l, SITE_FF_OUT));
        be->linear_backward(be, e->dff, G("encoder.encoders.%d.feed_forward.w_2", l, "weight"),
                            G("encoder.encoders.%d.feed_forward.w_2", l, "bias"), m->dtmp, b->f1,
                            P("encoder.encoders.%d.feed_forward.w_2", l, "weight"), N, FF, D, 0);
        be->dropout_backward(be, e->dff, e->dff, (size_t)N * FF, r.pd, seed, block_stream(l, SITE_FF_IN));
        be->relu_backward(be, e->dff, e->dff, b->f1, (size_t)N * FF);
        be->linear_backward(be, e->dln, G("encoder.encoders.%d.feed_forward.w_1", l, "weight"),
                            G("encoder.encoders.%d.feed_forward.w_1", l, "bias"), e->dff, b->ln2,
                            P("encoder.encoders.%d.feed_forward.w_1", l, "weight"), N, D, FF, 0);
        be->layernorm_backward(be, m->dh, G("encoder.encoders.%d.norm2", l, "weight"),
                               G("encoder.encoders.%d.norm2", l, "bias"), e->dln, b->h1,
                               P("encoder.encoders.%d.norm2", l, "weight"), b->mean2, b->rstd2, N, D, 1);
        /* Attention branch: h1 = h + drop(linear_out(att(q, k, v))). */
        be->dropout_backward(be, m->dtmp, m->dh, (size_t)N * D, r.pd, seed, block_stream(l, SITE_ATT_OUT));
        snprintf(a, sizeof a, "encoder.encoders.%%d.self_attn.linear_out");
        be->linear_backward(be, e->datt, G(a, l, "weight"), G(a, l, "bias"), m->dtmp, b->atty, P(a, l, "weight"), N,
                            D, D, 0);
        be->attention_backward(be, e->dq, e->dk, e->dv, e->datt, b->att, b->q, b->k, b->v, D, m->hlens, m->B, m->T2,
                               d->heads, D / d->heads, r.pa, seed, block_stream(l, SITE_ATT));
        snprintf(a, sizeof a, "encoder.encoders.%%d.self_attn.linear_q");
        be->linear_backward(be, e->dln, G(a, l, "weight"), G(a, l, "bias"), e->dq, b->ln1, P(a, l, "weight"), N, D, D, 0);
        snprintf(a, sizeof a, "encoder.encoders.%%d.self_attn.linear_k");
        be->linear_backward(be, e->dln, G(a, l, "weight"), G(a, l, "bias"), e->dk, b->ln1, P(a, l, "weight"), N, D, D, 1);
        snprintf(a, sizeof a, "encoder.encoders.%%d.self_attn.linear_v");
        be->linear_backward(be, e->dln, G(a, l, "weight"), G(a, l, "bias"), e->dv, b->ln1, P(a, l, "weight"), N, D, D, 1);
        be->layernorm_backward(be, m->dh, G("encoder.encoders.%d.norm1", l, "weight"),
                               G("encoder.encoders.%d.norm1", l, "bias"), e->dln, h,
                               P("encoder.encoders.%d.norm1", l, "weight"), b->mean1, b->rstd1, N, D, 1);
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
