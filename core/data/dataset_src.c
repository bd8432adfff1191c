#include "core/data/dataset_src.h"
#include "core/data/speed_perturb.h"

#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/config/config_task.h"
#include "core/data/py_export.h"
#include "core/formats/corpus.h"
#include "core/formats/text_scp.h"

static const char *arg_of(const dataset_ref_cfg *r, int which)
{
    const data_src_args_cfg *a = r->data_src_args;
    if (!a) return NULL;
    return which == 0 ? a->split : which == 1 ? (a->path ? a->path : a->manifest_path) : NULL;
}

/* The recipe's own dataset: what create_dataset wrote under ${data_dir}/manifest/. */
static int read_recipe_split(const char *data_dir, const char *split, const char *where, manifest *m, esp_err *err)
{
    if (!data_dir) return esp_fail(err, "%s: data_dir: missing (the recipe's manifests are under it)", where);
    if (!split[0] || strchr(split, '/'))
        return esp_fail(err, "%s.data_src_args.split: '%s' is not a split name", where, split);
    char *path = xasprintf("%s/manifest/%s.tsv", data_dir, split);
    int rc;
    if (!path_exists(path))
        rc = esp_fail(err, "%s: no manifest for split '%s' (%s; run create_dataset, stage 1, or fix the split)", path,
                      split, where);
    else rc = manifest_read_tsv(path, m, err);
    free(path);
    return rc;
}

static int read_manifest_file(const char *path, const char *where, manifest *m, esp_err *err)
{
    if (!path_exists(path)) return esp_fail(err, "%s: no such manifest (%s)", path, where);
    return manifest_read_tsv(path, m, err);
}

/* ESPnet3's LM text source (espnet3.systems.esp2_asr.lm_dataset's LMTextDataset: "<id>
 * <transcript>" lines; lines without a transcript are skipped, as it skips them): transcripts
 * without audio, for an LM task. */
static int is_lm_text_src(const dataset_ref_cfg *r)
{
    return (r->data_src_args && r->data_src_args->text_path) || config_is_lm_data_src(r->data_src);
}

static int read_lm_text(const char *path, const char *where, manifest *m, esp_err *err)
{
    memset(m, 0, sizeof *m);
    if (!path)
        return esp_fail(err, "%s: data_src_args.text_path: missing (the LM's \"<id> <transcript>\" text file)", where);
    if (!path_exists(path)) return esp_fail(err, "%s: no such LM text file (%s.data_src_args.text_path)", path, where);
    text_scp t;
    if (text_scp_read(path, &t, err) != 0) return -1;
    for (size_t i = 0; i < t.n; i++)
        if (t.items[i].text[strspn(t.items[i].text, " \t")]) manifest_add(m, t.items[i].id, "", t.items[i].text, NULL);
    text_scp_free(&t);
    if (m->n == 0) return esp_fail(err, "%s: no line holds a transcript (\"<id> <transcript>\" per line)", path);
    return 0;
}

/* A Python source: its export (made now unless this code and these arguments made one before). */
static int read_python(const dataset_ref_cfg *r, const dataset_read_ctx *ctx, const char *what, manifest *m, esp_err *err)
{
    const char *split = arg_of(r, 0);
    const char *list = strrchr(what, '.');
    char *name = xstrdup(r->name ? r->name : split ? split : list ? list + 1 : "item");
    name[strcspn(name, "[")] = '\0';
    py_source src = {.data_src = r->data_src, .args_json = r->args_json, .transform_json = r->transform_json,
                     .where = r->where ? r->where : what, .name = name};
    py_export_opts o = {.env = {.python = ctx->python, .recipe_dir = ctx->recipe_dir},
                        .data_dir = ctx->data_dir, .fs = ctx->fs, .resample = ctx->resample,
                        .need_text = ctx->need_text};
    char *mpath = NULL;
    int rc = py_export(&src, &o, &mpath, err);
    if (rc == 0) rc = manifest_read_tsv(mpath, m, err);
    free(mpath);
    free(name);
    return rc;
}

