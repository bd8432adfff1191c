/* The asr_transducer task's config keys into model_dims / model_rates; see body_conf.h. */
#include "core/nn/body_conf.h"

#include <string.h>

#define B "model.encoder_conf.body_conf"

int body_in_cfg(const model_cfg *m) { return m && m->encoder_conf && m->encoder_conf->body_conf; }

static double or_default(const double *v, double dflt) { return v ? *v : dflt; }
static int64_t int_or(const int64_t *v, int64_t dflt) { return v ? *v : dflt; }

/* A value other than the one implemented: "<key>: <v> is not supported (<hint>)". */
static int only(const double *v, double want, const char *key, const char *hint, esp_err *err)
{
    if (v && *v != want) return esp_fail(err, "%s: %g is not supported (%s)", key, *v, hint);
    return 0;
}

/* The ASR task's encoder_conf keys: the asr_transducer Encoder takes body_conf, input_conf and
 * main_conf alone (anything else is a TypeError there). */
static int check_encoder_keys(const encoder_conf_cfg *e, esp_err *err)
{
    const char *k = e->output_size ? "output_size" : e->attention_heads ? "attention_heads"
                  : e->linear_units ? "linear_units" : e->num_blocks ? "num_blocks"
                  : e->dropout_rate ? "dropout_rate" : e->positional_dropout_rate ? "positional_dropout_rate"
                  : e->attention_dropout_rate ? "attention_dropout_rate" : e->input_layer ? "input_layer"
                  : e->macaron_style ? "macaron_style" : e->pos_enc_layer_type ? "pos_enc_layer_type"
                  : e->selfattention_layer_type ? "selfattention_layer_type" : e->activation_type ? "activation_type"
                  : e->use_cnn_module ? "use_cnn_module" : e->cnn_module_kernel ? "cnn_module_kernel" : NULL;
    if (k)
        return esp_fail(err, "model.encoder_conf.%s: a key of the ASR task's encoders; the asr_transducer Encoder takes "
                             "body_conf, input_conf and main_conf (write it as a body_conf block's key, e.g. "
                             "hidden_size, linear_size, heads, conv_mod_kernel_size, dropout_rate)", k);
    return 0;
}

int body_shrinks_frames(const model_cfg *m)
{
    const encoder_conf_cfg *e = body_in_cfg(m) ? m->encoder_conf : NULL;
    for (unsigned i = 0; e && i < e->n_body_conf; i++) {
        const body_block_cfg *c = &e->body_conf[i];
        if (c->block_type && !strcmp(c->block_type, "conv1d") &&
            ((c->kernel_size && *c->kernel_size > 1) || int_or(c->stride, 1) > 1))
            return 1;
    }
    return 0;
}

/* main_conf's norm_type / conv_mod_norm_type (config_validate.c allows these four). */
static int norm_kind_of(const char *name)
{
    return !name ? NORM_LAYER : !strcmp(name, "basic_norm") ? NORM_BASIC : !strcmp(name, "rms_norm") ? NORM_RMS
         : !strcmp(name, "scale_norm") ? NORM_SCALE : NORM_LAYER;
}

/* A norm of kind over d columns with its eps and partial keys (`key`_eps, `key`_partial) as
 * get_normalization takes them: eps by default 1e-12 (layer_norm), 0.25 (basic_norm: the initial
 * value of its learned log) or 1e-5; RMSNorm's partial statistic over int(d * partial) columns when
 * partial is in (0, 1), else every column. */
static int norm_spec_of(norm_spec *out, int kind, const double *eps, const double *partial, int64_t d,
                        const char *key, esp_err *err)
{
    double e = eps ? *eps : kind == NORM_LAYER ? 1e-12 : kind == NORM_BASIC ? 0.25 : 1e-5;
    if (!(e > 0)) return esp_fail(err, "%s_eps: %g must be positive", key, e);
    out->kind = kind, out->eps = kind == NORM_LAYER && !eps ? 0.0f : (float)e, out->p = 0; /* 0: 1e-12 */
    if (kind == NORM_RMS && partial && *partial > 0 && *partial < 1) {
        out->p = (int)((double)d * *partial);
        if (out->p < 1)
            return esp_fail(err, "%s_partial: %g of %lld columns is none (RMSNorm's statistic would be NaN)", key,
                            *partial, (long long)d);
    }
    return 0;
}

