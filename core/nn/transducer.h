/* ESPnet2's transducer branch of the ASR task on the backend, forward and backward by hand: the
 * TransducerDecoder (espnet2/asr/decoder/transducer_decoder.py) and the JointNetwork the ASR task
 * builds beside it (espnet2/asr_transducer/joint_network.py), trained with the RNN-T loss as
 * ESPnetASRModel._calc_transducer_loss does:
 *   decoder_in = blank (0) + labels, padded with blank (B x U1, U1 = longest label sequence + 1)
 *   -> decoder.embed (Embedding, padding_idx 0: the blank's row stays zero and gets no gradient)
 *   -> dropout(dropout_embed) -> num_layers x (one-layer torch.nn.LSTM, or torch.nn.GRU with
 *      rnn_type gru (core/nn/gru_seq.h) -> dropout(dropout)), zero initial states, over the padded
 *      batch as ESPnet runs it (a position never sees a later one); the first layer's input is the
 *      embedding's width (model_tr_embed: the asr_transducer RNNDecoder's embed_size)
 *   -> joint_network: tanh(lin_enc(enc[b, t]) + lin_dec(dec[b, u])) -> lin_out: logits
 *      (B, T, U1, V) -> the RNN-T loss (core/compute/rnnt.h, blank 0, sum over the batch / B: warp-
 *      transducer's RNNTLoss(reduction "mean") that ESPnet2 calls).
 * The asr_transducer task's StatelessDecoder (model_dims.tr_stateless;
 * espnet2/asr_transducer/decoder/stateless_decoder.py) is this with no LSTM layer: the embedding
 * after its dropout (embed_dropout_rate) is the decoder's output, a position sees its own label only.
 * The asr_transducer task's model_conf adds (core/nn/body_conf.h):
 *   fastemit_lambda: FastEmit (Yu et al. 2021) as the warp-transducer ESPnet2 installs applies it:
 *     the loss is unchanged, its gradient through a label arc's log-prob is scaled by 1 + lambda
 *     (core/compute/kernel_math.h's rnnt_node_weight / rnnt_label_arc, inside the RNN-T ops);
 *   auxiliary_lm_loss_weight > 0: lm_lin (Linear, decoder output -> V) on the decoder's output at
 *     positions 0 .. U1 - 2 (decoder_out[:, :-1]), log_softmax, and ESPnet2's _calc_lm_loss against
 *     the labels: KL divergence from true_dist = eps (smoothing / (V - 1)) everywhere and
 *     1 - smoothing + eps at the label (auxiliary_lm_loss_smoothing), rows past an utterance's labels
 *     masked, summed and divided by B; the model loss adds auxiliary_lm_loss_weight times it.
 * The encoder output is the encoder's after its after_norm (what CTC reads before its dropout).
 * The decoder's rows are time-major (row u * B + b) as the LSTM's recurrence wants them
 * (core/nn/lstm_seq.h); lin_dec's output is reordered to (B, U1, J) for the joint.
 *
 * Memory: the joint's activations and logits are B x tc x U1 x (2 J + V) floats for a chunk of tc
 * frames; the chunk is the whole utterance when that fits TRANSDUCER_JOINT_FLOATS, else the frames
 * run in chunks (the RNN-T ops take the logits a chunk at a time) and the backward computes each
 * chunk's joint again. */
#ifndef ESPNET3_NN_TRANSDUCER_H
#define ESPNET3_NN_TRANSDUCER_H

#include <stddef.h>
#include <stdint.h>

#include "core/nn/model.h"

/* The joint's chunk budget in floats (z, its gradient and the logits together): 16 MB. A batch
 * whose joint is larger runs in chunks anyway (the backward computing each again), and then smaller
 * chunks cost no more work: at scripts/bench/train_step's rnnt (16 x 99 frames x 51 x (2 x 256 +
 * 256)) 128 MB ran 2 chunks and held 115 MB more at the step's peak than 16 MB's 17 chunks. */
#define TRANSDUCER_JOINT_FLOATS ((size_t)4 << 20)

typedef struct transducer_acts transducer_acts;

transducer_acts *transducer_new(const asr_model *m);
void transducer_free(backend *be, transducer_acts *t);
/* Allocates now what a loss and backward of B utterances of T2 encoder frames with up to Lmax
 * labels needs. */
void transducer_reserve(asr_model *m, int B, int T2, int Lmax);

/* The joint's budget in floats from now on (the default TRANSDUCER_JOINT_FLOATS; at least one
 * frame's nodes run at a time whatever it says). */
void transducer_set_joint_floats(asr_model *m, size_t floats);

/* The RNN-T loss of the encoder output enc (device, B x T2 x d; lengths m->hlens) against labels
 * (host, B x stride padded with -1, lengths label_lens): sum over the batch / B. train enables
 * dropout with masks from seed. */
double transducer_loss(asr_model *m, const float *enc, int B, int T2, const int *labels, const int *label_lens,
                       int stride, int train, uint64_t seed);
/* The auxiliary LM loss of the last transducer_loss (dims.tr_lm_lin; NAN without lm_lin). */
double transducer_lm_loss(const asr_model *m);
/* Backward of the last transducer_loss and auxiliary LM loss, dloss the model loss' gradient (the
 * RNN-T loss' share rates.tr_weight, with FastEmit's rates.tr_fastemit; the LM loss'
 * rates.tr_lm_weight): parameter gradients accumulate into m->g; the encoder output's gradient is
 * written into denc (B x T2 x d), or added to it when acc. */
void transducer_backward(asr_model *m, float *denc, int acc, float dloss);

/* ---- decoding: the search's steps (eval mode) on host arrays (core/decode/transducer_search.h). */

/* joint_network.lin_enc of T encoder frames (device, T x d) into encp (host, T x joint). */
void transducer_enc_proj(asr_model *m, const float *enc, int T, float *encp);
/* The prediction network's step for n hypotheses: each one's last label (labels, host) from its
 * state before it (h, c: host, n x layers x hidden, a hypothesis' layers together) into its output
 * (dec_out: host, n x hidden) and its state after (h_out, c_out: as h, c; a GRU has no cell
 * state: c is not read and c_out is written zeros). The stateless decoder
 * has no state: its output is the last label's embedding, and the states are not touched. */
void transducer_dec_step(asr_model *m, const int *labels, const float *h, const float *c, int n, float *dec_out,
                         float *h_out, float *c_out);
/* The joint's log-probabilities log_softmax(lin_out(tanh(encp[i] + lin_dec(dec_out[i])))) of n rows
 * (host: encp n x joint, dec_out n x hidden) into logp (host, n x vocab). */
void transducer_joint_logp(asr_model *m, const float *encp, const float *dec_out, int n, float *logp);

#endif
