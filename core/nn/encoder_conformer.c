/* ESPnet2's ConformerEncoder blocks (espnet.nets.pytorch_backend.conformer.encoder_layer, pre-LN,
 * no stochastic depth, no concat_after), forward and backward on the backend:
 *   macaron_style:  x += 0.5 * drop(FF_mac(LN(x)))
 *                   x += drop(MHA(LN(x)))           rel-pos MHA (pos_bias_u/v, linear_pos) or plain
 *   use_cnn_module: x += drop(Conv(LN(x)))          pointwise_conv1 -> GLU -> depthwise Conv1d ->
 *                                                   BatchNorm1d -> act -> pointwise_conv2
 *                   x += s * drop(FF(LN(x)))        s = 0.5 with macaron_style, else 1
 *   use_cnn_module: x = LN_final(x)
 * FF(x) = w_2(drop(act(w_1(x)))), act swish or relu (activation_type). As ESPnet's
 * ConvolutionModule, the convolution and BatchNorm see every frame of the padded batch: BatchNorm's
 * statistics are over all B x T rows, padding included, and the depthwise conv reads padded frames
 * next to an utterance's end (an inference model zeroes them first: enc_zero_padding). The relative encoding (2 T - 1 positions) is computed once per
 * forward and shared by the blocks, with its own positional dropout. The block (cblock_*) runs on any
 * rows (enc_rows): the contextual block Conformer runs it over its blocks of frames. */
#include <stddef.h>
#include <string.h>

#include "core/nn/encoder.h"
#include "core/nn/norm_spec.h"

enum {
    SITE_ATT = 0, SITE_ATT_OUT = 1, SITE_FF_IN = 2, SITE_FF_OUT = 3, SITE_FFM_IN = 4, SITE_FFM_OUT = 5,
    SITE_CONV_OUT = 6,
};

#define BN_EPS 1e-5      /* torch.nn.BatchNorm1d's defaults */
#define BN_MOMENTUM 0.1

struct encoder_acts {
    enc_act_store store;          /* first (core/nn/encoder_acts.c): the blocks (cblock), and the shape they fit */
    enc_rel_shared rel;           /* the relative encoding, and backward work the blocks share */
    cblock_work cw;               /* backward work of the convolution module */
};

_Static_assert(offsetof(encoder_acts, store) == 0, "core/nn/encoder_acts.c finds the store first");
static cblock *blocks(const asr_model *m) { return m->enc->store.blocks; }

void cblock_kept(const model_dims *d, cblock *b, enc_act_list *kept, enc_act_shape s)
{
    size_t rows = s.rows, att = s.att, prows = s.prows;
    size_t D = (size_t)d->d, FF = (size_t)d->ff;
#define BUF(field, count) enc_act_add(kept, &b->field, (count))
    BUF(ln_a, rows * D), BUF(mean_a, rows), BUF(rstd_a, rows), BUF(q, rows * D), BUF(k, rows * D);
    BUF(v, rows * D), BUF(att, att), BUF(atty, rows * D), BUF(h_a, rows * D);
    BUF(ln_f, rows * D), BUF(mean_f, rows), BUF(rstd_f, rows), BUF(f_pre, rows * FF), BUF(f_act, rows * FF);
    BUF(h_f, rows * D);
    if (d->rel_pos) BUF(pl, prows * D);
    if (d->macaron) {
        BUF(ln_m, rows * D), BUF(mean_m, rows), BUF(rstd_m, rows), BUF(fm_pre, rows * FF), BUF(fm_act, rows * FF);
        BUF(h_m, rows * D);
    }
    if (d->use_cnn) {
        BUF(ln_c, rows * D), BUF(mean_c, rows), BUF(rstd_c, rows), BUF(pw1, rows * 2 * D), BUF(glu, rows * D);
        BUF(dwo, rows * D), BUF(bn_mean, D), BUF(bn_rstd, D), BUF(bn, rows * D), BUF(cact, rows * D);
        BUF(h_c, rows * D), BUF(mean_o, rows), BUF(rstd_o, rows), BUF(h_out, rows * D);
    }
#undef BUF
}