/* The block types (validate_architecture has checked the name). */
typedef enum block_type { BT_CONFORMER, BT_EBRANCHFORMER, BT_BRANCHFORMER, BT_CONV1D } block_type;

static block_type block_kind(const body_block_cfg *c)
{
    static const char *const names[] = {"conformer", "ebranchformer", "branchformer"};
    for (int k = 0; k < 3; k++)
        if (!strcmp(c->block_type, names[k])) return (block_type)k;
    return BT_CONV1D;
}

/* input_conf's ConvInput as the input layer of its subsampling_factor (4 by default). */
static int input_kind(const body_input_cfg *c)
{
    int64_t f = c ? int_or(c->subsampling_factor, 4) : 4;
    return f == 2 ? IN_CONV2D2 : f == 6 ? IN_CONV2D6 : IN_CONV2D;
}

/* A conv1d entry's torch.nn.Conv1d (and MultiBlocks' repetition of it) on `in` channels. */
static int conv1d_sizes(const body_block_cfg *c, unsigned i, int in, esp_err *err)
{
    int64_t out = *c->output_size, k = *c->kernel_size, s = int_or(c->stride, 1), dl = int_or(c->dilation, 1);
    int64_t g = int_or(c->groups, 1);
    if (out < 1 || k < 1 || s < 1 || dl < 1 || g < 1)
        return esp_fail(err, B "[%u]: output_size, kernel_size, stride, dilation and groups must be positive", i);
    if (in % g || out % g)
        return esp_fail(err, B "[%u].groups: %lld must divide the input size %d and output_size %lld (torch's Conv1d)",
                        i, (long long)g, in, (long long)out);
    if (int_or(c->num_blocks, 1) > 1 && out != in)
        return esp_fail(err, B "[%u].num_blocks: repeated conv1d blocks need output_size %lld = their input size %d",
                        i, (long long)out, in);
    return 0;
}

/* ESPnet2's validate_architecture (asr_transducer/encoder/validation.py), with its errors, before
 * anything espnet3 does not build is refused: an X-former entry's input and output size is its
 * hidden_size, a conv1d entry's input the previous entry's output, and the first entry's the
 * input block's (before a conv1d block, ConvInput has no output Linear: conv_size channels,
 * default the block's output_size, times the frequency bins left). *embed: the input block's
 * output size (the positional encoding's too), *last: the last entry's (the encoder's). */
static int validate_architecture(const encoder_conf_cfg *e, int idim, int *embed, int *last, esp_err *err)
{
    int prev = 0;
    for (unsigned i = 0; i < e->n_body_conf; i++) {
        const body_block_cfg *c = &e->body_conf[i];
        int in, out;
        if (!c->block_type)
            return esp_fail(err, B "[%u]: no block_type (ESPnet2: \"Block %u in encoder doesn't have a type "
                                   "assigned\")", i, i + 1);
        if (!strcmp(c->block_type, "conv1d")) {
            const char *miss = !c->output_size ? "output_size" : !c->kernel_size ? "kernel_size" : NULL;
            if (miss)
                return esp_fail(err, B "[%u]: a conv1d block needs %s (ESPnet2: \"Missing '%s' argument for Conv1d "
                                       "block (ID: %u)\")", i, miss, miss, i + 1);
            const body_input_cfg *ic = e->input_conf;
            in = i ? prev
                 : !idim ? (int)*c->output_size /* body_rates_from_cfg: the rates alone, the input unknown */
                         : (int)(ic && ic->conv_size ? *ic->conv_size : *c->output_size) *
                               input_layer_out_bins(input_kind(ic), idim);
            out = (int)*c->output_size;
            if (!i) *embed = in;
            if (conv1d_sizes(c, i, in, err) != 0) return -1;
        } else {
            const char *miss = !c->linear_size ? "linear_size" : !c->conv_mod_kernel_size ? "conv_mod_kernel_size" : NULL;
            if (miss)
                return esp_fail(err, B "[%u]: a %s block needs %s (ESPnet2: \"Missing '%s' argument for X-former "
                                       "block (ID: %u)\")", i, c->block_type, miss, miss, i + 1);
            if (!c->hidden_size) return esp_fail(err, B "[%u]: a %s block needs hidden_size", i, c->block_type);
            in = out = (int)*c->hidden_size;
            if (!i) *embed = in;
        }
        if (i && in != prev)
            return esp_fail(err, B "[%u]: its input size %d differs from body_conf[%u]'s output size %d (ESPnet2: "
                                   "\"Output/Input mismatch between blocks %u and %u in the encoder body\")", i, in,
                            i - 1, prev, i - 1, i);
        prev = out;
    }
    *last = prev;
    return 0;
}

