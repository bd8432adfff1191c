/* Typed views of the resolved configs, filled by libcyaml from the schemas in config_schema.c.
 * Field names are ESPnet3's keys. A key with a declared default (config_values.c's key_defaults)
 * holds it when the YAML leaves the key out; any other field left out is 0 / NULL. Defaults also
 * come from the template configs in conf/; config_values.c refuses a 0 written where 0 means
 * nothing (so 0 in such a field below means "left out"). */
#ifndef ESPNET3_CONFIG_TYPES_H
#define ESPNET3_CONFIG_TYPES_H

#include <stdint.h>

/* The folders a run config (training, inference, metrics) names, ESPnet3's keys: where the recipe,
 * the manifests, the audio, the experiment (exp_dir, named by exp_tag), the statistics and the
 * decoding results are. */
#define CFG_RUN_DIRS                                                                                   \
    char *recipe_dir, *data_dir, *dataset_dir, *exp_tag, *exp_dir, *stats_dir, *inference_dir

typedef struct int_range {
    int64_t *v; /* exactly two values: [low, high] */
    unsigned n;
} int_range;

/* create_dataset: the recipe's dataset builder and its arguments. The keys every builder takes are
 * here; a recipe's own keys are declared by the recipe (core/config/config_recipe.h) and typed
 * into its struct. */
typedef struct create_dataset_cfg {
    char *func;          /* builder name from the builder registry */
    char *dataset_dir;   /* where audio is written */
    char *recipe_dir;
    /* Not keys: attached after loading. The recipe whose keys the block holds (core/config/
     * config_recipe.c; NULL: none, or Python) and its typed view of them (the recipe's struct). */
    const struct config_recipe *recipe;
    void *keys;
    /* The block less func, as JSON (core/config/config_python.c): the keyword arguments of a
     * Python func or of the recipe's DatasetBuilder methods. */
    char *kwargs_json;
} create_dataset_cfg;

/* tokenizer.text_builder: `func` (a dotted path to a Python function returning strings or a text
 * file's path), called with the block's other keys as keyword arguments. */
typedef struct text_builder_cfg {
    char *func;
    char *kwargs_json;   /* not a key: the other keys as JSON, attached after loading */
} text_builder_cfg;

typedef struct tokenizer_cfg {
    char *model_type;    /* char | word | bpe | unigram (bpe/unigram: a SentencePiece model) */
    int64_t vocab_size;  /* bpe/unigram: pieces with <unk>, <s>, </s>; word: tokens.txt entries (0: all) */
    double character_coverage; /* SentencePiece's; default 1.0, as ESPnet3 and ESPnet2's asr.sh */
    char **user_defined_symbols; unsigned n_user_defined_symbols; /* SentencePiece's, kept whole */
    char *save_path;     /* tokens.txt, and <model_type>.model/.vocab for bpe/unigram */
    char *text;          /* manifest whose text column trains the tokenizer (default: train.tsv) */
    text_builder_cfg *text_builder; /* ESPnet3's: a Python function that returns the training text */
} tokenizer_cfg;

typedef struct target_cfg { /* a Hydra `_target_` block we instantiate ourselves */
    char *target;
} target_cfg;

typedef struct logger_cfg {
    char *target;
    char *save_dir;
    char *name;
    char *project;
} logger_cfg;

/* A timedelta as Hydra writes one ({_target_: datetime.timedelta, hours: 1, minutes: 30}). */
typedef struct timedelta_cfg {
    char *target;
    double days, hours, minutes, seconds;
} timedelta_cfg;

/* trainer.callbacks[]: the Lightning callbacks espnet3 carries out (core/train/trainer.h's
 * trainer_opts take their meaning; stages/train_callbacks.c checks each one's keys against its
 * class). ModelCheckpoint: a checkpoint inside an epoch every_n_train_steps optimizer steps and/or
 * every train_time_interval; EarlyStopping; EMAWeightAveraging (an EMA of the weights);
 * LearningRateMonitor and the progress bar: what the train log shows anyway. */
typedef struct callback_cfg {
    char *target;
    int64_t every_n_train_steps;
    timedelta_cfg *train_time_interval;
    char *save_last;         /* true | link (espnet3 always keeps `last`) */
    int verbose;
    char *logging_interval;  /* LearningRateMonitor: step | epoch */
    int64_t refresh_rate;    /* TQDMProgressBar */
    /* EarlyStopping (core/train/early_stopping.h); Lightning's defaults patience 3, strict and
     * check_finite true are declared (config_values.c's callback_defaults); no thresholds */
    char *monitor;
    char *mode;              /* min | max */
    int64_t patience;
    double min_delta;
    int strict, check_finite;
    double stopping_threshold, divergence_threshold;
    /* EMAWeightAveraging (core/train/ema.h); Lightning's defaults decay 0.999, update_every_n_steps 1
     * and use_buffers true are declared (callback_defaults); no starting step or epoch: read from the tree */
    double decay;
    int64_t update_every_n_steps, update_starting_at_step, update_starting_at_epoch;
    int use_buffers;
    char *device;            /* where torch keeps the average: the backend holds it here (ignored) */
} callback_cfg;

