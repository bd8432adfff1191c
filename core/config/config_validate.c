/* Validation of a composed, resolved config tree against the schemas of core/config/config_schema.c
 * before libcyaml loads it: the rules beyond types (allowed string values, the `_target_`
 * registry, ESPnet3/Lightning keys accepted with one warning), then the walk that checks every key
 * with file:line:col, suggests the closest known key for an unknown one, and hands the typed values
 * to core/config/config_values.c for ranges and cross-key rules. */
#include "core/config/config_schema.h"

#include <ctype.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/edit_distance.h"
#include "core/base/fsio.h"
#include "core/config/config_python.h"
#include "core/config/config_recipe.h"
#include "core/config/config_task.h"
#include "core/config/config_values.h"

/* ---- rules beyond types ---------------------------------------------------------------- */

/* Paths use '*' for one component and "[]" for a list item. */
static const config_allowed allowed_rules[] = {
    {"trainer.accelerator", "auto|cpu|gpu|cuda"},
    {"trainer.strategy", "auto|ddp|ddp_find_unused_parameters_true|fsdp"},
    {"trainer.precision", "32|32-true|16-mixed|bf16-mixed"},
    {"trainer.gradient_clip_algorithm", "norm|value"},
    {"parallel.env", "local|local_gpu|slurm"},
    {"dataloader.*.iter_factory.batches.type", "numel|length|sorted|unsorted"},
    {"scheduler_interval", "step|epoch"},
    {"scheduler.mode", "min|max"},
    {"scheduler.threshold_mode", "rel|abs"},
    {"scheduler.anneal_strategy", "cos|linear"},
    {"best_model_criterion[].mode", "min|max"},
    {"tokenizer.model_type", "char|bpe|unigram|word"},
    {"token_type", "char|bpe|word"},
    {"model.token_type", "char|bpe|word"},
    {"init", "xavier_uniform|xavier_normal|kaiming_uniform|kaiming_normal|chainer"},
    {"model.frontend", "default"},
    {"model.model", "espnet"},
    {"model.preencoder", "linear"}, /* sinc (LightweightSincConvs) is not built */
    {"model.specaug", "specaug"},
    {"model.normalize", "global_mvn|utterance_mvn|null"},
    {"model.encoder", "transformer|conformer|e_branchformer|contextual_block_transformer|contextual_block_conformer"},
    /* embed is refused with its reason by core/config/config_values.c. */
    {"model.encoder_conf.input_layer", "conv2d|conv2d2|conv2d6|conv2d8|conv1d2|linear|embed|null"},
    {"model.encoder_conf.positionwise_layer_type", "linear"},
    {"model.encoder_conf.pos_enc_layer_type", "abs_pos|rel_pos"},
    {"model.encoder_conf.rel_pos_type", "latest|legacy"},
    {"model.encoder_conf.selfattention_layer_type", "selfattn|rel_selfattn"},
    {"model.encoder_conf.activation_type", "swish|relu"},
    {"model.encoder_conf.attention_layer_type", "selfattn|rel_selfattn"},
    {"model.encoder_conf.gate_activation", "identity|swish|relu"},
    {"model.encoder_conf.ffn_activation_type", "swish|relu"},
    /* ESPnet2 encoder variants espnet3 does not have (the numbers: core/nn/encoder_conf.c). */
    {"model.encoder_conf.concat_after", "false"},
    {"model.encoder_conf.qk_norm", "false"},
    {"model.encoder_conf.zero_triu", "false"},
    {"model.encoder_conf.ctc_trim", "false"},
    /* rnn (and its default, left out) and stateless: the asr_transducer task's RNNDecoder and
     * StatelessDecoder (core/nn/body_conf.h); its mega and rwkv decoders are not built. */
    {"model.decoder", "transformer|transducer|none|rnn|stateless"},
    {"model.joint_network_conf.joint_activation_type", "tanh"},
    {"model.decoder_conf.embed_pad", "0"},
    /* The asr_transducer Encoder's variants ESPnet2 has but espnet3 does not. */
    /* conv1d passes on to core/nn/body_conf.c, which checks its sizes as ESPnet2 does and refuses it. */
    {"model.encoder_conf.body_conf[].block_type", "conformer|ebranchformer|branchformer|conv1d"},
    {"model.encoder_conf.input_conf.vgg_like", "false"},
    {"model.encoder_conf.input_conf.subsampling_factor", "2|4|6"},
    {"model.encoder_conf.main_conf.pos_wise_act_type", "swish|relu"},
    {"model.encoder_conf.main_conf.conv_mod_act_type", "swish|relu"},
    {"model.encoder_conf.main_conf.norm_type", "layer_norm|basic_norm|rms_norm|scale_norm"},
    {"model.encoder_conf.main_conf.conv_mod_norm_type", "layer_norm|basic_norm|rms_norm|scale_norm"},
    {"model.model_conf.use_k2_pruned_loss", "false"},
    {"model.decoder_conf.rnn_type", "lstm|gru"}, /* the transducer decoders' (ESPnet2 takes these two) */
    {"model.joint_net_conf.joint_activation_type", "tanh"},
    /* mbg (multi-blank greedy) needs a multi-blank model, which espnet3 does not train. */
    {"model.transducer_conf.search_type", "default|tsd|alsd|nsc|maes"},
    {"model.beam_search_config.search_type", "default|tsd|alsd|maes"}, /* asr_transducer's (no nsc) */
    {"model.lm", "transformer|seq_rnn"},
    {"model.lm_conf.rnn_type", "lstm|LSTM|gru|GRU"},
    {"model.lm_conf.tie_weights", "false"},
    {"model.lm_conf.ignore_id", "0"},
    {"model.lm_conf.pos_enc", "sinusoidal"},
    {"model.decoder_conf.input_layer", "embed"},
    /* The decoder's variants ESPnet2 has but espnet3 does not (bools and numbers are matched in
     * their normalized spelling). */
    {"model.decoder_conf.use_output_layer", "true"},
    {"model.decoder_conf.normalize_before", "true"},
    {"model.decoder_conf.concat_after", "false"},
    {"model.decoder_conf.layer_drop_rate", "0"},
    {"model.decoder_conf.qk_norm", "false"},
    {"model.specaug_conf.time_warp_mode", "bicubic|bilinear|linear"},
    {"dataset.preprocessor.token_type", "char|bpe|word"},
    {"dataset.preprocessor.text_cleaner", "none"},
    /* ESPnet2's TextCleaner in the metrics (core/decode/text_cleaner.h): of the two ESPnet3's ASR
     * metrics take, Whisper's basic normalizer; whisper_en (its English one) is not built. */
    {"metrics[].clean_types[]", "whisper_basic"},
};

