/* The block pieces the Conformer and E-Branchformer encoders share (core/nn/encoder_conformer.c,
 * core/nn/encoder_ebranchformer.c): the activation switch, the pre-LN feed-forward module and the
 * pre-LN multi-head self-attention (relative or absolute positions). Declared in core/nn/encoder.h. */
#include <stdio.h>

#include "core/nn/encoder.h"

#define BLK_FMT "encoder.encoders.%%d." /* "encoder.encoders.%d." as a snprintf format */

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

void enc_ff_forward(asr_model *m, int l, const char *ff, const char *norm, float *ln, float *mean, float *rstd,
                    float *pre, float *post, const float *x, float *out, int site_in, int site_out)
{
    const model_dims *d = &m->dims;
    backend *be = m->be;
    int N = m->B * m->T2, D = d->d;
    enc_rates r = enc_rates_of(m);
    char w1[96], w2[96], nm[96];
    snprintf(w1, sizeof w1, BLK_FMT "%s.w_1", ff), snprintf(w2, sizeof w2, BLK_FMT "%s.w_2", ff);
    snprintf(nm, sizeof nm, BLK_FMT "%s", norm);
    be->layernorm_forward(be, ln, mean, rstd, x, P(nm, l, "weight"), P(nm, l, "bias"), N, D, 1e-12);
    be->linear_forward(be, pre, ln, P(w1, l, "weight"), P(w1, l, "bias"), N, D, d->ff);
    enc_act_forward(be, d->act, post, pre, (size_t)N * d->ff);
    be->dropout_forward(be, post, post, (size_t)N * d->ff, r.pd, m->seed, block_stream(l, site_in));
    be->linear_forward(be, m->dtmp, post, P(w2, l, "weight"), P(w2, l, "bias"), N, d->ff, D);
    be->dropout_forward(be, m->dtmp, m->dtmp, (size_t)N * D, r.pd, m->seed, block_stream(l, site_out));
    if (d->macaron) be->scale(be, m->dtmp, m->dtmp, 0.5, (size_t)N * D);
    be->add(be, out, x, m->dtmp, (size_t)N * D);
}

void enc_ff_backward(asr_model *m, int l, const char *ff, const char *norm, const float *ln, const float *mean,
                     const float *rstd, const float *pre, const float *post, const float *x, int site_in, int site_out,
                     float *dff, float *dln)
{
    const model_dims *d = &m->dims;
    backend *be = m->be;
    int N = m->B * m->T2, D = d->d, FF = d->ff;
    enc_rates r = enc_rates_of(m);
    char w1[96], w2[96], nm[96];
    snprintf(w1, sizeof w1, BLK_FMT "%s.w_1", ff), snprintf(w2, sizeof w2, BLK_FMT "%s.w_2", ff);
    snprintf(nm, sizeof nm, BLK_FMT "%s", norm);
    be->dropout_backward(be, m->dtmp, m->dh, (size_t)N * D, r.pd, m->seed, block_stream(l, site_out));
    if (d->macaron) be->scale(be, m->dtmp, m->dtmp, 0.5, (size_t)N * D);
    be->linear_backward(be, dff, G(w2, l, "weight"), G(w2, l, "bias"), m->dtmp, post, P(w2, l, "weight"), N, FF, D, 0);
    be->dropout_backward(be, dff, dff, (size_t)N * FF, r.pd, m->seed, block_stream(l, site_in));
    enc_act_backward(be, d->act, dff, dff, pre, (size_t)N * FF);
    be->linear_backward(be, dln, G(w1, l, "weight"), G(w1, l, "bias"), dff, ln, P(w1, l, "weight"), N, D, FF, 0);
    be->layernorm_backward(be, m->dh, G(nm, l, "weight"), G(nm, l, "bias"), dln, x, P(nm, l, "weight"), mean, rstd, N,
                           D, 1);
}

