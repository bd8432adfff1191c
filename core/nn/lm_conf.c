/* The LM task's config keys into model_dims / model_rates; see lm_conf.h. */
#include "core/nn/lm_conf.h"

#include <string.h>

/* ESPnet's LMTask builds seq_rnn when model.lm is not given (its lm_choices default). */
static int is_seq_rnn(const model_cfg *m) { return !m || !m->lm || !strcmp(m->lm, "seq_rnn"); }

/* A key of the other class's lm_conf: ESPnet would fail on it (an unexpected keyword argument). */
static int foreign_key(const char *key, const char *lm, esp_err *err)
{
    return esp_fail(err, "model.lm_conf.%s: not an argument of lm: %s (%s)", key, lm,
                    !strcmp(lm, "seq_rnn") ? "SequentialRNNLM: unit, nhid, nlayers, dropout_rate, rnn_type, "
                                             "tie_weights, ignore_id"
                                           : "TransformerLM: pos_enc, embed_unit, att_unit, head, unit, layer, "
                                             "dropout_rate, positional_dropout_rate, attention_dropout_rate");
}

static int seq_rnn_dims(model_dims *out, const lm_conf_cfg *c, esp_err *err)
{
    if (c) { /* TransformerLM's keys (absent: 0 / NULL; given, they are >= 1 or a string) */
        if (c->pos_enc) return foreign_key("pos_enc", "seq_rnn", err);
        if (c->embed_unit) return foreign_key("embed_unit", "seq_rnn", err);
        if (c->att_unit) return foreign_key("att_unit", "seq_rnn", err);
        if (c->head) return foreign_key("head", "seq_rnn", err);
        if (c->layer) return foreign_key("layer", "seq_rnn", err);
        if (c->positional_dropout_rate) return foreign_key("positional_dropout_rate", "seq_rnn", err);
        if (c->attention_dropout_rate) return foreign_key("attention_dropout_rate", "seq_rnn", err);
    }
    out->lm = LM_SEQ_RNN;
    out->lm_embed = c && c->unit ? (int)c->unit : 650;
    out->d = c && c->nhid ? (int)c->nhid : out->lm_embed;
    out->lm_layers = c && c->nlayers ? (int)c->nlayers : 2;
    /* lstm | gru, either case (config_validate.c; SequentialRNNLM upper-cases it) */
    out->lm_gru = c && c->rnn_type && (!strcmp(c->rnn_type, "gru") || !strcmp(c->rnn_type, "GRU"));
    return 0;
}

static int transformer_dims(model_dims *out, const lm_conf_cfg *c, esp_err *err)
{
    if (c && c->nhid) return foreign_key("nhid", "transformer", err);
    if (c && c->nlayers) return foreign_key("nlayers", "transformer", err);
    if (c && c->rnn_type) return foreign_key("rnn_type", "transformer", err);
    out->lm = LM_TRANSFORMER;
    out->lm_embed = c && c->embed_unit ? (int)c->embed_unit : 128;
    out->d = c && c->att_unit ? (int)c->att_unit : 256;
    out->dec_heads = out->heads = c && c->head ? (int)c->head : 2;
    out->dec_ff = out->ff = c && c->unit ? (int)c->unit : 1024;
    out->dec_blocks = c && c->layer ? (int)c->layer : 4;
    out->lm_pos_enc = c && c->pos_enc && !strcmp(c->pos_enc, "sinusoidal");
    if (out->d % out->dec_heads)
        return esp_fail(err, "model.lm_conf.head: %d must divide att_unit %d", out->dec_heads, out->d);
    return 0;
}

int lm_dims_from_cfg(model_dims *out, const model_cfg *m, int vocab, esp_err *err)
{
    const lm_conf_cfg *c = m ? m->lm_conf : NULL;
    *out = (model_dims){0};
    out->no_ctc = 1;
    out->vocab = vocab;
    if (vocab < 2) return esp_fail(err, "token list has %d tokens; a language model needs at least 2", vocab);
    int rc = is_seq_rnn(m) ? seq_rnn_dims(out, c, err) : transformer_dims(out, c, err);
    return rc != 0 ? rc : model_dims_check_size(out, err);
}

void lm_rates_from_cfg(model_rates *r, const model_cfg *m)
{
    const lm_conf_cfg *c = m ? m->lm_conf : NULL;
    *r = (model_rates){0};
    if (is_seq_rnn(m)) {
        r->dec_dropout = c ? (float)c->dropout_rate : 0.0f;
    } else {
        r->dec_dropout = c ? (float)c->dropout_rate : 0.1f;
        r->dec_pos_dropout = c ? (float)c->positional_dropout_rate : 0.1f;
        r->dec_self_att_dropout = c ? (float)c->attention_dropout_rate : 0.1f;
    }
    r->length_normalized_loss = 1;
}