typedef struct trainer_cfg {
    char *accelerator;   /* auto | cpu | gpu | cuda */
    int64_t devices;
    int64_t num_nodes;
    char *strategy;      /* auto | ddp | ddp_find_unused_parameters_true | fsdp */
    char *precision;     /* 32 | 16-mixed | bf16-mixed */
    double gradient_clip_val;
    char *gradient_clip_algorithm;
    int64_t accumulate_grad_batches;
    int64_t max_epochs;  /* >= 1, or -1: no epoch limit (Lightning). Never 0 when the trainer block
                          * exists: left out or null, config_values.c writes Lightning's 1000 (or
                          * -1 when max_steps is set) */
    int64_t max_steps;   /* >= 1, or -1 (the default): no step limit */
    int64_t log_every_n_steps;
    char *check_val_every_n_epoch; /* as written: an integer >= 1, or null (Lightning's None: validation every
                                    * val_check_interval batches counted over epochs); left out: 1 */
    char *limit_train_batches; /* as written: an integer is a count of batches (1: one batch, as */
    char *limit_val_batches;   /* Lightning), a float a fraction (1.0: all); checked at load */
    char *val_check_interval;  /* as written: a float in (0, 1] is a fraction of the epoch's batches, an integer
                                * a count of batches (1: after every batch); left out: 1.0, the epoch's end */
    int64_t num_sanity_val_steps; /* default Lightning's 2; -1: all */
    int64_t min_epochs, min_steps; /* EarlyStopping waits for both */
    int deterministic;
    int enable_progress_bar;
    int sync_batchnorm;  /* the Conformer's BatchNorm statistics over all ranks (torch's SyncBatchNorm) */
    logger_cfg *logger; unsigned n_logger;
    callback_cfg *callbacks; unsigned n_callbacks;
    char *max_time;      /* Lightning's "DD:HH:MM:SS": stop with a checkpoint once training took this long */
    double dist_timeout; /* espnet3: seconds any distributed wait may take (> 0; declared default 300) */
    int per_rank_logs;   /* espnet3: ranks above 0 write <exp_dir>/<stage>.rank<r>.log too */
    char *profiler;      /* Lightning's profiler: any name (simple, advanced, pytorch) runs espnet3's per-op
                          * profiler (core/compute/backend_profile.h); null or left out: none */
} trainer_cfg;

typedef struct slurm_options_cfg {
    char *account;
    char *queue;
    int64_t cores;
    int64_t processes;
    char *memory;
    char *walltime;
    int64_t death_timeout;
    char *log_directory;
    char **job_extra_directives; unsigned n_job_extra_directives;
    char **job_script_prologue; unsigned n_job_script_prologue;
} slurm_options_cfg;

typedef struct parallel_cfg {
    char *env;           /* local | local_gpu | slurm */
    int64_t n_workers;   /* >= 1, default 1; local_gpu left out: 0, one worker per GPU (core/runner) */
    int async_mode;      /* slurm: submit and return; a rerun merges (ESPnet3's runner async_mode) */
    slurm_options_cfg *options;
    int allow_overwrite_lock; /* ESPnet3's: replace a stale lock; ours are always taken over from a dead run */
} parallel_cfg;

typedef struct batches_cfg {
    char *type;          /* numel | length | sorted | unsorted */
    char **shape_files; unsigned n_shape_files;
    int64_t batch_size;
    int64_t batch_bins;
} batches_cfg;

typedef struct collate_cfg {
    char *target;
    int64_t int_pad_value;
    double float_pad_value;
} collate_cfg;

typedef struct iter_factory_cfg {
    char *target;
    int shuffle;
    int64_t num_workers;
    collate_cfg *collate_fn;
    batches_cfg *batches;
} iter_factory_cfg;

typedef struct loader_split_cfg {
    int multiple_iterator;
    int64_t num_shards;
    int64_t total_shards;
    int64_t dist_world_size;
    iter_factory_cfg *iter_factory;
} loader_split_cfg;

typedef struct dataloader_cfg {
    collate_cfg *collate_fn;
    loader_split_cfg *train;
    loader_split_cfg *valid;
} dataloader_cfg;

typedef struct frontend_conf_cfg {
    int64_t fs;
    int64_t n_fft;
    int64_t win_length;
    int64_t hop_length;
    int64_t n_mels;
    double fmin;
    double fmax;
} frontend_conf_cfg;

/* ESPnet2's LinearProjection preencoder (model.preencoder: linear): Linear(input_size, output_size)
 * on the (dropped-out) features, between the normalization and the encoder. */
typedef struct preencoder_conf_cfg {
    int64_t input_size;  /* the features' dimension (n_mels): checked, it is not a choice */
    int64_t output_size; /* what the encoder's input layer receives */
    double dropout;      /* on the features, before the Linear */
} preencoder_conf_cfg;

typedef struct specaug_conf_cfg {
    int apply_time_warp;
    int64_t time_warp_window;
    char *time_warp_mode;
    int apply_freq_mask;
    int64_t *freq_mask_width_range; unsigned n_freq_mask_width_range;
    int64_t num_freq_mask;
    int apply_time_mask;
    int64_t *time_mask_width_range; unsigned n_time_mask_width_range;
    double *time_mask_width_ratio_range; unsigned n_time_mask_width_ratio_range;
    int64_t num_time_mask;
} specaug_conf_cfg;

