/* What of a config the recipe's own Python receives (see config_python.h). */
#include "core/config/config_python.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/config/config_task.h"

const char *config_python_recipe_dir(const ynode *root)
{
    const ynode *d = root ? yt_get_path(root, "dataset.recipe_dir") : NULL;
    if (!d || d->kind != YN_SCALAR || yt_is_null(d)) d = root ? yt_get_path(root, "recipe_dir") : NULL;
    return d && d->kind == YN_SCALAR && !yt_is_null(d) && d->str[0] ? d->str : ".";
}

static void dashes_to_underscores(char *s)
{
    for (; *s; s++)
        if (*s == '-') *s = '_';
}

int config_tag_is_recipe(const char *tag, const char *recipe_dir)
{
    const char *slash = strchr(tag, '/');
    if (!slash || !recipe_dir || !recipe_dir[0]) return 0;
    char *real = realpath(recipe_dir, NULL); /* "." and ".." name folders too */
    char *dir = real ? real : path_normalize(recipe_dir);
    char *want = xstrdup(tag);
    dashes_to_underscores(dir);
    dashes_to_underscores(want);
    size_t dl = strlen(dir), wl = strlen(want), rl = (size_t)(slash - tag);
    int match = (dl >= wl && !strcmp(dir + dl - wl, want) && (dl == wl || dir[dl - wl - 1] == '/')) ||
                (dl >= rl && !strncmp(dir + dl - rl, want, rl) && (dl == rl || dir[dl - rl - 1] == '/'));
    free(want);
    free(dir);
    return match;
}

static int has_dataset_package(const char *dir)
{
    char *p = xasprintf("%s/dataset/__init__.py", dir);
    int yes = path_exists(p);
    free(p);
    return yes;
}

/* <recipe>/<task> of another recipe: <folder above egs3>/egs3/<recipe>/<task> when recipe_dir is in
 * an egs3 tree. */
static int other_recipe_has_package(const char *tag, const char *recipe_dir)
{
    char *real = realpath(recipe_dir, NULL);
    if (!real) return 0;
    char *egs3 = strstr(real, "/egs3/");
    int yes = 0;
    if (egs3) {
        egs3[5] = '\0';
        char *t = xstrdup(tag);
        dashes_to_underscores(t);
        char *dir = xasprintf("%s/%s", real, t);
        yes = has_dataset_package(dir);
        free(dir), free(t);
    }
    free(real);
    return yes;
}

int config_data_src_is_python(const char *data_src, const char *recipe_dir)
{
    if (!data_src || !data_src[0]) return has_dataset_package(recipe_dir);
    const char *slash = strchr(data_src, '/');
    if (slash && !strchr(data_src, '.'))
        return config_tag_is_recipe(data_src, recipe_dir) ? has_dataset_package(recipe_dir)
                                                          : other_recipe_has_package(data_src, recipe_dir);
    return !slash && strchr(data_src, '.') && !config_is_lm_data_src(data_src);
}

int config_create_dataset_is_python(const char *func, const char *recipe_dir)
{
    if (!func || !func[0]) return has_dataset_package(recipe_dir);
    return strchr(func, '.') && strncmp(func, "espnet3.recipes.", 16) != 0;
}

int config_function_in_recipe(const char *func, const char *recipe_dir)
{
    const char *dot = func ? strrchr(func, '.') : NULL;
    if (!dot) return 0;
    char *rel = xstrndup(func, (size_t)(dot - func));
    for (char *c = rel; *c; c++)
        if (*c == '.') *c = '/';
    char *file = xasprintf("%s/%s.py", recipe_dir ? recipe_dir : ".", rel);
    char *pkg = xasprintf("%s/%s/__init__.py", recipe_dir ? recipe_dir : ".", rel);
    int yes = path_exists(file) || path_exists(pkg);
    free(rel), free(file), free(pkg);
    return yes;
}

