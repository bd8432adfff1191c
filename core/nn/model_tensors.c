/* Binds the typed views of core/nn/model_tensors.h: each member's ESPnet2 name is looked up in the
 * parameter table once, when the model is made; the forward and backward then read members. */
#include "core/nn/model_tensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct binder {
    const param_table *t;
    float *base;
    size_t n;             /* floats in base: entries at or past it get NULL */
    unsigned char *named; /* per table entry: some member named it */
    size_t next;          /* where the next search starts: members come mostly in table order */
    tensor_span *span[2]; /* the spans the members bound now extend (NULL: none) */
    int encoder;          /* the kind whose asr_transducer names (t->body) the block bound now has */
} binder;

static void span_add(tensor_span *s, size_t offset, size_t count)
{
    if (!s) return;
    if (s->covered == 0 || offset < s->lo) s->lo = offset;
    if (s->covered == 0 || offset + count > s->hi) s->hi = offset + count;
    s->covered += count;
}

/* "<prefix>.<leaf>" into buf. */
static const char *join(char *buf, size_t cap, const char *prefix, const char *leaf)
{
    int k = snprintf(buf, cap, "%s.%s", prefix, leaf);
    ESP_CHECK(k > 0 && (size_t)k < cap);
    return buf;
}

/* The tensor "<prefix>.<leaf>", or NULL when the model has none (or it is a buffer past b->n). */
static float *at(binder *b, const char *prefix, const char *leaf)
{
    char name[128], body[128];
    join(name, sizeof name, prefix, leaf);
    const param_table *t = b->t;
    if (t->body && param_body_name(name, b->encoder, body, sizeof body)) memcpy(name, body, sizeof name);
    for (size_t k = 0; k < t->n; k++) {
        size_t i = (b->next + k) % t->n;
        if (strcmp(t->items[i].name, name)) continue;
        b->next = i + 1;
        b->named[i] = 1;
        if (t->items[i].offset >= b->n) return NULL;
        for (int k = 0; k < 2; k++) span_add(b->span[k], t->items[i].offset, t->items[i].count);
        return b->base + t->items[i].offset;
    }
    return NULL;
}

static nn_linear linear(binder *b, const char *prefix)
{
    return (nn_linear){at(b, prefix, "weight"), at(b, prefix, "bias")};
}

/* LayerNorm's weight and bias, or the one tensor of the asr_transducer task's other norms (RMSNorm's
 * and ScaleNorm's scale, BasicNorm's eps; core/nn/norm_spec.h) in weight. */
static nn_norm norm(binder *b, const char *prefix)
{
    float *w = at(b, prefix, "weight");
    if (!w) w = at(b, prefix, "scale");
    if (!w) w = at(b, prefix, "eps");
    return (nn_norm){w, at(b, prefix, "bias")};
}

static nn_batchnorm batchnorm(binder *b, const char *prefix)
{
    return (nn_batchnorm){at(b, prefix, "weight"), at(b, prefix, "bias"), at(b, prefix, "running_mean"),
                          at(b, prefix, "running_var"), at(b, prefix, "num_batches_tracked")};
}

static nn_mha mha(binder *b, const char *prefix)
{
    char s[128];
    nn_mha a;
    a.pos_bias_u = at(b, prefix, "pos_bias_u");
    a.pos_bias_v = at(b, prefix, "pos_bias_v");
    a.linear_q = linear(b, join(s, sizeof s, prefix, "linear_q"));
    a.linear_k = linear(b, join(s, sizeof s, prefix, "linear_k"));
    a.linear_v = linear(b, join(s, sizeof s, prefix, "linear_v"));
    a.linear_out = linear(b, join(s, sizeof s, prefix, "linear_out"));
    a.linear_pos = linear(b, join(s, sizeof s, prefix, "linear_pos"));
    return a;
}

static nn_ffn ffn(binder *b, const char *prefix)
{
    char s[128];
    nn_ffn f;
    f.w_1 = linear(b, join(s, sizeof s, prefix, "w_1"));
    f.w_2 = linear(b, join(s, sizeof s, prefix, "w_2"));
    return f;
}

static void bind_embed(binder *b, embed_tensors *e, const model_dims *d)
{
    for (int i = 0; i < 3; i++) {
        char s[64];
        snprintf(s, sizeof s, "encoder.embed.conv.%d", 2 * i);
        e->conv[i] = linear(b, s);
    }
    e->out = linear(b, input_layer_out_name(d->input_layer, d->encoder));
    e->linear = linear(b, "encoder.embed.0");
    e->norm = norm(b, "encoder.embed.1");
    e->plain = linear(b, "encoder.embed");
}

