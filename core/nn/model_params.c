#include "core/nn/model_params.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/rng.h"
#include "core/compute/ops.h"
#include "core/nn/body_conf.h"
#include "core/nn/decoder_conf.h"

/* ---- input layers ---------------------------------------------------------------------------- */

int input_layer_convs(int kind, input_conv *out)
{
    static const input_conv c3s2 = {3, 2}, c3s1 = {3, 1}, c5s3 = {5, 3};
    switch (kind) {
    case IN_CONV2D: out[0] = c3s2, out[1] = c3s2; return 2;
    case IN_CONV2D2: out[0] = c3s2, out[1] = c3s1; return 2;
    case IN_CONV2D6: out[0] = c3s2, out[1] = c5s3; return 2;
    case IN_CONV2D8: out[0] = c3s2, out[1] = c3s2, out[2] = c3s2; return 3;
    case IN_CONV1D2: out[0] = c3s1, out[1] = c3s2; return 2;
    default: return 0;
    }
}

static int conv_len(int n, input_conv c) { return n < c.k ? 0 : (n - c.k) / c.s + 1; }

int input_layer_out_len(int kind, int t)
{
    input_conv c[3];
    int n = input_layer_convs(kind, c);
    for (int i = 0; i < n; i++) t = conv_len(t, c[i]);
    return t;
}

int input_layer_subsampling(int kind)
{
    input_conv c[3];
    int n = input_layer_convs(kind, c), f = 1;
    for (int i = 0; i < n; i++) f *= c[i].s;
    return f;
}

int input_layer_out_bins(int kind, int idim)
{
    input_conv c[3];
    int n = input_layer_convs(kind, c);
    if (n == 0) return 0;
    if (kind == IN_CONV1D2) return 1;
    for (int i = 0; i < n; i++) idim = conv_len(idim, c[i]);
    return idim;
}

int model_block_group(const model_dims *d, int l)
{
    int g = 0;
    for (int first = 0; g + 1 < d->n_groups && l >= first + d->group[g].blocks; g++) first += d->group[g].blocks;
    return g;
}

model_dims model_block_dims(const model_dims *d, int l)
{
    model_dims b = *d;
    if (d->n_groups > 1) {
        const struct model_group *g = &d->group[model_block_group(d, l)];
        b.encoder = g->encoder, b.heads = g->heads, b.ff = g->ff, b.cnn_kernel = g->cnn_kernel;
        b.use_cnn = g->use_cnn, b.use_ffn = g->use_ffn, b.cgmlp_units = g->cgmlp_units;
        b.cgmlp_kernel = g->cgmlp_kernel, b.merge_kernel = g->merge_kernel;
        b.norm = g->norm, b.csgu_norm = g->csgu_norm;
        if (g->d) b.d = g->d;
    }
    return b;
}

int model_block_in_dim(const model_dims *d, int l)
{
    return l == 0 ? model_embed_dim(d) : model_block_dims(d, l - 1).d;
}

int model_max_width(const model_dims *d)
{
    int w = d->d > model_embed_dim(d) ? d->d : model_embed_dim(d);
    for (int g = 0; g < d->n_groups; g++) w = d->group[g].d > w ? d->group[g].d : w;
    return w;
}

const struct model_group *model_block_group_of(const model_dims *d, int l)
{
    return d->n_groups > 1 ? &d->group[model_block_group(d, l)] : NULL;
}

int model_encoder_frames(const model_dims *d, int t)
{
    for (int l = 0; d->n_groups > 1 && l < d->blocks; l++) {
        const struct model_group *g = &d->group[model_block_group(d, l)];
        if (g->encoder != ENC_CONV1D) continue;
        if (t <= g->c1_dilation * (g->cnn_kernel - 1)) return 0;
        t = ops_conv1d_gen_len(t, g->cnn_kernel, g->c1_stride, g->c1_dilation);
    }
    return t;
}

const char *input_layer_name(int kind)
{
    static const char *const names[] = {"conv2d", "conv2d2", "conv2d6", "conv2d8", "conv1d2", "linear", "null"};
    return kind >= 0 && kind <= IN_NONE ? names[kind] : "?";
}

const char *input_layer_out_name(int kind, int encoder)
{
    return kind == IN_CONV2D8 || encoder == ENC_CONTEXTUAL ? "encoder.embed.out" : EMBED_OUT_SEQ;
}

