/* The libcyaml schemas of the three config kinds (training, inference, metrics): every key espnet3
 * types, as ESPnet3/ESPnet2/Lightning name it. Validation against them is core/config/config_validate.c. */
#include "core/config/config_schema.h"

#include <ctype.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/edit_distance.h"
#include "core/config/config_fields.h"
#include "core/config/config_values.h"

/* ---- libcyaml schemas ------------------------------------------------------------------ */

const cyaml_schema_value_t config_string_entry = {CYAML_VALUE_STRING(CYAML_FLAG_POINTER, char, 0, CYAML_UNLIMITED)};
const cyaml_schema_value_t config_int_entry = {CYAML_VALUE_INT(CYAML_FLAG_DEFAULT, int64_t)};
static const cyaml_schema_value_t float_entry = {CYAML_VALUE_FLOAT(CYAML_FLAG_DEFAULT, double)};

/* The folders of a run config (CFG_RUN_DIRS of core/config/config_types.h). */
#define RUN_DIR_FIELDS(type)                                                                                  \
    STR("recipe_dir", type, recipe_dir), STR("data_dir", type, data_dir), STR("dataset_dir", type, dataset_dir), \
        STR("exp_tag", type, exp_tag), STR("exp_dir", type, exp_dir), STR("stats_dir", type, stats_dir),         \
        STR("inference_dir", type, inference_dir)

/* A recipe's own keys are its table's (core/config/config_recipe.h). */
static const cyaml_schema_field_t create_dataset_fields[] = {
    STR("func", create_dataset_cfg, func),
    STR("dataset_dir", create_dataset_cfg, dataset_dir),
    STR("recipe_dir", create_dataset_cfg, recipe_dir),
    CYAML_FIELD_END};

/* ESPnet3's dataset: block (DataOrganizer). */
static const cyaml_schema_field_t data_src_args_fields[] = {
    STR("split", data_src_args_cfg, split),
    STR("path", data_src_args_cfg, path),
    STR("manifest_path", data_src_args_cfg, manifest_path),
    STR("recipe_dir", data_src_args_cfg, recipe_dir),
    STR("text_path", data_src_args_cfg, text_path),
    CYAML_FIELD_END};

static const cyaml_schema_field_t dataset_legacy_fields[] = {
    STR("_target_", dataset_legacy_cfg, target),
    STR("manifest_path", dataset_legacy_cfg, manifest_path),
    STR("split", dataset_legacy_cfg, split),
    CYAML_FIELD_END};

static const cyaml_schema_field_t dataset_ref_fields[] = {
    STR("name", dataset_ref_cfg, name),
    STR("data_src", dataset_ref_cfg, data_src),
    MAP("data_src_args", dataset_ref_cfg, data_src_args, data_src_args_fields),
    MAP("dataset", dataset_ref_cfg, dataset, dataset_legacy_fields),
    IGNORED("transform"), /* a Python entry's per-item transform: handed to its export (config_python.c) */
    CYAML_FIELD_END};
static const cyaml_schema_value_t dataset_ref_entry = {CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, dataset_ref_cfg, dataset_ref_fields)};

static const cyaml_schema_field_t preprocessor_fields[] = {
    STR("_target_", preprocessor_cfg, target),
    INT("fs", preprocessor_cfg, fs),
    BOOL("train", preprocessor_cfg, train),
    STR("token_type", preprocessor_cfg, token_type),
    STR("token_list", preprocessor_cfg, token_list),
    STR("bpemodel", preprocessor_cfg, bpemodel),
    STR("text_cleaner", preprocessor_cfg, text_cleaner),
    /* augmentation: ranges and defaults in config_values.c */
    PAIR("data_aug_num", preprocessor_cfg, data_aug_num, &config_int_entry),
    FLT("data_aug_prob", preprocessor_cfg, data_aug_prob),
    FLT("rir_apply_prob", preprocessor_cfg, rir_apply_prob),
    FLT("noise_apply_prob", preprocessor_cfg, noise_apply_prob),
    STR("noise_db_range", preprocessor_cfg, noise_db_range),
    FLT("short_noise_thres", preprocessor_cfg, short_noise_thres),
    /* a path or a list of paths: the validator makes a path a list of one */
    SEQ("rir_scp", preprocessor_cfg, rir_scp, &config_string_entry),
    SEQ("noise_scp", preprocessor_cfg, noise_scp, &config_string_entry),
    /* parsed by core/config/config_aug.c at load (weighted lists that nest, which cyaml cannot type) */
    IGNORED("data_aug_effects"),
    CYAML_FIELD_END};

static const cyaml_schema_field_t dataset_fields[] = {
    STR("_target_", dataset_cfg, target),
    STR("recipe_dir", dataset_cfg, recipe_dir),
    IGNORED("_recursive_"), /* Hydra's instantiation flag: nothing is instantiated here */
    SEQ("train", dataset_cfg, train, &dataset_ref_entry),
    SEQ("valid", dataset_cfg, valid, &dataset_ref_entry),
    SEQ("test", dataset_cfg, test, &dataset_ref_entry),
    MAP("preprocessor", dataset_cfg, preprocessor, preprocessor_fields),
    BOOL("resample", dataset_cfg, resample),
    CYAML_FIELD_END};

/* Its other keys are the function's arguments: kept in the tree (the validator lets them through). */
static const cyaml_schema_field_t text_builder_fields[] = {
    STR("func", text_builder_cfg, func),
    CYAML_FIELD_END};

static const cyaml_schema_field_t tokenizer_fields[] = {
    STR("model_type", tokenizer_cfg, model_type),
    INT("vocab_size", tokenizer_cfg, vocab_size),
    FLT("character_coverage", tokenizer_cfg, character_coverage),
    SEQ("user_defined_symbols", tokenizer_cfg, user_defined_symbols, &config_string_entry),
    STR("save_path", tokenizer_cfg, save_path),
    STR("text", tokenizer_cfg, text),
    MAP("text_builder", tokenizer_cfg, text_builder, text_builder_fields),
    CYAML_FIELD_END};

