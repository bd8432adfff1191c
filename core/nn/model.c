/* The ASR model of core/nn/model.h: its memory (parameters, gradients and their typed views,
 * activations), the forward through the input layer, the encoder and the CTC head, the joint loss
 * and the backward. */
#include "core/nn/model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/compute/backend_profile.h"
#include "core/compute/ops.h"
#include "core/nn/decoder_transformer.h"
#include "core/nn/encoder.h"
#include "core/nn/lm_rnn.h"
#include "core/nn/norm_spec.h"
#include "core/nn/transducer.h"

static const encoder_impl *encoder_of(const asr_model *m)
{
    /* encoder_body also runs one group's blocks when they may be skipped (blockdrop_rate) */
    if (m->dims.n_groups > 1 || (m->dims.n_groups == 1 && m->rates.blockdrop > 0)) return &encoder_body;
    switch (m->dims.encoder) {
    case ENC_CONFORMER: return &encoder_conformer;
    case ENC_EBRANCHFORMER: return &encoder_ebranchformer;
    case ENC_CONTEXTUAL: return &encoder_contextual;
    default: return &encoder_transformer;
    }
}

/* The profiler's layer kind of the encoder's blocks. */
static prof_layer blocks_layer(const asr_model *m)
{
    switch (m->dims.encoder) {
    case ENC_CONFORMER: return PROF_LAYER_CONFORMER_BLOCKS;
    case ENC_EBRANCHFORMER: return PROF_LAYER_EBRANCHFORMER_BLOCKS;
    default: return PROF_LAYER_TRANSFORMER_BLOCKS;
    }
}

/* The buffers' initial values (running_var 1, ...) onto the device, after the parameters. */
static void init_buffers(asr_model *m)
{
    const param_table *t = &m->table;
    if (t->state_total == t->total) return;
    float *host = xcalloc(t->state_total, sizeof *host);
    param_buffers_init(host, t);
    m->be->copy(m->be, m->params + t->total, host + t->total, (t->state_total - t->total) * sizeof(float),
                BACKEND_HOST_TO_DEVICE);
    free(host);
}

/* ---- memory -------------------------------------------------------------------------------- */

void asr_model_init(asr_model *m, backend *be, const model_dims *d, const model_rates *r)
{
    memset(m, 0, sizeof *m);
    m->dims = *d;
    m->rates = *r;
    m->be = be;
    param_table_build(&m->table, d);
    m->params = be->alloc(be, m->table.state_total * sizeof(float));
    m->grads = be->alloc(be, m->table.total * sizeof(float));
    model_tensors_bind(&m->w, &m->table, d, m->params, m->table.state_total);
    model_tensors_bind(&m->g, &m->table, d, m->grads, m->table.total);
    init_buffers(m);
    if (d->dec_blocks > 0) m->dec = decoder_new(m);
    if (d->lm == LM_SEQ_RNN) m->rnn = lm_rnn_new(m);
    if (model_has_transducer(d)) m->tr = transducer_new(m);
}

void asr_model_init_inference(asr_model *m, backend *be, const model_dims *d)
{
    memset(m, 0, sizeof *m);
    m->dims = *d;
    m->be = be;
    m->inference = 1;
    param_table_build(&m->table, d);
    m->params = be->alloc(be, m->table.state_total * sizeof(float));
    model_tensors_bind(&m->w, &m->table, d, m->params, m->table.state_total);
    init_buffers(m);
    if (d->dec_blocks > 0) m->dec = decoder_new(m);
    if (d->lm == LM_SEQ_RNN) m->rnn = lm_rnn_new(m);
    if (model_has_transducer(d)) m->tr = transducer_new(m);
}

/* The input layer's and the head's buffers (the encoder frees its own). */
static void free_head_acts(asr_model *m)
{
    backend *be = m->be;
    embed_free(m);
    float **all[] = {&m->h0,   &m->lnf,  &m->meanf,    &m->rstdf, &m->zd,   &m->logp,
                     &m->dh,   &m->dtmp, &m->dlogp,    &m->pre_drop, &m->pre_x, &m->dpre};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        be->free(be, *all[i]);
        *all[i] = NULL;
    }
    m->cap_rows = m->cap_in = 0;
}

