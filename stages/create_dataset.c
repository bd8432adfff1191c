/* Stage 1 create_dataset. A recipe with Python (its dataset/ package, or create_dataset.func naming
 * a Python function) runs it as ESPnet3's BaseSystem.create_dataset does (the DatasetBuilder
 * lifecycle of every data source the dataset block names, with the create_dataset block as keyword
 * arguments), then exports every Python dataset entry once (core/data/py_export.h), so that the
 * later stages read only our manifests and audio. A built-in recipe runs its C builder: the one
 * create_dataset.func names, else the one named after the recipe folder (recipes/<corpus>/, or
 * <corpus> of ESPnet3's egs3/<corpus>/<task>/). */
#include "stages/stages.h"
#include "recipes/registry.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/config/config_python.h"
#include "core/config/config_recipe.h"
#include "core/data/dataset_src.h"
#include "core/data/py_export.h"

static int run_builtin(const training_cfg *cfg, const create_dataset_cfg *cd, const char *file, esp_err *err)
{
    char *by_dir = NULL;
    const config_recipe *r = config_recipe_find(cd->func, cd->recipe_dir ? cd->recipe_dir : cfg->recipe_dir, &by_dir);
    const dataset_builder *b = r ? dataset_builder_of(r) : NULL;
    /* The load typed the block's keys for the same recipe (config_recipe_of). */
    ESP_CHECK(!cd->recipe || cd->recipe == r);
    if (!b) {
        char *names = dataset_builder_names();
        int rc = cd->func ? esp_fail(err, "%s: create_dataset.func: unknown builder %s (supported: %s, or a Python "
                                     "function's dotted path)", file, cd->func, names)
                 : by_dir ? esp_fail(err, "%s: create_dataset.func: missing, the recipe has no dataset/__init__.py, "
                                     "and no built-in builder is named after the recipe folder %s (supported: %s)",
                                     file, by_dir, names)
                          : esp_fail(err, "%s: create_dataset.func: missing (supported: %s)", file, names);
        free(names);
        free(by_dir);
        return rc;
    }
    /* The builder writes audio to create_dataset.dataset_dir, else the top-level dataset_dir. */
    create_dataset_cfg args = *cd;
    if (!args.dataset_dir) args.dataset_dir = cfg->dataset_dir;
    int rc = b->build(&args, cfg->data_dir, err);
    free(by_dir);
    return rc;
}

/* The dataset block's Python entries, one per data source (the first that names it). */
static size_t python_sources(const dataset_cfg *ds, const dataset_ref_cfg **refs, size_t cap)
{
    size_t n = 0;
    const dataset_ref_cfg *lists[3] = {ds->train, ds->valid, ds->test};
    unsigned counts[3] = {ds->n_train, ds->n_valid, ds->n_test};
    for (int l = 0; l < 3; l++)
        for (unsigned k = 0; k < counts[l]; k++) {
            const dataset_ref_cfg *r = &lists[l][k];
            if (!r->python) continue;
            const char *s = r->data_src && r->data_src[0] ? r->data_src : NULL;
            int seen = 0;
            for (size_t i = 0; i < n && !seen; i++) {
                const char *t = refs[i]->data_src && refs[i]->data_src[0] ? refs[i]->data_src : NULL;
                seen = (!s && !t) || (s && t && !strcmp(s, t));
            }
            if (!seen && n < cap) refs[n++] = r;
        }
    return n;
}

