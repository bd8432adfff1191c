/* The recipe hook: a recipe's own keys of create_dataset (type, default, range, allowed values, and
 * what each means beside its declaration), declared by the recipe (recipes/<name>/keys.c) and
 * handed down once by the stage layer (stages_register_recipes, which the CLI calls before loading
 * a config). Core knows no recipe: the schema of create_dataset holds only the keys every builder
 * takes (func, dataset_dir, recipe_dir); the validator takes the selected recipe's other keys from
 * its table, checks them at their line like any key, and the load fills its defaults (so
 * --show_config shows them) and types the block into the recipe's own struct
 * (create_dataset_cfg.keys). */
#ifndef ESPNET3_CONFIG_RECIPE_H
#define ESPNET3_CONFIG_RECIPE_H

#include <cyaml/cyaml.h>
#include <stddef.h>

#include "core/config/config_values.h"
#include "core/config/yamltree.h"

/* An allowed-values rule: the string at path must be one of values ('|' separated). */
typedef struct config_allowed {
    const char *path;
    const char *values;
} config_allowed;

typedef struct config_recipe {
    const char *name;       /* create_dataset.func of its builder: espnet3.recipes.<recipe>.create_dataset */
    const char *short_name; /* <recipe>: the alias, and the recipe folder's name */
    /* its keys of create_dataset (NULL: none), typed into its own struct; schema is that struct's
     * mapping (CYAML_FLAG_POINTER) */
    const cyaml_schema_field_t *fields;
    const cyaml_schema_value_t *schema;
    /* paths "create_dataset.<key>", of CONFIG_TRAINING */
    const config_default *defaults;
    size_t n_defaults;
    const config_range *ranges;
    size_t n_ranges;
    const config_allowed *allowed;
    size_t n_allowed;
    /* the rules between its keys, on the validated block (NULL: none); errors through
     * config_fail_node */
    int (*check)(const ynode *block, esp_err *err);
} config_recipe;

/* A table member and its count, for a config_recipe's initializer: CONFIG_RECIPE_TABLE(ranges). */
#define CONFIG_RECIPE_TABLE(t) .t = t, .n_##t = sizeof t / sizeof *t

/* The recipes the program knows (NULL-terminated; the list is kept, not copied). */
void config_recipes_set(const config_recipe *const *list);
const config_recipe *const *config_recipes(void);

/* The recipe create_dataset.func names (full or short name), or with no func the one named after
 * the recipe folder: its last component, else the one above it (egs3/<corpus>/<task>); NULL when
 * none. *tried (may be NULL) gets the name looked for by folder; caller frees. */
const config_recipe *config_recipe_find(const char *func, const char *recipe_dir, char **tried);
/* The recipe a training config's create_dataset block is typed by (NULL: none, or a Python one). */
const config_recipe *config_recipe_of(const ynode *root);

/* Types the create_dataset block of full (defaults filled) into r's struct; NULL when r has no keys.
 * free_keys frees it. */
void *config_recipe_load(const config_recipe *r, const ynode *full);
void config_recipe_free(const config_recipe *r, void *keys);

#endif
