/* Stage 8 pack_model with a publication config, and stage 9 upload_model: ESPnet3's Hugging Face
 * model folder (espnet3/utils/publish.py's pack_model), at pack_model.out_dir (default
 * ${exp_dir}/model_pack):
 *
 *   <exp_dir as it is under recipe_dir>   the experiment, less the exclude patterns (and the pack)
 *   <include paths>                       more files and folders (globs), where they are in the recipe
 *   <files>, <yaml_files>                 named artifacts (yaml_files with their paths rewritten)
 *   conf/{training,publication,inference,metrics}.yaml   the configs of the run, every path that
 *                                         points at something copied rewritten to ${recipe_dir}/...
 *                                         and recipe_dir: ".", so the folder decodes where it lies
 *   metrics.json                          the measure stage's, when there is one
 *   README.md                             pack_model.readme (or espnet3's own) with the results table
 *   meta.yaml                             files and yaml_files by name, the espnet3 version
 *
 * Built in a staging folder beside it and renamed into place when complete. upload_model sends the
 * folder to upload_model.hf_repo with the Hugging Face command-line tool. */
#include "stages/stages.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/base/fsio.h"
#include "core/base/proc.h"
#include "core/base/version.h"
#include "stages/publish_files.h"

/* A source copied into the pack and where it went (absolute paths). */
typedef struct copied {
    char *src, *dst;
} copied;

typedef struct pack_run {
    const esp_configs *cfgs;
    const publication_cfg *pub;
    const char *file;         /* the publication config, for messages */
    char *root;               /* recipe_dir, absolute */
    char *out, *staging;      /* the final folder and the one being built */
    copied *srcs;
    size_t n_srcs;
    json_t *files, *yaml_files;
} pack_run;

/* path's place below the recipe folder ("" for the folder itself), or NULL when it is outside. */
static const char *under_root(const char *abs, const char *root)
{
    size_t l = strlen(root);
    if (strncmp(abs, root, l)) return NULL;
    if (!abs[l]) return "";
    return abs[l] == '/' ? abs + l + 1 : NULL;
}

static void remember(pack_run *r, const char *src_abs, const char *dst_abs)
{
    r->srcs = xrealloc(r->srcs, (r->n_srcs + 1) * sizeof *r->srcs);
    r->srcs[r->n_srcs++] = (copied){xstrdup(src_abs), xstrdup(dst_abs)};
}

/* The value a config path gets in the pack: ${recipe_dir}/<its place>, when it points at (or
 * below) something copied; NULL otherwise. */
static char *bundle_path(const pack_run *r, const char *value)
{
    if (!value[0] || strstr(value, "${")) return NULL;
    char *cand = value[0] == '/' ? path_normalize(value) : path_join(r->root, value);
    char *norm = path_normalize(cand);
    free(cand);
    char *out = NULL;
    for (size_t i = 0; i < r->n_srcs && !out; i++) {
        size_t l = strlen(r->srcs[i].src);
        if (strncmp(norm, r->srcs[i].src, l) || (norm[l] && norm[l] != '/')) continue;
        const char *rest = norm + l;
        const char *dst_rel = r->srcs[i].dst + strlen(r->staging);
        if (*dst_rel == '/') dst_rel++;
        char *rel = *rest ? (*dst_rel ? xasprintf("%s%s", dst_rel, rest) : xstrdup(rest + 1)) : xstrdup(dst_rel);
        out = rel[0] ? xasprintf("${recipe_dir}/%s", rel) : xstrdup("${recipe_dir}");
        free(rel);
    }
    free(norm);
    return out;
}

static void rewrite_paths(const pack_run *r, ynode *n)
{
    if (n->kind == YN_SCALAR) {
        char *v = n->quoted || !yt_is_null(n) ? bundle_path(r, n->str) : NULL;
        if (v) {
            free(n->str);
            n->str = v;
            n->resolved = 0; /* an interpolation again */
            n->quoted = 0;
        }
        return;
    }
    for (size_t i = 0; i < n->n; i++) rewrite_paths(r, n->items[i]);
}

