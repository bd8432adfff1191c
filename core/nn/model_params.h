/* The parameters of ESPnet2's Transformer/Conformer-CTC ASR model as one flat float buffer with a size
 * table (llm.c style): every tensor has its ESPnet2 state-dict name, shape and offset, so
 * checkpoints map one to one, and gradients / optimizer moments are flat buffers of the same
 * layout. */
#ifndef ESPNET3_MODEL_PARAMS_H
#define ESPNET3_MODEL_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "core/config/config_types.h"
#include "core/base/log.h"

/* model.encoder: ESPnet2's TransformerEncoder (the zero value), ConformerEncoder,
 * EBranchformerEncoder or ContextualBlockTransformerEncoder / ContextualBlockConformerEncoder
 * (contextual_block_transformer / _conformer: the Transformer's or the Conformer's blocks run over
 * overlapping blocks of frames, core/nn/encoder_contextual.c; model_dims.ctx_conformer). */
typedef enum encoder_kind {
    ENC_TRANSFORMER = 0, ENC_CONFORMER = 1, ENC_EBRANCHFORMER = 2, ENC_CONTEXTUAL = 3,
    ENC_CONV1D = 4, /* the asr_transducer task's conv1d block: a model_group's kind only */
} encoder_kind;
/* encoder_conf.activation_type of the Conformer (feed-forward and convolution module), the
 * E-Branchformer's ffn_activation_type and gate_activation (identity: the gate's only). */
typedef enum encoder_act { ACT_SWISH = 0, ACT_RELU = 1, ACT_IDENTITY = 2 } encoder_act;

/* encoder_conf.input_layer (ESPnet2's TransformerEncoder / ConformerEncoder): Conv2dSubsampling
 * (x4, the zero value), Conv2dSubsampling2 / 6 / 8, Conv1dSubsampling2 (transformer only), linear
 * (Linear, LayerNorm, Dropout (, ReLU: transformer)), or null (transformer: nothing when
 * input size = output_size, else a plain Linear, both without positional encoding; conformer: the
 * positional encoding alone, input size = output_size). */
typedef enum input_layer_kind {
    IN_CONV2D = 0, IN_CONV2D2, IN_CONV2D6, IN_CONV2D8, IN_CONV1D2, IN_LINEAR, IN_NONE
} input_layer_kind;

/* One convolution of an input layer: kernel k, stride s along time and (conv2d*) frequency;
 * conv1d2's are Conv1d over time with the features as channels. */
typedef struct input_conv {
    int k, s;
} input_conv;

/* The convolutions of input layer `kind` into out (at most 3); returns their count (0 without). */
int input_layer_convs(int kind, input_conv *out);
/* Frames after the input layer for t input frames: the exact conv formula, conv after conv
 * ((t - k) // s + 1, 0 when shorter than a kernel); t itself without convs. */
int input_layer_out_len(int kind, int t);
/* The frames input layer `kind` takes for one it gives: the product of its convs' strides (1
 * without convs; ConvInput's subsampling_factor). */
int input_layer_subsampling(int kind);
/* Frequency bins after the conv2d* input layers' convs (Linear(d * bins, d) follows); 1 for
 * conv1d2 (Linear(d, d)); 0 without convs. */
int input_layer_out_bins(int kind, int idim);
/* "conv2d", ... "null": the config spelling. */
const char *input_layer_name(int kind);
/* The Linear after the convs: a Sequential's first module (out.0 in ESPnet's state dict) for conv2d,
 * conv2d2, conv2d6 and conv1d2, a plain Linear (out) for conv2d8 and for every input layer of the
 * contextual block encoder (Conv2dSubsamplingWOPosEnc). */
#define EMBED_OUT_SEQ "encoder.embed.out.0"
const char *input_layer_out_name(int kind, int encoder);

enum { MODEL_MAX_INTERCTC = 32, MODEL_MAX_GROUPS = 16 };

/* Sizes and structure of the model (ESPnet2 encoder_conf names). */
/* Which norm a module of the asr_transducer task's encoder is (espnet2/asr_transducer/
 * normalization.py's get_normalization): kind NORM_LAYER (torch.nn.LayerNorm), else BasicNorm,
 * RMSNorm or ScaleNorm (the rownorm ops); eps its eps (BasicNorm: its learned log's initial value;
 * 0: LayerNorm's 1e-12 of the other models), p RMSNorm's partial columns (0: every column). All
 * members 4 bytes: model_group compares with memcmp. */