/* A block's structure in out: a Conformer block, or the E-Branchformer encoder's for an
 * (E-)Branchformer block, whose gating unit splits linear_size in halves, whose norm
 * (conv_mod_norm_type, out->csgu_norm.kind) takes conv_mod_norm_eps / _partial, and whose merge convolution (the
 * E-Branchformer's alone) depth_conv_kernel_size (conv_mod_kernel_size). */
static int type_dims(model_dims *out, const body_block_cfg *c, unsigned i, block_type kind, int ff, int k, esp_err *err)
{
    out->cnn_kernel = k;
    if (kind == BT_CONFORMER) {
        out->encoder = ENC_CONFORMER;
        return only(c->conv_mod_norm_eps, 1e-5, B "[].conv_mod_norm_eps", "BatchNorm1d's 1e-5 is", err) ||
                       only(c->conv_mod_norm_momentum, 0.1, B "[].conv_mod_norm_momentum", "BatchNorm1d's 0.1 is", err)
                   ? -1
                   : 0;
    }
    int mk = kind == BT_EBRANCHFORMER ? (int)int_or(c->depth_conv_kernel_size, k) : 0;
    if (ff % 2) return esp_fail(err, B "[%u].linear_size: %d must be even (the gating unit takes its halves)", i, ff);
    if (kind == BT_EBRANCHFORMER && (mk < 1 || mk % 2 == 0))
        return esp_fail(err, B "[%u].depth_conv_kernel_size: %d must be odd and positive (the output keeps its length)", i,
                        mk);
    if (norm_spec_of(&out->csgu_norm, out->csgu_norm.kind, c->conv_mod_norm_eps, c->conv_mod_norm_partial, ff / 2,
                     B "[].conv_mod_norm", err) != 0)
        return -1;
    out->encoder = ENC_EBRANCHFORMER, out->cgmlp_units = ff, out->cgmlp_kernel = k, out->merge_kernel = mk;
    out->use_ffn = kind == BT_EBRANCHFORMER, out->gate_act = ACT_IDENTITY, out->linear_after_conv = 0;
    return 0;
}

/* body_conf[i]'s g after out's groups, or into the last one when its blocks are the same. */
static int add_group(model_dims *out, model_rates *r, const struct model_group *g, float pd, float pa, unsigned i,
                     esp_err *err)
{
    int last = out->n_groups - 1;
    if (last >= 0) {
        struct model_group p = out->group[last];
        p.blocks = g->blocks;
        if (!memcmp(&p, g, sizeof p) && r->group_dropout[last] == pd && r->group_att_dropout[last] == pa) {
            out->group[last].blocks += g->blocks;
            return 0;
        }
    }
    if (out->n_groups == MODEL_MAX_GROUPS)
        return esp_fail(err, B "[%u]: more than %d runs of blocks that differ (write consecutive equal blocks as one "
                               "entry's num_blocks)", i, MODEL_MAX_GROUPS);
    out->group[++last] = *g;
    r->group_dropout[last] = pd, r->group_att_dropout[last] = pa;
    out->n_groups = last + 1;
    return 0;
}

