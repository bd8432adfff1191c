/* Token times from a CTC forced alignment: the Viterbi path of a hypothesis's token ids through
 * its utterance's CTC log-probabilities (the backend's ctc_align op, in double), each token's
 * frames turned into seconds.
 *
 * Frames to seconds. Feature frame j is centred on sample j * hop (torch.stft center=True). The
 * input layer's convolutions (kernel k_i, stride s_i) make encoder frame e the summary of feature
 * frames e * S .. e * S + R - 1 (S = the strides' product, R = the receptive field,
 * 1 + sum (k_i - 1) s_1 ... s_{i-1}), centred on e * S + (R - 1) / 2. Frame e is taken to cover
 * S feature frames around that centre: [e S + (R - 1 - S) / 2, (e + 1) S + (R - 1 - S) / 2) hops,
 * clamped to the waveform. Conv2dSubsampling (S 4, R 7) at hop 160 / 16 kHz: frame e is
 * [40 e + 10, 40 e + 50) ms. ESPnet's CTC segmentation uses e * S hops (its index_duration,
 * samples over frames) without the centring; docs/decoding.md compares both with synthesizer
 * timings.
 *
 * A token spans the frames the path spends on its state: start = the first one's start, end = the
 * last one's end; its score is the mean log-probability of its id over those frames. */
#ifndef ESPNET3_CTC_TIMES_H
#define ESPNET3_CTC_TIMES_H

#include <stddef.h>

#include "core/compute/backend.h"

/* Seconds of encoder frames: frame e covers [origin + e step, origin + (e + 1) step), clamped to
 * [0, limit]. */
typedef struct ctc_clock {
    double origin, step, limit;
} ctc_clock;

/* The clock of a model with input layer `input_layer` (input_layer_kind) over features of hop
 * samples at fs Hz, for an utterance of feat_frames feature frames. */
ctc_clock ctc_clock_of(int input_layer, int hop, int fs, int feat_frames);

/* Times and scores (n each) of the tokens ids[0..n) through T frames of log-probabilities over V
 * classes, on the device (logp_dev, for the alignment) and on the host (logp_host, the same
 * values, for the scores). Returns the path's log-probability; -INFINITY when no path fits
 * (more tokens than the frames can emit), the times and scores then NaN. */
double ctc_token_times(backend *be, const float *logp_dev, const float *logp_host, int T, int V, const int *ids,
                       size_t n, const ctc_clock *ck, double *start, double *end, double *score);

#endif
