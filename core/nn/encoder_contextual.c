/* ESPnet2's ContextualBlockTransformerEncoder (Tsunoo et al., "Transformer ASR with contextual
 * block processing") for training and whole-utterance decoding, as its forward_train:
 *   T2 <= block_size: the Transformer layers over the whole utterance (padding masked);
 *   else the T2 frames (after the positional stage) are cut into nblk blocks of block_size frames
 *   starting hop_size apart (the last one shorter, zero-padded), each a sequence of block_size + 2
 *   rows: row 0 the context vector handed over from the previous block, rows 1..block_size the
 *   frames, row block_size + 1 this block's context vector. Every layer runs on all blocks at once
 *   (keys: rows 0..block_size; row 0's output is never read); between layers, row 0 of block k
 *   becomes row block_size + 1 of block k - 1 (block 0: its own). The initial context vector of a
 *   block is the mean of its frames before the positional stage (init_average), with the
 *   positional encoding of its index (ctx_pos_enc). Frame f's output is taken from the first block
 *   whose frames after it are at least look_ahead (the last block: the rest).
 * Padding frames are no different from the others inside blocks (ESPnet masks nothing there), so
 * batch results depend on padding as ESPnet's do. Blocks are gathered and scattered with the
 * embedding ops over an index of rows (src: the frames, the context vectors, one zero row).
 * contextual_block_conformer (ContextualBlockConformerEncoder) is the same with the Conformer block
 * of core/nn/encoder_conformer.c as the layer: its convolution module runs over a block's
 * block_size + 2 rows as they are (the context rows and the zero rows included), and row 0, which
 * ESPnet's mask lets attend to nothing, gets a zero attention output (enc_rows.blocks). */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>

#include "core/nn/encoder.h"

/* A layer's activations and its input in the block layout. */
typedef struct ctx_layer {
    ctx_layer_acts a;
    float *x;
    const float *y; /* its output (whole utterances) */
} ctx_layer;

struct encoder_acts {
    enc_act_store store; /* first (core/nn/encoder_acts.c): the layers (ctx_layer; inference: all alias
                          * layer 0's buffers), and the shape they fit */
    float *src, *addin, *avg, *out;
    int *idx_in, *idx_ctx, *idx_out, *lens; /* host, sized by build_geometry */
    int geom_B, geom_T2;                     /* what the indices and avg were built for */
    tblock_work w;                           /* w.tmp: also the forward's scratch */
    enc_rel_shared rel;                      /* the Conformer layers' backward work (no positions) */
    cblock_work cw;
    float *dalt, *dsrc, *dpos;
};

_Static_assert(offsetof(encoder_acts, store) == 0, "core/nn/encoder_acts.c finds the store first");
static ctx_layer *layers(const asr_model *m) { return m->enc->store.blocks; }

void ctx_layer_kept(const model_dims *d, ctx_layer_acts *b, enc_act_list *kept, enc_act_shape s)
{
    if (d->ctx_conformer)
        cblock_kept(d, &b->c, kept, s);
    else
        tblock_kept(d, &b->t, kept, s.rows, s.att);
}

const float *ctx_layer_forward(asr_model *m, int l, ctx_layer_acts *b, const float *x, float *tmp, int nb, int t,
                               const int *lens, int blocks)
{
    if (!m->dims.ctx_conformer) {
        tblock_forward(m, l, &b->t, x, tmp, nb, t, lens);
        return b->t.h_out;
    }
    enc_rows r = {nb, t, lens, tmp, NULL, blocks};
    return cblock_forward(m, &r, l, &b->c, NULL, x);
}

