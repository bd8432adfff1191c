/* ESPnet3's inference output_fn (stages/infer_output.h): the recipe's Python run once per test set
 * over what stage 6 decoded, its fields written as `utt_id value` scp files in reference order. */
#include "stages/infer_output.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/config/config_python.h"
#include "core/data/py_export.h"
#include "core/formats/text_scp.h"
#include "recipes/registry.h"

/* A field's value on one scp line: strings as they are (line breaks as spaces), numbers and
 * booleans as Python's str() writes them. */
static char *value_text(const json_t *v)
{
    if (json_is_string(v)) {
        char *s = xstrdup(json_string_value(v));
        for (char *c = s; *c; c++)
            if (*c == '\n' || *c == '\r') *c = ' ';
        return s;
    }
    if (json_is_boolean(v)) return xstrdup(json_is_true(v) ? "True" : "False");
    if (json_is_integer(v)) return xasprintf("%lld", (long long)json_integer_value(v));
    char buf[40];
    double d = json_real_value(v);
    for (int p = 1; p <= 17; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, d);
        if (strtod(buf, NULL) == d) break;
    }
    if (!strpbrk(buf, ".eEn")) strcat(buf, ".0");
    return xstrdup(buf);
}

int infer_output_fn(const esp_config *inference, const char *out_dir, esp_err *err)
{
    const inference_cfg *ic = inference->typed;
    if (!ic->output_fn) return 0;
    const char *recipe_dir = ic->dataset && ic->dataset->recipe_dir ? ic->dataset->recipe_dir : ic->recipe_dir;
    /* a built-in recipe's (no src/ folder): what hyp.scp and ref.scp already hold */
    if (!config_function_in_recipe(ic->output_fn, recipe_dir ? recipe_dir : ".") &&
        recipes_output_fn_is_builtin(ic->output_fn))
        return 0;
    const char *idx_key = ic->idx_key ? ic->idx_key : "utt_id";
    char *hyp_path = path_join(out_dir, "hyp.scp"), *ref_path = path_join(out_dir, "ref.scp");
    text_scp hyp = {0}, ref = {0};
    int rc = text_scp_read(hyp_path, &hyp, err) == 0 && text_scp_read(ref_path, &ref, err) == 0 ? 0 : -1;
    size_t n = ref.n;
    const char **ids = xcalloc(n + 1, sizeof *ids), **refs = xcalloc(n + 1, sizeof *refs),
               **hyps = xcalloc(n + 1, sizeof *hyps);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const text_scp_entry *h = text_scp_find(&hyp, ref.items[i].id);
        ids[i] = ref.items[i].id, refs[i] = ref.items[i].text, hyps[i] = h ? h->text : "";
    }
    json_t **outs = NULL;
    char *where = config_where(inference, "output_fn");
    py_env env = {.python = ic->python, .recipe_dir = recipe_dir};
    if (rc == 0) rc = py_outputs(&env, ic->output_fn, ids, refs, hyps, n, where, &outs, err);
    /* the fields: output_keys, else the first output's, less the id's */
    const char **keys = NULL;
    size_t nk = 0;
    if (rc == 0 && ic->n_output_keys) {
        keys = xcalloc(ic->n_output_keys, sizeof *keys);
        for (unsigned k = 0; k < ic->n_output_keys; k++) keys[nk++] = ic->output_keys[k];
    } else if (rc == 0 && n) {
        keys = xcalloc(json_object_size(outs[0]) + 1, sizeof *keys);
        const char *k;
        json_t *v;
        json_object_foreach(outs[0], k, v) if (strcmp(k, idx_key)) keys[nk++] = k;
    }
    for (size_t k = 0; rc == 0 && k < nk; k++) {
        if (!keys[k][0] || strchr(keys[k], '/')) {
            rc = esp_fail(err, "%s: field '%s' is not a file name (it becomes <test>/<field>.scp)", where, keys[k]);
            break;
        }
        char *path = xasprintf("%s/%s.scp", out_dir, keys[k]);
        atomic_file af;
        rc = atomic_open(&af, path, err);
        for (size_t i = 0; rc == 0 && i < n; i++) {
            json_t *id = json_object_get(outs[i], idx_key), *v = json_object_get(outs[i], keys[k]);
            if (!json_is_string(id) || !v) {
                rc = esp_fail(err, "%s: the output of utterance %s has no %s '%s' (%s)", where, ids[i],
                              !json_is_string(id) ? "idx_key" : "field", !json_is_string(id) ? idx_key : keys[k],
                              !json_is_string(id) ? "each output names its utterance: set idx_key to the field that does"
                                                  : "every output needs the fields output_keys lists");
                break;
            }
            char *text = value_text(v);
            fprintf(af.fp, "%s %s\n", json_string_value(id), text);
            free(text);
        }
        if (rc == 0) rc = atomic_commit(&af, err);
        else atomic_abort(&af);
        free(path);
    }
    if (rc == 0) log_info("infer: %s: output_fn %s wrote %zu field(s)", out_dir, ic->output_fn, nk);
    for (size_t i = 0; outs && i < n; i++) json_decref(outs[i]);
    free(outs), free(keys), free(where), free(ids), free(refs), free(hyps);
    text_scp_free(&hyp), text_scp_free(&ref);
    free(hyp_path), free(ref_path);
    return rc;
}
