/* The model's tensors as typed views into a flat buffer (as llm.c's ParameterTensors): struct
 * members named after ESPnet2's modules, each a device pointer. asr_model holds two views of one
 * type: m->w into the parameters (m->params) and m->g into the gradients (m->grads), bound once
 * when the model is made (core/nn/model_tensors.c) by the names of the parameter table
 * (core/nn/model_params.c, the one place that spells them). A tensor the model does not have is
 * NULL (a bias-free Linear's bias, the modules of other encoders), and so are the buffers
 * (BatchNorm's running statistics) in the gradient view. */
#ifndef ESPNET3_NN_MODEL_TENSORS_H
#define ESPNET3_NN_MODEL_TENSORS_H

#include "core/nn/model_params.h"

/* Linear, Conv1d / Conv2d: weight and bias (NULL for a bias-free Linear). */
typedef struct nn_linear {
    float *weight, *bias;
} nn_linear;

/* LayerNorm (weight, bias), or another norm's one tensor in weight (core/nn/norm_spec.h). */
typedef struct nn_norm {
    float *weight, *bias;
} nn_norm;

/* BatchNorm1d: affine parameters, then the buffers (parameter view only). */
typedef struct nn_batchnorm {
    float *weight, *bias, *running_mean, *running_var, *num_batches_tracked;
} nn_batchnorm;

/* Multi-headed attention; linear_pos and pos_bias_u / pos_bias_v with relative positions only. */
typedef struct nn_mha {
    nn_linear linear_q, linear_k, linear_v, linear_out, linear_pos;
    float *pos_bias_u, *pos_bias_v;
} nn_mha;

/* PositionwiseFeedForward: w_2(act(w_1(x))). */
typedef struct nn_ffn {
    nn_linear w_1, w_2;
} nn_ffn;

/* encoder.encoders.<l>: the members of the three encoders' blocks (each kind has its own subset). */
typedef struct enc_block_tensors {
    nn_mha self_attn;             /* self_attn; the E-Branchformer's attn */
    nn_ffn feed_forward, feed_forward_macaron;
    nn_norm norm1, norm2;         /* the Transformer's: before the attention, before the feed-forward */
    nn_norm norm_ff, norm_mha, norm_ff_macaron, norm_conv, norm_mlp, norm_final;
    struct {                      /* the Conformer's ConvolutionModule */
        nn_linear pointwise_conv1, depthwise_conv, pointwise_conv2;
        nn_batchnorm norm;
    } conv_module;
    struct {                      /* the E-Branchformer's cgMLP: channel_proj1.0, csgu, channel_proj2 */
        nn_linear channel_proj1, channel_proj2;
        struct {
            nn_norm norm;
            nn_linear conv, linear; /* linear: use_linear_after_conv */
        } csgu;
    } cgmlp;
    nn_linear depthwise_conv_fusion, merge_proj; /* the E-Branchformer's merge */
    struct {                      /* the asr_transducer task's Conv1d block: conv, bn, out_pos */
        nn_linear conv, out_pos;
        nn_batchnorm bn;
    } conv1d;
} enc_block_tensors;

/* encoder.embed: the input layer (model_embed.c). */
typedef struct embed_tensors {
    nn_linear conv[3];            /* conv.0, conv.2, conv.4 (conv2d*, conv1d2) */
    nn_linear out;                /* out.0 (out for conv2d8): the Linear after the convs */
    nn_linear linear;             /* input_layer linear: embed.0 */
    nn_norm norm;                 /* input_layer linear: embed.1 */
    nn_linear plain;              /* input_layer null with another input size: embed itself */
} embed_tensors;

/* decoder.decoders.<l>; a TransformerLM's lm.encoder.encoders.<l> has no src_attn, and its norm2
 * (the feed-forward's) is bound as norm3, the decoder's feed-forward norm. */