typedef struct normalize_conf_cfg {
    char *stats_file;
    int norm_means;
    int norm_vars;
    double eps;          /* > 0; declared default ESPnet2's 1e-20 (the block is made when normalize is set) */
} normalize_conf_cfg;

/* ESPnet2's asr_transducer encoder (espnet2/asr_transducer/encoder/): one entry of
 * model.encoder_conf.body_conf (building.py's block keys; NULL pointers: left out). */
typedef struct body_block_cfg {
    char *block_type;            /* conformer | conv1d | branchformer | ebranchformer (required) */
    int64_t *num_blocks;         /* repeats the entry (1) */
    int64_t *hidden_size;        /* X-former blocks: width (required) */
    int64_t *linear_size;        /* X-former blocks: feed-forward units (required) */
    int64_t *heads;              /* 4 */
    int64_t *conv_mod_kernel_size; /* required, odd */
    double *dropout_rate, *pos_wise_dropout_rate, *att_dropout_rate; /* 0.0 each */
    double *norm_eps, *norm_partial; /* the block's norm_type (main_conf) arguments */
    double *conv_mod_norm_eps;   /* Conformer: its BatchNorm1d's eps (1e-5) */
    double *conv_mod_norm_momentum; /* Conformer: its BatchNorm1d's momentum (0.1) */
    double *conv_mod_norm_partial;
    int64_t *depth_conv_kernel_size; /* E-Branchformer */
    /* Conv1d block */
    int64_t *output_size, *kernel_size, *stride, *dilation, *groups;
    int *bias, *relu, *batch_norm;
} body_block_cfg;

/* model.encoder_conf.input_conf: the ConvInput block (encoder/blocks/conv_input.py). */
typedef struct body_input_cfg {
    int *vgg_like;               /* false */
    int64_t *conv_size;          /* the convolutions' channels (the first block's hidden_size) */
    int64_t *subsampling_factor; /* 4 (2, 4 or 6) */
} body_input_cfg;

/* model.encoder_conf.main_conf: building.py's build_main_parameters keywords. */
typedef struct body_main_cfg {
    char *pos_wise_act_type;     /* swish */
    char *conv_mod_act_type;     /* swish */
    double *pos_enc_dropout_rate; /* 0.0 */
    int64_t *pos_enc_max_len;    /* 5000 */
    int *simplified_att_score;   /* false */
    char *norm_type;             /* layer_norm */
    char *conv_mod_norm_type;    /* layer_norm */
    double *after_norm_eps, *after_norm_partial;
    double *blockdrop_rate;      /* 0.0 */
    int *dynamic_chunk_training; /* false */
    double *short_chunk_threshold; /* 0.75 */
    int64_t *short_chunk_size;   /* 25 */
    int64_t *num_left_chunks;    /* 0 */
    /* activation.py's get_activation keywords */
    double *ftswish_threshold, *ftswish_mean_shift, *hardtanh_min_val, *hardtanh_max_val;
    double *leakyrelu_neg_slope, *smish_alpha, *smish_beta, *softplus_beta, *softplus_threshold;
    double *swish_beta;          /* 1.0 */
} body_main_cfg;

typedef struct encoder_conf_cfg {
    int64_t output_size;
    int64_t attention_heads;
    int64_t linear_units;
    int64_t num_blocks;
    double dropout_rate;
    double positional_dropout_rate;
    double attention_dropout_rate;
    char *input_layer;
    int *normalize_before;     /* NULL: left out (true, the transformer's and conformer's default) */
    /* ESPnet2's other encoder keys: NULL when the config leaves them out (ESPnet2's default). Both
     * encoders take these; core/nn/encoder_conf.c accepts the values that leave the model as
     * implemented (e.g. concat_after false, interctc_layer_idx []) and refuses the others. */
    int *concat_after;
    char *positionwise_layer_type;
    int64_t *positionwise_conv_kernel_size;
    char *pos_enc_layer_type;
    int64_t *padding_idx;
    int64_t *interctc_layer_idx; unsigned n_interctc_layer_idx;
    int *interctc_use_conditioning;
    double *layer_drop_rate;
    int *qk_norm;
    /* ConformerEncoder only (an error under `encoder: transformer`, as ESPnet2's TypeError; the
     * E-Branchformer takes rel_pos_type, zero_triu and max_pos_emb_len). */
    int *macaron_style;
    char *rel_pos_type;
    char *selfattention_layer_type;
    char *activation_type;
    int *use_cnn_module;
    int *zero_triu;
    int64_t *cnn_module_kernel;
    int *ctc_trim;
    double *stochastic_depth_rate;
    int64_t *max_pos_emb_len;
    /* EBranchformerEncoder only (rel_pos_type, zero_triu and max_pos_emb_len above are its keys too;
     * an error under the other encoders). */
    char *attention_layer_type;
    int64_t *cgmlp_linear_units;
    int64_t *cgmlp_conv_kernel;
    int *use_linear_after_conv;
    char *gate_activation;
    int *use_ffn;
    int *macaron_ffn;
    char *ffn_activation_type;
    int64_t *merge_conv_kernel;
    /* ContextualBlockTransformerEncoder only (an error under the other encoders). */
    int64_t *block_size;
    int64_t *hop_size;
    int64_t *look_ahead;
    int *init_average;
    int *ctx_pos_enc;
    /* ESPnet2's asr_transducer Encoder (its task, core/nn/body_conf.h): the blocks, the input block
     * and the main parameters; with body_conf none of the keys above applies. */
    body_block_cfg *body_conf; unsigned n_body_conf;
    body_input_cfg *input_conf;
    body_main_cfg *main_conf;
} encoder_conf_cfg;

