/* Finding and loading a trained model for decoding; see model_files.h. */
#include "core/nn/model_files.h"

#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/base/tmpdir.h"
#include "core/formats/safetensors.h"
#include "core/formats/torch_zip.h"
#include "core/nn/espnet2_config.h"

static const char *const espnet_exts[] = {".pth", ".ckpt", ".pt"};

/* The candidates for one base path, in the order they are tried: for an ESPnet name (.pth, .ckpt,
 * .pt) our safetensors form of the same model first (ESPnet3's last.ckpt is our last/, its
 * valid.loss.ave_3best.pth our .safetensors beside it: mapped, not unpickled), then the file. */
static size_t candidates(const char *p, char **out)
{
    size_t n = 0;
    size_t len = strlen(p);
    for (size_t i = 0; i < sizeof espnet_exts / sizeof *espnet_exts; i++) {
        size_t el = strlen(espnet_exts[i]);
        if (len > el && !strcmp(p + len - el, espnet_exts[i])) {
            out[n++] = xasprintf("%.*s.safetensors", (int)(len - el), p);
            out[n++] = xasprintf("%.*s", (int)(len - el), p);
        }
    }
    out[n++] = xstrdup(p);
    out[n++] = xasprintf("%s.safetensors", p);
    return n;
}

/* A candidate that is a file is used as is; a directory must hold model.safetensors. */
static char *accept(const char *c)
{
    if (is_dir(c)) {
        char *inner = path_join(c, "model.safetensors");
        if (path_exists(inner) && !is_dir(inner)) return inner;
        free(inner);
        return NULL;
    }
    return path_exists(c) ? xstrdup(c) : NULL;
}

int model_file_resolve(const char *given, const char *exp_dir, char **out, esp_err *err)
{
    *out = NULL;
    const char *bases[2] = {given, NULL};
    char *in_exp = NULL;
    if (given[0] != '/' && exp_dir) bases[1] = in_exp = path_join(exp_dir, given);
    char tried[1024] = "";
    size_t used = 0;
    for (int b = 0; b < 2 && bases[b] && !*out; b++) {
        char *c[8];
        size_t n = candidates(bases[b], c);
        for (size_t i = 0; i < n; i++) {
            if (!*out) *out = accept(c[i]);
            if (!*out && used < sizeof tried)
                used += (size_t)snprintf(tried + used, sizeof tried - used, "%s%s", used ? ", " : "", c[i]);
            free(c[i]);
        }
    }
    free(in_exp);
    if (*out) return 0;
    return esp_fail(err, "%s: no model weights (tried %s; run train, stage 5, or point model.asr_model_file at a "
                         ".safetensors file or checkpoint directory)",
                    given, tried);
}

/* A path as messages show it: a file of an unpacked zip as "<zip>(<entry>)", since the unpacked
 * copy is gone when the message is read. */
static const char *shown_path(const model_files *f, const char *zip, const char *path, char *buf, size_t n)
{
    size_t k = f->unpacked_dir ? strlen(f->unpacked_dir) : 0;
    if (!k || !path || strncmp(path, f->unpacked_dir, k) || path[k] != '/') return path;
    snprintf(buf, n, "%s(%s)", zip, path + k + 1);
    return buf;
}

