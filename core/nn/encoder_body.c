/* The asr_transducer task's Encoder whose body_conf blocks differ in block_type or sizes
 * (model_dims.n_groups > 1; espnet2/asr_transducer/encoder/encoder.py's MultiBlocks over blocks
 * built one by one): each block runs on the code of its kind, the Conformer block (cblock_*) or the
 * E-Branchformer block (eblock_*, also the Branchformer's), with its own sizes and dropout rates.
 * The block code reads the model's dims and rates, so each block runs with m->dims and the
 * rates' dropout / att_dropout set to its own (model_block_dims, model_rates.group_*) and put
 * back after it. The relative encoding is computed once, of the input layer's width, and shared,
 * as MultiBlocks' pos_enc.
 *
 * Each block runs at its own width (model_block_dims' d; model_block_in_dim its input's): a conv1d
 * block (blocks/conv1d.py) from its input's width to output_size, which the blocks after it keep.
 * It is x -> relu?(drop(bn?(conv(x)))), no residual, and it hands the blocks after it out_pos(pos): their
 * attention reads that encoding, so their backward adds the gradient of it (enc_attn_work.dpos)
 * into the conv1d block's dpos, whose backward takes out_pos' gradients from it and passes the rest
 * to the encoding before (an earlier conv1d's). One whose kernel, dilation or stride shrinks the
 * frames hands on create_new_mask's lengths and create_new_pos_enc's rows of the encoding (m->T2 and
 * m->hlens are each block's input frames while it runs, the last block's output's after the
 * forward: the model's head and loss read those).
 *
 * main_conf.blockdrop_rate (MultiBlocks' stochastic depth, training only): block l of n is skipped
 * when its draw (body_block_dropped) falls below blockdrop_rate * l / n; the first block always
 * runs, the last does for rates up to 1. A skipped block hands on its input, its mask and the
 * encoding it got, unscaled, as MultiBlocks does; its backward is skipped (its gradients stay
 * zero). A model of one group with blockdrop_rate runs here too (core/nn/model.c). */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/log.h"
#include "core/base/rng.h"
#include "core/compute/ops.h"
#include "core/nn/encoder.h"

/* A conv1d block's buffers: conv output, BatchNorm's output and statistics, dropout's output (ReLU's
 * input), the output, the encoding it hands on (prows x d) and that encoding's gradient, and when
 * it shrinks the frames, the rows of its input encoding out_pos reads (sel) and their gradient. */
typedef struct c1block {
    float *y, *bn, *bn_mean, *bn_rstd, *dr, *out, *pos, *dpos, *sel, *dsel;
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
    int T0, *hlens0, cap_b; /* the input layer's frames and lengths (host), block 0's input */
    unsigned char *dropped; /* per block: skipped in this forward (blockdrop_rate) */
};

_Static_assert(offsetof(encoder_acts, store) == 0, "core/nn/encoder_acts.c finds the store first");
static body_block *blocks(const asr_model *m) { return m->enc->store.blocks; }

/* All of a conv1d block's buffers (BatchNorm's used or not: a block's dims do not say); its input
 * encoding's rows (sel, dsel) are as wide as its input, at most the widest (d->d is its output's). */