/* ESPnet2's TransformerDecoder keys (espnet2/asr/decoder/transformer_decoder.py). */
typedef struct decoder_conf_cfg {
    int64_t attention_heads;
    int64_t linear_units;
    int64_t num_blocks;
    double dropout_rate;
    double positional_dropout_rate;
    double self_attention_dropout_rate;
    double src_attention_dropout_rate;
    char *input_layer;         /* embed */
    int use_output_layer;      /* true */
    int normalize_before;      /* true */
    int concat_after;          /* false */
    double layer_drop_rate;    /* 0 */
    int qk_norm;               /* false */
    /* ESPnet2's TransducerDecoder keys (espnet2/asr/decoder/transducer_decoder.py; model.decoder
     * transducer): the prediction network's LSTM or GRU layers. */
    char *rnn_type;            /* lstm | gru */
    int64_t num_layers;        /* 1 */
    int64_t hidden_size;       /* 320 */
    double dropout;            /* 0.0: after each layer */
    double dropout_embed;      /* 0.0: after the embedding */
    /* The asr_transducer task's RNNDecoder / StatelessDecoder keys (espnet2/asr_transducer/decoder/;
     * rnn_type, num_layers, hidden_size and dropout_rate above are RNNDecoder's too: its
     * dropout_rate, 0.0, is after each RNN layer). NULL: left out. */
    int64_t *embed_size;       /* 256 */
    double *embed_dropout_rate; /* 0.0 */
    int64_t *embed_pad;        /* 0 */
} decoder_conf_cfg;

/* model.joint_net_conf: ESPnet2's JointNetwork keys (espnet2/asr_transducer/joint_network.py, which
 * the ASR task builds beside a transducer decoder). */
typedef struct joint_net_conf_cfg {
    int64_t joint_space_size;  /* 256 */
    char *joint_activation_type; /* tanh */
    int *lin_dec_bias;         /* NULL: left out (true) */
} joint_net_conf_cfg;

typedef struct ctc_conf_cfg {
    double dropout_rate;
    int reduce;
    int ignore_nan_grad;
    int zero_infinity;
} ctc_conf_cfg;

typedef struct model_conf_cfg {
    double ctc_weight;         /* with a decoder, written as 0.5 (ESPnet2's default) when left out */
    double lsm_weight;
    int length_normalized_loss;
    double interctc_weight;    /* intermediate CTC's share of the CTC loss (core/nn/interctc.h); 0: none */
    /* false: stage 3 takes the statistics of the waveform itself, as ESPnet2's collect_feats does
     * (its "dummy stats"); NULL: left out (true: the log-mel features'). */
    int *extract_feats_in_collect_stats;
    /* ESPnetASRTransducerModel's keys (espnet2/asr_transducer/espnet_transducer_model.py; its task
     * only; NULL: left out, its default). */
    double *transducer_weight;         /* 1.0 */
    double *auxiliary_ctc_weight;      /* 0.0: no ctc_lin */
    double *auxiliary_ctc_dropout_rate; /* 0.0 */
    double *auxiliary_lm_loss_weight;  /* 0.0 */
    double *auxiliary_lm_loss_smoothing; /* 0.05 */
    double *fastemit_lambda;           /* 0.0 */
    int *use_k2_pruned_loss;           /* false */
    int64_t *warmup_steps;             /* 25000 (the k2 loss' only) */
    int64_t *validation_nstep;         /* 2 (report_cer / report_wer's search) */
    /* Both tasks' models' keys: a transducer's validation reports valid/cer_transducer and
     * valid/wer_transducer with them (core/decode/transducer_errors.h); the defaults are each
     * model class's (tr_err_calc_from_cfg). ignore_id is accepted with a warning
     * (core/config/config_validate.c's unimplemented_keys). */
    int *report_cer;                   /* NULL: left out (ASR task true, asr_transducer task false) */
    int *report_wer;                   /* NULL: left out (as report_cer) */
    char *sym_space;                   /* NULL: left out (<space>) */
    char *sym_blank;                   /* NULL: left out (<blank>) */
} model_conf_cfg;

/* model.lm_conf of an LM task's training config: ESPnet2's TransformerLM arguments (lm: transformer)
 * or SequentialRNNLM's (lm: seq_rnn); the defaults are each class's (core/nn/lm_conf.c). */
