/* ESPnet2's ContextualBlock{Transformer,Conformer}Encoder.forward_infer (batch 1), a push at a time (see
 * core/nn/encoder_stream.h). Each push: the features after the buffered ones; unless final, only
 * whole groups of the input layer's subsampling go through it (keeping 2 groups and the remainder
 * for the next push, as ESPnet does); the input layer's frames after the buffered ones; unless
 * final, only whole hops of blocks (the overlap kept). The blocks run one by one through the
 * layers (ctx_layer_forward: the Transformer's or the Conformer's; block_size + 2 rows: row 0 the context handed
 * over, the frames with the positional encoding from their position in the utterance, zero rows,
 * the block's own context vector); each layer's input row 0 is the previous block's context
 * output of the layer below. The first push that is also the last and fits one block runs the
 * layers over the whole utterance instead. Positional encodings from an offset: the encoding
 * table (posenc_forward of zeros, kept and grown) added to the scaled frames, which is
 * posenc_forward's arithmetic exactly. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/nn/encoder.h"
#include "core/nn/encoder_stream.h"

struct enc_stream {
    asr_model *m;
    int sub, D, L, bs, hop, la;
    /* Utterance state (ESPnet's next_states). */
    float *fbuf; /* host: features the input layer has not consumed, nf x idim */
    int nf, cap_f;
    float *abuf; /* device: the input layer's frames kept (before the positional stage), na x d */
    int na, cap_a;
    float *prev_addin, *past_ctx; /* device: d; L x d */
    int has_addin, has_past, nproc;
    /* Workspace. */
    float *feat_dev, *xs;         /* the features uploaded; the frames of this push (kept + new) */
    size_t cap_feat, cap_xs;      /* floats */
    float *pe;                    /* the positional encoding table, pe_rows x d */
    int pe_rows;
    ctx_layer_acts a;             /* one layer's activations, shared by the layers */
    const float *y;               /* the last layer's output */
    float *x, *tmp, *avg, *addin; /* a layer's input; scratch; 1/n weights (block_size); d */
    int cap_rows;                 /* rows the layer workspace fits */
    float *ys, *out, *omean, *orstd; /* this push's output frames before and after after_norm */
    int cap_y;
};

static float *dalloc(backend *be, size_t n) { return be->alloc(be, n * sizeof(float) + 64); }

static void ws_list(enc_stream *s, enc_act_list *l, size_t rows)
{
    const model_dims *d = &s->m->dims;
    ctx_layer_kept(d, &s->a, l, (enc_act_shape){rows, (size_t)d->heads * rows * rows, 0, rows, 1});
    enc_act_add(l, &s->x, rows * (size_t)s->D), enc_act_add(l, &s->tmp, rows * (size_t)s->D);
}

static void ws_free(enc_stream *s)
{
    enc_act_list l = {0};
    ws_list(s, &l, 0);
    for (int i = 0; i < l.k; i++) s->m->be->free(s->m->be, *l.slot[i]), *l.slot[i] = NULL;
    s->cap_rows = 0;
}

/* The layer workspace for sequences of rows rows. */
static void ws_ensure(enc_stream *s, int rows)
{
    if (rows <= s->cap_rows) return;
    ws_free(s);
    enc_act_list l = {0};
    ws_list(s, &l, (size_t)rows);
    for (int i = 0; i < l.k; i++) *l.slot[i] = dalloc(s->m->be, l.n[i]);
    s->cap_rows = rows;
}

static void grow(backend *be, float **p, size_t *cap, size_t n)
{
    if (n <= *cap) return;
    be->free(be, *p);
    *cap = n > 2 * *cap ? n : 2 * *cap;
    *p = dalloc(be, *cap);
}

