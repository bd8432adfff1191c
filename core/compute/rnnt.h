/* The RNN-T loss (Graves 2012, "Sequence Transduction with Recurrent Neural Networks") over the
 * joint network's logits, forward and backward, as torchaudio.functional.rnnt_loss(logits,
 * targets, logit_lengths, target_lengths, blank, clamp, reduction="mean",
 * fused_log_softmax=True) computes it. ESPnet2's transducer loss is warp-transducer's
 * RNNTLoss(blank=0, reduction="mean") on the joint's output: the same numbers (it has no clamp;
 * clamp <= 0 here is none). The clamp is torchaudio's CPU kernel's, to [-clamp, clamp]; its CUDA
 * kernel applies the lower bound only (both bounds are computed from the unclamped value there).
 * The ASR task's transducer (core/nn/transducer.h) calls them on its joint network's logits.
 *
 * Shapes and layout
 *   logits  (B, T, U1, V) row-major float: the joint's output for utterance b, frame t and label
 *           prefix u (u labels emitted); only t < hlens[b] and u <= ylens[b] are read.
 *   hlens   (B) frames per utterance, 1 <= hlens[b] <= T.
 *   labels  ctc_labels (core/compute/ctc.h: padded rows of `stride`, or concatenated with
 *           stride 0), ids in [0, V) and never the blank; 0 <= ylens[b] <= U1 - 1.
 *   blank   the blank's id (ESPnet2: 0; torchaudio's default -1 is V - 1).
 *
 * Loss: losses[b] = -log p(y_b | x_b) in double; the batch loss is sum_b losses[b] / B
 * (reduction "mean"; "sum" is B times it, and its gradient dloss = B).
 *
 * Gradient (log_softmax folded in, torchaudio's fused form): with the lattice below and
 * occ(t, u) = exp(alpha + beta + nll) the posterior of node (t, u),
 *     g(t, u, d) = softmax(d) occ(t, u)
 *                  - [d == blank] exp(alpha + lp_blank(t, u) + beta(t + 1, u) + nll)
 *                  - [d == y_{u+1}] exp(alpha + lp_emit(t, u) + beta(t, u + 1) + nll)
 * (beta past the last frame: 0 at (T-1, U-1), where blank ends the path; -inf elsewhere). FastEmit
 * (fastemit = lambda > 0; warp-transducer's RNNTLoss(fastemit_lambda), which the asr_transducer task
 * uses; the loss is unchanged) multiplies the label arc's term by 1 + lambda, and the softmax's weight
 * becomes occ(t, u) + lambda pe(t, u), pe that term unscaled (kernel_math.h's rnnt_node_weight and
 * rnnt_label_arc). Then,
 * when clamp > 0, clamped to [-clamp, clamp] (torchaudio clamps the per-utterance gradient, before
 * the mean's 1 / B), then scaled by dloss / B. Rows outside an utterance (t >= hlens[b] or
 * u > ylens[b]) get 0. The gradient is written, not accumulated; it may overwrite the logits
 * (dlogits == logits): each row is read before it is written, and nothing later reads it.
 *
 * The lattice (what the backward needs, kept by the backend between the ops): per (b, t, u) the
 * log-denominator (logsumexp of the row over V), lp_blank = log p(blank) and lp_emit = log p(y_{u+1})
 * (the two arcs leaving the node), alpha and beta (both torchaudio's: alpha(0, 0) = 0, beta
 * includes the final blank), and per utterance nll = -beta(0, 0): RNNT_PLANES doubles per node,
 * never V. Memory is the caller's logits (B T U1 V floats) plus 5 B T U1 + B doubles.
 *
 * Chunks (bounded memory for long utterances: at T 500, U 100, V 5000 one utterance's logits are
 * 1 GB): rnnt_logprobs reads the logits a chunk of frames [t0, t0 + tc) at a time, in order from
 * t0 = 0 (which starts a batch), into the lattice; after the last chunk, rnnt_loss_forward runs the
 * recursions; the backward then takes the logits again a chunk at a time (any order), so a caller
 * can compute the joint per chunk, twice, instead of holding all of it. tc = T is the whole batch
 * at once. */
#ifndef ESPNET3_RNNT_H
#define ESPNET3_RNNT_H

#include <stddef.h>

#include "core/compute/ctc.h"

/* The lattice's planes, each (B, T, U1) doubles, and then nll (B). */
enum { RNNT_DENOM, RNNT_LP_BLANK, RNNT_LP_EMIT, RNNT_ALPHA, RNNT_BETA, RNNT_PLANES };

/* Where a batch stands between the ops (every backend keeps one beside its lattice memory). */
typedef struct rnnt_batch {
    int B, T, U1, V, blank;
    int frames; /* frames [0, frames) of the lattice are filled */
    int ready;  /* alpha, beta and nll are computed (rnnt_loss_forward ran on all T frames) */
} rnnt_batch;

/* Doubles of the lattice of a (B, T, U1) batch. */
size_t rnnt_lattice_size(int B, int T, int U1);

/* Checks a chunk of rnnt_logprobs (in order, at the batch's shape) and its inputs (lengths, label
 * ids, blank); t0 == 0 starts a new batch of this shape. Every check aborts with file:line. */
void rnnt_batch_chunk(rnnt_batch *s, const int *hlens, const ctc_labels *y, int B, int T, int U1,
                      int V, int blank, int t0, int tc);
/* Checks that the forward may run (every frame filled, the lengths the chunks had) and marks the
 * batch ready. */
void rnnt_batch_forward(rnnt_batch *s, const int *hlens, const int *ylens, int B, int T, int U1);
/* Checks a chunk of the backward and its inputs (the forward of this batch's shape ran). */
void rnnt_batch_backward(const rnnt_batch *s, const int *hlens, const ctc_labels *y, int B, int T,
                         int U1, int V, int blank, int t0, int tc);

/* Labels of utterance b. */
const int *rnnt_labels_of(const ctc_labels *y, int b);

/* alpha, beta and nll of every utterance from the filled lattice (lat: rnnt_lattice_size
 * doubles); fills losses (B, may be NULL) and returns sum(losses) / B. The utterances split over
 * nthreads, bit-identical for any count. */
double rnnt_lattice_forward(double *lat, double *losses, const int *hlens, const int *ylens, int B,
                            int T, int U1, int nthreads);

#endif