int model_files_locate(model_files *f, const inference_cfg *icfg, const char *cfg_file, esp_err *err)
{
    char sc[1024], sp[1024]; /* shown_path's buffers: the config, and the file it names */
    memset(f, 0, sizeof *f);
    const infer_model_cfg *mc = icfg->model;
    if (!mc || !mc->asr_train_config)
        return esp_fail(err, "%s: model.asr_train_config: missing (the config.yaml that train wrote in exp_dir)",
                        cfg_file);
    if (!path_exists(mc->asr_train_config))
        return esp_fail(err, "%s: model.asr_train_config: %s does not exist (run train, stage 5, first)", cfg_file,
                        mc->asr_train_config);
    /* An ESPnet2 packed model zip: its config and (unless another is named) its weights. */
    const char *model_file = mc->asr_model_file;
    char *packed_model = NULL;
    if (pt_is_zip_file(mc->asr_train_config)) {
        if (espnet2_pack_unpack(mc->asr_train_config, &f->unpacked_dir, &f->train_config_path, &packed_model, err))
            goto fail;
        f->zip = xstrdup(mc->asr_train_config);
        if (!model_file || !strcmp(model_file, mc->asr_train_config)) model_file = packed_model;
    } else {
        f->train_config_path = xstrdup(mc->asr_train_config);
    }
    if (!model_file) {
        esp_fail(err, "%s: model.asr_model_file: missing (e.g. ${exp_dir}/valid.loss.ave.safetensors)", cfg_file);
        goto fail;
    }
    /* An ESPnet2 config.yaml is read through espnet3's form of it (core/nn/espnet2_config.h). */
    ynode *converted = NULL;
    char *shown_as = f->unpacked_dir ? xasprintf("%s(%s)", mc->asr_train_config,
                                                 f->train_config_path + strlen(f->unpacked_dir) + 1)
                                     : NULL;
    int is_espnet2 = espnet2_config_convert(f->train_config_path, shown_as, &f->converted_dir, &converted,
                                            &f->tokens_origin, err);
    free(shown_as);
    if (is_espnet2 < 0) goto fail;
    /* The file is a resolved config: no template goes under it. An ESPnet2 config (ESPnet2 has no
     * ${...}) or one unpacked from a zip came from elsewhere: no resolver reads this machine for it. */
    config_load_opts lo = {.foreign = f->unpacked_dir != NULL};
    int lrc = is_espnet2 ? config_load_tree(CONFIG_TRAINING, converted, f->train_config_path, 1, &f->train_cfg, err)
                         : config_load(CONFIG_TRAINING, f->train_config_path, &lo, &f->train_cfg, err);
    if (lrc != 0) goto fail;
    lrc = model_file_resolve(model_file, icfg->exp_dir, &f->weights, err);
    free(packed_model);
    packed_model = NULL;
    if (lrc != 0) goto fail;
    const training_cfg *t = model_files_training(f);
    /* The tokenizer as ESPnet's Speech2Text picks it: its token_type/bpemodel over the training config's. */
    tokenizer_spec ts;
    const char *zip = mc->asr_train_config, *config = shown_path(f, zip, f->train_config_path, sc, sizeof sc);
    if (tokenizer_spec_resolve(&ts, t->tokenizer, mc->token_type ? mc->token_type : t->token_type,
                               mc->bpemodel ? mc->bpemodel : t->bpemodel, config, err) != 0)
        goto fail;
    f->tokens = ts.tokens_path, f->token_type = ts.type, f->bpemodel = ts.model_path;
    if (!path_exists(f->tokens)) {
        esp_fail(err, "%s: no token list (named by tokenizer.save_path in %s)", shown_path(f, zip, f->tokens, sp, sizeof sp),
                 config);
        goto fail;
    }
    if (f->bpemodel && !path_exists(f->bpemodel)) {
        esp_fail(err, "%s: no SentencePiece model (named by %s; run train_tokenizer, stage 2)",
                 shown_path(f, zip, f->bpemodel, sp, sizeof sp), mc->bpemodel ? cfg_file : config);
        goto fail;
    }
    const model_cfg *m = t->model;
    if (m && m->normalize && !strcmp(m->normalize, "global_mvn")) {
        if (!m->normalize_conf || !m->normalize_conf->stats_file) {
            esp_fail(err, "%s: model.normalize_conf.stats_file: missing (global_mvn needs feats_stats.npz)", config);
            goto fail;
        }
        f->stats = xstrdup(m->normalize_conf->stats_file);
        if (!path_exists(f->stats)) {
            esp_fail(err, "%s: no feature statistics (named by model.normalize_conf.stats_file in %s)",
                     shown_path(f, zip, f->stats, sp, sizeof sp), config);
            goto fail;
        }
    }
    return 0;
fail:
    free(packed_model);
    model_files_free(f);
    return -1;
}

int lm_files_locate(model_files *f, const inference_cfg *icfg, const char *cfg_file, esp_err *err)
{
    memset(f, 0, sizeof *f);
    const infer_model_cfg *mc = icfg->model;
    if (!mc || !mc->lm_train_config)
        return esp_fail(err, "%s: model.lm_train_config: missing (lm_weight %g needs the config.yaml that training the "
                        "LM wrote in its exp_dir)", cfg_file, mc ? mc->lm_weight : 0.0);
    if (!mc->lm_file)
        return esp_fail(err, "%s: model.lm_file: missing (e.g. ${lm_exp_dir}/valid.loss.ave.safetensors)", cfg_file);
    if (!path_exists(mc->lm_train_config))
        return esp_fail(err, "%s: model.lm_train_config: %s does not exist (train the LM first: stage 5 with its "
                        "training config)", cfg_file, mc->lm_train_config);
    f->train_config_path = xstrdup(mc->lm_train_config);
    config_load_opts lo = {0};
    if (config_load(CONFIG_TRAINING, f->train_config_path, &lo, &f->train_cfg, err) != 0) goto fail;
    const training_cfg *t = model_files_training(f);
    if (!t->lm_task) {
        esp_fail(err, "%s: model.lm_train_config: %s is not a language model's training config (task: "
                 "espnet3.systems.esp2_asr.lm_task.LMTask, model.lm: transformer)", cfg_file, f->train_config_path);
        goto fail;
    }
    if (model_file_resolve(mc->lm_file, t->exp_dir, &f->weights, err) != 0) goto fail;
    tokenizer_spec ts;
    if (tokenizer_spec_resolve(&ts, t->tokenizer, t->token_type, t->bpemodel, f->train_config_path, err) != 0)
        goto fail;
    f->tokens = ts.tokens_path, f->token_type = ts.type, f->bpemodel = ts.model_path;
    if (!path_exists(f->tokens)) {
        esp_fail(err, "%s: no token list (named by tokenizer.save_path in %s)", f->tokens, f->train_config_path);
        goto fail;
    }
    return 0;
fail:
    model_files_free(f);
    return -1;
}

