/* ESPnet2's transducer decoder and joint network with the RNN-T loss; see transducer.h. */
#include "core/nn/transducer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/nn/gru_seq.h"
#include "core/nn/lstm_seq.h"

/* Dropout sites: streams apart from the encoder's, the attention decoder's and the LM's. */
enum { TSTREAM_EMBED = 61000, TSTREAM_LAYER = 61001 };

struct transducer_acts {
    int V, H, J, D, nl;
    int E, gru, G;      /* the embedding's width; GRU layers (G = 3H) or LSTM (G = 4H) */
    /* The last batch. */
    int B, T2, U1, tc, train;
    uint64_t seed;
    const float *enc;
    const int *hlens, *labels, *label_lens;
    int stride;
    int *ids;           /* host, time-major U1 x B: the decoder's input */
    size_t cap_n, cap_bt, cap_joint;
    int grads;
    size_t budget;      /* the joint chunk's floats (transducer_set_joint_floats) */
    /* Per layer: its input (x[l]: N x H; x[nl] the decoder's output after the last dropout) and
     * activations. */
    float **x;
    lstm_seq_acts *acts;
    float *e, *bias, *gh, *p, *decp_tm, *decp, *encp, *z, *dz, *logits;
    float *dh, *dx, *dgates, *dgh, *dc[2], *ddecp, *ddecp_tm, *dencp; /* dgh: GRU's hidden side */
    /* The auxiliary LM loss (dims.tr_lm_lin): lm_lin's log-probabilities of the first (U1 - 1) x B
     * decoder rows and their gradient; lm_target (host, those rows) each row's label, -1 past it. */
    float *lm_logp, *lm_dlogits;
    int *lm_target;
    int lm_rows, lm_counted;
    double loss_lm;
    /* The search's steps: device work for up to cap_step rows (layer-major states). */
    size_t cap_step, cap_enc;
    float *s_x, *s_g, *s_g2, *s_act, *s_h, *s_c, *s_hn, *s_cn, *s_dec, *s_ep, *s_dp, *s_z, *s_logp, *s_enc;
    float *s_host; /* a host transpose of the states */
    int *s_ids;
};

transducer_acts *transducer_new(const asr_model *m)
{
    const model_dims *d = &m->dims;
    ESP_CHECK(model_has_transducer(d) && d->tr_hidden > 0 && d->tr_joint > 0);
    transducer_acts *t = xcalloc(1, sizeof *t);
    t->V = d->vocab, t->H = d->tr_hidden, t->J = d->tr_joint, t->D = d->d, t->nl = d->tr_layers;
    t->E = model_tr_embed(d), t->gru = d->tr_gru, t->G = rnn_gates(d->tr_gru) * t->H;
    t->x = xcalloc((size_t)t->nl + 1, sizeof *t->x);
    t->acts = xcalloc((size_t)t->nl, sizeof *t->acts);
    t->budget = TRANSDUCER_JOINT_FLOATS;
    return t;
}

static void free_acts(backend *be, transducer_acts *t)
{
    for (int l = 0; l <= t->nl; l++) be->free(be, t->x[l]), t->x[l] = NULL;
    for (int l = 0; l < t->nl; l++) {
        lstm_seq_acts *a = &t->acts[l];
        be->free(be, a->hbuf), be->free(be, a->c), be->free(be, a->act);
        memset(a, 0, sizeof *a);
    }
    float **all[] = {&t->e,  &t->bias, &t->gh, &t->p,  &t->decp_tm, &t->decp,  &t->encp,     &t->z,
                     &t->dz, &t->logits, &t->dh, &t->dx, &t->dgates, &t->dgh, &t->dc[0], &t->dc[1],
                     &t->ddecp, &t->ddecp_tm, &t->dencp, &t->lm_logp, &t->lm_dlogits};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) be->free(be, *all[i]), *all[i] = NULL;
    t->cap_n = t->cap_bt = t->cap_joint = 0;
}

