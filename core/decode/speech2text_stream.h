/* Streaming decoding, as ESPnet2's Speech2TextStreaming (espnet2/bin/asr_inference_streaming.py):
 * a model with the contextual block Transformer encoder decodes audio pushed as it comes.
 *
 * Each push, as its __call__:
 *   - apply_frontend: the samples after the buffered ones; while they are no more than win_length
 *     (and the push is not final) they are only buffered. Otherwise the whole hops of them (all,
 *     when final; a final push shorter than a window is padded with zeros to one) go through the
 *     frontend and the normalization (per push: utterance_mvn normalizes each push by itself, as
 *     ESPnet does; global_mvn gives the whole utterance's features), and the edge frames the STFT
 *     pads are cut: P = ceil(ceil(win_length / hop_length) / 2) at each side that meets another
 *     push (ESPnet cuts the first P frames after any earlier push, also one that only buffered).
 *     The last (2P - 1) hops and the rest of a hop stay buffered.
 *   - the features go through the encoder online (core/nn/encoder_stream.h, forward_infer), its
 *     output frames through the CTC head onto the utterance's encoder output so far;
 *   - the blockwise search (core/decode/beam_search_online.h) on it, the model's attention
 *     decoder and CTC (and the LM) weighted as the speech2text was opened (beam_size, ctc_weight,
 *     penalty, lm_weight, maxlenratio, minlenratio).
 * The stream borrows the speech2text (its model, frontend, decoder caches): one stream on it at a
 * time, and no other decoding on it while the stream is open. */
#ifndef ESPNET3_SPEECH2TEXT_STREAM_H
#define ESPNET3_SPEECH2TEXT_STREAM_H

#include <stddef.h>

#include "core/base/log.h"
#include "core/decode/speech2text.h"

typedef struct s2t_stream s2t_stream;

/* A push's result; the strings are valid until the next push, reset or close. */
typedef struct s2t_partial {
    const char *text;   /* what ESPnet's call returns: its best ended hypothesis ("" when none).
                         * At is_final the utterance's result. Before it, mostly "": a block only
                         * returns hypotheses that ended where it stopped */
    const char *running; /* the best running hypothesis after the push ("" when none; "" at is_final) */
    double audio_s;     /* audio pushed in this utterance, seconds */
    double decoded_s;   /* audio the searched blocks reach: encoder frames x subsampling x hop / fs */
    int frames;         /* encoder frames the searched blocks reach */
    int is_final;
} s2t_partial;

/* NULL with err for a model whose encoder is not contextual_block_transformer (or has a
 * preencoder, or an input layer forward_infer does not take). An asr_transducer model's stream is
 * its chunk-by-chunk decoding instead (core/decode/transducer_stream.h; the speech2text's
 * decoding_window and left_context, else their defaults): the pushes' running text is the best
 * hypothesis after the last whole window, decoded_s the windows decoded, and the repetition check
 * does not apply. */
s2t_stream *s2t_stream_open(const speech2text *s2t, esp_err *err);
/* Pushes n samples (at the model's rate, [-1, 1)); is_final ends the utterance (the stream is
 * then ready for the next). Fills out; returns the search blocks this push ran, -1 with err
 * when the frontend cannot take the samples (fewer than the STFT needs). */
int s2t_stream_push(s2t_stream *s, const float *pcm, size_t n, int is_final, s2t_partial *out, esp_err *err);
/* ESPnet's disable_repetition_detection (core/decode/beam_search_online.h): with a small token
 * set (characters) nearly every hypothesis soon repeats a token, and a block's search stops there,
 * so the search waits for the final push; disabled, each block searches on until a hypothesis
 * ends. Default enabled, as ESPnet's. */
void s2t_stream_set_repetition_check(s2t_stream *s, int on);
/* Drops the utterance in progress. */
void s2t_stream_reset(s2t_stream *s);
void s2t_stream_close(s2t_stream *s);

#endif