/* body_conf[i]'s conv1d blocks (validate_architecture checked its sizes and groups) as a group of
 * output_size wide blocks, of any kernel_size, stride and dilation (encoder_body.c shrinks the
 * frames, lengths and encoding as blocks/conv1d.py's create_new_mask / create_new_pos_enc, and its
 * out_pos maps the encoding to output_size for the blocks after it). */
static int conv1d_group(model_dims *out, model_rates *r, const body_block_cfg *c, unsigned i, int n, esp_err *err)
{
    struct model_group g = {n, ENC_CONV1D, 0, 0, (int)*c->kernel_size, 0, 0, 0, 0, 0, (int)int_or(c->groups, 1),
                            (int)int_or(c->dilation, 1), !c->bias || *c->bias, c->batch_norm && *c->batch_norm,
                            !c->relu || *c->relu, (int)int_or(c->stride, 1), {0}, {0}, (int)*c->output_size};
    return add_group(out, r, &g, (float)or_default(c->dropout_rate, 0), 0, i, err);
}

/* body_conf[i]'s blocks as a group of out (its kind, sizes and rates). */
static int block_group(model_dims *out, model_rates *r, const body_block_cfg *c, unsigned i, int n, esp_err *err)
{
    block_type kind = block_kind(c);
    if (kind == BT_CONV1D) return conv1d_group(out, r, c, i, n, err);
    int d = (int)*c->hidden_size, ff = (int)*c->linear_size, heads = (int)int_or(c->heads, 4);
    int k = (int)*c->conv_mod_kernel_size;
    if (d < 1 || ff < 1 || heads < 1 || d % heads)
        return esp_fail(err, B "[%u]: hidden_size %d must be a positive multiple of heads %d, linear_size %d positive", i,
                        d, heads, ff);
    if (k < 1 || k % 2 == 0)
        return esp_fail(err, B "[%u].conv_mod_kernel_size: %d must be odd (ESPnet2 asserts it)", i, k);
    float pd = (float)or_default(c->dropout_rate, 0), pf = (float)or_default(c->pos_wise_dropout_rate, 0);
    float pa = (float)or_default(c->att_dropout_rate, 0);
    if (kind != BT_BRANCHFORMER && pf != pd) /* the Branchformer has no feed-forward */
        return esp_fail(err, B "[%u].pos_wise_dropout_rate: %g differs from dropout_rate %g, which espnet3's blocks use for "
                             "both (write the same value)", i, (double)pf, (double)pd);
    model_dims e = *out;
    if (norm_spec_of(&e.norm, out->norm.kind, c->norm_eps, c->norm_partial, d, B "[].norm", err) != 0 ||
        type_dims(&e, c, i, kind, ff, k, err) != 0)
        return -1;
    if (kind == BT_CONFORMER) e.csgu_norm = (norm_spec){0}; /* its convolution module's norm is BatchNorm1d */
    struct model_group g = {n, (int)e.encoder, heads, ff, k, kind == BT_CONFORMER, e.use_ffn, e.cgmlp_units,
                            e.cgmlp_kernel, e.merge_kernel, 0, 0, 0, 0, 0, 0, e.norm, e.csgu_norm, d};
    return add_group(out, r, &g, pd, pa, i, err);
}

/* The groups into out's fields: one group is every block (the Conformer or E-Branchformer encoder
 * as before); several leave the first X-former group's kind and the largest sizes
 * (core/nn/encoder_body.c). */