/* A config written into the pack: paths rewritten, recipe_dir ".". */
static int write_bundle_config(const pack_run *r, const ynode *tree, const char *dst, esp_err *err)
{
    ynode *copy = yt_copy(tree);
    rewrite_paths(r, copy);
    yt_map_set(copy, "recipe_dir", copy->mark, yt_scalar(".", 0, copy->mark));
    size_t len;
    char *text = yt_emit_config(copy, &len);
    char *dir = path_dirname(dst);
    int rc = mkdir_p(dir, err);
    if (rc == 0) rc = atomic_write_file(dst, text, len, err);
    free(dir), free(text);
    yt_free(copy);
    return rc;
}

/* pack_model.files / yaml_files: name -> path, each under recipe_dir. */
static int copy_named(pack_run *r, const char *key, int yaml, esp_err *err)
{
    const esp_config *pc = r->cfgs->publication;
    char path[64];
    snprintf(path, sizeof path, "pack_model.%s", key);
    const ynode *map = yt_get_path(pc->tree, path);
    if (!map || yt_is_null(map)) return 0;
    if (map->kind != YN_MAP) {
        char *w = config_where(pc, path);
        int rc = esp_fail(err, "%s: expected a mapping of name: path", w);
        free(w);
        return rc;
    }
    for (size_t i = 0; i < map->n; i++) {
        const ynode *v = map->items[i];
        char mark[512];
        if (v->kind != YN_SCALAR || yt_is_null(v))
            return esp_fail(err, "%s: %s.%s: expected a path", ymark_str(v->mark, mark, sizeof mark), path, map->keys[i]);
        char *abs = path_absolute(v->str);
        const char *rel = under_root(abs, r->root);
        int rc = 0;
        if (!path_exists(abs))
            rc = esp_fail(err, "%s: %s.%s: %s does not exist", ymark_str(v->mark, mark, sizeof mark), path, map->keys[i],
                          v->str);
        else if (!rel || !rel[0])
            rc = esp_fail(err, "%s: %s.%s: %s is not under recipe_dir %s (the pack keeps the recipe's layout)",
                          ymark_str(v->mark, mark, sizeof mark), path, map->keys[i], v->str, r->root);
        char *dst = rc == 0 ? path_join(r->staging, rel) : NULL;
        if (rc == 0 && yaml) {
            ynode *y = yt_parse_file(abs, err);
            rc = y ? write_bundle_config(r, y, dst, err) : -1;
            yt_free(y);
        } else if (rc == 0) {
            rc = pack_copy(abs, dst, NULL, 0, err);
        }
        if (rc == 0) {
            remember(r, abs, dst);
            json_object_set_new(yaml ? r->yaml_files : r->files, map->keys[i], json_string(rel));
        }
        free(dst), free(abs);
        if (rc != 0) return -1;
    }
    return 0;
}