static void free_step(backend *be, transducer_acts *t)
{
    float **all[] = {&t->s_x, &t->s_g,  &t->s_g2, &t->s_act, &t->s_h,    &t->s_c,  &t->s_hn,
                     &t->s_cn, &t->s_dec, &t->s_ep, &t->s_dp, &t->s_z,  &t->s_logp, &t->s_enc};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) be->free(be, *all[i]), *all[i] = NULL;
    free(t->s_host), free(t->s_ids);
    t->s_host = NULL, t->s_ids = NULL;
    t->cap_step = t->cap_enc = 0;
}

void transducer_free(backend *be, transducer_acts *t)
{
    if (!t) return;
    free_acts(be, t);
    free_step(be, t);
    free(t->x), free(t->acts), free(t->ids), free(t->lm_target);
    free(t);
}

#define ALLOC(n) be->alloc(be, (n) * sizeof(float) + 64)

/* Grows the buffers (only ever enlarged) for N = U1 x B decoder rows of batches of up to B
 * utterances, BT = B x T2 encoder rows and a joint chunk of `joint` nodes. */
static void ensure_acts(backend *be, transducer_acts *t, size_t n, size_t b, size_t bt, size_t joint, int grads,
                        int lm)
{
    if (n <= t->cap_n && bt <= t->cap_bt && joint <= t->cap_joint && (t->grads || !grads)) return;
    grads |= t->grads;
    n = n > t->cap_n ? n : t->cap_n, bt = bt > t->cap_bt ? bt : t->cap_bt;
    joint = joint > t->cap_joint ? joint : t->cap_joint;
    free_acts(be, t);
    size_t H = (size_t)t->H, J = (size_t)t->J, V = (size_t)t->V, G = (size_t)t->G;
    size_t W = (size_t)(t->E > t->H ? t->E : t->H); /* a layer's input or output width */
    for (int l = 0; l <= t->nl; l++) t->x[l] = ALLOC(n * (l ? H : (size_t)t->E));
    for (int l = 0; l < t->nl; l++) {
        lstm_seq_acts *a = &t->acts[l];
        a->hbuf = ALLOC(n * H + b * H), a->c = t->gru ? NULL : ALLOC(n * H), a->act = ALLOC(n * 4 * H);
    }
    t->e = ALLOC(n * (size_t)t->E), t->bias = ALLOC(G), t->p = ALLOC(n * G);
    if (t->gru) t->gh = ALLOC(b * G); /* a step's hidden side */
    t->decp_tm = ALLOC(n * J), t->decp = ALLOC(n * J), t->encp = ALLOC(bt * J);
    t->z = ALLOC(joint * J), t->logits = ALLOC(joint * V);
    if (lm) t->lm_logp = ALLOC(n * V);
    if (lm && grads) t->lm_dlogits = ALLOC(n * V);
    if (grads) {
        t->dz = ALLOC(joint * J), t->dh = ALLOC(n * W), t->dx = ALLOC(n * W), t->dgates = ALLOC(n * G);
        if (t->gru) t->dgh = ALLOC(n * G);
        t->dc[0] = ALLOC(b * H), t->dc[1] = ALLOC(b * H);
        t->ddecp = ALLOC(n * J), t->ddecp_tm = ALLOC(n * J), t->dencp = ALLOC(bt * J);
    }
    t->cap_n = n, t->cap_bt = bt, t->cap_joint = joint, t->grads = grads;
}

/* Frames per joint chunk: all T2 when B x T2 x U1 nodes fit the budget. */
static int chunk_frames(const transducer_acts *t, int B, int T2, int U1)
{
    size_t per_frame = (size_t)B * U1 * (2 * (size_t)t->J + (size_t)t->V);
    size_t tc = t->budget / (per_frame ? per_frame : 1);
    return tc < 1 ? 1 : tc > (size_t)T2 ? T2 : (int)tc;
}