static json_t *to_json(const ynode *n)
{
    if (n->kind == YN_MAP) {
        json_t *o = json_object();
        for (size_t i = 0; i < n->n; i++) json_object_set_new(o, n->keys[i], to_json(n->items[i]));
        return o;
    }
    if (n->kind == YN_SEQ) {
        json_t *a = json_array();
        for (size_t i = 0; i < n->n; i++) json_array_append_new(a, to_json(n->items[i]));
        return a;
    }
    int64_t iv;
    double dv;
    int bv;
    if (n->quoted) return json_string(n->str);
    if (yt_is_null(n)) return json_null();
    if (yt_as_bool(n, &bv)) return json_boolean(bv);
    if (yt_as_int(n, &iv)) return json_integer((json_int_t)iv);
    if (yt_as_float(n, &dv) && isfinite(dv)) return json_real(dv);
    return json_string(n->str);
}

char *config_tree_json(const ynode *n, const char *drop_key)
{
    json_t *j = n ? to_json(n) : json_object();
    if (drop_key && json_is_object(j)) json_object_del(j, drop_key);
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
    json_decref(j);
    return s;
}

static void attach_refs(const ynode *root, const char *list, dataset_ref_cfg *refs, unsigned n, const char *recipe_dir)
{
    char *path = xasprintf("dataset.%s", list);
    const ynode *seq = yt_get_path(root, path);
    for (unsigned k = 0; k < n; k++) {
        dataset_ref_cfg *r = &refs[k];
        const ynode *entry = seq && seq->kind == YN_SEQ && k < seq->n ? seq->items[k] : NULL;
        char where[512];
        r->where = xasprintf("%s: %s[%u]", entry ? ymark_str(entry->mark, where, sizeof where) : "config", path, k);
        r->python = config_data_src_is_python(r->data_src, recipe_dir);
        r->args_json = config_tree_json(entry && entry->kind == YN_MAP ? yt_map_get(entry, "data_src_args") : NULL, NULL);
        const ynode *tf = entry && entry->kind == YN_MAP ? yt_map_get(entry, "transform") : NULL;
        r->transform_json = tf && !yt_is_null(tf) ? config_tree_json(tf, NULL) : NULL;
    }
    free(path);
}

static void attach_dataset(const ynode *root, dataset_cfg *ds)
{
    if (!ds) return;
    const char *rd = config_python_recipe_dir(root);
    attach_refs(root, "train", ds->train, ds->n_train, rd);
    attach_refs(root, "valid", ds->valid, ds->n_valid, rd);
    attach_refs(root, "test", ds->test, ds->n_test, rd);
}

void config_python_attach(config_kind kind, const ynode *root, void *typed)
{
    if (kind == CONFIG_TRAINING) {
        training_cfg *t = typed;
        attach_dataset(root, t->dataset);
        if (t->create_dataset) t->create_dataset->kwargs_json = config_tree_json(yt_get_path(root, "create_dataset"), "func");
        if (t->tokenizer && t->tokenizer->text_builder)
            t->tokenizer->text_builder->kwargs_json = config_tree_json(yt_get_path(root, "tokenizer.text_builder"), "func");
    } else if (kind == CONFIG_INFERENCE) {
        attach_dataset(root, ((inference_cfg *)typed)->dataset);
    }
}

static void free_refs(dataset_ref_cfg *refs, unsigned n)
{
    for (unsigned k = 0; k < n; k++) {
        free(refs[k].where), free(refs[k].args_json), free(refs[k].transform_json);
        refs[k].where = refs[k].args_json = refs[k].transform_json = NULL;
    }
}

static void free_dataset(dataset_cfg *ds)
{
    if (!ds) return;
    free_refs(ds->train, ds->n_train);
    free_refs(ds->valid, ds->n_valid);
    free_refs(ds->test, ds->n_test);
}

void config_python_free(config_kind kind, void *typed)
{
    if (!typed) return;
    if (kind == CONFIG_TRAINING) {
        training_cfg *t = typed;
        free_dataset(t->dataset);
        if (t->create_dataset) free(t->create_dataset->kwargs_json), t->create_dataset->kwargs_json = NULL;
        if (t->tokenizer && t->tokenizer->text_builder)
            free(t->tokenizer->text_builder->kwargs_json), t->tokenizer->text_builder->kwargs_json = NULL;
    } else if (kind == CONFIG_INFERENCE) {
        free_dataset(((inference_cfg *)typed)->dataset);
    }
}
