/* model.encoder and encoder_conf's structural keys -> model_dims: ESPnet2's TransformerEncoder,
 * ConformerEncoder, EBranchformerEncoder, ContextualBlockTransformerEncoder and
 * ContextualBlockConformerEncoder arguments with
 * their defaults. A key is implemented, or accepted where its
 * value gives the model as implemented (ESPnet2's default, or a key without effect on it), or
 * refused here: never ignored. The sizes and rates are read by model_dims_from_cfg and stage 5. */
#include <string.h>

#include "core/nn/model_params.h"

/* The keys only ConformerEncoder.__init__ takes: TransformerEncoder would raise a TypeError. The
 * E-Branchformer shares rel_pos_type, zero_triu and max_pos_emb_len (shared = 0 leaves them out). */
static const char *conformer_only_key(const encoder_conf_cfg *e, int shared)
{
    if (e->macaron_style) return "macaron_style";
    if (shared && e->rel_pos_type) return "rel_pos_type";
    if (e->selfattention_layer_type) return "selfattention_layer_type";
    if (e->activation_type) return "activation_type";
    if (e->use_cnn_module) return "use_cnn_module";
    if (shared && e->zero_triu) return "zero_triu";
    if (e->cnn_module_kernel) return "cnn_module_kernel";
    if (e->ctc_trim) return "ctc_trim";
    if (e->stochastic_depth_rate) return "stochastic_depth_rate";
    if (shared && e->max_pos_emb_len) return "max_pos_emb_len";
    return NULL;
}

/* The keys only EBranchformerEncoder.__init__ takes (rel_pos_type, zero_triu, max_pos_emb_len aside). */
static const char *ebranchformer_only_key(const encoder_conf_cfg *e)
{
    if (e->attention_layer_type) return "attention_layer_type";
    if (e->cgmlp_linear_units) return "cgmlp_linear_units";
    if (e->cgmlp_conv_kernel) return "cgmlp_conv_kernel";
    if (e->use_linear_after_conv) return "use_linear_after_conv";
    if (e->gate_activation) return "gate_activation";
    if (e->use_ffn) return "use_ffn";
    if (e->macaron_ffn) return "macaron_ffn";
    if (e->ffn_activation_type) return "ffn_activation_type";
    if (e->merge_conv_kernel) return "merge_conv_kernel";
    return NULL;
}

/* The keys only ContextualBlockTransformerEncoder.__init__ takes. */
static const char *contextual_only_key(const encoder_conf_cfg *e)
{
    if (e->block_size) return "block_size";
    if (e->hop_size) return "hop_size";
    if (e->look_ahead) return "look_ahead";
    if (e->init_average) return "init_average";
    if (e->ctx_pos_enc) return "ctx_pos_enc";
    return NULL;
}

/* An odd kernel size in [1, 1023] ('SAME' padding), or the default when the key is left out. */
static int odd_kernel(const int64_t *v, int64_t dflt, const char *key, int *out, esp_err *err)
{
    int64_t k = v ? *v : dflt;
    if (k < 1 || k % 2 == 0 || k > 1023)
        return esp_fail(err, "model.encoder_conf.%s: %lld must be odd and positive ('SAME' padding)", key,
                        (long long)k);
    *out = (int)k;
    return 0;
}

/* The Conformer keys ContextualBlockConformerEncoder.__init__ does not take. */
static const char *not_ctx_conformer_key(const encoder_conf_cfg *e)
{
    if (e->rel_pos_type) return "rel_pos_type";
    if (e->zero_triu) return "zero_triu";
    if (e->ctc_trim) return "ctc_trim";
    if (e->stochastic_depth_rate) return "stochastic_depth_rate";
    if (e->max_pos_emb_len) return "max_pos_emb_len";
    return NULL;
}

/* ContextualBlockTransformerEncoder (conformer 0) and ContextualBlockConformerEncoder (1): the
 * TransformerEncoder's keys (the ConformerEncoder's for the latter, but its relative-position ones)
 * but pos_enc_layer_type, interctc_* and layer_drop_rate (TypeError there), and the block geometry. */