static const cyaml_schema_field_t logger_fields[] = {
    STR("_target_", logger_cfg, target),
    STR("save_dir", logger_cfg, save_dir),
    STR("name", logger_cfg, name),
    STR("project", logger_cfg, project),
    CYAML_FIELD_END};
static const cyaml_schema_value_t logger_entry = {CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, logger_cfg, logger_fields)};

static const cyaml_schema_field_t timedelta_fields[] = {
    STR("_target_", timedelta_cfg, target),
    FLT("days", timedelta_cfg, days),
    FLT("hours", timedelta_cfg, hours),
    FLT("minutes", timedelta_cfg, minutes),
    FLT("seconds", timedelta_cfg, seconds),
    CYAML_FIELD_END};

static const cyaml_schema_field_t callback_fields[] = {
    STR("_target_", callback_cfg, target),
    INT("every_n_train_steps", callback_cfg, every_n_train_steps),
    MAP("train_time_interval", callback_cfg, train_time_interval, timedelta_fields),
    STR("save_last", callback_cfg, save_last),
    BOOL("verbose", callback_cfg, verbose),
    STR("logging_interval", callback_cfg, logging_interval),
    INT("refresh_rate", callback_cfg, refresh_rate),
    STR("monitor", callback_cfg, monitor),
    STR("mode", callback_cfg, mode),
    INT("patience", callback_cfg, patience),
    FLT("min_delta", callback_cfg, min_delta),
    BOOL("strict", callback_cfg, strict),
    BOOL("check_finite", callback_cfg, check_finite),
    FLT("stopping_threshold", callback_cfg, stopping_threshold),
    FLT("divergence_threshold", callback_cfg, divergence_threshold),
    FLT("decay", callback_cfg, decay),
    INT("update_every_n_steps", callback_cfg, update_every_n_steps),
    INT("update_starting_at_step", callback_cfg, update_starting_at_step),
    INT("update_starting_at_epoch", callback_cfg, update_starting_at_epoch),
    BOOL("use_buffers", callback_cfg, use_buffers),
    STR("device", callback_cfg, device),
    CYAML_FIELD_END};
static const cyaml_schema_value_t callback_entry = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, callback_cfg, callback_fields)};

static const cyaml_schema_field_t trainer_fields[] = {
    STR("accelerator", trainer_cfg, accelerator),
    INT("devices", trainer_cfg, devices),
    INT("num_nodes", trainer_cfg, num_nodes),
    STR("strategy", trainer_cfg, strategy),
    STR("precision", trainer_cfg, precision),
    BOOL("sync_batchnorm", trainer_cfg, sync_batchnorm),
    FLT("gradient_clip_val", trainer_cfg, gradient_clip_val),
    STR("gradient_clip_algorithm", trainer_cfg, gradient_clip_algorithm),
    INT("accumulate_grad_batches", trainer_cfg, accumulate_grad_batches),
    INT("max_epochs", trainer_cfg, max_epochs),
    INT("max_steps", trainer_cfg, max_steps),
    INT("log_every_n_steps", trainer_cfg, log_every_n_steps),
    STR("check_val_every_n_epoch", trainer_cfg, check_val_every_n_epoch),
    STR("limit_train_batches", trainer_cfg, limit_train_batches),
    STR("limit_val_batches", trainer_cfg, limit_val_batches),
    STR("val_check_interval", trainer_cfg, val_check_interval),
    INT("num_sanity_val_steps", trainer_cfg, num_sanity_val_steps),
    INT("min_epochs", trainer_cfg, min_epochs),
    INT("min_steps", trainer_cfg, min_steps),
    BOOL("deterministic", trainer_cfg, deterministic),
    BOOL("enable_progress_bar", trainer_cfg, enable_progress_bar),
    SEQ("logger", trainer_cfg, logger, &logger_entry),
    SEQ("callbacks", trainer_cfg, callbacks, &callback_entry),
    STR("max_time", trainer_cfg, max_time),
    FLT("dist_timeout", trainer_cfg, dist_timeout),
    BOOL("per_rank_logs", trainer_cfg, per_rank_logs),
    STR("profiler", trainer_cfg, profiler),
    CYAML_FIELD_END};

static const cyaml_schema_field_t slurm_options_fields[] = {
    STR("account", slurm_options_cfg, account),
    STR("queue", slurm_options_cfg, queue),
    INT("cores", slurm_options_cfg, cores),
    INT("processes", slurm_options_cfg, processes),
    STR("memory", slurm_options_cfg, memory),
    STR("walltime", slurm_options_cfg, walltime),
    INT("death_timeout", slurm_options_cfg, death_timeout),
    STR("log_directory", slurm_options_cfg, log_directory),
    SEQ("job_extra_directives", slurm_options_cfg, job_extra_directives, &config_string_entry),
    SEQ("job_script_prologue", slurm_options_cfg, job_script_prologue, &config_string_entry),
    CYAML_FIELD_END};

static const cyaml_schema_field_t parallel_fields[] = {
    STR("env", parallel_cfg, env),
    INT("n_workers", parallel_cfg, n_workers),
    BOOL("async_mode", parallel_cfg, async_mode),
    MAP("options", parallel_cfg, options, slurm_options_fields),
    BOOL("allow_overwrite_lock", parallel_cfg, allow_overwrite_lock),
    CYAML_FIELD_END};

static const cyaml_schema_field_t batches_fields[] = {
    STR("type", batches_cfg, type),
    SEQ("shape_files", batches_cfg, shape_files, &config_string_entry),
    INT("batch_size", batches_cfg, batch_size),
    INT("batch_bins", batches_cfg, batch_bins),
    CYAML_FIELD_END};

static const cyaml_schema_field_t collate_fields[] = {
    STR("_target_", collate_cfg, target),
    INT("int_pad_value", collate_cfg, int_pad_value),
    FLT("float_pad_value", collate_cfg, float_pad_value),
    CYAML_FIELD_END};

