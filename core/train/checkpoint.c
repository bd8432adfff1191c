#include "core/train/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/base/fsio.h"

void (*ckpt_crash_hook)(const char *point);

static void crash_point(const char *point)
{
    if (ckpt_crash_hook) ckpt_crash_hook(point);
}

#define MODEL_FILE "model.safetensors"
#define STATE_FILE "trainer_state.safetensors"
#define JSON_FILE "trainer_state.json"
#define STATE_FORMAT "espnet3 trainer state 1"
#define TMP_PREFIX ".tmp-"

/* ---- small file-system helpers -------------------------------------------------------- */

static void fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}


/* Deletes a checkpoint directory so that no half-deleted epoch=... directory can be seen: it is
 * renamed to a temporary name first. */
static void remove_checkpoint(const ckpt_manager *m, const char *name)
{
    char *src = path_join(m->ckpt_dir, name);
    char *dst = xasprintf("%s/" TMP_PREFIX "del-%s.%ld", m->ckpt_dir, name, (long)getpid());
    remove_tree(dst);
    if (rename(src, dst) == 0) remove_tree(dst);
    else log_warn("%s: cannot remove old checkpoint: %s", src, strerror(errno));
    free(src);
    free(dst);
}

static int is_ckpt_name(const char *s)
{
    return strncmp(s, "epoch=", 6) == 0 && strstr(s, "-step=") != NULL && !strchr(s, '/');
}

/* ---- tables ---------------------------------------------------------------------------- */

static void tables_free(ckpt_table *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < t[i].n; j++) free(t[i].entries[j].dir);
        free(t[i].entries);
        free(t[i].monitor);
    }
    free(t);
}

static ckpt_table *tables_copy(const ckpt_table *t, size_t n)
{
    ckpt_table *c = xcalloc(n ? n : 1, sizeof *c);
    for (size_t i = 0; i < n; i++) {
        c[i] = t[i];
        c[i].monitor = xstrdup(t[i].monitor);
        c[i].entries = xcalloc(t[i].n + 1, sizeof *c[i].entries);
        for (size_t j = 0; j < t[i].n; j++) {
            c[i].entries[j] = t[i].entries[j];
            c[i].entries[j].dir = xstrdup(t[i].entries[j].dir);
        }
    }
    return c;
}

/* Ranks a checkpoint as Lightning's ModelCheckpoint does: it enters while fewer than k are kept,
 * or when strictly better than the worst kept one (ties keep the older); NaN never enters. */
static void table_offer(ckpt_table *t, const char *dir, int64_t epoch, int64_t step, double v, int in_epoch)
{
    if (t->k <= 0 || isnan(v)) return;
    size_t pos = t->n;
    while (pos > 0 && (t->maximize ? v > t->entries[pos - 1].value : v < t->entries[pos - 1].value)) pos--;
    if (pos >= (size_t)t->k) return;
    if (t->n == (size_t)t->k) free(t->entries[--t->n].dir);
    t->entries = xrealloc(t->entries, (t->n + 1) * sizeof *t->entries);
    memmove(t->entries + pos + 1, t->entries + pos, (t->n - pos) * sizeof *t->entries);
    t->entries[pos] = (ckpt_entry){xstrdup(dir), epoch, step, v, in_epoch};
    t->n++;
}

static int retained(const ckpt_manager *m, const char *name)
{
    if (m->last && strcmp(m->last, name) == 0) return 1;
    for (size_t i = 0; i < m->n_tables; i++)
        for (size_t j = 0; j < m->tables[i].n; j++)
            if (strcmp(m->tables[i].entries[j].dir, name) == 0) return 1;
    return 0;
}

/* ---- trainer_state.json ---------------------------------------------------------------- */

/* JSON has no NaN or infinity: those metric values are stored as the strings Python prints. */
static json_t *json_metric(double v)
{
    if (isnan(v)) return json_string("nan");
    if (isinf(v)) return json_string(v < 0 ? "-inf" : "inf");
    return json_real(v);
}

static int metric_from_json(json_t *j, double *out)
{
    if (json_is_number(j)) *out = json_number_value(j);
    else if (json_is_string(j) && strcmp(json_string_value(j), "nan") == 0) *out = NAN;
    else if (json_is_string(j) && strcmp(json_string_value(j), "inf") == 0) *out = INFINITY;
    else if (json_is_string(j) && strcmp(json_string_value(j), "-inf") == 0) *out = -INFINITY;
    else return -1;
    return 0;
}

