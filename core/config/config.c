#include "core/config/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config/config_aug.h"
#include "core/config/config_compose.h"
#include "core/config/config_interp.h"
#include "core/config/config_python.h"
#include "core/config/config_recipe.h"
#include "core/config/config_schema.h"
#include "core/config/config_task.h"
#include "core/config/config_values.h"
#include "core/base/fsio.h"
#include "core/base/log.h"

static const char *const kind_names[CONFIG_KIND_COUNT] = {"training", "inference", "metrics", "publication", "demo"};

const char *config_kind_name(config_kind kind) { return kind_names[kind]; }

const char *config_kind_option(config_kind kind)
{
    static const char *const opts[CONFIG_KIND_COUNT] = {"--training_config", "--inference_config", "--metrics_config",
                                                        "--publication_config", "--demo_config"};
    return opts[kind];
}

/* libcyaml reports through a log callback; keep its last error line for the internal-error report. */
static char cyaml_last[512];
static void cyaml_log_capture(cyaml_log_t level, void *ctx, const char *fmt, va_list args)
{
    (void)ctx;
    if (level < CYAML_LOG_ERROR) return;
    size_t used = strlen(cyaml_last);
    if (used >= sizeof cyaml_last - 1) used = 0;
    vsnprintf(cyaml_last + used, sizeof cyaml_last - used, fmt, args);
}

static const cyaml_config_t cyaml_cfg = {
    .log_fn = cyaml_log_capture,
    .log_level = CYAML_LOG_ERROR,
    .mem_fn = cyaml_mem,
    /* The validator has already refused every unknown key; what it let through (the arguments of
     * the recipe's Python: data_src_args, create_dataset, text_builder) stays in the tree for
     * core/config/config_python.c. */
    .flags = CYAML_CFG_DEFAULT | CYAML_CFG_IGNORE_UNKNOWN_KEYS,
};

/* The template for kind in opts->template_dir, or NULL (with a warning when warn is set). */
static char *template_path_for(config_kind kind, const char *path, const config_load_opts *opts, int warn)
{
    if (!opts || !opts->template_dir) return NULL;
    char *name = xasprintf("%s.yaml", kind_names[kind]);
    char *template_path = path_join(opts->template_dir, name);
    free(name);
    if (path_exists(template_path)) return template_path;
    /* Without it, keys the template provides (seed, exp_dir, ...) are missing: say why. */
    if (warn)
        log_warn("no template %s: %s is used as written (keys such as seed must be in it; "
                 "--template_dir points at the repository's conf/)", template_path, path);
    free(template_path);
    return NULL;
}

int config_key_depth(config_kind kind, const char *path, const config_load_opts *opts, const char *key_path,
                     int *depth, esp_err *err)
{
    *depth = 0;
    if (!path_exists(path))
        return esp_fail(err, "%s: config file not found (check %s)", path, config_kind_option(kind));
    char *template_path = template_path_for(kind, path, opts, 0);
    ynode *tree = config_compose(path, template_path, NULL, 0, err);
    free(template_path);
    if (!tree) return -1;
    const ynode *cur = tree;
    for (const char *p = key_path; cur && *p;) {
        size_t n = strcspn(p, ".");
        char *part = xstrndup(p, n);
        cur = cur->kind == YN_MAP ? yt_map_get(cur, part) : NULL;
        free(part);
        if (cur) ++*depth;
        p += n + (p[n] == '.');
    }
    yt_free(tree);
    return 0;
}

const char *const config_older_inference_dir_names[2] = {"infer_dir", "decode_dir"};

/* Whether an override (key=value, +key=value) sets key. */
static int overrides_set(const config_load_opts *opts, const char *key)
{
    size_t n = strlen(key);
    for (int i = 0; opts && i < opts->n_overrides; i++) {
        const char *o = opts->overrides[i] + (opts->overrides[i][0] == '+');
        if (!strncmp(o, key, n) && o[n] == '=') return 1;
    }
    return 0;
}

/* ESPnet3 has named the folder of <test>/hyp.scp decode_dir, infer_dir and inference_dir over
 * time. A file (as written, without the template) or a command line that sets an older name and
 * not inference_dir means that folder: *alias gets the override "inference_dir=${<name>}", put
 * ahead of the command line's (so an inference_dir= there still wins). */
static int dir_alias_override(config_kind kind, const char *path, const config_load_opts *opts, char **alias,
                              esp_err *err)
{
    *alias = NULL;
    if (kind == CONFIG_TRAINING) return 0;
    ynode *own = config_compose(path, NULL, NULL, 0, err);
    if (!own) return -1;
    const char *const *older = config_older_inference_dir_names;
    if (!yt_map_get(own, "inference_dir") && !overrides_set(opts, "inference_dir"))
        for (size_t i = 0; i < 2 && !*alias; i++)
            if (yt_map_get(own, older[i]) || overrides_set(opts, older[i])) {
                *alias = xasprintf("inference_dir=${%s}", older[i]);
                log_info("%s: %s (ESPnet3's older name) is where stage 6 writes and stage 7 reads: inference_dir takes "
                         "its value", path, older[i]);
            }
    yt_free(own);
    return 0;
}