/* Python's str() of a JSON number: the shortest repr, 100.0 for an integral float. */
static char *py_str(const json_t *v)
{
    if (json_is_integer(v)) return xasprintf("%lld", (long long)json_integer_value(v));
    if (json_is_real(v)) {
        double d = json_real_value(v), a = fabs(d);
        char buf[64];
        if (a >= 1e-4 && a < 1e16) { /* Python's repr: fixed notation, the fewest decimals that read back */
            for (int p = 0; p <= 17; p++) {
                snprintf(buf, sizeof buf, "%.*f", p, d);
                if (strtod(buf, NULL) == d) break;
            }
            if (!strchr(buf, '.')) strcat(buf, ".0");
        } else {
            for (int p = 1; p <= 17; p++) {
                snprintf(buf, sizeof buf, "%.*g", p, d);
                if (strtod(buf, NULL) == d) break;
            }
        }
        return xstrdup(buf);
    }
    if (json_is_string(v)) return xstrdup(json_string_value(v));
    return json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* ESPnet3's _build_results_table: a row per test set, a column per value in metrics.json. */
static char *results_table(const char *metrics_path)
{
    json_error_t je;
    json_t *root = metrics_path ? json_load_file(metrics_path, 0, &je) : NULL;
    if (!json_is_object(root)) {
        json_decref(root);
        return xstrdup("");
    }
    const char *tests[256], *cols[256];
    size_t nt = 0, nc = 0;
    const char *metric;
    json_t *per_test;
    json_object_foreach(root, metric, per_test) {
        const char *test;
        json_t *vals;
        if (!json_is_object(per_test)) continue;
        json_object_foreach(per_test, test, vals) {
            int seen = 0;
            for (size_t i = 0; i < nt; i++) seen |= !strcmp(tests[i], test);
            if (!seen && nt < 256) tests[nt++] = test;
            const char *k;
            json_t *v;
            if (!json_is_object(vals)) continue;
            json_object_foreach(vals, k, v) {
                int have = 0;
                for (size_t i = 0; i < nc; i++) have |= !strcmp(cols[i], k);
                if (!have && nc < 256) cols[nc++] = k;
            }
        }
    }
    if (!nt || !nc) {
        json_decref(root);
        return xstrdup("");
    }
    qsort(tests, nt, sizeof *tests, cmp_str);
    qsort(cols, nc, sizeof *cols, cmp_str);
    char *out = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&out, &len);
    fputs("## Results\n\n| dataset |", fp);
    for (size_t c = 0; c < nc; c++) fprintf(fp, " %s |", cols[c]);
    fputs("\n| --- |", fp);
    for (size_t c = 0; c < nc; c++) fputs(" --- |", fp);
    fputc('\n', fp);
    for (size_t t = 0; t < nt; t++) {
        fprintf(fp, "| %s |", tests[t]);
        for (size_t c = 0; c < nc; c++) {
            const json_t *v = NULL; /* the last metric that reports it wins, as ESPnet3's dict update */
            json_object_foreach(root, metric, per_test) {
                json_t *vals = json_object_get(per_test, tests[t]);
                if (json_object_get(vals, cols[c])) v = json_object_get(vals, cols[c]);
            }
            char *s = v ? py_str(v) : xstrdup("");
            fprintf(fp, " %s |", s);
            free(s);
        }
        fputc('\n', fp);
    }
    ESP_CHECK(fclose(fp) == 0);
    json_decref(root);
    return out;
}

/* The first metrics.json under the inference_dir of the publication, metrics, inference config. */
static char *find_metrics(const esp_configs *c)
{
    const char *dirs[3] = {((const publication_cfg *)c->publication->typed)->inference_dir,
                           c->metrics ? ((const metrics_cfg *)c->metrics->typed)->inference_dir : NULL,
                           c->inference ? ((const inference_cfg *)c->inference->typed)->inference_dir : NULL};
    for (int i = 0; i < 3; i++) {
        if (!dirs[i] || !is_dir(dirs[i])) continue;
        const char *pat[] = {"**/metrics.json"};
        char **found;
        size_t n = pack_expand(pat, 1, dirs[i], &found);
        char *hit = NULL;
        for (size_t k = 0; k < n; k++) {
            if (!hit && path_exists(found[k])) hit = xstrdup(found[k]);
            free(found[k]);
        }
        free(found);
        if (hit) return hit;
    }
    return NULL;
}

static char *command_line(const char *dir, char *const argv[])
{
    proc_buf out = {0};
    int status = 0;
    esp_err ignored;
    char *text = NULL;
    if (proc_run_capture(argv, &out, NULL, 0, &status, &ignored) == 0 && WIFEXITED(status) && !WEXITSTATUS(status))
        text = xstrndup(out.data ? (char *)out.data : "", out.len);
    free(out.data);
    (void)dir;
    if (text) text[strcspn(text, "\n")] = '\0'; /* the first line */
    return text;
}