/* The encoding table covers positions [0, rows). */
static void pe_ensure(enc_stream *s, int rows)
{
    if (rows <= s->pe_rows) return;
    backend *be = s->m->be;
    int n = rows > 2 * s->pe_rows ? rows : 2 * s->pe_rows;
    be->free(be, s->pe);
    s->pe = dalloc(be, (size_t)n * s->D);
    be->fill(be, s->pe, 0, (size_t)n * s->D * sizeof(float));
    be->posenc_forward(be, s->pe, s->pe, 1.0, 1, n, s->D);
    s->pe_rows = n;
}

/* y (n rows) = x * sqrt(d) + the encoding of positions pos.. */
static void posenc_at(enc_stream *s, float *y, const float *x, int n, int pos)
{
    backend *be = s->m->be;
    size_t nd = (size_t)n * s->D;
    pe_ensure(s, pos + n);
    be->scale(be, y, x, sqrt((double)s->D), nd);
    be->add(be, y, y, s->pe + (size_t)pos * s->D, nd);
}

static void row_copy(backend *be, float *dst, const float *src, int rows, int D)
{
    if (rows > 0) be->copy(be, dst, src, (size_t)rows * D * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
}

static int subsampling(int input_layer)
{
    switch (input_layer) {
    case IN_CONV2D: return 4;
    case IN_CONV2D6: return 6;
    case IN_CONV2D8: return 8;
    case IN_LINEAR: return 1;
    default: return 0;
    }
}

enc_stream *enc_stream_open(asr_model *m, esp_err *err)
{
    const model_dims *d = &m->dims;
    if (d->encoder != ENC_CONTEXTUAL) {
        esp_fail(err, "streaming decoding needs a model with encoder contextual_block_transformer or contextual_block_conformer");
        return NULL;
    }
    if (d->pre_out || !subsampling(d->input_layer)) {
        esp_fail(err, "streaming decoding takes the contextual block encoder's input layers conv2d, conv2d6, conv2d8 "
                      "and linear without a preencoder (as ESPnet's forward_infer)");
        return NULL;
    }
    enc_stream *s = xcalloc(1, sizeof *s);
    s->m = m, s->sub = subsampling(d->input_layer), s->D = d->d, s->L = d->blocks;
    s->bs = d->block_size, s->hop = d->hop_size, s->la = d->look_ahead;
    backend *be = m->be;
    s->prev_addin = dalloc(be, (size_t)s->D), s->addin = dalloc(be, (size_t)s->D);
    s->past_ctx = dalloc(be, (size_t)s->L * s->D);
    s->avg = dalloc(be, (size_t)s->bs);
    return s;
}

void enc_stream_reset(enc_stream *s)
{
    s->nf = s->na = 0;
    s->has_addin = s->has_past = s->nproc = 0;
}

void enc_stream_close(enc_stream *s)
{
    if (!s) return;
    backend *be = s->m->be;
    ws_free(s);
    float *own[] = {s->abuf, s->prev_addin, s->past_ctx, s->feat_dev, s->xs,   s->pe,
                    s->avg,  s->addin,      s->ys,       s->out,      s->omean, s->orstd};
    for (size_t i = 0; i < sizeof own / sizeof *own; i++) be->free(be, own[i]);
    free(s->fbuf);
    free(s);
}

/* The layers over one block: n frames at xs row c (utterance position pos) in block k. Leaves
 * the last layer's output in s->y (block_size + 2 rows). */
static void run_block(enc_stream *s, int c, int n, int pos, int k)
{
    asr_model *m = s->m;
    backend *be = m->be;
    int D = s->D, t = s->bs + 2, lens = s->bs + 1; /* row block_size + 1 (the block's context) is no key */
    size_t rd = (size_t)D * sizeof(float);
    ws_ensure(s, t);
    be->fill(be, s->x, 0, (size_t)t * rd);
    posenc_at(s, s->x + D, s->xs + (size_t)c * D, n, pos);
    /* The context vector: the mean of the block's frames before the positional stage. */
    float w = 1.0f / (float)n, *wh = xcalloc((size_t)n, sizeof *wh);
    for (int i = 0; i < n; i++) wh[i] = w;
    be->copy(be, s->avg, wh, (size_t)n * sizeof(float), BACKEND_HOST_TO_DEVICE);
    free(wh);
    be->gemm(be, 0, 0, 1, D, n, 1.0f, s->avg, n, s->xs + (size_t)c * D, D, 0.0f, s->addin, D);
    if (m->dims.ctx_pos_enc) posenc_at(s, s->addin, s->addin, 1, k);
    be->copy(be, s->x, s->has_addin ? s->prev_addin : s->addin, rd, BACKEND_DEVICE_TO_DEVICE);
    be->copy(be, s->x + (size_t)(t - 1) * D, s->addin, rd, BACKEND_DEVICE_TO_DEVICE);
    be->copy(be, s->prev_addin, s->addin, rd, BACKEND_DEVICE_TO_DEVICE);
    s->has_addin = 1;
    for (int l = 0; l < s->L; l++) {
        s->y = ctx_layer_forward(m, l, &s->a, s->x, s->tmp, 1, t, &lens, 1);
        const float *ctx = s->y + (size_t)(t - 1) * D; /* this block's context output */
        float *past = s->past_ctx + (size_t)l * D;
        if (l + 1 < s->L) {
            row_copy(be, s->x, s->y, t, D);
            be->copy(be, s->x, s->has_past ? past : ctx, rd, BACKEND_DEVICE_TO_DEVICE);
        }
        be->copy(be, past, ctx, rd, BACKEND_DEVICE_TO_DEVICE);
    }
    s->has_past = 1;
}

/* The layers over the whole utterance (n frames at xs row 0, nothing kept): into s->y. */
static void run_whole(enc_stream *s, int n)
{
    ws_ensure(s, n);
    posenc_at(s, s->x, s->xs, n, 0);
    for (int l = 0; l < s->L; l++) {
        s->y = ctx_layer_forward(s->m, l, &s->a, s->x, s->tmp, 1, n, &n, 0);
        if (l + 1 < s->L) row_copy(s->m->be, s->x, s->y, n, s->D);
    }
}

/* The features of this push (kept + new) through the input layer, after the kept frames, into
 * s->xs; returns the frames there. */
static int input_frames(enc_stream *s, const float *feats, int T, int is_final)
{
    asr_model *m = s->m;
    backend *be = m->be;
    int idim = m->dims.idim, D = s->D, n = s->nf + T;
    if (n > s->cap_f) {
        s->cap_f = n > 2 * s->cap_f ? n : 2 * s->cap_f;
        s->fbuf = xrealloc(s->fbuf, (size_t)s->cap_f * idim * sizeof *s->fbuf);
    }
    if (T > 0) memcpy(s->fbuf + (size_t)s->nf * idim, feats, (size_t)T * idim * sizeof *feats);
    int use = n, keep = 0; /* features through the input layer now; kept for the next push */
    if (!is_final) {
        int groups = n / s->sub - 1;
        if (groups < 2) {
            s->nf = n;
            return -1;
        }
        keep = n % s->sub + 2 * s->sub, use = groups * s->sub;
    }
    int T2 = 0;
    const float *e = NULL;
    if (use > 0) {
        grow(be, &s->feat_dev, &s->cap_feat, (size_t)use * idim);
        be->copy(be, s->feat_dev, s->fbuf, (size_t)use * idim * sizeof(float), BACKEND_HOST_TO_DEVICE);
        e = asr_model_embed(m, s->feat_dev, 1, use);
        T2 = m->T2;
    }
    memmove(s->fbuf, s->fbuf + (size_t)(n - keep) * idim, (size_t)keep * idim * sizeof *s->fbuf);
    s->nf = keep;
    grow(be, &s->xs, &s->cap_xs, (size_t)(s->na + T2) * D);
    row_copy(be, s->xs, s->abuf, s->na, D);
    row_copy(be, s->xs + (size_t)s->na * D, e, T2, D);
    int total = s->na + T2;
    s->na = 0;
    return total;
}

static void keep_frames(enc_stream *s, int from, int n)
{
    backend *be = s->m->be;
    if (n > s->cap_a) {
        be->free(be, s->abuf);
        s->cap_a = n > 2 * s->cap_a ? n : 2 * s->cap_a;
        s->abuf = dalloc(be, (size_t)s->cap_a * s->D);
    }
    row_copy(be, s->abuf, s->xs + (size_t)from * s->D, n, s->D);
    s->na = n;
}

static const float *finish(enc_stream *s, int ny)
{
    asr_model *m = s->m;
    backend *be = m->be;
    be->layernorm_forward(be, s->out, s->omean, s->orstd, s->ys, m->w.after_norm.weight, m->w.after_norm.bias, ny,
                          s->D, 1e-12);
    return s->out;
}

static void ys_ensure(enc_stream *s, int ny)
{
    if (ny <= s->cap_y) return;
    backend *be = s->m->be;
    be->free(be, s->ys), be->free(be, s->out), be->free(be, s->omean), be->free(be, s->orstd);
    s->cap_y = ny > 2 * s->cap_y ? ny : 2 * s->cap_y;
    s->ys = dalloc(be, (size_t)s->cap_y * s->D), s->out = dalloc(be, (size_t)s->cap_y * s->D);
    s->omean = dalloc(be, (size_t)s->cap_y), s->orstd = dalloc(be, (size_t)s->cap_y);
}

int enc_stream_push(enc_stream *s, const float *feats, int T, int is_final, const float **out)
{
    backend *be = s->m->be;
    int D = s->D, bs = s->bs, hop = s->hop, ny = 0;
    *out = NULL;
    int total = input_frames(s, feats, T, is_final);
    if (total < 0) return 0; /* too few features for the input layer yet */
    int nblk, span = total;
    if (is_final) {
        /* ceil((total - past - look_ahead) / hop), past = block_size - hop - look_ahead */
        int r = total - (bs - hop);
        nblk = r > 0 ? (r + hop - 1) / hop : 0;
    } else {
        if (total <= bs) {
            keep_frames(s, 0, total);
            return 0;
        }
        int overlap = bs - hop;
        nblk = (total - overlap) / hop;
        span = nblk * hop + overlap;
        keep_frames(s, total - (total - hop * nblk), total - hop * nblk);
    }
    if (s->nproc == 0 && total <= bs && is_final) {
        if (total > 0) {
            run_whole(s, total);
            ys_ensure(s, total);
            row_copy(be, s->ys, s->y, total, D);
            *out = finish(s, total);
        }
        ny = total;
        enc_stream_reset(s);
        return ny;
    }
    /* Output frame j of this push is frame j + offset of xs (the first push: frame j). */
    int offset = bs - s->la - hop, first = s->nproc == 0;
    ny = is_final ? (first ? span : span - offset) : nblk * hop + (first ? offset : 0);
    if (ny < 0) ny = 0;
    ys_ensure(s, ny > 0 ? ny : 1);
    be->fill(be, s->ys, 0, (size_t)(ny > 0 ? ny : 1) * D * sizeof(float)); /* ESPnet's zeros where no block writes */
    for (int i = 0; i < nblk; i++) {
        int c = i * hop, n = total - c < bs ? total - c : bs;
        run_block(s, c, n, c + hop * s->nproc, i + s->nproc);
        const float *rows = s->y + D; /* the frames (row 0 is the context) */
        if (first && i == 0) row_copy(be, s->ys, rows, offset, D);
        int at = c + (first ? offset : 0), len = hop;
        if (is_final && i == nblk - 1) len = bs - offset < ny - at ? bs - offset : ny - at;
        row_copy(be, s->ys + (size_t)at * D, rows + (size_t)offset * D, len, D);
    }
    s->nproc += nblk;
    if (ny > 0) *out = finish(s, ny);
    if (is_final) enc_stream_reset(s);
    return ny;
}