static void groups_dims(model_dims *out, model_rates *r)
{
    int x = out->group[0].encoder == ENC_CONV1D; /* a conv1d group first: the X-former after it */
    const struct model_group *g = &out->group[x];
    out->encoder = g->encoder, out->heads = g->heads, out->ff = g->ff, out->cnn_kernel = g->cnn_kernel;
    out->use_cnn = g->use_cnn, out->use_ffn = g->use_ffn, out->cgmlp_units = g->cgmlp_units;
    out->cgmlp_kernel = g->cgmlp_kernel, out->merge_kernel = g->merge_kernel;
    out->norm = g->norm, out->csgu_norm = g->csgu_norm;
    r->dropout = r->group_dropout[x], r->att_dropout = r->group_att_dropout[x];
    for (int k = 1; k < out->n_groups; k++) {
        g = &out->group[k];
        out->heads = g->heads > out->heads ? g->heads : out->heads;
        out->ff = g->ff > out->ff ? g->ff : out->ff;
        out->cgmlp_units = g->cgmlp_units > out->cgmlp_units ? g->cgmlp_units : out->cgmlp_units;
    }
    if (out->n_groups == 1) out->n_groups = 0; /* every block as out's fields */
}

/* Whether a group of out is of kind k (one group or several). */
static int has_kind(const model_dims *out, int k)
{
    if (!out->n_groups) return out->encoder == k;
    for (int i = 0; i < out->n_groups; i++)
        if (out->group[i].encoder == k) return 1;
    return 0;
}

/* input_conf: ConvInput, the Conv2dSubsampling of its subsampling_factor with conv_size channels
 * (default: the first block's hidden_size, or a first conv1d block's output_size), then a Linear to
 * the first block's hidden_size, or before a conv1d block none (ESPnet2's validate_input_block):
 * embed wide, as validate_architecture found. */
static int input_dims(model_dims *out, const body_input_cfg *c, const body_block_cfg *first, int embed, esp_err *err)
{
    int64_t f = c ? int_or(c->subsampling_factor, 4) : 4;
    out->input_layer = input_kind(c);
    if (f != 2 && f != 4 && f != 6)
        return esp_fail(err, "model.encoder_conf.input_conf.subsampling_factor: %lld (ESPnet2's Conv2D input supports "
                             "2, 4 and 6)", (long long)f);
    out->embed_raw = block_kind(first) == BT_CONV1D;
    int64_t ch = c && c->conv_size ? *c->conv_size : out->embed_raw ? *first->output_size : embed;
    if (!out->idim) return 0; /* body_rates_from_cfg */
    if (ch < 1 || embed < 1)
        return esp_fail(err, "model.encoder_conf.input_conf.conv_size: %lld channels leave %d features for the first "
                             "block (both must be positive)", (long long)ch, embed);
    if (embed % 2) /* RelPositionalEncoding fills sines and cosines in pairs (ESPnet2 fails on an odd size) */
        return esp_fail(err, "model.encoder_conf.input_conf.conv_size: the input block's output size %d (conv_size %lld "
                             "x the frequency bins left) must be even for the positional encoding", embed, (long long)ch);
    out->embed_ch = (int)ch, out->embed_d = embed;
    return 0;
}

/* main_conf.dynamic_chunk_training (build_main_parameters clamps the other three at 0): causal
 * depthwise convolutions (dims.causal) and the training forward's chunk draw (rates). A conv1d
 * block of kernel_size > 1 would be causal too (its lorder): not built. */
static int chunk_dims(model_dims *out, model_rates *r, const body_main_cfg *c, esp_err *err)
{
    if (!c || !c->dynamic_chunk_training || !*c->dynamic_chunk_training) return 0;
    int64_t sz = int_or(c->short_chunk_size, 25), left = int_or(c->num_left_chunks, 0);
    if (sz < 1)
        return esp_fail(err, "model.encoder_conf.main_conf.short_chunk_size: %lld with dynamic_chunk_training divides "
                             "by zero in ESPnet2 (write 1 or more)", (long long)sz);
    for (int g = 0; g < out->n_groups; g++)
        if (out->group[g].encoder == ENC_CONV1D && out->group[g].cnn_kernel > 1)
            return esp_fail(err, "model.encoder_conf.main_conf.dynamic_chunk_training: causal conv1d blocks of "
                                 "kernel_size %d are not built (kernel_size 1 blocks are)", out->group[g].cnn_kernel);
    out->causal = 1;
    if (r) {
        double th = or_default(c->short_chunk_threshold, 0.75);
        r->chunk_training = 1, r->chunk_short = (int)sz, r->chunk_left = left > 0 ? (int)left : 0;
        r->chunk_threshold = th > 0 ? (float)th : 0;
    }
    return 0;
}

