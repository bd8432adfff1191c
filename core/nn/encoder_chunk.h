/* espnet2/asr_transducer's Encoder.chunk_forward (espnet2/asr_transducer/encoder/encoder.py), the
 * encoder of the asr_transducer task's streaming decoding (Speech2Text.streaming_decode): each call
 * encodes one chunk of feature frames (the frontend's window with the frames it keeps from the
 * window before: core/decode/transducer_stream.h):
 *   - the input block (ConvInput) over the chunk's frames, its first and last output frame dropped
 *     (x[:, 1:-1]);
 *   - each block's chunk_forward: its self-attention's keys and values are the chunk's frames and
 *     the left_context frames before them (ESPnet's cache of LayerNorm(x) of the block's attention
 *     input; here that input, whose LayerNorm gives the same rows), fewer at the start of the
 *     stream (ESPnet masks the cache's frames before it: the same weights); the relative positions
 *     count from the first key. The macaron and feed-forward modules see the chunk's frames alone;
 *     the depthwise convolutions (the conformer's convolution module, the (e-)branchformer's gating
 *     unit and merge) see the chunk with zeros past its edges when not causal (ESPnet's chunk_forward
 *     passes them the cache, which they do not read); causal ones (main_conf.dynamic_chunk_training)
 *     see the chunk after their cache, the last kernel_size - 1 inputs before it (zeros at the start of
 *     the stream, as reset_streaming_cache's), which keeps the last kernel_size - 1 of both;
 *   - MultiBlocks' norm_blocks.
 * The blocks run on their own code (core/nn/encoder_conformer.c, core/nn/encoder_ebranchformer.c,
 * core/nn/encoder_body.c) with m->stream_chunk set, which only the attention (enc_attn_forward) and
 * the causal convolutions (enc_dwconv_forward) read.
 * Conv1d blocks are refused: ESPnet2's Conv1d.chunk_forward keeps its input's last kernel_size - 1
 * frames whatever its stride, padding or causality, which its full forward never does. */
#ifndef ESPNET3_NN_ENCODER_CHUNK_H
#define ESPNET3_NN_ENCODER_CHUNK_H

#include "core/base/log.h"
#include "core/nn/model.h"

/* NULL with err for a model that is not the asr_transducer task's or has conv1d blocks.
 * left_context: Speech2Text's (frames after subsampling, >= 0). */
enc_chunk *enc_chunk_open(asr_model *m, int left_context, esp_err *err);
/* reset_cache: the next chunk starts a stream. */
void enc_chunk_reset(enc_chunk *c);
/* feats: the chunk's T feature frames (host, T x idim). Returns the encoder output frames (0 when
 * the input block leaves no more than the two it drops) with *out their rows (device, after
 * norm_blocks; valid until the model's next forward). */
int enc_chunk_forward(enc_chunk *c, const float *feats, int T, const float **out);
void enc_chunk_close(enc_chunk *c);

#endif
