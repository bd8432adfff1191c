/* ESPnet2's Transformer-CTC or Conformer-CTC ASR model on a compute backend, forward and backward
 * by hand (or, with dims.lm, ESPnet2's TransformerLM in ESPnetLanguageModel: the decoder's code
 * without source attention, core/nn/decoder_internal.h, or its SequentialRNNLM, core/nn/lm_rnn.h;
 * its forward only notes B, train and seed,
 * asr_model_loss reads the token sequences from the labels and returns the LM's loss, the
 * negative log-likelihood per token, in loss_att):
 *   feats (B, T, idim), already normalized
 *   -> the input layer (encoder_conf.input_layer, core/nn/model_embed.c): Conv2dSubsampling
 *      (Conv2d(1, d, 3, 2) + ReLU, Conv2d(d, d, 3, 2) + ReLU, Linear(d * f2, d)), its 2/6/8
 *      variants, Conv1dSubsampling2, linear or none; then x * sqrt(d) (+ sinusoidal PE, except
 *      with the Conformer's relative positions), dropout(positional_dropout_rate)
 *   -> num_blocks pre-LN blocks (core/nn/encoder_transformer.c, core/nn/encoder_conformer.c,
 *      core/nn/encoder_ebranchformer.c; core/nn/encoder_contextual.c runs them over blocks of frames)
 *   -> after_norm LayerNorm -> dropout(ctc_conf.dropout_rate) -> ctc_lo -> log_softmax
 *   -> CTC loss (blank 0, sum over the batch / B, zero_infinity).
 * With model.decoder: transformer, the encoder output (after after_norm) also feeds ESPnet2's
 * TransformerDecoder (core/nn/decoder_transformer.h) and the loss is ESPnetASRModel's joint
 * CTC/attention loss. With model.decoder: transducer, it feeds ESPnet2's transducer decoder and
 * joint network instead (core/nn/transducer.h; loss_transducer + ctc_weight * loss_ctc).
 * Encoder output lengths use the exact conv formula per utterance (input_layer_out_len: e.g.
 * ((L - 1) // 2 - 1) // 2 for conv2d), so results do not depend on batch padding (ESPnet2 slices
 * the padded mask instead; both agree at batch size 1). Parameters and gradients are flat buffers
 * laid out by core/nn/model_params.h, read through typed views by module (m->w, m->g:
 * core/nn/model_tensors.h); the Conformer's BatchNorm buffers follow the parameters in m->params
 * (not in m->grads). */
#ifndef ESPNET3_MODEL_H
#define ESPNET3_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "core/compute/backend.h"
#include "core/nn/model_params.h"
#include "core/nn/model_tensors.h"

