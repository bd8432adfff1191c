/* The block pieces the Conformer and E-Branchformer encoders share (core/nn/encoder_conformer.c,
 * core/nn/encoder_ebranchformer.c): the activation switch, the pre-LN feed-forward module and the
 * pre-LN multi-head self-attention (relative or absolute positions), and an inference batch's
 * padding zeroed before their depthwise convolutions, on the rows of enc_rows. Declared in core/nn/encoder.h. */
#include "core/nn/encoder.h"
#include "core/nn/mha_input.h"

void enc_act_forward(backend *be, int act, float *y, const float *x, size_t n)
{
    if (act == ACT_RELU)
        be->relu_forward(be, y, x, n);
    else
        be->swish_forward(be, y, x, n);
}

void enc_act_backward(backend *be, int act, float *dx, const float *dy, const float *x, size_t n)
{
    if (act == ACT_RELU)
        be->relu_backward(be, dx, dy, x, n);
    else
        be->swish_backward(be, dx, dy, x, n);
}

/* Block l's feed-forward module and its norm: the macaron pair or the main one. */
static const nn_ffn *ff_of(const enc_block_tensors *t, int macaron)
{
    return macaron ? &t->feed_forward_macaron : &t->feed_forward;
}
static const nn_norm *ff_norm_of(const enc_block_tensors *t, int macaron)
{
    return macaron ? &t->norm_ff_macaron : &t->norm_ff;
}

/* The contextual block Conformer's PositionwiseFeedForward gets no activation: torch's ReLU. */
static int ff_relu(const model_dims *d) { return d->act == ACT_RELU || d->encoder == ENC_CONTEXTUAL; }

void enc_ff_forward(asr_model *m, const enc_rows *r, int l, int macaron, float *ln, float *mean, float *rstd,
                    float *pre, float *post, const float *x, float *out, int site_in, int site_out)
{
    const model_dims *d = &m->dims;
    backend *be = m->be;
    int N = r->nb * r->t, D = d->d;
    enc_rates rt = enc_rates_of(m);
    const nn_ffn *ff = ff_of(&m->w.blocks[l], macaron);
    const nn_norm *nm = ff_norm_of(&m->w.blocks[l], macaron);
    norm_spec_forward(be, &d->norm, nm, ln, mean, rstd, x, N, D);
    be->linear_forward(be, pre, ln, ff->w_1.weight, ff->w_1.bias, N, D, d->ff);
    be->act_dropout_forward(be, post, pre, (size_t)N * d->ff, ff_relu(d), rt.pd, m->seed, block_stream(l, site_in));
    be->linear_forward(be, r->tmp, post, ff->w_2.weight, ff->w_2.bias, N, d->ff, D);
    be->dropout_add(be, out, x, r->tmp, (size_t)N * D, d->macaron ? 0.5 : 1.0, rt.pd, m->seed,
                    block_stream(l, site_out));
}

void enc_ff_backward(asr_model *m, const enc_rows *r, int l, int macaron, const float *ln, const float *mean,
                     const float *rstd, const float *pre, const float *post, const float *x, int site_in,
                     int site_out, float *dff, float *dln)
{
    const model_dims *d = &m->dims;
    backend *be = m->be;
    int N = r->nb * r->t, D = d->d, FF = d->ff;
    enc_rates rt = enc_rates_of(m);
    const nn_ffn *ff = ff_of(&m->w.blocks[l], macaron), *gff = ff_of(&m->g.blocks[l], macaron);
    const nn_norm *nm = ff_norm_of(&m->w.blocks[l], macaron), *gnm = ff_norm_of(&m->g.blocks[l], macaron);
    be->dropout_add(be, r->tmp, NULL, r->dh, (size_t)N * D, d->macaron ? 0.5 : 1.0, rt.pd, m->seed,
                    block_stream(l, site_out));
    be->linear_backward(be, dff, gff->w_2.weight, gff->w_2.bias, r->tmp, post, ff->w_2.weight, N, FF, D, 0);
    be->act_dropout_backward(be, dff, dff, pre, (size_t)N * FF, ff_relu(d), rt.pd, m->seed, block_stream(l, site_in));
    be->linear_backward(be, dln, gff->w_1.weight, gff->w_1.bias, dff, ln, ff->w_1.weight, N, D, FF, 0);
    norm_spec_backward(be, &d->norm, nm, gnm, r->dh, dln, x, mean, rstd, N, D, 1);
}

