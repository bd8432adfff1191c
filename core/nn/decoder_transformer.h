/* ESPnet2's TransformerDecoder (espnet2/asr/decoder/transformer_decoder.py) on a compute backend,
 * forward and backward by hand, parameters in the model's flat buffer under ESPnet2's names
 * (decoder.embed.0, decoder.decoders.N.{self_attn, src_attn, feed_forward, norm1-3},
 * decoder.after_norm, decoder.output_layer; core/nn/model_params.c):
 *   ys_in = <sos> + ys (padded with <eos>), ys_out = ys + <eos> (padded with -1), sos = eos =
 *   vocab - 1 (<sos/eos>, the last token), as add_sos_eos
 *   -> Embedding, x * sqrt(d) + sinusoidal PE, dropout(positional_dropout_rate)
 *   -> num_blocks pre-LN blocks:
 *        x += dropout(self_attn(LN1(x)))    causal mask & target padding mask, self_attention_dropout_rate
 *        x += dropout(src_attn(LN2(x), hs)) keys/values from the encoder output, masked by its lengths
 *        x += dropout(W2(dropout(ReLU(W1(LN3(x))))))
 *   -> after_norm (eps 1e-12) -> output_layer -> log_softmax
 *   -> LabelSmoothingLoss(vocab, padding -1, lsm_weight, length_normalized_loss): the KL divergence
 *      from the smoothed targets summed over non-padding tokens, / batch size (or / tokens).
 * The model (core/nn/model.c) calls these from its loss and backward; decoder_score_batch is the
 * step the joint CTC/attention beam search calls.
 *
 * The same code runs ESPnet2's TransformerLM (a model with dims.lm, core/nn/lm_conf.h): blocks
 * without source attention (x += self_attn(norm1(x)), x += ffn(norm2(x)), causal, padding keys
 * masked), its input layer (lm.embed -> Linear -> LayerNorm -> dropout -> ReLU, optionally x *
 * sqrt(d) + pe), lm.encoder.after_norm and lm.decoder; inputs <sos/eos> + text padded with 0, the
 * loss the negative log-likelihood (no smoothing) / tokens, as ESPnetLanguageModel. hs is NULL and
 * T 0 for it, in decoder_loss and decoder_score_batch alike. */
#ifndef ESPNET3_NN_DECODER_TRANSFORMER_H
#define ESPNET3_NN_DECODER_TRANSFORMER_H

#include <stdint.h>

#include "core/nn/model.h"

/* The decoder's state for m (m->dims.dec_blocks > 0; its parameters are m->w.decoder):
 * activations on first use. Freed by decoder_free (asr_model_free calls it). */
decoder_acts *decoder_new(const asr_model *m);
void decoder_free(backend *be, decoder_acts *a);
/* The activations (and gradients, in training) of decoder_loss / decoder_backward for B target
 * sequences of L positions (max label length + 1) over an encoder output of T frames, allocated
 * now (decoder_loss grows them itself; core/nn/model_plan.c plans them with this). */
void decoder_reserve(asr_model *m, int B, int L, int T);

/* Teacher-forced forward and loss on the encoder output hs (device, B x T x d, lengths hlens on
 * the host) for labels (host, B x stride, padded with -1). train enables dropout with masks from
 * seed. Returns loss_att; *correct and *tokens get th_accuracy's counts. Keeps what the backward
 * needs (hs and hlens must stay until then). */
double decoder_loss(asr_model *m, const float *hs, const int *hlens, int B, int T, const int *labels,
                    const int *label_lens, int stride, int train, uint64_t seed, int64_t *correct,
                    int64_t *tokens);

/* The argmax token of each position of the last decoder_loss (its log-probabilities copied to the
 * host; the first maximum wins, as torch.argmax): ids gets B x L (L = its longest label + 1,
 * position j of utterance i at i * L + j). Returns L. ESPnet2's validation cer/wer read it. */
int decoder_loss_argmax(const asr_model *m, int *ids);

/* Backward of the last decoder_loss scaled by `scale` (dloss * (1 - ctc_weight)): parameter
 * gradients accumulate into m->grads; the gradient of hs goes into dhs (device, B x T x d;
 * acc 0 overwrites, 1 adds to what the CTC branch left there). */
void decoder_backward(asr_model *m, float *dhs, int acc, float scale);

/* One step of the beam search (ESPnet's TransformerDecoder.batch_score, eval mode, no dropout):
 * for each of n_hyps prefixes (host arrays of lens[i] >= 1 token ids, each starting with <sos>),
 * the log_softmax of the decoder's output at the prefix's last position given the encoder output
 * hs_dev of ONE utterance (T x d, on the device), copied to logp_host (n_hyps x vocab, row i for
 * prefix i). Works on models from asr_model_init and asr_model_init_inference.
 *
 * Keys and values are cached inside m: the source attention's per layer for the utterance, the
 * self-attention's per layer for every prefix scored by the last two calls. A prefix whose parent
 * (itself minus its last token) or itself was scored by one of them (the previous call first)
 * costs one new position; any other prefix is computed whole. The caches belong to one utterance: the caller starts each
 * utterance with decoder_score_new_utterance (its encoder output may come in the same buffer as the
 * last one's); another hs_dev or T also empties them. Results do not depend on what is cached
 * beyond float rounding (GEMMs of other shapes). The parameters must not change while one
 * utterance is being searched. */
void decoder_score_batch(const asr_model *m, const float *hs_dev, int T, const int *const *prefixes,
                         const int *lens, int n_hyps, float *logp_host);
/* The same over the encoder outputs of B utterances at once (hs_dev: B x T x d, utterance b's first
 * hlens[b] frames valid; the batched encoder's output): prefix i belongs to utterance utt[i] (NULL:
 * all to 0). Each prefix gets what decoder_score_batch gives it over its utterance alone (the same
 * source keys and values; caches never shared between utterances), up to the rounding of GEMMs over
 * other row counts. decoder_score_batch is this with B = 1. */
void decoder_score_utts(const asr_model *m, const float *hs_dev, const int *hlens, int B, int T, const int *utt,
                        const int *const *prefixes, const int *lens, int n_hyps, float *logp_host);

/* Sizes the caches and work buffers for up to n_hyps prefixes of up to len ids over utterances of
 * up to T frames, so that decoder_score_batch never grows them as the prefixes lengthen (a search
 * that knows its beam and maximum length: long-form windows of one length then reach their peak
 * memory in the first, not in whichever hears the longest hypothesis): from then on the prefixes
 * computed whole in one call go in groups of at most len rows. Only ever enlarges them. */
void decoder_score_reserve(const asr_model *m, int n_hyps, int len, int T);
/* The next decoder_score_batch call scores a new utterance: the previous one's caches are dropped. */
void decoder_score_new_utterance(const asr_model *m);
/* The next call's hs_dev (any buffer) and T are the utterance's encoder output grown at its end,
 * its earlier frames unchanged (the online search, core/decode/beam_search_online.h): the source
 * keys and values of the new frames are computed (the earlier frames' kept), the prefixes' kept,
 * as ESPnet's decoder keeps each hypothesis' cache (positions computed against the shorter output
 * stay as they were). */
void decoder_score_source_grew(const asr_model *m);

#endif