static char *state_json(const ckpt_info *info, const ckpt_table *tables, size_t n_tables)
{
    json_t *root = json_object();
    json_object_set_new(root, "format", json_string(STATE_FORMAT));
    json_object_set_new(root, "epoch", json_integer(info->epoch));
    json_object_set_new(root, "step", json_integer(info->step));
    json_object_set_new(root, "config_hash", info->config_hash ? json_string(info->config_hash) : json_null());
    json_t *metrics = json_object();
    for (size_t i = 0; i < info->n_metrics; i++)
        json_object_set_new(metrics, info->metrics[i].name,
                            info->metrics[i].is_int ? json_integer((json_int_t)info->metrics[i].value)
                                                    : json_metric(info->metrics[i].value));
    json_object_set_new(root, "metrics", metrics);
    json_t *rng = json_array(); /* hex strings: JSON integers stop at 2^63 (and at 2^53 in many readers) */
    for (size_t i = 0; i < info->n_rng; i++) {
        char hex[24];
        snprintf(hex, sizeof hex, "0x%016" PRIx64, info->rng[i]);
        json_array_append_new(rng, json_string(hex));
    }
    json_object_set_new(root, "rng", rng);
    json_t *counters = json_object();
    for (size_t i = 0; i < info->n_counters; i++)
        json_object_set_new(counters, info->counters[i].name, json_integer(info->counters[i].value));
    json_object_set_new(root, "counters", counters);
    json_t *best = json_array();
    for (size_t i = 0; i < n_tables; i++) {
        json_t *entries = json_array();
        for (size_t j = 0; j < tables[i].n; j++) {
            const ckpt_entry *e = &tables[i].entries[j];
            json_t *entry = json_pack("{s:s, s:I, s:I, s:o}", "dir", e->dir, "epoch", (json_int_t)e->epoch, "step",
                                      (json_int_t)e->step, "value", json_metric(e->value));
            /* only when set: the files of runs without validation inside epochs stay as they were */
            if (e->in_epoch) json_object_set_new(entry, "in_epoch", json_true());
            json_array_append_new(entries, entry);
        }
        json_array_append_new(best, json_pack("{s:s, s:I, s:s, s:o}", "monitor", tables[i].monitor, "k",
                                              (json_int_t)tables[i].k, "mode", tables[i].maximize ? "max" : "min",
                                              "entries", entries));
    }
    json_object_set_new(root, "best_k", best);
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    ESP_CHECK(text != NULL);
    size_t n = strlen(text);
    text = xrealloc(text, n + 2);
    text[n] = '\n';
    text[n + 1] = '\0';
    return text;
}

static json_t *load_state_json(const char *dir, esp_err *err)
{
    char *path = path_join(dir, JSON_FILE);
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) esp_fail(err, "%s:%d: %s", path, jerr.line, jerr.text);
    else if (!json_is_object(root) || !json_is_string(json_object_get(root, "format")) ||
             strcmp(json_string_value(json_object_get(root, "format")), STATE_FORMAT) != 0 ||
             !json_is_integer(json_object_get(root, "epoch")) || !json_is_integer(json_object_get(root, "step"))) {
        esp_fail(err, "%s: not an espnet3 trainer state (expected format \"" STATE_FORMAT "\", epoch, step)", path);
        json_decref(root);
        root = NULL;
    } else if (json_integer_value(json_object_get(root, "epoch")) < 0 ||
               json_integer_value(json_object_get(root, "step")) < 0) {
        esp_fail(err, "%s: epoch %" JSON_INTEGER_FORMAT " and step %" JSON_INTEGER_FORMAT " must be >= 0 (corrupt file)",
                 path, json_integer_value(json_object_get(root, "epoch")),
                 json_integer_value(json_object_get(root, "step")));
        json_decref(root);
        root = NULL;
    }
    free(path);
    return root;
}

/* Complete means: the directory holds both tensor files and a readable trainer_state.json. */
static json_t *load_complete(const ckpt_manager *m, const char *name, esp_err *err)
{
    char *dir = path_join(m->ckpt_dir, name);
    char *model = path_join(dir, MODEL_FILE), *state = path_join(dir, STATE_FILE);
    json_t *root = NULL;
    if (!path_exists(model) || !path_exists(state))
        esp_fail(err, "%s: incomplete checkpoint (missing %s)", dir, path_exists(model) ? STATE_FILE : MODEL_FILE);
    else root = load_state_json(dir, err);
    free(model);
    free(state);
    free(dir);
    return root;
}