typedef struct lm_conf_cfg {
    char *pos_enc;             /* transformer: null (none) | sinusoidal */
    int64_t embed_unit;        /* transformer: 128 */
    int64_t att_unit;          /* transformer: 256 */
    int64_t head;              /* transformer: 2 */
    int64_t unit;              /* transformer: 1024 (feed-forward); seq_rnn: 650 (embedding, and nhid's default) */
    int64_t layer;             /* transformer: 4 */
    double dropout_rate;       /* transformer: 0.1; seq_rnn: 0.0 */
    double positional_dropout_rate; /* transformer: 0.1 */
    double attention_dropout_rate;  /* transformer: 0.1 */
    int64_t nhid;              /* seq_rnn: hidden units (unit) */
    int64_t nlayers;           /* seq_rnn: 2 */
    char *rnn_type;            /* seq_rnn: lstm | gru */
    int tie_weights;           /* seq_rnn: false */
    int64_t ignore_id;         /* seq_rnn: 0 (the embedding's padding_idx) */
} lm_conf_cfg;

typedef struct model_cfg {
    char *target;
    char *model;               /* ESPnet2's model class: espnet (ESPnetASRModel, the one espnet3 trains) */
    int64_t vocab_size;
    char *token_list;
    char *frontend;            frontend_conf_cfg *frontend_conf;
    char *specaug;             specaug_conf_cfg *specaug_conf;
    char *normalize;           normalize_conf_cfg *normalize_conf;
    char *preencoder;          preencoder_conf_cfg *preencoder_conf; /* linear, or left out */
    char *encoder;             encoder_conf_cfg *encoder_conf;
    char *decoder;             decoder_conf_cfg *decoder_conf;
    joint_net_conf_cfg *joint_net_conf; /* with decoder: transducer */
    joint_net_conf_cfg *joint_network_conf; /* the asr_transducer task's name of the same keys */
    ctc_conf_cfg *ctc_conf;
    model_conf_cfg *model_conf;
    char *lm;                  lm_conf_cfg *lm_conf; /* an LM task (LMTask): transformer */
} model_cfg;

typedef struct optimizer_cfg {
    char *target;        /* torch.optim.Adam | AdamW | SGD | Adadelta (core/train/optim.h) */
    double lr;
    double *betas; unsigned n_betas; /* Adam, AdamW */
    double eps;          /* Adam, AdamW, Adadelta */
    double weight_decay;
    int amsgrad;         /* Adam, AdamW */
    int decoupled_weight_decay; /* Adam: true makes it AdamW */
    double momentum, dampening; /* SGD */
    int nesterov;        /* SGD */
    double rho;          /* Adadelta */
    int maximize;
    /* torch's implementation switches: checked by core/config/config_values.c, which accepts only
     * the values that leave the single-tensor update's bits as they are (the update reads none). */
    int foreach, fused, capturable, differentiable;
} optimizer_cfg;

typedef struct scheduler_cfg {
    char *target;        /* a class of core/train/scheduler.h's registry; each class's defaults are written
                          * into the tree by config_values.c, so 0 here is a value written (or no default) */
    int64_t warmup_steps; /* WarmupLR, NoamLR, WarmupStepLR, WarmupReduceLROnPlateau: 25000;
                           * CosineAnnealingWarmupRestarts, ExponentialDecayWarmup: 0 */
    double model_size;   /* NoamLR: 320 */
    double factor;       /* ConstantLR: 1/3; ReduceLROnPlateau: 0.1 */
    int64_t total_iters; /* ConstantLR, LinearLR, PolynomialLR: 5 */
    int64_t step_size;   /* StepLR (required); WarmupStepLR: 1 */
    double gamma;        /* StepLR, MultiStepLR, WarmupStepLR: 0.1; ExponentialLR (required);
                          * CosineAnnealingWarmupRestarts: 1.0 */
    double start_factor, end_factor; /* LinearLR: 1/3, 1.0 */
    int64_t T_max;       /* CosineAnnealingLR (required) */
    double eta_min;      /* CosineAnnealingLR, CosineAnnealingWarmRestarts: 0.0 */
    int64_t *milestones; unsigned n_milestones; /* MultiStepLR (required) */
    double power;        /* PolynomialLR: 1.0 */
    int64_t T_0, T_mult; /* CosineAnnealingWarmRestarts: T_0 required, T_mult 1 */
    /* ReduceLROnPlateau and WarmupReduceLROnPlateau (also factor) */
    char *mode;          /* min | max: min */
    int64_t patience;    /* 10 */
    double threshold;    /* 1e-4 */
    char *threshold_mode; /* rel | abs: rel */
    int64_t cooldown;    /* 0 */
    double min_lr;       /* 0; CosineAnnealingWarmupRestarts: 0.001; ExponentialDecayWarmup (required) */
    double eps;          /* 1e-8 */
    /* OneCycleLR */
    double max_lr;       /* OneCycleLR, ExponentialDecayWarmup (required); CosineAnnealingWarmupRestarts: 0.1 */
    int64_t total_steps; /* OneCycleLR (or epochs and steps_per_epoch), ExponentialDecayWarmup (required) */
    int64_t epochs;
    int64_t steps_per_epoch; /* OneCycleLR; WarmupStepLR: 10000 */
    double pct_start;    /* 0.3 */
    char *anneal_strategy; /* cos | linear: cos */
    int cycle_momentum;  /* true */
    double base_momentum, max_momentum; /* 0.85, 0.95 */
    double div_factor, final_div_factor; /* 25.0, 1e4 */
    int three_phase;     /* false */
    /* ESPnet2's */
    double *warmup_steps_list; unsigned n_warmup_steps_list; /* PiecewiseLinearWarmupLR: [0, 25000] */
    double *warmup_lr_list; unsigned n_warmup_lr_list;       /* PiecewiseLinearWarmupLR: [0.0, 0.001] */
    int64_t first_cycle_steps; /* CosineAnnealingWarmupRestarts (required) */
    double cycle_mult;   /* CosineAnnealingWarmupRestarts: 1.0 */
    int warm_from_zero;  /* ExponentialDecayWarmup: false */
    double max_steps;    /* TristageLR: 25000 (int() of it) */
    double warmup_ratio, hold_ratio, decay_ratio; /* TristageLR: 0.1, 0.4, 0.5 */
    double init_lr_scale, final_lr_scale;         /* TristageLR: 0.01, 0.01 */
} scheduler_cfg;