/* ESPnet3 adds the training config's parallel block to the builder's arguments unless given. */
static char *builder_kwargs(const esp_config *training, const create_dataset_cfg *cd)
{
    json_error_t je;
    json_t *kw = json_loads(cd && cd->kwargs_json ? cd->kwargs_json : "{}", 0, &je);
    const ynode *par = yt_get_path(training->tree, "parallel");
    if (par && !json_object_get(kw, "parallel")) {
        char *pj = config_tree_json(par, NULL);
        json_object_set_new(kw, "parallel", json_loads(pj, 0, &je));
        free(pj);
    }
    char *s = json_dumps(kw, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(kw);
    return s;
}

static int run_python(const esp_config *training, const training_cfg *cfg, esp_err *err)
{
    const create_dataset_cfg *cd = cfg->create_dataset;
    const char *recipe_dir = config_python_recipe_dir(training->tree);
    py_env env = {.python = cfg->python, .recipe_dir = recipe_dir};
    const ynode *node = yt_get_path(training->tree, cd ? "create_dataset" : "dataset");
    char mark[512];
    char *where = xasprintf("%s: %s", ymark_str(node ? node->mark : (ymark){0}, mark, sizeof mark),
                            cd && cd->func ? "create_dataset.func" : "create_dataset");
    int rc;
    if (cd && cd->func) {
        rc = py_call(&env, cd->func, cd->kwargs_json, where, NULL, NULL, err);
    } else {
        /* Each source's builder, its errors named at the first entry that names it. */
        const dataset_ref_cfg *refs[64];
        size_t n = cfg->dataset ? python_sources(cfg->dataset, refs, 64) : 0;
        char *kw = builder_kwargs(training, cd);
        rc = n == 0 ? py_run_builders(&env, (const char *const[]){NULL}, 1, kw, where, err) : 0;
        for (size_t i = 0; i < n && rc == 0; i++) {
            const char *src = refs[i]->data_src && refs[i]->data_src[0] ? refs[i]->data_src : NULL;
            rc = py_run_builders(&env, &src, 1, kw, refs[i]->where, err);
        }
        free(kw);
    }
    free(where);
    if (rc != 0 || !cfg->dataset) return rc;
    /* Export what the later stages read, now, once. */
    dataset_read_ctx rctx = dataset_read_ctx_training(cfg);
    const dataset_cfg *ds = cfg->dataset;
    const dataset_ref_cfg *lists[3] = {ds->train, ds->valid, ds->test};
    unsigned counts[3] = {ds->n_train, ds->n_valid, ds->n_test};
    const char *names[3] = {"dataset.train", "dataset.valid", "dataset.test"};
    for (int l = 0; l < 3 && rc == 0; l++)
        for (unsigned k = 0; k < counts[l] && rc == 0; k++) {
            if (!lists[l][k].python) continue;
            rctx.need_text = l < 2;
            manifest m;
            if ((rc = dataset_refs_load(&lists[l][k], 1, &rctx, names[l], &m, err)) == 0) manifest_free(&m);
        }
    return rc;
}

int stage_create_dataset(const stage_ctx *ctx, esp_err *err)
{
    const training_cfg *cfg = training_of(ctx->configs);
    if (!cfg) return esp_fail(err, "create_dataset: needs a training config (pass --training_config)");
    const char *file = ctx->configs->training->path;
    const create_dataset_cfg *cd = cfg->create_dataset;
    const char *recipe_dir = ctx->configs->training->tree ? config_python_recipe_dir(ctx->configs->training->tree)
                                                          : cfg->recipe_dir ? cfg->recipe_dir : ".";
    const dataset_ref_cfg *first[1];
    int python = config_create_dataset_is_python(cd ? cd->func : NULL, recipe_dir) ||
                 (!(cd && cd->func) && cfg->dataset && python_sources(cfg->dataset, first, 1));
    if (!cd && !python)
        return esp_fail(err, "%s: create_dataset: missing, and the recipe folder %s has no dataset/__init__.py (add a "
                        "create_dataset: section with func: espnet3.recipes.espeak_fortunes.create_dataset, or the "
                        "recipe's Python dataset package)", file, recipe_dir);
    if (!cfg->data_dir) return esp_fail(err, "%s: data_dir: missing (set where the manifests go)", file);
    if (python) return run_python(ctx->configs->training, cfg, err);
    return run_builtin(cfg, cd, file, err);
}

void stages_register_recipes(void) { config_recipes_set(recipes_all()); }