const target_entry target_registry[] = {
    {"optimizer", "torch.optim.Adam", "Adam"},
    {"optimizer", "torch.optim.AdamW", "AdamW"},
    {"optimizer", "torch.optim.SGD", "SGD"},
    {"optimizer", "torch.optim.Adadelta", "Adadelta"},
    {"scheduler", "espnet2.schedulers.warmup_lr.WarmupLR", "WarmupLR"},
    {"scheduler", "espnet2.schedulers.noam_lr.NoamLR", "NoamLR (ESPnet2's, deprecated there)"},
    {"scheduler", "torch.optim.lr_scheduler.ConstantLR", "ConstantLR"},
    {"scheduler", "torch.optim.lr_scheduler.StepLR", "StepLR"},
    {"scheduler", "torch.optim.lr_scheduler.ExponentialLR", "ExponentialLR"},
    {"scheduler", "torch.optim.lr_scheduler.LinearLR", "LinearLR"},
    {"scheduler", "torch.optim.lr_scheduler.CosineAnnealingLR", "CosineAnnealingLR"},
    {"scheduler", "torch.optim.lr_scheduler.MultiStepLR", "MultiStepLR"},
    {"scheduler", "torch.optim.lr_scheduler.PolynomialLR", "PolynomialLR"},
    {"scheduler", "torch.optim.lr_scheduler.CosineAnnealingWarmRestarts", "CosineAnnealingWarmRestarts"},
    {"scheduler", "torch.optim.lr_scheduler.OneCycleLR", "OneCycleLR"},
    {"scheduler", "torch.optim.lr_scheduler.ReduceLROnPlateau", "ReduceLROnPlateau (on scheduler_monitor)"},
    {"scheduler", "espnet2.schedulers.warmup_step_lr.WarmupStepLR", "WarmupStepLR"},
    {"scheduler", "espnet2.schedulers.piecewise_linear_warmup_lr.PiecewiseLinearWarmupLR", "PiecewiseLinearWarmupLR"},
    {"scheduler", "espnet2.schedulers.cosine_anneal_warmup_restart.CosineAnnealingWarmupRestarts",
     "CosineAnnealingWarmupRestarts"},
    {"scheduler", "espnet2.schedulers.exponential_decay_warmup.ExponentialDecayWarmup", "ExponentialDecayWarmup"},
    {"scheduler", "espnet2.schedulers.tristage_lr.TristageLR", "TristageLR"},
    {"scheduler", "espnet2.schedulers.warmup_reducelronplateau.WarmupReduceLROnPlateau",
     "WarmupReduceLROnPlateau (on scheduler_monitor)"},
    {"trainer.logger[]", "lightning.pytorch.loggers.TensorBoardLogger", "TensorBoard event files"},
    {"trainer.logger[]", "pytorch_lightning.loggers.TensorBoardLogger", "TensorBoard event files"},
    {"trainer.logger[]", "lightning.pytorch.loggers.CSVLogger", "CSV metrics"},
    {"trainer.callbacks[]", "lightning.pytorch.callbacks.ModelCheckpoint", "checkpoints inside an epoch"},
    {"trainer.callbacks[]", "pytorch_lightning.callbacks.ModelCheckpoint", "checkpoints inside an epoch"},
    {"trainer.callbacks[]", "lightning.pytorch.callbacks.EarlyStopping", "early stopping"},
    {"trainer.callbacks[]", "pytorch_lightning.callbacks.EarlyStopping", "early stopping"},
    {"trainer.callbacks[]", "lightning.pytorch.callbacks.LearningRateMonitor", "train/lr in the logs"},
    {"trainer.callbacks[]", "pytorch_lightning.callbacks.LearningRateMonitor", "train/lr in the logs"},
    {"trainer.callbacks[]", "lightning.pytorch.callbacks.TQDMProgressBar", "the progress line"},
    {"trainer.callbacks[]", "pytorch_lightning.callbacks.TQDMProgressBar", "the progress line"},
    {"trainer.callbacks[]", "lightning.pytorch.callbacks.EMAWeightAveraging", "an EMA of the weights"},
    {"trainer.callbacks[]", "pytorch_lightning.callbacks.EMAWeightAveraging", "an EMA of the weights"},
    {"trainer.callbacks[].train_time_interval", "datetime.timedelta", "a time interval"},
    {"dataloader.*.iter_factory", "espnet2.iterators.sequence_iter_factory.SequenceIterFactory", "sequence batches"},
    {"dataloader.collate_fn", "espnet2.train.collate_fn.CommonCollateFn", "padding collate"},
    {"dataloader.*.iter_factory.collate_fn", "espnet2.train.collate_fn.CommonCollateFn", "padding collate"},
    {"model", "espnet2.asr.espnet_model.ESPnetASRModel", "CTC ASR model"},
    {"model", "espnet2.bin.asr_inference.Speech2Text", "CTC decoding"},
    {"model", TARGET_ASR_TRANSDUCER_S2T, "the asr_transducer task's decoding"},
    {"model", "espnet3.systems.esp2_asr.inference.Inference", "ESPnet3's Inference API (Speech2Text's keys, text.scp)"},
    {"provider", "espnet3.systems.base.inference_provider.InferenceProvider", "inference provider"},
    {"runner", "espnet3.systems.base.inference_runner.InferenceRunner", "inference runner"},
    {"metrics[]", "espnet3.systems.asr.metrics.wer.WER", "WER"},
    {"metrics[]", "espnet3.systems.asr.metrics.cer.CER", "CER"},
    {"metrics[]", "espnet3.systems.esp2_asr.metrics.wer.WER", "WER"},
    {"metrics[]", "espnet3.systems.esp2_asr.metrics.cer.CER", "CER"},
    {"metrics[]", "espnet3.systems.esp2_asr.metrics.ter.TER", "TER (SentencePiece pieces)"},
    {"dataset", "espnet3.components.data.data_organizer.DataOrganizer", "dataset sources"},
    {"dataset", "espnet3.components.data_organizer.DataOrganizer", "dataset sources"}, /* ESPnet3's older path */
    {"dataset.preprocessor", "espnet2.train.preprocessor.CommonPreprocessor", "tokenizer and frontend settings"},
    {NULL, NULL, NULL},
};