static const cyaml_schema_field_t iter_factory_fields[] = {
    STR("_target_", iter_factory_cfg, target),
    BOOL("shuffle", iter_factory_cfg, shuffle),
    INT("num_workers", iter_factory_cfg, num_workers),
    MAP("collate_fn", iter_factory_cfg, collate_fn, collate_fields),
    MAP("batches", iter_factory_cfg, batches, batches_fields),
    CYAML_FIELD_END};

static const cyaml_schema_field_t loader_split_fields[] = {
    BOOL("multiple_iterator", loader_split_cfg, multiple_iterator),
    INT("num_shards", loader_split_cfg, num_shards),
    INT("total_shards", loader_split_cfg, total_shards),
    INT("dist_world_size", loader_split_cfg, dist_world_size),
    MAP("iter_factory", loader_split_cfg, iter_factory, iter_factory_fields),
    CYAML_FIELD_END};

static const cyaml_schema_field_t dataloader_fields[] = {
    MAP("collate_fn", dataloader_cfg, collate_fn, collate_fields),
    MAP("train", dataloader_cfg, train, loader_split_fields),
    MAP("valid", dataloader_cfg, valid, loader_split_fields),
    CYAML_FIELD_END};

static const cyaml_schema_field_t frontend_conf_fields[] = {
    INT("fs", frontend_conf_cfg, fs),
    INT("n_fft", frontend_conf_cfg, n_fft),
    INT("win_length", frontend_conf_cfg, win_length),
    INT("hop_length", frontend_conf_cfg, hop_length),
    INT("n_mels", frontend_conf_cfg, n_mels),
    FLT("fmin", frontend_conf_cfg, fmin),
    FLT("fmax", frontend_conf_cfg, fmax),
    CYAML_FIELD_END};

static const cyaml_schema_field_t preencoder_conf_fields[] = {
    INT("input_size", preencoder_conf_cfg, input_size),
    INT("output_size", preencoder_conf_cfg, output_size),
    FLT("dropout", preencoder_conf_cfg, dropout),
    CYAML_FIELD_END};

static const cyaml_schema_field_t specaug_conf_fields[] = {
    BOOL("apply_time_warp", specaug_conf_cfg, apply_time_warp),
    INT("time_warp_window", specaug_conf_cfg, time_warp_window),
    STR("time_warp_mode", specaug_conf_cfg, time_warp_mode),
    BOOL("apply_freq_mask", specaug_conf_cfg, apply_freq_mask),
    PAIR("freq_mask_width_range", specaug_conf_cfg, freq_mask_width_range, &config_int_entry),
    INT("num_freq_mask", specaug_conf_cfg, num_freq_mask),
    BOOL("apply_time_mask", specaug_conf_cfg, apply_time_mask),
    PAIR("time_mask_width_range", specaug_conf_cfg, time_mask_width_range, &config_int_entry),
    PAIR("time_mask_width_ratio_range", specaug_conf_cfg, time_mask_width_ratio_range, &float_entry),
    INT("num_time_mask", specaug_conf_cfg, num_time_mask),
    CYAML_FIELD_END};

static const cyaml_schema_field_t normalize_conf_fields[] = {
    STR("stats_file", normalize_conf_cfg, stats_file),
    BOOL("norm_means", normalize_conf_cfg, norm_means),
    BOOL("norm_vars", normalize_conf_cfg, norm_vars),
    FLT("eps", normalize_conf_cfg, eps),
    CYAML_FIELD_END};

/* Optional scalars read into pointers: NULL tells "left out" from a value equal to 0. */
#define INT_P(key, type, member) CYAML_FIELD_INT_PTR(key, OPT_PTR, type, member)
#define FLT_P(key, type, member) CYAML_FIELD_FLOAT_PTR(key, OPT_PTR, type, member)
#define BOOL_P(key, type, member) CYAML_FIELD_BOOL_PTR(key, OPT_PTR, type, member)

static const cyaml_schema_field_t body_block_fields[] = {
    STR("block_type", body_block_cfg, block_type),
    INT_P("num_blocks", body_block_cfg, num_blocks),
    INT_P("hidden_size", body_block_cfg, hidden_size),
    INT_P("linear_size", body_block_cfg, linear_size),
    INT_P("heads", body_block_cfg, heads),
    INT_P("conv_mod_kernel_size", body_block_cfg, conv_mod_kernel_size),
    FLT_P("dropout_rate", body_block_cfg, dropout_rate),
    FLT_P("pos_wise_dropout_rate", body_block_cfg, pos_wise_dropout_rate),
    FLT_P("att_dropout_rate", body_block_cfg, att_dropout_rate),
    FLT_P("norm_eps", body_block_cfg, norm_eps),
    FLT_P("norm_partial", body_block_cfg, norm_partial),
    FLT_P("conv_mod_norm_eps", body_block_cfg, conv_mod_norm_eps),
    FLT_P("conv_mod_norm_momentum", body_block_cfg, conv_mod_norm_momentum),
    FLT_P("conv_mod_norm_partial", body_block_cfg, conv_mod_norm_partial),
    INT_P("depth_conv_kernel_size", body_block_cfg, depth_conv_kernel_size),
    INT_P("output_size", body_block_cfg, output_size),
    INT_P("kernel_size", body_block_cfg, kernel_size),
    INT_P("stride", body_block_cfg, stride),
    INT_P("dilation", body_block_cfg, dilation),
    INT_P("groups", body_block_cfg, groups),
    BOOL_P("bias", body_block_cfg, bias),
    BOOL_P("relu", body_block_cfg, relu),
    BOOL_P("batch_norm", body_block_cfg, batch_norm),
    CYAML_FIELD_END};

static const cyaml_schema_value_t body_block_entry = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, body_block_cfg, body_block_fields)};

