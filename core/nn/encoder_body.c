/* The asr_transducer task's Encoder whose body_conf blocks differ in block_type or sizes
 * (model_dims.n_groups > 1; espnet2/asr_transducer/encoder/encoder.py's MultiBlocks over blocks
 * built one by one): each block runs on the code of its kind, the Conformer block (cblock_*) or the
 * E-Branchformer block (eblock_*, also the Branchformer's), with its own sizes and dropout rates.
 * The block code reads the model's dims and rates, so each block runs with m->dims and the
 * rates' dropout / att_dropout set to its own (model_block_dims, model_rates.group_*) and put
 * back after it. The relative encoding is computed once and shared, as MultiBlocks' pos_enc.
 *
 * A conv1d block (blocks/conv1d.py; those that keep the frames and the size: kernel_size 1,
 * stride 1, body_conf.c refuses the others) is x -> relu?(drop(bn?(conv(x)))), no residual, and it
 * hands the blocks after it out_pos(pos): their attention reads that encoding, so their backward
 * adds the gradient of it (enc_attn_work.dpos) into the conv1d block's dpos, whose backward takes
 * out_pos' gradients from it and passes the rest to the encoding before (an earlier conv1d's). */
#include <stddef.h>

#include "core/nn/encoder.h"

/* A conv1d block's buffers: conv output, BatchNorm's output and statistics, dropout's output (ReLU's
 * input), the output, the encoding it hands on (prows x d) and that encoding's gradient. */
typedef struct c1block {
    float *y, *bn, *bn_mean, *bn_rstd, *dr, *out, *pos, *dpos;
} c1block;

typedef struct body_block {
    cblock c;  /* a Conformer block's buffers */
    eblock e;  /* an (E-)Branchformer block's */
    c1block k; /* a conv1d block's */
} body_block;

struct encoder_acts {
    enc_act_store store; /* first (core/nn/encoder_acts.c): the blocks (body_block), and the shape they fit */
    enc_rel_shared rel;  /* the relative encoding, and backward work the blocks share */
    cblock_work cw;
    eblock_work ew;
};

_Static_assert(offsetof(encoder_acts, store) == 0, "core/nn/encoder_acts.c finds the store first");
static body_block *blocks(const asr_model *m) { return m->enc->store.blocks; }

/* All of a conv1d block's buffers (BatchNorm's used or not: a block's dims do not say). */
static void c1block_kept(const model_dims *d, c1block *b, enc_act_list *kept, enc_act_shape s)
{
    size_t rd = s.rows * (size_t)d->d;
#define BUF(field, count) enc_act_add(kept, &b->field, (count))
    BUF(y, rd), BUF(bn, rd), BUF(bn_mean, d->d), BUF(bn_rstd, d->d), BUF(dr, rd), BUF(out, rd);
    BUF(pos, s.prows * (size_t)d->d), BUF(dpos, s.prows * (size_t)d->d);
#undef BUF
}

/* d: the block's own dims (enc_act_decl.per_block). */
static void block_kept(const model_dims *d, void *block, enc_act_list *kept, enc_act_shape s)
{
    body_block *b = block;
    if (d->encoder == ENC_CONFORMER) cblock_kept(d, &b->c, kept, s);
    else if (d->encoder == ENC_EBRANCHFORMER) eblock_kept(d, &b->e, kept, s);
    else c1block_kept(d, &b->k, kept, s);
}

/* m->dims holds the groups' largest ff, heads and cgmlp_units: the shared work fits every block. */
static void shared(asr_model *m, enc_act_list *fwd, enc_act_list *work, enc_act_shape s)
{
    encoder_acts *e = m->enc;
    enc_rel_shared_decl(&m->dims, &e->rel, fwd, work, s);
    cblock_work_decl(&m->dims, &e->cw, work, s.rows);
    eblock_work_decl(&m->dims, &e->ew, work, s.rows);
}

static const enc_act_decl decl = {sizeof(encoder_acts), sizeof(body_block), 1, block_kept, shared, NULL, NULL, 1};