/* ESPnet3 / Lightning / ESPnet2 keys we accept but do not implement: one warning each. */
static const char *const unimplemented_keys[] = {
    "trainer.benchmark",
    "trainer.enable_model_summary", "trainer.default_root_dir",
    "trainer.reload_dataloaders_every_n_epochs", "trainer.use_distributed_sampler",
    "trainer.detect_anomaly", "trainer.inference_mode",
    "trainer.limit_test_batches", "trainer.limit_predict_batches", "trainer.log_every_n_steps_val",
    "trainer.logger[].version", "trainer.logger[].log_graph", "trainer.logger[].default_hp_metric",
    "trainer.logger[].prefix", "trainer.logger[].entity", "trainer.logger[].tags",
    "parallel.options.interface", "parallel.options.local_directory", "parallel.options.scheduler_options",
    "parallel.options.worker_extra_args", "parallel.options.python", "parallel.options.shebang",
    "parallel.options.job_directives_skip", "parallel.options.job_cpu", "parallel.options.job_mem",
    "parallel.options.name", "parallel.options.nanny", "parallel.options.silence_logs",
    "parallel.options.env_extra", "parallel.options.job_name",
    "dataloader.*.iter_factory.num_iters_per_epoch", "dataloader.*.iter_factory.pin_memory",
    "dataloader.*.iter_factory.persistent_workers", "dataloader.*.iter_factory.seed",
    "dataloader.*.iter_factory.batches.fold_lengths", "dataloader.*.iter_factory.batches.min_batch_size",
    "dataloader.*.iter_factory.batches.drop_last", "dataloader.*.iter_factory.batches.padding",
    "dataloader.*.iter_factory.batches.sort_in_batch", "dataloader.*.iter_factory.batches.sort_batch",
    "dataset.preprocessor._convert_", "dataset.preprocessor.speech_name", "dataset.preprocessor.text_name",
    "dataset.preprocessor.delimiter", "dataset.preprocessor.whisper_language",
    "dataset.preprocessor.whisper_task", "dataset.preprocessor.unk_symbol", "dataset.preprocessor.space_symbol",
    "dataset.*[].preprocessor", "dataset.*[].dataset.*", "dataset._convert_",
    "dataset.dataset_module",
    "val_scheduler_criterion",
    "model.decoder_conf.pos_enc_class", "model.decoder_conf.use_flash_attn", "model.encoder_conf.use_flash_attn",
    "model.decoder_conf.gradient_checkpoint_layers", "model.extract_feats_in_collect_stats",
    "model.model_conf.ignore_id",
    "model.model_conf.sym_sos", "model.model_conf.sym_eos",
    /* only read with transducer_multi_blank_durations, which is refused */
    "model.model_conf.transducer_multi_blank_sigma",
    "model.frontend_conf.apply_stft", "model.frontend_conf.frontend_conf",
    "model.encoder_conf.pos_enc_class", "model.encoder_conf.gradient_checkpoint_layers",
    "model.ctc_conf.brctc_risk_strategy", "model.ctc_conf.brctc_group_strategy",
    "model.ctc_conf.brctc_risk_factor",
    "scheduler.verbose",
    "tokenizer.input_sentence_size", "tokenizer.shuffle_input_sentence",
    "model.ngram_weight", "model.ngram_scorer",
    "optimizers", "schedulers", "upload", "hf_repo", "git_info", "log_level", "write_requirements",
    NULL,
};

/* Matches a rule path against a concrete schema path ('*' stands for one component). */
int config_path_match(const char *pat, const char *path)
{
    while (*pat && *path) {
        if (*pat == '*') {
            pat++;
            while (*path && *path != '.' && *path != '[') path++;
            continue;
        }
        if (*pat != *path) return 0;
        pat++, path++;
    }
    return !*pat && !*path;
}

const target_entry *target_lookup(const char *section, const char *name)
{
    for (const target_entry *t = target_registry; t->section; t++)
        if (config_path_match(t->section, section) && !strcmp(t->name, name)) return t;
    return NULL;
}

/* ---- the walk ---------------------------------------------------------------------------- */

typedef struct walker {
    esp_err *err;
    const ynode *root; /* the whole config: data_src tags are checked against its recipe_dir */
    config_kind kind;
    const ynode *open_map; /* a mapping whose other keys are arguments of the recipe's Python */
    const config_recipe *recipe; /* whose keys create_dataset takes beside the schema's */
} walker;

/* Mappings whose keys beyond the schema's are keyword arguments of the recipe's Python (kept in
 * the tree, handed over as JSON by core/config/config_python.c): a Python dataset entry's
 * data_src_args, tokenizer.text_builder, and create_dataset when a Python builder or func runs. */
static int opens_map(const walker *w, const ynode *parent, const char *schema_path)
{
    const char *recipe_dir = config_python_recipe_dir(w->root);
    if (!strcmp(schema_path, "tokenizer.text_builder")) return 1;
    if (!strcmp(schema_path, "create_dataset")) {
        const ynode *f = yt_get_path(w->root, "create_dataset.func");
        return config_create_dataset_is_python(f && f->kind == YN_SCALAR && !yt_is_null(f) ? f->str : NULL, recipe_dir);
    }
    if (config_path_match("dataset.*[].data_src_args", schema_path)) {
        const ynode *src = yt_map_get(parent, "data_src");
        return config_data_src_is_python(src && src->kind == YN_SCALAR && !yt_is_null(src) ? src->str : NULL, recipe_dir);
    }
    return 0;
}

int config_fail_node(esp_err *err, const ynode *n, const char *path, const char *fmt, ...)
{
    char where[512], via[600] = "", what[1800];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (n->via.line) {
        char vm[512];
        snprintf(via, sizeof via, " (via the interpolation at %s)", ymark_str(n->via, vm, sizeof vm));
    }
    return esp_fail(err, "%s: %s: %s%s", ymark_str(n->mark, where, sizeof where), path, what, via);
}

/* Printable form of a path: schema "[]" becomes the concrete index. */
static char *join_path(const char *parent, const char *key)
{
    return *parent ? xasprintf("%s.%s", parent, key) : xstrdup(key);
}

static const char *scalar_text(const ynode *n) { return n->kind == YN_SCALAR ? n->str : "..."; }

