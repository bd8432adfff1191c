/* What of a config the recipe's own Python receives: whether a dataset entry or create_dataset is
 * Python (the recipe's dataset/ package, a <recipe>/<task> tag, a module or class path), and the
 * free-form blocks it is called with (data_src_args, create_dataset, tokenizer.text_builder) as
 * JSON, attached to the typed config after loading. The running is core/data/py_export.c's. */
#ifndef ESPNET3_CONFIG_PYTHON_H
#define ESPNET3_CONFIG_PYTHON_H

#include "core/config/config.h"

/* The recipe folder a config's Python runs in: dataset.recipe_dir, else recipe_dir, else ".". */
const char *config_python_recipe_dir(const ynode *root);

/* Whether a tag "<recipe>/<task>" names the recipe in recipe_dir (its path ends in <recipe>/<task>
 * as in ESPnet3's egs3 layout, or in <recipe> as recipes/<recipe>); '-' counts as '_'. */
int config_tag_is_recipe(const char *tag, const char *recipe_dir);

/* Whether a dataset entry's items come from Python: data_src left out or a tag of this recipe
 * with <recipe_dir>/dataset/__init__.py there, a tag of another recipe of the same egs3 tree with
 * its dataset/__init__.py, or a dotted module or class path. */
int config_data_src_is_python(const char *data_src, const char *recipe_dir);

/* Whether create_dataset runs Python: a dotted func outside espnet3.recipes.*, or no func and the
 * recipe's dataset/ package (ESPnet3's DatasetBuilder lifecycle). */
int config_create_dataset_is_python(const char *func, const char *recipe_dir);

/* Whether the module of a dotted function path (its last part dropped) is a file or package in
 * recipe_dir, as Python imports it from there: src.tokenizer.f -> src/tokenizer.py or
 * src/tokenizer/__init__.py. */
int config_function_in_recipe(const char *func, const char *recipe_dir);

/* A subtree as JSON text, scalars typed as OmegaConf reads them (quoted: string); caller frees. */
char *config_tree_json(const ynode *n, const char *drop_key);

/* Fills the non-key fields (dataset entries' python, args_json and where; create_dataset's and
 * text_builder's kwargs_json) from the validated tree; config_python_free releases them. */
void config_python_attach(config_kind kind, const ynode *root, void *typed);
void config_python_free(config_kind kind, void *typed);

#endif