/* main_conf: one activation for the feed-forward and convolution modules; the keys of what is not
 * built are refused, those only an unbuilt variant reads (short_chunk_*, num_left_chunks without
 * dynamic chunk training, other activations' parameters, pos_enc_max_len: the table grows with the
 * input) are accepted. */
static int main_dims(model_dims *out, model_rates *r, const body_main_cfg *c, esp_err *err)
{
    const char *fa = c && c->pos_wise_act_type ? c->pos_wise_act_type : "swish";
    const char *ca = c && c->conv_mod_act_type ? c->conv_mod_act_type : "swish";
    if (has_kind(out, ENC_CONFORMER) && strcmp(fa, ca)) /* the E-Branchformer has no conv_mod activation */
        return esp_fail(err, "model.encoder_conf.main_conf: pos_wise_act_type %s and conv_mod_act_type %s differ; "
                             "espnet3's blocks take one activation (write the same)", fa, ca);
    out->act = !strcmp(fa, "relu") ? ACT_RELU : ACT_SWISH;
    if (r) r->pos_dropout = c ? (float)or_default(c->pos_enc_dropout_rate, 0) : 0;
    if (norm_spec_of(&out->after_norm, norm_kind_of(c ? c->norm_type : NULL), c ? c->after_norm_eps : NULL,
                     c ? c->after_norm_partial : NULL, out->d, "model.encoder_conf.main_conf.after_norm", err) != 0)
        return -1;
    if (r) r->blockdrop = c ? (float)or_default(c->blockdrop_rate, 0) : 0;
    if (!c) return 0;
    out->simplified_att = c->simplified_att_score && *c->simplified_att_score;
    if (only(c->swish_beta, 1.0, "model.encoder_conf.main_conf.swish_beta", "Swish with beta 1 is", err))
        return -1;
    return chunk_dims(out, r, c, err);
}

/* model.decoder stateless (StatelessDecoder): decoder.embed of embed_size (256) is its output. */
static int stateless_dims(model_dims *out, model_rates *r, const decoder_conf_cfg *c, esp_err *err)
{
    if (c && (c->rnn_type || c->num_layers || c->hidden_size || c->dropout_rate))
        return esp_fail(err, "model.decoder_conf: rnn_type, num_layers, hidden_size and dropout_rate are RNNDecoder's; "
                             "StatelessDecoder takes embed_size, embed_dropout_rate and embed_pad");
    int64_t E = c ? int_or(c->embed_size, 256) : 256;
    if (E < 1) return esp_fail(err, "model.decoder_conf.embed_size: %lld must be positive", (long long)E);
    out->tr_stateless = 1, out->tr_layers = 0, out->tr_hidden = (int)E, out->tr_embed = 0, out->tr_gru = 0;
    if (r) r->tr_dropout = 0, r->tr_dropout_embed = c ? (float)or_default(c->embed_dropout_rate, 0) : 0;
    return 0;
}