void cblock_work_decl(const model_dims *d, cblock_work *w, enc_act_list *work, size_t rows)
{
    size_t D = (size_t)d->d;
    enc_act_add(work, &w->d2, rows * 2 * D);
    enc_act_add(work, &w->dc, rows * D);
    enc_act_add(work, &w->dc2, rows * D);
}

static void block_kept(const model_dims *d, void *block, enc_act_list *kept, enc_act_shape s)
{
    cblock_kept(d, block, kept, s);
}

/* The relative encoding the blocks share, and the backward's work. */
static void shared(asr_model *m, enc_act_list *fwd, enc_act_list *work, enc_act_shape s)
{
    encoder_acts *e = m->enc;
    enc_rel_shared_decl(&m->dims, &e->rel, fwd, work, s);
    cblock_work_decl(&m->dims, &e->cw, work, s.rows);
}

static const enc_act_decl decl = {sizeof(encoder_acts), sizeof(cblock), 1, block_kept, shared, NULL, NULL, 0};

/* ---- pieces ------------------------------------------------------------------------------- */

static enc_attn_bufs attn_bufs(const cblock *b)
{
    return (enc_attn_bufs){b->ln_a, b->mean_a, b->rstd_a, b->q, b->k, b->v, b->pl, b->att, b->atty};
}

/* h_a = x + drop(linear_out(MHA(LN(x)))), relative or absolute positions. */
static void mha_forward(asr_model *m, const enc_rows *r, int l, cblock *b, const float *pos, const float *x)
{
    backend *be = m->be;
    size_t nd = (size_t)r->nb * r->t * m->dims.d;
    enc_attn_bufs ab = attn_bufs(b);
    enc_attn_forward(m, r, l, &ab, pos, x, r->tmp, SITE_ATT);
    be->dropout_add(be, b->h_a, x, r->tmp, nd, 1.0, enc_rates_of(m).pd, m->seed, block_stream(l, SITE_ATT_OUT));
}

static void mha_backward(asr_model *m, const enc_rows *r, int l, const cblock *b, const enc_rel_shared *rel,
                         const float *x)
{
    backend *be = m->be;
    size_t nd = (size_t)r->nb * r->t * m->dims.d;
    enc_attn_bufs ab = attn_bufs(b);
    enc_attn_work w = {rel->pos, rel->dq, rel->dk, rel->dv, rel->datt, rel->dp, rel->dln, rel->dpos};
    be->dropout_backward(be, r->tmp, r->dh, nd, enc_rates_of(m).pd, m->seed, block_stream(l, SITE_ATT_OUT));
    enc_attn_backward(m, r, l, &ab, &w, x, r->tmp, SITE_ATT);
}