int config_load(config_kind kind, const char *path, const config_load_opts *opts, esp_config **out, esp_err *err)
{
    *out = NULL;
    if (!path_exists(path))
        return esp_fail(err, "%s: config file not found (check %s)", path, config_kind_option(kind));
    char *alias;
    if (dir_alias_override(kind, path, opts, &alias, err) != 0) return -1;
    int n_ov = opts ? opts->n_overrides : 0;
    const char **ov = xcalloc((size_t)n_ov + 1, sizeof *ov);
    int n = 0;
    if (alias) ov[n++] = alias;
    for (int i = 0; i < n_ov; i++) ov[n++] = opts->overrides[i];
    char *template_path = template_path_for(kind, path, opts, 1);
    ynode *tree = config_compose(path, template_path, ov, n, err);
    free(template_path);
    free(ov);
    free(alias);
    if (!tree) return -1;
    return config_load_tree(kind, tree, path, opts && opts->foreign, out, err);
}

int config_load_tree(config_kind kind, ynode *tree, const char *path, int foreign, esp_config **out, esp_err *err)
{
    *out = NULL;
    char *stem = path_stem(path);
    interp_opts io = {.self_name = stem, .foreign = foreign};
    int rc = config_interpolate(tree, &io, err);
    free(stem);
    if (rc == 0) rc = config_validate(kind, tree, err);
    aug_effects_cfg *aug = NULL; /* the one list-shaped key libcyaml cannot type, parsed here once */
    if (rc == 0 && kind == CONFIG_TRAINING) rc = config_aug_read(tree, &aug, err);
    if (rc != 0) {
        yt_free(tree);
        return -1;
    }
    /* The validated tree has exactly the schema's shape (defaults are in range), so libcyaml must
     * accept it. */
    ynode *full = yt_copy(tree);
    config_fill_left_out(kind, full);
    const config_recipe *recipe = kind == CONFIG_TRAINING ? config_recipe_of(tree) : NULL;
    if (recipe) config_fill_declared(recipe->defaults, recipe->n_defaults, kind, full);
    size_t len;
    char *yaml = yt_emit(full, &len);
    void *typed = NULL;
    cyaml_last[0] = '\0';
    cyaml_err_t cerr = cyaml_load_data((const uint8_t *)yaml, len, &cyaml_cfg, config_schema(kind), (cyaml_data_t **)&typed, NULL);
    free(yaml);
    if (cerr != CYAML_OK) {
        fprintf(stderr, "espnet3: internal error: libcyaml rejected a validated %s config: %s: %s\n", kind_names[kind],
                cyaml_strerror(cerr), cyaml_last);
        ESP_CHECK(cerr == CYAML_OK);
    }
    config_python_attach(kind, tree, typed);
    create_dataset_cfg *cd = kind == CONFIG_TRAINING ? ((training_cfg *)typed)->create_dataset : NULL;
    if (cd) cd->recipe = recipe, cd->keys = config_recipe_load(recipe, full);
    if (kind == CONFIG_TRAINING) ((training_cfg *)typed)->lm_task = config_is_lm_task(tree);
    if (aug) { /* data_aug_effects is under dataset.preprocessor, so the block is there */
        const training_cfg *t = typed;
        ESP_CHECK(t->dataset && t->dataset->preprocessor);
        t->dataset->preprocessor->data_aug_effects = aug;
    }
    esp_config *cfg = xcalloc(1, sizeof *cfg);
    cfg->kind = kind;
    cfg->path = xstrdup(path);
    cfg->tree = tree;
    cfg->full = full;
    cfg->typed = typed;
    *out = cfg;
    return 0;
}

char *config_where(const esp_config *cfg, const char *key)
{
    const ynode *n = yt_get_path(cfg->tree, key);
    char mark[512];
    return xasprintf("%s: %s", n ? ymark_str(n->mark, mark, sizeof mark) : cfg->path, key);
}

void config_free(esp_config *cfg)
{
    if (!cfg) return;
    config_python_free(cfg->kind, cfg->typed);
    create_dataset_cfg *cd = cfg->kind == CONFIG_TRAINING && cfg->typed ? ((training_cfg *)cfg->typed)->create_dataset : NULL;
    if (cd) config_recipe_free(cd->recipe, cd->keys);
    const training_cfg *t = cfg->kind == CONFIG_TRAINING ? cfg->typed : NULL;
    if (t && t->dataset && t->dataset->preprocessor) config_aug_effects_free(t->dataset->preprocessor->data_aug_effects);
    if (cfg->typed) cyaml_free(&cyaml_cfg, config_schema(cfg->kind), cfg->typed, 0);
    yt_free(cfg->tree);
    yt_free(cfg->full);
    free(cfg->path);
    free(cfg);
}

int config_write_resolved(const esp_config *cfg, const char *path, esp_err *err)
{
    size_t len;
    char *yaml = yt_emit_config(cfg->tree, &len);
    int rc = atomic_write_file(path, yaml, len, err);
    free(yaml);
    return rc;
}