void transducer_set_joint_floats(asr_model *m, size_t floats) { m->tr->budget = floats; }

void transducer_reserve(asr_model *m, int B, int T2, int Lmax)
{
    transducer_acts *t = m->tr;
    int U1 = Lmax + 1, tc = chunk_frames(t, B, T2, U1);
    ensure_acts(m->be, t, (size_t)U1 * B, (size_t)B, (size_t)B * T2, (size_t)B * tc * U1, !m->inference,
                m->dims.tr_lm_lin);
}

/* The decoder's input, time-major: blank, then the labels, padded with blank. */
static void make_ids(transducer_acts *t, const int *labels, const int *label_lens, int stride, int B)
{
    int lmax = 0;
    for (int b = 0; b < B; b++) lmax = label_lens[b] > lmax ? label_lens[b] : lmax;
    t->U1 = lmax + 1;
    t->ids = xrealloc(t->ids, (size_t)t->U1 * B * sizeof *t->ids);
    for (int b = 0; b < B; b++) {
        const int *y = labels + (size_t)b * stride;
        ESP_CHECK(label_lens[b] >= 0 && label_lens[b] <= stride);
        for (int u = 0; u < t->U1; u++) {
            int id = u >= 1 && u <= label_lens[b] ? y[u - 1] : 0;
            ESP_CHECK(id >= 0 && id < t->V);
            t->ids[(size_t)u * B + b] = id;
        }
    }
}

/* The prediction network over all positions: ids -> t->x[nl] (N x H, time-major). */
static void decoder_forward(asr_model *m, transducer_acts *t)
{
    backend *be = m->be;
    int B = t->B, H = t->H, E = t->E, G = t->G, N = t->U1 * B;
    float pe = t->train ? m->rates.tr_dropout_embed : 0, pd = t->train ? m->rates.tr_dropout : 0;
    be->embedding_forward(be, t->e, m->w.transducer.embed, t->ids, N, t->V, E);
    be->dropout_forward(be, t->x[0], t->e, (size_t)N * E, pe, t->seed, TSTREAM_EMBED);
    for (int l = 0; l < t->nl; l++) {
        const lstm_tensors *w = &m->w.transducer.rnn[l];
        int in = l ? H : E;
        if (t->gru) { /* the hidden side's bias stays apart (b_hn inside r * (...)) */
            be->linear_forward(be, t->p, t->x[l], w->weight_ih, w->bias_ih, N, in, G);
            gru_seq_forward(be, w, t->p, &t->acts[l], t->gh, B, t->U1, H);
        } else {
            be->add(be, t->bias, w->bias_ih, w->bias_hh, (size_t)G);
            be->linear_forward(be, t->p, t->x[l], w->weight_ih, t->bias, N, in, G);
            lstm_seq_forward(be, w, t->p, &t->acts[l], B, t->U1, H);
        }
        be->dropout_forward(be, t->x[l + 1], t->acts[l].hbuf + (size_t)B * H, (size_t)N * H, pd, t->seed,
                            TSTREAM_LAYER + (uint64_t)l);
    }
}

/* ESPnet2's true_dist of the auxiliary LM loss (ESPnetASRTransducerModel._calc_lm_loss): eps =
 * smoothing / (V - 1) on every class, 1 - smoothing + eps on the label; it sums to 1 + eps. It is
 * (1 + eps) times label_smoothing_prob's distribution of smoothing / (1 + eps), so with that
 * smoothing the backend's label-smoothing ops give its loss, sum q (log q - logp) =
 * (1 + eps) (KL + log(1 + eps)) per counted row, and its gradient (1 + eps) (softmax - t). */
static double lm_eps(const asr_model *m)
{
    return (double)m->rates.tr_lm_smoothing / (m->dims.vocab - 1);
}

/* The auxiliary LM loss: log_softmax(lm_lin(decoder_out[:, :-1])) against the labels (rows past an
 * utterance's labels, ESPnet2's target 0 there, masked), summed and divided by B. */
