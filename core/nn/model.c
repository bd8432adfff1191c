#include "core/nn/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/compute/ops.h"
#include "core/nn/decoder_transformer.h"

/* Dropout sites: each has its own stream so masks are independent and reproducible. */
enum { STREAM_POS = 1, STREAM_CTC = 2, STREAM_BLOCK0 = 100 };
enum { SITE_ATT = 0, SITE_ATT_OUT = 1, SITE_FF_IN = 2, SITE_FF_OUT = 3 };
static uint64_t block_stream(int l, int site) { return STREAM_BLOCK0 + 10 * (uint64_t)l + (uint64_t)site; }

struct block_acts {
    float *ln1, *mean1, *rstd1, *q, *k, *v, *att, *atty, *h1, *ln2, *mean2, *rstd2, *f1;
    float *h_out; /* the block's output (the next block's input) */
};

/* ---- parameters by name ------------------------------------------------------------------ */

/* fmt names a module, with %d for the block index where it has one. */
static float *param_ptr(float *base, const asr_model *m, const char *fmt, int l, const char *leaf)
{
    char name[128], head[112];
    snprintf(head, sizeof head, fmt, l);
    snprintf(name, sizeof name, "%s.%s", head, leaf);
    const param_info *p = param_find(&m->table, name);
    if (!p) {
        fprintf(stderr, "espnet3: internal error: no parameter %s\n", name);
        ESP_CHECK(p != NULL);
    }
    return base + p->offset;
}
#define P(fmt, l, leaf) param_ptr(m->params, m, fmt, l, leaf)
#define G(fmt, l, leaf) param_ptr(m->grads, m, fmt, l, leaf)

/* ---- memory -------------------------------------------------------------------------------- */

void asr_model_init(asr_model *m, backend *be, const model_dims *d, const model_rates *r)
{
    memset(m, 0, sizeof *m);
    m->dims = *d;
    m->rates = *r;
    m->be = be;
    param_table_build(&m->table, d);
    m->params = be->alloc(be, m->table.total * sizeof(float));
    m->grads = be->alloc(be, m->table.total * sizeof(float));
    m->blocks = xcalloc((size_t)d->blocks, sizeof *m->blocks);
    if (d->dec_blocks > 0) m->dec = decoder_new(m);
}

void asr_model_init_inference(asr_model *m, backend *be, const model_dims *d)
{
    memset(m, 0, sizeof *m);
    m->dims = *d;
    m->be = be;
    m->inference = 1;
    param_table_build(&m->table, d);
    m->params = be->alloc(be, m->table.total * sizeof(float));
    m->blocks = xcalloc((size_t)d->blocks, sizeof *m->blocks);
    if (d->dec_blocks > 0) m->dec = decoder_new(m);
}

static void free_acts(asr_model *m)
{
    backend *be = m->be;
    float **all[] = {&m->c1, &m->c2, &m->wout_fc, &m->e, &m->h0, &m->hf, &m->lnf, &m->meanf, &m->rstdf, &m->zd,
                     &m->logp, &m->dh, &m->dtmp, &m->dq, &m->dk, &m->dv, &m->datt, &m->dff, &m->dln, &m->dwout_fc,
                     &m->dc2, &m->dc1, &m->dlogp};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        be->free(be, *all[i]);
        *all[i] = NULL;
    }
    for (int l = 0; l < m->dims.blocks; l++) {
        block_acts *b = &m->blocks[l];
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
    m->cap_rows = m->cap_in = m->cap_c1 = m->cap_c2 = 0;
}

void asr_model_free(asr_model *m)
{
    if (!m->be) return;
    free_acts(m);
    decoder_free(m->be, m->dec);
    m->be->free(m->be, m->params);
    m->be->free(m->be, m->grads);
    free(m->blocks);
    free(m->hlens);
    param_table_free(&m->table);
    memset(m, 0, sizeof *m);
}

void asr_model_params_to_host(const asr_model *m, float *host)
{
    m->be->synchronize(m->be);
    m->be->copy(m->be, host, m->params, m->table.total * sizeof(float), BACKEND_DEVICE_TO_HOST);
}