/* The shortest decimal that reads back as exactly dv ("0.3", not "0.29999999999999999"): what a
 * user wrote stays what the resolved config.yaml shows, and libcyaml still reads the same double. */
static char *shortest_repr(double dv)
{
    char buf[40];
    for (int p = 15; p < 17; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, dv);
        if (strtod(buf, NULL) == dv) return xstrdup(buf);
    }
    return xasprintf("%.17g", dv);
}

static int check_allowed_in(walker *w, const config_allowed *rules, size_t n_rules, const ynode *n,
                            const char *schema_path, const char *path)
{
    for (size_t i = 0; i < n_rules; i++) {
        if (!config_path_match(rules[i].path, schema_path)) continue;
        const char *vals = rules[i].values;
        size_t len = strlen(n->str);
        for (const char *p = vals; *p;) {
            const char *bar = strchr(p, '|');
            size_t l = bar ? (size_t)(bar - p) : strlen(p);
            if (l == len && !strncmp(p, n->str, l)) return 0;
            p += l + (bar ? 1 : 0);
        }
        char list[512];
        size_t used = 0;
        for (const char *c = vals; *c && used + 3 < sizeof list; c++) {
            if (*c == '|') list[used++] = ',', list[used++] = ' ';
            else list[used++] = *c;
        }
        list[used] = '\0';
        return config_fail_node(w->err, n, path, "'%s' is not supported (supported: %s)", n->str, list);
    }
    return 0;
}

static int check_allowed(walker *w, const ynode *n, const char *schema_path, const char *path)
{
    if (w->recipe && check_allowed_in(w, w->recipe->allowed, w->recipe->n_allowed, n, schema_path, path) != 0)
        return -1;
    return check_allowed_in(w, allowed_rules, sizeof allowed_rules / sizeof *allowed_rules, n, schema_path, path);
}

/* A number's range: the recipe's rule for its own keys, else core's. */
static int check_number(walker *w, const ynode *n, const char *schema_path, const char *path, double v)
{
    if (w->recipe && config_check_range(w->recipe->ranges, w->recipe->n_ranges, n, schema_path, path, v, w->err) != 0)
        return -1;
    return config_check_number(n, schema_path, path, v, w->err);
}

/* Classes ESPnet3 configs may name that espnet3 refuses, with the reason. */
static const struct {
    const char *section, *name, *why;
} refused_targets[] = {
    {"scheduler", "torch.optim.lr_scheduler.LambdaLR", "its lr_lambda is a Python function, which espnet3 does not "
                                                       "run (write the schedule with a built-in class)"},
    {"scheduler", "torch.optim.lr_scheduler.MultiplicativeLR", "its lr_lambda is a Python function, which espnet3 "
                                                               "does not run (ExponentialLR multiplies by a constant)"},
    {"scheduler", "torch.optim.lr_scheduler.CyclicLR", "CyclicLR is not built (its default cycle_momentum drives SGD's "
                                                       "momentum; OneCycleLR or CosineAnnealingWarmRestarts are)"},
    {"scheduler", "torch.optim.lr_scheduler.SequentialLR", "it chains scheduler objects built in Python; espnet3 runs "
                                                           "one scheduler per run (the ESPnet2 warmup-and-decay classes "
                                                           "combine the usual pairs)"},
    {"scheduler", "torch.optim.lr_scheduler.ChainedScheduler", "it chains scheduler objects built in Python; espnet3 "
                                                               "runs one scheduler per run"},
    {"trainer.callbacks[]", "lightning.pytorch.callbacks.WeightAveraging",
     "its default average is SWA's equal-weight mean (torch's get_swa_multi_avg_fn, a foreach lerp), which espnet3 "
     "does not build; lightning.pytorch.callbacks.EMAWeightAveraging is built"},
    {"trainer.callbacks[]", "pytorch_lightning.callbacks.WeightAveraging",
     "its default average is SWA's equal-weight mean (torch's get_swa_multi_avg_fn, a foreach lerp), which espnet3 "
     "does not build; pytorch_lightning.callbacks.EMAWeightAveraging is built"},
};

static int check_target(walker *w, const ynode *n, const char *section_schema_path, const char *path)
{
    if (target_lookup(section_schema_path, n->str)) return 0;
    for (size_t i = 0; i < sizeof refused_targets / sizeof *refused_targets; i++)
        if (config_path_match(refused_targets[i].section, section_schema_path) &&
            !strcmp(n->str, refused_targets[i].name))
            return config_fail_node(w->err, n, path, "%s: %s", n->str, refused_targets[i].why);
    if (config_path_match("dataset.*[].dataset", section_schema_path)) {
        /* A recipe's own Python dataset class (older ESPnet3 entries): its manifest_path, or its split of
         * the recipe's dataset, is what we read. */
        char where[512];
        log_warn("%s: %s: '%s' is a Python dataset class; espnet3 reads the entry's manifest_path as a manifest, "
                 "or its split of the recipe's dataset, instead", ymark_str(n->mark, where, sizeof where), path, n->str);
        return 0;
    }
    for (size_t i = 0; i < sizeof refused_targets / sizeof *refused_targets; i++)
        if (config_path_match(refused_targets[i].section, section_schema_path) &&
            !strcmp(refused_targets[i].name, n->str))
            return config_fail_node(w->err, n, path, "'%s' is not supported: %s", n->str, refused_targets[i].why);
    char list[1600];
    size_t used = 0;
    list[0] = '\0';
    for (const target_entry *t = target_registry; t->section; t++)
        if (config_path_match(t->section, section_schema_path) && used < sizeof list)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "", t->name);
    return config_fail_node(w->err, n, path, "unknown _target_ '%s' (supported: %s)", n->str, used ? list : "none here");
}

/* Keys where null means something other than the default (ESPnet's None): kept in the tree as the
 * plain scalar "null", which the allowed values list and libcyaml loads as that string (or as NULL
 * where the schema says so: model.normalize). What null means, for a quoted 'null'; NULL: null is
 * not a value of the key. */
static const char *null_meaning(const char *schema_path)
{
    static const struct {
        const char *key, *none;
    } keys[] = {
        {"model.encoder_conf.input_layer", "no input layer"},
        {"trainer.check_val_every_n_epoch", "validation counted over epochs"},
        {"model.normalize", "no normalization; left out, it is the task's utterance_mvn"},
    };
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        if (config_path_match(keys[i].key, schema_path)) return keys[i].none;
    return NULL;
}

