/* ESPnet2's training config (the config.yaml beside an ESPnet2 model: top-level encoder,
 * encoder_conf, decoder, frontend_conf, normalize_conf.stats_file, token_list inline or as a file,
 * token_type, bpemodel, model: espnet ...) read as an asr_train_config: it is rewritten into
 * espnet3's form (its model keys under `model:`, the token list as tokens.txt under
 * `tokenizer.save_path` in a private folder, token_type and bpemodel as they are) as a tree in
 * memory, which the normal config loader then checks (config_load_tree). Its nodes keep the
 * places they were read from, so every message points at the user's config.yaml, line and
 * column. ESPnet's relative paths (stats_file, bpemodel, a token_list file) are tried from the
 * working directory, as ESPnet does, and then from the folder two levels above the config (the
 * root of an ESPnet2 packed model: exp/<name>/config.yaml). */
#ifndef ESPNET3_ESPNET2_CONFIG_H
#define ESPNET3_ESPNET2_CONFIG_H

#include "core/base/log.h"
#include "core/config/yamltree.h"

/* Where the converted config's tokens.txt came from, so that a reader's "<dir>/tokens/tokens.txt:N"
 * can name the user's place instead: token_list named a file (tokens.txt is its byte copy: line N
 * is the file's line N), or was a list inline (line N is item N - 1, at marks[N - 1]). */
typedef struct espnet2_tokens_origin {
    char *file;     /* the token_list file, or NULL */
    ymark *marks;   /* the inline list's items (their file as messages name it), or NULL */
    size_t n;
} espnet2_tokens_origin;
void espnet2_tokens_origin_free(espnet2_tokens_origin *o);

/* 0: `path` is not an ESPnet2 config (nothing written). 1: it is; *out_tree is espnet3's form of
 * it (for config_load_tree, which takes it), its places named `shown_as` when not NULL (a config
 * unpacked from a packed model: "model.zip(exp/asr_train/config.yaml)"), *out_dir a new folder
 * holding its token list as tokens/tokens.txt (tmpdir_remove it when done) and, when origin is not
 * NULL, where that list came from. -1: error. */
int espnet2_config_convert(const char *path, const char *shown_as, char **out_dir, ynode **out_tree,
                           espnet2_tokens_origin *origin, esp_err *err);

/* An ESPnet2 packed model zip (meta.yaml naming yaml_files.asr_train_config and
 * files.asr_model_file): unpacked into a new folder *out_dir (tmpdir_remove it when done);
 * *out_config and *out_model are the unpacked config and weights. */
int espnet2_pack_unpack(const char *zip, char **out_dir, char **out_config, char **out_model, esp_err *err);

#endif
