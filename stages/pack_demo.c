/* Stages 10 pack_demo and 11 upload_demo (ESPnet3's demo.yaml): a demo folder at pack.out_dir
 * (default demo/) that transcribes with the espnet3 binary on the packed model, and its upload to a
 * Hugging Face Space.
 *
 *   app.py            stages/demo_app.py: Gradio UI when installed, else `python app.py FILE...`;
 *                     it runs espnet3 (ESPNET3_BIN, bin/espnet3, PATH) on model/ (ESPnet3's own
 *                     ui.app_script runs its Python model: not used, and said once)
 *   model/            the packed model folder model.dir_or_tag names (stage 8's, either kind)
 *   ui.json           the ui: block (title, description, inputs, outputs) for app.py
 *   demo.yaml         the demo config, model.dir_or_tag pointing at model/
 *   README.md         pack.readme rendered with pack.readme_context (or espnet3's own)
 *   requirements.txt  pack.requirements
 *   <pack.include>    more files, less pack.exclude
 *
 * Built in a staging folder beside it and renamed into place when complete. */
#include "stages/stages.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/fsio.h"
#include "stages/publish_files.h"

extern const char _binary_stages_demo_app_py_start[], _binary_stages_demo_app_py_end[];

static int write_text(const char *dir, const char *name, const char *text, size_t len, esp_err *err)
{
    char *path = path_join(dir, name);
    int rc = atomic_write_file(path, text, len, err);
    free(path);
    return rc;
}

static json_t *io_list(const demo_io_cfg *io, unsigned n)
{
    json_t *a = json_array();
    for (unsigned i = 0; i < n; i++)
        json_array_append_new(a, json_pack("{s:s?, s:s?, s:s?}", "key", io[i].key, "type", io[i].type, "label",
                                           io[i].label));
    return a;
}

static const char default_readme[] =
    "---\ntitle: ${title}\nsdk: gradio\napp_file: app.py\ntags:\n- espnet\n- espnet3\n"
    "- automatic-speech-recognition\n---\n\n# ${title}\n\n${description}\n\n"
    "The app runs the espnet3 binary on the packed model in `model/` (set `ESPNET3_BIN`, or put the "
    "binary in `bin/`): `python app.py audio.wav` prints the transcription; with Gradio installed, "
    "`python app.py` serves the UI.\n";