int model_dims_from_cfg(model_dims *out, const model_cfg *m, int idim, int vocab, esp_err *err)
{
    const encoder_conf_cfg *e = m ? m->encoder_conf : NULL;
    *out = (model_dims){0};
    out->idim = idim;
    out->d = e && e->output_size ? (int)e->output_size : 256;
    out->heads = e && e->attention_heads ? (int)e->attention_heads : 4;
    out->ff = e && e->linear_units ? (int)e->linear_units : 2048;
    out->blocks = e && e->num_blocks ? (int)e->num_blocks : 6;
    out->vocab = vocab;
    if (m && m->preencoder) { /* ESPnet2's LinearProjection (the only kind the schema lets through) */
        const preencoder_conf_cfg *pc = m->preencoder_conf;
        if (!pc || pc->output_size <= 0)
            return esp_fail(err, "model.preencoder_conf.output_size: missing (the width linear projects the features to)");
        if (pc->input_size && pc->input_size != idim)
            return esp_fail(err, "model.preencoder_conf.input_size: %lld, but the features have %d dimensions (n_mels)",
                            (long long)pc->input_size, idim);
        out->pre_in = idim, out->pre_out = (int)pc->output_size;
        idim = out->pre_out; /* what the input layer sees */
    }
    if (body_in_cfg(m)) {
        if (m->preencoder) return esp_fail(err, "model.preencoder: the asr_transducer task has none");
        if (body_dims_from_cfg(out, m, err) != 0) return -1;
    } else if (body_only_key(m)) {
        return esp_fail(err, "model.%s: the asr_transducer task's (a model with encoder_conf.body_conf); the ASR "
                             "task's model does not take it", body_only_key(m));
    } else if (encoder_dims_from_cfg(out, m, err) != 0) {
        return -1;
    }
    if (out->d <= 0 || out->heads <= 0 || out->d % out->heads)
        return esp_fail(err, "model.encoder_conf: output_size %d must be a positive multiple of attention_heads %d",
                        out->d, out->heads);
    if (out->ff <= 0 || out->blocks <= 0)
        return esp_fail(err, "model.encoder_conf: linear_units and num_blocks must be positive");
    int kind = out->input_layer;
    if (kind <= IN_CONV2D8 && input_layer_out_bins(kind, idim) < 1) /* the conv2d* layers */
        return esp_fail(err, "model.frontend_conf.n_mels: %d is too small for input_layer %s (>= %d)", idim,
                        input_layer_name(kind), kind == IN_CONV2D6 ? 11 : kind == IN_CONV2D8 ? 15 : 7);
    if (kind == IN_NONE && out->encoder == ENC_CONFORMER && idim != out->d)
        return esp_fail(err, "model.encoder_conf.input_layer: null (the positional encoding alone) needs the feature "
                             "dimension %d to equal output_size %d", idim, out->d);
    if (kind == IN_NONE && out->encoder == ENC_EBRANCHFORMER && idim != out->d && out->rel_pos)
        return esp_fail(err, "model.encoder_conf.input_layer: null with feature dimension %d != output_size %d is a "
                             "plain Linear without the relative positions rel_pos attention needs (ESPnet2 fails on "
                             "it): use abs_pos, or n_mels = output_size", idim, out->d);
    if (vocab < 2) return esp_fail(err, "token list has %d tokens; the CTC layer needs at least 2", vocab);
    out->f2 = input_layer_out_bins(kind, idim);
    if (!out->body && decoder_dims_from_cfg(out, m, err) != 0) return -1;
    if (!out->body && interctc_dims_from_cfg(out, m, err) != 0) return -1;
    return model_dims_check_size(out, err);
}

int model_dims_check_size(const model_dims *d, esp_err *err)
{
    param_table t;
    param_table_build(&t, d);
    size_t n = t.state_total;
    param_table_free(&t);
    if (n > MODEL_MAX_PARAMS)
        return esp_fail(err, "model: %zu parameters (%.1f GB of float32 before gradients and optimizer moments) from "
                        "its sizes (encoder_conf/decoder_conf or lm_conf), more than espnet3's limit of %zu (check "
                        "output_size, linear_units and num_blocks)", n, (double)n * 4 / 1e9, (size_t)MODEL_MAX_PARAMS);
    return 0;
}

/* Offsets are given by layout() once the table is complete: trained parameters first. */
static param_info *add(param_table *t, const char *name, int ndim, const int64_t *shape, int is_ln)
{
    param_info *p = &t->items[t->n++];
    memset(p, 0, sizeof *p);
    size_t len = strlen(name);
    ESP_CHECK(len < sizeof p->name);
    memcpy(p->name, name, len + 1);
    p->ndim = ndim;
    p->count = 1;
    for (int i = 0; i < ndim; i++) p->shape[i] = shape[i], p->count *= (size_t)shape[i];
    p->is_layernorm = is_ln;
    return p;
}

