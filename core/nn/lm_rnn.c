/* ESPnet2's SequentialRNNLM (LSTM or GRU) on the backend; see lm_rnn.h. */
#include "core/nn/lm_rnn.h"

#include <stdlib.h>
#include <string.h>

#include "core/nn/gru_seq.h"
#include "core/nn/lstm_seq.h"

/* Dropout sites: streams apart from the encoder's and the decoder's. */
enum { RSTREAM_EMBED = 60000, RSTREAM_BETWEEN = 60001, RSTREAM_OUT = 60100 };

typedef struct rnn_layer {
    float *in;   /* the layer's input (N x in): dropout(embedding) or dropout(the layer below) */
    float *hbuf; /* (N + B) x H: B zero rows (the initial state), then h of every position */
    float *c;    /* N x H (LSTM only) */
    float *act;  /* N x 4H: the activated gates (GRU: r, z, n and the hidden side's n part) */
} rnn_layer;

/* The beam search's states: per slot (hypothesis) and layer, h and c after its prefix (a GRU has
 * no c: NULL). */
typedef struct rnn_states {
    float *h, *c;   /* nl x cap x H */
    int *tokens;    /* host: the prefix of each slot (cap x stride), its length in lens */
    int *lens;
    int cap, stride, used;
} rnn_states;

typedef struct rnn_score {
    rnn_states st[2];
    int prev;
    int new_utterance;
    size_t cap_n;
    float *x, *g, *g2, *hp, *cp, *hn, *cn, *act, *logits; /* one step's work for up to cap_n rows */
} rnn_score;

struct lm_rnn {
    int V, U, H, nl;
    int gru, G;  /* GRU layers (G = 3H) or LSTM (G = 4H) */
    /* The last batch: time-major ids and targets (host, N = L x B). */
    int B, L, train;
    uint64_t seed;
    double ntok;
    int *ids, *ys;
    size_t cap_rows, cap_b;
    int grads;
    rnn_layer *layers;
    int table; /* the last forward ran layer 0's input product through the vocabulary (see layer_input) */
    float *e, *p, *z, *logp, *bias, *tab, *gh; /* gh: a GRU step's hidden side (B x G) */
    float *dlogits, *dh, *dx, *dgates, *dgh, *dtab, *dc[2]; /* dgh: a GRU's hidden-side gradients */
    rnn_score *score;
};

lm_rnn *lm_rnn_new(const asr_model *m)
{
    const model_dims *d = &m->dims;
    ESP_CHECK(d->lm == LM_SEQ_RNN && d->lm_layers > 0 && d->d > 0 && d->lm_embed > 0);
    lm_rnn *r = xcalloc(1, sizeof *r);
    r->V = d->vocab, r->U = d->lm_embed, r->H = d->d, r->nl = d->lm_layers;
    r->gru = d->lm_gru, r->G = rnn_gates(d->lm_gru) * r->H;
    r->layers = xcalloc((size_t)r->nl, sizeof *r->layers);
    return r;
}

#define ALLOC(n) be->alloc(be, (n) * sizeof(float) + 64)

static void free_acts(backend *be, lm_rnn *r)
{
    float **all[] = {&r->e,  &r->p,  &r->z,      &r->logp, &r->bias, &r->tab,   &r->gh,   &r->dlogits,
                     &r->dh, &r->dx, &r->dgates, &r->dgh,  &r->dtab, &r->dc[0], &r->dc[1]};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) be->free(be, *all[i]), *all[i] = NULL;
    for (int l = 0; l < r->nl; l++) {
        rnn_layer *y = &r->layers[l];
        float **ls[] = {&y->in, &y->hbuf, &y->c, &y->act};
        for (size_t i = 0; i < sizeof ls / sizeof *ls; i++) be->free(be, *ls[i]), *ls[i] = NULL;
    }
    r->cap_rows = r->cap_b = 0;
}

static void states_free(backend *be, rnn_states *s)
{
    be->free(be, s->h), be->free(be, s->c);
    free(s->tokens), free(s->lens);
    memset(s, 0, sizeof *s);
}