/* The tables a checkpoint recorded, re-shaped by the current criteria (k, mode from the config). */
static void restore_tables(ckpt_manager *m, json_t *root)
{
    json_t *best = json_object_get(root, "best_k");
    for (size_t i = 0; i < m->n_tables; i++) {
        ckpt_table *t = &m->tables[i];
        size_t bi;
        json_t *b;
        json_array_foreach(best, bi, b)
        {
            const char *mon = json_string_value(json_object_get(b, "monitor"));
            const char *mode = json_string_value(json_object_get(b, "mode"));
            if (!mon || !mode || strcmp(mon, t->monitor) != 0 || (strcmp(mode, "max") == 0) != t->maximize) continue;
            size_t ei;
            json_t *e;
            json_array_foreach(json_object_get(b, "entries"), ei, e)
            {
                const char *dir = json_string_value(json_object_get(e, "dir"));
                double v;
                if (!dir || metric_from_json(json_object_get(e, "value"), &v) != 0) continue;
                if (!is_ckpt_name(dir)) {
                    /* Only a directory under checkpoints/ may be ranked, averaged or pruned. */
                    log_warn("%s/%s/" JSON_FILE ": best-k entry '%s' for %s is not a checkpoint name; ranking goes "
                             "on without it", m->ckpt_dir, m->last, dir, t->monitor);
                    continue;
                }
                esp_err ignored;
                json_t *other = load_complete(m, dir, &ignored);
                if (!other) {
                    log_warn("%s/%s: best-k checkpoint for %s is gone; ranking goes on without it", m->ckpt_dir, dir,
                             t->monitor);
                    continue;
                }
                json_decref(other);
                table_offer(t, dir, json_integer_value(json_object_get(e, "epoch")),
                            json_integer_value(json_object_get(e, "step")), v,
                            json_is_true(json_object_get(e, "in_epoch")));
            }
            break;
        }
    }
}

/* ---- open / save ----------------------------------------------------------------------- */

/* The target of <exp_dir>/last when it names a directory under checkpoints/. */
static char *read_last(const ckpt_manager *m)
{
    char *link = path_join(m->exp_dir, "last");
    char buf[4096];
    ssize_t n = readlink(link, buf, sizeof buf - 1);
    free(link);
    if (n <= 0) return NULL;
    buf[n] = '\0';
    const char *prefix = "checkpoints/";
    if (strncmp(buf, prefix, strlen(prefix)) != 0 || strchr(buf + strlen(prefix), '/')) return NULL;
    return xstrdup(buf + strlen(prefix));
}