typedef struct criterion_cfg {
    char *monitor;       /* valid/loss */
    int64_t nbest;
    char *mode;          /* min | max */
} criterion_cfg;

/* ESPnet3's `dataset:` block (DataOrganizer): train/valid as lists of sources that concatenate,
 * test as named entries decoded into ${inference_dir}/<name>/ (core/data/dataset_src.c). */
typedef struct data_src_args_cfg {
    char *split;         /* the recipe's split: ${data_dir}/manifest/<split>.tsv, or a corpus subfolder */
    char *path;          /* data_src manifest: a .tsv; kaldi: a data dir; librispeech, an4: the corpus root */
    char *manifest_path; /* older ESPnet3 spelling of a manifest path */
    char *recipe_dir;    /* ESPnet3 passes it to the recipe's dataset class; unused here */
    char *text_path;     /* espnet3.systems.esp2_asr.lm_dataset: an LM task's "<id> <transcript>" file */
} data_src_args_cfg;

typedef struct dataset_legacy_cfg { /* older ESPnet3 entries: dataset: {_target_, manifest_path | split} */
    char *target;
    char *manifest_path;
    char *split; /* the class's split argument: that split of the recipe's dataset */
} dataset_legacy_cfg;

typedef struct dataset_ref_cfg {
    char *name;          /* test entries: the folder under ${inference_dir} */
    char *data_src;      /* left out, <recipe>/<task>, a module or class path; manifest | kaldi | librispeech | an4 */
    data_src_args_cfg *data_src_args;
    dataset_legacy_cfg *dataset;
    /* Not keys: attached after loading (core/config/config_python.c). */
    int python;          /* the items come from Python: the recipe's dataset/ package or a module path */
    char *args_json;     /* data_src_args as JSON: what the Python Dataset is called with */
    char *transform_json; /* transform as JSON (NULL: none): applied to each item before it is exported */
    char *where;         /* "conf/x.yaml:12:5: dataset.train[0]", for messages about this entry */
} dataset_ref_cfg;

typedef struct preprocessor_cfg { /* ESPnet2's CommonPreprocessor keys espnet3 reads */
    char *target;
    int64_t fs;
    int train;
    char *token_type;
    char *token_list;
    char *bpemodel;
    char *text_cleaner;
    /* augmentation (core/data/augment_conf.c and noise_rir_conf.c read them). data_aug_effects is
     * not a libcyaml field (its weighted entries nest): the load parses it and attaches it here
     * (core/config/config_aug.h; NULL: none). */
    struct aug_effects_cfg *data_aug_effects;
    int64_t *data_aug_num; unsigned n_data_aug_num; /* [min, max] effects per utterance */
    double data_aug_prob;
    char **rir_scp; unsigned n_rir_scp;     /* lists of room impulse responses (one path: a list of one) */
    char **noise_scp; unsigned n_noise_scp; /* lists of noises (likewise) */
    double rir_apply_prob, noise_apply_prob;
    char *noise_db_range; /* "low_high" dB */
    double short_noise_thres;
} preprocessor_cfg;

typedef struct dataset_cfg {
    char *target;        /* espnet3.components.data.data_organizer.DataOrganizer */
    char *recipe_dir;    /* where data_src left out finds dataset/ (default: the config's recipe_dir) */
    dataset_ref_cfg *train; unsigned n_train;
    dataset_ref_cfg *valid; unsigned n_valid;
    dataset_ref_cfg *test; unsigned n_test;
    preprocessor_cfg *preprocessor;
    int resample;        /* espnet3's: resample audio at another rate to the frontend's fs (libsamplerate) */
} dataset_cfg;

/* The training config (--training_config / --config). */
/* ESPnet3's `fit:` block: the keyword arguments of Lightning's trainer.fit. */
typedef struct fit_cfg {
    char *ckpt_path;     /* the checkpoint training starts from (core/train/train_import.c); null or
                          * "last": exp_dir's `last`; "hpc": the one a SLURM requeue left (= `last`) */
    int weights_only;    /* torch.load's guard against code in the file: ours never runs any */
} fit_cfg;

