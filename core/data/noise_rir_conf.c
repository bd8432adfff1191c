/* Reading rir_scp, noise_scp and their keys of dataset.preprocessor, and the files they list
 * (core/data/noise_rir.h). */
#include "core/data/noise_rir.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/config/config_schema.h"
#include "core/data/audio.h"

#define NR_MAX_DB 100.0

static int get_prob(const ynode *pre, const char *key, const char *path, double *out, esp_err *err)
{
    const ynode *n = yt_map_get(pre, key);
    *out = 1.0; /* ESPnet's default */
    if (!n || yt_is_null(n)) return 0;
    char *p = xasprintf("%s.%s", path, key);
    double v;
    int rc = 0;
    if (n->kind != YN_SCALAR || n->quoted || !yt_as_float(n, &v))
        rc = config_fail_node(err, n, p, "expected a number in [0, 1], got %s", yt_kind_name(n));
    else if (!(v >= 0 && v <= 1))
        rc = config_fail_node(err, n, p, "%g is outside [0, 1]", v);
    else
        *out = v;
    free(p);
    return rc;
}

/* "3_10" -> [3, 10]; "5" -> [5, 5] (ESPnet's format). */
static int get_db_range(const ynode *pre, const char *path, double *lo, double *hi, esp_err *err)
{
    const ynode *n = yt_map_get(pre, "noise_db_range");
    *lo = 3, *hi = 10;
    if (!n || yt_is_null(n)) return 0;
    char *p = xasprintf("%s.noise_db_range", path);
    int rc = -1;
    if (n->kind == YN_SCALAR) {
        const char *s = n->str;
        char *end;
        errno = 0;
        double a = strtod(s, &end), b = a;
        int ok = end != s && errno == 0;
        if (ok && *end == '_') {
            const char *s2 = end + 1;
            b = strtod(s2, &end);
            ok = end != s2 && errno == 0;
        }
        ok = ok && *end == '\0' && isfinite(a) && isfinite(b) && fabs(a) <= NR_MAX_DB && fabs(b) <= NR_MAX_DB;
        if (ok && a <= b) {
            *lo = a, *hi = b;
            rc = 0;
        } else if (ok) {
            rc = config_fail_node(err, n, p, "'%s': low %g is above high %g (write \"low_high\")", s, a, b);
        }
    }
    if (rc != 0 && !err->msg[0])
        rc = config_fail_node(err, n, p, "expected \"low_high\" in dB within +-%g, e.g. \"3_10\" (got %s '%s')",
                              NR_MAX_DB, yt_kind_name(n), n->kind == YN_SCALAR ? n->str : "...");
    free(p);
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

int noise_rir_conf_parse(const ynode *pre, const char *path, noise_rir_conf *out, esp_err *err)
{
    memset(out, 0, sizeof *out);
    out->rir_prob = out->noise_prob = 1.0;
    out->db_lo = 3, out->db_hi = 10, out->short_thres = 0.5;
    if (!pre || pre->kind != YN_MAP) return 0;
    int rc = get_prob(pre, "rir_apply_prob", path, &out->rir_prob, err);
    if (rc == 0) rc = get_prob(pre, "noise_apply_prob", path, &out->noise_prob, err);
    if (rc == 0) rc = get_db_range(pre, path, &out->db_lo, &out->db_hi, err);
    if (rc == 0) {
        const ynode *t = yt_map_get(pre, "short_noise_thres");
        if (t && !yt_is_null(t)) {
            char *p = xasprintf("%s.short_noise_thres", path);
            double v;
            if (t->kind != YN_SCALAR || t->quoted || !yt_as_float(t, &v) || !(v >= 0 && v <= 1))
                rc = config_fail_node(err, t, p, "expected a number in [0, 1]");
            else
                out->short_thres = v;
            free(p);
        }
    }
    if (rc == 0) rc = read_scps(pre, "rir_scp", path, &out->rirs, &out->n_rirs, err);
    if (rc == 0) rc = read_scps(pre, "noise_scp", path, &out->noises, &out->n_noises, err);
    if (rc != 0) noise_rir_conf_free(out);
    return rc;
}

int noise_rir_conf_from_tree(const ynode *root, noise_rir_conf *out, esp_err *err)
{
    return noise_rir_conf_parse(root ? yt_get_path(root, "dataset.preprocessor") : NULL, "dataset.preprocessor", out,
                                err);
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