void asr_model_params_from_host(asr_model *m, const float *host)
{
    m->be->copy(m->be, m->params, host, m->table.total * sizeof(float), BACKEND_HOST_TO_DEVICE);
}

void asr_model_zero_grad(asr_model *m)
{
    ESP_CHECK(!m->inference);
    m->be->fill(m->be, m->grads, 0, m->table.total * sizeof(float));
}

/* Grows the activation buffers for B x T (they are only ever enlarged). */
static void ensure_acts(asr_model *m, int B, int T)
{
    const model_dims *d = &m->dims;
    int T1 = ops_conv_out_len(T), F1 = ops_conv_out_len(d->idim), T2 = ops_conv_out_len(T1);
    size_t rows = (size_t)B * (size_t)T2, c1 = (size_t)B * d->d * T1 * F1, c2 = (size_t)B * d->d * T2 * d->f2;
    size_t att = (size_t)B * d->heads * (size_t)T2 * T2;
    if (rows <= m->cap_rows && c1 <= m->cap_c1 && c2 <= m->cap_c2 && att <= m->cap_in) return;
    free_acts(m);
    backend *be = m->be;
    size_t D = (size_t)d->d, FF = (size_t)d->ff, V = (size_t)d->vocab;
#define A(n) be->alloc(be, (n) * sizeof(float) + 64)
    m->c1 = A(c1);
    m->c2 = A(c2);
    m->wout_fc = A(D * D * (size_t)d->f2);
    m->e = A(rows * D);
    m->h0 = A(rows * D);
    for (int l = 0; l < d->blocks; l++) {
        block_acts *b = &m->blocks[l];
        if (m->inference && l > 0) {
            *b = m->blocks[0];
            continue;
        }
        b->ln1 = A(rows * D), b->mean1 = A(rows), b->rstd1 = A(rows);
        b->q = A(rows * D), b->k = A(rows * D), b->v = A(rows * D);
        b->att = A(att), b->atty = A(rows * D), b->h1 = A(rows * D);
        b->ln2 = A(rows * D), b->mean2 = A(rows), b->rstd2 = A(rows);
        b->f1 = A(rows * FF), b->h_out = A(rows * D);
    }
    m->lnf = A(rows * D), m->meanf = A(rows), m->rstdf = A(rows), m->zd = A(rows * D);
    m->logp = A(rows * V);
    m->dtmp = A(rows * D); /* the forward's branch output too */
    m->cap_rows = rows, m->cap_c1 = c1, m->cap_c2 = c2, m->cap_in = att;
    if (m->inference) return;
    m->dh = A(rows * D), m->dq = A(rows * D), m->dk = A(rows * D), m->dv = A(rows * D);
    m->datt = A(rows * D), m->dff = A(rows * FF), m->dln = A(rows * D);
    m->dwout_fc = A(D * D * (size_t)d->f2), m->dc2 = A(c2), m->dc1 = A(c1), m->dlogp = A(rows * V);
#undef A
    m->cap_rows = rows, m->cap_c1 = c1, m->cap_c2 = c2, m->cap_in = att;
}

/* ---- forward --------------------------------------------------------------------------------- */

static const float *block_input(const asr_model *m, int l) { return l == 0 ? m->h0 : m->blocks[l - 1].h_out; }