typedef struct training_cfg {
    int64_t num_device;
    int64_t num_nodes;
    char *task;
    CFG_RUN_DIRS;
    int64_t seed;
    char *init;
    char **init_param; unsigned n_init_param; /* ESPnet's path:src_key:dst_key:exclude (core/nn/model_files.h) */
    int ignore_init_mismatch;
    create_dataset_cfg *create_dataset;
    dataset_cfg *dataset;
    tokenizer_cfg *tokenizer;
    trainer_cfg *trainer;
    parallel_cfg *parallel;
    dataloader_cfg *dataloader;
    model_cfg *model;
    optimizer_cfg *optimizer;
    scheduler_cfg *scheduler;
    char *scheduler_interval; /* step | epoch */
    char *scheduler_monitor;  /* ESPnet3's: the validation metric ReduceLROnPlateau (and WarmupReduceLROnPlateau)
                               * step on, e.g. valid/loss; other schedulers do not read it */
    char *python;        /* the interpreter of the recipe's Python (default $ESPNET3_PYTHON, else python3) */
    int collect_stats_train_mode; /* ESPnet3's: collect_stats sees the train preprocessor's augmentation */
    criterion_cfg *best_model_criterion; unsigned n_best_model_criterion;
    double *speed_perturb_factors; unsigned n_speed_perturb_factors; /* ESPnet2 asr.sh's 3-way copies */
    char *token_type;    /* ESPnet2's config.yaml keys: char | word | bpe, and the bpe model; */
    char *bpemodel;      /* they override the tokenizer block (core/data/tokenizer_spec.c) */
    fit_cfg *fit;
    int lm_task; /* trains a language model: config_is_lm_task of the tree, set at load (no key) */
} training_cfg;

/* The inference config (--inference_config), ESPnet3's inference.yaml keys. */
/* model.transducer_conf of an inference config: ESPnet2's BeamSearchTransducer keys
 * (espnet2/asr/transducer/beam_search_transducer.py), for a model with a transducer decoder; NULL
 * members were left out (core/decode/transducer_search.h has the defaults). */
typedef struct transducer_conf_cfg {
    char *search_type;       /* default | tsd | alsd | nsc | maes */
    int64_t *max_sym_exp;    /* tsd: 2 */
    int64_t *u_max;          /* alsd: 50 */
    int64_t *nstep;          /* nsc, maes: 1 (maes: at least 2) */
    int64_t *prefix_alpha;   /* nsc, maes: 1 */
    double *expansion_gamma; /* maes: 2.3 */
    int64_t *expansion_beta; /* maes: 2 */
    int *score_norm;         /* true */
    int *score_norm_during;  /* false */
    int64_t *nbest;          /* 1 */
} transducer_conf_cfg;

/* The asr_transducer task's Speech2Text class (model._target_ of an inference config). */
#define TARGET_ASR_TRANSDUCER_S2T "espnet2.bin.asr_transducer_inference.Speech2Text"

typedef struct infer_model_cfg {
    char *target;            /* espnet2.bin.asr_inference.Speech2Text */
    char *asr_train_config;
    char *asr_model_file;    /* weights: a .safetensors file, a checkpoint directory, or the
                              * ESPnet-style name of one (valid.loss.ave_3best[.pth], last[.ckpt]) */
    char *device;
    int64_t beam_size;       /* ctc_weight 1.0: 1 greedy CTC, more CTC prefix beam search; else the joint beam */
    double penalty;          /* ESPnet's insertion penalty: a length bonus per output token */
    double ctc_weight;       /* 1.0: CTC only; below: joint CTC/attention search (needs an attention decoder) */
    double lm_weight;        /* shallow fusion: the LM's weight in the joint beam search (0: no LM) */
    char *lm_train_config;   /* the LM's training config (exp/<lm>/config.yaml) */
    char *lm_file;           /* the LM's weights: as asr_model_file (a .safetensors, a checkpoint or its name) */
    int64_t nbest;           /* > 1: also {n}best_recog/ (text, token, token_int, score) for n = 1..nbest */
    double maxlenratio;      /* joint search: 0 = maxlen T with end detection; > 0 ratio of T; < 0 fixed */
    double minlenratio;      /* joint search: >= 0 ratio of T; < 0 fixed */
    int64_t batch_size;      /* utterances decoded together (default 1; the top-level batch_size is its alias) */
    char *token_type;        /* Speech2Text's: override the training config's tokenizer */
    char *bpemodel;
    transducer_conf_cfg *transducer_conf; /* a transducer model's search (Speech2Text's transducer_conf) */
    /* asr_transducer_inference.Speech2Text's name of the same keys (but prefix_alpha,
     * score_norm_during and nbest: core/config/config_rules.c) for the asr_transducer task's model. */
    transducer_conf_cfg *beam_search_config;
    /* asr_transducer_inference.Speech2Text's chunk-by-chunk decoding (core/decode/transducer_stream.h):
     * streaming, the audio of each piece (ms, 640) and the attention's left context (encoder frames,
     * 32; a negative one is 0, as ESPnet2's max(left_context, 0)) */
    int streaming;
    int64_t decoding_window;
    int64_t left_context;
} infer_model_cfg;

/* Long recordings in stage 6 (core/decode/longform.h): an item longer than threshold seconds is
 * decoded in windows of `window` seconds that overlap by `overlap`. Its keys' defaults are declared
 * in core/config/config_values.c's key_defaults (the block is made when left out). */
typedef struct longform_cfg {
    int enabled;
    double window, overlap, threshold;
} longform_cfg;

