/* The contextual block encoders run online, as ESPnet2's
 * ContextualBlock{Transformer,Conformer}Encoder.forward_infer: normalized feature frames go in as they come,
 * the encoder's output frames (after after_norm) come out a block at a time. What it keeps between
 * pushes is what forward_infer keeps in its states: the features the input layer has not consumed
 * (buffer_before_downsampling), the input layer's frames no block has finished with
 * (buffer_after_downsampling), the last block's context vector (prev_addin), each layer's last
 * context vector output (past_encoder_ctx) and the blocks processed (positions continue from
 * there). A frame comes out with the block that has look_ahead frames after it. */
#ifndef ESPNET3_NN_ENCODER_STREAM_H
#define ESPNET3_NN_ENCODER_STREAM_H

#include "core/base/log.h"
#include "core/nn/model.h"

typedef struct enc_stream enc_stream;

/* m: a model (eval, any backend) with the contextual block encoder and no preencoder; borrowed,
 * one stream at a time on it. NULL with err for any other model. */
enc_stream *enc_stream_open(asr_model *m, esp_err *err);
/* Feeds T feature frames (host, T x idim; T may be 0) and, with is_final, ends the utterance
 * (the stream is then ready for the next one). Returns the number of output frames this push
 * completed (ESPnet's: after the first block, hop_size per block); *out (device, n x d, valid until the next call) holds them. */
int enc_stream_push(enc_stream *s, const float *feats, int T, int is_final, const float **out);
/* Drops the utterance in progress. */
void enc_stream_reset(enc_stream *s);
void enc_stream_close(enc_stream *s);

#endif
