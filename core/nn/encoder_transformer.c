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
    enc_act_store store; /* blocks, and the shape they fit */
    /* Backward work. */
    float *dq, *dk, *dv, *datt, *dff, *dln;
};

/* What a block keeps for the backward. */
static void block_kept(const model_dims *d, void *block, enc_act_list *kept, enc_act_shape s)
{
    block_acts *b = block;
    size_t D = (size_t)d->d, FF = (size_t)d->ff, rows = s.rows;
    float **rows_d[] = {&b->ln1, &b->q, &b->k, &b->v, &b->atty, &b->h1, &b->ln2};
    enc_act_add(kept, &b->mean1, rows), enc_act_add(kept, &b->rstd1, rows);
    for (size_t i = 0; i < sizeof rows_d / sizeof *rows_d; i++) enc_act_add(kept, rows_d[i], rows * D);
    enc_act_add(kept, &b->att, s.att);
    enc_act_add(kept, &b->mean2, rows), enc_act_add(kept, &b->rstd2, rows);
    enc_act_add(kept, &b->f1, rows * FF), enc_act_add(kept, &b->h_out, rows * D);
}

static void shared(asr_model *m, enc_act_list *fwd, enc_act_list *work, enc_act_shape s)
{
    (void)fwd; /* the blocks share nothing in the forward */
    encoder_acts *e = m->enc;
    size_t D = (size_t)m->dims.d, FF = (size_t)m->dims.ff;
    enc_act_add(work, &e->dq, s.rows * D), enc_act_add(work, &e->dk, s.rows * D), enc_act_add(work, &e->dv, s.rows * D);
    enc_act_add(work, &e->datt, s.rows * D), enc_act_add(work, &e->dff, s.rows * FF), enc_act_add(work, &e->dln, s.rows * D);
}

static const enc_act_decl decl = {sizeof(block_acts), 0, block_kept, shared};

static encoder_acts *acts(asr_model *m)
{
    if (!m->enc) {
        m->enc = xcalloc(1, sizeof *m->enc);
        m->enc->blocks = xcalloc((size_t)m->dims.blocks, sizeof *m->enc->blocks);
        m->enc->store.blocks = m->enc->blocks;
    }
    return m->enc;
}

static void release(asr_model *m)
{
    if (m->enc) enc_acts_release(m, &decl, &m->enc->store);
}

static void destroy(asr_model *m)
{
    release(m);
    if (m->enc) free(m->enc->blocks);
    free(m->enc);
    m->enc = NULL;
}

static void ensure(asr_model *m, int B, int T2) { enc_acts_ensure(m, &decl, &acts(m)->store, B, T2); }

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