/* The backward of ctx_layer_forward: dh, the gradient of its output, becomes that of x. */
static void layer_backward(asr_model *m, int l, ctx_layer *c, const float *x, float *dh, int nb, int t,
                           const int *lens, int blocks)
{
    encoder_acts *e = m->enc;
    if (!m->dims.ctx_conformer) {
        tblock_backward(m, l, &c->a.t, &e->w, x, dh, nb, t, lens);
        return;
    }
    enc_rows r = {nb, t, lens, e->w.tmp, dh, blocks};
    cblock_backward(m, &r, l, &c->a.c, &e->rel, &e->cw, x);
}

/* Blocks for T2 frames; 0: the whole utterance at once. */
static int n_blocks(const model_dims *d, int T2)
{
    if (T2 <= d->block_size) return 0;
    return (T2 - d->block_size + d->hop_size - 1) / d->hop_size + 1;
}

/* The layers run on B x nblk sequences of block_size + 2 rows, or on the utterances. */
static void layout(const model_dims *d, int B, int T2, int *seqs, int *t)
{
    int nblk = n_blocks(d, T2);
    if (nblk) *seqs = B * nblk, *t = d->block_size + 2;
}

static void layer_kept(const model_dims *d, void *block, enc_act_list *kept, enc_act_shape s)
{
    ctx_layer *b = block;
    ctx_layer_kept(d, &b->a, kept, s);
    enc_act_add(kept, &b->x, s.rows * (size_t)d->d);
}

/* src: the frames, a context vector per sequence and the zero row; avg: (seqs, frames) at most. */
static void shared(asr_model *m, enc_act_list *fwd, enc_act_list *work, enc_act_shape s)
{
    encoder_acts *e = m->enc;
    size_t D = (size_t)m->dims.d, ctx = s.seqs + 1, src = s.frames + ctx;
    enc_act_add(fwd, &e->w.tmp, s.rows * D);
    enc_act_add(fwd, &e->src, src * D), enc_act_add(fwd, &e->addin, ctx * D), enc_act_add(fwd, &e->out, s.frames * D);
    enc_act_add(fwd, &e->avg, ctx * s.frames);
    if (m->dims.ctx_conformer) {
        enc_rel_shared_decl(&m->dims, &e->rel, fwd, work, s);
        cblock_work_decl(&m->dims, &e->cw, work, s.rows);
    } else {
        tblock_work_decl(&m->dims, &e->w, work, s.rows);
    }
    enc_act_add(work, &e->dalt, s.rows * D), enc_act_add(work, &e->dsrc, src * D);
    enc_act_add(work, &e->dpos, s.frames * D);
}

/* The indices and avg go with the activations' shape: built again after a reallocation. */
static void reset(asr_model *m)
{
    encoder_acts *e = m->enc;
    free(e->idx_in), free(e->idx_ctx), free(e->idx_out), free(e->lens);
    e->idx_in = e->idx_ctx = e->idx_out = e->lens = NULL;
    e->geom_B = -1;
}

static const enc_act_decl decl = {sizeof(encoder_acts), sizeof(ctx_layer), 0, layer_kept, shared, layout, reset, 0};

/* The host indices of B x T2 frames in nblk blocks (src rows: frames b * T2 + f, then the context
 * vectors B * T2 + b * nblk + k, then the zero row) and the averaging matrix (nblk, T2). */