static void bind_enc_block(binder *b, enc_block_tensors *k, const model_dims *dims, int l)
{
    char p[64], s[128];
    model_dims bd = model_block_dims(dims, l);
    const model_dims *d = &bd;
    b->encoder = d->encoder;
    snprintf(p, sizeof p, "encoder.encoders.%d", l);
#define SUB(leaf) join(s, sizeof s, p, leaf)
    k->self_attn = mha(b, SUB(d->encoder == ENC_EBRANCHFORMER ? "attn" : "self_attn"));
    k->cgmlp.channel_proj1 = linear(b, SUB("cgmlp.channel_proj1.0"));
    k->cgmlp.csgu.norm = norm(b, SUB("cgmlp.csgu.norm"));
    k->cgmlp.csgu.conv = linear(b, SUB("cgmlp.csgu.conv"));
    k->cgmlp.csgu.linear = linear(b, SUB("cgmlp.csgu.linear"));
    k->cgmlp.channel_proj2 = linear(b, SUB("cgmlp.channel_proj2"));
    k->feed_forward = ffn(b, SUB("feed_forward"));
    k->feed_forward_macaron = ffn(b, SUB("feed_forward_macaron"));
    k->conv_module.pointwise_conv1 = linear(b, SUB("conv_module.pointwise_conv1"));
    k->conv_module.depthwise_conv = linear(b, SUB("conv_module.depthwise_conv"));
    k->conv_module.norm = batchnorm(b, SUB("conv_module.norm"));
    k->conv_module.pointwise_conv2 = linear(b, SUB("conv_module.pointwise_conv2"));
    /* The contextual block Conformer's attention and feed-forward norms are norm1 and norm2, bound
     * (once) as its Conformer block reads them. */
    k->norm1 = d->ctx_conformer ? (nn_norm){0} : norm(b, SUB("norm1"));
    k->norm2 = d->ctx_conformer ? (nn_norm){0} : norm(b, SUB("norm2"));
    k->norm_ff = norm(b, SUB(d->ctx_conformer ? "norm2" : "norm_ff"));
    k->norm_mha = norm(b, SUB(d->ctx_conformer ? "norm1" : "norm_mha"));
    k->norm_ff_macaron = norm(b, SUB("norm_ff_macaron"));
    k->norm_conv = norm(b, SUB("norm_conv"));
    k->norm_mlp = norm(b, SUB("norm_mlp"));
    k->norm_final = norm(b, SUB("norm_final"));
    k->depthwise_conv_fusion = linear(b, SUB("depthwise_conv_fusion"));
    k->merge_proj = linear(b, SUB("merge_proj"));
    k->conv1d.conv = linear(b, SUB("conv"));
    k->conv1d.bn = batchnorm(b, SUB("bn"));
    k->conv1d.out_pos = linear(b, SUB("out_pos"));
#undef SUB
}

/* The attention decoder's tensors, or a TransformerLM's (its blocks' norm2 as norm3). */
static void bind_decoder(binder *b, decoder_tensors *dt, const model_dims *d)
{
    int lm = d->lm == LM_TRANSFORMER;
    if (d->dec_blocks > 0) dt->blocks = xcalloc((size_t)d->dec_blocks, sizeof *dt->blocks);
    dt->embed = at(b, lm ? "lm.embed" : "decoder.embed.0", "weight");
    if (lm) {
        dt->lm_in = linear(b, "lm.encoder.embed.0");
        dt->lm_in_norm = norm(b, "lm.encoder.embed.1");
    }
    for (int l = 0; l < d->dec_blocks; l++) {
        dec_block_tensors *k = &dt->blocks[l];
        char p[64], s[128];
        snprintf(p, sizeof p, lm ? "lm.encoder.encoders.%d" : "decoder.decoders.%d", l);
        k->self_attn = mha(b, join(s, sizeof s, p, "self_attn"));
        k->src_attn = mha(b, join(s, sizeof s, p, "src_attn"));
        k->feed_forward = ffn(b, join(s, sizeof s, p, "feed_forward"));
        k->norm1 = norm(b, join(s, sizeof s, p, "norm1"));
        if (lm) {
            k->norm3 = norm(b, join(s, sizeof s, p, "norm2"));
        } else {
            k->norm2 = norm(b, join(s, sizeof s, p, "norm2"));
            k->norm3 = norm(b, join(s, sizeof s, p, "norm3"));
        }
    }
    dt->after_norm = norm(b, lm ? "lm.encoder.after_norm" : "decoder.after_norm");
    dt->output_layer = linear(b, lm ? "lm.decoder" : "decoder.output_layer");
}

