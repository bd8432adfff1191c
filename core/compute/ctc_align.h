/* CTC forced alignment: the single best path (Viterbi) of a label sequence through T frames of
 * log-probabilities, in double, blank 0: the backend op ctc_align (core/compute/backend_ops.h) on
 * the host. The states are CTC's extended label sequence (s = 0 .. 2L: blank at even s, label
 * labels[(s - 1) / 2] at odd s); a state comes from itself, the one before, or the one two before
 * when that skips a blank between different labels (ctc_viterbi_best of kernel_math.h, whose tie
 * order makes every backend take the same path). The path ends in the last label or the blank
 * after it, the last label unless the blank is strictly better (torchaudio's forced_align).
 *
 * path (T, host): the state of each frame. Returns the path's log-probability (the sum of its
 * frames' log-probs); -INFINITY when no path fits (fewer frames than the labels and the blanks
 * their repeats need), path then all -1. T == 0 with L == 0 is the empty path (0). */
#ifndef ESPNET3_COMPUTE_CTC_ALIGN_H
#define ESPNET3_COMPUTE_CTC_ALIGN_H

double ctc_align_f32(int *path, const float *logp, int T, int V, const int *labels, int L);
/* The same on double log-probabilities (the ref64 backend's). */
double ctc_align_f64(int *path, const double *logp, int T, int V, const int *labels, int L);

#endif
