/* Reading rir_scp, noise_scp and their keys of dataset.preprocessor, and the files they list
 * (core/data/noise_rir.h); the numbers' ranges and defaults are core/config/config_values.c's. */
#include "core/data/noise_rir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/config/config_schema.h"
#include "core/config/config_values.h"
#include "core/data/audio.h"

#define PRE "dataset.preprocessor"

/* A number of pre (or its declared default) in its range rule (core/config/config_values.c). */
static int get_number(const ynode *pre, const char *key, double *out, esp_err *err)
{
    ynode *owned;
    const ynode *n = config_value_or_default(pre, PRE, key, &owned);
    char *p = xasprintf(PRE ".%s", key);
    int rc = config_read_number(n, p, p, out, err);
    free(p);
    yt_free(owned);
    return rc;
}

/* Reads one scp and every file it lists. */
static int read_scp(const char *scp, const ynode *where, const char *key, nr_signal **v, size_t *n, esp_err *err)
{
    char **paths;
    size_t np;
    if (nr_scp_read(scp, &paths, &np, err) != 0) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        return config_fail_node(err, where, key, "%s", msg);
    }
    int rc = 0;
    for (size_t i = 0; i < np && rc == 0; i++) {
        float *f = NULL;
        size_t len_f = 0;
        int fs = 0;
        esp_err e2 = {0};
        if (audio_read_fs(paths[i], 0, "model.frontend_conf.fs", &f, &len_f, &fs, &e2) != 0) {
            rc = esp_fail(err, "%s: %s", scp, e2.msg);
            break;
        }
        if (len_f == 0) {
            free(f);
            rc = esp_fail(err, "%s: %s has no samples", scp, paths[i]);
            break;
        }
        *v = xrealloc(*v, (*n + 1) * sizeof **v);
        nr_signal *sig = &(*v)[(*n)++];
        sig->n = len_f;
        sig->fs = fs;
        sig->x = xmalloc(len_f * sizeof *sig->x);
        for (size_t k = 0; k < len_f; k++) sig->x[k] = f[k];
        sig->path = xstrdup(paths[i]);
        free(f);
    }
    nr_scp_free(paths, np);
    return rc;
}

static int read_scps(const ynode *pre, const char *key, const char *path, nr_signal **v, size_t *n,
                     esp_err *err)
{
    const ynode *node = yt_map_get(pre, key);
    if (!node || yt_is_null(node)) return 0;
    char *p = xasprintf("%s.%s", path, key);
    int rc = 0;
    if (node->kind == YN_SCALAR) {
        rc = read_scp(node->str, node, p, v, n, err);
    } else if (node->kind == YN_SEQ) {
        for (size_t i = 0; i < node->n && rc == 0; i++) {
            const ynode *it = node->items[i];
            if (it->kind != YN_SCALAR) rc = config_fail_node(err, it, p, "expected a path, got %s", yt_kind_name(it));
            else rc = read_scp(it->str, it, p, v, n, err);
        }
    } else {
        rc = config_fail_node(err, node, p, "expected a path or a list of paths, got %s", yt_kind_name(node));
    }
    if (rc == 0 && *n == 0) rc = config_fail_node(err, node, p, "lists no files");
    free(p);
    return rc;
}

int noise_rir_conf_parse(const ynode *pre, noise_rir_conf *out, esp_err *err)
{
    memset(out, 0, sizeof *out);
    if (!pre || pre->kind != YN_MAP) return 0;
    int rc = get_number(pre, "rir_apply_prob", &out->rir_prob, err);
    if (rc == 0) rc = get_number(pre, "noise_apply_prob", &out->noise_prob, err);
    if (rc == 0) rc = get_number(pre, "short_noise_thres", &out->short_thres, err);
    if (rc == 0) {
        ynode *owned;
        const ynode *db = config_value_or_default(pre, PRE, "noise_db_range", &owned);
        rc = config_db_range(db, PRE ".noise_db_range", &out->db_lo, &out->db_hi, err);
        yt_free(owned);
    }
    if (rc == 0) rc = read_scps(pre, "rir_scp", PRE, &out->rirs, &out->n_rirs, err);
    if (rc == 0) rc = read_scps(pre, "noise_scp", PRE, &out->noises, &out->n_noises, err);
    if (rc != 0) noise_rir_conf_free(out);
    return rc;
}

int noise_rir_conf_from_tree(const ynode *root, noise_rir_conf *out, esp_err *err)
{
    return noise_rir_conf_parse(root ? yt_get_path(root, PRE) : NULL, out, err);
}

int noise_rir_conf_check_fs(const noise_rir_conf *c, int fs, const char *fs_key, esp_err *err)
{
    for (int k = 0; k < 2; k++) {
        const nr_signal *v = k ? c->noises : c->rirs;
        for (size_t i = 0, n = k ? c->n_noises : c->n_rirs; i < n; i++)
            if (v[i].fs != fs)
                return esp_fail(err, "%s: %d Hz, but %s is %d (dataset.preprocessor.%s: give files at %d Hz)",
                                v[i].path, v[i].fs, fs_key, fs, k ? "noise_scp" : "rir_scp", fs);
    }
    return 0;
}

int noise_rir_conf_active(const noise_rir_conf *c)
{
    return (c->n_rirs && c->rir_prob > 0) || (c->n_noises && c->noise_prob > 0);
}

static nr_signal *copy_signals(const nr_signal *v, size_t n)
{
    if (!n) return NULL;
    nr_signal *out = xmalloc(n * sizeof *out);
    for (size_t i = 0; i < n; i++) {
        out[i].n = v[i].n;
        out[i].x = xmalloc(v[i].n * sizeof *out[i].x);
        memcpy(out[i].x, v[i].x, v[i].n * sizeof *out[i].x);
        out[i].path = xstrdup(v[i].path);
    }
    return out;
}

void noise_rir_conf_copy(noise_rir_conf *dst, const noise_rir_conf *src)
{
    *dst = *src;
    dst->rirs = copy_signals(src->rirs, src->n_rirs);
    dst->noises = copy_signals(src->noises, src->n_noises);
}

static void free_signals(nr_signal *v, size_t n)
{
    for (size_t i = 0; i < n; i++) free(v[i].x), free(v[i].path);
    free(v);
}

void noise_rir_conf_free(noise_rir_conf *c)
{
    free_signals(c->rirs, c->n_rirs);
    free_signals(c->noises, c->n_noises);
    memset(c, 0, sizeof *c);
}