static int read_one(const dataset_ref_cfg *r, const dataset_read_ctx *ctx, const char *where, manifest *m,
                    esp_err *err)
{
    const char *split = arg_of(r, 0), *path = arg_of(r, 1), *src = r->data_src, *data_dir = ctx->data_dir;
    if (is_lm_text_src(r)) return read_lm_text(r->data_src_args ? r->data_src_args->text_path : NULL, where, m, err);
    if (r->python) return read_python(r, ctx, where, m, err);
    /* A built-in recipe's dataset (no dataset/ package): data_src left out or its tag <recipe>/<task>,
     * read from the manifests its builder wrote. */
    if (!src || strchr(src, '.') || strchr(src, '/')) {
        if (r->dataset && r->dataset->manifest_path) return read_manifest_file(r->dataset->manifest_path, where, m, err);
        if (r->dataset && r->dataset->split && !split)
            return read_recipe_split(data_dir, r->dataset->split, where, m, err);
        if (path) return read_manifest_file(path, where, m, err);
        if (!split)
            return esp_fail(err, "%s: data_src_args.split: missing (which split of the recipe's dataset, e.g. "
                            "split: train)", where);
        return read_recipe_split(data_dir, split, where, m, err);
    }
    if (!strcmp(src, "manifest")) {
        if (path) return read_manifest_file(path, where, m, err);
        if (split) return read_recipe_split(data_dir, split, where, m, err);
        return esp_fail(err, "%s: data_src_args.path: missing (the .tsv manifest to read)", where);
    }
    if (!strcmp(src, "kaldi")) {
        char *dir = path ? xstrdup(path) : split && data_dir ? path_join(data_dir, split) : NULL;
        if (!dir) return esp_fail(err, "%s: data_src_args.path: missing (the Kaldi data dir with wav.scp and text)", where);
        int rc = is_dir(dir) ? manifest_read_kaldi_dir(dir, m, err)
                             : esp_fail(err, "%s: no such Kaldi data dir (%s)", dir, where);
        free(dir);
        return rc;
    }
    if (!path) return esp_fail(err, "%s: data_src_args.path: missing (the %s corpus folder)", where, src);
    if (!split) return esp_fail(err, "%s: data_src_args.split: missing (which split of %s)", where, path);
    if (!strcmp(src, "librispeech")) return corpus_read_librispeech(path, split, m, err);
    if (!strcmp(src, "an4")) return corpus_read_an4(path, split, m, err);
    return esp_fail(err, "%s: data_src: '%s' is not a data source espnet3 reads", where, src);
}

typedef struct utt_ix {
    const char *utt;
    size_t i;
} utt_ix;

