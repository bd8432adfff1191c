/* CTC loss (Graves et al. 2006) over log-probabilities, forward and backward, as ESPnet2's CTC
 * module computes it: torch.nn.functional.ctc_loss(blank=0, reduction='sum', zero_infinity) / B.
 *
 * Shapes and layout
 *   logp    (B, T, V) row-major float: log_softmax of the CTC logits (batch-first, unlike torch's
 *           (T, B, V); only the first hlens[b] frames of utterance b are read).
 *   hlens   (B) frames per utterance, 0 <= hlens[b] <= T.
 *   labels  ctc_labels.ids, in 1..V-1 (never the blank 0). With stride > 0 the labels of
 *           utterance b are ids[b * stride + i] (padded rows, torch's 2-D targets, what ESPnet's
 *           ys_pad holds; the padding is never read); with stride == 0 they are concatenated
 *           (torch's 1-D targets): utterance b starts at ylens[0] + ... + ylens[b-1].
 *   ylens   ctc_labels.lens, (B) labels per utterance (0 allowed: the path is all blanks).
 *
 * Loss: losses[b] = -log p(y_b | x_b), summed in double; the returned batch loss is
 * sum_b losses[b] / B (ESPnet2 CTC(reduce=True)). An impossible alignment (too few frames for the
 * labels and the blanks that repeated labels need) has p = 0: with zero_infinity (ESPnet2's
 * default) its loss is reported as 0 and its gradient is 0, as torch's zero_infinity=True;
 * without, its loss is +inf and the gradient of its valid frames is NaN, as torch.
 * A NaN in logp propagates to that utterance's loss (zero_infinity only zeroes +inf), so the
 * caller can detect it. hlens[b] == 0 with ylens[b] == 0 gives loss 0; with ylens[b] > 0 it is
 * impossible (torch reads out of range there and returns a finite number; we do not copy that).
 *
 * Gradient: which one the model must use.
 *   Let gamma_t(c) = sum over states s with label c of alpha_t(s) beta_t(s) / (p y_t(c)): the
 *   posterior that frame t emits c (sums to 1 over c on every valid frame).
 *   - CTC_GRAD_TORCH (what torch's ctc_loss returns as the gradient of its log_probs input; its
 *     native CPU/CUDA kernels assume log_probs came out of log_softmax):
 *         dlogp_t(c) = scale * (exp(logp_t(c)) - gamma_t(c))
 *     This is exactly d loss / d logits when logp = log_softmax(logits). Use it AS the logits
 *     gradient and skip the log_softmax backward. (Applying the log_softmax backward anyway,
 *     g - softmax * sum(g), changes nothing but rounding: the rows of g sum to 0. That is why
 *     torch's chain log_softmax -> ctc_loss is right end to end; scripts/make_ctc_fixtures.py
 *     checks on torch 1.13 that log_probs.grad equals logits.grad.)
 *   - CTC_GRAD_LOGPROBS: the plain derivative d loss / d logp_t(c) = -scale * gamma_t(c). It must
 *     go through the log_softmax backward to become the logits gradient (the same numbers as
 *     CTC_GRAD_TORCH after that). Used by the tests; the model should use CTC_GRAD_TORCH.
 *   scale = dloss / B, where dloss is the upstream gradient of the batch loss (1 for training).
 *   Frames t >= hlens[b] and impossible utterances under zero_infinity get 0. dlogp is
 *   written, not accumulated.
 *
 * Work: ctc_loss_forward keeps alpha (B, T, 2*max_ylen+1) and the raw per-utterance -log p in a
 * double workspace that ctc_loss_backward reads; beta is recomputed frame by frame in the
 * backward and never stored. Utterances are independent, so nthreads > 1 splits the batch over
 * pthreads with bit-identical results. */
#ifndef ESPNET3_CTC_H
#define ESPNET3_CTC_H

#include <stddef.h>

typedef enum ctc_grad_kind { CTC_GRAD_TORCH, CTC_GRAD_LOGPROBS } ctc_grad_kind;

/* The labels of a batch (see the layout above). */
typedef struct ctc_labels {
    const int *ids;
    const int *lens;  /* (B) */
    int stride;       /* > 0: padded rows of this many; 0: concatenated */
} ctc_labels;

/* Doubles the workspace needs for this batch shape (max_ylen = max over ylens). */
size_t ctc_workspace_size(int B, int T, int max_ylen);

/* Largest ylens[b]. */
int ctc_max_label_len(const ctc_labels *y, int B);

/* Fills losses (B, may be NULL; 0 for impossible ones under zero_infinity) and the workspace
 * (ctc_workspace_size(B, T, max_ylen) doubles) and returns sum(losses) / B. */
double ctc_loss_forward(double *losses, double *work, const float *logp, const int *hlens,
                        const ctc_labels *y, int B, int T, int V, int zero_infinity, int nthreads);

/* Writes dlogp (B, T, V) from the workspace of the matching ctc_loss_forward call. */
void ctc_loss_backward(float *dlogp, const double *work, const float *logp, const int *hlens,
                       const ctc_labels *y, int B, int T, int V, int zero_infinity, float dloss,
                       ctc_grad_kind kind, int nthreads);

/* The same in double (log-probs and gradient), for float64 finite-difference tests of the model
 * (core/compute/ops.h's _f64 ops); exp(logp) in double where the float version uses expf. */
double ctc_loss_forward_f64(double *losses, double *work, const double *logp, const int *hlens,
                            const ctc_labels *y, int B, int T, int V, int zero_infinity,
                            int nthreads);
void ctc_loss_backward_f64(double *dlogp, const double *work, const double *logp,
                           const int *hlens, const ctc_labels *y, int B, int T, int V,
                           int zero_infinity, double dloss, ctc_grad_kind kind, int nthreads);

#endif
