/* The decoder's config keys into model_dims / model_rates; see decoder_conf.h. */
#include "core/nn/decoder_conf.h"

#include <string.h>

#include "core/nn/body_conf.h"

static double ctc_weight_of(const model_cfg *m)
{
    /* The schema writes ESPnet2's default 0.5 when a decoder is configured without one. */
    return m && m->model_conf ? m->model_conf->ctc_weight : 0.5;
}

static int decoder_is(const model_cfg *m, const char *name) { return m && m->decoder && !strcmp(m->decoder, name); }

int decoder_in_cfg(const model_cfg *m)
{
    return decoder_is(m, "transformer") && ctc_weight_of(m) < 1.0;
}

int transducer_in_cfg(const model_cfg *m) { return decoder_is(m, "transducer") || body_in_cfg(m); }

int ctc_in_cfg(const model_cfg *m)
{
    if (body_in_cfg(m)) { /* the asr_transducer task: ctc_lin with auxiliary_ctc_weight > 0 */
        const double *w = m->model_conf ? m->model_conf->auxiliary_ctc_weight : NULL;
        return w && *w > 0;
    }
    return !((decoder_is(m, "transformer") || decoder_is(m, "transducer")) && ctc_weight_of(m) == 0.0);
}

int ctc_times_in_cfg(const model_cfg *m) { return ctc_in_cfg(m) && !body_shrinks_frames(m); }

/* ESPnet2's TransducerDecoder and JointNetwork; their keys against the TransformerDecoder's. */
static int transducer_dims(model_dims *dims, const model_cfg *m, esp_err *err)
{
    const decoder_conf_cfg *c = m->decoder_conf;
    if (c && (c->attention_heads || c->linear_units || c->num_blocks))
        return esp_fail(err, "model.decoder_conf: attention_heads, linear_units and num_blocks are "
                             "TransformerDecoder's; a transducer decoder takes rnn_type, num_layers, hidden_size, "
                             "dropout and dropout_embed");
    dims->tr_layers = c && c->num_layers ? (int)c->num_layers : 1;
    dims->tr_hidden = c && c->hidden_size ? (int)c->hidden_size : 320;
    dims->tr_gru = c && c->rnn_type && !strcmp(c->rnn_type, "gru"); /* lstm | gru (config_validate.c) */
    const joint_net_conf_cfg *j = m->joint_net_conf;
    dims->tr_joint = j && j->joint_space_size ? (int)j->joint_space_size : 256;
    dims->tr_no_dec_bias = j && j->lin_dec_bias && !*j->lin_dec_bias;
    dims->no_ctc = ctc_weight_of(m) == 0.0;
    return 0;
}

int decoder_dims_from_cfg(model_dims *dims, const model_cfg *m, esp_err *err)
{
    dims->dec_blocks = dims->dec_heads = dims->dec_ff = 0;
    dims->tr_layers = dims->tr_hidden = dims->tr_joint = dims->tr_no_dec_bias = dims->tr_embed = dims->tr_gru = 0;
    dims->no_ctc = 0;
    if (m && m->joint_net_conf && !transducer_in_cfg(m))
        return esp_fail(err, "model.joint_net_conf: the joint network goes with model.decoder: transducer");
    if (!m || !m->decoder || (strcmp(m->decoder, "transformer") != 0 && strcmp(m->decoder, "transducer") != 0))
        return 0;
    double w = ctc_weight_of(m);
    if (!(w >= 0.0 && w <= 1.0))
        return esp_fail(err, "model.model_conf.ctc_weight: %g is outside [0, 1]", w);
    if (transducer_in_cfg(m)) return transducer_dims(dims, m, err);
    const decoder_conf_cfg *tc = m->decoder_conf;
    if (tc && (tc->rnn_type || tc->num_layers || tc->hidden_size || tc->dropout || tc->dropout_embed))
        return esp_fail(err, "model.decoder_conf: rnn_type, num_layers, hidden_size, dropout and dropout_embed are "
                             "TransducerDecoder's (model.decoder: transducer)");
    if (w == 1.0) {
        log_info("model.model_conf.ctc_weight 1.0: no attention decoder (ESPnet2 sets the decoder to none)");
        return 0;
    }
    const decoder_conf_cfg *c = m->decoder_conf;
    dims->dec_heads = c && c->attention_heads ? (int)c->attention_heads : 4;
    dims->dec_ff = c && c->linear_units ? (int)c->linear_units : 2048;
    dims->dec_blocks = c && c->num_blocks ? (int)c->num_blocks : 6;
    dims->no_ctc = w == 0.0;
    if (dims->dec_heads <= 0 || dims->d % dims->dec_heads)
        return esp_fail(err, "model.decoder_conf.attention_heads: %d must divide the encoder's output_size %d (the "
                             "decoder's width)", dims->dec_heads, dims->d);
    if (dims->dec_ff <= 0 || dims->dec_blocks <= 0)
        return esp_fail(err, "model.decoder_conf: linear_units and num_blocks must be positive");
    double lsm = m->model_conf ? m->model_conf->lsm_weight : 0;
    if (!(lsm >= 0.0 && lsm < 1.0)) return esp_fail(err, "model.model_conf.lsm_weight: %g is outside [0, 1)", lsm);
    return 0;
}

void decoder_rates_from_cfg(model_rates *r, const model_cfg *m)
{
    const decoder_conf_cfg *c = m ? m->decoder_conf : NULL;
    r->dec_dropout = c ? (float)c->dropout_rate : 0.1f;
    r->dec_pos_dropout = c ? (float)c->positional_dropout_rate : 0.1f;
    r->dec_self_att_dropout = c ? (float)c->self_attention_dropout_rate : 0.0f;
    r->dec_src_att_dropout = c ? (float)c->src_attention_dropout_rate : 0.0f;
    r->ctc_weight = (float)ctc_weight_of(m);
    r->lsm_weight = m && m->model_conf ? (float)m->model_conf->lsm_weight : 0.0f;
    r->length_normalized_loss = m && m->model_conf && m->model_conf->length_normalized_loss;
    r->interctc_weight = m && m->model_conf ? (float)m->model_conf->interctc_weight : 0.0f;
    r->tr_dropout = c && transducer_in_cfg(m) ? (float)c->dropout : 0.0f;
    r->tr_dropout_embed = c && transducer_in_cfg(m) ? (float)c->dropout_embed : 0.0f;
    r->tr_weight = 1.0f;
}