void asr_model_free(asr_model *m)
{
    if (!m->be) return;
    free_head_acts(m);
    for (int i = 0; i < 3; i++) m->be->free(m->be, m->cpad[i]);
    interctc_free(m);
    enc_acts_destroy(m, encoder_of(m)->acts);
    decoder_free(m->be, m->dec);
    lm_rnn_free(m->be, m->rnn);
    transducer_free(m->be, m->tr);
    m->be->free(m->be, m->sync_dev);
    m->be->free(m->be, m->params);
    m->be->free(m->be, m->grads);
    free(m->hlens);
    model_tensors_free(&m->w);
    model_tensors_free(&m->g);
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
    m->wout_fc_ready = 0; /* the input layer's reordered weight is stale */
    m->be->copy(m->be, m->params, host, m->table.total * sizeof(float), BACKEND_HOST_TO_DEVICE);
}

void asr_model_state_to_host(const asr_model *m, float *host)
{
    m->be->synchronize(m->be);
    m->be->copy(m->be, host, m->params, m->table.state_total * sizeof(float), BACKEND_DEVICE_TO_HOST);
}

void asr_model_state_from_host(asr_model *m, const float *host)
{
    m->wout_fc_ready = 0; /* the input layer's reordered weight is stale */
    m->be->copy(m->be, m->params, host, m->table.state_total * sizeof(float), BACKEND_HOST_TO_DEVICE);
}

void asr_model_zero_grad(asr_model *m)
{
    ESP_CHECK(!m->inference);
    m->be->fill(m->be, m->grads, 0, m->table.total * sizeof(float));
}

/* Grows the activation buffers for B x T input frames (they are only ever enlarged); the encoder
 * grows its own. */
static void ensure_acts(asr_model *m, int B, int T)
{
    const model_dims *d = &m->dims;
    embed_sizes(m, B, T, NULL);
    size_t rows = (size_t)B * (size_t)m->T2, in = (size_t)B * (size_t)T;
    int grow = rows > m->cap_rows || in > m->cap_in;
    for (int i = 0; i < m->nconv; i++)
        grow |= (size_t)B * m->tk[i] * m->fk[i] * model_embed_ch(d) > m->cap_c[i] ||
                embed_saved_floats(m, i, B, T) > m->cap_saved[i];
    enc_acts_ensure(m, encoder_of(m)->acts, B, m->T2);
    interctc_ensure(m, rows);
    size_t pad = enc_dwconv_pad_floats(d, B, m->T2);
    if (pad > m->cap_cpad) {
        for (int i = 0; i < 3; i++) m->be->free(m->be, m->cpad[i]), m->cpad[i] = NULL;
        for (int i = 0; i < 3 - m->inference; i++) m->cpad[i] = m->be->alloc(m->be, pad * sizeof(float));
        m->cap_cpad = pad;
    }
    if (!grow) return;
    free_head_acts(m);
    backend *be = m->be;
    size_t D = (size_t)d->d, V = (size_t)d->vocab, W = (size_t)model_max_width(d); /* the blocks' widths may differ */
    embed_alloc(m, B, T);
#define A(n) be->alloc(be, (n) * sizeof(float) + 64)
    m->h0 = A(rows * W);
    m->lnf = A(rows * D), m->meanf = A(rows), m->rstdf = A(rows), m->zd = A(rows * D);
    m->logp = A(rows * V);
    m->dtmp = A(rows * W); /* the forward's branch output too */
    if (d->pre_out) {
        m->pre_x = A(in * (size_t)d->pre_out);
        if (!m->inference) m->pre_drop = A(in * (size_t)d->pre_in), m->dpre = A(in * (size_t)d->pre_out);
    }
    m->cap_rows = rows, m->cap_in = in;
    if (m->inference) return;
    m->dh = A(rows * W);
    m->dlogp = A(rows * V);
#undef A
}

void asr_model_reserve(asr_model *m, int B, int T, int Lmax)
{
    if (m->rnn) lm_rnn_reserve(m, B, Lmax + 1);
    else if (m->dims.lm) decoder_reserve(m, B, Lmax + 1, 0);
    if (m->dims.lm) return;
    ensure_acts(m, B, T);
    if (m->dec) decoder_reserve(m, B, Lmax + 1, input_layer_out_len(m->dims.input_layer, T));
    if (m->tr) transducer_reserve(m, B, input_layer_out_len(m->dims.input_layer, T), Lmax);
}