void asr_model_forward(asr_model *m, const float *feats, const int *feat_lens, int B, int T, int train, uint64_t seed)
{
    const model_dims *d = &m->dims;
    backend *be = m->be;
    ESP_CHECK(!(m->inference && train));
    ensure_acts(m, B, T);
    m->B = B, m->T = T, m->train = train, m->seed = seed;
    m->T1 = ops_conv_out_len(T), m->F1 = ops_conv_out_len(d->idim), m->T2 = ops_conv_out_len(m->T1);
    m->x = (float *)feats;
    m->hlens = xrealloc(m->hlens, (size_t)B * sizeof *m->hlens);
    for (int b = 0; b < B; b++) m->hlens[b] = ops_subsample_len(feat_lens[b]);
    int N = B * m->T2, D = d->d;
    float pd = train ? m->rates.dropout : 0, pp = train ? m->rates.pos_dropout : 0;
    float pa = train ? m->rates.att_dropout : 0, pc = train ? m->rates.ctc_dropout : 0;

    /* Conv2dSubsampling, channels last: c1 (B, T1, F1, D), c2 (B, T2, F2, D). A frame's features are
     * then (F2, D) f-major, where torch flattens (D, F2) c-major; so embed.out's weight is used with
     * its columns reordered to (f, c) (wout_fc), which leaves the math and the parameter as torch's. */
    be->conv2d_forward(be, m->c1, feats, P("encoder.embed.conv.%d", 0, "weight"), P("encoder.embed.conv.%d", 0, "bias"),
                       B, 1, D, T, d->idim, 1);
    be->conv2d_forward(be, m->c2, m->c1, P("encoder.embed.conv.%d", 2, "weight"), P("encoder.embed.conv.%d", 2, "bias"),
                       B, D, D, m->T1, m->F1, 1);
    be->swap12(be, m->wout_fc, P("encoder.embed.out", 0, "weight"), D, D, d->f2, 1);
    be->linear_forward(be, m->e, m->c2, m->wout_fc, P("encoder.embed.out", 0, "bias"), N, D * d->f2, D);
    be->posenc_forward(be, m->h0, m->e, sqrt((double)D), B, m->T2, D);
    be->dropout_forward(be, m->h0, m->h0, (size_t)N * D, pp, seed, STREAM_POS);

    for (int l = 0; l < d->blocks; l++) {
        block_acts *b = &m->blocks[l];
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
        be->attention_forward(be, b->atty, b->att, b->q, b->k, b->v, D, m->hlens, B, m->T2, d->heads, D / d->heads, pa,
                              seed, block_stream(l, SITE_ATT));
        snprintf(a, sizeof a, "encoder.encoders.%%d.self_attn.linear_out");
        be->linear_forward(be, m->dtmp, b->atty, P(a, l, "weight"), P(a, l, "bias"), N, D, D);
        be->dropout_forward(be, m->dtmp, m->dtmp, (size_t)N * D, pd, seed, block_stream(l, SITE_ATT_OUT));
        be->add(be, b->h1, h, m->dtmp, (size_t)N * D);

        be->layernorm_forward(be, b->ln2, b->mean2, b->rstd2, b->h1, P("encoder.encoders.%d.norm2", l, "weight"),
                              P("encoder.encoders.%d.norm2", l, "bias"), N, D, 1e-12);
        be->linear_forward(be, b->f1, b->ln2, P("encoder.encoders.%d.feed_forward.w_1", l, "weight"),
                           P("encoder.encoders.%d.feed_forward.w_1", l, "bias"), N, D, d->ff);
        be->relu_forward(be, b->f1, b->f1, (size_t)N * d->ff);
        be->dropout_forward(be, b->f1, b->f1, (size_t)N * d->ff, pd, seed, block_stream(l, SITE_FF_IN));
        be->linear_forward(be, m->dtmp, b->f1, P("encoder.encoders.%d.feed_forward.w_2", l, "weight"),
                           P("encoder.encoders.%d.feed_forward.w_2", l, "bias"), N, d->ff, D);
        be->dropout_forward(be, m->dtmp, m->dtmp, (size_t)N * D, pd, seed, block_stream(l, SITE_FF_OUT));
        be->add(be, b->h_out, b->h1, m->dtmp, (size_t)N * D);
    }
    const float *hL = block_input(m, d->blocks);
    be->layernorm_forward(be, m->lnf, m->meanf, m->rstdf, hL, P("encoder.after_norm", 0, "weight"),
                          P("encoder.after_norm", 0, "bias"), N, D, 1e-12);
    if (d->no_ctc) return; /* the decoder reads m->lnf in asr_model_loss */
    be->dropout_forward(be, m->zd, m->lnf, (size_t)N * D, pc, seed, STREAM_CTC);
    be->linear_forward(be, m->logp, m->zd, P("ctc.ctc_lo", 0, "weight"), P("ctc.ctc_lo", 0, "bias"), N, D,
                       d->vocab);
    be->log_softmax_forward(be, m->logp, m->logp, N, d->vocab);
}