static const char default_readme[] =
    "---\nlicense: cc-by-4.0\ntags:\n- espnet\n- espnet3\n- automatic-speech-recognition\n---\n\n"
    "# ${pack_name}\n\n${description}\n\n"
    "- recipe: `${recipe}`\n- task: ${task}\n- system: `${system}`\n- created by ${creator} at ${created_at}\n"
    "- git: ${git_head} (${git_dirty})\n- made with espnet3 ${espnet3_version}: ${pack_strategy}\n\n"
    "${results_section}\n${results_note}\n"
    "## Decoding with espnet3\n\nFrom this folder: `${usage_load_call}`\n\n"
    "## Training config\n\n```yaml\n${train_config}```\n";

static int write_readme(const pack_run *r, const char *metrics_path, esp_err *err)
{
    const esp_config *pc = r->cfgs->publication;
    const pack_model_cfg *pm = r->pub->pack_model;
    char *tmpl = NULL;
    if (pm && pm->readme) {
        char *path = xstrdup(pm->readme);
        if (!path_exists(path) && path[0] != '/') { /* relative to the folder above egs3/, as ESPnet3's repo root */
            char *egs3 = strstr(r->root, "/egs3/");
            if (egs3) {
                char *alt = xasprintf("%.*s/%s", (int)(egs3 - r->root), r->root, pm->readme);
                free(path);
                path = alt;
            }
        }
        size_t len;
        tmpl = path_exists(path) ? read_file(path, READ_SMALL, &len, err) : NULL;
        free(path);
        if (!tmpl) {
            char *w = config_where(pc, "pack_model.readme");
            int rc = esp_fail(err, "%s: README template not found: %s", w, pm->readme);
            free(w);
            return rc;
        }
    }
    const training_cfg *t = training_of(r->cfgs);
    char *table = results_table(metrics_path);
    const char *note = table[0] ? ""
                       : metrics_path ? "## Results\n\nA `metrics.json` file was found, but it could not be rendered "
                                        "into a results table.\n"
                                      : "## Results\n\nMetrics were not bundled. Run the `measure` stage before "
                                        "`pack_model` to include evaluation results.\n";
    const char *user = getenv("GIT_AUTHOR_NAME") ? getenv("GIT_AUTHOR_NAME") : getenv("USER") ? getenv("USER") : "";
    char created[64];
    time_t now = time(NULL);
    strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%S", localtime(&now));
    char *head = command_line(r->root, (char *[]){"git", "-C", r->root, "rev-parse", "--short", "HEAD", NULL});
    char *status = command_line(r->root, (char *[]){"git", "-C", r->root, "status", "--porcelain", NULL});
    char *recipe = NULL;
    char *egs3 = strstr(r->root, "/egs3/");
    recipe = egs3 ? xstrdup(egs3 + 1) : xstrdup(r->root);
    const char *task_path = t && t->task ? t->task : "";
    char *task = NULL;
    const char *sys = strstr(task_path, ".systems.");
    if (sys) task = xstrndup(sys + 9, strcspn(sys + 9, "."));
    else task = xstrdup(strrchr(r->root, '/') ? strrchr(r->root, '/') + 1 : r->root);
    char *desc = xasprintf("Packed model bundle generated from `%s`.", recipe);
    const char *slash = strrchr(r->out, '/');
    char *train_yaml = r->cfgs->training ? yt_emit_config(r->cfgs->training->tree, NULL) : xstrdup("");
    char strategy[256] = "copy experiment outputs";
    if (pm && pm->n_include) strcat(strategy, "; include extra recipe assets");
    if (json_object_size(r->files)) strcat(strategy, "; register named artifact files");
    if (json_object_size(r->yaml_files) > 4) strcat(strategy, "; bundle rewritten YAML configs");
    if (pm && pm->n_exclude) strcat(strategy, "; apply exclude filters");
    const char *hf_repo = r->pub->upload_model && r->pub->upload_model->hf_repo ? r->pub->upload_model->hf_repo : "";
    const char *keys[] = {"creator", "created_at", "description", "exp_dir", "git_dirty", "git_head", "hf_repo",
                          "pack_name", "pack_strategy", "recipe", "results_note", "results_section", "system", "task",
                          "train_config", "usage_load_call", "espnet3_version"};
    const char *vals[] = {user, created, desc, t && t->exp_dir ? t->exp_dir : r->pub->exp_dir ? r->pub->exp_dir : "",
                          status ? (status[0] ? "dirty" : "clean") : "", head ? head : "", hf_repo,
                          slash ? slash + 1 : r->out, strategy, recipe, note, table, task_path, task, train_yaml,
                          "espnet3 --training_config conf/training.yaml --inference_config conf/inference.yaml "
                          "--stages infer",
                          ESPNET3_VERSION};
    size_t n = sizeof keys / sizeof *keys;
    const char **k = xmalloc(n * sizeof *k), **v = xmalloc(n * sizeof *v);
    memcpy(k, keys, sizeof keys), memcpy(v, vals, sizeof vals);
    readme_context_add(yt_get_path(pc->tree, "pack_model.readme_context"), &k, &v, &n);
    char *text = readme_render(tmpl ? tmpl : default_readme, k, v, n);
    char *path = path_join(r->staging, "README.md");
    int rc = atomic_write_file(path, text, strlen(text), err);
    free(path), free(text), free(k), free(v), free(train_yaml), free(desc), free(task), free(recipe), free(head);
    free(status), free(table), free(tmpl);
    return rc;
}