typedef struct model_rates {
    float dropout;       /* encoder_conf.dropout_rate: residual branches and the FF inner layer */
    float pos_dropout;   /* encoder_conf.positional_dropout_rate */
    float att_dropout;   /* encoder_conf.attention_dropout_rate */
    float ctc_dropout;   /* ctc_conf.dropout_rate */
    float pre_dropout;   /* preencoder_conf.dropout: on the features before the preencoder */
    float layer_drop;    /* encoder_conf.layer_drop_rate (the E-Branchformer's stochastic depth) */
    int ctc_keep_inf;    /* ctc_conf.zero_infinity false: impossible alignments give inf/NaN */
    /* The attention decoder's rates (decoder_conf) and the joint loss (model_conf); read only by a
     * model with a decoder (dims.dec_blocks > 0). See core/nn/decoder_conf.h. */
    float dec_dropout, dec_pos_dropout, dec_self_att_dropout, dec_src_att_dropout;
    float ctc_weight;    /* loss = ctc_weight * loss_ctc + (1 - ctc_weight) * loss_att */
    float lsm_weight;    /* label smoothing of loss_att */
    int length_normalized_loss; /* loss_att / tokens instead of / batch size */
    float interctc_weight; /* model_conf.interctc_weight (core/nn/interctc.h) */
    /* The transducer decoder's (decoder_conf.dropout_embed, dropout; core/nn/transducer.h). With a
     * transducer the loss is loss_transducer + ctc_weight * loss_ctc, as ESPnetASRModel's. */
    float tr_dropout_embed, tr_dropout;
    /* loss_transducer's weight: 1 in the ASR task; the asr_transducer task's transducer_weight
     * (its loss is tr_weight * loss_transducer + ctc_weight * loss_ctc, ctc_weight being its
     * auxiliary_ctc_weight; core/nn/body_conf.h). */
    float tr_weight;
    /* The asr_transducer task's model_conf.fastemit_lambda (FastEmit on the RNN-T loss' gradient),
     * auxiliary_lm_loss_weight and auxiliary_lm_loss_smoothing (the auxiliary LM loss on lm_lin;
     * read only with dims.tr_lm_lin). 0 in the ASR task. */
    float tr_fastemit, tr_lm_weight, tr_lm_smoothing;
    /* dropout and att_dropout of each block group (model_dims.n_groups > 1; core/nn/encoder_body.c). */
    float group_dropout[MODEL_MAX_GROUPS], group_att_dropout[MODEL_MAX_GROUPS];
    /* The asr_transducer task's main_conf.dynamic_chunk_training (its Encoder.forward): each forward
     * of the loss, validation's too, draws a chunk size c uniform in [1, T2 - 1] (T2 the batch's
     * encoder frames), takes T2 when c > T2 * chunk_threshold and c % chunk_short + 1 otherwise,
     * and masks the attention to that chunk and chunk_left chunks before it (0: all before). Not
     * set when decoding (asr_transducer_inference turns it off): full context. */
    int chunk_training, chunk_short, chunk_left;
    float chunk_threshold;
    /* The asr_transducer task's main_conf.blockdrop_rate (MultiBlocks' stochastic depth: in
     * training, block l of n is skipped with probability blockdrop * l / n; core/nn/encoder_body.c). */
    float blockdrop;
} model_rates;

/* trainer.sync_batchnorm (torch's SyncBatchNorm): all_reduce sums n host floats over every rank in
 * place (every rank calls it in the same order); it exits on a communication failure. Set by the
 * trainer with more than one rank; NULL: each rank normalizes with its own batch's statistics. */
typedef struct bn_sync {
    void (*all_reduce)(void *ctx, float *host, size_t n);
    void *ctx;
} bn_sync;

typedef struct encoder_acts encoder_acts; /* the encoder's own activations (core/nn/encoder_*.c) */
typedef struct enc_chunk enc_chunk;       /* chunk-by-chunk encoding (core/nn/encoder_chunk.h) */
typedef struct decoder_acts decoder_acts;
typedef struct lm_rnn lm_rnn;             /* a SequentialRNNLM's state (core/nn/lm_rnn.h) */
typedef struct interctc_acts interctc_acts; /* intermediate CTC's activations (core/nn/interctc.c) */
typedef struct transducer_acts transducer_acts; /* the transducer's (core/nn/transducer.c) */