static void score_free(backend *be, rnn_score *s)
{
    if (!s) return;
    states_free(be, &s->st[0]), states_free(be, &s->st[1]);
    float **w[] = {&s->x, &s->g, &s->g2, &s->hp, &s->cp, &s->hn, &s->cn, &s->act, &s->logits};
    for (size_t i = 0; i < sizeof w / sizeof *w; i++) be->free(be, *w[i]);
    free(s);
}

void lm_rnn_free(backend *be, lm_rnn *r)
{
    if (!r) return;
    free_acts(be, r);
    score_free(be, r->score);
    free(r->layers), free(r->ids), free(r->ys);
    free(r);
}

/* Grows the activations for N = L x B rows of batches of up to B texts (only ever enlarged). */
static void ensure_acts(backend *be, lm_rnn *r, size_t rows, size_t b, int grads)
{
    if (rows <= r->cap_rows && b <= r->cap_b && (r->grads || !grads)) return;
    grads |= r->grads;
    free_acts(be, r);
    size_t U = (size_t)r->U, H = (size_t)r->H, V = (size_t)r->V, G = (size_t)r->G, in_max = U > H ? U : H;
    for (int l = 0; l < r->nl; l++) {
        rnn_layer *y = &r->layers[l];
        y->in = ALLOC(rows * (l == 0 ? U : H));
        y->hbuf = ALLOC((rows + b) * H);
        y->c = r->gru ? NULL : ALLOC(rows * H);
        y->act = ALLOC(rows * 4 * H);
    }
    r->e = ALLOC(rows * U), r->p = ALLOC(rows * G), r->bias = ALLOC(G), r->tab = ALLOC(V * G);
    r->z = ALLOC(rows * H), r->logp = ALLOC(rows * V);
    if (r->gru) r->gh = ALLOC(b * G);
    if (grads) {
        r->dlogits = ALLOC(rows * V), r->dh = ALLOC(rows * H), r->dx = ALLOC(rows * in_max);
        r->dgates = ALLOC(rows * G), r->dtab = ALLOC(V * G), r->dc[0] = ALLOC(b * H), r->dc[1] = ALLOC(b * H);
        if (r->gru) r->dgh = ALLOC(rows * G);
    }
    r->cap_rows = rows, r->cap_b = b, r->grads = grads;
}

void lm_rnn_reserve(asr_model *m, int B, int L)
{
    ensure_acts(m->be, m->rnn, (size_t)B * L, (size_t)B, !m->inference);
}

/* Time-major input and targets: x = <sos/eos> + text padded with 0, y = text + <sos/eos> padded with
 * -1. Returns the number of target tokens. */
static int64_t make_targets(lm_rnn *r, const int *labels, const int *label_lens, int stride, int B)
{
    int lmax = 0, eos = r->V - 1;
    for (int b = 0; b < B; b++) lmax = label_lens[b] > lmax ? label_lens[b] : lmax;
    int L = lmax + 1;
    size_t n = (size_t)B * L;
    r->ids = xrealloc(r->ids, n * sizeof *r->ids);
    r->ys = xrealloc(r->ys, n * sizeof *r->ys);
    int64_t tokens = 0;
    for (int b = 0; b < B; b++) {
        int yl = label_lens[b];
        ESP_CHECK(yl >= 0 && yl <= stride);
        const int *y = labels + (size_t)b * stride;
        for (int t = 0; t < L; t++) {
            size_t row = (size_t)t * B + b;
            if (t < yl) ESP_CHECK(y[t] >= 0 && y[t] < r->V);
            r->ids[row] = t == 0 ? eos : t <= yl ? y[t - 1] : 0;
            r->ys[row] = t < yl ? y[t] : t == yl ? eos : -1;
        }
        tokens += yl + 1;
    }
    r->B = B, r->L = L;
    return tokens;
}