static void build_geometry(asr_model *m, int nblk)
{
    const model_dims *d = &m->dims;
    encoder_acts *e = m->enc;
    int B = m->B, T2 = m->T2, bs = d->block_size, hop = d->hop_size, t = bs + 2;
    if (e->geom_B == B && e->geom_T2 == T2) return;
    size_t rows = (size_t)B * nblk * t, frames = (size_t)B * T2;
    free(e->idx_in), free(e->idx_ctx), free(e->idx_out), free(e->lens);
    e->idx_in = xcalloc(rows, sizeof *e->idx_in), e->idx_ctx = xcalloc(rows, sizeof *e->idx_ctx);
    e->idx_out = xcalloc(frames, sizeof *e->idx_out), e->lens = xcalloc((size_t)B * nblk, sizeof *e->lens);
    int zero = B * T2 + B * nblk, first = bs - d->look_ahead; /* frames block 0 gives */
    float *avg = xcalloc((size_t)nblk * T2, sizeof *avg);
    for (int k = 0; k < nblk; k++) {
        int lo = k * hop, n = T2 - lo < bs ? T2 - lo : bs;
        for (int f = lo; f < lo + n; f++) avg[(size_t)k * T2 + f] = 1.0f / (float)n;
    }
    for (int b = 0; b < B; b++)
        for (int k = 0; k < nblk; k++) {
            int *in = e->idx_in + ((size_t)b * nblk + k) * t, *cx = e->idx_ctx + ((size_t)b * nblk + k) * t;
            int ctx_row = B * T2 + b * nblk;
            in[0] = ctx_row + (k ? k - 1 : 0), in[bs + 1] = ctx_row + k;
            for (int r = 1; r <= bs; r++) {
                int f = k * hop + r - 1;
                in[r] = f < T2 ? b * T2 + f : zero;
            }
            int prev = (b * nblk + (k ? k - 1 : 0)) * t;
            cx[0] = prev + bs + 1;
            for (int r = 1; r < t; r++) cx[r] = (b * nblk + k) * t + r;
            e->lens[b * nblk + k] = bs + 1; /* row block_size + 1 (this block's context) is no key */
        }
    for (int b = 0; b < B; b++)
        for (int f = 0; f < T2; f++) {
            int k = f < first ? 0 : (f - first) / hop + 1;
            if (k > nblk - 1) k = nblk - 1;
            e->idx_out[(size_t)b * T2 + f] = (b * nblk + k) * t + f - k * hop + 1;
        }
    m->be->copy(m->be, e->avg, avg, (size_t)nblk * T2 * sizeof(float), BACKEND_HOST_TO_DEVICE);
    free(avg);
    e->geom_B = B, e->geom_T2 = T2;
}

/* The positional stage's input: the input layer's output (core/nn/model_embed.c). */
static const float *stage_input(const asr_model *m) { return m->nconv > 0 ? m->e : m->eact; }