/* ---- forward --------------------------------------------------------------------------------- */

void asr_model_forward(asr_model *m, const float *feats, const int *feat_lens, int B, int T, int train, uint64_t seed)
{
    const model_dims *d = &m->dims;
    backend *be = m->be;
    ESP_CHECK(!(m->inference && train));
    if (d->lm) { /* the LM reads its tokens (the labels) in asr_model_loss */
        m->B = B, m->T = T, m->train = train, m->seed = seed;
        return;
    }
    ensure_acts(m, B, T);
    m->B = B, m->T = T, m->train = train, m->seed = seed;
    m->x = (float *)feats;
    prof_layer outer = backend_profile_enter(be, PROF_LAYER_PREENCODER);
    if (d->pre_out) { /* ESPnet2's LinearProjection: Linear(Dropout(feats)) */
        float pd = train ? m->rates.pre_dropout : 0;
        m->pre_in = feats;
        if (pd > 0) {
            be->dropout_forward(be, m->pre_drop, feats, (size_t)B * T * d->pre_in, pd, seed, STREAM_PRE);
            m->pre_in = m->pre_drop;
        }
        be->linear_forward(be, m->pre_x, m->pre_in, m->w.preencoder.weight, m->w.preencoder.bias, B * T, d->pre_in,
                           d->pre_out);
        m->x = m->pre_x;
    }
    embed_sizes(m, B, T, feat_lens);
    float pc = train ? m->rates.ctc_dropout : 0;

    backend_profile_enter(be, PROF_LAYER_INPUT_LAYER);
    embed_forward(m);
    backend_profile_enter(be, blocks_layer(m));
    m->chunk = 0, m->left_chunks = 0;
    if (m->rates.chunk_training) { /* full context (no mask) when the draw is every frame */
        int c = body_chunk_size(seed, m->T2, m->rates.chunk_threshold, m->rates.chunk_short);
        if (c < m->T2) m->chunk = c, m->left_chunks = m->rates.chunk_left;
    }
    m->h_enc = encoder_of(m)->forward(m);
    int N = B * m->T2, D = d->d; /* the encoder's output frames (an asr_transducer conv1d block shrinks them) */
    backend_profile_enter(be, PROF_LAYER_ENCODER_HEAD);
    norm_spec_forward(be, &d->after_norm, &m->w.after_norm, m->lnf, m->meanf, m->rstdf, m->h_enc, N, D);
    if (!d->no_ctc) { /* else the decoder reads m->lnf in asr_model_loss */
        be->dropout_forward(be, m->zd, m->lnf, (size_t)N * D, pc, seed, STREAM_CTC);
        be->linear_forward(be, m->logp, m->zd, m->w.ctc_lo.weight, m->w.ctc_lo.bias, N, D, d->vocab);
        be->log_softmax_forward(be, m->logp, m->logp, N, d->vocab);
    }
    backend_profile_leave(be, outer);
}

const float *asr_model_embed(asr_model *m, const float *feats, int B, int T)
{
    ESP_CHECK(!m->dims.pre_out && !m->dims.lm);
    ensure_acts(m, B, T);
    m->B = B, m->T = T, m->train = 0, m->seed = 0;
    m->x = (float *)feats;
    embed_sizes(m, B, T, NULL);
    if (m->T2 > 0) embed_forward(m);
    return m->nconv > 0 ? m->e : m->eact;
}

const float *asr_model_encode_blocks(asr_model *m)
{
    ESP_CHECK(!m->train);
    m->h_enc = encoder_of(m)->forward(m);
    m->be->layernorm_forward(m->be, m->lnf, m->meanf, m->rstdf, m->h_enc, m->w.after_norm.weight,
                             m->w.after_norm.bias, m->B * m->T2, m->dims.d, 1e-12);
    return m->lnf;
}