/* Layer l's input products of all positions into r->p: W_ih x + b_ih + b_hh (the recurrence adds
 * W_hh h_{t-1} in place; a GRU's: W_ih x + b_ih, its hidden side kept apart by gru_seq). Layer 0 without dropout on the embedding: x W_ih^T + b is row ids of the
 * table E W_ih^T + b (V x 4H with V the vocabulary, far fewer rows than positions), so the N x U x
 * 4H product becomes a V x U x 4H one and a gather (and in the backward, the gates' gradients summed
 * per token first, the two products of dW_ih and dE likewise: layer_input_backward). */
static void layer_input(asr_model *m, int l)
{
    backend *be = m->be;
    lm_rnn *r = m->rnn;
    int H = r->H, G = r->G, in = l == 0 ? r->U : H;
    size_t N = (size_t)r->B * r->L;
    const lstm_tensors *w = &m->w.rnn_lm.rnn[l];
    const float *bias = w->bias_ih;
    if (!r->gru) be->add(be, r->bias, w->bias_ih, w->bias_hh, (size_t)G), bias = r->bias;
    if (l == 0 && r->table) {
        be->linear_forward(be, r->tab, m->w.rnn_lm.encoder, w->weight_ih, bias, r->V, in, G);
        be->embedding_forward(be, r->p, r->tab, r->ids, (int)N, r->V, G);
    } else {
        be->linear_forward(be, r->p, r->layers[l].in, w->weight_ih, bias, (int)N, in, G);
    }
}

/* One LSTM or GRU layer over all positions: its input -> y->hbuf (h) and (LSTM) y->c. */
static void layer_forward(asr_model *m, int l)
{
    lm_rnn *r = m->rnn;
    rnn_layer *y = &r->layers[l];
    layer_input(m, l);
    lstm_seq_acts a = {y->hbuf, y->c, y->act};
    if (r->gru)
        gru_seq_forward(m->be, &m->w.rnn_lm.rnn[l], r->p, &a, r->gh, r->B, r->L, r->H);
    else
        lstm_seq_forward(m->be, &m->w.rnn_lm.rnn[l], r->p, &a, r->B, r->L, r->H);
}

double lm_rnn_loss(asr_model *m, const int *labels, const int *label_lens, int stride, int B, int train,
                   uint64_t seed, int64_t *correct, int64_t *tokens)
{
    backend *be = m->be;
    lm_rnn *r = m->rnn;
    int64_t ntok = make_targets(r, labels, label_lens, stride, B);
    size_t N = (size_t)B * r->L;
    ensure_acts(be, r, N, (size_t)B, !m->inference);
    r->train = train, r->seed = seed, r->ntok = (double)ntok;
    float p = train ? m->rates.dec_dropout : 0;
    int U = r->U, H = r->H, V = r->V;
    r->table = p == 0;
    if (!r->table) {
        be->embedding_forward(be, r->e, m->w.rnn_lm.encoder, r->ids, (int)N, V, U);
        be->dropout_forward(be, r->layers[0].in, r->e, N * U, p, seed, RSTREAM_EMBED);
    }
    for (int l = 0; l < r->nl; l++) {
        layer_forward(m, l);
        const float *h = r->layers[l].hbuf + (size_t)B * H;
        float *next = l + 1 < r->nl ? r->layers[l + 1].in : r->z;
        be->dropout_forward(be, next, h, N * H, p, seed, l + 1 < r->nl ? RSTREAM_BETWEEN + (uint64_t)l : RSTREAM_OUT);
    }
    be->linear_forward(be, r->logp, r->z, m->w.rnn_lm.decoder.weight, m->w.rnn_lm.decoder.bias, (int)N, H, V);
    be->log_softmax_forward(be, r->logp, r->logp, (int)N, V);
    int64_t hits = 0;
    double sum = be->label_smoothing_forward(be, r->logp, r->ys, (int)N, V, 0.0, &hits);
    *correct = hits, *tokens = ntok;
    return sum / r->ntok;
}

const float *lm_rnn_logp(const asr_model *m) { return m->rnn->logp; }

/* The backward of layer_input: the gradients of W_ih and b_ih (an LSTM's b_hh's is the same sum,
 * taken with W_hh's; a GRU's comes from its hidden side) from r->dgates, and that of the layer's input: into r->dx, or for layer 0 through the
 * vocabulary table straight into the embedding's gradient (r->dx is then untouched). */