static int cmp_utt_ix(const void *a, const void *b)
{
    const utt_ix *x = a, *y = b;
    int c = strcmp(x->utt, y->utt);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

long dataset_frontend_fs(const training_cfg *cfg)
{
    return cfg->model && cfg->model->frontend_conf && cfg->model->frontend_conf->fs > 0 ? (long)cfg->model->frontend_conf->fs
                                                                                       : 16000;
}

dataset_read_ctx dataset_read_ctx_training(const training_cfg *cfg)
{
    const dataset_cfg *ds = cfg->dataset;
    return (dataset_read_ctx){.data_dir = cfg->data_dir,
                              .recipe_dir = ds && ds->recipe_dir ? ds->recipe_dir : cfg->recipe_dir,
                              .python = cfg->python,
                              .fs = dataset_frontend_fs(cfg),
                              .resample = ds && ds->resample,
                              .need_text = 1};
}

dataset_read_ctx dataset_read_ctx_inference(const inference_cfg *icfg, long fs)
{
    const dataset_cfg *ds = icfg->dataset;
    return (dataset_read_ctx){.data_dir = icfg->data_dir,
                              .recipe_dir = ds && ds->recipe_dir ? ds->recipe_dir : icfg->recipe_dir,
                              .python = icfg->python,
                              .fs = fs,
                              .resample = ds && ds->resample};
}

int dataset_refs_load(const dataset_ref_cfg *refs, unsigned n, const dataset_read_ctx *ctx, const char *what,
                      manifest *out, esp_err *err)
{
    memset(out, 0, sizeof *out);
    if (n == 0) return esp_fail(err, "%s: an empty list (give at least one source)", what);
    size_t *source_of = NULL;
    int rc = 0;
    for (unsigned k = 0; k < n && rc == 0; k++) {
        char *where = xasprintf("%s[%u]", what, k);
        manifest part;
        rc = read_one(&refs[k], ctx, where, &part, err);
        if (rc == 0) {
            source_of = xrealloc(source_of, (out->n + part.n + 1) * sizeof *source_of);
            for (size_t i = 0; i < part.n; i++) {
                const manifest_entry *e = &part.items[i];
                source_of[out->n] = k;
                manifest_add_span(out, e->utt, e->wav, e->text, e->spk, e->start, e->end);
            }
            manifest_free(&part);
        }
        free(where);
    }
    if (rc == 0 && n > 1) { /* sources that share an utterance id cannot be told apart downstream */
        utt_ix *ix = xmalloc((out->n + 1) * sizeof *ix);
        for (size_t i = 0; i < out->n; i++) ix[i] = (utt_ix){out->items[i].utt, i};
        qsort(ix, out->n, sizeof *ix, cmp_utt_ix);
        for (size_t i = 1; i < out->n && rc == 0; i++)
            if (!strcmp(ix[i - 1].utt, ix[i].utt))
                rc = esp_fail(err, "%s: utterance id %s is in %s[%zu] and %s[%zu] (rename one, e.g. with a prefix)",
                              what, ix[i].utt, what, source_of[ix[i - 1].i], what, source_of[ix[i].i]);
        free(ix);
    }
    free(source_of);
    if (rc != 0) manifest_free(out);
    return rc;
}

static const dataset_ref_cfg *split_refs(const dataset_cfg *ds, const char *split, unsigned *n)
{
    *n = 0;
    if (!ds) return NULL;
    if (!strcmp(split, "train")) return *n = ds->n_train, ds->train;
    if (!strcmp(split, "valid")) return *n = ds->n_valid, ds->valid;
    return NULL;
}

int dataset_split_load_original(const training_cfg *cfg, const char *split, manifest *out, char **desc, esp_err *err)
{
    unsigned n;
    const dataset_ref_cfg *refs = split_refs(cfg->dataset, split, &n);
    if (desc) *desc = NULL;
    if (refs && n) {
        char *what = xasprintf("dataset.%s", split);
        dataset_read_ctx ctx = dataset_read_ctx_training(cfg);
        int rc = dataset_refs_load(refs, n, &ctx, what, out, err);
        if (desc && rc == 0) *desc = what;
        else free(what);
        return rc;
    }
    memset(out, 0, sizeof *out);
    if (!cfg->data_dir) return esp_fail(err, "data_dir: missing (the manifests are under it)");
    char *path = xasprintf("%s/manifest/%s.tsv", cfg->data_dir, split);
    int rc;
    if (!path_exists(path)) rc = esp_fail(err, "%s: no manifest (run create_dataset, stage 1, first)", path);
    else rc = manifest_read_tsv(path, out, err);
    if (desc && rc == 0) *desc = path;
    else free(path);
    return rc;
}

int dataset_split_load(const training_cfg *cfg, const char *split, manifest *out, char **desc, esp_err *err)
{
    if (strcmp(split, "train") || !cfg->n_speed_perturb_factors) return dataset_split_load_original(cfg, split, out, desc, err);
    /* speed_perturb_factors: the copies stage 3 made from the original training set */
    memset(out, 0, sizeof *out);
    if (desc) *desc = NULL;
    if (!cfg->data_dir) return esp_fail(err, "data_dir: missing (the manifests are under it)");
    char *path = split_manifest_path(cfg, "train");
    int rc;
    if (!path_exists(path))
        rc = esp_fail(err, "%s: no speed-perturbed manifest (speed_perturb_factors is set: run collect_stats, stage 3, "
                           "which makes it)", path);
    else rc = manifest_read_tsv(path, out, err);
    if (desc && rc == 0) *desc = path;
    else free(path);
    return rc;
}

unsigned dataset_test_names(const dataset_cfg *ds, char **test_sets, unsigned n_test_sets, const char **names,
                            unsigned cap)
{
    unsigned n = 0;
    if (ds && ds->n_test) {
        for (unsigned i = 0; i < ds->n_test && n < cap; i++) {
            const dataset_ref_cfg *r = &ds->test[i];
            const char *name = r->name ? r->name : r->data_src_args ? r->data_src_args->split : NULL;
            names[n++] = name ? name : "test";
        }
        return n;
    }
    for (unsigned i = 0; i < n_test_sets && n < cap; i++) names[n++] = test_sets[i];
    return n;
}

int dataset_test_load(const inference_cfg *icfg, const char *name, long fs, manifest *out, char **desc,
                      esp_err *err)
{
    if (desc) *desc = NULL;
    const dataset_cfg *ds = icfg->dataset;
    if (ds && ds->n_test) {
        for (unsigned i = 0; i < ds->n_test; i++) {
            const dataset_ref_cfg *r = &ds->test[i];
            const char *nm = r->name ? r->name : r->data_src_args ? r->data_src_args->split : "test";
            if (strcmp(nm, name)) continue;
            char *what = xasprintf("dataset.test[%u] (%s)", i, name);
            dataset_read_ctx ctx = dataset_read_ctx_inference(icfg, fs);
            int rc = dataset_refs_load(r, 1, &ctx, what, out, err);
            if (desc && rc == 0) *desc = what;
            else free(what);
            return rc;
        }
    }
    memset(out, 0, sizeof *out);
    if (!icfg->data_dir) return esp_fail(err, "data_dir: missing (the test manifests are under it)");
    char *path = xasprintf("%s/manifest/%s.tsv", icfg->data_dir, name);
    int rc;
    if (!path_exists(path))
        rc = esp_fail(err, "%s: no manifest for test set '%s' (run create_dataset, stage 1, or fix test_sets / data_dir)",
                      path, name);
    else rc = manifest_read_tsv(path, out, err);
    if (desc && rc == 0) *desc = path;
    else free(path);
    return rc;
}

const char *dataset_token_type(const training_cfg *cfg)
{
    if (cfg->token_type) return cfg->token_type;
    return cfg->dataset && cfg->dataset->preprocessor ? cfg->dataset->preprocessor->token_type : NULL;
}

const char *dataset_bpemodel(const training_cfg *cfg)
{
    if (cfg->bpemodel) return cfg->bpemodel;
    return cfg->dataset && cfg->dataset->preprocessor ? cfg->dataset->preprocessor->bpemodel : NULL;
}

int dataset_check_preprocessor(const training_cfg *cfg, const char *file, esp_err *err)
{
    const preprocessor_cfg *p = cfg->dataset ? cfg->dataset->preprocessor : NULL;
    if (!p || p->fs <= 0) return 0;
    long fs = dataset_frontend_fs(cfg);
    if (p->fs != fs)
        return esp_fail(err, "%s: dataset.preprocessor.fs is %lld but model.frontend_conf.fs is %ld (espnet3 reads "
                        "audio at the frontend's rate: make them equal; dataset.resample: true converts other rates)",
                        file, (long long)p->fs, fs);
    return 0;
}