/* Each occurrence of `path` in err->msg (with the ":N" line after it, or 0) replaced by what
 * show(N) writes. */
typedef size_t (*shown_fn)(const model_files *f, const char *rest, size_t rest_len, long line, char *out, size_t cap);

static void rewrite_path(const model_files *f, esp_err *err, const char *path, int with_line, shown_fn show)
{
    size_t k = strlen(path);
    char out[sizeof err->msg];
    size_t n = 0;
    for (const char *p = err->msg; *p && n + 1 < sizeof out;) {
        if (strncmp(p, path, k) || (p[k] && !strchr("/: ,;()'\"", p[k]))) {
            out[n++] = *p++;
            continue;
        }
        const char *rest = p + k, *end = rest;
        if (*rest == '/') end = rest + strcspn(rest, ": ,;()'\"");
        long line = 0;
        if (with_line && *end == ':' && end[1] >= '0' && end[1] <= '9') {
            char *after;
            line = strtol(end + 1, &after, 10);
            end = after;
        }
        n += show(f, rest, (size_t)(end - rest), line, out + n, sizeof out - n);
        if (n >= sizeof out) n = sizeof out - 1;
        p = end;
    }
    out[n] = '\0';
    memcpy(err->msg, out, n + 1);
}

/* "<converted>/tokens/tokens.txt:N" -> the token_list file's line N, or the inline item's place. */
static size_t show_token_origin(const model_files *f, const char *rest, size_t rest_len, long line, char *out, size_t cap)
{
    (void)rest, (void)rest_len;
    const espnet2_tokens_origin *o = &f->tokens_origin;
    if (o->file) return (size_t)(line ? snprintf(out, cap, "%s:%ld", o->file, line) : snprintf(out, cap, "%s", o->file));
    if (line >= 1 && (size_t)line <= o->n)
        return (size_t)snprintf(out, cap, "%s:%d:%d", o->marks[line - 1].file, o->marks[line - 1].line,
                                o->marks[line - 1].col);
    return (size_t)snprintf(out, cap, "%s (its token_list)", o->n ? o->marks[0].file : "the ESPnet2 config");
}

/* "<unpacked>/<entry>" -> "<zip>(<entry>)". */
static size_t show_zip_entry(const model_files *f, const char *rest, size_t rest_len, long line, char *out, size_t cap)
{
    (void)line;
    if (rest_len < 1) return (size_t)snprintf(out, cap, "%s", f->zip);
    return (size_t)snprintf(out, cap, "%s(%.*s)", f->zip, (int)rest_len - 1, rest + 1);
}

void model_files_show_err(const model_files *f, esp_err *err)
{
    if (f->converted_dir && (f->tokens_origin.file || f->tokens_origin.marks)) {
        char *tokens = xasprintf("%s/tokens/tokens.txt", f->converted_dir);
        rewrite_path(f, err, tokens, 1, show_token_origin);
        free(tokens);
    }
    if (f->unpacked_dir && f->zip) rewrite_path(f, err, f->unpacked_dir, 0, show_zip_entry);
}

void model_files_free(model_files *f)
{
    if (f->train_cfg) config_free(f->train_cfg);
    tmpdir_remove(f->converted_dir);
    espnet2_tokens_origin_free(&f->tokens_origin);
    tmpdir_remove(f->unpacked_dir);
    free(f->zip);
    free(f->train_config_path);
    free(f->weights);
    free(f->tokens);
    free(f->bpemodel);
    free(f->stats);
    memset(f, 0, sizeof *f);
}

