/* What a model path given to the library (or `espnet3 transcribe MODEL`) names, as the `model:` block
 * of an inference config that core/nn/model_files.h locates:
 *   a pack folder (stage 8's model_pack/: conf/inference.yaml)  its inference config, as written
 *   a zip of a pack folder                                      unpacked into a private folder first
 *   an ESPnet2 packed model zip (meta.yaml at its root)         asr_train_config and asr_model_file: the zip
 *   an experiment folder (config.yaml)                          config.yaml and its best weights
 * The weights of an experiment folder are the first found of valid.loss.ave, valid.acc.ave, last,
 * latest (each as model_file_resolve reads ESPnet's names: .safetensors, checkpoint folder, .pth).
 * A language model (--lm) is an LM's experiment folder or a pack that holds one (lm/). */
#ifndef ESPNET3_LIB_MODEL_SOURCE_H
#define ESPNET3_LIB_MODEL_SOURCE_H

#include "core/config/config.h"

typedef struct model_source {
    const inference_cfg *icfg; /* the config model_files_locate reads: cfg's, or own */
    const char *name;          /* the config's name in messages */
    esp_config *cfg;           /* a pack's conf/inference.yaml (NULL for the other forms) */
    inference_cfg own;
    infer_model_cfg own_model;
    char *strings[4];          /* own_model's paths; [2..3] the LM's (model_source_add_lm) */
    char *lm_orig[2];          /* a pack config's own lm_train_config / lm_file, put back by free */
    char *unpacked;            /* a pack zip's private copy (removed by model_source_free) */
} model_source;

/* The ASR model at path. */
int model_source_open(model_source *ms, const char *path, esp_err *err);
/* An LM at path into ms's model block (lm_train_config, lm_file), for lm_files_locate. */
int model_source_add_lm(model_source *ms, const char *path, esp_err *err);
void model_source_free(model_source *ms);

#endif