enum { NORM_LAYER = 0, NORM_BASIC = 1, NORM_RMS = 2, NORM_SCALE = 3 };
typedef struct norm_spec {
    int kind, p;
    float eps;
} norm_spec;

typedef struct model_dims {
    int idim;            /* feature dimension (n_mels) */
    int pre_in, pre_out; /* model.preencoder linear: Linear(pre_in = idim, pre_out) before the input layer; 0: none */
    int d;               /* encoder_conf.output_size */
    int heads;           /* encoder_conf.attention_heads */
    int ff;              /* encoder_conf.linear_units */
    int blocks;          /* encoder_conf.num_blocks */
    int vocab;           /* len(token_list), <sos/eos> included */
    int input_layer;     /* encoder_conf.input_layer: input_layer_kind */
    int f2;              /* feature bins after the input layer's convs (input_layer_out_bins) */
    /* The Conformer's structure (ignored by the transformer). */
    int encoder;         /* encoder_kind */
    int macaron;         /* macaron_style: a half-step feed-forward before the attention */
    int rel_pos;         /* pos_enc_layer_type rel_pos + rel_selfattn (1) or abs_pos + selfattn (0) */
    int simplified_att;  /* rel_pos without pos_bias_u/v, linear_pos to one scalar per head with a bias
                          * (the asr_transducer main_conf.simplified_att_score) */
    int use_cnn;         /* use_cnn_module */
    int cnn_kernel;      /* cnn_module_kernel (odd) */
    int act;             /* activation_type: encoder_act */
    /* The E-Branchformer's structure (rel_pos, macaron and act above are shared: macaron is
     * macaron_ffn, act ffn_activation_type). */
    int use_ffn;         /* use_ffn: the feed-forward module(s) */
    int cgmlp_units;     /* cgmlp_linear_units (even: the gating unit splits it in halves) */
    int cgmlp_kernel;    /* cgmlp_conv_kernel (odd) */
    int linear_after_conv; /* use_linear_after_conv */
    int gate_act;        /* gate_activation: encoder_act (ACT_IDENTITY by default) */
    int merge_kernel;    /* merge_conv_kernel (odd); 0: no merge convolution, the asr_transducer
                          * task's Branchformer block (x += drop(merge_proj([x1, x2])), use_ffn 0) */
    /* The contextual block encoder's blocks (frames after the input layer): each block sees
     * block_size frames, consecutive blocks start hop_size apart, and a frame's output comes from
     * the block where look_ahead frames follow it; ctx_pos_enc: the context vectors get the
     * positional encoding too. */
    int block_size, hop_size, look_ahead, ctx_pos_enc;
    int ctx_conformer;   /* contextual_block_conformer: the blocks are Conformer blocks (macaron, use_cnn,
                          * cnn_kernel, act above; rel_pos 0), their norms named norm1 / norm2 */
    /* The attention decoder (model.decoder: transformer, decoder_conf) and the branches of the
     * joint loss; see core/nn/decoder_conf.h. dec_blocks 0: no decoder (CTC only, ctc_weight 1). */
    int dec_blocks;      /* decoder_conf.num_blocks */
    int dec_heads;       /* decoder_conf.attention_heads */
    int dec_ff;          /* decoder_conf.linear_units */
    int no_ctc;          /* model_conf.ctc_weight 0: no CTC branch (ESPnet2 then has no ctc module) */
    /* The transducer (model.decoder: transducer; core/nn/transducer.h): ESPnet2's TransducerDecoder
     * (decoder.embed into tr_embed units, then tr_layers single-layer LSTMs, or GRUs when tr_gru, of
     * tr_hidden units, decoder.decoder.<l>, the first from tr_embed) and
     * the ASR task's JointNetwork (joint_network.lin_enc / lin_dec into tr_joint units, tanh,
     * lin_out; lin_dec without a bias when tr_no_dec_bias). tr_stateless: the asr_transducer task's
     * StatelessDecoder instead (decoder.embed alone, its output the embedding of tr_hidden =
     * embed_size units; tr_layers 0). Neither: no transducer (model_has_transducer). */
    int tr_layers;       /* decoder_conf.num_layers */
    int tr_stateless;    /* model.decoder stateless */
    int tr_hidden;       /* decoder_conf.hidden_size (stateless: embed_size) */
    int tr_embed;        /* the embedding's width: the asr_transducer RNNDecoder's embed_size; 0: tr_hidden
                          * (the ASR task's TransducerDecoder and the StatelessDecoder) */
    int tr_gru;          /* decoder_conf.rnn_type gru: torch.nn.GRU layers (gates r, z, n) */
    int tr_joint;        /* joint_net_conf.joint_space_size */
    int tr_no_dec_bias;  /* joint_net_conf.lin_dec_bias false */
    /* The asr_transducer task's lm_lin (model_conf.auxiliary_lm_loss_weight > 0: the auxiliary LM
     * loss' Linear from the decoder's output to the vocabulary; core/nn/transducer.h). */
    int tr_lm_lin;
    /* ESPnet2's asr_transducer task (core/nn/body_conf.h): its Encoder's Conformer blocks are the
     * Conformer above with ConvInput (no x * sqrt(d), no dropout but the positional encoding's),
     * the convolution module's GLU output zeroed past each utterance's length in training too, an
     * utterance's length min(input frames, T2) as its make_source_mask gives, its RNNDecoder the
     * LSTMs above, and the parameters under its names (param_body_name). */
    int body;
    /* The asr_transducer task's norms (main_conf.norm_type with each block's norm_eps / norm_partial;
     * conv_mod_norm_type, the (E-)Branchformer gating unit's, with conv_mod_norm_eps / _partial;
     * MultiBlocks' norm_blocks with after_norm_eps / _partial): core/nn/norm_spec.h. Zero (the other
     * models): LayerNorm with ESPnet's eps 1e-12. */
    norm_spec norm, csgu_norm, after_norm;
    /* The asr_transducer task's ConvInput when its width differs from d (the encoder's output, which
     * after_norm, ctc_lin and the joint network's lin_enc read): embed_d its output width, which
     * the positional encoding and the first block take (0: d); embed_ch its convolutions' channels
     * (input_conf.conv_size; 0: embed_d); embed_raw: no output Linear (a conv1d block first, ESPnet2's
     * validate_input_block): the output is the convolutions' channels x bins, embed_d = embed_ch * f2. */
    int embed_d, embed_ch, embed_raw;
    /* Its main_conf.dynamic_chunk_training: the blocks' depthwise convolutions are causal (k - 1
     * zeros before each sequence, none after: ConformerConvolution's, the gating unit's and the
     * merge's causal=True; core/nn/encoder_blocks.c's enc_dwconv_*), in decoding too. */
    int causal;
    /* The asr_transducer task's encoder whose body_conf entries differ in block_type or sizes
     * (n_groups > 1; 0 or 1: every block as the fields above): runs of consecutive blocks, each
     * built with its group's fields (model_block_dims); the fields above then hold the first
     * group's kind and the groups' largest heads, ff and cgmlp_units (the shared buffers' sizes).
     * core/nn/encoder_body.c runs them. */
    int n_groups;
    struct model_group {
        int blocks, encoder, heads, ff, cnn_kernel, use_cnn, use_ffn, cgmlp_units, cgmlp_kernel, merge_kernel;
        /* ENC_CONV1D (espnet2/asr_transducer/encoder/blocks/conv1d.py; cnn_kernel its kernel_size):
         * Conv1d's groups and dilation, its bias, then batch_norm (BatchNorm1d) and relu, and its
         * stride (with kernel_size and dilation, how it shrinks the frames: encoder_body.c) */
        int c1_groups, c1_dilation, c1_bias, c1_bn, c1_relu, c1_stride;
        norm_spec norm, csgu_norm; /* the X-former blocks' norms (their eps and partial are per entry) */
        int d; /* the blocks' output width (hidden_size, a conv1d block's output_size); 0: model_dims.d */
    } group[MODEL_MAX_GROUPS];
    /* Intermediate CTC (core/nn/interctc.h): the blocks (0-based, ascending) whose outputs also
     * feed the CTC head, from encoder_conf.interctc_layer_idx (1-based); interctc_cond:
     * interctc_use_conditioning, the model's encoder.conditioning_layer feeding each back. */
    int n_interctc;
    int interctc[MODEL_MAX_INTERCTC];
    int interctc_cond;
    /* An LM task (core/nn/lm_conf.h): lm makes the model a language model inside ESPnet2's
     * ESPnetLanguageModel (no encoder: blocks 0, no_ctc 1). LM_TRANSFORMER: TransformerLM, run by the
     * decoder's code without source attention (d = att_unit, dec_heads = head, dec_ff = unit,
     * dec_blocks = layer); LM_SEQ_RNN: SequentialRNNLM with an LSTM or a GRU (core/nn/lm_rnn.h; d = nhid). */
    int lm;              /* lm_kind; 0: not an LM */
    int lm_embed;        /* transformer: lm_conf.embed_unit; seq_rnn: unit (the embedding's width) */
    int lm_pos_enc;      /* transformer: lm_conf.pos_enc sinusoidal (1) or null (0: no positional encoding) */
    int lm_layers;       /* seq_rnn: nlayers */
    int lm_gru;          /* seq_rnn: rnn_type gru (torch.nn.GRU layers; lstm otherwise) */
} model_dims;

