/* The decoder's part of the training config: model.decoder (transformer | transducer | none),
 * decoder_conf (ESPnet2's TransformerDecoder keys) and model_conf's joint-loss keys (ctc_weight,
 * lsm_weight, length_normalized_loss), mapped into model_dims (what the parameters look like) and
 * model_rates (how training uses them). The schema (core/config/config_schema.c) has already
 * refused what espnet3 does not implement (input_layer other than embed, concat_after,
 * layer_drop_rate, normalize_before false, use_output_layer false, qk_norm).
 *
 * As ESPnet2's ESPnetASRModel: ctc_weight 1.0 drops the decoder (no decoder.* parameters; today's
 * CTC model), ctc_weight 0.0 drops the CTC branch (no ctc.* parameters), anything between trains
 * both with loss = ctc_weight * loss_ctc + (1 - ctc_weight) * loss_att. Without a decoder
 * (model.decoder unset or none) training is CTC only whatever ctc_weight says (stage 5 warns).
 * model.decoder transducer: decoder_conf holds TransducerDecoder's keys (rnn_type lstm | gru, num_layers
 * 1, hidden_size 320, dropout, dropout_embed) and joint_net_conf JointNetwork's (joint_space_size
 * 256, joint_activation_type tanh, lin_dec_bias true); the loss is loss_transducer + ctc_weight *
 * loss_ctc (ctc_weight 0: no CTC branch), as ESPnetASRModel's. */
#ifndef ESPNET3_NN_DECODER_CONF_H
#define ESPNET3_NN_DECODER_CONF_H

#include "core/base/log.h"
#include "core/config/config_types.h"
#include "core/nn/model.h"

/* Sets dims->dec_blocks, dec_heads, dec_ff (ESPnet2's defaults 6, 4, 2048) and no_ctc; fails on a
 * ctc_weight outside [0, 1], on sizes that are not positive, or on attention_heads that do not
 * divide the encoder's output_size (the decoder's width). */
int decoder_dims_from_cfg(model_dims *dims, const model_cfg *m, esp_err *err);

/* The decoder's dropout rates (ESPnet2's defaults 0.1, 0.1, 0.0, 0.0) and the joint loss's
 * ctc_weight, lsm_weight and length_normalized_loss into r. */
void decoder_rates_from_cfg(model_rates *r, const model_cfg *m);

/* Whether the config trains an attention decoder (model.decoder transformer and ctc_weight < 1). */
int decoder_in_cfg(const model_cfg *m);
/* Whether the config has ESPnet2's transducer decoder (model.decoder transducer, core/nn/transducer.h),
 * or is the asr_transducer task's model (core/nn/body_conf.h). */
int transducer_in_cfg(const model_cfg *m);
/* Whether it trains a CTC branch (all but a decoder with ctc_weight 0; the asr_transducer task's
 * with auxiliary_ctc_weight > 0). */
int ctc_in_cfg(const model_cfg *m);
/* Whether its CTC gives times (timestamps, long-form merging): a CTC branch on the input layer's
 * frames (not an asr_transducer Encoder whose conv1d blocks shrink them, body_shrinks_frames). */
int ctc_times_in_cfg(const model_cfg *m);

#endif