typedef struct inference_cfg {
    CFG_RUN_DIRS;
    char *infer_dir, *decode_dir; /* ESPnet3's older names: inference_dir takes theirs (config.c) */
    char **test_sets; unsigned n_test_sets;  /* splits under ${data_dir}/manifest to decode */
    dataset_cfg *dataset;                    /* dataset.test entries: decoded instead of test_sets */
    infer_model_cfg *model;
    char *input_key;
    char *output_fn;
    target_cfg *provider;
    target_cfg *runner;
    parallel_cfg *parallel;
    char *python;        /* as training_cfg.python: runs a Python dataset.test entry's export */
    int64_t batch_size;  /* ESPnet3's top-level form of model.batch_size: loaded into it (config_values.c) */
    char *idx_key;       /* output_fn's field that names the utterance (default utt_id) */
    char **output_keys; unsigned n_output_keys; /* output_fn's fields written as <field>.scp (default: all) */
    longform_cfg *longform;
    int write_ctm;       /* espnet3's (default false): stage 6 also writes <test>/hyp.ctm, NIST CTM of the best
                          * hypothesis's words, timed by a CTC forced alignment (docs/decoding.md) */
} inference_cfg;

/* The metrics config (--metrics_config). */
/* One scp file a metric reads: ESPnet3's load_scp_fields takes `inputs` as names (alias = file)
 * or alias: file pairs; the WER/CER metrics read the aliases ref_key and hyp_key. */
typedef struct metric_input_cfg {
    char *alias;
    char *file; /* <inference_dir>/<test>/<file>.scp */
} metric_input_cfg;

typedef struct metric_cfg {
    char *target;            /* espnet3.systems.asr.metrics.wer.WER, ...cer.CER */
    char *ref_key;           /* default ref */
    char *hyp_key;           /* default hyp */
    metric_input_cfg *inputs; unsigned n_inputs; /* absent: the files ref_key.scp and hyp_key.scp */
    char **apply_to; unsigned n_apply_to;         /* absent: every test set */
    char *bpemodel;          /* TER: the SentencePiece model whose pieces are scored */
    char **clean_types; unsigned n_clean_types;   /* ESPnet's TextCleaner (core/decode/text_cleaner.h), in order */
} metric_cfg;

typedef struct metrics_cfg {
    CFG_RUN_DIRS;
    char *infer_dir, *decode_dir; /* ESPnet3's older names: inference_dir takes theirs (config.c) */
    char **test_sets; unsigned n_test_sets;
    dataset_cfg *dataset;                    /* dataset.test names: scored instead of test_sets */
    metric_cfg *metrics; unsigned n_metrics;
    parallel_cfg *parallel;
} metrics_cfg;

/* ESPnet3's publication config (--publication_config): the Hugging Face model folder pack_model
 * makes (stages/publish.c) and the repo upload_model sends it to. files, yaml_files and
 * readme_context are free-form maps read from the tree. */
typedef struct pack_model_cfg {
    char *out_dir;       /* default ${exp_dir}/model_pack */
    char *inference_dir; /* where metrics.json is looked for first */
    char *readme;        /* a README template (${key} placeholders); default: espnet3's own */
    char **include; unsigned n_include;  /* more paths (globs, ** included) copied beside exp_dir */
    char **exclude; unsigned n_exclude;  /* fnmatch patterns left out of copied folders */
} pack_model_cfg;

typedef struct upload_cfg {
    char *hf_repo;       /* user/name */
    char *organization;
    int update;          /* upload_demo: upload over an existing Space */
    char **delete_patterns; unsigned n_delete_patterns;
} upload_cfg;

typedef struct publication_cfg {
    char *recipe_dir;
    char *exp_tag;
    char *exp_dir;
    char *inference_dir;
    char *data_dir;
    pack_model_cfg *pack_model;
    upload_cfg *upload_model;
} publication_cfg;

/* ESPnet3's demo config (--demo_config): the demo folder pack_demo makes (stages/pack_demo.c). */
typedef struct demo_model_cfg {
    char *dir_or_tag;    /* the packed model folder */
    int trust_user_code;
} demo_model_cfg;

typedef struct demo_io_cfg {
    char *key;
    char *type;          /* audio | text */
    char *label;
} demo_io_cfg;

typedef struct demo_ui_cfg {
    char *app_script;    /* ESPnet3's Gradio app (Python + espnet3): ours runs the binary instead */
    char *title;
    char *description;   /* a markdown file or inline text */
    demo_io_cfg *inputs; unsigned n_inputs;
    demo_io_cfg *outputs; unsigned n_outputs;
} demo_ui_cfg;

typedef struct demo_pack_cfg {
    char *out_dir;
    char **include; unsigned n_include;
    char **exclude; unsigned n_exclude;
    char **requirements; unsigned n_requirements;
    char *readme;        /* the Space README template; readme_context fills it */
} demo_pack_cfg;

typedef struct demo_cfg {
    char *recipe_dir;
    char *exp_tag;
    char *exp_dir;
    demo_model_cfg *model;
    demo_ui_cfg *ui;
    demo_pack_cfg *pack;
    upload_cfg *upload_demo;
} demo_cfg;

#endif