/* The group of block l (its index into d->group; 0 without groups). */
int model_block_group(const model_dims *d, int l);
/* The dims block l is built with: d itself, with its group's fields when d has groups. */
model_dims model_block_dims(const model_dims *d, int l);
/* The input layer's output width (model_dims.embed_d) and its convolutions' channels. */
static inline int model_embed_dim(const model_dims *d) { return d->embed_d ? d->embed_d : d->d; }
static inline int model_embed_ch(const model_dims *d) { return d->embed_ch ? d->embed_ch : model_embed_dim(d); }
/* Block l's input width: the input layer's for block 0, else block l - 1's output width. */
int model_block_in_dim(const model_dims *d, int l);
/* The widest activation of the encoder (input layer, blocks, output): what buffers shared by its
 * blocks hold per row. */
int model_max_width(const model_dims *d);
/* Block l's group (NULL without groups). */
const struct model_group *model_block_group_of(const model_dims *d, int l);
/* The encoder's output frames for t frames out of the input layer: t, shrunk by the asr_transducer
 * conv1d blocks (kernel_size, dilation, stride); 0 when one of them gets fewer frames than its
 * dilated kernel (torch's Conv1d refuses such input). */
int model_encoder_frames(const model_dims *d, int t);

/* Whether the model has a transducer decoder and joint network (core/nn/transducer.h). */
static inline int model_has_transducer(const model_dims *d) { return d->tr_layers > 0 || d->tr_stateless; }