/* Row 0 of every block (r->blocks) attends to nothing: ESPnet's masked softmax gives it zero
 * weights, so its attention output (forward) and that output's gradient (backward) are zero. */
static void zero_row0(backend *be, const enc_rows *r, float *x, int D)
{
    if (!r->blocks) return;
    for (int i = 0; i < r->nb; i++) be->fill(be, x + (size_t)i * r->t * D, 0, (size_t)D * sizeof(float));
}

void enc_attn_forward(asr_model *m, const enc_rows *r, int l, const enc_attn_bufs *b, const float *pos,
                      const float *x, float *out, int site)
{
    const model_dims *d = &m->dims;
    backend *be = m->be;
    int N = r->nb * r->t, D = d->d, T2 = r->t;
    enc_rates rt = enc_rates_of(m);
    const nn_mha *a = &m->w.blocks[l].self_attn;
    const nn_norm *nm = &m->w.blocks[l].norm_mha;
    if (m->stream_chunk) {
        enc_attn_chunk_forward(m, l, x, out, N);
        return;
    }
    mha_input_forward(be, a, &m->dims.norm, nm, x, b->ln, b->mean, b->rstd, b->q, b->k, b->v, N, D);
    if (d->rel_pos) {
        be->linear_forward(be, b->pl, pos, a->linear_pos.weight, a->linear_pos.bias, 2 * T2 - 1, D, enc_pos_cols(d));
        be->relattn_forward(be, b->atty, b->att, b->q, b->k, b->v, D, b->pl, a->pos_bias_u, a->pos_bias_v, r->lens,
                            r->nb, T2, d->heads, D / d->heads, m->chunk, m->left_chunks, rt.pa, m->seed, block_stream(l, site));
    } else {
        be->attention_forward(be, b->atty, b->att, b->q, b->k, b->v, D, r->lens, r->nb, T2, d->heads, D / d->heads,
                              rt.pa, m->seed, block_stream(l, site));
    }
    zero_row0(be, r, b->atty, D);
    be->linear_forward(be, out, b->atty, a->linear_out.weight, a->linear_out.bias, N, D, D);
}

void enc_attn_backward(asr_model *m, const enc_rows *r, int l, const enc_attn_bufs *b, const enc_attn_work *w,
                       const float *x, float *dy, int site)
{
    const model_dims *d = &m->dims;
    backend *be = m->be;
    int N = r->nb * r->t, D = d->d, T2 = r->t;
    enc_rates rt = enc_rates_of(m);
    const nn_mha *a = &m->w.blocks[l].self_attn, *ga = &m->g.blocks[l].self_attn;
    const nn_norm *nm = &m->w.blocks[l].norm_mha, *gnm = &m->g.blocks[l].norm_mha;
    be->linear_backward(be, w->datt, ga->linear_out.weight, ga->linear_out.bias, dy, b->atty, a->linear_out.weight, N,
                        D, D, 0);
    zero_row0(be, r, w->datt, D);
    if (d->rel_pos) {
        be->relattn_backward(be, w->dq, w->dk, w->dv, w->dp, ga->pos_bias_u, ga->pos_bias_v, w->datt, b->att, b->q,
                             b->k, b->v, D, b->pl, a->pos_bias_u, a->pos_bias_v, r->lens, r->nb, T2, d->heads,
                             D / d->heads, m->chunk, m->left_chunks, rt.pa, m->seed, block_stream(l, site));
        /* linear_pos' weight (and simplified_att's bias) gets a gradient, and the encoding one where a
         * parameter made it (dpos) */
        be->linear_backward(be, w->dpos, ga->linear_pos.weight, ga->linear_pos.bias, w->dp, w->pos,
                            a->linear_pos.weight, 2 * T2 - 1, D, enc_pos_cols(d), 1);
    } else {
        be->attention_backward(be, w->dq, w->dk, w->dv, w->datt, b->att, b->q, b->k, b->v, D, r->lens, r->nb, T2,
                               d->heads, D / d->heads, rt.pa, m->seed, block_stream(l, site));
    }
    mha_input_backward(be, a, ga, &m->dims.norm, nm, gnm,
                       &(mha_input_grads){w->dq, w->dk, w->dv, b->ln, b->mean, b->rstd, x, w->dln, r->dh}, N, D);
}

