/* The encoder's input layer (encoder_conf.input_layer, ESPnet2's TransformerEncoder and
 * ConformerEncoder) and the positional stage after it, forward and backward:
 *   conv2d / conv2d2 / conv2d6 / conv2d8  Conv2dSubsampling*: Conv2d(1, d, 3, 2) + ReLU, then
 *          Conv2d(d, d, k, s) + ReLU with (3, 2) / (3, 1) / (5, 3) / (3, 2) twice, Linear(d * f2, d)
 *   conv1d2  Conv1dSubsampling2 (transformer): Conv1d(idim, d, 3, 1) + ReLU, Conv1d(d, d, 3, 2) +
 *          ReLU, Linear(d, d)
 *   linear   Linear(idim, d), LayerNorm (eps 1e-5), Dropout(dropout_rate), ReLU (transformer only)
 *   null     transformer: nothing (idim = d) or a plain Linear(idim, d), and no positional stage;
 *            conformer: the positional stage alone (idim = d); e_branchformer: the positional
 *            stage alone (idim = d) or a plain Linear(idim, d) without it
 * then the positional stage: x * sqrt(d) + PE (abs_pos), or x * sqrt(d) with relative positions
 * (rel_pos: the encoder adds them in attention), dropout(positional_dropout_rate). An encoder that
 * reads the stage's input itself (the contextual block encoder's context vectors) leaves that
 * branch's gradient in m->dpos_in, which the backward adds.
 * The asr_transducer task's ConvInput has model_embed_ch channels and a Linear to model_embed_dim,
 * or no Linear before a conv1d block (embed_raw: the convs' output in torch's (c, f) order).
 * The 3x3 stride-2 convs run on conv2d_* (Winograd for d channels), the others on conv2d_gen_*.
 * Conv outputs are channels last: a frame's features are (f2, d) f-major where torch flattens
 * (d, f2), so the out Linear uses its weight with the columns reordered to (f, c) (wout_fc). */
#include <math.h>
#include <string.h>

#include "core/nn/encoder.h"

static int conv1d(const asr_model *m) { return m->dims.input_layer == IN_CONV1D2; }

/* Whether conv c runs on conv2d_* (3x3, stride 2) rather than conv2d_gen_*. */
static int conv3s2(const asr_model *m, const input_conv *c) { return !conv1d(m) && c->k == 3 && c->s == 2; }

void embed_sizes(asr_model *m, int B, int T, const int *feat_lens)
{
    const model_dims *d = &m->dims;
    input_conv c[3];
    m->nconv = input_layer_convs(d->input_layer, c);
    int t = T, f = conv1d(m) ? 1 : model_input_dim(d);
    for (int i = 0; i < m->nconv; i++) {
        t = t < c[i].k ? 0 : (t - c[i].k) / c[i].s + 1;
        if (!conv1d(m)) f = f < c[i].k ? 0 : (f - c[i].k) / c[i].s + 1;
        m->tk[i] = t, m->fk[i] = f;
    }
    m->T2 = input_layer_out_len(d->input_layer, T);
    if (!feat_lens) return;
    m->hlens = xrealloc(m->hlens, (size_t)(B > 0 ? B : 1) * sizeof *m->hlens);
    /* The asr_transducer Encoder cuts its input mask to T2 frames (ConvInput's mask[:, :T2]): an
     * utterance keeps min(its input frames, T2) of them, padded frames counted, as ESPnet2 does. */
    for (int b = 0; b < B; b++)
        m->hlens[b] = d->body ? (feat_lens[b] < m->T2 ? feat_lens[b] : m->T2)
                              : input_layer_out_len(d->input_layer, feat_lens[b]);
}

void embed_free(asr_model *m)
{
    backend *be = m->be;
    float **all[] = {&m->c[0],   &m->c[1],      &m->c[2], &m->dc[0],   &m->dc[1],   &m->dc[2],   &m->wout_fc,
                     &m->dwout_fc, &m->e,     &m->eln, &m->emean, &m->erstd, &m->eact, &m->csaved[0],
                     &m->csaved[1], &m->csaved[2]};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        be->free(be, *all[i]);
        *all[i] = NULL;
    }
    memset(m->cap_c, 0, sizeof m->cap_c);
    memset(m->cap_saved, 0, sizeof m->cap_saved);
}

/* Only when training, on a backend that keeps something, for the 3x3 stride-2 convs; after
 * embed_sizes for B x T. */
size_t embed_saved_floats(const asr_model *m, int i, int B, int T)
{
    backend *be = m->be;
    input_conv c[3];
    input_layer_convs(m->dims.input_layer, c);
    if (m->inference || !be->conv2d_saved_floats || !conv3s2(m, &c[i])) return 0;
    int C = model_embed_ch(&m->dims);
    int h = i ? m->tk[i - 1] : T, w = i ? m->fk[i - 1] : model_input_dim(&m->dims), ic = i ? C : 1;
    return be->conv2d_saved_floats(be, B, ic, C, h, w);
}