static int is_unimplemented(const char *schema_path);

/* A top-level key of the training config (or one ESPnet3 accepts there). */
static int is_training_key(const char *key)
{
    for (const cyaml_schema_field_t *f = config_schema(CONFIG_TRAINING)->mapping.fields; f->key; f++)
        if (!strcmp(f->key, key)) return 1;
    return is_unimplemented(key);
}

/* ESPnet2 model keys that change the model or its loss and that espnet3 does not build yet: refused
 * at their line with this reason, unless they hold the value that changes nothing (null, an empty
 * mapping, 0). */
static const struct {
    const char *key, *why;
    const char *noop; /* besides null / {} / 0 / false, the value that changes nothing (ESPnet's default) */
} refused_keys[] = {
    {"model.postencoder", "ESPnet2's postencoder (after the encoder) is not built by espnet3 yet", NULL},
    {"model.postencoder_conf", "ESPnet2's postencoder is not built by espnet3 yet", NULL},
    {"model.aux_ctc", "ESPnet2's auxiliary CTC tasks are not built by espnet3", NULL},
    /* ESPnetASRModel's transducer with big blanks: V + len(durations) joint outputs and its
     * MultiblankRNNTLossNumba; [] is the plain transducer. */
    {"model.model_conf.transducer_multi_blank_durations", "ESPnet2's multi-blank transducer is not built by espnet3",
     NULL},
    {"model.ctc_conf.ctc_type", "espnet3's CTC is ESPnet2's builtin one; brctc (Bayes-risk CTC) is not built "
                                "(warpctc and gtnctc compute the builtin loss: write builtin)", "builtin"},
    {"model.frontend_conf.window", "the STFT window is hann, ESPnet2's default; other windows are not built", "hann"},
    {"model.frontend_conf.center", "the STFT frames are centered (center: true, ESPnet2's default)", "true"},
    {"model.frontend_conf.onesided", "the STFT is one-sided (onesided: true, ESPnet2's default)", "true"},
    {"model.frontend_conf.normalized", "a normalized STFT is not built (ESPnet2's default is false)", NULL},
    {"model.frontend_conf.htk", "the mel scale is Slaney's (librosa's default, ESPnet2's htk: false)", NULL},
    {"model.specaug_conf.replace_with_zero", "masks are filled with zeros (ESPnet2's default true); the mean is "
                                             "not built", "true"},
    {"dataset.preprocessor.speech_volume_normalize", "ESPnet2's volume normalization is not built", NULL},
    {"dataset.preprocessor.non_linguistic_symbols", "non-linguistic symbols are not built into the tokenizer",
     NULL},
    {"dataset.preprocessor.g2p_type", "grapheme-to-phoneme tokens are not built (token_type char, bpe or word)",
     NULL},
    {"model.ngram_file", "n-gram shallow fusion is not built (use an LM: lm_train_config, lm_file, lm_weight)",
     NULL},
    {"model.normalize_length", "Speech2Text's length-normalized final scores are not built (ESPnet2's default "
                               "is false)", NULL},
    {"model.quantize_asr_model", "a quantized model is not built", NULL},
    {"model.dtype", "decoding runs in float32 (ESPnet2's default)", "float32"},
    /* Lightning's switches that change what is trained or kept */
    {"trainer.fast_dev_run", "Lightning's debug run (a few batches of each split, no checkpoints or logs) is not "
                             "built (trainer.limit_train_batches, limit_val_batches and max_steps do the same)", NULL},
    {"trainer.overfit_batches", "training and validating on the same few training batches is not built "
                                "(trainer.limit_train_batches limits the batches)", NULL},
    {"trainer.enable_checkpointing", "checkpoints are always written: they are the resume point and the k-best "
                                     "average's input", "true"},
    {"trainer.barebones", "Lightning's barebones mode (no checkpoints, logs or progress) is not built", NULL},
    {"trainer.plugins", "Lightning's plugins (precision, cluster environment, checkpoint IO) are not built: "
                        "trainer.precision sets the precision, and SLURM and torchrun are detected by their "
                        "variables", NULL},
    {"tokenizer.split_digits", "SentencePiece's split_digits is not passed to its trainer by espnet3", NULL},
    {"tokenizer.byte_fallback", "SentencePiece's byte_fallback is not passed to its trainer by espnet3", NULL},
};

/* Whether a scalar says the no-op value: a bool's spelling for true, else the string itself. */
static int says_noop(const ynode *val, const char *noop)
{
    int bv;
    if (!noop || val->kind != YN_SCALAR) return 0;
    if (!strcmp(noop, "true")) return yt_as_bool(val, &bv) && bv;
    return !strcmp(val->str, noop);
}

/* The reason a key is refused, or NULL; *harmless says whether its value changes nothing. */
static const char *refused_reason(const char *schema_path, const ynode *val, int *harmless, const char **noop)
{
    for (size_t i = 0; i < sizeof refused_keys / sizeof *refused_keys; i++) {
        if (!config_path_match(refused_keys[i].key, schema_path)) continue;
        double dv;
        int bv;
        *noop = refused_keys[i].noop;
        *harmless = yt_is_null(val) || (val->kind != YN_SCALAR && val->n == 0) || says_noop(val, refused_keys[i].noop) ||
                    (val->kind == YN_SCALAR && !refused_keys[i].noop &&
                     ((yt_as_float(val, &dv) && dv == 0) || (yt_as_bool(val, &bv) && !bv)));
        return refused_keys[i].why;
    }
    return NULL;
}

static int is_unimplemented(const char *schema_path)
{
    for (const char *const *k = unimplemented_keys; *k; k++)
        if (config_path_match(*k, schema_path)) return 1;
    return 0;
}

/* Closest known key under this mapping, or NULL. */
static const char *suggest(const cyaml_schema_field_t *fields, const char *parent_schema, const char *key)
{
    const char *best = NULL;
    int best_d = 1 << 30;
    for (const cyaml_schema_field_t *f = fields; f->key; f++) {
        int d = str_edit_distance(key, f->key);
        if (d < best_d) best_d = d, best = f->key;
    }
    /* Unimplemented keys under the same parent are also real keys a user may have meant. */
    size_t plen = strlen(parent_schema);
    for (const char *const *k = unimplemented_keys; *k; k++) {
        const char *tail = strrchr(*k, '.');
        tail = tail ? tail + 1 : *k;
        size_t head = (size_t)(tail - *k);
        if (head ? !(head - 1 == plen && !strncmp(*k, parent_schema, plen)) : plen != 0) continue;
        int d = str_edit_distance(key, tail);
        if (d < best_d) best_d = d, best = tail;
    }
    int limit = (int)strlen(key) / 3;
    if (limit < 2) limit = 2;
    return best_d <= limit ? best : NULL;
}