typedef struct asr_model {
    model_dims dims;
    param_table table;
    model_rates rates;
    backend *be;
    float *params;           /* device, table.state_total floats: parameters, then buffers */
    float *grads;            /* device, accumulated by backward; zero with asr_model_zero_grad */
    /* The tensors by module (core/nn/model_tensors.h), bound once: w into params, g into grads
     * (all NULL without gradients). */
    model_tensors w, g;

    /* Activations of the last forward (device), sized for the largest batch seen. */
    int B, T, T2;
    int *hlens;              /* host, B encoder lengths */
    int train;
    int inference;           /* made by asr_model_init_inference: no gradients, one block workspace */
    uint64_t seed;
    /* This forward's attention chunk mask (rates.chunk_training; 0: none): chunk frames, left chunks. */
    int chunk, left_chunks;
    /* dims.causal: the causal convolutions' padded input, output and input gradient (each
     * cap_cpad floats; core/nn/encoder_blocks.c). */
    float *cpad[3];
    size_t cap_cpad;
    size_t cap_rows, cap_in, cap_c[3], cap_saved[3];
    /* The input layer (core/nn/model_embed.c): conv outputs c[i] (B, tk[i], fk[i], d) channels
     * last, wout_fc (embed.out's weight in their column order), e (B x T2, d) its Linear output;
     * linear: e the Linear, eln LayerNorm(e) with emean / erstd, eact after dropout (and ReLU). */
    int nconv, tk[3], fk[3];
    float *x, *c[3], *wout_fc, *e, *eln, *emean, *erstd, *eact, *h0;
    /* wout_fc holds the loaded weight's columns (inference only: made on the first forward after
     * the weights or the buffers change, not per call; a stream's pushes reordered 5 MB each) */
    int wout_fc_ready;
    /* The preencoder (dims.pre_out > 0): its input after dropout (pre_drop, or the features
     * themselves: pre_in), its output (pre_x, which x then points at), and its output's gradient. */
    float *pre_drop, *pre_x, *dpre;
    const float *pre_in;
    encoder_acts *enc;       /* the blocks between h0 and the head */
    /* Set while core/nn/encoder_chunk.c runs the blocks over a chunk: their self-attention reads
     * the frames before the chunk too (enc_attn_forward); NULL otherwise. */
    enc_chunk *stream_chunk;
    /* Set by an encoder that also reads the positional stage's input (the contextual block
     * encoder): the gradient of that input through the encoder's own branch (B x T2, d), which
     * the input layer's backward adds; NULL otherwise. */
    const float *dpos_in;
    interctc_acts *ic;       /* intermediate CTC (dims.n_interctc); NULL when nothing needs it */
    const float *h_enc;      /* the last block's output */
    float *lnf, *meanf, *rstdf, *zd, *logp;
    /* Backward work; csaved[i]: what the forward of conv i keeps for its backward (NULL: nothing,
     * be->conv2d_saved_floats). */
    float *dh, *dtmp, *dwout_fc, *dc[3], *dlogp, *csaved[3];
    /* The labels of the last loss (host), for the backward. */
    const int *labels, *label_lens;
    int label_stride;
    /* The attention decoder (core/nn/decoder_transformer.h; NULL without one) and the branches of
     * the last loss: loss_ctc / loss_att are NAN for a branch the model does not have;
     * att_correct / att_tokens are th_accuracy's numerator and denominator. */
    decoder_acts *dec;
    lm_rnn *rnn;             /* dims.lm LM_SEQ_RNN: the LSTM LM (core/nn/lm_rnn.h), else NULL */
    transducer_acts *tr;     /* model_has_transducer(&dims): the transducer decoder and joint network, else NULL */
    /* trainer.sync_batchnorm (core/nn/encoder_syncbn.c): the hook, a device scratch of 4 x d floats
     * and the rows of the last synchronized forward over all ranks. */
    bn_sync sync;
    float *sync_dev;
    double sync_count;
    double loss_ctc, loss_att, loss_transducer; /* NAN for a branch the model does not have */
    double loss_aux_lm;      /* the asr_transducer task's auxiliary LM loss (dims.tr_lm_lin), else NAN */
    double loss_interctc[MODEL_MAX_INTERCTC]; /* each intermediate layer's CTC loss (with interctc_weight) */
    int64_t att_correct, att_tokens;
    /* Set by the trainer for the backward before a step (DDP buckets overlapped with it): called
     * during asr_model_backward with the trained floats [lo, hi) whose gradients are final, i.e.
     * nothing later in this backward writes them (the heads, the decoder and after_norm before the
     * encoder's blocks run, then each block as it finishes). Ranges are disjoint; the embedding's
     * are not reported (the caller takes the rest after backward). NULL: no reports. */
    void (*grads_final)(void *ctx, size_t lo, size_t hi);
    void *grads_final_ctx;
} asr_model;

/* Allocates parameters and gradients on the backend (parameters zeroed: initialize with param_init
 * or load; buffers at torch's initial values). */
void asr_model_init(asr_model *m, backend *be, const model_dims *d, const model_rates *r);
/* For decoding only: no gradient buffers and no backward work; all blocks share one set of
 * activation buffers (a block's input is consumed before its output is written), so memory does
 * not grow with num_blocks (but for an asr_transducer Encoder whose blocks differ, whose blocks
 * keep their own: core/nn/encoder_body.c). Forward with train = 0; loss and backward are not available. */
