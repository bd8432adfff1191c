/* The LM task's config keys into model_dims / model_rates; see lm_conf.h. */
#include "core/nn/lm_conf.h"

#include <string.h>

int lm_dims_from_cfg(model_dims *out, const model_cfg *m, int vocab, esp_err *err)
{
    const lm_conf_cfg *c = m ? m->lm_conf : NULL;
    *out = (model_dims){0};
    out->lm = 1;
    out->no_ctc = 1;
    out->vocab = vocab;
    out->lm_embed = c && c->embed_unit ? (int)c->embed_unit : 128;
    out->d = c && c->att_unit ? (int)c->att_unit : 256;
    out->dec_heads = out->heads = c && c->head ? (int)c->head : 2;
    out->dec_ff = out->ff = c && c->unit ? (int)c->unit : 1024;
    out->dec_blocks = c && c->layer ? (int)c->layer : 4;
    out->lm_pos_enc = c && c->pos_enc && !strcmp(c->pos_enc, "sinusoidal");
    if (out->d % out->dec_heads)
        return esp_fail(err, "model.lm_conf.head: %d must divide att_unit %d", out->dec_heads, out->d);
    if (vocab < 2) return esp_fail(err, "token list has %d tokens; a language model needs at least 2", vocab);
    return 0;
}

void lm_rates_from_cfg(model_rates *r, const model_cfg *m)
{
    const lm_conf_cfg *c = m ? m->lm_conf : NULL;
    *r = (model_rates){0};
    r->dec_dropout = c ? (float)c->dropout_rate : 0.1f;
    r->dec_pos_dropout = c ? (float)c->positional_dropout_rate : 0.1f;
    r->dec_self_att_dropout = c ? (float)c->attention_dropout_rate : 0.1f;
    r->ctc_weight = 0.0f;
    r->lsm_weight = 0.0f;
    r->length_normalized_loss = 1;
}