/* The transducer decoder's embedding width. */
static inline int model_tr_embed(const model_dims *d) { return d->tr_embed ? d->tr_embed : d->tr_hidden; }
/* A recurrent layer's gate count: torch.nn.GRU's 3 (r, z, n), torch.nn.LSTM's 4 (i, f, g, o). */
static inline int rnn_gates(int gru) { return gru ? 3 : 4; }

/* What the encoder's input layer receives: the preencoder's output, else the features. */
static inline int model_input_dim(const model_dims *d) { return d->pre_out ? d->pre_out : d->idim; }

typedef enum lm_kind { LM_NONE = 0, LM_TRANSFORMER = 1, LM_SEQ_RNN = 2 } lm_kind;

/* Fills dims from the config with ESPnet2's encoder defaults (256, 4, 2048, 6; the Conformer's in
 * core/nn/encoder_conf.c), and the decoder's from model.decoder / decoder_conf /
 * model_conf.ctc_weight (decoder_dims_from_cfg). */
int model_dims_from_cfg(model_dims *out, const model_cfg *m, int idim, int vocab, esp_err *err);
/* The encoder part: model.encoder and the encoder_conf keys beyond the sizes, checked against what
 * is implemented (messages name the key as model.encoder_conf.<key>). dims may be NULL (check only). */
int encoder_dims_from_cfg(model_dims *out, const model_cfg *m, esp_err *err);
/* encoder_conf.interctc_layer_idx / interctc_use_conditioning into out, after its blocks and
 * no_ctc are known: the indices ESPnet2 asserts (0 < idx < num_blocks), and a CTC branch. */
int interctc_dims_from_cfg(model_dims *out, const model_cfg *m, esp_err *err);

enum { MODEL_MAX_NDIM = 4 };

/* A state-dict entry: a trained parameter or a buffer (BatchNorm's running statistics). */
typedef enum param_kind {
    PARAM_TRAINED = 0,
    PARAM_BUFFER,        /* running_mean / running_var: float, not trained */
    PARAM_COUNTER,       /* num_batches_tracked: int64 in files, a float (exact to 2^24) here */
} param_kind;