int ckpt_open(ckpt_manager *m, const char *exp_dir, const criterion_cfg *crit, size_t n_crit, esp_err *err)
{
    memset(m, 0, sizeof *m);
    for (size_t i = 0; i < n_crit; i++) {
        if (!crit[i].monitor || !*crit[i].monitor)
            return esp_fail(err, "best_model_criterion[%zu]: empty monitor (expected e.g. [valid/loss, 3, min])", i);
        if (crit[i].nbest < 0)
            return esp_fail(err, "best_model_criterion[%zu]: k must be >= 0, got %" PRId64, i, crit[i].nbest);
        if (!crit[i].mode || (strcmp(crit[i].mode, "min") != 0 && strcmp(crit[i].mode, "max") != 0))
            return esp_fail(err, "best_model_criterion[%zu]: mode must be min or max, got '%s'", i,
                            crit[i].mode ? crit[i].mode : "");
    }
    m->exp_dir = xstrdup(exp_dir);
    m->ckpt_dir = path_join(exp_dir, "checkpoints");
    if (mkdir_p(m->ckpt_dir, err) != 0) {
        ckpt_close(m);
        return -1;
    }
    m->tables = xcalloc(n_crit ? n_crit : 1, sizeof *m->tables);
    m->n_tables = n_crit;
    for (size_t i = 0; i < n_crit; i++) {
        m->tables[i].monitor = xstrdup(crit[i].monitor);
        m->tables[i].k = crit[i].nbest;
        m->tables[i].maximize = strcmp(crit[i].mode, "max") == 0;
    }

    /* The newest complete checkpoint: `last`, else (link lost) the complete directory with most steps. */
    esp_err why;
    json_t *cur = NULL;
    char *name = read_last(m);
    if (name && !(cur = load_complete(m, name, &why))) {
        log_warn("%s/last: %s; looking for the newest complete checkpoint instead", exp_dir, why.msg);
        free(name);
        name = NULL;
    }
    DIR *d = opendir(m->ckpt_dir);
    if (!d) {
        json_decref(cur);
        free(name);
        esp_fail(err, "%s: cannot list: %s", m->ckpt_dir, strerror(errno));
        ckpt_close(m);
        return -1;
    }
    struct dirent *de;
    if (!cur) {
        int64_t best_step = -1;
        while ((de = readdir(d))) {
            if (!is_ckpt_name(de->d_name)) continue;
            json_t *j = load_complete(m, de->d_name, &why);
            if (!j) continue;
            int64_t st = json_integer_value(json_object_get(j, "step"));
            if (st > best_step) {
                best_step = st;
                free(name);
                name = xstrdup(de->d_name);
                json_decref(cur);
                cur = j;
            } else {
                json_decref(j);
            }
        }
        rewinddir(d);
    }
    if (cur) {
        m->last = name;
        restore_tables(m, cur);
        json_decref(cur);
    }
    /* Leftovers of a crash: temporary directories, and (when a checkpoint was found) checkpoints
     * that neither `last` nor a table refers to. Without one, complete directories are left alone. */
    while ((de = readdir(d))) {
        const char *n = de->d_name;
        if (strncmp(n, TMP_PREFIX, strlen(TMP_PREFIX)) == 0) {
            char *p = path_join(m->ckpt_dir, n);
            remove_tree(p);
            free(p);
        } else if (m->last && is_ckpt_name(n) && !retained(m, n)) {
            log_info("%s/%s: removing a checkpoint no best-k table or `last` refers to", m->ckpt_dir, n);
            remove_checkpoint(m, n);
        }
    }
    closedir(d);
    return 0;
}

/* Points <dir>/<link> at target atomically: a symlink under a temp name renamed over the old one. */
static int swap_symlink(const char *dir, const char *link, const char *target, esp_err *err)
{
    char *path = path_join(dir, link);
    char *tmp = xasprintf("%s/.%s.tmp.%ld", dir, link, (long)getpid());
    unlink(tmp);
    int rc = 0;
    if (symlink(target, tmp) != 0 || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        rc = esp_fail(err, "%s: cannot point the link at %s: %s", path, target, strerror(e));
    } else {
        fsync_dir(dir);
    }
    free(path);
    free(tmp);
    return rc;
}

static int write_checkpoint_files(const char *dir, const ckpt_info *info, const char *json, const st_tensor *model,
                                  size_t n_model, const st_tensor *state, size_t n_state, esp_err *err)
{
    char epoch[32], step[32];
    snprintf(epoch, sizeof epoch, "%" PRId64, info->epoch);
    snprintf(step, sizeof step, "%" PRId64, info->step);
    const st_kv meta[] = {{"format", "pt"}, {"epoch", epoch}, {"step", step}};
    char *p = path_join(dir, MODEL_FILE);
    int rc = st_write(p, model, n_model, meta, 3, err);
    free(p);
    if (rc != 0) return -1;
    crash_point("model");
    p = path_join(dir, STATE_FILE);
    rc = st_write(p, state, n_state, meta + 1, 2, err);
    free(p);
    if (rc != 0) return -1;
    crash_point("state");
    p = path_join(dir, JSON_FILE);
    rc = atomic_write_file(p, json, strlen(json), err);
    free(p);
    if (rc != 0) return -1;
    crash_point("json");
    return 0;
}