static int walk_value(walker *w, ynode *n, const cyaml_schema_value_t *schema, const char *schema_path,
                      const char *path);

static int is_read_from_tree(const char *schema_path);
static int changes_nothing(const char *schema_path);

static int walk_mapping(walker *w, ynode *n, const cyaml_schema_field_t *fields, const char *schema_path,
                        const char *path)
{
    if (n->kind != YN_MAP)
        return config_fail_node(w->err, n, path, "expected a mapping of keys, got %s '%s'", yt_kind_name(n), scalar_text(n));
    for (size_t i = 0; i < n->n;) {
        const char *key = n->keys[i];
        ynode *val = n->items[i];
        char *sp = join_path(schema_path, key);
        char *p = join_path(path, key);
        const cyaml_schema_field_t *f = NULL;
        for (const cyaml_schema_field_t *c = fields; c->key; c++)
            if (!strcmp(c->key, key)) f = c;
        if (!f && w->recipe && w->recipe->fields && !strcmp(schema_path, "create_dataset"))
            for (const cyaml_schema_field_t *c = w->recipe->fields; c->key; c++)
                if (!strcmp(c->key, key)) f = c;
        int rc = 0, drop = 0;
        int harmless = 0;
        const char *noop = NULL, *refused = f ? NULL : refused_reason(sp, val, &harmless, &noop);
        if (!f && n == w->open_map) {
            /* an argument of the recipe's Python: kept as written */
        } else if (refused) {
            if (harmless) drop = 1;
            else if (noop) rc = config_fail_node(w->err, val, p, "%s (remove it, or write %s)", refused, noop);
            else rc = config_fail_node(w->err, val, p, "%s (remove it, or set it to null / 0)", refused);
        } else if (!f) {
            char where[512];
            ymark km = n->key_marks[i];
            if (is_unimplemented(sp)) {
                log_warn("%s: %s: accepted for ESPnet3 compatibility but not implemented by espnet3; ignored",
                         ymark_str(km, where, sizeof where), p);
                drop = 1;
            } else if (w->kind != CONFIG_TRAINING && !*schema_path && is_training_key(key)) {
                /* ESPnet3's inference/metrics scaffolds copy training keys (num_device, dataloader, ...) */
                log_warn("%s: %s: a training config key; the %s config does not use it; ignored",
                         ymark_str(km, where, sizeof where), p, config_kind_name(w->kind));
                drop = 1;
            } else {
                const char *s = suggest(fields, schema_path, key);
                if (!s && w->recipe && w->recipe->fields && !strcmp(schema_path, "create_dataset"))
                    s = suggest(w->recipe->fields, schema_path, key);
                if (s) rc = esp_fail(w->err, "%s: %s: unknown key (did you mean %s?)", ymark_str(km, where, sizeof where), p, s);
                else rc = esp_fail(w->err, "%s: %s: unknown key (see docs/configs.md for the keys of %s)",
                                   ymark_str(km, where, sizeof where), p, *path ? path : "the top level");
            }
        } else if (yt_is_null(val) && f->value.type != CYAML_IGNORE && !null_meaning(sp)) {
            drop = 1; /* an empty value leaves the field unset */
        } else if (!strcmp(key, "_target_")) {
            if (val->kind != YN_SCALAR) rc = config_fail_node(w->err, val, p, "_target_ must be a class name string");
            else rc = check_target(w, val, schema_path, p);
        } else if (f->value.type != CYAML_IGNORE) {
            const ynode *outer = w->open_map;
            if (opens_map(w, n, sp)) w->open_map = val;
            rc = walk_value(w, val, &f->value, sp, p);
            w->open_map = outer;
        } else if (config_path_match("dataset.*[].transform", sp)) {
            /* the recipe's Python applies it to each item of a Python entry, at export; other sources
             * are read by espnet3, which cannot run it */
            const ynode *src = yt_map_get(n, "data_src");
            if (!yt_is_null(val) &&
                !config_data_src_is_python(src && src->kind == YN_SCALAR && !yt_is_null(src) ? src->str : NULL,
                                           config_python_recipe_dir(w->root)))
                rc = config_fail_node(w->err, val, p, "a transform runs the recipe's Python on a Python dataset's items "
                                      "(its dataset/ package, a module or class path); this entry's data are read by "
                                      "espnet3 itself, so it cannot apply (remove it, or serve the data from Python)");
        } else if (!(val->kind != YN_SCALAR && val->n == 0) && !is_read_from_tree(sp) && !changes_nothing(sp)) {
            /* Free-form ESPnet3 blocks (dataset:, fit:) are kept in config.yaml; say they are unused. */
            char where[512];
            log_warn("%s: %s: kept in the resolved config but not used by espnet3 (it reads "
                     "${data_dir}/manifest/<split>.tsv and runs its own trainer)",
                     ymark_str(n->key_marks[i], where, sizeof where), p);
        }
        free(sp);
        free(p);
        if (rc != 0) return -1;
        if (drop) yt_map_remove(n, key);
        else i++;
    }
    return 0;
}

/* IGNORED keys that change nothing here: Hydra's instantiation flag (nothing is instantiated). */
static int changes_nothing(const char *schema_path)
{
    return !strcmp(schema_path, "dataset._recursive_");
}

/* IGNORED by the typed schema because their values are free-form, but read from the tree by
 * their own readers (core/config/config_aug.c, stages/publish.c, stages/pack_demo.c): not "unused". */
static int is_read_from_tree(const char *schema_path)
{
    static const char *const keys[] = {
        "dataset.preprocessor.data_aug_effects",
        "pack_model.files", "pack_model.yaml_files",
        "pack_model.readme_context", "pack.readme_context", "model.call_args", NULL};
    for (const char *const *k = keys; *k; k++)
        if (!strcmp(schema_path, *k)) return 1;
    return 0;
}

/* A dataset entry's data_src: one of our readers; ESPnet3's tag "<recipe>/<task>" naming this
 * recipe (its dataset/ package, or the manifests its built-in builder writes) or another recipe of
 * the same egs3 tree with a dataset/ package; or a Python module or class path (run by
 * core/data/py_export.c, as ESPnet3's DataOrganizer instantiates it). */
