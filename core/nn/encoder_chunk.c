/* Encoder.chunk_forward (see encoder_chunk.h): the input block and the trim, the blocks over the
 * chunk with m->stream_chunk set, and what each block keeps between chunks: the attention's left
 * context, and the causal convolutions' last inputs. */
#include "core/nn/encoder_chunk.h"

#include <stdlib.h>
#include <string.h>

#include "core/nn/encoder.h"
#include "core/nn/mha_input.h"

struct enc_chunk {
    asr_model *m;
    int left;     /* left_context */
    int have;     /* frames of left context each block holds (min(left, frames encoded so far)) */
    int kept;     /* what they hold after the chunk in progress */
    float **ctx;  /* per block: the attention inputs of its last `have` frames (device, left x d) */
    /* per block and DWCONV_*: a causal convolution's last k - 1 inputs (device, (k - 1) x c; zeros
     * at the start of the stream; allocated at its first chunk) and their floats */
    float **conv;
    size_t *conv_n;
    float *cx, *cy; /* a causal convolution's input after its cache, and its output (device) */
    size_t cap_c;
    /* this chunk's work (device), for t = have + the chunk's frames: the attention's rows and the
     * relative encoding of t positions */
    float *xe, *ln, *mean, *rstd, *q, *k, *v, *pl, *att, *atty, *pos, *feats;
    size_t cap_t, cap_f;
};

enc_chunk *enc_chunk_open(asr_model *m, int left_context, esp_err *err)
{
    const model_dims *d = &m->dims;
    if (!d->body || !m->tr) {
        esp_fail(err, "streaming decoding (streaming: true) is the asr_transducer task's; this model is not one "
                      "(a contextual block model streams with transcribe --stream alone)");
        return NULL;
    }
    for (int g = 0; g < d->n_groups; g++)
        if (d->group[g].encoder == ENC_CONV1D) {
            esp_fail(err, "streaming decoding of an encoder with conv1d blocks is not built (ESPnet2's "
                          "Conv1d.chunk_forward keeps kernel_size - 1 frames whatever its stride or padding)");
            return NULL;
        }
    enc_chunk *c = xcalloc(1, sizeof *c);
    c->m = m, c->left = left_context;
    c->ctx = xcalloc((size_t)d->blocks, sizeof *c->ctx);
    for (int l = 0; l < d->blocks && left_context > 0; l++)
        c->ctx[l] = m->be->alloc(m->be, (size_t)left_context * d->d * sizeof(float));
    c->conv = xcalloc((size_t)d->blocks * 2, sizeof *c->conv);
    c->conv_n = xcalloc((size_t)d->blocks * 2, sizeof *c->conv_n);
    return c;
}

void enc_chunk_reset(enc_chunk *c)
{
    c->have = c->kept = 0;
    backend *be = c->m->be; /* reset_streaming_cache's zeros */
    for (int i = 0; i < 2 * c->m->dims.blocks; i++)
        if (c->conv[i]) be->fill(be, c->conv[i], 0, c->conv_n[i] * sizeof(float));
}

static void free_work(enc_chunk *c)
{
    backend *be = c->m->be;
    float **all[] = {&c->xe, &c->ln, &c->mean, &c->rstd, &c->q, &c->k, &c->v, &c->pl, &c->att, &c->atty, &c->pos};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) be->free(be, *all[i]), *all[i] = NULL;
}

void enc_chunk_close(enc_chunk *c)
{
    if (!c) return;
    backend *be = c->m->be;
    free_work(c);
    be->free(be, c->feats);
    for (int l = 0; l < c->m->dims.blocks; l++) be->free(be, c->ctx[l]);
    for (int i = 0; i < 2 * c->m->dims.blocks; i++) be->free(be, c->conv[i]);
    be->free(be, c->cx), be->free(be, c->cy);
    free(c->ctx), free(c->conv), free(c->conv_n);
    free(c);
}

/* The attention's work for t rows (m->dims: the largest heads of the blocks). */
static void ensure_work(enc_chunk *c, size_t t)
{
    if (t <= c->cap_t) return;
    free_work(c);
    backend *be = c->m->be;
    size_t D = (size_t)c->m->dims.d, H = (size_t)c->m->dims.heads;
#define A(n) be->alloc(be, (n) * sizeof(float) + 64)
    c->xe = A(t * D), c->ln = A(t * D), c->mean = A(t), c->rstd = A(t), c->q = A(t * D), c->k = A(t * D);
    c->v = A(t * D), c->pl = A((2 * t - 1) * D), c->att = A(H * t * t), c->atty = A(t * D), c->pos = A((2 * t - 1) * D);
#undef A
    c->cap_t = t;
}