static int write_meta(const pack_run *r, esp_err *err)
{
    json_t *meta = json_pack("{s:O, s:O, s:s}", "files", r->files, "yaml_files", r->yaml_files, "espnet3",
                             ESPNET3_VERSION);
    char *js = json_dumps(meta, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(meta);
    /* JSON is YAML: meta.yaml reads back with any YAML loader, OmegaConf's included. */
    char *text = xasprintf("%s\n", js);
    char *path = path_join(r->staging, "meta.yaml");
    int rc = atomic_write_file(path, text, strlen(text), err);
    free(path), free(text), free(js);
    return rc;
}

static int build(pack_run *r, esp_err *err)
{
    const pack_model_cfg *pm = r->pub->pack_model;
    const training_cfg *t = training_of(r->cfgs);
    const char *exp_dir = t && t->exp_dir ? t->exp_dir : r->pub->exp_dir;
    if (!exp_dir) return esp_fail(err, "%s: exp_dir: missing (the experiment the pack holds)", r->file);
    /* exp_dir, then the include paths; the pack itself and its staging folder are never copied */
    size_t n_raw = 1 + (pm ? pm->n_include : 0);
    const char **raw = xmalloc(n_raw * sizeof *raw);
    raw[0] = exp_dir;
    for (size_t i = 1; i < n_raw; i++) raw[i] = pm->include[i - 1];
    char **paths;
    size_t n_paths = pack_expand(raw, n_raw, r->root, &paths);
    free(raw);
    const char *out_base = strrchr(r->out, '/') ? strrchr(r->out, '/') + 1 : r->out;
    const char *stage_base = strrchr(r->staging, '/') ? strrchr(r->staging, '/') + 1 : r->staging;
    /* the pack, its staging folder, Python's caches and the lock of the stage running now */
    size_t n_ex = 4 + (pm ? pm->n_exclude : 0);
    const char **ex = xmalloc(n_ex * sizeof *ex);
    ex[0] = out_base, ex[1] = stage_base, ex[2] = "__pycache__", ex[3] = ".espnet3.lock";
    for (size_t i = 4; i < n_ex; i++) ex[i] = pm->exclude[i - 4];
    int rc = 0;
    for (size_t i = 0; i < n_paths && rc == 0; i++) {
        char *abs = path_absolute(paths[i]);
        const char *rel = under_root(abs, r->root);
        if (!path_exists(abs)) log_warn("%s: pack path does not exist: %s", r->file, paths[i]);
        else {
            const char *base = strrchr(abs, '/') ? strrchr(abs, '/') + 1 : abs;
            char *dst = rel ? (rel[0] ? path_join(r->staging, rel) : xstrdup(r->staging)) : path_join(r->staging, base);
            rc = pack_copy(abs, dst, ex, n_ex, err);
            if (rc == 0) remember(r, abs, dst);
            free(dst);
        }
        free(abs);
    }
    for (size_t i = 0; i < n_paths; i++) free(paths[i]);
    free(paths);
    free(ex);
    if (rc == 0) rc = copy_named(r, "files", 0, err);
    if (rc == 0) rc = copy_named(r, "yaml_files", 1, err);
    static const char *const names[] = {"training", "publication", "inference", "metrics"};
    const esp_config *cs[] = {r->cfgs->training, r->cfgs->publication, r->cfgs->inference, r->cfgs->metrics};
    for (size_t i = 0; i < 4 && rc == 0; i++) {
        if (!cs[i]) continue;
        char *rel = xasprintf("conf/%s.yaml", names[i]), *dst = path_join(r->staging, rel);
        char *key = xasprintf("%s_config", names[i]);
        rc = write_bundle_config(r, cs[i]->tree, dst, err);
        if (rc == 0) json_object_set_new(r->yaml_files, key, json_string(rel));
        free(rel), free(dst), free(key);
    }
    char *metrics = rc == 0 ? find_metrics(r->cfgs) : NULL;
    if (metrics) {
        char *dst = path_join(r->staging, "metrics.json");
        rc = pack_copy(metrics, dst, NULL, 0, err);
        free(dst);
    }
    if (rc == 0) rc = write_readme(r, metrics, err);
    if (rc == 0) rc = write_meta(r, err);
    free(metrics);
    return rc;
}

int stage_pack_model_publication(const stage_ctx *ctx, esp_err *err)
{
    const esp_config *pc = ctx->configs->publication;
    const publication_cfg *pub = pc->typed;
    const training_cfg *t = training_of(ctx->configs);
    const char *recipe_dir = t && t->recipe_dir ? t->recipe_dir : pub->recipe_dir ? pub->recipe_dir : ".";
    char *root = realpath(recipe_dir, NULL);
    if (!root) return esp_fail(err, "%s: recipe_dir: %s does not exist", pc->path, recipe_dir);
    const char *exp_dir = t && t->exp_dir ? t->exp_dir : pub->exp_dir;
    char *out_given = pub->pack_model && pub->pack_model->out_dir ? xstrdup(pub->pack_model->out_dir)
                                                                  : xasprintf("%s/model_pack", exp_dir ? exp_dir : ".");
    pack_run r = {.cfgs = ctx->configs, .pub = pub, .file = pc->path, .root = root, .out = path_absolute(out_given),
                  .files = json_object(), .yaml_files = json_object()};
    free(out_given);
    r.staging = xasprintf("%s.staging-%ld", r.out, (long)getpid());
    remove_tree(r.staging);
    int rc = mkdir_p(r.staging, err);
    if (rc == 0) rc = build(&r, err);
    if (rc == 0) rc = pack_swap_into_place(r.staging, r.out, err);
    else remove_tree(r.staging);
    if (rc == 0)
        log_info("pack_model: %s (ESPnet3's Hugging Face model folder: %zu files registered, %zu YAML configs)", r.out,
                 json_object_size(r.files), json_object_size(r.yaml_files));
    for (size_t i = 0; i < r.n_srcs; i++) free(r.srcs[i].src), free(r.srcs[i].dst);
    free(r.srcs), free(r.out), free(r.staging), free(root);
    json_decref(r.files), json_decref(r.yaml_files);
    return rc;
}

int stage_upload_model(const stage_ctx *ctx, esp_err *err)
{
    const publication_cfg *pub = ctx->configs->publication->typed;
    const training_cfg *t = training_of(ctx->configs);
    const char *exp_dir = t && t->exp_dir ? t->exp_dir : pub->exp_dir;
    char *dir = pub->pack_model && pub->pack_model->out_dir ? xstrdup(pub->pack_model->out_dir)
                                                            : xasprintf("%s/model_pack", exp_dir ? exp_dir : ".");
    int rc = upload_stage(ctx->configs->publication, "upload_model", pub->upload_model, dir, "model",
                          "pack_model, stage 8", err);
    free(dir);
    return rc;
}
