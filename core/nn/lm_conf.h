/* An LM task's training config (ESPnet3's espnet3.systems.esp2_asr.lm_task.LMTask, ESPnet2's
 * espnet2.tasks.lm.LMTask; core/config/config_task.h tells one): `task:` names it, model.lm picks the
 * network (transformer: ESPnet2's TransformerLM; seq_rnn: SequentialRNNLM with an LSTM) and
 * model.lm_conf holds its arguments,
 * mapped here into model_dims / model_rates for the model's LM form (core/nn/model.h).
 * ESPnetLanguageModel's loss: x = <sos/eos> + text, targets text + <sos/eos>, the negative
 * log-likelihood summed over the real tokens and divided by their count (no label smoothing). */
#ifndef ESPNET3_NN_LM_CONF_H
#define ESPNET3_NN_LM_CONF_H

#include "core/base/log.h"
#include "core/config/config_types.h"
#include "core/nn/model.h"

/* dims for an LM of `vocab` tokens: lm: transformer (ESPnet2's defaults embed_unit 128, att_unit
 * 256, head 2, unit 1024, layer 4) or seq_rnn (unit 650, nhid = unit, nlayers 2, an LSTM); fails
 * when head does not divide att_unit, on the other class's keys, or vocab < 2. */
int lm_dims_from_cfg(model_dims *out, const model_cfg *m, int vocab, esp_err *err);

/* The LM's dropout rates into r (dec_dropout: TransformerLM's dropout_rate, on the input layer,
 * residual branches and the feed-forward's inner layer, or SequentialRNNLM's, on the embedding,
 * between LSTM layers and on the output; dec_pos_dropout: positional_dropout_rate with pos_enc
 * sinusoidal; dec_self_att_dropout: attention_dropout_rate; defaults 0.1, 0.1, 0.1 and 0.0 for
 * seq_rnn), with the loss's settings (no CTC, no smoothing, / tokens). */
void lm_rates_from_cfg(model_rates *r, const model_cfg *m);

#endif