static void layout(param_table *t)
{
    t->total = 0;
    for (size_t i = 0; i < t->n; i++)
        if (t->items[i].kind == PARAM_TRAINED) t->items[i].offset = t->total, t->total += t->items[i].count;
    t->state_total = t->total;
    for (size_t i = 0; i < t->n; i++)
        if (t->items[i].kind != PARAM_TRAINED) t->items[i].offset = t->state_total, t->state_total += t->items[i].count;
}

#define ADD(t, name, ln, ...)                                                      \
    do {                                                                           \
        const int64_t shape_[] = {__VA_ARGS__};                                    \
        add(t, name, (int)(sizeof shape_ / sizeof *shape_), shape_, ln);           \
    } while (0)

static void add_linear(param_table *t, const char *prefix, int64_t out, int64_t in)
{
    char n[96];
    snprintf(n, sizeof n, "%s.weight", prefix);
    ADD(t, n, 0, out, in);
    snprintf(n, sizeof n, "%s.bias", prefix);
    ADD(t, n, 0, out);
}

static void add_norm(param_table *t, const char *prefix, int64_t d)
{
    char n[96];
    snprintf(n, sizeof n, "%s.weight", prefix);
    ADD(t, n, 1, d);
    snprintf(n, sizeof n, "%s.bias", prefix);
    ADD(t, n, 1, d);
}

/* The norm of kind s (core/nn/norm_spec.h) over d: LayerNorm's weight and bias, RMSNorm's scale (d,
 * ones), ScaleNorm's scale (a scalar, sqrt(d)) or BasicNorm's eps (a scalar, the log of its eps),
 * their initial values under every init scheme (ESPnet2's initialize leaves them). */
static void add_norm_of(param_table *t, const char *prefix, int64_t d, const norm_spec *s)
{
    char n[96];
    if (s->kind == NORM_LAYER) {
        add_norm(t, prefix, d);
        return;
    }
    snprintf(n, sizeof n, "%s.%s", prefix, s->kind == NORM_BASIC ? "eps" : "scale");
    param_info *p = s->kind == NORM_RMS ? add(t, n, 1, &d, 0) : add(t, n, 0, NULL, 0);
    p->has_fill = 1;
    p->fill = s->kind == NORM_RMS ? 1.0 : s->kind == NORM_SCALE ? sqrt((double)d) : log((double)s->eps);
}

/* ---- the Conformer's blocks (ESPnet2 EncoderLayer's state-dict order) --------------------- */

static void add_bias_free_linear(param_table *t, const char *prefix, int64_t out, int64_t in)
{
    char n[128];
    snprintf(n, sizeof n, "%s.weight", prefix);
    ADD(t, n, 0, out, in);
}

/* Conv1d with kernel k: weight (out, in / groups, k), bias (out). */
static void add_conv1d(param_table *t, const char *prefix, int64_t out, int64_t in, int64_t k)
{
    char n[128];
    snprintf(n, sizeof n, "%s.weight", prefix);
    ADD(t, n, 0, out, in, k);
    snprintf(n, sizeof n, "%s.bias", prefix);
    ADD(t, n, 0, out);
}

static void add_batchnorm(param_table *t, const char *prefix, int64_t c)
{
    char n[128];
    add_norm(t, prefix, c);
    snprintf(n, sizeof n, "%s.running_mean", prefix);
    param_info *p = add(t, n, 1, &c, 0);
    p->kind = PARAM_BUFFER;
    snprintf(n, sizeof n, "%s.running_var", prefix);
    p = add(t, n, 1, &c, 0);
    p->kind = PARAM_BUFFER;
    snprintf(n, sizeof n, "%s.num_batches_tracked", prefix);
    p = add(t, n, 0, NULL, 0);
    p->kind = PARAM_COUNTER;
}

/* mod.leaf into p[96] (a module's name and a member). */
static void join(char p[96], const char *mod, const char *leaf)
{
    int k = snprintf(p, 96, "%s.%s", mod, leaf);
    ESP_CHECK(k > 0 && k < 96);
}

/* An attention module under mod (e.g. encoder.encoders.3.self_attn) in ESPnet2's state-dict order:
 * MultiHeadedAttention's linear_q/k/v/out, with rel_pos RelPositionMultiHeadedAttention's
 * pos_bias_u/v before them and linear_pos after (simplified_att: no pos_bias, linear_pos (heads,
 * D) with a bias). */