/* "256,80" into buf (shapes here have at most ST_MAX_DIMS small dimensions). */
static void shape_text(char *buf, size_t n, const int64_t *shape, int ndim)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int d = 0; d < ndim && used < n; d++)
        used += (size_t)snprintf(buf + used, n - used, "%s%lld", d ? "," : "", (long long)shape[d]);
}

void model_state_tensors(const param_table *t, const float *state, int64_t *counts, st_tensor *out)
{
    for (size_t i = 0; i < t->n; i++) {
        const param_info *p = &t->items[i];
        out[i] = (st_tensor){.name = p->name, .dtype = ST_F32, .ndim = p->ndim, .data = state + p->offset};
        for (int k = 0; k < p->ndim; k++) out[i].shape[k] = p->shape[k];
        if (p->kind == PARAM_COUNTER) {
            counts[i] = (int64_t)state[p->offset];
            out[i].dtype = ST_I64, out[i].data = &counts[i];
        }
    }
}

int model_tensor_get(const st_file *f, const char *name, const param_info *p, float *dst, esp_err *err)
{
    char legacy[128];
    if (!st_get(f, name) && param_legacy_name(name, legacy, sizeof legacy) && st_get(f, legacy))
        name = legacy; /* a checkpoint written before espnet3 used ESPnet's names */
    if (p->kind != PARAM_COUNTER) {
        const float *v;
        if (st_get_f32(f, name, p->ndim, p->shape, &v, err) != 0) return -1;
        memcpy(dst, v, p->count * sizeof *v);
        return 0;
    }
    const st_tensor *t = st_get(f, name);
    if (!t) return esp_fail(err, "%s: no tensor '%s' (was the file written for another model?)", f->path, name);
    if (st_numel(t) != 1 || (t->dtype != ST_I64 && t->dtype != ST_I32 && t->dtype != ST_F32))
        return esp_fail(err, "%s: tensor '%s' is %s of %lld values, expected one integer (a BatchNorm counter)", f->path,
                        name, st_dtype_name(t->dtype), (long long)st_numel(t));
    dst[0] = t->dtype == ST_I64   ? (float)*(const int64_t *)t->data
             : t->dtype == ST_I32 ? (float)*(const int32_t *)t->data
                                  : *(const float *)t->data;
    return 0;
}

int model_weights_open(const char *path, st_file *out, esp_err *err)
{
    if (pt_is_legacy_file(path))
        return esp_fail(err, "%s: a PyTorch file in the legacy format (before PyTorch 1.6, or "
                        "_use_new_zipfile_serialization=False), which espnet3 does not read (load it and torch.save it "
                        "again with PyTorch >= 1.6)", path);
    return pt_is_zip_file(path) ? pt_read(path, out, err) : st_read(path, out, err);
}

/* Tensors of ESPnet's model that espnet3 computes itself: the frontend's mel matrix (ours is
 * librosa's too) and GlobalMVN's buffers (ours come from normalize_conf.stats_file, as ESPnet's). */
static int espnet_buffer(const char *name)
{
    if (!strncmp(name, "model.", 6)) name += 6;
    return !strcmp(name, "frontend.logmel.melmat") || !strcmp(name, "normalize.mean") ||
           !strcmp(name, "normalize.std");
}

int asr_model_load_weights(asr_model *m, const char *path, esp_err *err)
{
    st_file sf;
    if (model_weights_open(path, &sf, err) != 0) return -1;
    const param_table *pt = &m->table;
    unsigned char *seen = xcalloc(pt->n ? pt->n : 1, 1);
    float *host = xcalloc(pt->state_total ? pt->state_total : 1, sizeof *host);
    size_t skipped = 0;
    const char *first_skipped = NULL;
    int rc = 0;
    for (size_t i = 0; i < sf.n && rc == 0; i++) {
        const st_tensor *t = &sf.tensors[i];
        const param_info *p = param_find_alias(pt, t->name);
        if (!p && espnet_buffer(t->name)) continue;
        if (!p) {
            if (!skipped++) first_skipped = t->name;
            continue;
        }
        size_t k = (size_t)(p - pt->items);
        if (seen[k]) {
            rc = esp_fail(err, "%s: tensor %s: parameter %s appears twice", path, t->name, p->name);
            break;
        }
        seen[k] = 1;
        if (p->kind == PARAM_COUNTER) {
            rc = model_tensor_get(&sf, t->name, p, host + p->offset, err);
            continue;
        }
        int same = t->dtype == ST_F32 && t->ndim == p->ndim;
        for (int d = 0; same && d < p->ndim; d++) same = t->shape[d] == p->shape[d];
        if (!same) {
            char want[64], got[64];
            shape_text(want, sizeof want, p->shape, p->ndim);
            shape_text(got, sizeof got, t->shape, t->ndim);
            rc = esp_fail(err, "%s: tensor %s is %s [%s], the model needs F32 [%s] (a model of another size? check "
                               "model.encoder_conf in asr_train_config)",
                          path, t->name, st_dtype_name(t->dtype), got, want);
            break;
        }
        memcpy(host + p->offset, t->data, p->count * sizeof(float));
    }
    for (size_t k = 0; k < pt->n && rc == 0; k++)
        if (!seen[k])
            rc = esp_fail(err, "%s: no tensor %s (not a model of this architecture, or a trainer-state file)", path,
                          pt->items[k].name);
    if (rc == 0) asr_model_state_from_host(m, host);
    if (rc == 0 && skipped)
        log_warn("%s: %zu tensors that this CTC model does not have were skipped (first: %s)", path, skipped,
                 first_skipped);
    free(host);
    free(seen);
    st_close(&sf);
    return rc;
}