static void lm_loss(asr_model *m, transducer_acts *t)
{
    backend *be = m->be;
    int B = t->B, V = t->V, n = (t->U1 - 1) * B;
    t->lm_rows = n, t->lm_counted = 0;
    t->lm_target = xrealloc(t->lm_target, (size_t)(n > 0 ? n : 1) * sizeof *t->lm_target);
    for (int u = 0; u < t->U1 - 1; u++)
        for (int b = 0; b < B; b++) {
            int k = u * B + b, in = u < t->label_lens[b];
            t->lm_target[k] = in ? t->labels[(size_t)b * t->stride + u] : -1;
            t->lm_counted += in;
        }
    if (n == 0) {
        t->loss_lm = 0;
        return;
    }
    const nn_linear *w = &m->w.transducer.lm_lin;
    be->linear_forward(be, t->lm_logp, t->x[t->nl], w->weight, w->bias, n, t->H, V); /* rows u < U1 - 1 first */
    be->log_softmax_forward(be, t->lm_logp, t->lm_logp, n, V);
    double eps = lm_eps(m), s = be->label_smoothing_forward(be, t->lm_logp, t->lm_target, n, V,
                                                           m->rates.tr_lm_smoothing / (1 + eps), NULL);
    t->loss_lm = (1 + eps) * (s + t->lm_counted * log1p(eps)) / B;
}

double transducer_lm_loss(const asr_model *m) { return m->dims.tr_lm_lin ? m->tr->loss_lm : NAN; }

/* The auxiliary LM loss' backward (scaled by dloss) into lm_lin's gradients and added to t->dh. */
static void lm_backward(asr_model *m, transducer_acts *t, float dloss)
{
    if (t->lm_rows == 0) return;
    backend *be = m->be;
    int n = t->lm_rows, V = t->V;
    double eps = lm_eps(m);
    be->label_smoothing_backward(be, t->lm_dlogits, t->lm_logp, t->lm_target, n, V,
                                 m->rates.tr_lm_smoothing / (1 + eps), dloss * (1 + eps) / t->B);
    const nn_linear *w = &m->w.transducer.lm_lin, *g = &m->g.transducer.lm_lin;
    be->linear_backward(be, t->dh, g->weight, g->bias, t->lm_dlogits, t->x[t->nl], w->weight, n, t->H, V, 1);
}

/* The joint's logits of frames [t0, t0 + tc) into t->logits (B, tc, U1, V), its activations in t->z. */
static void joint_chunk(asr_model *m, transducer_acts *t, int t0, int tc)
{
    backend *be = m->be;
    be->joint_tanh_forward(be, t->z, t->encp, t->decp, t->B, t->T2, t0, tc, t->U1, t->J);
    const nn_linear *o = &m->w.transducer.lin_out;
    be->linear_forward(be, t->logits, t->z, o->weight, o->bias, t->B * tc * t->U1, t->J, t->V);
}

double transducer_loss(asr_model *m, const float *enc, int B, int T2, const int *labels, const int *label_lens,
                       int stride, int train, uint64_t seed)
{
    backend *be = m->be;
    transducer_acts *t = m->tr;
    make_ids(t, labels, label_lens, stride, B);
    t->B = B, t->T2 = T2, t->train = train, t->seed = seed, t->enc = enc, t->hlens = m->hlens;
    t->labels = labels, t->label_lens = label_lens, t->stride = stride;
    t->tc = chunk_frames(t, B, T2, t->U1);
    int U1 = t->U1, N = U1 * B, J = t->J;
    ensure_acts(be, t, (size_t)N, (size_t)B, (size_t)B * T2, (size_t)B * t->tc * U1, !m->inference,
                m->dims.tr_lm_lin);
    decoder_forward(m, t);
    if (m->dims.tr_lm_lin) lm_loss(m, t);
    const transducer_tensors *w = &m->w.transducer;
    be->linear_forward(be, t->decp_tm, t->x[t->nl], w->lin_dec.weight, w->lin_dec.bias, N, t->H, J);
    be->swap12(be, t->decp, t->decp_tm, 1, U1, B, J); /* (U1, B, J) -> (B, U1, J) */
    be->linear_forward(be, t->encp, enc, w->lin_enc.weight, w->lin_enc.bias, B * T2, t->D, J);
    for (int t0 = 0; t0 < T2; t0 += t->tc) {
        int tc = T2 - t0 < t->tc ? T2 - t0 : t->tc;
        joint_chunk(m, t, t0, tc);
        be->rnnt_logprobs(be, t->logits, t->hlens, labels, label_lens, stride, B, T2, U1, t->V, 0, t0, tc);
    }
    return be->rnnt_loss_forward(be, NULL, t->hlens, label_lens, B, T2, U1);
}