void asr_model_init_inference(asr_model *m, backend *be, const model_dims *d);
void asr_model_free(asr_model *m);
/* All parameters as host floats (table.total, in the flat layout of core/nn/model_params.h),
 * through be->copy: for initialization, checkpoints and hashes. */
void asr_model_params_to_host(const asr_model *m, float *host);
void asr_model_params_from_host(asr_model *m, const float *host);
/* Parameters and buffers (table.state_total floats): what model files and checkpoints hold. */
void asr_model_state_to_host(const asr_model *m, float *host);
void asr_model_state_from_host(asr_model *m, const float *host);
void asr_model_zero_grad(asr_model *m);
/* For the encoders' backward: block l's gradients are final (reports them to m->grads_final). */
void asr_model_block_grads_final(asr_model *m, int l);
/* Allocates now the activations a forward, loss and backward of B utterances of T frames with
 * label sequences of at most Lmax tokens needs (the forward grows them on demand otherwise);
 * core/nn/model_plan.c plans an arena with it. */
void asr_model_reserve(asr_model *m, int B, int T, int Lmax);

/* Forward to log-probabilities (device m->logp, B x T2 x vocab) and encoder lengths m->hlens.
 * feats is a device buffer (B, T, idim); train enables dropout with masks from `seed` and the
 * Conformer's BatchNorm training mode (batch statistics, running statistics updated); train 0 is
 * eval mode (running statistics). */
void asr_model_forward(asr_model *m, const float *feats, const int *feat_lens, int B, int T, int train,
                       uint64_t seed);
/* The input layer alone (eval mode) on B utterances of T frames (device feats, no preencoder):
 * its output before the positional stage (B, m->T2, d), for a streaming encoder that positions
 * its frames itself (core/nn/encoder_stream.h). */
const float *asr_model_embed(asr_model *m, const float *feats, int B, int T);
/* The encoder's blocks and after_norm (eval mode) over m->h0's m->B x m->T2 frames as the input
 * layer left them (asr_model_embed; core/nn/encoder_chunk.c trims them first): returns m->lnf. */
const float *asr_model_encode_blocks(asr_model *m);
/* The loss of the last forward: labels (B x stride, host, padded with -1), per-utterance CTC
 * losses (may be NULL). CTC only: the CTC loss (sum / B). With a decoder (ESPnetASRModel): the
 * decoder runs on the encoder output with <sos> + labels, and the result is ctc_weight *
 * loss_ctc + (1 - ctc_weight) * loss_att (loss_att alone without a CTC branch); m->loss_ctc,
 * loss_att, att_correct and att_tokens hold the parts. With intermediate CTC (interctc_weight w), the
 * CTC branch's loss is (1 - w) * loss_ctc + w * the mean of m->loss_interctc (loss_ctc stays the
 * final layer's, as ESPnet2's stats). With a transducer: loss_transducer (m->loss_transducer) +
 * ctc_weight * the CTC branch's loss (loss_transducer alone without a CTC branch). */
double asr_model_loss(asr_model *m, const int *labels, const int *label_lens, int stride, double *losses);
/* What validation's error rates read after asr_model_loss (eval mode): the attention decoder's
 * argmax token of each position (host ids, B x L, L = the longest label + 1; returns L; a model
 * with a decoder), and the k-th intermediate CTC layer's log-probabilities (device, as m->logp;
 * interctc_weight not 0). */
int asr_model_att_argmax(const asr_model *m, int *ids);
const float *asr_model_interctc_logp(const asr_model *m, int k);
/* A language model's (dims.lm) beam-search step: the next-token log-probs of n prefixes (host,
 * each starting with <sos>) into logp_host (n x vocab), by its class's step (decoder_score_batch
 * without an utterance, or lm_rnn_score_batch); asr_model_lm_new_utterance drops its caches. */
void asr_model_lm_score(const asr_model *m, const int *const *prefixes, const int *lens, int n, float *logp_host);
void asr_model_lm_new_utterance(const asr_model *m);

/* Backward of the last forward + loss; gradients accumulate into m->grads (scaled by dloss). The
 * decoder's gradient of the encoder output joins the CTC branch's before encoder.after_norm. */
void asr_model_backward(asr_model *m, float dloss);

#endif
