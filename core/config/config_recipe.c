/* The recipe hook (core/config/config_recipe.h): the registered recipes, which one a config's
 * create_dataset block is typed by, and typing it into the recipe's struct. */
#include "core/config/config_recipe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/config/config_python.h"

static const config_recipe *const *registered;

void config_recipes_set(const config_recipe *const *list) { registered = list; }

const config_recipe *const *config_recipes(void)
{
    static const config_recipe *const none[] = {NULL};
    return registered ? registered : none;
}

static const config_recipe *by_name(const char *name)
{
    for (const config_recipe *const *r = config_recipes(); *r; r++)
        if (!strcmp(name, (*r)->name) || !strcmp(name, (*r)->short_name)) return *r;
    return NULL;
}

const config_recipe *config_recipe_find(const char *func, const char *recipe_dir, char **tried)
{
    if (tried) *tried = NULL;
    if (func) return by_name(func);
    if (!recipe_dir) return NULL;
    char *abs = path_absolute(recipe_dir);
    char *base = strrchr(abs, '/');
    const char *name = base && base[1] ? base + 1 : abs;
    const config_recipe *r = by_name(name);
    if (tried) *tried = xstrdup(name);
    if (!r && base && base > abs) { /* egs3/<corpus>/<task> */
        *base = '\0';
        char *corpus = strrchr(abs, '/');
        if (corpus && corpus[1] && (r = by_name(corpus + 1)) && tried) {
            free(*tried);
            *tried = xstrdup(corpus + 1);
        }
    }
    free(abs);
    return r;
}

static const char *scalar_at(const ynode *root, const char *path)
{
    const ynode *n = yt_get_path(root, path);
    return n && n->kind == YN_SCALAR && !yt_is_null(n) ? n->str : NULL;
}

const config_recipe *config_recipe_of(const ynode *root)
{
    const ynode *cd = yt_map_get(root, "create_dataset");
    if (!cd || cd->kind != YN_MAP) return NULL;
    const char *func = scalar_at(root, "create_dataset.func");
    if (config_create_dataset_is_python(func, config_python_recipe_dir(root))) return NULL;
    const char *dir = scalar_at(root, "create_dataset.recipe_dir");
    return config_recipe_find(func, dir ? dir : scalar_at(root, "recipe_dir"), NULL);
}

/* The validator has checked every key of the block against the recipe's fields; the others are
 * the schema's, which the recipe's struct leaves aside. */
static const cyaml_config_t load_cfg = {
    .log_level = CYAML_LOG_ERROR,
    .log_fn = cyaml_log,
    .mem_fn = cyaml_mem,
    .flags = CYAML_CFG_DEFAULT | CYAML_CFG_IGNORE_UNKNOWN_KEYS,
};

void *config_recipe_load(const config_recipe *r, const ynode *full)
{
    const ynode *cd = r && r->schema ? yt_map_get(full, "create_dataset") : NULL;
    if (!cd) return NULL;
    size_t len;
    char *yaml = yt_emit(cd, &len);
    void *keys = NULL;
    cyaml_err_t cerr = cyaml_load_data((const uint8_t *)yaml, len, &load_cfg, r->schema, (cyaml_data_t **)&keys, NULL);
    free(yaml);
    if (cerr != CYAML_OK) fprintf(stderr, "espnet3: internal error: %s's create_dataset keys: %s\n", r->short_name,
                                  cyaml_strerror(cerr));
    ESP_CHECK(cerr == CYAML_OK);
    return keys;
}

void config_recipe_free(const config_recipe *r, void *keys)
{
    if (keys) cyaml_free(&load_cfg, r->schema, keys, 0);
}
