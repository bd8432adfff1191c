/* Chunk-by-chunk decoding of the asr_transducer task's models, as ESPnet2's
 * espnet2.bin.asr_transducer_inference.Speech2Text with streaming: true (streaming_decode and
 * reset_streaming_cache; its inference() loop):
 *   - the audio in pieces of decoding_samples = decoding_window ms at 16 kHz (OnlineAudioProcessor's
 *     audio_sampling_rate, which Speech2Text leaves at its default), the last piece the rest, with
 *     is_final (ts_stream_push cuts what it is pushed so, whatever the pushes' sizes);
 *   - each piece (ts_stream_decode, one streaming_decode) through OnlineAudioProcessor: after the
 *     samples kept from the last piece; not final, the whole STFT hops of them go through the
 *     frontend and the normalization and the last n_fft - hop samples and the rest of a hop are
 *     kept (a final piece shorter than decoding_samples is padded with zeros to it); the features'
 *     edge frames are cut (trim = ceil(ceil(n_fft / hop) / 2) at an edge that meets another piece:
 *     the end of a piece but the last, the start of a piece but the first) and the last
 *     2 x subsampling + 3 frames of the features so far come before them;
 *   - the encoder's chunk_forward over them (core/nn/encoder_chunk.h, left_context frames);
 *   - BeamSearchTransducer over the chunk's frames from the hypotheses the last piece kept
 *     (transducer_search_chunk: beam_size and beam_search_config; ALSD is refused, ESPnet asserts
 *     it away in streaming), the n-best on the final piece, then everything is reset.
 * The stream borrows the speech2text (its model and frontend): one stream on it at a time. */
#ifndef ESPNET3_DECODE_TRANSDUCER_STREAM_H
#define ESPNET3_DECODE_TRANSDUCER_STREAM_H

#include <stddef.h>

#include "core/base/log.h"
#include "core/decode/speech2text.h"
#include "core/decode/transducer_search.h"

typedef struct ts_stream ts_stream;

/* NULL with err for a model that is not the asr_transducer task's (or has conv1d blocks), an
 * ALSD search, or decoding_window < 1 ms / left_context < 0. */
ts_stream *ts_stream_open(const speech2text *s2t, int decoding_window_ms, int left_context, esp_err *err);
/* decoding_window in samples (ESPnet's decoding_samples). */
size_t ts_stream_window(const ts_stream *s);
/* One streaming_decode call on n samples (at the model's rate, [-1, 1)): out gets what it returns
 * (not final: the hypotheses the search keeps, unsorted; final: the n-best, and the stream is
 * reset). -1 with err when a piece is not final and shorter than n_fft - hop samples. */
int ts_stream_decode(ts_stream *s, const float *pcm, size_t n, int is_final, ts_result *out, esp_err *err);
/* inference()'s loop over one utterance: its decoding windows not final, then the rest (maybe
 * nothing) final; out gets the n-best. 0, or -1 with err. */
int ts_stream_utterance(ts_stream *s, const float *wav, size_t n, ts_result *out, esp_err *err);
/* Pushes n samples: each whole decoding window they complete is decoded (ts_stream_decode), and
 * with is_final the rest as the final piece. text: the best hypothesis after the push (the final
 * result at is_final; "" before anything is decoded), valid until the next call. Returns the
 * pieces decoded, -1 with err. */
int ts_stream_push(ts_stream *s, const float *pcm, size_t n, int is_final, const char **text, esp_err *err);
/* reset_streaming_cache: drops the utterance in progress. */
void ts_stream_reset(ts_stream *s);
void ts_stream_close(ts_stream *s);

#endif