static int contextual_dims(model_dims *out, const encoder_conf_cfg *e, int input_layer, int conformer, esp_err *err)
{
    const char *cls = conformer ? "ContextualBlockConformerEncoder" : "ContextualBlockTransformerEncoder";
    const char *key = e ? (conformer ? not_ctx_conformer_key(e) : conformer_only_key(e, 1)) : NULL;
    if (!key && e) key = ebranchformer_only_key(e);
    if (!key && e && e->pos_enc_layer_type) key = "pos_enc_layer_type";
    if (!key && e && e->n_interctc_layer_idx) key = "interctc_layer_idx";
    if (!key && e && e->interctc_use_conditioning) key = "interctc_use_conditioning";
    if (!key && e && e->layer_drop_rate) key = "layer_drop_rate";
    if (!key && e && e->qk_norm) key = "qk_norm";
    if (key)
        return esp_fail(err, "model.encoder_conf.%s: not a key of %s, which would raise a TypeError (remove it; its own "
                             "keys: block_size, hop_size, look_ahead, init_average, ctx_pos_enc%s)", key, cls,
                        conformer ? ", and the Conformer's macaron_style, use_cnn_module, cnn_module_kernel, "
                                    "activation_type" : "");
    if (input_layer != IN_CONV2D && input_layer != IN_CONV2D6 && input_layer != IN_CONV2D8 && input_layer != IN_LINEAR)
        return esp_fail(err, "model.encoder_conf.input_layer: %s is not supported by %s (use conv2d, conv2d6, conv2d8 or "
                             "linear)", input_layer_name(input_layer), conformer ? "contextual_block_conformer" :
                                                                         "contextual_block_transformer");
    int64_t bs = e && e->block_size ? *e->block_size : 40, hop = e && e->hop_size ? *e->hop_size : 16;
    int64_t la = e && e->look_ahead ? *e->look_ahead : 16;
    if (bs < 1 || hop < 1 || la < 0 || hop + la > bs || bs > 100000)
        return esp_fail(err, "model.encoder_conf: block_size %lld, hop_size %lld, look_ahead %lld: need hop_size >= 1, "
                             "look_ahead >= 0 and hop_size + look_ahead <= block_size <= 100000 (block_size 0, "
                             "ESPnet's whole-utterance mode, cannot stream)", (long long)bs, (long long)hop,
                        (long long)la);
    if (e && e->init_average && !*e->init_average)
        return esp_fail(err, "model.encoder_conf.init_average: false (max-initialized context vectors) is not "
                             "supported: ESPnet's encoder fails on it too (assigns torch.max's tuple); use true");
    int k = 0;
    if (conformer && odd_kernel(e ? e->cnn_module_kernel : NULL, 31, "cnn_module_kernel", &k, err) != 0) return -1;
    if (out) {
        out->encoder = ENC_CONTEXTUAL;
        out->block_size = (int)bs, out->hop_size = (int)hop, out->look_ahead = (int)la;
        out->ctx_pos_enc = e && e->ctx_pos_enc ? *e->ctx_pos_enc : 1;
        /* The Conformer layer: always plain self-attention with absolute positions (ESPnet builds
         * MultiHeadedAttention whatever selfattention_layer_type says). */
        out->ctx_conformer = conformer;
        if (conformer) {
            out->macaron = e && e->macaron_style ? *e->macaron_style : 0;
            out->rel_pos = 0;
            out->use_cnn = e && e->use_cnn_module ? *e->use_cnn_module : 1;
            out->cnn_kernel = k;
            out->act = e && e->activation_type && !strcmp(e->activation_type, "relu") ? ACT_RELU : ACT_SWISH;
        }
    }
    return 0;
}

/* The attention of both relative-position encoders: pos_enc_layer_type rel_pos with the relative
 * attention (rel_selfattn) or abs_pos with plain attention (selfattn); att_key names the key. */
static int attention_kind(const char *pos, const char *att, const char *rel, int rel_given, const char *att_key,
                          int *rel_pos, esp_err *err)
{
    *rel_pos = !strcmp(pos, "rel_pos");
    if (*rel_pos && strcmp(att, "rel_selfattn"))
        return esp_fail(err, "model.encoder_conf: pos_enc_layer_type rel_pos needs %s rel_selfattn, not %s (ESPnet2 "
                             "asserts the same)", att_key, att);
    if (!*rel_pos && strcmp(att, "selfattn"))
        return esp_fail(err, "model.encoder_conf: pos_enc_layer_type %s needs %s selfattn, not %s (ESPnet2 asserts "
                             "the same)", pos, att_key, att);
    if (*rel_pos && !strcmp(rel, "legacy"))
        return esp_fail(err, "model.encoder_conf.rel_pos_type: legacy%s (LegacyRelPositionalEncoding) is not "
                             "supported (set rel_pos_type: latest, as ESPnet2's Conformer recipes do)",
                        rel_given ? "" : ", ESPnet2's default,");
    return 0;
}

