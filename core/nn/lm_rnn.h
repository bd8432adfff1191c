/* ESPnet2's SequentialRNNLM (rnn_type lstm or gru) inside ESPnetLanguageModel on a compute backend, forward
 * and backward by hand, parameters in the model's flat buffer under ESPnet's names (lm.encoder,
 * lm.rnn.{weight,bias}_{ih,hh}_l<k>, lm.decoder; core/nn/model_params.c):
 *   x = <sos/eos> + text padded with 0 (B x L, L = longest text + 1), run over all L positions as
 *   ESPnet runs its padded batch (no packing: a position never sees a later one, so padding changes
 *   no real position's output)
 *   -> lm.encoder (Embedding, padding_idx 0) -> dropout
 *   -> nlayers LSTM layers as torch.nn.LSTM (gates = W_ih x + b_ih + W_hh h + b_hh in the order i, f,
 *      g, o; c = f c_prev + i g; h = o tanh(c); zero initial state; dropout between layers), or with
 *      rnn_type gru (dims.lm_gru) GRU layers as torch.nn.GRU (core/nn/gru_seq.h: gates r, z, n, the
 *      hidden side W_hh h + b_hh kept apart; no cell state)
 *   -> dropout -> lm.decoder (Linear) -> log_softmax -> the negative log-likelihood of text +
 *      <sos/eos> summed over real tokens / their count.
 * Rows are time-major (row t * B + b), so each step of the recurrence is B contiguous rows: a layer's
 * input projection W_ih x (+ both biases) is one GEMM over all positions, the recurrence one GEMM of B
 * rows per step accumulating into it (also per step of the backward through time), W_hh's gradient
 * one GEMM at the end. Without dropout on the embedding (ESPnet's default, and always in eval mode),
 * the first layer's W_ih x is a row of the table E W_ih^T (one row per token of the vocabulary), so
 * that product and both of its gradients cost V instead of N rows. The model (core/nn/model.c)
 * calls these for a model with dims.lm = LM_SEQ_RNN. */
#ifndef ESPNET3_NN_LM_RNN_H
#define ESPNET3_NN_LM_RNN_H

#include <stdint.h>

#include "core/nn/model.h"

typedef struct lm_rnn lm_rnn;

/* The LM's state for m (its parameters are m->w.rnn_lm): activations on first use. */
lm_rnn *lm_rnn_new(const asr_model *m);
void lm_rnn_free(backend *be, lm_rnn *r);
/* Allocates now what a loss (and, in training, its backward) of B texts of up to L - 1 tokens needs. */
void lm_rnn_reserve(asr_model *m, int B, int L);

/* Forward and loss of B texts (labels: host, B x stride, lengths label_lens); train enables dropout
 * with masks from seed. Returns the loss per token; *correct and *tokens get the argmax hits and
 * the token count (eos included). */
double lm_rnn_loss(asr_model *m, const int *labels, const int *label_lens, int stride, int B, int train,
                   uint64_t seed, int64_t *correct, int64_t *tokens);
/* The last lm_rnn_loss's log-probabilities (device, L x B x vocab, time-major: row t * B + b). */
const float *lm_rnn_logp(const asr_model *m);
/* Backward of the last lm_rnn_loss scaled by `scale`: gradients accumulate into m->grads. */
void lm_rnn_backward(asr_model *m, float scale);

/* The beam search's step (SequentialRNNLM.batch_score, eval mode): for n prefixes (host, each
 * starting with <sos>), the next-token log_softmax into logp_host (n x vocab). Each prefix's state
 * (h, and an LSTM's c, of every layer after it) is kept for the next call: a prefix whose parent (itself minus its
 * last token) the previous call scored costs one step, any other runs from the zero state.
 * Results do not depend on what is cached beyond float rounding. */
void lm_rnn_score_batch(const asr_model *m, const int *const *prefixes, const int *lens, int n, float *logp_host);
/* The next lm_rnn_score_batch call starts from empty caches. */
void lm_rnn_score_new_utterance(const asr_model *m);

#endif