static const cyaml_schema_field_t body_input_fields[] = {
    BOOL_P("vgg_like", body_input_cfg, vgg_like),
    INT_P("conv_size", body_input_cfg, conv_size),
    INT_P("subsampling_factor", body_input_cfg, subsampling_factor),
    CYAML_FIELD_END};

static const cyaml_schema_field_t body_main_fields[] = {
    STR("pos_wise_act_type", body_main_cfg, pos_wise_act_type),
    STR("conv_mod_act_type", body_main_cfg, conv_mod_act_type),
    FLT_P("pos_enc_dropout_rate", body_main_cfg, pos_enc_dropout_rate),
    INT_P("pos_enc_max_len", body_main_cfg, pos_enc_max_len),
    BOOL_P("simplified_att_score", body_main_cfg, simplified_att_score),
    STR("norm_type", body_main_cfg, norm_type),
    STR("conv_mod_norm_type", body_main_cfg, conv_mod_norm_type),
    FLT_P("after_norm_eps", body_main_cfg, after_norm_eps),
    FLT_P("after_norm_partial", body_main_cfg, after_norm_partial),
    FLT_P("blockdrop_rate", body_main_cfg, blockdrop_rate),
    BOOL_P("dynamic_chunk_training", body_main_cfg, dynamic_chunk_training),
    FLT_P("short_chunk_threshold", body_main_cfg, short_chunk_threshold),
    INT_P("short_chunk_size", body_main_cfg, short_chunk_size),
    INT_P("num_left_chunks", body_main_cfg, num_left_chunks),
    FLT_P("ftswish_threshold", body_main_cfg, ftswish_threshold),
    FLT_P("ftswish_mean_shift", body_main_cfg, ftswish_mean_shift),
    FLT_P("hardtanh_min_val", body_main_cfg, hardtanh_min_val),
    FLT_P("hardtanh_max_val", body_main_cfg, hardtanh_max_val),
    FLT_P("leakyrelu_neg_slope", body_main_cfg, leakyrelu_neg_slope),
    FLT_P("smish_alpha", body_main_cfg, smish_alpha),
    FLT_P("smish_beta", body_main_cfg, smish_beta),
    FLT_P("softplus_beta", body_main_cfg, softplus_beta),
    FLT_P("softplus_threshold", body_main_cfg, softplus_threshold),
    FLT_P("swish_beta", body_main_cfg, swish_beta),
    CYAML_FIELD_END};

static const cyaml_schema_field_t encoder_conf_fields[] = {
    INT("output_size", encoder_conf_cfg, output_size),
    INT("attention_heads", encoder_conf_cfg, attention_heads),
    INT("linear_units", encoder_conf_cfg, linear_units),
    INT("num_blocks", encoder_conf_cfg, num_blocks),
    FLT("dropout_rate", encoder_conf_cfg, dropout_rate),
    FLT("positional_dropout_rate", encoder_conf_cfg, positional_dropout_rate),
    FLT("attention_dropout_rate", encoder_conf_cfg, attention_dropout_rate),
    STR("input_layer", encoder_conf_cfg, input_layer),
    BOOL_P("normalize_before", encoder_conf_cfg, normalize_before),
    BOOL_P("concat_after", encoder_conf_cfg, concat_after),
    STR("positionwise_layer_type", encoder_conf_cfg, positionwise_layer_type),
    INT_P("positionwise_conv_kernel_size", encoder_conf_cfg, positionwise_conv_kernel_size),
    STR("pos_enc_layer_type", encoder_conf_cfg, pos_enc_layer_type),
    INT_P("padding_idx", encoder_conf_cfg, padding_idx),
    SEQ("interctc_layer_idx", encoder_conf_cfg, interctc_layer_idx, &config_int_entry),
    BOOL_P("interctc_use_conditioning", encoder_conf_cfg, interctc_use_conditioning),
    FLT_P("layer_drop_rate", encoder_conf_cfg, layer_drop_rate),
    BOOL_P("qk_norm", encoder_conf_cfg, qk_norm),
    BOOL_P("macaron_style", encoder_conf_cfg, macaron_style),
    STR("rel_pos_type", encoder_conf_cfg, rel_pos_type),
    STR("selfattention_layer_type", encoder_conf_cfg, selfattention_layer_type),
    STR("activation_type", encoder_conf_cfg, activation_type),
    BOOL_P("use_cnn_module", encoder_conf_cfg, use_cnn_module),
    BOOL_P("zero_triu", encoder_conf_cfg, zero_triu),
    INT_P("cnn_module_kernel", encoder_conf_cfg, cnn_module_kernel),
    BOOL_P("ctc_trim", encoder_conf_cfg, ctc_trim),
    FLT_P("stochastic_depth_rate", encoder_conf_cfg, stochastic_depth_rate),
    INT_P("max_pos_emb_len", encoder_conf_cfg, max_pos_emb_len),
    STR("attention_layer_type", encoder_conf_cfg, attention_layer_type),
    INT_P("cgmlp_linear_units", encoder_conf_cfg, cgmlp_linear_units),
    INT_P("cgmlp_conv_kernel", encoder_conf_cfg, cgmlp_conv_kernel),
    BOOL_P("use_linear_after_conv", encoder_conf_cfg, use_linear_after_conv),
    STR("gate_activation", encoder_conf_cfg, gate_activation),
    BOOL_P("use_ffn", encoder_conf_cfg, use_ffn),
    BOOL_P("macaron_ffn", encoder_conf_cfg, macaron_ffn),
    STR("ffn_activation_type", encoder_conf_cfg, ffn_activation_type),
    INT_P("merge_conv_kernel", encoder_conf_cfg, merge_conv_kernel),
    INT_P("block_size", encoder_conf_cfg, block_size),
    INT_P("hop_size", encoder_conf_cfg, hop_size),
    INT_P("look_ahead", encoder_conf_cfg, look_ahead),
    BOOL_P("init_average", encoder_conf_cfg, init_average),
    BOOL_P("ctx_pos_enc", encoder_conf_cfg, ctx_pos_enc),
    SEQ("body_conf", encoder_conf_cfg, body_conf, &body_block_entry),
    MAP("input_conf", encoder_conf_cfg, input_conf, body_input_fields),
    MAP("main_conf", encoder_conf_cfg, main_conf, body_main_fields),
    CYAML_FIELD_END};