/* Allocates for B x T input frames (model.c calls it after embed_sizes, when its buffers grow). */
void embed_alloc(asr_model *m, int B, int T)
{
    const model_dims *d = &m->dims;
    backend *be = m->be;
    embed_sizes(m, B, T, NULL);
    size_t D = (size_t)model_embed_dim(d), C = (size_t)model_embed_ch(d), rows = (size_t)B * (size_t)m->T2;
#define A(n) be->alloc(be, (n) * sizeof(float) + 64)
    for (int i = 0; i < m->nconv; i++) {
        m->cap_c[i] = (size_t)B * m->tk[i] * m->fk[i] * C;
        m->c[i] = A(m->cap_c[i]);
        if (!m->inference) m->dc[i] = A(m->cap_c[i]);
        m->cap_saved[i] = embed_saved_floats(m, i, B, T);
        if (m->cap_saved[i]) m->csaved[i] = A(m->cap_saved[i]);
    }
    if (m->nconv > 0 && !d->embed_raw) {
        m->wout_fc = A(D * C * (size_t)d->f2), m->wout_fc_ready = 0;
        if (!m->inference) m->dwout_fc = A(D * C * (size_t)d->f2);
    }
    m->e = A(rows * D);
    if (d->input_layer == IN_LINEAR) m->eln = A(rows * D), m->emean = A(rows), m->erstd = A(rows), m->eact = A(rows * D);
#undef A
}

/* input_layer linear ends with a ReLU in the Transformer encoders (not the Conformer's). */
static int relu_after_linear(const model_dims *d)
{
    return d->encoder == ENC_TRANSFORMER || d->encoder == ENC_CONTEXTUAL;
}

/* The positional stage: h0 = drop(x * sqrt(d) (+ pe)); all but input_layer null's plain cases. */
static int has_pos_stage(const asr_model *m)
{
    const model_dims *d = &m->dims;
    if (d->input_layer != IN_NONE) return 1;
    return d->encoder == ENC_CONFORMER || (d->encoder == ENC_EBRANCHFORMER && model_input_dim(d) == model_embed_dim(d));
}

static void conv_stack_forward(asr_model *m)
{
    const model_dims *d = &m->dims;
    backend *be = m->be;
    input_conv c[3];
    input_layer_convs(d->input_layer, c);
    const float *in = m->x;
    int h = m->T, w = conv1d(m) ? 1 : model_input_dim(d), ic = conv1d(m) ? model_input_dim(d) : 1;
    int D = model_embed_dim(d), C = model_embed_ch(d);
    for (int i = 0; i < m->nconv; i++) {
        const float *W = m->w.embed.conv[i].weight, *b = m->w.embed.conv[i].bias;
        if (conv3s2(m, &c[i]))
            be->conv2d_forward(be, m->c[i], in, W, b, m->B, ic, C, h, w, 1, m->csaved[i]);
        else
            be->conv2d_gen_forward(be, m->c[i], in, W, b, m->B, ic, C, h, w, c[i].k, conv1d(m) ? 1 : c[i].k, c[i].s,
                                   conv1d(m) ? 1 : c[i].s, 1);
        in = m->c[i], h = m->tk[i], w = m->fk[i], ic = C;
    }
    if (d->embed_raw) { /* ConvInput without its Linear: torch's (c, f) order of a frame's features */
        be->swap12(be, m->e, in, m->B * m->T2, d->f2, C, 1);
        return;
    }
    if (!m->wout_fc_ready) be->swap12(be, m->wout_fc, m->w.embed.out.weight, D, C, d->f2, 1);
    m->wout_fc_ready = m->inference; /* training changes the weight every step */
    be->linear_forward(be, m->e, in, m->wout_fc, m->w.embed.out.bias, m->B * m->T2, C * d->f2, D);
}

static void conv_stack_backward(asr_model *m, float *dy)
{
    const model_dims *d = &m->dims;
    backend *be = m->be;
    input_conv c[3];
    input_layer_convs(d->input_layer, c);
    int D = model_embed_dim(d), C = model_embed_ch(d), L = m->nconv - 1;
    const embed_tensors *g = &m->g.embed;
    if (d->embed_raw) {
        be->swap12(be, m->dc[L], dy, m->B * m->T2, C, d->f2, 1);
    } else { /* embed.out's weight gradient accumulates in the (f, c) column order of wout_fc, then goes back */
        be->swap12(be, m->dwout_fc, g->out.weight, D, C, d->f2, 1);
        be->linear_backward(be, m->dc[L], m->dwout_fc, g->out.bias, dy, m->c[L], m->wout_fc, m->B * m->T2,
                            C * d->f2, D, 0);
        be->swap12(be, g->out.weight, m->dwout_fc, D, d->f2, C, 1);
    }
    for (int i = L; i >= 0; i--) {
        const float *in = i ? m->c[i - 1] : m->x;
        int h = i ? m->tk[i - 1] : m->T, w = i ? m->fk[i - 1] : conv1d(m) ? 1 : model_input_dim(d);
        int ic = i ? C : conv1d(m) ? model_input_dim(d) : 1;
        float *dx = i ? m->dc[i - 1] : m->dpre; /* the features' gradient only for a preencoder */
        if (conv3s2(m, &c[i]))
            be->conv2d_backward(be, dx, g->conv[i].weight, g->conv[i].bias, m->dc[i], in, m->w.embed.conv[i].weight,
                                m->c[i], m->B, ic, C, h, w, 0, m->csaved[i]);
        else
            be->conv2d_gen_backward(be, dx, g->conv[i].weight, g->conv[i].bias, m->dc[i], in,
                                    m->w.embed.conv[i].weight, m->c[i], m->B, ic, C, h, w, c[i].k,
                                    conv1d(m) ? 1 : c[i].k, c[i].s, conv1d(m) ? 1 : c[i].s, 0);
    }
}