/* Keys both encoders take whose values other than ESPnet2's default change the model. */
static int check_common(const encoder_conf_cfg *e, esp_err *err)
{
    if (e->concat_after && *e->concat_after)
        return esp_fail(err, "model.encoder_conf.concat_after: true is not supported (use false: x + att(x))");
    if (e->qk_norm && *e->qk_norm)
        return esp_fail(err, "model.encoder_conf.qk_norm: true is not supported (use false)");
    /* positionwise_layer_type is linear (the schema's rule), which ignores positionwise_conv_kernel_size;
     * padding_idx only matters for input_layer embed (refused): accepted as it leaves this model;
     * interctc_*: interctc_dims_from_cfg. use_flash_attn warns (config_validate.c),
     * as the decoder's does. */
    return 0;
}

static int conformer_dims(model_dims *out, const encoder_conf_cfg *e, esp_err *err)
{
    const char *pos = e && e->pos_enc_layer_type ? e->pos_enc_layer_type : "rel_pos";
    const char *att = e && e->selfattention_layer_type ? e->selfattention_layer_type : "rel_selfattn";
    const char *rel = e && e->rel_pos_type ? e->rel_pos_type : "legacy";
    int rel_pos;
    if (attention_kind(pos, att, rel, e && e->rel_pos_type, "selfattention_layer_type", &rel_pos, err) != 0)
        return -1;
    if (e && e->layer_drop_rate && *e->layer_drop_rate != 0)
        return esp_fail(err, "model.encoder_conf.layer_drop_rate: %g is not supported by the conformer (use 0.0; "
                             "e_branchformer has it)", *e->layer_drop_rate);
    if (e && e->zero_triu && *e->zero_triu)
        return esp_fail(err, "model.encoder_conf.zero_triu: true is not supported (use false)");
    if (e && e->ctc_trim && *e->ctc_trim)
        return esp_fail(err, "model.encoder_conf.ctc_trim: true is not supported (use false)");
    if (e && e->stochastic_depth_rate && *e->stochastic_depth_rate != 0)
        return esp_fail(err, "model.encoder_conf.stochastic_depth_rate: %g is not supported (use 0.0)",
                        *e->stochastic_depth_rate);
    int k = 0;
    if (odd_kernel(e ? e->cnn_module_kernel : NULL, 31, "cnn_module_kernel", &k, err) != 0) return -1;
    if (e && e->max_pos_emb_len && *e->max_pos_emb_len < 1)
        return esp_fail(err, "model.encoder_conf.max_pos_emb_len: %lld must be positive", (long long)*e->max_pos_emb_len);
    /* max_pos_emb_len only sizes ESPnet's first table, which grows with the input: no effect. */
    if (out) {
        out->encoder = ENC_CONFORMER;
        out->macaron = e && e->macaron_style ? *e->macaron_style : 0;
        out->rel_pos = rel_pos;
        out->use_cnn = e && e->use_cnn_module ? *e->use_cnn_module : 1;
        out->cnn_kernel = k;
        out->act = e && e->activation_type && !strcmp(e->activation_type, "relu") ? ACT_RELU : ACT_SWISH;
    }
    return 0;
}

/* encoder_conf.input_layer: the config's spelling (null is the plain scalar "null", which the
 * config keeps; core/config/config_validate.c) to input_layer_kind. */
static int input_layer_of(const encoder_conf_cfg *e, int conformer, int *kind, esp_err *err)
{
    const char *s = e && e->input_layer ? e->input_layer : "conv2d";
    for (int k = IN_CONV2D; k <= IN_NONE; k++)
        if (!strcmp(s, input_layer_name(k))) *kind = k;
    if (*kind < 0)
        return esp_fail(err, "model.encoder_conf.input_layer: %s is not supported (supported: conv2d, conv2d2, conv2d6, "
                             "conv2d8, conv1d2, linear, null)", s);
    if (*kind == IN_CONV1D2 && conformer)
        return esp_fail(err, "model.encoder_conf.input_layer: conv1d2 is a TransformerEncoder input layer; "
                             "ConformerEncoder has none (ESPnet2 raises 'unknown input_layer')");
    return 0;
}