static const cyaml_schema_field_t decoder_conf_fields[] = {
    INT("attention_heads", decoder_conf_cfg, attention_heads),
    INT("linear_units", decoder_conf_cfg, linear_units),
    INT("num_blocks", decoder_conf_cfg, num_blocks),
    FLT("dropout_rate", decoder_conf_cfg, dropout_rate),
    FLT("positional_dropout_rate", decoder_conf_cfg, positional_dropout_rate),
    FLT("self_attention_dropout_rate", decoder_conf_cfg, self_attention_dropout_rate),
    FLT("src_attention_dropout_rate", decoder_conf_cfg, src_attention_dropout_rate),
    STR("input_layer", decoder_conf_cfg, input_layer),
    BOOL("use_output_layer", decoder_conf_cfg, use_output_layer),
    BOOL("normalize_before", decoder_conf_cfg, normalize_before),
    BOOL("concat_after", decoder_conf_cfg, concat_after),
    FLT("layer_drop_rate", decoder_conf_cfg, layer_drop_rate),
    BOOL("qk_norm", decoder_conf_cfg, qk_norm),
    STR("rnn_type", decoder_conf_cfg, rnn_type),
    INT("num_layers", decoder_conf_cfg, num_layers),
    INT("hidden_size", decoder_conf_cfg, hidden_size),
    FLT("dropout", decoder_conf_cfg, dropout),
    FLT("dropout_embed", decoder_conf_cfg, dropout_embed),
    INT_P("embed_size", decoder_conf_cfg, embed_size),
    FLT_P("embed_dropout_rate", decoder_conf_cfg, embed_dropout_rate),
    INT_P("embed_pad", decoder_conf_cfg, embed_pad),
    CYAML_FIELD_END};

static const cyaml_schema_field_t joint_net_conf_fields[] = {
    INT("joint_space_size", joint_net_conf_cfg, joint_space_size),
    STR("joint_activation_type", joint_net_conf_cfg, joint_activation_type),
    BOOL_P("lin_dec_bias", joint_net_conf_cfg, lin_dec_bias),
    CYAML_FIELD_END};

static const cyaml_schema_field_t ctc_conf_fields[] = {
    FLT("dropout_rate", ctc_conf_cfg, dropout_rate),
    BOOL("reduce", ctc_conf_cfg, reduce),
    BOOL("ignore_nan_grad", ctc_conf_cfg, ignore_nan_grad),
    BOOL("zero_infinity", ctc_conf_cfg, zero_infinity),
    CYAML_FIELD_END};

static const cyaml_schema_field_t model_conf_fields[] = {
    FLT("ctc_weight", model_conf_cfg, ctc_weight),
    FLT("lsm_weight", model_conf_cfg, lsm_weight),
    BOOL("length_normalized_loss", model_conf_cfg, length_normalized_loss),
    FLT("interctc_weight", model_conf_cfg, interctc_weight),
    BOOL_P("extract_feats_in_collect_stats", model_conf_cfg, extract_feats_in_collect_stats),
    FLT_P("transducer_weight", model_conf_cfg, transducer_weight),
    FLT_P("auxiliary_ctc_weight", model_conf_cfg, auxiliary_ctc_weight),
    FLT_P("auxiliary_ctc_dropout_rate", model_conf_cfg, auxiliary_ctc_dropout_rate),
    FLT_P("auxiliary_lm_loss_weight", model_conf_cfg, auxiliary_lm_loss_weight),
    FLT_P("auxiliary_lm_loss_smoothing", model_conf_cfg, auxiliary_lm_loss_smoothing),
    FLT_P("fastemit_lambda", model_conf_cfg, fastemit_lambda),
    BOOL_P("use_k2_pruned_loss", model_conf_cfg, use_k2_pruned_loss),
    INT_P("warmup_steps", model_conf_cfg, warmup_steps),
    INT_P("validation_nstep", model_conf_cfg, validation_nstep),
    BOOL_P("report_cer", model_conf_cfg, report_cer),
    BOOL_P("report_wer", model_conf_cfg, report_wer),
    STR("sym_space", model_conf_cfg, sym_space),
    STR("sym_blank", model_conf_cfg, sym_blank),
    IGNORED("k2_pruned_loss_args"), /* only with use_k2_pruned_loss, which is refused */
    CYAML_FIELD_END};

static const cyaml_schema_field_t lm_conf_fields[] = {
    STR("pos_enc", lm_conf_cfg, pos_enc),
    INT("embed_unit", lm_conf_cfg, embed_unit),
    INT("att_unit", lm_conf_cfg, att_unit),
    INT("head", lm_conf_cfg, head),
    INT("unit", lm_conf_cfg, unit),
    INT("layer", lm_conf_cfg, layer),
    FLT("dropout_rate", lm_conf_cfg, dropout_rate),
    FLT("positional_dropout_rate", lm_conf_cfg, positional_dropout_rate),
    FLT("attention_dropout_rate", lm_conf_cfg, attention_dropout_rate),
    INT("nhid", lm_conf_cfg, nhid),
    INT("nlayers", lm_conf_cfg, nlayers),
    STR("rnn_type", lm_conf_cfg, rnn_type),
    BOOL("tie_weights", lm_conf_cfg, tie_weights),
    INT("ignore_id", lm_conf_cfg, ignore_id),
    CYAML_FIELD_END};