/* The largest depthwise kernel and channel count of d's blocks. */
static void dwconv_max(const model_dims *d, int *k, int *c)
{
    *k = 1, *c = 2 * d->d; /* the merge convolution's 2 d channels, the Conformer's d */
    for (int l = 0; l < d->blocks; l++) {
        model_dims b = model_block_dims(d, l);
        int bk = b.encoder == ENC_CONFORMER ? (b.use_cnn ? b.cnn_kernel : 1)
               : b.encoder == ENC_EBRANCHFORMER ? (b.cgmlp_kernel > b.merge_kernel ? b.cgmlp_kernel : b.merge_kernel)
                                                : 1;
        *k = bk > *k ? bk : *k;
        if (b.encoder == ENC_EBRANCHFORMER && b.cgmlp_units / 2 > *c) *c = b.cgmlp_units / 2;
    }
}

size_t enc_dwconv_pad_floats(const model_dims *d, int B, int T2)
{
    if (!d->causal) return 0;
    int k, c;
    dwconv_max(d, &k, &c);
    return (size_t)B * (size_t)(T2 + (k - 1) / 2) * (size_t)c;
}

/* Each of nb sequences of t rows of c (src, rows apart by t) into dst's of tp rows, from row `at`,
 * the rest zero (to: pad), or dst's t rows from src's row `at` of tp (back). */
static void pad_rows(backend *be, float *dst, const float *src, int nb, int t, int tp, int at, int c, int to)
{
    size_t row = (size_t)c * sizeof(float);
    if (to) be->fill(be, dst, 0, (size_t)nb * tp * row);
    for (int b = 0; b < nb; b++) {
        if (to) be->copy(be, dst + ((size_t)b * tp + at) * c, src + (size_t)b * t * c, t * row, BACKEND_DEVICE_TO_DEVICE);
        else be->copy(be, dst + (size_t)b * t * c, src + ((size_t)b * tp + at) * c, t * row, BACKEND_DEVICE_TO_DEVICE);
    }
}

void enc_dwconv_forward(asr_model *m, int l, int conv, float *y, const float *x, const float *w, const float *b,
                        int nb, int t, int c, int k)
{
    backend *be = m->be;
    if (!m->dims.causal) {
        be->dwconv1d_forward(be, y, x, w, b, nb, t, c, k);
        return;
    }
    if (m->stream_chunk) {
        enc_dwconv_chunk_forward(m, l, conv, y, x, w, b, t, c, k);
        return;
    }
    int p = (k - 1) / 2, tp = t + p; /* the op's own p zeros each side: k - 1 before, the p after unread */
    ESP_CHECK((size_t)nb * tp * c <= m->cap_cpad);
    pad_rows(be, m->cpad[0], x, nb, t, tp, p, c, 1);
    be->dwconv1d_forward(be, m->cpad[1], m->cpad[0], w, b, nb, tp, c, k);
    pad_rows(be, y, m->cpad[1], nb, t, tp, 0, c, 0);
}

void enc_dwconv_backward(asr_model *m, float *dx, float *dw, float *db, const float *dy, const float *x,
                         const float *w, int nb, int t, int c, int k)
{
    backend *be = m->be;
    if (!m->dims.causal) {
        be->dwconv1d_backward(be, dx, dw, db, dy, x, w, nb, t, c, k);
        return;
    }
    int p = (k - 1) / 2, tp = t + p;
    pad_rows(be, m->cpad[0], x, nb, t, tp, p, c, 1);
    pad_rows(be, m->cpad[1], dy, nb, t, tp, 0, c, 1); /* the p outputs after t were dropped: no gradient */
    be->dwconv1d_backward(be, m->cpad[2], dw, db, m->cpad[1], m->cpad[0], w, nb, tp, c, k);
    pad_rows(be, dx, m->cpad[2], nb, t, tp, p, c, 0);
}

void enc_zero_padding(const asr_model *m, const enc_rows *r, float *x, int C)
{
    if ((!m->inference && !m->dims.body) || r->blocks) return;
    for (int b = 0; b < r->nb; b++) {
        int h = r->lens[b];
        if (h < r->t)
            m->be->fill(m->be, x + ((size_t)b * r->t + (size_t)h) * C, 0, (size_t)(r->t - h) * C * sizeof(float));
    }
}