static void layer_input_backward(asr_model *m, int l)
{
    backend *be = m->be;
    lm_rnn *r = m->rnn;
    int H = r->H, G = r->G, in = l == 0 ? r->U : H;
    size_t N = (size_t)r->B * r->L;
    const lstm_tensors *w = &m->w.rnn_lm.rnn[l], *gw = &m->g.rnn_lm.rnn[l];
    if (l == 0 && r->table) {
        be->fill(be, r->dtab, 0, (size_t)r->V * G * sizeof(float));
        be->embedding_backward(be, r->dtab, r->dgates, r->ids, (int)N, r->V, G);
        be->linear_backward(be, m->g.rnn_lm.encoder, gw->weight_ih, gw->bias_ih, r->dtab, m->w.rnn_lm.encoder,
                            w->weight_ih, r->V, in, G, 1);
    } else {
        be->linear_backward(be, r->dx, gw->weight_ih, gw->bias_ih, r->dgates, r->layers[l].in, w->weight_ih, (int)N, in,
                            G, 0);
    }
}

/* Backward through time of layer l: r->dh holds the gradient of its h (N x H) on entry (and gathers
 * the recurrent part in place); the gradient of its input lands as layer_input_backward says. */
static void layer_backward(asr_model *m, int l)
{
    lm_rnn *r = m->rnn;
    rnn_layer *y = &r->layers[l];
    lstm_seq_acts a = {y->hbuf, y->c, y->act};
    if (r->gru)
        gru_seq_backward(m->be, &m->w.rnn_lm.rnn[l], &m->g.rnn_lm.rnn[l], r->dgates, r->dgh, r->dh, r->dc[0], &a, r->B,
                         r->L, r->H);
    else
        lstm_seq_backward(m->be, &m->w.rnn_lm.rnn[l], &m->g.rnn_lm.rnn[l], r->dgates, r->dh, r->dc, &a, r->B, r->L,
                          r->H);
    layer_input_backward(m, l);
}

void lm_rnn_backward(asr_model *m, float scale)
{
    ESP_CHECK(!m->inference);
    backend *be = m->be;
    lm_rnn *r = m->rnn;
    int B = r->B, U = r->U, H = r->H, V = r->V;
    size_t N = (size_t)B * r->L;
    float p = r->train ? m->rates.dec_dropout : 0;
    be->label_smoothing_backward(be, r->dlogits, r->logp, r->ys, (int)N, V, 0.0, scale / r->ntok);
    const nn_linear *dec = &m->w.rnn_lm.decoder, *gdec = &m->g.rnn_lm.decoder;
    be->linear_backward(be, r->dh, gdec->weight, gdec->bias, r->dlogits, r->z, dec->weight, (int)N, H, V, 0);
    be->dropout_backward(be, r->dh, r->dh, N * H, p, r->seed, RSTREAM_OUT);
    for (int l = r->nl - 1; l >= 0; l--) {
        layer_backward(m, l);
        if (l > 0)
            be->dropout_backward(be, r->dh, r->dx, N * H, p, r->seed, RSTREAM_BETWEEN + (uint64_t)(l - 1));
    }
    if (r->table) return; /* layer 0's backward gave the embedding's gradient */
    be->dropout_backward(be, r->dx, r->dx, N * U, p, r->seed, RSTREAM_EMBED);
    be->embedding_backward(be, m->g.rnn_lm.encoder, r->dx, r->ids, (int)N, V, U);
}

/* ---- the beam search's step --------------------------------------------------------------------- */

static void ensure_states(backend *be, const lm_rnn *r, rnn_states *s, int n, int stride)
{
    if (n <= s->cap && stride <= s->stride) return;
    states_free(be, s);
    s->cap = n, s->stride = stride + 8;
    size_t floats = (size_t)r->nl * s->cap * r->H;
    s->h = ALLOC(floats), s->c = r->gru ? NULL : ALLOC(floats);
    s->tokens = xcalloc((size_t)s->cap * s->stride, sizeof *s->tokens);
    s->lens = xcalloc((size_t)s->cap, sizeof *s->lens);
}