/* h_c = x + drop(pointwise_conv2(act(BN(depthwise(GLU(pointwise_conv1(LN(x)))))))). */
static void conv_forward(asr_model *m, const enc_rows *r, int l, cblock *b, const float *x)
{
    const model_dims *d = &m->dims;
    backend *be = m->be;
    int N = r->nb * r->t, D = d->d;
    enc_rates rt = enc_rates_of(m);
    const enc_block_tensors *p = &m->w.blocks[l];
    const nn_batchnorm *bn = &p->conv_module.norm;
    norm_spec_forward(be, &d->norm, &p->norm_conv, b->ln_c, b->mean_c, b->rstd_c, x, N, D);
    be->linear_forward(be, b->pw1, b->ln_c, p->conv_module.pointwise_conv1.weight,
                       p->conv_module.pointwise_conv1.bias, N, D, 2 * D);
    be->glu_forward(be, b->glu, b->pw1, N, D);
    enc_zero_padding(m, r, b->glu, D);
    enc_dwconv_forward(m, l, DWCONV_MODULE, b->dwo, b->glu, p->conv_module.depthwise_conv.weight,
                       p->conv_module.depthwise_conv.bias, r->nb, r->t, D, d->cnn_kernel);
    if (m->train && m->sync.all_reduce) /* trainer.sync_batchnorm */
        syncbn_forward(m, b->bn, b->bn_mean, b->bn_rstd, b->dwo, bn->weight, bn->bias, bn->running_mean,
                       bn->running_var, bn->num_batches_tracked, N, D, BN_EPS, BN_MOMENTUM);
    else
        be->batchnorm_forward(be, b->bn, b->bn_mean, b->bn_rstd, b->dwo, bn->weight, bn->bias, bn->running_mean,
                              bn->running_var, bn->num_batches_tracked, N, D, BN_EPS, BN_MOMENTUM, m->train);
    enc_act_forward(m->be, m->dims.act, b->cact, b->bn, (size_t)N * D);
    be->linear_forward(be, r->tmp, b->cact, p->conv_module.pointwise_conv2.weight,
                       p->conv_module.pointwise_conv2.bias, N, D, D);
    be->dropout_add(be, b->h_c, x, r->tmp, (size_t)N * D, 1.0, rt.pd, m->seed, block_stream(l, SITE_CONV_OUT));
}

static void conv_backward(asr_model *m, const enc_rows *r, int l, const cblock *b, const enc_rel_shared *rel,
                          const cblock_work *w, const float *x)
{
    const model_dims *d = &m->dims;
    backend *be = m->be;
    int N = r->nb * r->t, D = d->d;
    enc_rates rt = enc_rates_of(m);
    const enc_block_tensors *p = &m->w.blocks[l], *g = &m->g.blocks[l];
    const nn_linear *pw1 = &p->conv_module.pointwise_conv1, *gpw1 = &g->conv_module.pointwise_conv1;
    const nn_linear *dw = &p->conv_module.depthwise_conv, *gdw = &g->conv_module.depthwise_conv;
    const nn_linear *pw2 = &p->conv_module.pointwise_conv2, *gpw2 = &g->conv_module.pointwise_conv2;
    const nn_batchnorm *bn = &p->conv_module.norm, *gbn = &g->conv_module.norm;
    be->dropout_backward(be, r->tmp, r->dh, (size_t)N * D, rt.pd, m->seed, block_stream(l, SITE_CONV_OUT));
    be->linear_backward(be, w->dc, gpw2->weight, gpw2->bias, r->tmp, b->cact, pw2->weight, N, D, D, 0);
    enc_act_backward(m->be, m->dims.act, w->dc, w->dc, b->bn, (size_t)N * D);
    if (m->sync.all_reduce)
        syncbn_backward(m, w->dc2, gbn->weight, gbn->bias, w->dc, b->dwo, bn->weight, b->bn_mean, b->bn_rstd, N, D);
    else
        be->batchnorm_backward(be, w->dc2, gbn->weight, gbn->bias, w->dc, b->dwo, bn->weight, b->bn_mean, b->bn_rstd,
                               N, D);
    enc_dwconv_backward(m, w->dc, gdw->weight, gdw->bias, w->dc2, b->glu, dw->weight, r->nb, r->t, D,
                          d->cnn_kernel);
    enc_zero_padding(m, r, w->dc, D); /* the forward's masked_fill_ (the asr_transducer task's) */
    be->glu_backward(be, w->d2, w->dc, b->pw1, N, D);
    be->linear_backward(be, rel->dln, gpw1->weight, gpw1->bias, w->d2, b->ln_c, pw1->weight, N, D, 2 * D, 0);
    norm_spec_backward(be, &d->norm, &p->norm_conv, &g->norm_conv, r->dh, rel->dln, x, b->mean_c, b->rstd_c, N, D, 1);
}

/* ---- the block ------------------------------------------------------------------------------ */

static float *cblock_out(const model_dims *d, const cblock *b) { return d->use_cnn ? b->h_out : b->h_f; }

