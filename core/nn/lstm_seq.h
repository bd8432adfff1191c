/* One torch.nn.LSTM layer over a padded batch of sequences on the backend, forward and backward
 * through time, shared by the SequentialRNNLM (core/nn/lm_rnn.c) and the transducer's decoder
 * (core/nn/transducer.c). Rows are time-major (row t * B + b), so each step of the recurrence is B
 * contiguous rows: the caller computes the input products of all positions as one GEMM, the
 * recurrence adds W_hh h_{t-1} one GEMM of B rows per step (and likewise in the backward). */
#ifndef ESPNET3_NN_LSTM_SEQ_H
#define ESPNET3_NN_LSTM_SEQ_H

#include "core/compute/backend.h"
#include "core/nn/model_tensors.h"

/* A layer's activations for L steps of B rows of H units: hbuf (L + 1) B x H (B zero rows, the
 * initial state, then h of every position), c L B x H, act L B x 4H (the activated gates). */
typedef struct lstm_seq_acts {
    float *hbuf, *c, *act;
} lstm_seq_acts;

/* p (L B x 4H): W_ih x + b_ih + b_hh of every position on entry (the recurrence adds W_hh h_{t-1}
 * in place); fills a from the zero initial state. */
void lstm_seq_forward(backend *be, const lstm_tensors *w, float *p, const lstm_seq_acts *a, int B, int L, int H);

/* Backward through time: dh (L B x H) holds the gradient of the layer's h on entry (and gathers the
 * recurrent part in place); writes dgates (L B x 4H, the gradient of the pre-activations) and
 * accumulates W_hh's and b_hh's gradients into g (the input side's, W_ih and b_ih, are the caller's:
 * b_ih's is the same sum as b_hh's). dc[2]: scratch of B x H each. */
void lstm_seq_backward(backend *be, const lstm_tensors *w, const lstm_tensors *g, float *dgates, float *dh,
                       float *const dc[2], const lstm_seq_acts *a, int B, int L, int H);

/* One step of k rows (eval mode): x (k x in) and the states hp, cp (k x H; NULL: zeros) into hn, cn
 * (k x H); g, g2 and act (k x 4H each) are scratch. */
void lstm_seq_step(backend *be, const lstm_tensors *w, const float *x, int in, const float *hp, const float *cp,
                   float *hn, float *cn, float *g, float *g2, float *act, int k, int H);

#endif