static void bind_rnn_lm(binder *b, rnn_lm_tensors *r, const model_dims *d)
{
    r->encoder = at(b, "lm.encoder", "weight");
    if (d->lm_layers > 0) r->rnn = xcalloc((size_t)d->lm_layers, sizeof *r->rnn);
    for (int l = 0; l < d->lm_layers; l++) {
        char s[4][32];
        snprintf(s[0], sizeof s[0], "weight_ih_l%d", l), snprintf(s[1], sizeof s[1], "weight_hh_l%d", l);
        snprintf(s[2], sizeof s[2], "bias_ih_l%d", l), snprintf(s[3], sizeof s[3], "bias_hh_l%d", l);
        r->rnn[l] = (lstm_tensors){at(b, "lm.rnn", s[0]), at(b, "lm.rnn", s[1]), at(b, "lm.rnn", s[2]),
                                   at(b, "lm.rnn", s[3])};
    }
    r->decoder = linear(b, "lm.decoder");
}

static void bind_transducer(binder *b, transducer_tensors *tr, const model_dims *d)
{
    tr->embed = at(b, "decoder.embed", "weight");
    tr->rnn = xcalloc((size_t)d->tr_layers, sizeof *tr->rnn);
    for (int l = 0; l < d->tr_layers; l++) {
        char p[48];
        snprintf(p, sizeof p, "decoder.decoder.%d", l);
        tr->rnn[l] = (lstm_tensors){at(b, p, "weight_ih_l0"), at(b, p, "weight_hh_l0"), at(b, p, "bias_ih_l0"),
                                    at(b, p, "bias_hh_l0")};
    }
    tr->lin_enc = linear(b, "joint_network.lin_enc");
    tr->lin_dec = linear(b, "joint_network.lin_dec");
    tr->lin_out = linear(b, "joint_network.lin_out");
    if (d->tr_lm_lin) tr->lm_lin = linear(b, "lm_lin");
}

void model_tensors_bind(model_tensors *v, const param_table *t, const model_dims *d, float *base, size_t n)
{
    memset(v, 0, sizeof *v);
    binder b = {.t = t, .base = base, .n = n, .named = xcalloc(t->n ? t->n : 1, 1), .encoder = t->body_encoder};
    if (d->lm == LM_SEQ_RNN) {
        bind_rnn_lm(&b, &v->rnn_lm, d);
    } else if (d->lm) {
        bind_decoder(&b, &v->decoder, d);
    } else {
        model_spans *sp = &v->spans;
        b.span[0] = &sp->encoder;
        v->preencoder = linear(&b, "preencoder.linear_out");
        bind_embed(&b, &v->embed, d);
        if (d->blocks > 0) {
            v->blocks = xcalloc((size_t)d->blocks, sizeof *v->blocks);
            sp->blocks = xcalloc((size_t)d->blocks, sizeof *sp->blocks);
        }
        for (int l = 0; l < d->blocks; l++) {
            b.span[1] = &sp->blocks[l];
            bind_enc_block(&b, &v->blocks[l], d, l);
        }
        b.span[0] = &sp->heads, b.span[1] = NULL, b.encoder = t->body_encoder;
        v->after_norm = norm(&b, "encoder.after_norm");
        v->conditioning_layer = linear(&b, "encoder.conditioning_layer");
        v->ctc_lo = linear(&b, "ctc.ctc_lo");
        b.span[0] = NULL;
        if (d->dec_blocks > 0) bind_decoder(&b, &v->decoder, d);
        if (model_has_transducer(d)) bind_transducer(&b, &v->transducer, d);
    }
    for (size_t i = 0; i < t->n; i++)
        if (!b.named[i] && t->items[i].offset < n) {
            fprintf(stderr, "espnet3: internal error: parameter %s has no member in core/nn/model_tensors.h\n",
                    t->items[i].name);
            ESP_CHECK(b.named[i]);
        }
    free(b.named);
}

void model_tensors_free(model_tensors *v)
{
    free(v->blocks);
    free(v->spans.blocks);
    free(v->decoder.blocks);
    free(v->rnn_lm.rnn);
    free(v->transducer.rnn);
    memset(v, 0, sizeof *v);
}