void enc_attn_forward(asr_model *m, int l, const char *attn, const enc_attn_bufs *b, const float *pos, const float *x,
                      float *out, int site)
{
    const model_dims *d = &m->dims;
    backend *be = m->be;
    int N = m->B * m->T2, D = d->d, T2 = m->T2;
    enc_rates r = enc_rates_of(m);
    char a[96], q[96], k[96], v[96], o[96], ps[96];
    snprintf(a, sizeof a, BLK_FMT "%s", attn), snprintf(q, sizeof q, BLK_FMT "%s.linear_q", attn);
    snprintf(k, sizeof k, BLK_FMT "%s.linear_k", attn), snprintf(v, sizeof v, BLK_FMT "%s.linear_v", attn);
    snprintf(o, sizeof o, BLK_FMT "%s.linear_out", attn), snprintf(ps, sizeof ps, BLK_FMT "%s.linear_pos", attn);
    be->layernorm_forward(be, b->ln, b->mean, b->rstd, x, P("encoder.encoders.%d.norm_mha", l, "weight"),
                          P("encoder.encoders.%d.norm_mha", l, "bias"), N, D, 1e-12);
    be->linear_forward(be, b->q, b->ln, P(q, l, "weight"), P(q, l, "bias"), N, D, D);
    be->linear_forward(be, b->k, b->ln, P(k, l, "weight"), P(k, l, "bias"), N, D, D);
    be->linear_forward(be, b->v, b->ln, P(v, l, "weight"), P(v, l, "bias"), N, D, D);
    if (d->rel_pos) {
        be->linear_forward(be, b->pl, pos, P(ps, l, "weight"), NULL, 2 * T2 - 1, D, D);
        be->relattn_forward(be, b->atty, b->att, b->q, b->k, b->v, D, b->pl, P(a, l, "pos_bias_u"),
                            P(a, l, "pos_bias_v"), m->hlens, m->B, T2, d->heads, D / d->heads, r.pa, m->seed,
                            block_stream(l, site));
    } else {
        be->attention_forward(be, b->atty, b->att, b->q, b->k, b->v, D, m->hlens, m->B, T2, d->heads, D / d->heads,
                              r.pa, m->seed, block_stream(l, site));
    }
    be->linear_forward(be, out, b->atty, P(o, l, "weight"), P(o, l, "bias"), N, D, D);
}

void enc_attn_backward(asr_model *m, int l, const char *attn, const enc_attn_bufs *b, const enc_attn_work *w,
                       const float *x, const float *dy, int site)
{
    const model_dims *d = &m->dims;
    backend *be = m->be;
    int N = m->B * m->T2, D = d->d, T2 = m->T2;
    enc_rates r = enc_rates_of(m);
    char a[96], o[96], ps[96], proj[3][96];
    snprintf(a, sizeof a, BLK_FMT "%s", attn), snprintf(o, sizeof o, BLK_FMT "%s.linear_out", attn);
    snprintf(ps, sizeof ps, BLK_FMT "%s.linear_pos", attn);
    snprintf(proj[0], sizeof proj[0], BLK_FMT "%s.linear_q", attn);
    snprintf(proj[1], sizeof proj[1], BLK_FMT "%s.linear_k", attn);
    snprintf(proj[2], sizeof proj[2], BLK_FMT "%s.linear_v", attn);
    be->linear_backward(be, w->datt, G(o, l, "weight"), G(o, l, "bias"), dy, b->atty, P(o, l, "weight"), N, D, D, 0);
    if (d->rel_pos) {
        be->relattn_backward(be, w->dq, w->dk, w->dv, w->dp, G(a, l, "pos_bias_u"), G(a, l, "pos_bias_v"), w->datt,
                             b->att, b->q, b->k, b->v, D, b->pl, P(a, l, "pos_bias_u"), P(a, l, "pos_bias_v"),
                             m->hlens, m->B, T2, d->heads, D / d->heads, r.pa, m->seed, block_stream(l, site));
        /* The encoding is no parameter's function: only linear_pos' weight gets a gradient. */
        be->linear_backward(be, NULL, G(ps, l, "weight"), NULL, w->dp, w->pos, P(ps, l, "weight"), 2 * T2 - 1, D, D,
                            0);
    } else {
        be->attention_backward(be, w->dq, w->dk, w->dv, w->datt, b->att, b->q, b->k, b->v, D, m->hlens, m->B, T2,
                               d->heads, D / d->heads, r.pa, m->seed, block_stream(l, site));
    }
    const float *dproj[] = {w->dq, w->dk, w->dv};
    for (int i = 0; i < 3; i++)
        be->linear_backward(be, w->dln, G(proj[i], l, "weight"), G(proj[i], l, "bias"), dproj[i], b->ln,
                            P(proj[i], l, "weight"), N, D, D, i > 0);
    be->layernorm_backward(be, m->dh, G("encoder.encoders.%d.norm_mha", l, "weight"),
                           G("encoder.encoders.%d.norm_mha", l, "bias"), w->dln, x,
                           P("encoder.encoders.%d.norm_mha", l, "weight"), b->mean, b->rstd, N, D, 1);
}