static void add_attention(param_table *t, const char *mod, const model_dims *d, int rel_pos)
{
    char p[96];
    int64_t D = d->d;
    if (rel_pos && !d->simplified_att) {
        static const char *const pb[] = {"pos_bias_u", "pos_bias_v"};
        for (int i = 0; i < 2; i++) {
            join(p, mod, pb[i]);
            const int64_t shape[] = {d->heads, D / d->heads};
            add(t, p, 2, shape, 0)->is_pos_bias = 1;
        }
    }
    static const char *const att[] = {"linear_q", "linear_k", "linear_v", "linear_out"};
    for (int i = 0; i < 4; i++) {
        join(p, mod, att[i]);
        add_linear(t, p, D, D);
    }
    if (rel_pos) {
        join(p, mod, "linear_pos");
        if (d->simplified_att) add_linear(t, p, d->heads, D);
        else add_bias_free_linear(t, p, D, D);
    }
}

/* PositionwiseFeedForward under mod: w_1 (ff, D), w_2 (D, ff). */
static void add_feed_forward(param_table *t, const char *mod, int64_t D, int64_t ff)
{
    char p[96];
    join(p, mod, "w_1");
    add_linear(t, p, ff, D);
    join(p, mod, "w_2");
    add_linear(t, p, D, ff);
}

static void add_conformer_block(param_table *t, const model_dims *d, int b)
{
    char p[96];
    int64_t D = d->d;
    snprintf(p, sizeof p, "encoder.encoders.%d.self_attn", b);
    add_attention(t, p, d, d->rel_pos);
    static const char *const ffs[] = {"feed_forward", "feed_forward_macaron"};
    for (int i = 0; i < (d->macaron ? 2 : 1); i++) {
        snprintf(p, sizeof p, "encoder.encoders.%d.%s", b, ffs[i]);
        add_feed_forward(t, p, D, d->ff);
    }
    if (d->use_cnn) {
        snprintf(p, sizeof p, "encoder.encoders.%d.conv_module.pointwise_conv1", b);
        add_conv1d(t, p, 2 * D, D, 1);
        snprintf(p, sizeof p, "encoder.encoders.%d.conv_module.depthwise_conv", b);
        add_conv1d(t, p, D, 1, d->cnn_kernel);
        snprintf(p, sizeof p, "encoder.encoders.%d.conv_module.norm", b);
        add_batchnorm(t, p, D);
        snprintf(p, sizeof p, "encoder.encoders.%d.conv_module.pointwise_conv2", b);
        add_conv1d(t, p, D, D, 1);
    }
    /* ContextualBlockEncoderLayer names the attention's and the feed-forward's norms norm1, norm2. */
    static const char *const norms[] = {"norm_ff", "norm_mha", "norm_ff_macaron", "norm_conv", "norm_final"};
    static const char *const ctx_norms[] = {"norm1", "norm2", "norm_ff_macaron", "norm_conv", "norm_final"};
    for (int i = 0; i < 5; i++) {
        if ((i == 2 && !d->macaron) || (i >= 3 && !d->use_cnn)) continue;
        snprintf(p, sizeof p, "encoder.encoders.%d.%s", b, d->ctx_conformer ? ctx_norms[i] : norms[i]);
        add_norm_of(t, p, D, &d->norm);
    }
}

/* ESPnet2's EBranchformerEncoderLayer in its state-dict order: attn, cgmlp (channel_proj1.0, the
 * gating unit's norm, conv and optional linear, channel_proj2), feed_forward(_macaron), the norms,
 * depthwise_conv_fusion (none in the asr_transducer task's Branchformer block), merge_proj. */
static void add_ebranchformer_block(param_table *t, const model_dims *d, int b)
{
    char p[96];
    int64_t D = d->d, U = d->cgmlp_units, H = d->cgmlp_units / 2;
    snprintf(p, sizeof p, "encoder.encoders.%d.attn", b);
    add_attention(t, p, d, d->rel_pos);
    snprintf(p, sizeof p, "encoder.encoders.%d.cgmlp.channel_proj1.0", b);
    add_linear(t, p, U, D);
    snprintf(p, sizeof p, "encoder.encoders.%d.cgmlp.csgu.norm", b);
    add_norm_of(t, p, H, &d->csgu_norm);
    snprintf(p, sizeof p, "encoder.encoders.%d.cgmlp.csgu.conv", b);
    add_conv1d(t, p, H, 1, d->cgmlp_kernel);
    t->items[t->n - 1].is_csgu = t->items[t->n - 2].is_csgu = 1;
    if (d->linear_after_conv) {
        snprintf(p, sizeof p, "encoder.encoders.%d.cgmlp.csgu.linear", b);
        add_linear(t, p, H, H);
        t->items[t->n - 1].is_csgu = t->items[t->n - 2].is_csgu = 1;
    }
    snprintf(p, sizeof p, "encoder.encoders.%d.cgmlp.channel_proj2", b);
    add_linear(t, p, D, H);
    static const char *const ffs[] = {"feed_forward", "feed_forward_macaron"};
    for (int i = 0; d->use_ffn && i < (d->macaron ? 2 : 1); i++) {
        snprintf(p, sizeof p, "encoder.encoders.%d.%s", b, ffs[i]);
        add_feed_forward(t, p, D, d->ff);
    }
    static const char *const norms[] = {"norm_ff", "norm_ff_macaron", "norm_mha", "norm_mlp", "norm_final"};
    for (int i = 0; i < 5; i++) {
        if ((i == 0 && !d->use_ffn) || (i == 1 && !(d->use_ffn && d->macaron))) continue;
        snprintf(p, sizeof p, "encoder.encoders.%d.%s", b, norms[i]);
        add_norm_of(t, p, D, &d->norm);
    }
    snprintf(p, sizeof p, "encoder.encoders.%d.depthwise_conv_fusion", b);
    if (d->merge_kernel) add_conv1d(t, p, 2 * D, 1, d->merge_kernel);
    snprintf(p, sizeof p, "encoder.encoders.%d.merge_proj", b);
    add_linear(t, p, D, 2 * D);
}

