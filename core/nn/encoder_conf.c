/* model.encoder and encoder_conf's structural keys -> model_dims: ESPnet2's TransformerEncoder and
 * ConformerEncoder arguments with their defaults. A key is implemented, or accepted where its
 * value gives the model as implemented (ESPnet2's default, or a key without effect on it), or
 * refused here: never ignored. The sizes and rates are read by model_dims_from_cfg and stage 5. */
#include <string.h>

#include "core/nn/model_params.h"

/* The keys only ConformerEncoder.__init__ takes: TransformerEncoder would raise a TypeError. */
static const char *conformer_only_key(const encoder_conf_cfg *e)
{
    if (e->macaron_style) return "macaron_style";
    if (e->rel_pos_type) return "rel_pos_type";
    if (e->selfattention_layer_type) return "selfattention_layer_type";
    if (e->activation_type) return "activation_type";
    if (e->use_cnn_module) return "use_cnn_module";
    if (e->zero_triu) return "zero_triu";
    if (e->cnn_module_kernel) return "cnn_module_kernel";
    if (e->ctc_trim) return "ctc_trim";
    if (e->stochastic_depth_rate) return "stochastic_depth_rate";
    if (e->max_pos_emb_len) return "max_pos_emb_len";
    return NULL;
}

/* Keys both encoders take whose values other than ESPnet2's default change the model. */
static int check_common(const encoder_conf_cfg *e, esp_err *err)
{
    if (e->concat_after && *e->concat_after)
        return esp_fail(err, "model.encoder_conf.concat_after: true is not supported (use false: x + att(x))");
    if (e->n_interctc_layer_idx)
        return esp_fail(err, "model.encoder_conf.interctc_layer_idx: intermediate CTC is not supported yet (use [])");
    if (e->layer_drop_rate && *e->layer_drop_rate != 0)
        return esp_fail(err, "model.encoder_conf.layer_drop_rate: %g is not supported (use 0.0)", *e->layer_drop_rate);
    if (e->qk_norm && *e->qk_norm)
        return esp_fail(err, "model.encoder_conf.qk_norm: true is not supported (use false)");
    /* positionwise_layer_type is linear (the schema's rule), which ignores positionwise_conv_kernel_size;
     * padding_idx only matters for input_layer embed (refused), interctc_use_conditioning only with
     * interctc_layer_idx: accepted as they leave this model. use_flash_attn warns (config_validate.c),
     * as the decoder's does. */
    return 0;
}

static int conformer_dims(model_dims *out, const encoder_conf_cfg *e, esp_err *err)
{
    const char *pos = e && e->pos_enc_layer_type ? e->pos_enc_layer_type : "rel_pos";
    const char *att = e && e->selfattention_layer_type ? e->selfattention_layer_type : "rel_selfattn";
    const char *rel = e && e->rel_pos_type ? e->rel_pos_type : "legacy";
    int rel_pos = !strcmp(pos, "rel_pos");
    if (rel_pos && strcmp(att, "rel_selfattn"))
        return esp_fail(err, "model.encoder_conf: pos_enc_layer_type rel_pos needs selfattention_layer_type "
                             "rel_selfattn, not %s (ESPnet2 asserts the same)", att);
    if (!rel_pos && strcmp(att, "selfattn"))
        return esp_fail(err, "model.encoder_conf: pos_enc_layer_type %s needs selfattention_layer_type selfattn, not %s "
                             "(ESPnet2 asserts the same)", pos, att);
    if (rel_pos && !strcmp(rel, "legacy"))
        return esp_fail(err, "model.encoder_conf.rel_pos_type: legacy%s (LegacyRelPositionalEncoding) is not "
                             "supported (set rel_pos_type: latest, as ESPnet2's Conformer recipes do)",
                        e && e->rel_pos_type ? "" : ", ESPnet2's default,");
    if (e && e->zero_triu && *e->zero_triu)
        return esp_fail(err, "model.encoder_conf.zero_triu: true is not supported (use false)");
    if (e && e->ctc_trim && *e->ctc_trim)
        return esp_fail(err, "model.encoder_conf.ctc_trim: true is not supported (use false)");
    if (e && e->stochastic_depth_rate && *e->stochastic_depth_rate != 0)
        return esp_fail(err, "model.encoder_conf.stochastic_depth_rate: %g is not supported (use 0.0)",
                        *e->stochastic_depth_rate);
    int64_t k = e && e->cnn_module_kernel ? *e->cnn_module_kernel : 31;
    if (k < 1 || k % 2 == 0 || k > 1023)
        return esp_fail(err, "model.encoder_conf.cnn_module_kernel: %lld must be odd and positive ('SAME' padding)",
                        (long long)k);
    if (e && e->max_pos_emb_len && *e->max_pos_emb_len < 1)
        return esp_fail(err, "model.encoder_conf.max_pos_emb_len: %lld must be positive", (long long)*e->max_pos_emb_len);
    /* max_pos_emb_len only sizes ESPnet's first table, which grows with the input: no effect. */
    if (out) {
        out->encoder = ENC_CONFORMER;
        out->macaron = e && e->macaron_style ? *e->macaron_style : 0;
        out->rel_pos = rel_pos;
        out->use_cnn = e && e->use_cnn_module ? *e->use_cnn_module : 1;
        out->cnn_kernel = (int)k;
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

int encoder_dims_from_cfg(model_dims *out, const model_cfg *m, esp_err *err)
{
    const encoder_conf_cfg *e = m ? m->encoder_conf : NULL;
    int conformer = m && m->encoder && !strcmp(m->encoder, "conformer");
    if (m && m->encoder && !conformer && strcmp(m->encoder, "transformer"))
        return esp_fail(err, "model.encoder: '%s' is not supported (supported: transformer, conformer)", m->encoder);
    if (e && check_common(e, err) != 0) return -1;
    int kind = -1;
    if (input_layer_of(e, conformer, &kind, err) != 0) return -1;
    if (out) out->input_layer = kind;
    if (conformer) return conformer_dims(out, e, err);
    const char *key = e ? conformer_only_key(e) : NULL;
    if (key)
        return esp_fail(err, "model.encoder_conf.%s: a ConformerEncoder key, which the transformer encoder does not "
                             "take (set model.encoder: conformer, or remove it)", key);
    if (e && e->pos_enc_layer_type && strcmp(e->pos_enc_layer_type, "abs_pos"))
        return esp_fail(err, "model.encoder_conf.pos_enc_layer_type: %s is for the conformer encoder; the transformer "
                             "encoder supports abs_pos", e->pos_enc_layer_type);
    if (out) out->encoder = ENC_TRANSFORMER;
    return 0;
}