/* The prediction network's backward from t->dh (N x H: the gradient of its output). */
static void decoder_backward(asr_model *m, transducer_acts *t)
{
    backend *be = m->be;
    int B = t->B, H = t->H, E = t->E, G = t->G, N = t->U1 * B;
    float pe = t->train ? m->rates.tr_dropout_embed : 0, pd = t->train ? m->rates.tr_dropout : 0;
    for (int l = t->nl - 1; l >= 0; l--) {
        const lstm_tensors *w = &m->w.transducer.rnn[l], *g = &m->g.transducer.rnn[l];
        be->dropout_backward(be, t->dh, t->dh, (size_t)N * H, pd, t->seed, TSTREAM_LAYER + (uint64_t)l);
        if (t->gru)
            gru_seq_backward(be, w, g, t->dgates, t->dgh, t->dh, t->dc[0], &t->acts[l], B, t->U1, H);
        else
            lstm_seq_backward(be, w, g, t->dgates, t->dh, t->dc, &t->acts[l], B, t->U1, H);
        be->linear_backward(be, t->dx, g->weight_ih, g->bias_ih, t->dgates, t->x[l], w->weight_ih, N, l ? H : E, G,
                            0);
        float *s = t->dh;
        t->dh = t->dx, t->dx = s; /* the layer below's output gradient */
    }
    be->dropout_backward(be, t->dh, t->dh, (size_t)N * E, pe, t->seed, TSTREAM_EMBED);
    be->embedding_backward(be, m->g.transducer.embed, t->dh, t->ids, N, t->V, E);
    /* padding_idx 0: torch gives the blank's row no gradient (it is the decoder's first input). */
    be->fill(be, m->g.transducer.embed, 0, (size_t)E * sizeof(float));
}

void transducer_backward(asr_model *m, float *denc, int acc, float dloss_total)
{
    float dloss = dloss_total * m->rates.tr_weight;
    ESP_CHECK(!m->inference);
    backend *be = m->be;
    transducer_acts *t = m->tr;
    int B = t->B, T2 = t->T2, U1 = t->U1, N = U1 * B, J = t->J, V = t->V;
    const transducer_tensors *w = &m->w.transducer, *g = &m->g.transducer;
    be->fill(be, t->dencp, 0, (size_t)B * T2 * J * sizeof(float));
    be->fill(be, t->ddecp, 0, (size_t)N * J * sizeof(float));
    for (int t0 = 0; t0 < T2; t0 += t->tc) {
        int tc = T2 - t0 < t->tc ? T2 - t0 : t->tc, rows = B * tc * U1;
        if (t->tc < T2) joint_chunk(m, t, t0, tc); /* the forward's last chunk is still there otherwise */
        be->rnnt_loss_backward(be, t->logits, t->logits, t->hlens, t->labels, t->label_lens, t->stride, B, T2, U1, V,
                               0, t0, tc, m->rates.tr_fastemit, 0.0f, dloss);
        be->linear_backward(be, t->dz, g->lin_out.weight, g->lin_out.bias, t->logits, t->z, w->lin_out.weight, rows, J,
                            V, 0);
        be->joint_tanh_backward(be, t->dencp, t->ddecp, t->dz, t->z, B, T2, t0, tc, U1, J);
    }
    be->linear_backward(be, denc, g->lin_enc.weight, g->lin_enc.bias, t->dencp, t->enc, w->lin_enc.weight, B * T2,
                        t->D, J, acc);
    be->swap12(be, t->ddecp_tm, t->ddecp, 1, B, U1, J); /* (B, U1, J) -> (U1, B, J) */
    be->linear_backward(be, t->dh, g->lin_dec.weight, g->lin_dec.bias, t->ddecp_tm, t->x[t->nl], w->lin_dec.weight, N,
                        t->H, J, 0);
    if (m->dims.tr_lm_lin) lm_backward(m, t, dloss_total * m->rates.tr_lm_weight);
    decoder_backward(m, t);
}