double asr_model_loss(asr_model *m, const int *labels, const int *label_lens, int stride, double *losses)
{
    m->labels = labels, m->label_lens = label_lens, m->label_stride = stride;
    m->loss_ctc = m->loss_att = m->loss_transducer = m->loss_aux_lm = NAN;
    m->att_correct = m->att_tokens = 0;
    if (m->rnn) {
        prof_layer outer = backend_profile_enter(m->be, PROF_LAYER_LM);
        m->loss_att = lm_rnn_loss(m, labels, label_lens, stride, m->B, m->train, m->seed, &m->att_correct,
                                  &m->att_tokens);
        backend_profile_leave(m->be, outer);
        return m->loss_att;
    }
    prof_layer outer = backend_profile_enter(m->be, PROF_LAYER_CTC_LOSS);
    /* The intermediate layers' first: the backend keeps the last CTC forward's workspace for the
     * final layer's backward. */
    double ic = interctc_has_loss(m) ? interctc_loss(m) : NAN;
    if (!m->dims.no_ctc)
        m->loss_ctc = m->be->ctc_loss_forward(m->be, losses, m->logp, m->hlens, labels, label_lens, stride, m->B,
                                              m->T2, m->dims.vocab, !m->rates.ctc_keep_inf);
    double iw = m->rates.interctc_weight, ctc = isnan(ic) ? m->loss_ctc : (1 - iw) * m->loss_ctc + iw * ic;
    if (m->tr) { /* ESPnetASRModel: loss_transducer + ctc_weight * loss_ctc */
        backend_profile_enter(m->be, PROF_LAYER_DECODER);
        m->loss_transducer = transducer_loss(m, m->lnf, m->B, m->T2, labels, label_lens, stride, m->train, m->seed);
        m->loss_aux_lm = transducer_lm_loss(m);
        backend_profile_leave(m->be, outer);
        double tr = m->rates.tr_weight * m->loss_transducer;
        if (m->dims.tr_lm_lin) tr += m->rates.tr_lm_weight * m->loss_aux_lm;
        return m->dims.no_ctc ? tr : tr + m->rates.ctc_weight * ctc;
    }
    if (!m->dec) {
        backend_profile_leave(m->be, outer);
        return ctc;
    }
    /* ESPnetASRModel: the decoder on the encoder output (after after_norm, before CTC's dropout). */
    backend_profile_enter(m->be, m->dims.lm ? PROF_LAYER_LM : PROF_LAYER_DECODER);
    m->loss_att = decoder_loss(m, m->lnf, m->hlens, m->B, m->T2, labels, label_lens, stride, m->train, m->seed,
                               &m->att_correct, &m->att_tokens);
    backend_profile_leave(m->be, outer);
    if (m->dims.no_ctc) return m->loss_att;
    double w = m->rates.ctc_weight;
    return w * ctc + (1 - w) * m->loss_att;
}

int asr_model_att_argmax(const asr_model *m, int *ids)
{
    ESP_CHECK(m->dec && !m->dims.lm);
    return decoder_loss_argmax(m, ids);
}

const float *asr_model_interctc_logp(const asr_model *m, int k) { return interctc_logp(m, k); }

void asr_model_lm_score(const asr_model *m, const int *const *prefixes, const int *lens, int n, float *logp_host)
{
    ESP_CHECK(m->dims.lm);
    if (m->rnn) lm_rnn_score_batch(m, prefixes, lens, n, logp_host);
    else decoder_score_batch(m, NULL, 0, prefixes, lens, n, logp_host);
}

void asr_model_lm_new_utterance(const asr_model *m)
{
    if (m->rnn) lm_rnn_score_new_utterance(m);
    else decoder_score_new_utterance(m);
}

/* ---- backward -------------------------------------------------------------------------------- */

/* Reports the trained parameters that lie in one of spans[] (inside = 1) or in none of them
 * (inside = 0) to m->grads_final, adjacent ones merged into one range. The spans are the gradient
 * view's (m->g.spans), bound with its members; each holds its module's tensors and nothing else. */
static void report_final(asr_model *m, const tensor_span *const *spans, int n_spans, int inside)
{
    if (!m->grads_final) return;
    for (int k = 0; k < n_spans; k++) ESP_CHECK(spans[k]->covered == spans[k]->hi - spans[k]->lo);
    size_t lo = 0, hi = 0;
    for (size_t i = 0; i < m->table.n; i++) {
        const param_info *p = &m->table.items[i];
        if (p->offset >= m->table.total) continue; /* buffers: no gradients */
        int match = 0;
        for (int k = 0; k < n_spans && !match; k++) match = p->offset >= spans[k]->lo && p->offset < spans[k]->hi;
        if (match != inside) continue;
        if (hi > lo && p->offset == hi) {
            hi += p->count;
            continue;
        }
        if (hi > lo) m->grads_final(m->grads_final_ctx, lo, hi);
        lo = p->offset, hi = p->offset + p->count;
    }
    if (hi > lo) m->grads_final(m->grads_final_ctx, lo, hi);
}