static float *st_h(const lm_rnn *r, const rnn_states *s, int l, int slot)
{
    return s->h + ((size_t)l * s->cap + slot) * r->H;
}
static float *st_c(const lm_rnn *r, const rnn_states *s, int l, int slot)
{
    return s->c + ((size_t)l * s->cap + slot) * r->H;
}

static void ensure_score_work(backend *be, const lm_rnn *r, rnn_score *s, size_t n)
{
    if (n <= s->cap_n) return;
    float **w[] = {&s->x, &s->g, &s->g2, &s->hp, &s->cp, &s->hn, &s->cn, &s->act, &s->logits};
    for (size_t i = 0; i < sizeof w / sizeof *w; i++) be->free(be, *w[i]);
    size_t U = (size_t)r->U, H = (size_t)r->H, in = U > H ? U : H, states = (size_t)r->nl * n * H;
    s->x = ALLOC(n * in), s->g = ALLOC(n * 4 * H), s->g2 = ALLOC(n * 4 * H), s->act = ALLOC(n * 4 * H);
    s->hp = ALLOC(states), s->hn = ALLOC(states); /* layer-major */
    s->cp = r->gru ? NULL : ALLOC(states), s->cn = r->gru ? NULL : ALLOC(states);
    s->logits = ALLOC(n * (size_t)r->V);
    s->cap_n = n;
}