/* What block l changes in m while it runs, to be put back. */
typedef struct block_view {
    model_dims dims;
    float dropout, att_dropout;
} block_view;

static block_view enter(asr_model *m, int l)
{
    block_view saved = {m->dims, m->rates.dropout, m->rates.att_dropout};
    int g = model_block_group(&m->dims, l);
    m->dims = model_block_dims(&saved.dims, l);
    m->rates.dropout = m->rates.group_dropout[g], m->rates.att_dropout = m->rates.group_att_dropout[g];
    return saved;
}

static void leave(asr_model *m, const block_view *saved)
{
    m->dims = saved->dims;
    m->rates.dropout = saved->dropout, m->rates.att_dropout = saved->att_dropout;
}

static const struct model_group *group_of(const asr_model *m, int l)
{
    return &m->dims.group[model_block_group(&m->dims, l)];
}

static const float *block_output(const asr_model *m, int l)
{
    const struct model_group *g = group_of(m, l);
    const body_block *b = &blocks(m)[l];
    if (g->encoder == ENC_CONV1D) return g->c1_relu ? b->k.out : b->k.dr;
    return g->encoder != ENC_CONFORMER ? b->e.h_out : g->use_cnn ? b->c.h_out : b->c.h_f;
}

/* The conv1d block before l nearest to it (-1: none): whose encoding block l reads. */
static int pos_source(const asr_model *m, int l)
{
    while (--l >= 0 && group_of(m, l)->encoder != ENC_CONV1D) {}
    return l;
}

static const float *pos_of(const asr_model *m, int l)
{
    int c = pos_source(m, l);
    return c < 0 ? m->enc->rel.pos : blocks(m)[c].k.pos;
}

enum { SITE_C1_DROP = 0 };

static void c1_forward(asr_model *m, int l, c1block *b, const float *x)
{
    backend *be = m->be;
    const struct model_group *g = group_of(m, l);
    const enc_block_tensors *p = &m->w.blocks[l];
    const nn_batchnorm *bn = &p->conv1d.bn;
    int N = m->B * m->T2, D = m->dims.d, P = 2 * m->T2 - 1;
    size_t n = (size_t)N * D;
    be->conv1d_gen_forward(be, b->y, x, p->conv1d.conv.weight, p->conv1d.conv.bias, m->B, m->T2, D, D, g->cnn_kernel,
                           1, g->c1_dilation, g->c1_groups);
    const float *z = b->y;
    if (g->c1_bn) {
        if (m->train && m->sync.all_reduce) /* trainer.sync_batchnorm */
            syncbn_forward(m, b->bn, b->bn_mean, b->bn_rstd, b->y, bn->weight, bn->bias, bn->running_mean,
                           bn->running_var, bn->num_batches_tracked, N, D, 1e-5, 0.1);
        else
            be->batchnorm_forward(be, b->bn, b->bn_mean, b->bn_rstd, b->y, bn->weight, bn->bias, bn->running_mean,
                                  bn->running_var, bn->num_batches_tracked, N, D, 1e-5, 0.1, m->train);
        z = b->bn;
    }
    be->dropout_forward(be, b->dr, z, n, enc_rates_of(m).pd, m->seed, block_stream(l, SITE_C1_DROP));
    if (g->c1_relu) enc_act_forward(be, ACT_RELU, b->out, b->dr, n);
    be->linear_forward(be, b->pos, pos_of(m, l), p->conv1d.out_pos.weight, p->conv1d.out_pos.bias, P, D, D);
}