int ckpt_save(ckpt_manager *m, const ckpt_info *info, const st_tensor *model, size_t n_model,
              const st_tensor *state, size_t n_state, esp_err *err)
{
    ESP_CHECK(m->ckpt_dir != NULL && info->epoch >= 0 && info->step >= 0);
    char *name = xasprintf("epoch=%" PRId64 "-step=%" PRId64, info->epoch, info->step);
    if (m->last && strcmp(m->last, name) == 0) {
        esp_fail(err, "%s/%s: this checkpoint was already saved (each step is saved once)", m->ckpt_dir, name);
        free(name);
        return -1;
    }
    /* The tables as they will be once this checkpoint is in; recorded in its trainer_state.json. */
    ckpt_table *tables = tables_copy(m->tables, m->n_tables);
    for (size_t i = 0; i < m->n_tables; i++)
        for (size_t j = 0; j < info->n_metrics; j++)
            if (strcmp(info->metrics[j].name, tables[i].monitor) == 0)
                table_offer(&tables[i], name, info->epoch, info->step, info->metrics[j].value, info->in_epoch);
    char *json = state_json(info, tables, m->n_tables);

    char *tmp = xasprintf("%s/" TMP_PREFIX "%s.%ld", m->ckpt_dir, name, (long)getpid());
    char *final = path_join(m->ckpt_dir, name);
    int rc = 0;
    remove_tree(tmp);
    if (mkdir(tmp, 0777) != 0) rc = esp_fail(err, "%s: cannot create directory: %s", tmp, strerror(errno));
    if (rc == 0) rc = write_checkpoint_files(tmp, info, json, model, n_model, state, n_state, err);
    if (rc == 0 && path_exists(final)) {
        /* A complete checkpoint of this name that `last` never pointed at (a crash came between its
         * rename and the link swap): it goes, this one takes its place. */
        remove_checkpoint(m, name);
    }
    if (rc == 0 && rename(tmp, final) != 0)
        rc = esp_fail(err, "%s: cannot rename to %s: %s", tmp, final, strerror(errno));
    if (rc != 0) {
        remove_tree(tmp);
        goto out;
    }
    fsync_dir(m->ckpt_dir);
    crash_point("renamed");
    char *target = xasprintf("checkpoints/%s", name);
    rc = swap_symlink(m->exp_dir, "last", target, err);
    free(target);
    if (rc != 0) goto out; /* the new checkpoint stays, unreferenced; ckpt_open cleans it up */
    crash_point("linked");

    tables_free(m->tables, m->n_tables);
    m->tables = tables;
    tables = NULL;
    free(m->last);
    m->last = name;
    name = NULL;
    /* Only now, with `last` on the new checkpoint, may checkpoints that left every table go. */
    DIR *d = opendir(m->ckpt_dir);
    if (d) {
        struct dirent *de;
        int first = 1;
        while ((de = readdir(d))) {
            if (!is_ckpt_name(de->d_name) || retained(m, de->d_name)) continue;
            remove_checkpoint(m, de->d_name);
            if (first) crash_point("pruned");
            first = 0;
        }
        closedir(d);
    }
out:
    if (tables) tables_free(tables, m->n_tables);
    free(json);
    free(tmp);
    free(final);
    free(name);
    return rc;
}

/* ---- load ------------------------------------------------------------------------------ */

void ckpt_loaded_free(ckpt_loaded *c)
{
    for (size_t i = 0; i < c->n_metrics; i++) free((char *)c->metrics[i].name);
    for (size_t i = 0; i < c->n_counters; i++) free((char *)c->counters[i].name);
    free(c->metrics);
    free(c->counters);
    free(c->rng);
    free(c->config_hash);
    free(c->dir);
    st_close(&c->model);
    st_close(&c->state);
    memset(c, 0, sizeof *c);
}

int64_t ckpt_counter_get(const ckpt_loaded *c, const char *name, int64_t dflt)
{
    for (size_t i = 0; i < c->n_counters; i++)
        if (strcmp(c->counters[i].name, name) == 0) return c->counters[i].value;
    return dflt;
}

/* 1 to 16 hex digits after an optional "0x" (state_json writes "0x" and 16). */
static int parse_hex64(const char *s, uint64_t *out)
{
    if (!s) return 0;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s += 2;
    if (!s[0] || strlen(s) > 16) return 0;
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        int d = *p >= '0' && *p <= '9' ? *p - '0' : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
              : *p >= 'A' && *p <= 'F' ? *p - 'A' + 10 : -1;
        if (d < 0) return 0;
        v = v << 4 | (uint64_t)d;
    }
    *out = v;
    return 1;
}

int ckpt_load_last(const ckpt_manager *m, ckpt_loaded *out, esp_err *err)
{
    memset(out, 0, sizeof *out);
    if (!m->last) return 1;
    char *dir = path_join(m->ckpt_dir, m->last);
    int rc = ckpt_load_dir(dir, out, err);
    free(dir);
    return rc;
}