/* The asr_transducer task's Conv1d block (size kept): conv (D, D / groups, k), bn, out_pos (D, D). */
static void add_conv1d_block(param_table *t, const struct model_group *g, int64_t Din, int64_t D, int b)
{
    char p[96];
    snprintf(p, sizeof p, "encoder.encoders.%d.conv", b);
    if (g->c1_bias) add_conv1d(t, p, D, Din / g->c1_groups, g->cnn_kernel);
    else {
        char n[128];
        snprintf(n, sizeof n, "%s.weight", p);
        ADD(t, n, 0, D, Din / g->c1_groups, (int64_t)g->cnn_kernel);
    }
    if (g->c1_bn) {
        snprintf(p, sizeof p, "encoder.encoders.%d.bn", b);
        add_batchnorm(t, p, D);
    }
    snprintf(p, sizeof p, "encoder.encoders.%d.out_pos", b);
    add_linear(t, p, D, Din);
}

/* ESPnet2's Transformer EncoderLayer under mod (e.g. encoder.encoders.3): self_attn, feed_forward
 * (ff wide), norm1, norm2. */
static void add_transformer_layer(param_table *t, const char *mod, const model_dims *d, int64_t ff)
{
    char p[96];
    join(p, mod, "self_attn");
    add_attention(t, p, d, 0);
    join(p, mod, "feed_forward");
    add_feed_forward(t, p, d->d, ff);
    join(p, mod, "norm1");
    add_norm(t, p, d->d);
    join(p, mod, "norm2");
    add_norm(t, p, d->d);
}

static void add_transformer_block(param_table *t, const model_dims *d, int b)
{
    char p[96];
    snprintf(p, sizeof p, "encoder.encoders.%d", b);
    add_transformer_layer(t, p, d, d->ff);
}

/* The attention decoder, in the order of ESPnet2's state dict (embed, after_norm, output_layer,
 * then the blocks: self_attn, src_attn, feed_forward, norm1-3). */
static void add_decoder(param_table *t, const model_dims *d)
{
    ADD(t, "decoder.embed.0.weight", 0, d->vocab, d->d);
    t->items[t->n - 1].is_embedding = 1;
    add_norm(t, "decoder.after_norm", d->d);
    add_linear(t, "decoder.output_layer", d->vocab, d->d);
    for (int b = 0; b < d->dec_blocks; b++) {
        char p[96];
        static const char *const att[] = {"self_attn", "src_attn"};
        for (int a = 0; a < 2; a++) {
            snprintf(p, sizeof p, "decoder.decoders.%d.%s", b, att[a]);
            add_attention(t, p, d, 0);
        }
        snprintf(p, sizeof p, "decoder.decoders.%d.feed_forward", b);
        add_feed_forward(t, p, d->d, d->dec_ff);
        for (int i = 1; i <= 3; i++) {
            snprintf(p, sizeof p, "decoder.decoders.%d.norm%d", b, i);
            add_norm(t, p, d->d);
        }
    }
}

/* ESPnet2's TransducerDecoder (decoder.embed, decoder.decoder.<l>: single-layer torch.nn.LSTMs or
 * GRUs, suffix _l0, the first from the embedding's width) and the ASR task's JointNetwork
 * (joint_network.lin_enc, lin_dec, lin_out), in the state dict's order (the asr_transducer task's
 * StatelessDecoder: decoder.embed alone). The embedding's padding_idx is the blank (0). */