/* ---- init_param ------------------------------------------------------------------------------ */

static int starts_with_any(const char *name, const char *list)
{
    if (!list || !*list) return 0;
    const char *p = list;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (n && !strncmp(name, p, n)) return 1;
        if (!e) break;
        p = e + 1;
    }
    return 0;
}

int model_init_param(const param_table *t, float *state, const char *spec, int ignore_mismatch, size_t *n_loaded,
                     esp_err *err)
{
    *n_loaded = 0;
    char *buf = xstrdup(spec), *parts[4] = {buf, NULL, NULL, NULL};
    for (int i = 1; i < 4; i++) {
        char *c = parts[i - 1] ? strchr(parts[i - 1], ':') : NULL;
        if (!c) break;
        *c = '\0';
        parts[i] = c + 1;
    }
    const char *path = parts[0], *src = parts[1] && *parts[1] ? parts[1] : NULL,
               *dst = parts[2] && *parts[2] ? parts[2] : NULL, *excl = parts[3];
    char shown[300];
    if (excl && strchr(excl, ':')) { /* ESPnet2's load_pretrained_model raises on it too */
        free(buf);
        return esp_fail(err, "init_param %s: more than 4 fields (<file>:<src_key>:<dst_key>:<exclude_keys>)",
                        esp_shown(spec, shown, sizeof shown));
    }
    st_file f;
    esp_err why;
    if (model_weights_open(path, &f, &why) != 0) {
        free(buf);
        return esp_fail(err, "init_param %s: %s", esp_shown(spec, shown, sizeof shown), why.msg);
    }
    int rc = 0;
    size_t sl = src ? strlen(src) : 0;
    for (size_t i = 0; i < f.n && rc == 0; i++) {
        const st_tensor *x = &f.tensors[i];
        if (starts_with_any(x->name, excl)) continue;
        const char *nm = x->name;
        if (src) {
            if (strncmp(nm, src, sl) || nm[sl] != '.') continue;
            nm += sl + 1;
        }
        char full[256];
        snprintf(full, sizeof full, "%s%s%s", dst ? dst : "", dst ? "." : "", nm);
        const param_info *p = param_find_alias(t, full);
        if (!p && espnet_buffer(full)) continue;
        if (!p) {
            rc = esp_fail(err, "init_param %s: %s: tensor %s is not a parameter of this model (as %s; select with "
                               "src_key / dst_key or drop it with exclude: path:src_key:dst_key:exclude)",
                          spec, path, x->name, full);
            break;
        }
        int same = x->ndim == p->ndim && (x->dtype == ST_F32 || (p->kind == PARAM_COUNTER && x->dtype == ST_I64));
        for (int d = 0; same && d < p->ndim; d++) same = x->shape[d] == p->shape[d];
        if (!same) {
            if (ignore_mismatch) {
                log_warn("init_param %s: %s has another shape or dtype than %s; kept as initialized "
                         "(ignore_init_mismatch)", spec, x->name, p->name);
                continue;
            }
            char want[64], got[64];
            shape_text(want, sizeof want, p->shape, p->ndim);
            shape_text(got, sizeof got, x->shape, x->ndim);
            rc = esp_fail(err, "init_param %s: %s: tensor %s is %s [%s], the model's %s is [%s] "
                               "(ignore_init_mismatch: true skips it)",
                          spec, path, x->name, st_dtype_name(x->dtype), got, p->name, want);
            break;
        }
        rc = model_tensor_get(&f, x->name, p, state + p->offset, err);
        if (rc == 0) (*n_loaded)++;
    }
    st_close(&f);
    free(buf);
    return rc;
}