static int check_data_src(walker *w, const ynode *n, const char *path)
{
    static const char *const kinds[] = {"manifest", "kaldi", "librispeech", "an4", NULL};
    for (const char *const *k = kinds; *k; k++)
        if (!strcmp(n->str, *k)) return 0;
    if (config_is_lm_data_src(n->str)) return 0; /* ESPnet3's LM text reader (core/data/dataset_src.c) */
    const char *recipe_dir = config_python_recipe_dir(w->root);
    const char *slash = strchr(n->str, '/');
    if (slash && slash > n->str && slash[1] && !strchr(slash + 1, '/') && !strchr(n->str, '.')) {
        if (config_tag_is_recipe(n->str, recipe_dir) || config_data_src_is_python(n->str, recipe_dir)) return 0;
        return config_fail_node(w->err, n, path, "'%s' names ESPnet3 recipe %.*s's dataset, and this config's recipe_dir "
                                "is %s, with no egs3/%s/dataset/__init__.py beside it (run that recipe, put it in the same "
                                "egs3 tree, or read its manifests with data_src: manifest and data_src_args.path)", n->str,
                                (int)(slash - n->str), n->str, recipe_dir, n->str);
    }
    if (strchr(n->str, '.') && !slash) return 0; /* a Python module or class path */
    return config_fail_node(w->err, n, path, "'%s' is not a data source espnet3 reads (supported: manifest, kaldi, "
                            "librispeech, an4, ESPnet3's <recipe>/<task> tag, a Python module or class path, or leave "
                            "it out for the recipe's dataset)", n->str);
}

/* ESPnet3's newer metrics entries `- metric: {_target_: ...}` (with `inputs:` and `apply_to:` beside
 * it) become `- {_target_: ..., inputs: ..., apply_to: ...}`; `inputs` (the scp files ESPnet3's
 * load_scp_fields reads: a list of names, or a mapping alias: file name) becomes a list of
 * {alias, file} for the schema. */
static int flatten_metric(walker *w, ynode *n, const char *path)
{
    if (n->kind != YN_MAP) return 0;
    ynode *metric = yt_map_get(n, "metric");
    if (metric && metric->kind == YN_MAP) {
        ynode *inner = yt_copy(metric);
        yt_map_remove(n, "metric");
        for (size_t i = 0; i < inner->n; i++) {
            if (yt_map_get(n, inner->keys[i])) {
                int rc = config_fail_node(w->err, n, path, "'%s' is set both in metric: and beside it (keep one)",
                                          inner->keys[i]);
                yt_free(inner);
                return rc;
            }
            yt_map_set(n, inner->keys[i], inner->key_marks[i], yt_copy(inner->items[i]));
        }
        yt_free(inner);
    }
    ynode *inputs = yt_map_get(n, "inputs");
    if (!inputs || inputs->kind == YN_SCALAR) return 0; /* a scalar: the schema's "expected a list" */
    ynode *pairs = yt_seq(inputs->mark);
    for (size_t i = 0; i < inputs->n; i++) {
        ynode *file = inputs->items[i];
        const char *alias = inputs->kind == YN_MAP ? inputs->keys[i] : file->str;
        if (file->kind != YN_SCALAR || yt_is_null(file)) {
            yt_free(pairs);
            char *ip = xasprintf("%s.inputs", path);
            int rc = config_fail_node(w->err, file, ip, "expected scp names (inputs: [ref, hyp]) or alias: name pairs "
                                      "(inputs: {ref: text, hyp: hyp}), got %s", yt_kind_name(file));
            free(ip);
            return rc;
        }
        ynode *pair = yt_map(file->mark);
        yt_map_set(pair, "alias", inputs->kind == YN_MAP ? inputs->key_marks[i] : file->mark,
                   yt_scalar(alias, 1, file->mark));
        yt_map_set(pair, "file", file->mark, yt_scalar(file->str, 1, file->mark));
        yt_seq_push(pairs, pair);
    }
    yt_take(inputs, pairs);
    return 0;
}

/* ESPnet's `[monitor, nbest, mode]` triples become mappings for the schema. */
static int expand_criterion(walker *w, ynode *n, const char *path)
{
    if (n->kind != YN_SEQ) return 0;
    if (n->n != 3)
        return config_fail_node(w->err, n, path, "expected [monitor, nbest, mode] such as [valid/loss, 3, min], got %zu items", n->n);
    static const char *names[] = {"monitor", "nbest", "mode"};
    ynode *m = yt_map(n->mark);
    for (size_t i = 0; i < 3; i++) yt_map_set(m, names[i], n->items[i]->mark, yt_copy(n->items[i]));
    for (size_t i = 0; i < n->n; i++) yt_free(n->items[i]);
    free(n->items);
    *n = *m;
    free(m);
    return 0;
}

/* Lightning's int-or-float trainer keys, kept as written (string fields): an integer is a count of
 * batches, a float a fraction (limit_*_batches, val_check_interval); check_val_every_n_epoch is an
 * integer or null (Lightning's None: val_check_interval's batches count over epochs). */