static void add_transducer(param_table *t, const model_dims *d)
{
    int64_t H = d->tr_hidden, G = rnn_gates(d->tr_gru) * H, J = d->tr_joint, E = model_tr_embed(d);
    ADD(t, "decoder.embed.weight", 0, d->vocab, E);
    t->items[t->n - 1].is_embedding = 1;
    t->items[t->n - 1].zero_row0 = 1;
    double bound = 1.0 / sqrt((double)H);
    for (int l = 0; l < d->tr_layers; l++) {
        static const char *const leaf[] = {"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"};
        for (int k = 0; k < 4; k++) {
            char n[96];
            snprintf(n, sizeof n, "decoder.decoder.%d.%s", l, leaf[k]);
            if (k < 2) ADD(t, n, 0, G, k == 0 && l == 0 ? E : H);
            else ADD(t, n, 0, G);
            t->items[t->n - 1].uniform_bound = bound;
        }
    }
    add_linear(t, "joint_network.lin_enc", J, d->d);
    if (d->tr_no_dec_bias) ADD(t, "joint_network.lin_dec.weight", 0, J, H);
    else add_linear(t, "joint_network.lin_dec", J, H);
    add_linear(t, "joint_network.lin_out", d->vocab, J);
    /* ESPnetASRTransducerModel registers lm_lin after ctc_lin: last in its state dict. */
    if (d->tr_lm_lin) add_linear(t, "lm_lin", d->vocab, H);
}

/* The input layer's parameters in ESPnet2's state-dict order. */
static void add_input_layer(param_table *t, const model_dims *d)
{
    input_conv c[3];
    int nc = input_layer_convs(d->input_layer, c);
    int64_t C = model_embed_ch(d);
    for (int i = 0; i < nc; i++) {
        char n[96];
        int64_t ic = i ? C : d->input_layer == IN_CONV1D2 ? model_input_dim(d) : 1;
        snprintf(n, sizeof n, "encoder.embed.conv.%d.weight", 2 * i);
        if (d->input_layer == IN_CONV1D2)
            ADD(t, n, 0, C, ic, c[i].k);
        else
            ADD(t, n, 0, C, ic, c[i].k, c[i].k);
        snprintf(n, sizeof n, "encoder.embed.conv.%d.bias", 2 * i);
        ADD(t, n, 0, C);
    }
    if (nc > 0 && !d->embed_raw)
        add_linear(t, input_layer_out_name(d->input_layer, d->encoder), model_embed_dim(d), C * d->f2);
    if (d->input_layer == IN_LINEAR) {
        add_linear(t, "encoder.embed.0", d->d, model_input_dim(d));
        add_norm(t, "encoder.embed.1", d->d);
    }
    if (d->input_layer == IN_NONE && d->encoder != ENC_CONFORMER && model_input_dim(d) != d->d) /* a plain Linear */
        add_linear(t, "encoder.embed", d->d, model_input_dim(d));
}

/* ESPnet2's TransformerLM under ESPnetLanguageModel ("lm."), in its state-dict order. */
static void add_lm(param_table *t, const model_dims *d)
{
    char n[96];
    ADD(t, "lm.embed.weight", 0, d->vocab, d->lm_embed);
    t->items[t->n - 1].is_embedding = 1;
    add_linear(t, "lm.encoder.embed.0", d->d, d->lm_embed);
    add_norm(t, "lm.encoder.embed.1", d->d);
    for (int l = 0; l < d->dec_blocks; l++) {
        snprintf(n, sizeof n, "lm.encoder.encoders.%d", l);
        add_transformer_layer(t, n, d, d->dec_ff);
    }
    add_norm(t, "lm.encoder.after_norm", d->d);
    add_linear(t, "lm.decoder", d->vocab, d->d);
}

/* ESPnet2's SequentialRNNLM (lstm or gru) under ESPnetLanguageModel, in its state-dict order. */
static void add_lm_rnn(param_table *t, const model_dims *d)
{
    char n[96];
    ADD(t, "lm.encoder.weight", 0, d->vocab, d->lm_embed);
    t->items[t->n - 1].is_embedding = 1;
    t->items[t->n - 1].zero_row0 = 1;
    double bound = 1.0 / sqrt((double)d->d);
    for (int l = 0; l < d->lm_layers; l++) {
        int64_t in = l == 0 ? d->lm_embed : d->d, g = rnn_gates(d->lm_gru) * (int64_t)d->d;
        snprintf(n, sizeof n, "lm.rnn.weight_ih_l%d", l);
        ADD(t, n, 0, g, in);
        snprintf(n, sizeof n, "lm.rnn.weight_hh_l%d", l);
        ADD(t, n, 0, g, d->d);
        snprintf(n, sizeof n, "lm.rnn.bias_ih_l%d", l);
        ADD(t, n, 0, g);
        snprintf(n, sizeof n, "lm.rnn.bias_hh_l%d", l);
        ADD(t, n, 0, g);
        for (int k = 1; k <= 4; k++) t->items[t->n - k].uniform_bound = bound;
    }
    add_linear(t, "lm.decoder", d->vocab, d->d);
}

