/* ESPnet's pre-LN Transformer encoder layer (EncoderLayer with normalize_before) on any layout of
 * rows (nb sequences of t rows, keys masked past lens[i]), forward and backward with explicit
 * buffers, and the declaration of those buffers for core/nn/encoder_acts.c:
 *   x += dropout(MHA(norm1(x)));  x += dropout(w_2(dropout(ReLU(w_1(norm2(x))))))
 * The Transformer encoder (core/nn/encoder_transformer.c) runs it on (B, T2), the contextual block
 * encoder (core/nn/encoder_contextual.c) over its blocks of frames. */
#include "core/nn/encoder.h"
#include "core/nn/mha_input.h"

enum { SITE_ATT = 0, SITE_ATT_OUT = 1, SITE_FF_IN = 2, SITE_FF_OUT = 3 };

void tblock_kept(const model_dims *d, tblock_acts *b, enc_act_list *kept, size_t rows, size_t att)
{
    size_t D = (size_t)d->d, FF = (size_t)d->ff;
    float **rows_d[] = {&b->ln1, &b->q, &b->k, &b->v, &b->atty, &b->h1, &b->ln2};
    enc_act_add(kept, &b->mean1, rows), enc_act_add(kept, &b->rstd1, rows);
    for (size_t i = 0; i < sizeof rows_d / sizeof *rows_d; i++) enc_act_add(kept, rows_d[i], rows * D);
    enc_act_add(kept, &b->att, att);
    enc_act_add(kept, &b->mean2, rows), enc_act_add(kept, &b->rstd2, rows);
    enc_act_add(kept, &b->f1, rows * FF), enc_act_add(kept, &b->h_out, rows * D);
}

void tblock_work_decl(const model_dims *d, tblock_work *w, enc_act_list *work, size_t rows)
{
    size_t D = (size_t)d->d, FF = (size_t)d->ff;
    enc_act_add(work, &w->dq, rows * D), enc_act_add(work, &w->dk, rows * D), enc_act_add(work, &w->dv, rows * D);
    enc_act_add(work, &w->datt, rows * D), enc_act_add(work, &w->dff, rows * FF), enc_act_add(work, &w->dln, rows * D);
}

void tblock_forward(asr_model *m, int l, const tblock_acts *b, const float *x, float *tmp, int nb, int t,
                    const int *lens)
{
    const model_dims *d = &m->dims;
    backend *be = m->be;
    int N = nb * t, D = d->d;
    enc_rates r = enc_rates_of(m);
    uint64_t seed = m->seed;
    const enc_block_tensors *p = &m->w.blocks[l];
    const nn_mha *sa = &p->self_attn;
    mha_input_forward(be, sa, NULL, &p->norm1, x, b->ln1, b->mean1, b->rstd1, b->q, b->k, b->v, N, D);
    be->attention_forward(be, b->atty, b->att, b->q, b->k, b->v, D, lens, nb, t, d->heads, D / d->heads, r.pa, seed,
                          block_stream(l, SITE_ATT));
    be->linear_forward(be, tmp, b->atty, sa->linear_out.weight, sa->linear_out.bias, N, D, D);
    be->dropout_add_layernorm(be, b->h1, b->ln2, b->mean2, b->rstd2, x, tmp, p->norm2.weight, p->norm2.bias, N, D,
                              1e-12, 1.0, r.pd, seed, block_stream(l, SITE_ATT_OUT));
    be->linear_forward(be, b->f1, b->ln2, p->feed_forward.w_1.weight, p->feed_forward.w_1.bias, N, D, d->ff);
    be->act_dropout_forward(be, b->f1, b->f1, (size_t)N * d->ff, 1, r.pd, seed, block_stream(l, SITE_FF_IN));
    be->linear_forward(be, tmp, b->f1, p->feed_forward.w_2.weight, p->feed_forward.w_2.bias, N, d->ff, D);
    be->dropout_add(be, b->h_out, b->h1, tmp, (size_t)N * D, 1.0, r.pd, seed, block_stream(l, SITE_FF_OUT));
}

void tblock_backward(asr_model *m, int l, const tblock_acts *b, const tblock_work *w, const float *x, float *dh,
                     int nb, int t, const int *lens)
{
    const model_dims *d = &m->dims;
    backend *be = m->be;
    int N = nb * t, D = d->d, FF = d->ff;
    enc_rates r = enc_rates_of(m);
    uint64_t seed = m->seed;
    const enc_block_tensors *p = &m->w.blocks[l], *g = &m->g.blocks[l];
    const nn_mha *sa = &p->self_attn, *gsa = &g->self_attn;
    /* Feed-forward branch: h_out = h1 + drop(w2(drop(relu(w1(ln2(h1)))))). */
    be->dropout_backward(be, w->tmp, dh, (size_t)N * D, r.pd, seed, block_stream(l, SITE_FF_OUT));
    be->linear_backward(be, w->dff, g->feed_forward.w_2.weight, g->feed_forward.w_2.bias, w->tmp, b->f1,
                        p->feed_forward.w_2.weight, N, FF, D, 0);
    be->act_dropout_backward(be, w->dff, w->dff, b->f1, (size_t)N * FF, 1, r.pd, seed, block_stream(l, SITE_FF_IN));
    be->linear_backward(be, w->dln, g->feed_forward.w_1.weight, g->feed_forward.w_1.bias, w->dff, b->ln2,
                        p->feed_forward.w_1.weight, N, D, FF, 0);
    /* ... and the attention branch's dropout: h1 = x + drop(linear_out(att(q, k, v))). */
    be->layernorm_dropout_backward(be, dh, g->norm2.weight, g->norm2.bias, w->tmp, w->dln, b->h1, p->norm2.weight,
                                   b->mean2, b->rstd2, N, D, 1.0, r.pd, seed, block_stream(l, SITE_ATT_OUT));
    be->linear_backward(be, w->datt, gsa->linear_out.weight, gsa->linear_out.bias, w->tmp, b->atty,
                        sa->linear_out.weight, N, D, D, 0);
    be->attention_backward(be, w->dq, w->dk, w->dv, w->datt, b->att, b->q, b->k, b->v, D, lens, nb, t, d->heads,
                           D / d->heads, r.pa, seed, block_stream(l, SITE_ATT));
    mha_input_backward(be, sa, gsa, NULL, &p->norm1, &g->norm1,
                       &(mha_input_grads){w->dq, w->dk, w->dv, b->ln1, b->mean1, b->rstd1, x, w->dln, dh}, N, D);
}