int ckpt_load_dir(const char *dir, ckpt_loaded *out, esp_err *err)
{
    memset(out, 0, sizeof *out);
    out->dir = xstrdup(dir);
    json_t *root = load_state_json(out->dir, err);
    if (!root) goto fail;
    out->epoch = json_integer_value(json_object_get(root, "epoch"));
    out->step = json_integer_value(json_object_get(root, "step"));
    json_t *h = json_object_get(root, "config_hash");
    if (json_is_string(h)) out->config_hash = xstrdup(json_string_value(h));

    const char *key;
    json_t *v;
    json_t *metrics = json_object_get(root, "metrics");
    out->metrics = xcalloc(json_object_size(metrics) + 1, sizeof *out->metrics);
    json_object_foreach(metrics, key, v)
    {
        metric *mt = &out->metrics[out->n_metrics];
        if (metric_from_json(v, &mt->value) != 0) {
            esp_fail(err, "%s/" JSON_FILE ": metrics.%s is not a number (corrupt file)", out->dir, key);
            json_decref(root);
            goto fail;
        }
        mt->name = xstrdup(key);
        mt->is_int = json_is_integer(v);
        out->n_metrics++;
    }
    json_t *rng = json_object_get(root, "rng");
    out->rng = xcalloc(json_array_size(rng) + 1, sizeof *out->rng);
    size_t i;
    json_array_foreach(rng, i, v)
    {
        const char *s = json_string_value(v);
        if (!parse_hex64(s, &out->rng[i])) {
            esp_fail(err, "%s/" JSON_FILE ": rng[%zu] is not a hex string of at most 16 digits", out->dir, i);
            json_decref(root);
            goto fail;
        }
        out->n_rng++;
    }
    json_t *counters = json_object_get(root, "counters");
    out->counters = xcalloc(json_object_size(counters) + 1, sizeof *out->counters);
    json_object_foreach(counters, key, v)
    {
        if (!json_is_integer(v)) {
            esp_fail(err, "%s/" JSON_FILE ": counters.%s is not an integer (corrupt file)", out->dir, key);
            json_decref(root);
            goto fail;
        }
        out->counters[out->n_counters].name = xstrdup(key);
        out->counters[out->n_counters++].value = json_integer_value(v);
    }
    json_decref(root);

    char *p = path_join(out->dir, MODEL_FILE);
    int rc = st_read(p, &out->model, err);
    free(p);
    if (rc != 0) goto fail;
    p = path_join(out->dir, STATE_FILE);
    rc = st_read(p, &out->state, err);
    free(p);
    if (rc != 0) goto fail;
    return 0;
fail:
    ckpt_loaded_free(out);
    return -1;
}

/* ---- averaging (the file arithmetic is core/train/checkpoint_average.c) ------------------ */

int ckpt_average(const ckpt_manager *m, esp_err *err)
{
    for (size_t i = 0; i < m->n_tables; i++) {
        const ckpt_table *t = &m->tables[i];
        if (t->n == 0) continue;
        const char **inputs = xcalloc(t->n, sizeof *inputs);
        size_t newest = 0;
        for (size_t j = 0; j < t->n; j++) {
            char *dir = path_join(m->ckpt_dir, t->entries[j].dir);
            inputs[j] = path_join(dir, MODEL_FILE);
            free(dir);
            if (t->entries[j].step > t->entries[newest].step) newest = j;
        }
        char *mon = ckpt_monitor_file_name(t->monitor);
        char *name = xasprintf("%s.ave_%zubest.safetensors", mon, t->n);
        char *out = path_join(m->exp_dir, name);
        int rc = ckpt_average_files(out, inputs, t->n, newest, err);
        if (rc == 0) {
            char *link = xasprintf("%s.ave.safetensors", mon);
            rc = swap_symlink(m->exp_dir, link, name, err);
            free(link);
        }
        if (rc == 0) log_info("%s: mean of the %zu best checkpoints by %s", out, t->n, t->monitor);
        for (size_t j = 0; j < t->n; j++) free((char *)inputs[j]);
        free(inputs);
        free(mon);
        free(name);
        free(out);
        if (rc != 0) return -1;
    }
    return ckpt_write_espnet3_names(m, err);
}

void ckpt_close(ckpt_manager *m)
{
    tables_free(m->tables, m->n_tables);
    free(m->exp_dir);
    free(m->ckpt_dir);
    free(m->last);
    memset(m, 0, sizeof *m);
}
