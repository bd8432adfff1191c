/* An LM task's training config (ESPnet3's espnet3.systems.esp2_asr.lm_task.LMTask, ESPnet2's
 * espnet2.tasks.lm.LMTask; core/config/config_task.h tells one): `task:` names it, model.lm picks the network (transformer: ESPnet2's
 * TransformerLM; seq_rnn is refused by the config check) and model.lm_conf holds its arguments,
 * mapped here into model_dims / model_rates for the model's LM form (core/nn/model.h).
 * ESPnetLanguageModel's loss: x = <sos/eos> + text, targets text + <sos/eos>, the negative
 * log-likelihood summed over the real tokens and divided by their count (no label smoothing). */
#ifndef ESPNET3_NN_LM_CONF_H
#define ESPNET3_NN_LM_CONF_H

#include "core/base/log.h"
#include "core/config/config_types.h"
#include "core/nn/model.h"

/* dims for an LM of `vocab` tokens (ESPnet2's defaults: embed_unit 128, att_unit 256, head 2,
 * unit 1024, layer 4); fails when head does not divide att_unit or vocab < 2. */
int lm_dims_from_cfg(model_dims *out, const model_cfg *m, int vocab, esp_err *err);

/* The LM's dropout rates (dropout_rate: the input layer, residual branches and the feed-forward's
 * inner layer; positional_dropout_rate with pos_enc sinusoidal; attention_dropout_rate; ESPnet2's
 * defaults 0.1 each) into r, with the loss's settings (no CTC, no smoothing, / tokens). */
void lm_rates_from_cfg(model_rates *r, const model_cfg *m);

#endif
