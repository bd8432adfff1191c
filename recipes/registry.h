/* Registry of the recipes: their dataset builders, which stage 1 (create_dataset) selects with
 * `create_dataset.func`, and their own keys of create_dataset (core/config/config_recipe.h). Names
 * are the Python module paths ESPnet3 configs use, plus a short alias (the recipe's). */
#ifndef ESPNET3_DATASET_BUILDERS_H
#define ESPNET3_DATASET_BUILDERS_H

#include "core/base/log.h"
#include "core/config/config_recipe.h"
#include "core/config/config_types.h"
#include "recipes/keys.h" /* recipes_all: every recipe's names and keys */

/* Builds the dataset described by cfg (cfg->keys: the recipe's own keys, its struct): audio under
 * cfg->dataset_dir, manifests under data_dir. */
typedef int (*dataset_builder_fn)(const create_dataset_cfg *cfg, const char *data_dir, esp_err *err);

typedef struct dataset_builder {
    const config_recipe *recipe; /* its names and keys */
    dataset_builder_fn build;
} dataset_builder;

/* Looks a builder up by full or short name; NULL when unknown. */
const dataset_builder *dataset_builder_find(const char *name);
/* The builder of a recipe; NULL when it has none. */
const dataset_builder *dataset_builder_of(const config_recipe *r);
/* "a (alias a1), b (alias b1)" for error messages; caller frees. */
char *dataset_builder_names(void);

/* ESPnet3 recipes' own Python functions that our built-in recipes carry in C: used when the recipe
 * folder has no Python file for them (tokenizer.text_builder.func). kwargs_json holds the block's
 * other keys, data_dir is the training config's; the strings go to *texts (caller frees each and
 * the array). */
typedef int (*text_builder_fn)(const char *kwargs_json, const char *data_dir, char ***texts, size_t *n_texts,
                               esp_err *err);

typedef struct text_builder {
    const char *name; /* the dotted path ESPnet3's configs name */
    text_builder_fn build;
} text_builder;

const text_builder *text_builder_find(const char *name);

/* src.tokenizer.gather_training_text of ESPnet3's mini_an4 (manifest_path: that manifest's
 * transcripts) and librispeech_100 (split: the transcripts of that LibriSpeech split, which our
 * builder wrote as ${data_dir}/manifest/<split>.tsv); recipes/gather_text.c. */
int recipes_gather_training_text(const char *kwargs_json, const char *data_dir, char ***texts, size_t *n_texts,
                                 esp_err *err);

/* Whether an inference output_fn is ESPnet3's recipes' own src/inference one ({utt_id, hyp: the best
 * text, ref: the reference}), which stage 6's hyp.scp and ref.scp already are: our built-in
 * recipes, which have no src/ folder, need no Python for it. */
int recipes_output_fn_is_builtin(const char *func);

/* The builders, one per recipe (recipes/<name>/builder.c). */
int espeak_fortunes_create_dataset(const create_dataset_cfg *cfg, const char *data_dir, esp_err *err);
int mini_an4_create_dataset(const create_dataset_cfg *cfg, const char *data_dir, esp_err *err);
int librispeech_100_create_dataset(const create_dataset_cfg *cfg, const char *data_dir, esp_err *err);

#endif