/* EBranchformerEncoder: rel_pos_type defaults to latest there, num_blocks to 12; the keys it does
 * not take (ConformerEncoder's, concat_after, positionwise_conv_kernel_size) are errors as its
 * TypeError (normalize_before: true, which the recipes' base config writes, warns in stage 5). */
static int ebranchformer_dims(model_dims *out, const encoder_conf_cfg *e, esp_err *err)
{
    const char *key = e ? conformer_only_key(e, 0) : NULL;
    if (!key && e && e->concat_after) key = "concat_after";
    if (!key && e && e->positionwise_conv_kernel_size) key = "positionwise_conv_kernel_size";
    if (key)
        return esp_fail(err, "model.encoder_conf.%s: not a key of EBranchformerEncoder, which would raise a "
                             "TypeError (remove it; e_branchformer keys: attention_layer_type, cgmlp_linear_units, "
                             "cgmlp_conv_kernel, use_linear_after_conv, gate_activation, use_ffn, macaron_ffn, "
                             "ffn_activation_type, merge_conv_kernel, ...)", key);
    const char *pos = e && e->pos_enc_layer_type ? e->pos_enc_layer_type : "rel_pos";
    const char *att = e && e->attention_layer_type ? e->attention_layer_type : "rel_selfattn";
    const char *rel = e && e->rel_pos_type ? e->rel_pos_type : "latest";
    int rel_pos;
    if (attention_kind(pos, att, rel, 1, "attention_layer_type", &rel_pos, err) != 0) return -1;
    if (e && e->zero_triu && *e->zero_triu)
        return esp_fail(err, "model.encoder_conf.zero_triu: true is not supported (use false)");
    int64_t units = e && e->cgmlp_linear_units ? *e->cgmlp_linear_units : 2048;
    if (units < 2 || units % 2)
        return esp_fail(err, "model.encoder_conf.cgmlp_linear_units: %lld must be even and >= 2 (the gating unit "
                             "splits it in halves)", (long long)units);
    int ck = 0, mk = 0;
    if (odd_kernel(e ? e->cgmlp_conv_kernel : NULL, 31, "cgmlp_conv_kernel", &ck, err) != 0 ||
        odd_kernel(e ? e->merge_conv_kernel : NULL, 3, "merge_conv_kernel", &mk, err) != 0)
        return -1;
    if (e && e->max_pos_emb_len && *e->max_pos_emb_len < 1)
        return esp_fail(err, "model.encoder_conf.max_pos_emb_len: %lld must be positive", (long long)*e->max_pos_emb_len);
    /* positionwise_layer_type is linear (the schema's rule); max_pos_emb_len only sizes ESPnet's first
     * table (no effect); layer_drop_rate is a training rate (stage 5 reads it). */
    if (out) {
        out->encoder = ENC_EBRANCHFORMER;
        if (!e || !e->num_blocks) out->blocks = 12;
        out->rel_pos = rel_pos;
        out->use_ffn = e && e->use_ffn ? *e->use_ffn : 0;
        out->macaron = e && e->macaron_ffn ? *e->macaron_ffn : 0;
        out->act = e && e->ffn_activation_type && !strcmp(e->ffn_activation_type, "relu") ? ACT_RELU : ACT_SWISH;
        out->cgmlp_units = (int)units;
        out->cgmlp_kernel = ck;
        out->linear_after_conv = e && e->use_linear_after_conv ? *e->use_linear_after_conv : 0;
        const char *g = e && e->gate_activation ? e->gate_activation : "identity";
        out->gate_act = !strcmp(g, "relu") ? ACT_RELU : !strcmp(g, "swish") ? ACT_SWISH : ACT_IDENTITY;
        out->merge_kernel = mk;
    }
    return 0;
}