static int is_written_number(const char *schema_path)
{
    static const char *const keys[] = {"trainer.limit_train_batches", "trainer.limit_val_batches",
                                       "trainer.val_check_interval", "trainer.check_val_every_n_epoch"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        if (!strcmp(schema_path, keys[i])) return 1;
    return 0;
}

static int check_written_number(walker *w, ynode *n, const char *schema_path, const char *path)
{
    double dv;
    int64_t iv;
    int vci = !strcmp(schema_path, "trainer.val_check_interval");
    if (vci && (n->kind == YN_MAP || (n->kind == YN_SCALAR && strchr(n->str, ':'))))
        return config_fail_node(w->err, n, path, "a time (validation on the clock, Lightning 2.6's str, timedelta or "
                                "dict) is not built: its points would depend on the machine's speed and a resumed run "
                                "would not validate where the first one did (give a fraction of an epoch or a number "
                                "of batches)");
    if (n->kind != YN_SCALAR) return config_fail_node(w->err, n, path, "expected a number, got %s", yt_kind_name(n));
    if (!strcmp(schema_path, "trainer.check_val_every_n_epoch")) {
        if (yt_is_null(n) && !n->quoted) { /* ~, Null: one spelling */
            free(n->str);
            n->str = xstrdup("null");
            return 0;
        }
        if (!yt_as_int(n, &iv))
            return config_fail_node(w->err, n, path, "expected an integer or null, got %s '%s'", yt_kind_name(n),
                                    n->str);
        return check_number(w, n, schema_path, path, (double)iv);
    }
    if (!yt_as_float(n, &dv) || !isfinite(dv))
        return config_fail_node(w->err, n, path, "expected a number, got %s '%s'", yt_kind_name(n), n->str);
    return check_number(w, n, schema_path, path, dv);
}

/* Lists of files that ESPnet also takes as one path (CommonPreprocessor's rir_scp and noise_scp). */
static int is_path_list(const char *schema_path)
{
    return !strcmp(schema_path, "dataset.preprocessor.rir_scp") || !strcmp(schema_path, "dataset.preprocessor.noise_scp");
}

static int walk_value(walker *w, ynode *n, const cyaml_schema_value_t *s, const char *schema_path, const char *path)
{
    int64_t iv;
    double dv;
    int bv;
    switch (s->type) {
    case CYAML_INT:
    case CYAML_UINT:
        if (!yt_as_int(n, &iv)) return config_fail_node(w->err, n, path, "expected an integer, got %s '%s'", yt_kind_name(n), scalar_text(n));
        if (s->type == CYAML_UINT && iv < 0) return config_fail_node(w->err, n, path, "expected a non-negative integer, got %lld", (long long)iv);
        if (check_number(w, n, schema_path, path, (double)iv) != 0) return -1;
        /* Rewrite in plain decimal so libcyaml reads the value we validated (not "010" as octal). */
        free(n->str);
        n->str = xasprintf("%lld", (long long)iv);
        return 0;
    case CYAML_FLOAT:
        if (!yt_as_float(n, &dv)) return config_fail_node(w->err, n, path, "expected a number, got %s '%s'", yt_kind_name(n), scalar_text(n));
        if (!isfinite(dv)) return config_fail_node(w->err, n, path, "expected a finite number, got '%s'", n->str);
        if (check_number(w, n, schema_path, path, dv) != 0) return -1;
        /* Rules see the short form ("0", "0.1"); libcyaml the exact one (its strtod does not read "1_0"). */
        free(n->str);
        n->str = xasprintf("%g", dv);
        if (check_allowed(w, n, schema_path, path) != 0) return -1;
        free(n->str);
        n->str = shortest_repr(dv);
        return 0;
    case CYAML_BOOL:
        if (!yt_as_bool(n, &bv)) return config_fail_node(w->err, n, path, "expected true or false, got %s '%s'", yt_kind_name(n), scalar_text(n));
        /* libcyaml reads only true/false/yes/no/on/off spelled in lower case: normalise. */
        free(n->str);
        n->str = xstrdup(bv ? "true" : "false");
        return check_allowed(w, n, schema_path, path);
    case CYAML_STRING:
        if (is_written_number(schema_path)) return check_written_number(w, n, schema_path, path);
        if (n->kind != YN_SCALAR) return config_fail_node(w->err, n, path, "expected a string, got %s", yt_kind_name(n));
        if (null_meaning(schema_path)) {
            if (n->quoted && !strcmp(n->str, "null"))
                return config_fail_node(w->err, n, path, "'null' in quotes is the string null, not None (write null "
                                                         "without quotes for %s)", null_meaning(schema_path));
            if (yt_is_null(n)) { /* ~, Null, an empty value: one spelling */
                free(n->str);
                n->str = xstrdup("null");
            }
        }
        if (config_path_match("dataset.*[].data_src", schema_path)) return check_data_src(w, n, path);
        return check_allowed(w, n, schema_path, path);
    case CYAML_MAPPING:
        if (!strcmp(schema_path, "best_model_criterion[]") && expand_criterion(w, n, path) != 0) return -1;
        if (!strcmp(schema_path, "metrics[]") && flatten_metric(w, n, path) != 0) return -1;
        return walk_mapping(w, n, s->mapping.fields, schema_path, path);
    case CYAML_SEQUENCE:
    case CYAML_SEQUENCE_FIXED: {
        /* A single mapping where a list of mappings is expected is a list of one (Lightning's logger). */
        if (n->kind == YN_MAP && s->sequence.entry->type == CYAML_MAPPING) {
            ynode *item = xcalloc(1, sizeof *item);
            *item = *n;
            memset(n, 0, sizeof *n);
            n->kind = YN_SEQ;
            n->mark = item->mark;
            n->via = item->via;
            yt_seq_push(n, item);
        }
        if (n->kind == YN_SCALAR && is_path_list(schema_path)) {
            ynode *item = yt_copy(n);
            yt_take(n, yt_seq(item->mark));
            yt_seq_push(n, item);
        }
        if (n->kind != YN_SEQ) return config_fail_node(w->err, n, path, "expected a list, got %s '%s'", yt_kind_name(n), scalar_text(n));
        if (n->n < s->sequence.min || n->n > s->sequence.max) {
            if (s->sequence.min == s->sequence.max)
                return config_fail_node(w->err, n, path, "expected a list of %u values, got %zu", s->sequence.min, n->n);
            return config_fail_node(w->err, n, path, "expected at least %u values, got %zu", s->sequence.min, n->n);
        }
        char *sp = xasprintf("%s[]", schema_path);
        for (size_t i = 0; i < n->n; i++) {
            char *p = xasprintf("%s[%zu]", path, i);
            int rc = walk_value(w, n->items[i], s->sequence.entry, sp, p);
            free(p);
            if (rc != 0) {
                free(sp);
                return -1;
            }
        }
        free(sp);
        return 0;
    }
    case CYAML_IGNORE:
        return 0;
    default:
        ESP_CHECK(!"schema type the validator does not know");
    }
    return 0;
}

int config_validate(config_kind kind, ynode *root, esp_err *err)
{
    walker w = {.err = err, .root = root, .kind = kind, .recipe = kind == CONFIG_TRAINING ? config_recipe_of(root) : NULL};
    /* Keys that only steer composition are gone by now; `defaults` may remain in a template. */
    yt_map_remove(root, "defaults");
    if (walk_mapping(&w, root, config_schema(kind)->mapping.fields, "", "") != 0) return -1;
    if (w.recipe && w.recipe->check && w.recipe->check(yt_map_get(root, "create_dataset"), err) != 0) return -1;
    config_fill_defaults(kind, root);
    return config_check_values(kind, root, err);
}