/* ---- decoding --------------------------------------------------------------------------------- */

static void ensure_step(backend *be, transducer_acts *t, size_t n, size_t T)
{
    if (T > t->cap_enc) {
        be->free(be, t->s_enc);
        t->s_enc = ALLOC(T * (size_t)t->J);
        t->cap_enc = T;
    }
    if (n <= t->cap_step) return;
    size_t enc_cap = t->cap_enc;
    float *enc = t->s_enc;
    t->s_enc = NULL;
    free_step(be, t);
    t->s_enc = enc, t->cap_enc = enc_cap;
    size_t H = (size_t)t->H, J = (size_t)t->J, V = (size_t)t->V, st = (size_t)t->nl * n * H;
    t->s_x = ALLOC(n * (size_t)t->E), t->s_g = ALLOC(n * 4 * H), t->s_g2 = ALLOC(n * 4 * H);
    t->s_act = ALLOC(n * 4 * H);
    t->s_h = ALLOC(st), t->s_hn = ALLOC(st);
    if (!t->gru) t->s_c = ALLOC(st), t->s_cn = ALLOC(st); /* a GRU has no cell state */
    t->s_dec = ALLOC(n * H), t->s_ep = ALLOC(n * J), t->s_dp = ALLOC(n * J), t->s_z = ALLOC(n * J);
    t->s_logp = ALLOC(n * V);
    t->s_host = xmalloc(st * sizeof *t->s_host);
    t->s_ids = xmalloc(n * sizeof *t->s_ids);
    t->cap_step = n;
}

void transducer_enc_proj(asr_model *m, const float *enc, int T, float *encp)
{
    backend *be = m->be;
    transducer_acts *t = m->tr;
    ensure_step(be, t, 1, (size_t)T);
    const nn_linear *w = &m->w.transducer.lin_enc;
    be->linear_forward(be, t->s_enc, enc, w->weight, w->bias, T, t->D, t->J);
    be->synchronize(be);
    be->copy(be, encp, t->s_enc, (size_t)T * t->J * sizeof(float), BACKEND_DEVICE_TO_HOST);
    be->synchronize(be);
}

/* Host states (n, layers, H) <-> device (layers, n, H): each layer's rows together for its step. */
static void states_to_device(backend *be, transducer_acts *t, float *dst, const float *src, int n)
{
    size_t H = (size_t)t->H;
    for (int i = 0; i < n; i++)
        for (int l = 0; l < t->nl; l++)
            memcpy(t->s_host + ((size_t)l * n + i) * H, src + ((size_t)i * t->nl + l) * H, H * sizeof(float));
    be->copy(be, dst, t->s_host, (size_t)t->nl * n * H * sizeof(float), BACKEND_HOST_TO_DEVICE);
}