static void copy_rows(backend *be, float *dst, const float *src, size_t floats)
{
    be->copy(be, dst, src, floats * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
}

/* One step of k rows: tokens ids (host) from states (s->hp / s->cp per layer, layer-major k x H
 * blocks; zero_state: from zeros) into s->hn / s->cn (same layout; a GRU has h alone). */
static void step(const asr_model *m, rnn_score *s, const int *ids, int k, int zero_state)
{
    backend *be = m->be;
    const lm_rnn *r = m->rnn;
    int U = r->U, H = r->H;
    size_t kh = (size_t)k * H;
    ESP_CHECK(!zero_state || k == 1);
    be->embedding_forward(be, s->x, m->w.rnn_lm.encoder, ids, k, r->V, U);
    for (int l = 0; l < r->nl; l++) {
        const float *x = l == 0 ? s->x : s->hn + (l - 1) * kh, *hp = zero_state ? NULL : s->hp + l * kh;
        if (r->gru)
            gru_seq_step(be, &m->w.rnn_lm.rnn[l], x, l == 0 ? U : H, hp, s->hn + l * kh, s->g, s->g2, s->act, k, H);
        else
            lstm_seq_step(be, &m->w.rnn_lm.rnn[l], x, l == 0 ? U : H, hp, zero_state ? NULL : s->cp + l * kh,
                          s->hn + l * kh, s->cn + l * kh, s->g, s->g2, s->act, k, H);
    }
}

/* A slot of the previous call holding exactly the first len - 1 tokens of p, or -1. */
static int find_parent(const rnn_states *s, const int *p, int len)
{
    if (len < 2) return -1;
    for (int e = 0; e < s->used; e++)
        if (s->lens[e] == len - 1 && !memcmp(s->tokens + (size_t)e * s->stride, p, (size_t)(len - 1) * sizeof *p))
            return e;
    return -1;
}

void lm_rnn_score_new_utterance(const asr_model *m)
{
    if (m->rnn && m->rnn->score) m->rnn->score->new_utterance = 1;
}

/* Prefix i's state into slot i of cur: one step from its parent's, or every token from zeros. */
static void score_slow(const asr_model *m, rnn_score *s, rnn_states *cur, const int *p, int len, int slot)
{
    backend *be = m->be;
    const lm_rnn *r = m->rnn;
    int H = r->H;
    for (int t = 0; t < len; t++) {
        if (t) /* the state so far becomes the step's input state */
            for (int l = 0; l < r->nl; l++) {
                copy_rows(be, s->hp + (size_t)l * H, s->hn + (size_t)l * H, (size_t)H);
                if (!r->gru) copy_rows(be, s->cp + (size_t)l * H, s->cn + (size_t)l * H, (size_t)H);
            }
        step(m, s, &p[t], 1, t == 0);
    }
    for (int l = 0; l < r->nl; l++) {
        copy_rows(be, st_h(r, cur, l, slot), s->hn + (size_t)l * H, (size_t)H);
        if (!r->gru) copy_rows(be, st_c(r, cur, l, slot), s->cn + (size_t)l * H, (size_t)H);
    }
}

void lm_rnn_score_batch(const asr_model *m, const int *const *prefixes, const int *lens, int n, float *logp_host)
{
    lm_rnn *r = m->rnn;
    ESP_CHECK(r != NULL && n >= 0);
    if (n == 0) return;
    backend *be = m->be;
    if (!r->score) r->score = xcalloc(1, sizeof *r->score);
    rnn_score *s = r->score;
    if (s->new_utterance) s->st[0].used = s->st[1].used = 0, s->new_utterance = 0;
    rnn_states *prev = &s->st[s->prev], *cur = &s->st[!s->prev];
    int maxlen = 1, H = r->H;
    for (int i = 0; i < n; i++) {
        ESP_CHECK(lens[i] >= 1 && prefixes[i][0] == r->V - 1); /* <sos> first */
        maxlen = lens[i] > maxlen ? lens[i] : maxlen;
    }
    ensure_states(be, r, cur, n, maxlen);
    ensure_score_work(be, r, s, (size_t)n);
    /* The prefixes whose parent the previous call scored: one batched step from the parents' states. */
    int *parent = xmalloc((size_t)n * sizeof *parent), *fast = xmalloc((size_t)n * sizeof *fast), nf = 0;
    int *ids = xmalloc((size_t)n * sizeof *ids);
    for (int i = 0; i < n; i++)
        if ((parent[i] = find_parent(prev, prefixes[i], lens[i])) >= 0) fast[nf] = i, ids[nf++] = prefixes[i][lens[i] - 1];
    if (nf > 0) {
        for (int l = 0; l < r->nl; l++)
            for (int j = 0; j < nf; j++) {
                size_t at = ((size_t)l * nf + j) * H;
                copy_rows(be, s->hp + at, st_h(r, prev, l, parent[fast[j]]), (size_t)H);
                if (!r->gru) copy_rows(be, s->cp + at, st_c(r, prev, l, parent[fast[j]]), (size_t)H);
            }
        step(m, s, ids, nf, 0);
        for (int l = 0; l < r->nl; l++)
            for (int j = 0; j < nf; j++) {
                size_t at = ((size_t)l * nf + j) * H;
                copy_rows(be, st_h(r, cur, l, fast[j]), s->hn + at, (size_t)H);
                if (!r->gru) copy_rows(be, st_c(r, cur, l, fast[j]), s->cn + at, (size_t)H);
            }
    }
    for (int i = 0; i < n; i++)
        if (parent[i] < 0) score_slow(m, s, cur, prefixes[i], lens[i], i);
    for (int i = 0; i < n; i++) {
        cur->lens[i] = lens[i];
        memcpy(cur->tokens + (size_t)i * cur->stride, prefixes[i], (size_t)lens[i] * sizeof *prefixes[i]);
    }
    cur->used = n;
    /* The top layer's h of every slot (slot i = prefix i) -> lm.decoder -> log_softmax. */
    const float *top = st_h(r, cur, r->nl - 1, 0);
    be->linear_forward(be, s->logits, top, m->w.rnn_lm.decoder.weight, m->w.rnn_lm.decoder.bias, n, H, r->V);
    be->log_softmax_forward(be, s->logits, s->logits, n, r->V);
    be->synchronize(be);
    be->copy(be, logp_host, s->logits, (size_t)n * r->V * sizeof(float), BACKEND_DEVICE_TO_HOST);
    be->synchronize(be);
    s->prev = !s->prev;
    free(parent), free(fast), free(ids);
}