typedef struct dec_block_tensors {
    nn_mha self_attn, src_attn;
    nn_ffn feed_forward;
    nn_norm norm1, norm2, norm3;
} dec_block_tensors;

/* The attention decoder (decoder.*) or a TransformerLM (lm.*): the same code runs both. */
typedef struct decoder_tensors {
    float *embed;                 /* decoder.embed.0 / lm.embed: the Embedding's weight */
    nn_linear lm_in;              /* the LM's input layer: lm.encoder.embed.0 (Linear) */
    nn_norm lm_in_norm;           /* and lm.encoder.embed.1 (LayerNorm) */
    dec_block_tensors *blocks;    /* dims.dec_blocks */
    nn_norm after_norm;           /* decoder.after_norm / lm.encoder.after_norm */
    nn_linear output_layer;       /* decoder.output_layer / lm.decoder */
} decoder_tensors;

/* A torch.nn.LSTM layer (or torch.nn.GRU's: the same four tensors of 3H rows, not 4H): lm.rnn's
 * layer l of a SequentialRNNLM (suffix _l<l>), a transducer decoder's decoder.decoder.<l> (suffix
 * _l0). */
typedef struct lstm_tensors {
    float *weight_ih, *weight_hh, *bias_ih, *bias_hh;
} lstm_tensors;

/* A SequentialRNNLM (lm.*). */
typedef struct rnn_lm_tensors {
    float *encoder;               /* lm.encoder: the Embedding's weight */
    lstm_tensors *rnn;            /* dims.lm_layers */
    nn_linear decoder;            /* lm.decoder */
} rnn_lm_tensors;

/* The transducer (core/nn/transducer.h): ESPnet2's TransducerDecoder and JointNetwork. */
typedef struct transducer_tensors {
    float *embed;                 /* decoder.embed: the Embedding's weight */
    lstm_tensors *rnn;            /* decoder.decoder.<l> (_l0): dims.tr_layers */
    nn_linear lin_enc, lin_dec, lin_out; /* joint_network.*; lin_dec.bias NULL without lin_dec_bias */
    nn_linear lm_lin;             /* the auxiliary LM loss' (dims.tr_lm_lin), else NULLs */
} transducer_tensors;

/* Where a module's tensors lie in the view's buffer, in floats from its base: [lo, hi), and how
 * many floats its tensors cover (covered == hi - lo: nothing else lies between them). The backward
 * reports gradients final by these spans (core/nn/model.c). */
typedef struct tensor_span {
    size_t lo, hi, covered;
} tensor_span;

/* The spans of the modules whose gradients the backward reports final at its own time. */
typedef struct model_spans {
    tensor_span *blocks;          /* encoder.encoders.<l>: dims.blocks */
    tensor_span encoder;          /* the blocks together, the embedding and the preencoder */
    tensor_span heads;            /* ctc.ctc_lo, encoder.after_norm, encoder.conditioning_layer */
} model_spans;

typedef struct model_tensors {
    nn_linear preencoder;         /* preencoder.linear_out */
    embed_tensors embed;
    enc_block_tensors *blocks;    /* dims.blocks */
    nn_norm after_norm;           /* encoder.after_norm */
    nn_linear conditioning_layer; /* encoder.conditioning_layer (intermediate CTC) */
    nn_linear ctc_lo;             /* ctc.ctc_lo */
    decoder_tensors decoder;      /* the attention decoder or a TransformerLM */
    rnn_lm_tensors rnn_lm;
    transducer_tensors transducer;
    model_spans spans;            /* bound with the members */
} model_tensors;

/* Binds v to base, a buffer of n floats in table t's layout (the parameters with buffers:
 * t->state_total; the gradients: t->total): every entry of t below n gets its member, and an
 * entry no member names aborts (a table entry the views do not know). Free with
 * model_tensors_free. */
void model_tensors_bind(model_tensors *v, const param_table *t, const model_dims *d, float *base, size_t n);
void model_tensors_free(model_tensors *v);

#endif