/* model.decoder rnn (RNNDecoder) or stateless with decoder_conf, and joint_network_conf. */
static int decoder_dims(model_dims *out, model_rates *r, const model_cfg *m, esp_err *err)
{
    const decoder_conf_cfg *c = m->decoder_conf;
    if (m->joint_net_conf)
        return esp_fail(err, "model.joint_net_conf: the ASR task's name; the asr_transducer task's is joint_network_conf");
    if (c && (c->attention_heads || c->linear_units || c->num_blocks || c->positional_dropout_rate ||
              c->self_attention_dropout_rate || c->src_attention_dropout_rate || c->input_layer || c->dropout ||
              c->dropout_embed))
        return esp_fail(err, "model.decoder_conf: a key of the ASR task's decoders; RNNDecoder takes embed_size, "
                             "hidden_size, rnn_type, num_layers, dropout_rate, embed_dropout_rate and embed_pad "
                             "(StatelessDecoder: embed_size, embed_dropout_rate and embed_pad)");
    const joint_net_conf_cfg *j = m->joint_network_conf;
    out->tr_joint = j && j->joint_space_size ? (int)j->joint_space_size : 256;
    out->tr_no_dec_bias = j && j->lin_dec_bias && !*j->lin_dec_bias;
    if (m->decoder && !strcmp(m->decoder, "stateless")) return stateless_dims(out, r, c, err);
    int64_t H = c && c->hidden_size ? c->hidden_size : 256, E = c ? int_or(c->embed_size, 256) : 256;
    int64_t L = c && c->num_layers ? c->num_layers : 1;
    if (H < 1 || L < 1 || E < 1)
        return esp_fail(err, "model.decoder_conf: embed_size, hidden_size and num_layers must be positive");
    /* RNNDecoder: Embedding(vocab, embed_size), the first layer embed_size -> hidden_size */
    out->tr_layers = (int)L, out->tr_stateless = 0, out->tr_hidden = (int)H, out->tr_embed = (int)E;
    out->tr_gru = c && c->rnn_type && !strcmp(c->rnn_type, "gru"); /* lstm | gru (config_validate.c) */
    if (r) {
        r->tr_dropout = c ? (float)c->dropout_rate : 0;
        r->tr_dropout_embed = c ? (float)or_default(c->embed_dropout_rate, 0) : 0;
    }
    return 0;
}

/* model_conf: ESPnetASRTransducerModel's keys; the ASR model's are a TypeError there. */
static int loss_dims(model_dims *out, model_rates *r, const model_conf_cfg *c, esp_err *err)
{
    if (c && (c->ctc_weight || c->lsm_weight || c->length_normalized_loss || c->interctc_weight))
        return esp_fail(err, "model.model_conf: ctc_weight, lsm_weight, length_normalized_loss and interctc_weight are "
                             "ESPnetASRModel's; the asr_transducer task's model takes transducer_weight and "
                             "auxiliary_ctc_weight");
    double tw = c ? or_default(c->transducer_weight, 1.0) : 1.0, cw = c ? or_default(c->auxiliary_ctc_weight, 0) : 0;
    double lw = c ? or_default(c->auxiliary_lm_loss_weight, 0) : 0, fe = c ? or_default(c->fastemit_lambda, 0) : 0;
    double ls = c ? or_default(c->auxiliary_lm_loss_smoothing, 0.05) : 0.05;
    if (!(tw >= 0) || !(cw >= 0) || !(lw >= 0))
        return esp_fail(err, "model.model_conf: transducer_weight %g, auxiliary_ctc_weight %g and "
                             "auxiliary_lm_loss_weight %g must not be negative", tw, cw, lw);
    /* warp-transducer's CUDA kernel applies FastEmit only above 0, its CPU one at any value. */
    if (!(fe >= 0))
        return esp_fail(err, "model.model_conf.fastemit_lambda: %g must not be negative (0 is no FastEmit)", fe);
    if (lw > 0 && !(ls >= 0 && ls <= 1))
        return esp_fail(err, "model.model_conf.auxiliary_lm_loss_smoothing: %g is outside [0, 1]", ls);
    out->no_ctc = cw == 0;
    out->tr_lm_lin = lw > 0; /* ESPnet2 builds lm_lin only then */
    if (r) {
        r->tr_weight = (float)tw, r->ctc_weight = (float)cw;
        r->ctc_dropout = c ? (float)or_default(c->auxiliary_ctc_dropout_rate, 0) : 0;
        r->tr_fastemit = (float)fe, r->tr_lm_weight = (float)lw, r->tr_lm_smoothing = (float)ls;
    }
    return 0;
}