static int build(const esp_config *dc, const demo_cfg *d, const char *staging, esp_err *err)
{
    const char *model = d->model ? d->model->dir_or_tag : NULL;
    if (!model) {
        char *w = config_where(dc, "model");
        int rc = esp_fail(err, "%s.dir_or_tag: missing (the packed model folder the demo runs)", w);
        free(w);
        return rc;
    }
    if (!is_dir(model)) {
        char *w = config_where(dc, "model.dir_or_tag");
        int rc = esp_fail(err, "%s: %s is not a folder (espnet3 runs a packed model folder, stage 8's; a hub tag "
                          "must be downloaded first)", w, model);
        free(w);
        return rc;
    }
    const demo_pack_cfg *p = d->pack;
    const char *const *ex = p ? (const char *const *)p->exclude : NULL;
    size_t n_ex = p ? p->n_exclude : 0;
    char *model_dst = path_join(staging, "model");
    int rc = pack_copy(model, model_dst, ex, n_ex, err);
    free(model_dst);
    char *root = realpath(d->recipe_dir ? d->recipe_dir : ".", NULL);
    if (rc == 0 && p && p->n_include) {
        char **paths;
        size_t n = pack_expand((const char *const *)p->include, p->n_include, root ? root : ".", &paths);
        for (size_t i = 0; i < n; i++) {
            if (rc == 0 && path_exists(paths[i])) {
                char *abs = path_absolute(paths[i]);
                size_t l = root ? strlen(root) : 0;
                const char *rel = root && !strncmp(abs, root, l) && abs[l] == '/' ? abs + l + 1
                                  : strrchr(abs, '/') ? strrchr(abs, '/') + 1 : abs;
                char *dst = path_join(staging, rel);
                rc = pack_copy(abs, dst, ex, n_ex, err);
                free(dst), free(abs);
            } else if (!path_exists(paths[i])) {
                log_warn("%s: pack.include: %s does not exist", dc->path, paths[i]);
            }
            free(paths[i]);
        }
        free(paths);
    }
    free(root);
    const demo_ui_cfg *ui = d->ui;
    if (ui && ui->app_script)
        log_warn("%s: ui.app_script: %s runs ESPnet3's Python model; the demo's app.py runs the espnet3 binary "
                 "instead (the ui: block's title, description, inputs and outputs are kept)", dc->path, ui->app_script);
    /* ui.description: a markdown file (copied, its text shown) or inline text */
    char *desc = NULL;
    if (ui && ui->description && path_exists(ui->description)) {
        size_t len;
        desc = read_file(ui->description, READ_SMALL, &len, err);
        if (!desc) rc = -1;
        else {
            const char *base = strrchr(ui->description, '/') ? strrchr(ui->description, '/') + 1 : ui->description;
            if (rc == 0) rc = write_text(staging, base, desc, len, err);
        }
    } else if (ui && ui->description) {
        desc = xstrdup(ui->description);
    }
    if (rc == 0) {
        size_t n = (size_t)(_binary_stages_demo_app_py_end - _binary_stages_demo_app_py_start);
        rc = write_text(staging, "app.py", _binary_stages_demo_app_py_start, n, err);
    }
    if (rc == 0) {
        json_t *j = json_pack("{s:s?, s:s?, s:o, s:o}", "title", ui ? ui->title : NULL, "description", desc, "inputs",
                              io_list(ui ? ui->inputs : NULL, ui ? ui->n_inputs : 0), "outputs",
                              io_list(ui ? ui->outputs : NULL, ui ? ui->n_outputs : 0));
        char *s = json_dumps(j, JSON_INDENT(2));
        rc = write_text(staging, "ui.json", s, strlen(s), err);
        free(s);
        json_decref(j);
    }
    if (rc == 0) {
        char *req = xstrdup("");
        for (unsigned i = 0; p && i < p->n_requirements; i++) {
            char *next = xasprintf("%s%s\n", req, p->requirements[i]);
            free(req);
            req = next;
        }
        rc = write_text(staging, "requirements.txt", req, strlen(req), err);
        free(req);
    }
    if (rc == 0) { /* the demo config, pointing at the copy */
        ynode *copy = yt_copy(dc->tree);
        ynode *m = yt_map_get(copy, "model");
        if (m && m->kind == YN_MAP) yt_map_set(m, "dir_or_tag", m->mark, yt_scalar("model", 0, m->mark));
        yt_map_set(copy, "recipe_dir", copy->mark, yt_scalar(".", 0, copy->mark));
        size_t len;
        char *text = yt_emit_config(copy, &len);
        rc = write_text(staging, "demo.yaml", text, len, err);
        free(text);
        yt_free(copy);
    }
    if (rc == 0) {
        char *tmpl = NULL;
        if (p && p->readme) {
            size_t len;
            tmpl = path_exists(p->readme) ? read_file(p->readme, READ_SMALL, &len, err) : NULL;
            if (!tmpl) {
                char *w = config_where(dc, "pack.readme");
                rc = esp_fail(err, "%s: README template not found: %s", w, p->readme);
                free(w);
            }
        }
        if (rc == 0) {
            const char *keys[] = {"title", "description", "model_ref", "hf_repo"};
            const char *vals[] = {ui && ui->title ? ui->title : "espnet3 demo", desc ? desc : "", model,
                                  d->upload_demo && d->upload_demo->hf_repo ? d->upload_demo->hf_repo : ""};
            size_t n = 4;
            const char **k = xmalloc(n * sizeof *k), **v = xmalloc(n * sizeof *v);
            memcpy(k, keys, sizeof keys), memcpy(v, vals, sizeof vals);
            readme_context_add(yt_get_path(dc->tree, "pack.readme_context"), &k, &v, &n);
            char *text = readme_render(tmpl ? tmpl : default_readme, k, v, n);
            rc = write_text(staging, "README.md", text, strlen(text), err);
            free(text), free(k), free(v);
        }
        free(tmpl);
    }
    free(desc);
    return rc;
}

static char *demo_out(const demo_cfg *d)
{
    return path_absolute(d->pack && d->pack->out_dir ? d->pack->out_dir : "demo");
}

int stage_pack_demo(const stage_ctx *ctx, esp_err *err)
{
    const esp_config *dc = ctx->configs->demo;
    const demo_cfg *d = dc->typed;
    char *out = demo_out(d);
    char *staging = xasprintf("%s.staging-%ld", out, (long)getpid());
    remove_tree(staging);
    int rc = mkdir_p(staging, err);
    if (rc == 0) rc = build(dc, d, staging, err);
    if (rc == 0) rc = pack_swap_into_place(staging, out, err);
    else remove_tree(staging);
    if (rc == 0) log_info("pack_demo: %s (app.py runs espnet3 on model/: python %s/app.py AUDIO)", out, out);
    free(staging), free(out);
    return rc;
}

int stage_upload_demo(const stage_ctx *ctx, esp_err *err)
{
    const demo_cfg *d = ctx->configs->demo->typed;
    char *out = demo_out(d);
    int rc = upload_stage(ctx->configs->demo, "upload_demo", d->upload_demo, out, "space", "pack_demo, stage 10", err);
    free(out);
    return rc;
}