void embed_forward(asr_model *m)
{
    const model_dims *d = &m->dims;
    backend *be = m->be;
    int N = m->B * m->T2, D = model_embed_dim(d);
    enc_rates r = enc_rates_of(m);
    const float *pin = m->x; /* the positional stage's input */
    if (m->nconv > 0) {
        conv_stack_forward(m);
        pin = m->e;
    } else if (d->input_layer == IN_LINEAR) {
        be->linear_forward(be, m->e, m->x, m->w.embed.linear.weight, m->w.embed.linear.bias, N, model_input_dim(d),
                           D);
        be->layernorm_forward(be, m->eln, m->emean, m->erstd, m->e, m->w.embed.norm.weight, m->w.embed.norm.bias, N,
                              D, 1e-5);
        be->dropout_forward(be, m->eact, m->eln, (size_t)N * D, r.pd, m->seed, STREAM_EMBED);
        if (relu_after_linear(d)) be->relu_forward(be, m->eact, m->eact, (size_t)N * D);
        pin = m->eact;
    } else if (!has_pos_stage(m)) { /* input_layer null without a positional stage */
        if (model_input_dim(d) == D)
            be->copy(be, m->h0, m->x, (size_t)N * D * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
        else
            be->linear_forward(be, m->h0, m->x, m->w.embed.plain.weight, m->w.embed.plain.bias, N,
                               model_input_dim(d), D);
        return;
    }
    if (d->body) { /* the asr_transducer Encoder: its RelPositionalEncoding returns the positions alone */
        be->copy(be, m->h0, pin, (size_t)N * D * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
        return;
    }
    if (d->encoder != ENC_TRANSFORMER && d->rel_pos) /* RelPositionalEncoding: positions go to the attention */
        be->scale(be, m->h0, pin, sqrt((double)D), (size_t)N * D);
    else
        be->posenc_forward(be, m->h0, pin, sqrt((double)D), m->B, m->T2, D);
    be->dropout_forward(be, m->h0, m->h0, (size_t)N * D, r.pp, m->seed, STREAM_POS);
}

void embed_backward(asr_model *m)
{
    const model_dims *d = &m->dims;
    backend *be = m->be;
    int N = m->B * m->T2, D = model_embed_dim(d);
    enc_rates r = enc_rates_of(m);
    if (!has_pos_stage(m)) {
        if (model_input_dim(d) != D)
            be->linear_backward(be, m->dpre, m->g.embed.plain.weight, m->g.embed.plain.bias, m->dh, m->x,
                                m->w.embed.plain.weight, N, model_input_dim(d), D, 0);
        else if (m->dpre)
            be->copy(be, m->dpre, m->dh, (size_t)N * D * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
        return;
    }
    /* h0 = drop(in * sqrt(d) (+ pe)) (h0 = in for the asr_transducer Encoder): m->dh becomes the
     * gradient of the stage's input. */
    if (!d->body) {
        be->dropout_backward(be, m->dh, m->dh, (size_t)N * D, r.pp, m->seed, STREAM_POS);
        be->scale(be, m->dh, m->dh, sqrt((double)D), (size_t)N * D);
    }
    if (m->dpos_in) be->add(be, m->dh, m->dh, m->dpos_in, (size_t)N * D);
    if (m->nconv > 0) {
        conv_stack_backward(m, m->dh);
    } else if (d->input_layer == IN_LINEAR) {
        if (relu_after_linear(d)) be->relu_backward(be, m->dh, m->dh, m->eact, (size_t)N * D);
        be->dropout_backward(be, m->dh, m->dh, (size_t)N * D, r.pd, m->seed, STREAM_EMBED);
        be->layernorm_backward(be, m->dtmp, m->g.embed.norm.weight, m->g.embed.norm.bias, m->dh, m->e,
                               m->w.embed.norm.weight, m->emean, m->erstd, N, D, 0);
        be->linear_backward(be, m->dpre, m->g.embed.linear.weight, m->g.embed.linear.bias, m->dtmp, m->x,
                            m->w.embed.linear.weight, N, model_input_dim(d), D, 0);
    }
}
