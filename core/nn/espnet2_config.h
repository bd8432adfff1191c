/* ESPnet2's training config (the config.yaml beside an ESPnet2 model: top-level encoder,
 * encoder_conf, decoder, frontend_conf, normalize_conf.stats_file, token_list inline or as a file,
 * token_type, bpemodel, model: espnet ...) read as an asr_train_config: it is rewritten into
 * espnet3's form (its model keys under `model:`, the token list as tokens.txt under
 * `tokenizer.save_path`, token_type and bpemodel as they are) in a private folder, which the normal
 * config loader then reads with every check. ESPnet's relative paths (stats_file, bpemodel, a
 * token_list file) are tried from the working directory, as ESPnet does, and then from the folder
 * two levels above the config (the root of an ESPnet2 packed model: exp/<name>/config.yaml). */
#ifndef ESPNET3_ESPNET2_CONFIG_H
#define ESPNET3_ESPNET2_CONFIG_H

#include "core/base/log.h"

/* 0: `path` is not an ESPnet2 config (nothing written). 1: it is; *out_dir is a new folder
 * (remove_tree it when done) and *out_config the espnet3 config in it. -1: error. */
int espnet2_config_convert(const char *path, char **out_dir, char **out_config, esp_err *err);

/* An ESPnet2 packed model zip (meta.yaml naming yaml_files.asr_train_config and
 * files.asr_model_file): unpacked into a new folder *out_dir (remove_tree it when done);
 * *out_config and *out_model are the unpacked config and weights. */
int espnet2_pack_unpack(const char *zip, char **out_dir, char **out_config, char **out_model, esp_err *err);

#endif