double asr_model_loss(asr_model *m, const int *labels, const int *label_lens, int stride, double *losses)
{
    m->labels = labels, m->label_lens = label_lens, m->label_stride = stride;
    m->loss_ctc = m->loss_att = NAN;
    m->att_correct = m->att_tokens = 0;
    if (!m->dims.no_ctc)
        m->loss_ctc = m->be->ctc_loss_forward(m->be, losses, m->logp, m->hlens, labels, label_lens, stride, m->B,
                                              m->T2, m->dims.vocab, !m->rates.ctc_keep_inf);
    if (!m->dec) return m->loss_ctc;
    /* ESPnetASRModel: the decoder on the encoder output (after after_norm, before CTC's dropout). */
    m->loss_att = decoder_loss(m, m->lnf, m->hlens, m->B, m->T2, labels, label_lens, stride, m->train, m->seed,
                               &m->att_correct, &m->att_tokens);
    if (m->dims.no_ctc) return m->loss_att;
    double w = m->rates.ctc_weight;
    return w * m->loss_ctc + (1 - w) * m->loss_att;
}

/* ---- backward -------------------------------------------------------------------------------- */

void asr_model_backward(asr_model *m, float dloss)
{
    ESP_CHECK(!m->inference);
    const model_dims *d = &m->dims;
    backend *be = m->be;
    int B = m->B, N = B * m->T2, D = d->d, FF = d->ff;
    uint64_t seed = m->seed;
    float pd = m->train ? m->rates.dropout : 0, pp = m->train ? m->rates.pos_dropout : 0;
    float pa = m->train ? m->rates.att_dropout : 0, pc = m->train ? m->rates.ctc_dropout : 0;

    /* m->dtmp gets the gradient of the encoder output from the CTC branch, then the decoder's. */
    float w = m->rates.ctc_weight;
    if (!d->no_ctc) {
        /* The backend's CTC backward gives the gradient of the logits: the log_softmax backward is folded in. */
        be->ctc_loss_backward(be, m->dlogp, m->logp, m->hlens, m->labels, m->label_lens, m->label_stride, B, m->T2,
                              d->vocab, !m->rates.ctc_keep_inf, m->dec ? dloss * w : dloss);
        be->linear_backward(be, m->dtmp, G("ctc.ctc_lo", 0, "weight"), G("ctc.ctc_lo", 0, "bias"), m->dlogp,
                            m->zd, P("ctc.ctc_lo", 0, "weight"), N, D, d->vocab, 0);
        be->dropout_backward(be, m->dtmp, m->dtmp, (size_t)N * D, pc, seed, STREAM_CTC);
    }
    if (m->dec) decoder_backward(m, m->dtmp, !d->no_ctc, d->no_ctc ? dloss : dloss * (1 - w));
    be->layernorm_backward(be, m->dh, G("encoder.after_norm", 0, "weight"), G("encoder.after_norm", 0, "bias"),
                           m->dtmp, block_input(m, d->blocks), P("encoder.after_norm", 0, "weight"), m->meanf,
                           m->rstdf, N, D, 0);

    for (int l = d->blocks - 1; l >= 0; l--) {
        block_acts *b = &m->blocks[l];
        const float *h = block_input(m, l);
        char a[96];
        /* Feed-forward branch: h_out = h1 + drop(w2(drop(relu(w1(ln2(h1)))))). */
        be->dropout_backward(be, m->dtmp, m->dh, (size_t)N * D, pd, seed, block_stream(l, SITE_FF_OUT));
        be->linear_backward(be, m->dff, G("encoder.encoders.%d.feed_forward.w_2", l, "weight"),
                            G("encoder.encoders.%d.feed_forward.w_2", l, "bias"), m->dtmp, b->f1,
                            P("encoder.encoders.%d.feed_forward.w_2", l, "weight"), N, FF, D, 0);
        be->dropout_backward(be, m->dff, m->dff, (size_t)N * FF, pd, seed, block_stream(l, SITE_FF_IN));
        be->relu_backward(be, m->dff, m->dff, b->f1, (size_t)N * FF);
        be->linear_backward(be, m->dln, G("encoder.encoders.%d.feed_forward.w_1", l, "weight"),
                            G("encoder.encoders.%d.feed_forward.w_1", l, "bias"), m->dff, b->ln2,
                            P("encoder.encoders.%d.feed_forward.w_1", l, "weight"), N, D, FF, 0);
        be->layernorm_backward(be, m->dh, G("encoder.encoders.%d.norm2", l, "weight"),
                               G("encoder.encoders.%d.norm2", l, "bias"), m->dln, b->h1,
                               P("encoder.encoders.%d.norm2", l, "weight"), b->mean2, b->rstd2, N, D, 1);
        /* Attention branch: h1 = h + drop(linear_out(att(q, k, v))). */
        be->dropout_backward(be, m->dtmp, m->dh, (size_t)N * D, pd, seed, block_stream(l, SITE_ATT_OUT));
        snprintf(a, sizeof a, "encoder.encoders.%%d.self_attn.linear_out");
        be->linear_backward(be, m->datt, G(a, l, "weight"), G(a, l, "bias"), m->dtmp, b->atty, P(a, l, "weight"), N, D, D, 0);
        be->attention_backward(be, m->dq, m->dk, m->dv, m->datt, b->att, b->q, b->k, b->v, D, m->hlens, B, m->T2,
                               d->heads, D / d->heads, pa, seed, block_stream(l, SITE_ATT));
        snprintf(a, sizeof a, "encoder.encoders.%%d.self_attn.linear_q");
        be->linear_backward(be, m->dln, G(a, l, "weight"), G(a, l, "bias"), m->dq, b->ln1, P(a, l, "weight"), N, D, D, 0);
        snprintf(a, sizeof a, "encoder.encoders.%%d.self_attn.linear_k");
        be->linear_backward(be, m->dln, G(a, l, "weight"), G(a, l, "bias"), m->dk, b->ln1, P(a, l, "weight"), N, D, D, 1);
        snprintf(a, sizeof a, "encoder.encoders.%%d.self_attn.linear_v");
        be->linear_backward(be, m->dln, G(a, l, "weight"), G(a, l, "bias"), m->dv, b->ln1, P(a, l, "weight"), N, D, D, 1);
        be->layernorm_backward(be, m->dh, G("encoder.encoders.%d.norm1", l, "weight"),
                               G("encoder.encoders.%d.norm1", l, "bias"), m->dln, h,
                               P("encoder.encoders.%d.norm1", l, "weight"), b->mean1, b->rstd1, N, D, 1);
    }
    /* Embedding: h0 = drop(e * sqrt(d) + pe). */
    be->dropout_backward(be, m->dh, m->dh, (size_t)N * D, pp, seed, STREAM_POS);
    be->scale(be, m->dh, m->dh, sqrt((double)D), (size_t)N * D);
    /* embed.out's weight gradient accumulates in the (f, c) column order of wout_fc, then goes back. */
    be->swap12(be, m->dwout_fc, G("encoder.embed.out", 0, "weight"), D, D, d->f2, 1);
    be->linear_backward(be, m->dc2, m->dwout_fc, G("encoder.embed.out", 0, "bias"), m->dh, m->c2, m->wout_fc, N,
                        D * d->f2, D, 0);
    be->swap12(be, G("encoder.embed.out", 0, "weight"), m->dwout_fc, D, d->f2, D, 1);
    be->conv2d_backward(be, m->dc1, G("encoder.embed.conv.%d", 2, "weight"), G("encoder.embed.conv.%d", 2, "bias"),
                        m->dc2, m->c1, P("encoder.embed.conv.%d", 2, "weight"), m->c2, B, D, D, m->T1, m->F1, 0);
    be->conv2d_backward(be, NULL, G("encoder.embed.conv.%d", 0, "weight"), G("encoder.embed.conv.%d", 0, "bias"), m->dc1,
                        m->x, P("encoder.embed.conv.%d", 0, "weight"), m->c1, B, 1, D, m->T, d->idim, 0);
}