void enc_attn_chunk_forward(asr_model *m, int l, const float *x, float *out, int t)
{
    enc_chunk *c = m->stream_chunk;
    backend *be = m->be;
    const model_dims *d = &m->dims; /* block l's own (encoder_body.c's enter) */
    const nn_mha *a = &m->w.blocks[l].self_attn;
    int D = d->d, h = c->have, n = h + t;
    size_t row = (size_t)D * sizeof(float);
    if (h) be->copy(be, c->xe, c->ctx[l], (size_t)h * row, BACKEND_DEVICE_TO_DEVICE);
    be->copy(be, c->xe + (size_t)h * D, x, (size_t)t * row, BACKEND_DEVICE_TO_DEVICE);
    mha_input_forward(be, a, &d->norm, &m->w.blocks[l].norm_mha, c->xe, c->ln, c->mean, c->rstd, c->q, c->k, c->v, n, D);
    be->linear_forward(be, c->pl, c->pos, a->linear_pos.weight, a->linear_pos.bias, 2 * n - 1, D, enc_pos_cols(d));
    be->relattn_forward(be, c->atty, c->att, c->q, c->k, c->v, D, c->pl, a->pos_bias_u, a->pos_bias_v, &n, 1, n,
                        d->heads, D / d->heads, 0, 0, 0, 0, 0); /* no chunk mask: the cache is the context */
    be->linear_forward(be, out, c->atty + (size_t)h * D, a->linear_out.weight, a->linear_out.bias, t, D, D);
    /* the last left_context attention inputs, for the next chunk (att_cache) */
    int keep = n < c->left ? n : c->left;
    if (keep) be->copy(be, c->ctx[l], c->xe + (size_t)(n - keep) * D, (size_t)keep * row, BACKEND_DEVICE_TO_DEVICE);
    c->kept = keep;
}

/* ConformerConvolution / ConvolutionalSpatialGatingUnit / DepthwiseConvolution.forward with a
 * cache and lorder k - 1: x = cat([cache, x]); cache = x[-(k - 1):]; the convolution without
 * padding. The symmetric op over those t + k - 1 rows gives it in its outputs (k - 1) / 2 on. */
void enc_dwconv_chunk_forward(asr_model *m, int l, int conv, float *y, const float *x, const float *w,
                              const float *b, int t, int c, int k)
{
    enc_chunk *s = m->stream_chunk;
    backend *be = m->be;
    size_t row = (size_t)c * sizeof(float), lo = (size_t)(k - 1), n = (size_t)t + lo;
    float **cache = &s->conv[2 * l + conv];
    if (!*cache) {
        s->conv_n[2 * l + conv] = lo * c;
        *cache = be->alloc(be, lo * row + 64);
        be->fill(be, *cache, 0, lo * row);
    }
    if (n * c > s->cap_c) {
        be->free(be, s->cx), be->free(be, s->cy);
        s->cx = be->alloc(be, n * row + 64), s->cy = be->alloc(be, n * row + 64), s->cap_c = n * c;
    }
    be->copy(be, s->cx, *cache, lo * row, BACKEND_DEVICE_TO_DEVICE);
    be->copy(be, s->cx + lo * c, x, (size_t)t * row, BACKEND_DEVICE_TO_DEVICE);
    be->dwconv1d_forward(be, s->cy, s->cx, w, b, 1, (int)n, c, k);
    be->copy(be, y, s->cy + lo / 2 * c, (size_t)t * row, BACKEND_DEVICE_TO_DEVICE);
    be->copy(be, *cache, s->cx + (size_t)t * c, lo * row, BACKEND_DEVICE_TO_DEVICE);
}

int enc_chunk_forward(enc_chunk *c, const float *feats, int T, const float **out)
{
    asr_model *m = c->m;
    backend *be = m->be;
    size_t D = (size_t)m->dims.d, nf = (size_t)T * m->dims.idim;
    if (nf > c->cap_f) {
        be->free(be, c->feats);
        c->feats = be->alloc(be, nf * sizeof(float) + 64), c->cap_f = nf;
    }
    be->copy(be, c->feats, feats, nf * sizeof(float), BACKEND_HOST_TO_DEVICE);
    asr_model_embed(m, c->feats, 1, T);
    int t = m->T2 - 2; /* x[:, 1:-1] */
    if (t <= 0) return 0;
    be->copy(be, m->dtmp, m->h0 + D, (size_t)t * D * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
    be->copy(be, m->h0, m->dtmp, (size_t)t * D * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
    if (!m->hlens) m->hlens = xmalloc(sizeof *m->hlens); /* the model's (asr_model_embed sets no lengths) */
    m->T2 = t, m->hlens[0] = t;
    ensure_work(c, (size_t)(c->have + t));
    be->relpos_encoding(be, c->pos, c->have + t, (int)D);
    m->stream_chunk = c;
    *out = asr_model_encode_blocks(m);
    m->stream_chunk = NULL;
    c->have = c->kept;
    return t;
}