void param_table_build(param_table *t, const model_dims *d)
{
    t->body = d->body != 0; /* every table says which names it holds (a caller's table is not zeroed) */
    t->body_encoder = d->encoder;
    if (d->lm) { /* an LM task's model: the LM alone */
        int rnn = d->lm == LM_SEQ_RNN;
        size_t cap = rnn ? 3 + (size_t)d->lm_layers * 4 : 9 + (size_t)d->dec_blocks * 16;
        t->items = xcalloc(cap, sizeof *t->items);
        t->n = 0;
        if (rnn) add_lm_rnn(t, d);
        else add_lm(t, d);
        ESP_CHECK(t->n <= cap);
        layout(t);
        return;
    }
    size_t cap = 12 + (size_t)d->blocks * 48 + 8 + 8 + (size_t)d->dec_blocks * 26 + 9 + (size_t)d->tr_layers * 4;
    t->items = xcalloc(cap, sizeof *t->items);
    t->n = 0;
    t->total = 0;
    if (d->pre_out) add_linear(t, "preencoder.linear_out", d->pre_out, d->pre_in);
    add_input_layer(t, d);
    for (int b = 0; b < d->blocks; b++) {
        model_dims bd = model_block_dims(d, b);
        size_t first = t->n;
        if (bd.encoder == ENC_CONV1D)
            add_conv1d_block(t, model_block_group_of(d, b), model_block_in_dim(d, b), bd.d, b);
        else if (bd.encoder == ENC_CONFORMER || d->ctx_conformer)
            add_conformer_block(t, &bd, b);
        else if (bd.encoder == ENC_EBRANCHFORMER)
            add_ebranchformer_block(t, &bd, b);
        else
            add_transformer_block(t, &bd, b);
        for (size_t i = first; d->body && i < t->n; i++) { /* a block's names follow its own kind */
            char n[sizeof t->items[i].name];
            if (param_body_name(t->items[i].name, bd.encoder, n, sizeof n)) memcpy(t->items[i].name, n, sizeof n);
        }
    }
    add_norm_of(t, "encoder.after_norm", d->d, &d->after_norm);
    /* ESPnetASRModel gives the encoder this Linear whenever interctc_use_conditioning is set. */
    if (d->interctc_cond) add_linear(t, "encoder.conditioning_layer", d->d, d->vocab);
    if (!d->no_ctc) add_linear(t, "ctc.ctc_lo", d->vocab, d->d);
    if (d->dec_blocks > 0) add_decoder(t, d);
    if (model_has_transducer(d)) add_transducer(t, d);
    ESP_CHECK(t->n <= cap);
    if (d->body) {
        for (size_t i = 0; i < t->n; i++) {
            char n[sizeof t->items[i].name];
            if (param_body_name(t->items[i].name, d->encoder, n, sizeof n)) memcpy(t->items[i].name, n, sizeof n);
        }
    }
    layout(t);
}

void param_table_free(param_table *t)
{
    free(t->items);
    memset(t, 0, sizeof *t);
}

const param_info *param_find(const param_table *t, const char *name)
{
    for (size_t i = 0; i < t->n; i++)
        if (!strcmp(t->items[i].name, name)) return &t->items[i];
    return NULL;
}

const param_info *param_find_alias(const param_table *t, const char *name)
{
    if (!strncmp(name, "model.", 6)) name += 6; /* ESPnet3's LightningModule wraps the model */
    const param_info *p = param_find(t, name);
    if (p) return p;
    char buf[128];
    return param_current_name(name, buf, sizeof buf) ? param_find(t, buf) : NULL;
}

/* ---- initialization ---------------------------------------------------------------------- */