/* m->dh: the gradient of the block's output, then of its input; b->dpos holds its encoding's. */
static void c1_backward(asr_model *m, int l, const c1block *b, const float *x)
{
    backend *be = m->be;
    const struct model_group *g = group_of(m, l);
    const enc_block_tensors *p = &m->w.blocks[l], *gr = &m->g.blocks[l];
    int N = m->B * m->T2, D = m->dims.d, P = 2 * m->T2 - 1, src = pos_source(m, l);
    size_t n = (size_t)N * D;
    ESP_CHECK(m->train || !g->c1_bn); /* BatchNorm's backward is the training mode's */
    if (g->c1_relu) enc_act_backward(be, ACT_RELU, m->dh, m->dh, b->dr, n);
    be->dropout_backward(be, m->dtmp, m->dh, n, enc_rates_of(m).pd, m->seed, block_stream(l, SITE_C1_DROP));
    if (g->c1_bn) {
        const nn_batchnorm *bn = &p->conv1d.bn, *gbn = &gr->conv1d.bn;
        if (m->sync.all_reduce)
            syncbn_backward(m, m->dh, gbn->weight, gbn->bias, m->dtmp, b->y, bn->weight, b->bn_mean, b->bn_rstd, N, D);
        else
            be->batchnorm_backward(be, m->dh, gbn->weight, gbn->bias, m->dtmp, b->y, bn->weight, b->bn_mean,
                                   b->bn_rstd, N, D);
        be->copy(be, m->dtmp, m->dh, n * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
    }
    be->conv1d_gen_backward(be, m->dh, gr->conv1d.conv.weight, gr->conv1d.conv.bias, m->dtmp, x, p->conv1d.conv.weight,
                            m->B, m->T2, D, D, g->cnn_kernel, 1, g->c1_dilation, g->c1_groups, 0);
    be->linear_backward(be, src < 0 ? NULL : blocks(m)[src].k.dpos, gr->conv1d.out_pos.weight,
                        gr->conv1d.out_pos.bias, b->dpos, pos_of(m, l), p->conv1d.out_pos.weight, P, D, D, 1);
}

static const float *block_input(const asr_model *m, int l) { return l == 0 ? m->h0 : block_output(m, l - 1); }

static const float *forward(asr_model *m)
{
    encoder_acts *e = m->enc;
    enc_rows r = enc_rows_of(m);
    enc_rel_pos_forward(m, &e->rel);
    for (int l = 0; l < m->dims.blocks; l++) {
        const float *x = block_input(m, l);
        int kind = group_of(m, l)->encoder;
        const float *pos = pos_of(m, l);
        block_view saved = enter(m, l);
        if (kind == ENC_CONFORMER) cblock_forward(m, &r, l, &blocks(m)[l].c, pos, x);
        else if (kind == ENC_EBRANCHFORMER) eblock_forward(m, &r, l, &blocks(m)[l].e, pos, x);
        else c1_forward(m, l, &blocks(m)[l].k, x);
        leave(m, &saved);
    }
    return block_output(m, m->dims.blocks - 1);
}

static void backward(asr_model *m)
{
    encoder_acts *e = m->enc;
    enc_rows r = enc_rows_of(m);
    size_t pn = (size_t)(2 * m->T2 - 1) * m->dims.d * sizeof(float);
    for (int l = 0; l < m->dims.blocks; l++)
        if (group_of(m, l)->encoder == ENC_CONV1D) m->be->fill(m->be, blocks(m)[l].k.dpos, 0, pn);
    for (int l = m->dims.blocks - 1; l >= 0; l--) {
        const float *x = block_input(m, l);
        int kind = group_of(m, l)->encoder, src = pos_source(m, l);
        enc_rel_shared rel = e->rel; /* with the encoding block l read, and where its gradient goes */
        rel.pos = (float *)pos_of(m, l), rel.dpos = src < 0 ? NULL : blocks(m)[src].k.dpos;
        block_view saved = enter(m, l);
        if (kind == ENC_CONFORMER) cblock_backward(m, &r, l, &blocks(m)[l].c, &rel, &e->cw, x);
        else if (kind == ENC_EBRANCHFORMER) eblock_backward(m, &r, l, &blocks(m)[l].e, &rel, &e->ew, x);
        else c1_backward(m, l, &blocks(m)[l].k, x);
        leave(m, &saved);
        asr_model_block_grads_final(m, l);
    }
}

const encoder_impl encoder_body = {
    .acts = &decl,
    .forward = forward,
    .backward = backward,
};