static const cyaml_schema_field_t model_fields[] = {
    STR("_target_", model_cfg, target),
    STR("model", model_cfg, model),
    INT("vocab_size", model_cfg, vocab_size),
    STR("token_list", model_cfg, token_list),
    STR("frontend", model_cfg, frontend),
    MAP("frontend_conf", model_cfg, frontend_conf, frontend_conf_fields),
    STR("specaug", model_cfg, specaug),
    MAP("specaug_conf", model_cfg, specaug_conf, specaug_conf_fields),
    STR("preencoder", model_cfg, preencoder),
    MAP("preencoder_conf", model_cfg, preencoder_conf, preencoder_conf_fields),
    STR_OR_NONE("normalize", model_cfg, normalize),
    MAP("normalize_conf", model_cfg, normalize_conf, normalize_conf_fields),
    STR("encoder", model_cfg, encoder),
    MAP("encoder_conf", model_cfg, encoder_conf, encoder_conf_fields),
    STR("decoder", model_cfg, decoder),
    MAP("decoder_conf", model_cfg, decoder_conf, decoder_conf_fields),
    MAP("joint_net_conf", model_cfg, joint_net_conf, joint_net_conf_fields),
    MAP("joint_network_conf", model_cfg, joint_network_conf, joint_net_conf_fields),
    MAP("ctc_conf", model_cfg, ctc_conf, ctc_conf_fields),
    MAP("model_conf", model_cfg, model_conf, model_conf_fields),
    STR("lm", model_cfg, lm),
    MAP("lm_conf", model_cfg, lm_conf, lm_conf_fields),
    CYAML_FIELD_END};

static const cyaml_schema_field_t optimizer_fields[] = {
    STR("_target_", optimizer_cfg, target),
    FLT("lr", optimizer_cfg, lr),
    PAIR("betas", optimizer_cfg, betas, &float_entry),
    FLT("eps", optimizer_cfg, eps),
    FLT("weight_decay", optimizer_cfg, weight_decay),
    BOOL("amsgrad", optimizer_cfg, amsgrad),
    BOOL("decoupled_weight_decay", optimizer_cfg, decoupled_weight_decay),
    FLT("momentum", optimizer_cfg, momentum),
    FLT("dampening", optimizer_cfg, dampening),
    BOOL("nesterov", optimizer_cfg, nesterov),
    FLT("rho", optimizer_cfg, rho),
    BOOL("maximize", optimizer_cfg, maximize),
    BOOL("foreach", optimizer_cfg, foreach),
    BOOL("fused", optimizer_cfg, fused),
    BOOL("capturable", optimizer_cfg, capturable),
    BOOL("differentiable", optimizer_cfg, differentiable),
    CYAML_FIELD_END};

static const cyaml_schema_field_t scheduler_fields[] = {
    STR("_target_", scheduler_cfg, target),
    INT("warmup_steps", scheduler_cfg, warmup_steps),
    FLT("factor", scheduler_cfg, factor),
    INT("total_iters", scheduler_cfg, total_iters),
    INT("step_size", scheduler_cfg, step_size),
    FLT("gamma", scheduler_cfg, gamma),
    FLT("start_factor", scheduler_cfg, start_factor),
    FLT("end_factor", scheduler_cfg, end_factor),
    INT("T_max", scheduler_cfg, T_max),
    FLT("eta_min", scheduler_cfg, eta_min),
    FLT("model_size", scheduler_cfg, model_size),
    SEQ("milestones", scheduler_cfg, milestones, &config_int_entry),
    FLT("power", scheduler_cfg, power),
    INT("T_0", scheduler_cfg, T_0),
    INT("T_mult", scheduler_cfg, T_mult),
    STR("mode", scheduler_cfg, mode),
    INT("patience", scheduler_cfg, patience),
    FLT("threshold", scheduler_cfg, threshold),
    STR("threshold_mode", scheduler_cfg, threshold_mode),
    INT("cooldown", scheduler_cfg, cooldown),
    FLT("min_lr", scheduler_cfg, min_lr),
    FLT("eps", scheduler_cfg, eps),
    FLT("max_lr", scheduler_cfg, max_lr),
    INT("total_steps", scheduler_cfg, total_steps),
    INT("epochs", scheduler_cfg, epochs),
    INT("steps_per_epoch", scheduler_cfg, steps_per_epoch),
    FLT("pct_start", scheduler_cfg, pct_start),
    STR("anneal_strategy", scheduler_cfg, anneal_strategy),
    BOOL("cycle_momentum", scheduler_cfg, cycle_momentum),
    FLT("base_momentum", scheduler_cfg, base_momentum),
    FLT("max_momentum", scheduler_cfg, max_momentum),
    FLT("div_factor", scheduler_cfg, div_factor),
    FLT("final_div_factor", scheduler_cfg, final_div_factor),
    BOOL("three_phase", scheduler_cfg, three_phase),
    SEQ("warmup_steps_list", scheduler_cfg, warmup_steps_list, &float_entry),
    SEQ("warmup_lr_list", scheduler_cfg, warmup_lr_list, &float_entry),
    INT("first_cycle_steps", scheduler_cfg, first_cycle_steps),
    FLT("cycle_mult", scheduler_cfg, cycle_mult),
    BOOL("warm_from_zero", scheduler_cfg, warm_from_zero),
    FLT("max_steps", scheduler_cfg, max_steps),
    FLT("warmup_ratio", scheduler_cfg, warmup_ratio),
    FLT("hold_ratio", scheduler_cfg, hold_ratio),
    FLT("decay_ratio", scheduler_cfg, decay_ratio),
    FLT("init_lr_scale", scheduler_cfg, init_lr_scale),
    FLT("final_lr_scale", scheduler_cfg, final_lr_scale),
    CYAML_FIELD_END};

static const cyaml_schema_field_t criterion_fields[] = {
    STR("monitor", criterion_cfg, monitor),
    INT("nbest", criterion_cfg, nbest),
    STR("mode", criterion_cfg, mode),
    CYAML_FIELD_END};
static const cyaml_schema_value_t criterion_entry = {CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, criterion_cfg, criterion_fields)};

static const cyaml_schema_field_t fit_fields[] = {
    STR("ckpt_path", fit_cfg, ckpt_path),
    BOOL("weights_only", fit_cfg, weights_only),
    CYAML_FIELD_END};

