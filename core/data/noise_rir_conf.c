/* Reading rir_scp, noise_scp and their keys of dataset.preprocessor from the typed view, and the
 * files they list (core/data/noise_rir.h); the numbers' ranges and defaults are
 * core/config/config_values.c's. */
#include "core/data/noise_rir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/config/config_values.h"
#include "core/data/audio.h"

#define PRE "dataset.preprocessor"

/* Reads every file an scp lists. */
static int read_files(const char *scp, char *const *paths, size_t np, nr_signal **v, size_t *n, esp_err *err)
{
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
    return rc;
}

/* The files of one list key (key: its path from the root, for messages at its line). */
static int read_scps(const esp_config *training, char *const *scps, unsigned n_scps, const char *key, nr_signal **v,
                     size_t *n, esp_err *err)
{
    if (!n_scps) return 0;
    char *where = config_where(training, key);
    int rc = 0;
    for (unsigned i = 0; i < n_scps && rc == 0; i++) {
        char **paths;
        size_t np;
        if (nr_scp_read(scps[i], &paths, &np, err) != 0) {
            char msg[sizeof err->msg];
            snprintf(msg, sizeof msg, "%s", err->msg);
            rc = esp_fail(err, "%s: %s", where, msg);
            break;
        }
        rc = read_files(scps[i], paths, np, v, n, err);
        nr_scp_free(paths, np);
    }
    if (rc == 0 && *n == 0) rc = esp_fail(err, "%s: lists no files", where);
    free(where);
    return rc;
}

int noise_rir_conf_read(const esp_config *training, noise_rir_conf *out, esp_err *err)
{
    memset(out, 0, sizeof *out);
    const training_cfg *t = training->typed;
    const preprocessor_cfg *pc = t->dataset ? t->dataset->preprocessor : NULL;
    if (!pc) return 0;
    /* Declared defaults, ranged when the config loaded. */
    out->rir_prob = pc->rir_apply_prob, out->noise_prob = pc->noise_apply_prob, out->short_thres = pc->short_noise_thres;
    ESP_CHECK(pc->noise_db_range && config_db_range_of(pc->noise_db_range, &out->db_lo, &out->db_hi));
    int rc = read_scps(training, pc->rir_scp, pc->n_rir_scp, PRE ".rir_scp", &out->rirs, &out->n_rirs, err);
    if (rc == 0) rc = read_scps(training, pc->noise_scp, pc->n_noise_scp, PRE ".noise_scp", &out->noises, &out->n_noises, err);
    if (rc != 0) noise_rir_conf_free(out);
    return rc;
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
