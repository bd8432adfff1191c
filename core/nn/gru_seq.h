/* One torch.nn.GRU layer over a padded batch of sequences on the backend, forward and backward
 * through time, for the transducer decoders (core/nn/transducer.c, decoder_conf.rnn_type gru) and the
 * SequentialRNNLM (core/nn/lm_rnn.c, lm_conf.rnn_type gru).
 * Rows are time-major (row t * B + b) as in core/nn/lstm_seq.h: the caller computes the input
 * products of all positions as one GEMM; each step adds W_hh h_{t-1} + b_hh as one GEMM of B rows
 * (b_hn stays inside r * (W_hn h + b_hn), so the hidden side is kept apart from the input side). */
#ifndef ESPNET3_NN_GRU_SEQ_H
#define ESPNET3_NN_GRU_SEQ_H

#include "core/compute/backend.h"
#include "core/nn/lstm_seq.h"
#include "core/nn/model_tensors.h"

/* The activations of L steps of B rows of H units are lstm_seq_acts' hbuf ((L + 1) B x H: B zero
 * rows, the initial state, then h of every position) and act (L B x 4H: r, z, n and the hidden
 * side's n part); its c is not used. */

/* p (L B x 3H): W_ih x + b_ih of every position; gh (B x 3H): scratch. Fills a from the zero
 * initial state. */
void gru_seq_forward(backend *be, const lstm_tensors *w, const float *p, const lstm_seq_acts *a, float *gh, int B,
                     int L, int H);

/* Backward through time: dh (L B x H) holds the gradient of the layer's h on entry (and gathers the
 * recurrent part in place); writes dgi (L B x 3H, the gradient of the input side's pre-activations)
 * and dgh (L B x 3H, the hidden side's), and accumulates W_hh's and b_hh's gradients into g (W_ih's
 * and b_ih's are the caller's, from dgi). dhp: scratch of B x H. */
void gru_seq_backward(backend *be, const lstm_tensors *w, const lstm_tensors *g, float *dgi, float *dgh, float *dh,
                      float *dhp, const lstm_seq_acts *a, int B, int L, int H);

/* One step of k rows (eval mode): x (k x in) and the state hp (k x H; NULL: zeros) into hn (k x H);
 * gi, gh (k x 3H) and act (k x 4H) are scratch. */
void gru_seq_step(backend *be, const lstm_tensors *w, const float *x, int in, const float *hp, float *hn, float *gi,
                  float *gh, float *act, int k, int H);

#endif