static const cyaml_schema_field_t training_fields[] = {
    INT("num_device", training_cfg, num_device),
    INT("num_nodes", training_cfg, num_nodes),
    STR("task", training_cfg, task),
    RUN_DIR_FIELDS(training_cfg),
    INT("seed", training_cfg, seed),
    STR("init", training_cfg, init),
    SEQ("init_param", training_cfg, init_param, &config_string_entry),
    BOOL("ignore_init_mismatch", training_cfg, ignore_init_mismatch),
    MAP("create_dataset", training_cfg, create_dataset, create_dataset_fields),
    MAP("dataset", training_cfg, dataset, dataset_fields),
    MAP("tokenizer", training_cfg, tokenizer, tokenizer_fields),
    MAP("trainer", training_cfg, trainer, trainer_fields),
    MAP("parallel", training_cfg, parallel, parallel_fields),
    MAP("dataloader", training_cfg, dataloader, dataloader_fields),
    MAP("model", training_cfg, model, model_fields),
    MAP("optimizer", training_cfg, optimizer, optimizer_fields),
    MAP("scheduler", training_cfg, scheduler, scheduler_fields),
    STR("scheduler_interval", training_cfg, scheduler_interval),
    STR("scheduler_monitor", training_cfg, scheduler_monitor),
    STR("python", training_cfg, python),
    BOOL("collect_stats_train_mode", training_cfg, collect_stats_train_mode),
    SEQ("best_model_criterion", training_cfg, best_model_criterion, &criterion_entry),
    SEQ("speed_perturb_factors", training_cfg, speed_perturb_factors, &float_entry),
    STR("token_type", training_cfg, token_type),
    STR("bpemodel", training_cfg, bpemodel),
    MAP("fit", training_cfg, fit, fit_fields),
    CYAML_FIELD_END};

static const cyaml_schema_field_t target_fields[] = {
    STR("_target_", target_cfg, target),
    CYAML_FIELD_END};

static const cyaml_schema_field_t transducer_conf_fields[] = {
    STR("search_type", transducer_conf_cfg, search_type),
    INT_P("max_sym_exp", transducer_conf_cfg, max_sym_exp),
    INT_P("u_max", transducer_conf_cfg, u_max),
    INT_P("nstep", transducer_conf_cfg, nstep),
    INT_P("prefix_alpha", transducer_conf_cfg, prefix_alpha),
    FLT_P("expansion_gamma", transducer_conf_cfg, expansion_gamma),
    INT_P("expansion_beta", transducer_conf_cfg, expansion_beta),
    BOOL_P("score_norm", transducer_conf_cfg, score_norm),
    BOOL_P("score_norm_during", transducer_conf_cfg, score_norm_during),
    INT_P("nbest", transducer_conf_cfg, nbest),
    CYAML_FIELD_END};

static const cyaml_schema_field_t infer_model_fields[] = {
    STR("_target_", infer_model_cfg, target),
    STR("asr_train_config", infer_model_cfg, asr_train_config),
    STR("asr_model_file", infer_model_cfg, asr_model_file),
    STR("device", infer_model_cfg, device),
    INT("beam_size", infer_model_cfg, beam_size),
    FLT("penalty", infer_model_cfg, penalty),
    FLT("ctc_weight", infer_model_cfg, ctc_weight),
    FLT("lm_weight", infer_model_cfg, lm_weight),
    STR("lm_train_config", infer_model_cfg, lm_train_config),
    STR("lm_file", infer_model_cfg, lm_file),
    INT("nbest", infer_model_cfg, nbest),
    FLT("maxlenratio", infer_model_cfg, maxlenratio),
    FLT("minlenratio", infer_model_cfg, minlenratio),
    INT("batch_size", infer_model_cfg, batch_size),
    STR("token_type", infer_model_cfg, token_type),
    STR("bpemodel", infer_model_cfg, bpemodel),
    MAP("transducer_conf", infer_model_cfg, transducer_conf, transducer_conf_fields),
    MAP("beam_search_config", infer_model_cfg, beam_search_config, transducer_conf_fields),
    BOOL("streaming", infer_model_cfg, streaming),
    INT("decoding_window", infer_model_cfg, decoding_window),
    INT("left_context", infer_model_cfg, left_context),
    CYAML_FIELD_END};

static const cyaml_schema_field_t longform_fields[] = {
    BOOL("enabled", longform_cfg, enabled),
    FLT("window", longform_cfg, window),
    FLT("overlap", longform_cfg, overlap),
    FLT("threshold", longform_cfg, threshold),
    CYAML_FIELD_END};

static const cyaml_schema_field_t inference_fields[] = {
    RUN_DIR_FIELDS(inference_cfg),
    STR("infer_dir", inference_cfg, infer_dir),
    STR("decode_dir", inference_cfg, decode_dir),
    SEQ("test_sets", inference_cfg, test_sets, &config_string_entry),
    MAP("dataset", inference_cfg, dataset, dataset_fields),
    MAP("model", inference_cfg, model, infer_model_fields),
    STR("input_key", inference_cfg, input_key),
    STR("output_fn", inference_cfg, output_fn),
    MAP("provider", inference_cfg, provider, target_fields),
    MAP("runner", inference_cfg, runner, target_fields),
    MAP("parallel", inference_cfg, parallel, parallel_fields),
    STR("python", inference_cfg, python),
    INT("batch_size", inference_cfg, batch_size),
    STR("idx_key", inference_cfg, idx_key),
    SEQ("output_keys", inference_cfg, output_keys, &config_string_entry),
    MAP("longform", inference_cfg, longform, longform_fields),
    BOOL("write_ctm", inference_cfg, write_ctm),
    CYAML_FIELD_END};

static const cyaml_schema_field_t metric_input_fields[] = {
    STR("alias", metric_input_cfg, alias),
    STR("file", metric_input_cfg, file),
    CYAML_FIELD_END};