static const float *forward_blocks(asr_model *m, int nblk)
{
    const model_dims *d = &m->dims;
    backend *be = m->be;
    encoder_acts *e = m->enc;
    int B = m->B, T2 = m->T2, D = d->d, t = d->block_size + 2, nseq = B * nblk;
    size_t frames = (size_t)B * T2, rows = (size_t)nseq * t;
    build_geometry(m, nblk);
    /* src: the frames after the positional stage, the context vectors, a zero row. */
    be->copy(be, e->src, m->h0, frames * D * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
    float *ctx = e->src + frames * D;
    for (int b = 0; b < B; b++)
        be->gemm(be, 0, 0, nblk, D, T2, 1.0f, e->avg, T2, stage_input(m) + (size_t)b * T2 * D, D, 0.0f,
                 e->addin + (size_t)b * nblk * D, D);
    if (d->ctx_pos_enc) {
        be->posenc_forward(be, ctx, e->addin, sqrt((double)D), B, nblk, D);
        /* The encoder's one positional dropout module, on the context vectors: the stream the
         * relative-position encoders use for their encoding's dropout. */
        be->dropout_forward(be, ctx, ctx, (size_t)nseq * D, enc_rates_of(m).pp, m->seed, STREAM_POS_EMB);
    } else {
        be->copy(be, ctx, e->addin, (size_t)nseq * D * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
    }
    be->fill(be, ctx + (size_t)nseq * D, 0, (size_t)D * sizeof(float));
    be->embedding_forward(be, layers(m)[0].x, e->src, e->idx_in, (int)rows, (int)(frames + nseq + 1), D);
    const float *y = NULL;
    for (int l = 0; l < d->blocks; l++) {
        ctx_layer *c = &layers(m)[l];
        if (l > 0) be->embedding_forward(be, c->x, y, e->idx_ctx, (int)rows, (int)rows, D);
        y = ctx_layer_forward(m, l, &c->a, c->x, e->w.tmp, nseq, t, e->lens, 1);
    }
    be->embedding_forward(be, e->out, y, e->idx_out, (int)frames, (int)rows, D);
    return e->out;
}

static const float *forward(asr_model *m)
{
    int nblk = n_blocks(&m->dims, m->T2);
    if (nblk) return forward_blocks(m, nblk);
    encoder_acts *e = m->enc;
    const float *x = m->h0;
    for (int l = 0; l < m->dims.blocks; l++) {
        layers(m)[l].y = ctx_layer_forward(m, l, &layers(m)[l].a, x, e->w.tmp, m->B, m->T2, m->hlens, 0);
        x = layers(m)[l].y;
    }
    return x;
}

/* m->dh: the gradient of the output frames, then that of h0; m->dpos_in: the context vectors'
 * gradient of the positional stage's input. */
static void backward_blocks(asr_model *m, int nblk)
{
    const model_dims *d = &m->dims;
    backend *be = m->be;
    encoder_acts *e = m->enc;
    int B = m->B, T2 = m->T2, D = d->d, t = d->block_size + 2, nseq = B * nblk;
    size_t frames = (size_t)B * T2, rows = (size_t)nseq * t, nsrc = frames + nseq + 1;
    float *g = e->dalt; /* the gradient in the block layout (w.tmp: scratch) */
    be->fill(be, g, 0, rows * D * sizeof(float));
    be->embedding_backward(be, g, m->dh, e->idx_out, (int)frames, (int)rows, D);
    for (int l = d->blocks - 1; l >= 0; l--) {
        layer_backward(m, l, &layers(m)[l], layers(m)[l].x, g, nseq, t, e->lens, 1);
        asr_model_block_grads_final(m, l);
        if (l == 0) break;
        /* The layer's input came from the previous layer's output: scatter its gradient back. */
        be->fill(be, e->w.tmp, 0, rows * D * sizeof(float));
        be->embedding_backward(be, e->w.tmp, g, e->idx_ctx, (int)rows, (int)rows, D);
        be->copy(be, g, e->w.tmp, rows * D * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
    }
    be->fill(be, e->dsrc, 0, nsrc * D * sizeof(float));
    be->embedding_backward(be, e->dsrc, g, e->idx_in, (int)rows, (int)nsrc, D);
    be->copy(be, m->dh, e->dsrc, frames * D * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
    float *dctx = e->dsrc + frames * D;
    if (d->ctx_pos_enc) {
        be->dropout_backward(be, dctx, dctx, (size_t)nseq * D, enc_rates_of(m).pp, m->seed, STREAM_POS_EMB);
        be->scale(be, dctx, dctx, sqrt((double)D), (size_t)nseq * D);
    }
    for (int b = 0; b < B; b++) /* the means: avg^T (T2, nblk) x dctx (nblk, d) */
        be->gemm(be, 1, 0, T2, D, nblk, 1.0f, e->avg, T2, dctx + (size_t)b * nblk * D, D, 0.0f,
                 e->dpos + (size_t)b * T2 * D, D);
    m->dpos_in = e->dpos;
}

static void backward(asr_model *m)
{
    int nblk = n_blocks(&m->dims, m->T2);
    m->dpos_in = NULL;
    if (nblk) {
        backward_blocks(m, nblk);
        return;
    }
    for (int l = m->dims.blocks - 1; l >= 0; l--) {
        const float *x = l ? layers(m)[l - 1].y : m->h0;
        layer_backward(m, l, &layers(m)[l], x, m->dh, m->B, m->T2, m->hlens, 0);
        asr_model_block_grads_final(m, l);
    }
}

const encoder_impl encoder_contextual = {
    .acts = &decl,
    .forward = forward,
    .backward = backward,
};