void asr_model_block_grads_final(asr_model *m, int l)
{
    const tensor_span *const s[] = {&m->g.spans.blocks[l]};
    report_final(m, s, 1, 1);
}

void asr_model_backward(asr_model *m, float dloss)
{
    ESP_CHECK(!m->inference);
    const model_dims *d = &m->dims;
    backend *be = m->be;
    int B = m->B, N = B * m->T2, D = d->d;
    uint64_t seed = m->seed;
    float pc = m->train ? m->rates.ctc_dropout : 0;
    if (m->rnn) {
        prof_layer outer = backend_profile_enter(be, PROF_LAYER_LM);
        lm_rnn_backward(m, dloss);
        report_final(m, NULL, 0, 0);
        backend_profile_leave(be, outer);
        return;
    }

    /* m->dtmp gets the gradient of the encoder output from the CTC branch, then the decoder's. */
    float w = m->rates.ctc_weight, dloss_ctc = m->dec || m->tr ? dloss * w : dloss;
    prof_layer outer = backend_profile_enter(be, PROF_LAYER_CTC_LOSS);
    interctc_backward_begin(m, dloss_ctc);
    if (!d->no_ctc) {
        float final = interctc_has_loss(m) ? dloss_ctc * (1 - m->rates.interctc_weight) : dloss_ctc;
        /* The backend's CTC backward gives the gradient of the logits: the log_softmax backward is folded in. */
        be->ctc_loss_backward(be, m->dlogp, m->logp, m->hlens, m->labels, m->label_lens, m->label_stride, B, m->T2,
                              d->vocab, !m->rates.ctc_keep_inf, final);
        backend_profile_enter(be, PROF_LAYER_ENCODER_HEAD);
        be->linear_backward(be, m->dtmp, m->g.ctc_lo.weight, m->g.ctc_lo.bias, m->dlogp, m->zd, m->w.ctc_lo.weight, N,
                            D, d->vocab, 0);
        be->dropout_backward(be, m->dtmp, m->dtmp, (size_t)N * D, pc, seed, STREAM_CTC);
    }
    backend_profile_enter(be, d->lm ? PROF_LAYER_LM : PROF_LAYER_DECODER);
    if (m->dec) decoder_backward(m, m->dtmp, !d->no_ctc, d->no_ctc ? dloss : dloss * (1 - w));
    if (m->tr) transducer_backward(m, m->dtmp, !d->no_ctc, dloss);
    if (d->lm) {
        report_final(m, NULL, 0, 0);
        backend_profile_leave(be, outer);
        return;
    }
    backend_profile_enter(be, PROF_LAYER_ENCODER_HEAD);
    norm_spec_backward(be, &m->dims.after_norm, &m->w.after_norm, &m->g.after_norm, m->dh, m->dtmp, m->h_enc, m->meanf,
                       m->rstdf, N, D, 0);

    /* Everything but the encoder's blocks, its embedding and the preencoder is final now; with
     * intermediate CTC, the head and after_norm gain gradients in the blocks' backward. */
    const tensor_span *const late[] = {&m->g.spans.encoder, &m->g.spans.heads};
    int heads_late = m->ic != NULL;
    report_final(m, late, heads_late ? 2 : 1, 0);
    backend_profile_enter(be, blocks_layer(m));
    encoder_of(m)->backward(m);
    if (heads_late) report_final(m, late + 1, 1, 1);
    backend_profile_enter(be, PROF_LAYER_INPUT_LAYER);
    embed_backward(m);
    backend_profile_enter(be, PROF_LAYER_PREENCODER);
    if (d->pre_out) /* the features need no gradient: the preencoder's parameters do */
        be->linear_backward(be, NULL, m->g.preencoder.weight, m->g.preencoder.bias, m->dpre, m->pre_in,
                            m->w.preencoder.weight, B * m->T, d->pre_in, d->pre_out, 0);
    backend_profile_leave(be, outer);
}