static void c1block_kept(const model_dims *d, c1block *b, enc_act_list *kept, enc_act_shape s)
{
    size_t rd = s.rows * (size_t)d->d, pw = s.prows * (size_t)model_max_width(d);
#define BUF(field, count) enc_act_add(kept, &b->field, (count))
    BUF(y, rd), BUF(bn, rd), BUF(bn_mean, d->d), BUF(bn_rstd, d->d), BUF(dr, rd), BUF(out, rd);
    BUF(pos, s.prows * (size_t)d->d), BUF(dpos, s.prows * (size_t)d->d);
    BUF(sel, pw), BUF(dsel, pw);
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

/* m->dims holds the groups' largest ff, heads and cgmlp_units, and w the widest block: the shared
 * work fits every block. */
static void shared(asr_model *m, enc_act_list *fwd, enc_act_list *work, enc_act_shape s)
{
    encoder_acts *e = m->enc;
    model_dims w = m->dims;
    w.d = model_max_width(&m->dims);
    enc_rel_shared_decl(&w, &e->rel, fwd, work, s);
    cblock_work_decl(&w, &e->cw, work, s.rows);
    eblock_work_decl(&w, &e->ew, work, s.rows);
}

/* The host lengths go with the activations (enc_acts_release calls this, enc_acts_destroy too). */
static void reset(asr_model *m)
{
    free(m->enc->hlens0);
    free(m->enc->dropped);
    m->enc->hlens0 = NULL, m->enc->cap_b = 0, m->enc->dropped = NULL;
}

static const enc_act_decl decl = {sizeof(encoder_acts), sizeof(body_block), 1, block_kept, shared, NULL, reset, 1};

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

static int dropped(const asr_model *m, int l) { return m->enc->dropped[l]; }

static const float *block_input(const asr_model *m, int l);

static const float *block_output(const asr_model *m, int l)
{
    if (dropped(m, l)) return block_input(m, l);
    const struct model_group *g = group_of(m, l);
    const body_block *b = &blocks(m)[l];
    if (g->encoder == ENC_CONV1D) return g->c1_relu ? b->k.out : b->k.dr;
    return g->encoder != ENC_CONFORMER ? b->e.h_out : g->use_cnn ? b->c.h_out : b->c.h_f;
}

/* The conv1d block that ran before l nearest to it (-1: none): whose encoding block l reads. */
static int pos_source(const asr_model *m, int l)
{
    while (--l >= 0 && (group_of(m, l)->encoder != ENC_CONV1D || dropped(m, l))) {}
    return l;
}

static const float *pos_of(const asr_model *m, int l)
{
    int c = pos_source(m, l);
    return c < 0 ? m->enc->rel.pos : blocks(m)[c].k.pos;
}

/* Whether a conv1d group changes the frame count (create_new_mask / create_new_pos_enc apply). */
static int shrinks(const struct model_group *g) { return g->cnn_kernel > 1 || g->c1_stride > 1; }

/* m->T2 and m->hlens to block l's input frames (l = blocks: the last block's output): the input
 * layer's, shrunk by each conv1d block before l as create_new_mask shrinks the mask (the first
 * T - dilation (kernel - 1) frames, every stride-th), an utterance's length the unmasked frames
 * left, ceil(min(length, T - padding) / stride). */
static void enter_frames(asr_model *m, int l)
{
    const encoder_acts *e = m->enc;
    int T = e->T0;
    memcpy(m->hlens, e->hlens0, (size_t)m->B * sizeof *m->hlens);
    for (int i = 0; i < l; i++) {
        const struct model_group *g = group_of(m, i);
        if (g->encoder != ENC_CONV1D || !shrinks(g) || dropped(m, i)) continue;
        int pad = g->c1_dilation * (g->cnn_kernel - 1), s = g->c1_stride;
        if (T - pad <= 0) /* torch's Conv1d fails on input shorter than its dilated kernel too */
            esp_die("model.encoder_conf.body_conf: the conv1d block %d (kernel_size %d, dilation %d) gets %d frames, "
                    "no more than its dilated kernel (leave utterances this short out of the data)",
                    i, g->cnn_kernel, g->c1_dilation, T);
        for (int b = 0; b < m->B; b++) {
            int h = m->hlens[b] < T - pad ? m->hlens[b] : T - pad;
            m->hlens[b] = (h + s - 1) / s;
        }
        T = ops_conv1d_gen_len(T, g->cnn_kernel, s, g->c1_dilation);
    }
    m->T2 = T;
}

/* create_new_pos_enc's rows of an encoding of T frames (2 T - 1 rows) for To output frames: the
 * positive half's rows 0, s, 2s ... and the negative half's (from row T - 1) s, 2s ...;
 * row i of the result is row src_row(i) of the input. */
static int src_row(int i, int T, int To, int s) { return i < To ? i * s : T - 1 + (i - To + 1) * s; }

enum { SITE_C1_DROP = 0 };

static void c1_forward(asr_model *m, int l, c1block *b, const float *x)
{
    backend *be = m->be;
    const struct model_group *g = group_of(m, l);
    const enc_block_tensors *p = &m->w.blocks[l];
    const nn_batchnorm *bn = &p->conv1d.bn;
    int T = m->T2, To = ops_conv1d_gen_len(T, g->cnn_kernel, g->c1_stride, g->c1_dilation);
    int N = m->B * To, D = m->dims.d, Din = model_block_in_dim(&m->dims, l), P = 2 * To - 1;
    size_t n = (size_t)N * D;
    be->conv1d_gen_forward(be, b->y, x, p->conv1d.conv.weight, p->conv1d.conv.bias, m->B, T, Din, D, g->cnn_kernel,
                           g->c1_stride, g->c1_dilation, g->c1_groups);
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
    const float *pos = pos_of(m, l);
    if (shrinks(g)) {
        for (int i = 0; i < P; i++)
            be->copy(be, b->sel + (size_t)i * Din, pos + (size_t)src_row(i, T, To, g->c1_stride) * Din,
                     Din * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
        pos = b->sel;
    }
    be->linear_forward(be, b->pos, pos, p->conv1d.out_pos.weight, p->conv1d.out_pos.bias, P, Din, D);
}

/* m->dh: the gradient of the block's output, then of its input; b->dpos holds its encoding's. */
static void c1_backward(asr_model *m, int l, const c1block *b, const float *x)
{
    backend *be = m->be;
    const struct model_group *g = group_of(m, l);
    const enc_block_tensors *p = &m->w.blocks[l], *gr = &m->g.blocks[l];
    int T = m->T2, To = ops_conv1d_gen_len(T, g->cnn_kernel, g->c1_stride, g->c1_dilation);
    int N = m->B * To, D = m->dims.d, Din = model_block_in_dim(&m->dims, l), P = 2 * To - 1, src = pos_source(m, l);
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
                            m->B, T, Din, D, g->cnn_kernel, g->c1_stride, g->c1_dilation, g->c1_groups, 0);
    float *dsrc = src < 0 ? NULL : blocks(m)[src].k.dpos; /* the first encoding has no parameters */
    if (!shrinks(g)) {
        be->linear_backward(be, dsrc, gr->conv1d.out_pos.weight, gr->conv1d.out_pos.bias, b->dpos, pos_of(m, l),
                            p->conv1d.out_pos.weight, P, Din, D, 1);
        return;
    }
    be->linear_backward(be, dsrc ? b->dsel : NULL, gr->conv1d.out_pos.weight, gr->conv1d.out_pos.bias, b->dpos, b->sel,
                        p->conv1d.out_pos.weight, P, Din, D, 1);
    for (int i = 0; dsrc && i < P; i++) { /* the rows are distinct: each gradient row adds to its source's */
        float *to = dsrc + (size_t)src_row(i, T, To, g->c1_stride) * Din;
        be->add(be, to, to, b->dsel + (size_t)i * Din, (size_t)Din);
    }
}

static const float *block_input(const asr_model *m, int l) { return l == 0 ? m->h0 : block_output(m, l - 1); }

int body_block_dropped(uint64_t seed, double rate, int l, int n)
{
    double u = l == n - 1 ? 1.0 : (double)(rng_derive(seed, STREAM_BLOCKDROP, (uint64_t)l) >> 11) * 0x1p-53;
    return u < rate * (1.0 / n * l); /* ESPnet2: keep_probs[l] >= blockdrop_rate * (blockdrop_decay * l) */
}

int body_chunk_size(uint64_t seed, int T2, double threshold, int short_size)
{
    if (T2 <= 1) return T2 > 0 ? T2 : 1; /* torch.randint(1, 1) fails in ESPnet2 */
    rng r;
    rng_init(&r, rng_derive(seed, STREAM_CHUNK, 0));
    int c = (int)rng_uniform_int(&r, 1, T2 - 1);
    return c > T2 * threshold ? T2 : c % short_size + 1;
}

static const float *forward(asr_model *m)
{
    encoder_acts *e = m->enc;
    if (!e->dropped) e->dropped = xmalloc((size_t)m->dims.blocks);
    for (int l = 0; l < m->dims.blocks; l++)
        e->dropped[l] = m->train && body_block_dropped(m->seed, m->rates.blockdrop, l, m->dims.blocks);
    if (m->B > e->cap_b) e->hlens0 = xrealloc(e->hlens0, (size_t)m->B * sizeof *e->hlens0), e->cap_b = m->B;
    memcpy(e->hlens0, m->hlens, (size_t)m->B * sizeof *m->hlens);
    e->T0 = m->T2;
    enc_rel_pos_forward(m, &e->rel);
    for (int l = 0; l < m->dims.blocks; l++) {
        if (dropped(m, l)) continue;
        enter_frames(m, l);
        enc_rows r = enc_rows_of(m);
        const float *x = block_input(m, l);
        int kind = group_of(m, l)->encoder;
        const float *pos = pos_of(m, l);
        block_view saved = enter(m, l);
        if (kind == ENC_CONFORMER) cblock_forward(m, &r, l, &blocks(m)[l].c, pos, x);
        else if (kind == ENC_EBRANCHFORMER) eblock_forward(m, &r, l, &blocks(m)[l].e, pos, x);
        else c1_forward(m, l, &blocks(m)[l].k, x);
        leave(m, &saved);
    }
    enter_frames(m, m->dims.blocks);
    return block_output(m, m->dims.blocks - 1);
}

static void backward(asr_model *m)
{
    encoder_acts *e = m->enc;
    for (int l = 0; l < m->dims.blocks; l++)
        if (group_of(m, l)->encoder == ENC_CONV1D)
            m->be->fill(m->be, blocks(m)[l].k.dpos, 0,
                        e->store.cap.prows * (size_t)model_block_dims(&m->dims, l).d * sizeof(float));
    for (int l = m->dims.blocks - 1; l >= 0; l--) {
        if (dropped(m, l)) { /* the identity: m->dh passes through */
            asr_model_block_grads_final(m, l);
            continue;
        }
        enter_frames(m, l); /* block 0's: the input layer's, for its backward */
        enc_rows r = enc_rows_of(m);
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