static void states_to_host(backend *be, transducer_acts *t, float *dst, const float *src, int n)
{
    size_t H = (size_t)t->H;
    be->copy(be, t->s_host, src, (size_t)t->nl * n * H * sizeof(float), BACKEND_DEVICE_TO_HOST);
    for (int i = 0; i < n; i++)
        for (int l = 0; l < t->nl; l++)
            memcpy(dst + ((size_t)i * t->nl + l) * H, t->s_host + ((size_t)l * n + i) * H, H * sizeof(float));
}

void transducer_dec_step(asr_model *m, const int *labels, const float *h, const float *c, int n, float *dec_out,
                         float *h_out, float *c_out)
{
    if (n <= 0) return;
    backend *be = m->be;
    transducer_acts *t = m->tr;
    ensure_step(be, t, (size_t)n, 1);
    size_t H = (size_t)t->H, kh = (size_t)n * H;
    memcpy(t->s_ids, labels, (size_t)n * sizeof *labels);
    be->embedding_forward(be, t->s_x, m->w.transducer.embed, t->s_ids, n, t->V, t->E);
    if (t->nl == 0) { /* StatelessDecoder: the embedding is the output; no state */
        be->synchronize(be);
        be->copy(be, dec_out, t->s_x, kh * sizeof(float), BACKEND_DEVICE_TO_HOST);
        be->synchronize(be);
        return;
    }
    states_to_device(be, t, t->s_h, h, n);
    if (!t->gru) states_to_device(be, t, t->s_c, c, n);
    for (int l = 0; l < t->nl; l++) {
        const float *x = l == 0 ? t->s_x : t->s_hn + (l - 1) * kh;
        int in = l == 0 ? t->E : t->H;
        if (t->gru)
            gru_seq_step(be, &m->w.transducer.rnn[l], x, in, t->s_h + l * kh, t->s_hn + l * kh, t->s_g, t->s_g2,
                         t->s_act, n, t->H);
        else
            lstm_seq_step(be, &m->w.transducer.rnn[l], x, in, t->s_h + l * kh, t->s_c + l * kh, t->s_hn + l * kh,
                          t->s_cn + l * kh, t->s_g, t->s_g2, t->s_act, n, t->H);
    }
    be->synchronize(be);
    be->copy(be, dec_out, t->s_hn + (size_t)(t->nl - 1) * kh, kh * sizeof(float), BACKEND_DEVICE_TO_HOST);
    states_to_host(be, t, h_out, t->s_hn, n);
    if (t->gru) /* no cell state: the search's c stays zeros */
        memset(c_out, 0, (size_t)t->nl * kh * sizeof(float));
    else
        states_to_host(be, t, c_out, t->s_cn, n);
    be->synchronize(be);
}

void transducer_joint_logp(asr_model *m, const float *encp, const float *dec_out, int n, float *logp)
{
    if (n <= 0) return;
    backend *be = m->be;
    transducer_acts *t = m->tr;
    ensure_step(be, t, (size_t)n, 1);
    const transducer_tensors *w = &m->w.transducer;
    be->copy(be, t->s_dec, dec_out, (size_t)n * t->H * sizeof(float), BACKEND_HOST_TO_DEVICE);
    be->copy(be, t->s_ep, encp, (size_t)n * t->J * sizeof(float), BACKEND_HOST_TO_DEVICE);
    be->linear_forward(be, t->s_dp, t->s_dec, w->lin_dec.weight, w->lin_dec.bias, n, t->H, t->J);
    /* n rows of one frame each: B = n utterances of one frame and one prefix */
    be->joint_tanh_forward(be, t->s_z, t->s_ep, t->s_dp, n, 1, 0, 1, 1, t->J);
    be->linear_forward(be, t->s_logp, t->s_z, w->lin_out.weight, w->lin_out.bias, n, t->J, t->V);
    be->log_softmax_forward(be, t->s_logp, t->s_logp, n, t->V);
    be->synchronize(be);
    be->copy(be, logp, t->s_logp, (size_t)n * t->V * sizeof(float), BACKEND_DEVICE_TO_HOST);
    be->synchronize(be);
}