int encoder_dims_from_cfg(model_dims *out, const model_cfg *m, esp_err *err)
{
    const encoder_conf_cfg *e = m ? m->encoder_conf : NULL;
    int conformer = m && m->encoder && !strcmp(m->encoder, "conformer");
    int ebf = m && m->encoder && !strcmp(m->encoder, "e_branchformer");
    int ctx = m && m->encoder && !strcmp(m->encoder, "contextual_block_transformer");
    int ctxc = m && m->encoder && !strcmp(m->encoder, "contextual_block_conformer");
    if (m && m->encoder && !conformer && !ebf && !ctx && !ctxc && strcmp(m->encoder, "transformer"))
        return esp_fail(err, "model.encoder: '%s' is not supported (supported: transformer, conformer, e_branchformer, "
                             "contextual_block_transformer, contextual_block_conformer)", m->encoder);
    if (e && check_common(e, err) != 0) return -1;
    int kind = -1;
    if (input_layer_of(e, conformer, &kind, err) != 0) return -1;
    if (out) out->input_layer = kind;
    if (ctx || ctxc) return contextual_dims(out, e, kind, ctxc, err);
    const char *key = e ? contextual_only_key(e) : NULL;
    if (key)
        return esp_fail(err, "model.encoder_conf.%s: a contextual block encoder key, which the %s encoder does not "
                             "take (set model.encoder: contextual_block_transformer or contextual_block_conformer, "
                             "or remove it)", key,
                        m->encoder ? m->encoder : "transformer");
    if (ebf) return ebranchformer_dims(out, e, err);
    key = e ? ebranchformer_only_key(e) : NULL;
    if (key)
        return esp_fail(err, "model.encoder_conf.%s: an EBranchformerEncoder key, which the %s encoder does not take "
                             "(set model.encoder: e_branchformer, or remove it)", key,
                        conformer ? "conformer" : "transformer");
    if (conformer) return conformer_dims(out, e, err);
    if (e && e->layer_drop_rate && *e->layer_drop_rate != 0)
        return esp_fail(err, "model.encoder_conf.layer_drop_rate: %g is not supported by the transformer (use 0.0; "
                             "e_branchformer has it)", *e->layer_drop_rate);
    key = e ? conformer_only_key(e, 1) : NULL;
    if (key)
        return esp_fail(err, "model.encoder_conf.%s: a ConformerEncoder key, which the transformer encoder does not "
                             "take (set model.encoder: conformer, or remove it)", key);
    if (e && e->pos_enc_layer_type && strcmp(e->pos_enc_layer_type, "abs_pos"))
        return esp_fail(err, "model.encoder_conf.pos_enc_layer_type: %s is for the conformer encoder; the transformer "
                             "encoder supports abs_pos", e->pos_enc_layer_type);
    if (out) out->encoder = ENC_TRANSFORMER;
    return 0;
}

int interctc_dims_from_cfg(model_dims *out, const model_cfg *m, esp_err *err)
{
    const encoder_conf_cfg *e = m ? m->encoder_conf : NULL;
    out->n_interctc = 0;
    out->interctc_cond = e && e->interctc_use_conditioning && *e->interctc_use_conditioning;
    unsigned n = e ? e->n_interctc_layer_idx : 0;
    if ((n || out->interctc_cond) && out->no_ctc)
        return esp_fail(err, "model.encoder_conf.interctc_%s: intermediate CTC needs the CTC branch, and "
                             "model_conf.ctc_weight 0 has none (ESPnet2 then fails on ctc None)",
                        n ? "layer_idx" : "use_conditioning");
    /* The encoders test `layer_idx + 1 in interctc_layer_idx` block by block: the layers in
     * ascending order, each once, however the list writes them. */
    for (int l = 1; l < out->blocks && n; l++) {
        int hit = 0;
        for (unsigned i = 0; i < n; i++) hit |= e->interctc_layer_idx[i] == l;
        if (!hit) continue;
        if (out->n_interctc == MODEL_MAX_INTERCTC)
            return esp_fail(err, "model.encoder_conf.interctc_layer_idx: more than %d layers", MODEL_MAX_INTERCTC);
        out->interctc[out->n_interctc++] = l - 1;
    }
    for (unsigned i = 0; i < n; i++)
        if (e->interctc_layer_idx[i] < 1 || e->interctc_layer_idx[i] >= out->blocks)
            return esp_fail(err, "model.encoder_conf.interctc_layer_idx: %lld is outside [1, %d] (ESPnet2 asserts 0 < "
                                 "idx < num_blocks %d: the last block's output is the CTC branch itself)",
                            (long long)e->interctc_layer_idx[i], out->blocks - 1, out->blocks);
    return 0;
}
