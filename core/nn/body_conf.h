/* ESPnet2's asr_transducer task (espnet2/tasks/asr_transducer.py; ESPnet3's ASRTransducerTask) in
 * the training config -> model_dims / model_rates. Its model, ESPnetASRTransducerModel, is built
 * from pieces espnet3 has: the Encoder's `conformer` blocks of encoder_conf.body_conf (after the
 * ConvInput of input_conf, with main_conf's parameters) are the Conformer encoder
 * (core/nn/encoder_conformer.c) with model_dims.body's differences, its `ebranchformer` blocks the
 * E-Branchformer encoder's (core/nn/encoder_ebranchformer.c; linear_size is both the feed-forward's
 * and the gating MLP's units, depth_conv_kernel_size the merge convolution's) and its
 * `branchformer` blocks that code without feed-forwards or merge convolution (its `conv1d` blocks:
 * core/nn/encoder_body.c), the RNNDecoder (model.decoder
 * rnn, its default) is the transducer's LSTM prediction network, the StatelessDecoder (stateless)
 * its embedding alone (model_dims.tr_stateless), and joint_network_conf its joint network
 * (core/nn/transducer.h), auxiliary_ctc_weight > 0 adds the CTC head (ctc_lin). The loss is
 * transducer_weight * loss_transducer + auxiliary_ctc_weight * loss_ctc + auxiliary_lm_loss_weight *
 * loss_aux_lm (lm_lin), with fastemit_lambda in the RNN-T loss' gradient.
 *
 * body_conf's sizes are checked first as ESPnet2's validate_architecture checks them (its messages
 * quoted), so a config ESPnet2 rejects gets its reason rather than a refusal. Every key
 * ESPnetASRTransducerModel, the Encoder's builders and the decoder take is implemented,
 * accepted where its value leaves the model as implemented (a key only another block kind or
 * activation reads, ESPnet's default), or refused here with what to write instead: a
 * Conformer's feed-forward and convolution activations must be the same; an Encoder of conv1d
 * blocks alone, the MEGA and RWKV decoders, the k2 pruned loss and causal conv1d blocks of
 * kernel_size > 1 (dynamic_chunk_training) are not built (main_conf.blockdrop_rate is
 * model_rates.blockdrop, run by core/nn/encoder_body.c; dynamic_chunk_training is dims.causal and
 * model_rates.chunk_*). Blocks of different types or sizes are model_dims.group's runs, each
 * with its own sizes, width (model_group.d: a conv1d block's output_size is the hidden_size of the
 * blocks after it, as validate_architecture wants) and dropout rates (model_rates.group_*), run by
 * core/nn/encoder_body.c; ConvInput's conv_size channels and its output width (no Linear before a
 * conv1d block first) are model_dims.embed_ch / embed_d / embed_raw.
 * report_cer / report_wer: core/decode/transducer_errors.h. */
#ifndef ESPNET3_NN_BODY_CONF_H
#define ESPNET3_NN_BODY_CONF_H

#include "core/base/log.h"
#include "core/config/config_types.h"
#include "core/nn/model.h"

/* Whether m is the asr_transducer task's model (its encoder_conf has body_conf, which that task's
 * Encoder requires and no other encoder takes). */
int body_in_cfg(const model_cfg *m);

/* Whether a conv1d block of m's body_conf shrinks the frames (kernel_size or stride above 1): its
 * encoder frames are then not the input layer's, which CTC times (ctc_times_in_cfg) count in. */
int body_shrinks_frames(const model_cfg *m);

/* out (already holding idim, vocab and the preencoder's sizes) from m: the encoder, decoder, joint
 * and CTC sizes, with the errors above. */
int body_dims_from_cfg(model_dims *out, const model_cfg *m, esp_err *err);

/* The first key set in m that only the asr_transducer task's model takes (its encoder_conf.input_conf /
 * main_conf, joint_network_conf, RNNDecoder's decoder_conf keys, ESPnetASRTransducerModel's
 * model_conf keys), NULL when none: under the ASR task they are a TypeError in ESPnet2. */
const char *body_only_key(const model_cfg *m);

/* The rates of a model body_dims_from_cfg accepted. */
void body_rates_from_cfg(model_rates *r, const model_cfg *m);

#endif