float *cblock_forward(asr_model *m, const enc_rows *r, int l, cblock *b, const float *pos, const float *x)
{
    const model_dims *d = &m->dims;
    backend *be = m->be;
    if (d->macaron) {
        enc_ff_forward(m, r, l, 1, b->ln_m, b->mean_m, b->rstd_m, b->fm_pre, b->fm_act, x, b->h_m, SITE_FFM_IN,
                       SITE_FFM_OUT);
        x = b->h_m;
    }
    mha_forward(m, r, l, b, pos, x);
    x = b->h_a;
    if (d->use_cnn) {
        conv_forward(m, r, l, b, x);
        x = b->h_c;
    }
    enc_ff_forward(m, r, l, 0, b->ln_f, b->mean_f, b->rstd_f, b->f_pre, b->f_act, x, b->h_f, SITE_FF_IN, SITE_FF_OUT);
    if (d->use_cnn) {
        const nn_norm *nf = &m->w.blocks[l].norm_final;
        norm_spec_forward(be, &d->norm, nf, b->h_out, b->mean_o, b->rstd_o, b->h_f, r->nb * r->t, d->d);
    }
    return cblock_out(d, b);
}

void cblock_backward(asr_model *m, const enc_rows *r, int l, const cblock *b, const enc_rel_shared *rel,
                     const cblock_work *w, const float *x0)
{
    const model_dims *d = &m->dims;
    backend *be = m->be;
    int N = r->nb * r->t, D = d->d;
    /* BatchNorm's backward is the training mode's (batch statistics): the forward must have been one. */
    ESP_CHECK(m->train || !d->use_cnn);
    const float *xa = d->macaron ? b->h_m : x0, *xc = d->use_cnn ? b->h_c : b->h_a;
    if (d->use_cnn) {
        const nn_norm *nf = &m->w.blocks[l].norm_final, *gnf = &m->g.blocks[l].norm_final;
        norm_spec_backward(be, &d->norm, nf, gnf, rel->dln, r->dh, b->h_f, b->mean_o, b->rstd_o, N, D, 0);
        be->copy(be, r->dh, rel->dln, (size_t)N * D * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
    }
    enc_ff_backward(m, r, l, 0, b->ln_f, b->mean_f, b->rstd_f, b->f_pre, b->f_act, xc, SITE_FF_IN, SITE_FF_OUT,
                    rel->dff, rel->dln);
    if (d->use_cnn) conv_backward(m, r, l, b, rel, w, b->h_a);
    mha_backward(m, r, l, b, rel, xa);
    if (d->macaron)
        enc_ff_backward(m, r, l, 1, b->ln_m, b->mean_m, b->rstd_m, b->fm_pre, b->fm_act, x0, SITE_FFM_IN, SITE_FFM_OUT,
                        rel->dff, rel->dln);
}

/* ---- the encoder ---------------------------------------------------------------------------- */

static const float *block_input(const asr_model *m, int l)
{
    return l == 0 ? m->h0 : cblock_out(&m->dims, &blocks(m)[l - 1]);
}

static const float *forward(asr_model *m)
{
    encoder_acts *e = m->enc;
    enc_rows r = enc_rows_of(m);
    enc_rel_pos_forward(m, &e->rel);
    for (int l = 0; l < m->dims.blocks; l++) {
        float *y = cblock_forward(m, &r, l, &blocks(m)[l], e->rel.pos, block_input(m, l));
        interctc_after_block(m, l, y);
    }
    return block_input(m, m->dims.blocks);
}

static void backward(asr_model *m)
{
    encoder_acts *e = m->enc;
    enc_rows r = enc_rows_of(m);
    for (int l = m->dims.blocks - 1; l >= 0; l--) {
        interctc_before_block_backward(m, l);
        cblock_backward(m, &r, l, &blocks(m)[l], &e->rel, &e->cw, block_input(m, l));
        asr_model_block_grads_final(m, l);
    }
}

const encoder_impl encoder_conformer = {
    .acts = &decl,
    .forward = forward,
    .backward = backward,
};
