/* Long-form decoding: a recording of any length decoded in overlapping windows, its words merged
 * into one hypothesis with token times relative to the recording's start.
 *
 * The audio comes through core/data/audio_stream.h in window-sized blocks (resampled on the way
 * when the decoder was opened with resample, else another rate is refused), so memory is bounded
 * by the window, never by the recording: one window of samples, its features and the encoder's
 * activations, the search's states and the decoder's caches (sized once for a window's beam and
 * maximum length, speech2text_reserve: every window of one length needs the same,
 * so the peak is reached in the first), plus the hypothesis so far. Windows are `window` seconds
 * long and start every window - overlap seconds, but the last, which ends with the recording
 * (overlapping its neighbour by more when less than a hop was left): every window has the same
 * length, so the same memory. Each is decoded by speech2text with timestamps
 * (its words by core/decode/words.h) and the windows' words are merged by time
 * (core/decode/longform_merge.h: each word from the one window that heard it in the middle of the
 * overlap, none lost or duplicated). A recording no longer than the window is one window, decoded
 * as speech2text decodes it. docs/decoding.md ("Long recordings") has the defaults and why. */
#ifndef ESPNET3_LONGFORM_H
#define ESPNET3_LONGFORM_H

#include "core/base/log.h"
#include "core/data/audio_stream.h"
#include "core/decode/speech2text.h"

typedef struct longform_opts {
    double window;         /* seconds per window */
    double overlap;        /* seconds neighbouring windows share: in (0, window / 2] */
    const char *progress;  /* a progress line over the windows with this label (NULL: none) */
} longform_opts;

/* Checks o against the decoder's frontend (the overlap must hold the shortest waveform it takes);
 * the error names the option. */
int longform_check(const speech2text *s, const longform_opts *o, esp_err *err);

/* Decodes what st delivers (opened at the decoder's rate; name names it in messages) into out:
 * the best hypothesis only (n_found 1), its token times and scores relative to the stream's first
 * sample, score the sum of the windows' scores, frames the feature frames of the whole; *seconds
 * gets the seconds read. s must have been opened with timestamps. On an error nothing is left in
 * out and err names the audio. */
int longform_decode_stream(speech2text *s, audio_stream *st, const char *name, const longform_opts *o, s2t_hyp *out,
                           double *seconds, esp_err *err);

/* The same for [start, end) seconds of path (end <= 0: the whole file; the span rules of
 * audio_read_span; resampled when the decoder was opened with resample, else another rate is
 * refused), times relative to the span's start. */
int longform_decode(speech2text *s, const char *path, double start, double end, const longform_opts *o, s2t_hyp *out,
                    esp_err *err);

#endif