typedef struct param_info {
    char name[96];       /* ESPnet2 state-dict name */
    int ndim;            /* 0 for a scalar (the counter) */
    int64_t shape[MODEL_MAX_NDIM];
    size_t offset;       /* in floats, into the flat buffer */
    size_t count;
    int is_layernorm;    /* LayerNorm / BatchNorm weight and bias: reset to 1/0 by every init scheme */
    int is_embedding;    /* nn.Embedding weight: N(0, 1) under every init scheme (reset_parameters) */
    int is_pos_bias;     /* pos_bias_u / pos_bias_v: xavier_uniform under PyTorch's defaults */
    int is_csgu;         /* cgMLP gating unit's conv / linear: espnet_initialization_fn under an init scheme */
    int zero_row0;       /* nn.Embedding(padding_idx=0): row 0 starts at zero under every scheme */
    double uniform_bound; /* > 0: PyTorch's default is U(-bound, bound) (nn.LSTM: 1 / sqrt(hidden)) */
    int has_fill;        /* every element starts at fill under every init scheme (add_norm_of's norms) */
    double fill;
    int kind;            /* param_kind */
} param_info;

/* The flat layout: every trained parameter first (total floats, in table order: gradients and
 * optimizer moments have this layout), then the buffers (up to state_total), also in table order. */
typedef struct param_table {
    param_info *items;
    size_t n;
    size_t total;        /* floats of the trained parameters */
    size_t state_total;  /* floats with the buffers (= total without BatchNorm) */
    int body;            /* the names are the asr_transducer task's (param_body_name) */
    int body_encoder;    /* and its first block's kind (encoder_kind: conformer or ebranchformer) */
} param_table;

void param_table_build(param_table *t, const model_dims *d);
/* Parameters (with buffers) a model may have: 2^32, four times the largest ESPnet ASR model (OWSM
 * v3.1, ~1 G) and 16 GiB of float32 weights before gradients and Adam's moments. */
#define MODEL_MAX_PARAMS ((size_t)1 << 32)
/* Error (naming the sizes) when the parameter count dims give passes MODEL_MAX_PARAMS: checked
 * when a config's sizes are read, before anything of that size is allocated. */
int model_dims_check_size(const model_dims *d, esp_err *err);
void param_table_free(param_table *t);
const param_info *param_find(const param_table *t, const char *name);
/* Accepts ESPnet2/ESPnet3 spellings of a name: "model." prefix, and espnet3's older
 * "encoder.embed.out.*" for ESPnet's "encoder.embed.out.0.*". */
const param_info *param_find_alias(const param_table *t, const char *name);
/* The older espnet3 name of table name `name` into buf (1), or 0 when it has none
 * (core/nn/param_names.c). */
int param_legacy_name(const char *name, char *buf, size_t cap);
/* The reverse: ESPnet's name of an older espnet3 name into buf (1), or 0 when `name` is not one. */
int param_current_name(const char *name, char *buf, size_t cap);
/* The asr_transducer task's name (model_dims.body) of the ASR task's table name `name` of a model
 * whose blocks are of kind `encoder` (ENC_CONFORMER or ENC_EBRANCHFORMER) into buf
 * (1), or 0 when the name stays (core/nn/param_names.c): the one map between the two tasks' module
 * paths, which the table (param_table_build) and the typed views' binding both go through. */
int param_body_name(const char *name, int encoder, char *buf, size_t cap);

/* Initializes the flat buffer: init NULL = PyTorch module defaults; "xavier_uniform",
 * "xavier_normal", "kaiming_uniform", "kaiming_normal" as espnet2.torch_utils.initialize
 * (weights with more than one dimension, biases zero, LayerNorm reset to 1/0, Embedding reset to
 * N(0, 1), then the modules' espnet_initialization_fn: the E-Branchformer's gating unit gets
 * conv / linear weights N(0, 1e-6) and biases 1). Seeded. */
int param_init(float *params, const param_table *t, const char *init, uint64_t seed, esp_err *err);
/* The buffers' initial values into state (state_total floats; entries below total untouched):
 * running_mean 0, running_var 1, num_batches_tracked 0, as torch's BatchNorm1d. */
void param_buffers_init(float *state, const param_table *t);

#endif