static const cyaml_schema_value_t metric_input_entry = {
    CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, metric_input_cfg, metric_input_fields)};

static const cyaml_schema_field_t metric_fields[] = {
    STR("_target_", metric_cfg, target),
    STR("ref_key", metric_cfg, ref_key),
    STR("hyp_key", metric_cfg, hyp_key),
    SEQ("inputs", metric_cfg, inputs, &metric_input_entry),
    SEQ("apply_to", metric_cfg, apply_to, &config_string_entry),
    STR("bpemodel", metric_cfg, bpemodel),
    SEQ("clean_types", metric_cfg, clean_types, &config_string_entry),
    CYAML_FIELD_END};
static const cyaml_schema_value_t metric_entry = {CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, metric_cfg, metric_fields)};

static const cyaml_schema_field_t metrics_fields[] = {
    RUN_DIR_FIELDS(metrics_cfg),
    STR("infer_dir", metrics_cfg, infer_dir),
    STR("decode_dir", metrics_cfg, decode_dir),
    SEQ("test_sets", metrics_cfg, test_sets, &config_string_entry),
    MAP("dataset", metrics_cfg, dataset, dataset_fields),
    SEQ("metrics", metrics_cfg, metrics, &metric_entry),
    MAP("parallel", metrics_cfg, parallel, parallel_fields),
    CYAML_FIELD_END};

/* ESPnet3's publication.yaml (stages/publish.c). */
static const cyaml_schema_field_t pack_model_fields[] = {
    STR("out_dir", pack_model_cfg, out_dir),
    STR("inference_dir", pack_model_cfg, inference_dir),
    STR("readme", pack_model_cfg, readme),
    SEQ("include", pack_model_cfg, include, &config_string_entry),
    SEQ("exclude", pack_model_cfg, exclude, &config_string_entry),
    /* name -> path maps and README values, read from the tree by stages/publish.c */
    IGNORED("files"),
    IGNORED("yaml_files"),
    IGNORED("readme_context"),
    CYAML_FIELD_END};

static const cyaml_schema_field_t upload_fields[] = {
    STR("hf_repo", upload_cfg, hf_repo),
    STR("organization", upload_cfg, organization),
    BOOL("update", upload_cfg, update),
    SEQ("delete_patterns", upload_cfg, delete_patterns, &config_string_entry),
    CYAML_FIELD_END};

static const cyaml_schema_field_t publication_fields[] = {
    STR("recipe_dir", publication_cfg, recipe_dir),
    STR("exp_tag", publication_cfg, exp_tag),
    STR("exp_dir", publication_cfg, exp_dir),
    STR("inference_dir", publication_cfg, inference_dir),
    STR("data_dir", publication_cfg, data_dir),
    MAP("pack_model", publication_cfg, pack_model, pack_model_fields),
    MAP("upload_model", publication_cfg, upload_model, upload_fields),
    CYAML_FIELD_END};

/* ESPnet3's demo.yaml (stages/pack_demo.c). */
static const cyaml_schema_field_t demo_model_fields[] = {
    STR("dir_or_tag", demo_model_cfg, dir_or_tag),
    BOOL("trust_user_code", demo_model_cfg, trust_user_code),
    IGNORED("call_args"), /* keyword arguments of a Python model call: read from the tree */
    CYAML_FIELD_END};

static const cyaml_schema_field_t demo_io_fields[] = {
    STR("key", demo_io_cfg, key),
    STR("type", demo_io_cfg, type),
    STR("label", demo_io_cfg, label),
    CYAML_FIELD_END};
static const cyaml_schema_value_t demo_io_entry = {CYAML_VALUE_MAPPING(CYAML_FLAG_DEFAULT, demo_io_cfg, demo_io_fields)};

static const cyaml_schema_field_t demo_ui_fields[] = {
    STR("app_script", demo_ui_cfg, app_script),
    STR("title", demo_ui_cfg, title),
    STR("description", demo_ui_cfg, description),
    SEQ("inputs", demo_ui_cfg, inputs, &demo_io_entry),
    SEQ("outputs", demo_ui_cfg, outputs, &demo_io_entry),
    CYAML_FIELD_END};

static const cyaml_schema_field_t demo_pack_fields[] = {
    STR("out_dir", demo_pack_cfg, out_dir),
    SEQ("include", demo_pack_cfg, include, &config_string_entry),
    SEQ("exclude", demo_pack_cfg, exclude, &config_string_entry),
    SEQ("requirements", demo_pack_cfg, requirements, &config_string_entry),
    STR("readme", demo_pack_cfg, readme),
    IGNORED("readme_context"),
    CYAML_FIELD_END};

static const cyaml_schema_field_t demo_fields[] = {
    STR("recipe_dir", demo_cfg, recipe_dir),
    STR("exp_tag", demo_cfg, exp_tag),
    STR("exp_dir", demo_cfg, exp_dir),
    MAP("model", demo_cfg, model, demo_model_fields),
    MAP("ui", demo_cfg, ui, demo_ui_fields),
    MAP("pack", demo_cfg, pack, demo_pack_fields),
    MAP("upload_demo", demo_cfg, upload_demo, upload_fields),
    CYAML_FIELD_END};

static const cyaml_schema_value_t top_schemas[CONFIG_KIND_COUNT] = {
    {CYAML_VALUE_MAPPING(CYAML_FLAG_POINTER, training_cfg, training_fields)},
    {CYAML_VALUE_MAPPING(CYAML_FLAG_POINTER, inference_cfg, inference_fields)},
    {CYAML_VALUE_MAPPING(CYAML_FLAG_POINTER, metrics_cfg, metrics_fields)},
    {CYAML_VALUE_MAPPING(CYAML_FLAG_POINTER, publication_cfg, publication_fields)},
    {CYAML_VALUE_MAPPING(CYAML_FLAG_POINTER, demo_cfg, demo_fields)},
};

const cyaml_schema_value_t *config_schema(config_kind kind) { return &top_schemas[kind]; }