static double uniform01(rng *r) { return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

static double normal01(rng *r)
{
    /* Box-Muller; u1 in (0, 1] keeps the log finite. */
    double u1 = 1.0 - uniform01(r), u2 = uniform01(r);
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

/* fan_in / fan_out as torch.nn.init._calculate_fan_in_and_fan_out. */
static void fans(const param_info *p, double *fan_in, double *fan_out)
{
    double receptive = 1;
    for (int i = 2; i < p->ndim; i++) receptive *= (double)p->shape[i];
    *fan_in = (double)p->shape[1] * receptive;
    *fan_out = (double)p->shape[0] * receptive;
}

int param_init(float *params, const param_table *t, const char *init, uint64_t seed, esp_err *err)
{
    enum { TORCH_DEFAULT, XAVIER_U, XAVIER_N, KAIMING_U, KAIMING_N } scheme;
    if (!init) scheme = TORCH_DEFAULT;
    else if (!strcmp(init, "xavier_uniform")) scheme = XAVIER_U;
    else if (!strcmp(init, "xavier_normal")) scheme = XAVIER_N;
    else if (!strcmp(init, "kaiming_uniform")) scheme = KAIMING_U;
    else if (!strcmp(init, "kaiming_normal")) scheme = KAIMING_N;
    else return esp_fail(err, "init: %s is not supported (supported: xavier_uniform, xavier_normal, kaiming_uniform, "
                              "kaiming_normal, or none for PyTorch defaults)", init);
    for (size_t i = 0; i < t->n; i++) {
        const param_info *p = &t->items[i];
        if (p->kind != PARAM_TRAINED) continue; /* buffers: param_buffers_init */
        float *w = params + p->offset;
        rng r;
        rng_init(&r, rng_derive(seed, 0x1417, i)); /* one stream per tensor: order-independent */
        if (p->is_embedding) { /* torch.nn.Embedding.reset_parameters: normal_(0, 1), the padding row zero */
            for (size_t k = 0; k < p->count; k++) w[k] = (float)normal01(&r);
            if (p->zero_row0) memset(w, 0, (size_t)p->shape[1] * sizeof *w);
            continue;
        }
        if (p->uniform_bound > 0 && scheme == TORCH_DEFAULT) { /* nn.LSTM.reset_parameters */
            for (size_t k = 0; k < p->count; k++) w[k] = (float)((2 * uniform01(&r) - 1) * p->uniform_bound);
            continue;
        }
        if (p->is_csgu && scheme != TORCH_DEFAULT) { /* ConvolutionalSpatialGatingUnit.espnet_initialization_fn */
            int is_weight = p->ndim > 1;
            for (size_t k = 0; k < p->count; k++) w[k] = is_weight ? (float)(1e-6 * normal01(&r)) : 1.0f;
            continue;
        }
        if (p->has_fill) {
            for (size_t k = 0; k < p->count; k++) w[k] = (float)p->fill;
            continue;
        }
        if (p->is_layernorm) {
            int is_weight = strstr(p->name, ".weight") != NULL;
            for (size_t k = 0; k < p->count; k++) w[k] = is_weight ? 1.0f : 0.0f;
            continue;
        }
        if (p->ndim == 1) {
            /* ESPnet2 zeroes biases; PyTorch draws them from U(-1/sqrt(fan_in), 1/sqrt(fan_in)). */
            double bound = 0;
            if (scheme == TORCH_DEFAULT) {
                const param_info *wt = p - 1; /* every bias follows its weight in the table */
                double fi, fo;
                fans(wt, &fi, &fo);
                bound = 1.0 / sqrt(fi);
            }
            for (size_t k = 0; k < p->count; k++) w[k] = (float)(bound ? (2 * uniform01(&r) - 1) * bound : 0.0);
            continue;
        }
        double fi, fo;
        fans(p, &fi, &fo);
        for (size_t k = 0; k < p->count; k++) {
            double v;
            switch (scheme) {
            case XAVIER_U: v = (2 * uniform01(&r) - 1) * sqrt(6.0 / (fi + fo)); break;
            case XAVIER_N: v = normal01(&r) * sqrt(2.0 / (fi + fo)); break;
            case KAIMING_U: v = (2 * uniform01(&r) - 1) * sqrt(6.0 / fi); break; /* gain sqrt(2) for relu */
            case KAIMING_N: v = normal01(&r) * sqrt(2.0 / fi); break;
            default: /* RelPositionMultiHeadedAttention draws its pos_bias with xavier_uniform */
                v = p->is_pos_bias ? (2 * uniform01(&r) - 1) * sqrt(6.0 / (fi + fo))
                                   : (2 * uniform01(&r) - 1) / sqrt(fi); /* kaiming_uniform(a=sqrt(5)) */
                break;
            }
            w[k] = (float)v;
        }
    }
    return 0;
}

void param_buffers_init(float *state, const param_table *t)
{
    for (size_t i = 0; i < t->n; i++) {
        const param_info *p = &t->items[i];
        if (p->kind == PARAM_TRAINED) continue;
        float v = strstr(p->name, ".running_var") ? 1.0f : 0.0f;
        for (size_t k = 0; k < p->count; k++) state[p->offset + k] = v;
    }
}