/* Everything but the rates (r NULL) or with them. */
static int body_from_cfg(model_dims *out, model_rates *r, const model_cfg *m, esp_err *err)
{
    const encoder_conf_cfg *e = m->encoder_conf;
    if (check_encoder_keys(e, err) != 0) return -1;
    if (m->ctc_conf)
        return esp_fail(err, "model.ctc_conf: the ASR task's; the asr_transducer task's CTC is model_conf."
                             "auxiliary_ctc_weight / auxiliary_ctc_dropout_rate");
    if (m->decoder && strcmp(m->decoder, "rnn") && strcmp(m->decoder, "stateless"))
        return esp_fail(err, "model.decoder: %s is not built for the asr_transducer task (rnn and stateless are)",
                        m->decoder);
    int embed = 0, last = 0;
    if (validate_architecture(e, out->idim, &embed, &last, err) != 0) return -1;
    out->blocks = 0, out->n_groups = 0;
    const body_main_cfg *mc = e->main_conf; /* the kinds here, each block's eps and partial in block_group */
    out->norm.kind = norm_kind_of(mc ? mc->norm_type : NULL);
    out->csgu_norm.kind = norm_kind_of(mc ? mc->conv_mod_norm_type : NULL);
    for (unsigned i = 0; i < e->n_body_conf; i++) {
        const body_block_cfg *c = &e->body_conf[i];
        int64_t n = int_or(c->num_blocks, 1);
        if (n < 1 || n > 1024) return esp_fail(err, B "[%u].num_blocks: %lld is outside [1, 1024]", i, (long long)n);
        if (block_group(out, r, c, i, (int)n, err) != 0) return -1;
        out->blocks += (int)n;
    }
    if (out->blocks == 0) return esp_fail(err, B ": no blocks");
    int xformers = 0;
    for (int g = 0; g < out->n_groups; g++) xformers += out->group[g].encoder != ENC_CONV1D;
    if (!xformers) return esp_fail(err, B ": conv1d blocks alone are not built (add an X-former block after them)");
    out->d = last; /* after_norm (norm_blocks), ctc_lin and the joint network's lin_enc read the last block's */
    groups_dims(out, r);
    /* the asr_transducer blocks' gate and convolution, whatever the first group's kind */
    out->gate_act = ACT_IDENTITY, out->linear_after_conv = 0;
    out->macaron = 1, out->rel_pos = 1, out->body = 1;
    if (input_dims(out, e->input_conf, &e->body_conf[0], embed, err) != 0 || main_dims(out, r, e->main_conf, err) != 0 ||
        decoder_dims(out, r, m, err) != 0 || loss_dims(out, r, m->model_conf, err) != 0)
        return -1;
    return 0;
}

const char *body_only_key(const model_cfg *m)
{
    const encoder_conf_cfg *e = m ? m->encoder_conf : NULL;
    const decoder_conf_cfg *d = m ? m->decoder_conf : NULL;
    const model_conf_cfg *c = m ? m->model_conf : NULL;
    if (!m) return NULL;
    if (e && e->input_conf) return "encoder_conf.input_conf";
    if (e && e->main_conf) return "encoder_conf.main_conf";
    if (m->joint_network_conf) return "joint_network_conf";
    if (d && (d->embed_size || d->embed_dropout_rate || d->embed_pad)) return "decoder_conf.embed_size";
    if (c && (c->transducer_weight || c->auxiliary_ctc_weight || c->auxiliary_ctc_dropout_rate ||
              c->auxiliary_lm_loss_weight || c->auxiliary_lm_loss_smoothing || c->fastemit_lambda ||
              c->use_k2_pruned_loss || c->warmup_steps || c->validation_nstep))
        return "model_conf (transducer_weight, auxiliary_*, fastemit_lambda, use_k2_pruned_loss, ...)";
    return NULL;
}

int body_dims_from_cfg(model_dims *out, const model_cfg *m, esp_err *err)
{
    model_rates r = {0};
    return body_from_cfg(out, &r, m, err);
}

void body_rates_from_cfg(model_rates *r, const model_cfg *m)
{
    model_dims d = {0};
    esp_err e;
    ESP_CHECK(body_from_cfg(&d, r, m, &e) == 0); /* body_dims_from_cfg accepted it */
}
