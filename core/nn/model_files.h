/* A trained model as decoding finds it: the training config stage 5 wrote (ESPnet's
 * asr_train_config), the weights file (asr_model_file), the token list and the feature
 * statistics that config names, and loading the weights into an asr_model.
 *
 * asr_model_file accepts what stage 5 writes and the names an ESPnet user types:
 *   a .safetensors file                       exp/x/valid.loss.ave_3best.safetensors
 *   a checkpoint directory                    exp/x/last, exp/x/checkpoints/epoch=3-step=90
 *   ESPnet's names of them                    valid.loss.ave_3best.pth, valid.loss.ave.pth,
 *                                             last.ckpt, valid.loss.best (no extension)
 *   ESPnet3's checkpoint files                epoch0_step90_valid.loss.ckpt (core/train/checkpoint.h)
 *   PyTorch files from elsewhere              a .pth state dict, a Lightning .ckpt
 * A name ending in .pth/.ckpt/.pt is tried first as our form of the same model (.safetensors in its
 * place, then a directory holding model.safetensors), then as the file itself; any name also with
 * .safetensors added. A relative name not found from the working directory is looked up in exp_dir. */
#ifndef ESPNET3_MODEL_FILES_H
#define ESPNET3_MODEL_FILES_H

#include "core/config/config.h"
#include "core/base/log.h"
#include "core/formats/safetensors.h"
#include "core/nn/espnet2_config.h"
#include "core/nn/model.h"
#include "core/data/tokenizer.h"

typedef struct model_files {
    esp_config *train_cfg;   /* the loaded training config (typed: training_cfg) */
    char *train_config_path;
    char *weights;           /* resolved weights: .safetensors, or a PyTorch .pth / .ckpt */
    char *tokens;            /* ${tokenizer.save_path}/tokens.txt of the training config */
    token_type token_type;   /* how the tokens map to text (tokenizer_spec_resolve) */
    char *bpemodel;          /* TOKEN_TYPE_BPE: the SentencePiece model, else NULL */
    char *stats;             /* model.normalize_conf.stats_file (global_mvn), else NULL */
    char *converted_dir;     /* an ESPnet2 asr_train_config: espnet3's reading of it (removed by free) */
    espnet2_tokens_origin tokens_origin; /* ... and where its copied tokens.txt came from */
    char *unpacked_dir;      /* an ESPnet2 packed model zip as asr_train_config: unpacked (removed by free) */
    char *zip;               /* that zip, as messages name it */
} model_files;

static inline const training_cfg *model_files_training(const model_files *f)
{
    return (const training_cfg *)f->train_cfg->typed;
}

/* Resolves asr_model_file as described above; the error lists the paths tried. */
int model_file_resolve(const char *given, const char *exp_dir, char **out, esp_err *err);

/* Loads asr_train_config (espnet3's, or ESPnet2's config.yaml or packed model zip, whose weights are
 * used when asr_model_file is absent or names the zip too: core/nn/espnet2_config.h) and resolves the other files of an inference config's `model:` block
 * (cfg_file names the inference config in messages). Checks that each exists. */
int model_files_locate(model_files *f, const inference_cfg *icfg, const char *cfg_file, esp_err *err);
/* The language model of an inference config for shallow fusion (model.lm_train_config: the
 * training config stage 5 wrote for an LM task; model.lm_file: its weights, resolved as
 * asr_model_file, relative names also in the LM's exp_dir) and the token list its config names. */
int lm_files_locate(model_files *f, const inference_cfg *icfg, const char *cfg_file, esp_err *err);
void model_files_free(model_files *f);
/* Rewrites the private copies in err's message as what the user has, not a folder removed by the
 * time the message is read: an ESPnet2 config's copied tokens.txt (line N) as its token_list file
 * (line N) or the inline list's item (config.yaml:line:col), and each path into an unpacked zip as
 * "<zip>(<entry>)" (its token list, statistics, weights). */
void model_files_show_err(const model_files *f, esp_err *err);

/* The tensors of a model state (table.state_total host floats, core/nn/model_params.h's layout) for
 * a safetensors file, one per table entry into out (table.n): parameters and BatchNorm buffers as
 * F32, num_batches_tracked as an I64 scalar (its value kept in counts, table.n entries), as
 * ESPnet's state dict has them. */
void model_state_tensors(const param_table *t, const float *state, int64_t *counts, st_tensor *out);
/* Entry p's value from tensor `name` of f into dst (p->count floats): F32 of p's shape, or for a
 * counter an integer or float scalar. Errors name the file, the tensor and what was found. */
int model_tensor_get(const st_file *f, const char *name, const param_info *p, float *dst, esp_err *err);

/* Opens a weights file: a PyTorch checkpoint (.pth state dict, Lightning .ckpt; core/formats/
 * torch_zip.h) when it is a zip, else safetensors. */
int model_weights_open(const char *path, st_file *out, esp_err *err);

/* Copies the weights of a safetensors file or PyTorch checkpoint into m->params. Names may carry ESPnet3's "model."
 * prefix; every parameter and buffer must be present once with its shape and dtype F32 (counters:
 * an integer scalar). Tensors that are not
 * parameters of this model (e.g. an attention decoder's) are skipped with one warning. */
int asr_model_load_weights(asr_model *m, const char *path, esp_err *err);

/* ESPnet's init_param entry "path[:src_key[:dst_key[:exclude,...]]]" (load_pretrained_model) into a
 * model state (t->state_total host floats): the file's tensors (safetensors, .pth, Lightning .ckpt)
 * whose names start with an exclude prefix are dropped; with src_key only those under "src_key."
 * are kept, that prefix removed; with dst_key the rest is "dst_key."-prefixed. Each remaining
 * tensor must be a parameter or buffer of the model (names as param_find_alias reads them; ESPnet's
 * frontend / normalize buffers are skipped) with its shape, else an error naming it; with
 * ignore_mismatch (ESPnet's ignore_init_mismatch) shape mismatches are skipped with a warning.
 * *n_loaded gets the number of tensors taken. */
int model_init_param(const param_table *t, float *state, const char *spec, int ignore_mismatch, size_t *n_loaded,
                     esp_err *err);

#endif
