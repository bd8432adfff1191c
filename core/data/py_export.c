/* A recipe's Python run once for data: builders, text functions, and the cached export of a
 * Python Dataset into ${data_dir}/py_export/<hash>/{manifest.tsv, audio/, source.json}. */
#include "core/data/py_export.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <sndfile.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/base/fsio.h"
#include "core/base/hash.h"
#include "core/base/progress.h"
#include "core/data/audio.h"
#include "core/data/audio_riff.h"
#include "core/formats/manifest.h"

extern const char _binary_core_data_py_helper_py_start[], _binary_core_data_py_helper_py_end[];

/* ---- the key: code and arguments ------------------------------------------------------------ */

static uint64_t key_acc; /* nftw's callback has no context pointer */

static void hash_file(const char *path, const struct stat *st)
{
    key_acc = fnv1a64_str(path) ^ (key_acc * 0x100000001b3ULL);
    long long meta[3] = {(long long)st->st_size, (long long)st->st_mtim.tv_sec, (long long)st->st_mtim.tv_nsec};
    key_acc = fnv1a64_bytes(key_acc, meta, sizeof meta);
    size_t len;
    esp_err ignored;
    char *bytes = read_file(path, READ_LIST, &len, &ignored);
    if (bytes) key_acc = fnv1a64_bytes(key_acc, bytes, len);
    free(bytes);
}

static int hash_py(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    const char *base = path + ftw->base;
    if (type == FTW_D && ftw->level > 0 && (base[0] == '.' || !strcmp(base, "__pycache__"))) return FTW_SKIP_SUBTREE;
    size_t l = strlen(path);
    if (type == FTW_F && l > 3 && !strcmp(path + l - 3, ".py")) hash_file(path, st);
    return FTW_CONTINUE;
}

static void hash_tree(const char *dir)
{
    if (is_dir(dir)) nftw(dir, hash_py, 16, FTW_PHYS | FTW_ACTIONRETVAL);
}

/* The .py files at the top of dir (run.py and the like), not its subfolders (data, exp, ...). */
static void hash_top(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    char **names = NULL;
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l > 3 && !strcmp(e->d_name + l - 3, ".py")) {
            names = xrealloc(names, (n + 1) * sizeof *names);
            names[n++] = xstrdup(e->d_name);
        }
    }
    closedir(d);
    for (size_t i = 0; i < n; i++) { /* in name order: readdir's order is the file system's */
        for (size_t j = i + 1; j < n; j++)
            if (strcmp(names[j], names[i]) < 0) {
                char *t = names[i];
                names[i] = names[j], names[j] = t;
            }
        char *p = path_join(dir, names[i]);
        struct stat st;
        if (stat(p, &st) == 0 && S_ISREG(st.st_mode)) hash_file(p, &st);
        free(p);
        free(names[i]);
    }
    free(names);
}

unsigned long long py_export_key(const char *recipe_dir, const char *data_src, const char *args_json,
                                 const char *transform_json)
{
    key_acc = FNV1A64_INIT;
    key_acc = fnv1a64_bytes(key_acc, _binary_core_data_py_helper_py_start,
                            (size_t)(_binary_core_data_py_helper_py_end - _binary_core_data_py_helper_py_start));
    key_acc = fnv1a64_str(data_src ? data_src : "") ^ (key_acc * 0x100000001b3ULL);
    key_acc = fnv1a64_str(args_json ? args_json : "{}") ^ (key_acc * 0x100000001b3ULL);
    if (transform_json) key_acc = fnv1a64_str(transform_json) ^ (key_acc * 0x100000001b3ULL);
    char *root = path_absolute(recipe_dir ? recipe_dir : ".");
    const char *subs[] = {"dataset", "src"};
    for (size_t i = 0; i < 2; i++) {
        char *d = path_join(root, subs[i]);
        hash_tree(d);
        free(d);
    }
    hash_top(root);
    /* A tag or module path: its package below the folder above egs3/ (another recipe's dataset). */
    char *egs3 = strstr(root, "/egs3/");
    if (data_src && egs3) {
        char *top = xstrndup(root, (size_t)(egs3 - root));
        char *rel = strchr(data_src, '/') ? xasprintf("egs3/%s/dataset", data_src) : xstrdup(data_src);
        if (!strchr(data_src, '/'))
            for (char *c = rel; *c; c++)
                if (*c == '.') *c = '/';
        for (;;) { /* the longest prefix that is a folder or a .py file */
            char *d = path_join(top, rel), *f = xasprintf("%s.py", d);
            struct stat st;
            int found = 1;
            if (is_dir(d)) hash_tree(d);
            else if (stat(f, &st) == 0) hash_file(f, &st);
            else found = 0;
            free(d), free(f);
            char *slash = strrchr(rel, '/');
            if (found || !slash) break;
            *slash = '\0';
        }
        free(rel), free(top);
    }
    free(root);
    return key_acc;
}

/* ---- the export ------------------------------------------------------------------------------ */

/* Writes x as FLAC when it is 16-bit audio (every sample k / 32768, as soundfile reads 16-bit
 * files: bit-exact), else as 32-bit float WAV (lossless; FLAC has no float samples). */
static int write_audio(const char *dir, size_t index, const float *x, size_t n, long fs, char **path, esp_err *err)
{
    int pcm16 = 1;
    for (size_t i = 0; i < n && pcm16; i++) {
        float k = x[i] * 32768.0f;
        pcm16 = k >= -32768.0f && k <= 32767.0f && k == truncf(k);
    }
    *path = xasprintf("%s/%zu.%s", dir, index, pcm16 ? "flac" : "wav");
    SF_INFO info = {.samplerate = (int)fs, .channels = 1,
                    .format = pcm16 ? SF_FORMAT_FLAC | SF_FORMAT_PCM_16 : SF_FORMAT_WAV | SF_FORMAT_FLOAT};
    SNDFILE *sf = sf_open(*path, SFM_WRITE, &info);
    if (!sf) return esp_fail(err, "%s: cannot write: %s", *path, sf_strerror(NULL));
    sf_count_t wrote;
    if (pcm16) {
        short *s = xmalloc((n ? n : 1) * sizeof *s);
        for (size_t i = 0; i < n; i++) s[i] = (short)(x[i] * 32768.0f);
        wrote = sf_write_short(sf, s, (sf_count_t)n);
        free(s);
    } else {
        wrote = sf_write_float(sf, x, (sf_count_t)n);
    }
    int closed = sf_close(sf);
    if (wrote != (sf_count_t)n || closed != 0)
        return esp_fail(err, "%s: short write (check free disk space)", *path);
    return 0;
}

/* Whether the file an item names holds exactly its samples at its rate (then it is reused, not
 * copied): what our reader gets from it, bit for bit. */
static int same_samples(const char *path, const float *x, size_t n, long fs)
{
    float *y = NULL;
    size_t m = 0;
    esp_err ignored;
    int same = audio_read(path, (int)fs, "model.frontend_conf.fs", &y, &m, &ignored) == 0 && m == n &&
               (n == 0 || memcmp(x, y, n * sizeof *x) == 0);
    free(y);
    return same;
}

/* A file the item names: readable by libsndfile, mono, at an accepted rate. */
static int check_item_file(const char *path, const py_export_opts *o, const char *where, long long i, esp_err *err)
{
    SF_INFO info = {0};
    FILE *raw = fopen(path, "rb");
    esp_err bad;
    int hostile = raw && audio_riff_check_file(raw, path, &bad) != 0;
    if (raw) fclose(raw);
    if (hostile) return esp_fail(err, "%s: item %lld: %s", where, i, bad.msg);
    SNDFILE *sf = sf_open(path, SFM_READ, &info);
    if (!sf) return esp_fail(err, "%s: item %lld names %s as its speech, which libsndfile cannot read (%s)", where, i, path,
                             sf_strerror(NULL));
    sf_close(sf);
    if (info.channels != 1)
        return esp_fail(err, "%s: item %lld: %s has %d channels (espnet3 reads mono audio)", where, i, path, info.channels);
    if (!o->resample && o->fs > 0 && info.samplerate != o->fs)
        return esp_fail(err, "%s: item %lld: %s is at %d Hz and the frontend at %ld Hz (model.frontend_conf.fs; "
                        "dataset.resample: true converts it)", where, i, path, info.samplerate, o->fs);
    return 0;
}

/* One text field on one manifest line: tabs and line breaks become spaces. */
static char *one_line(const char *s)
{
    char *t = xstrdup(s ? s : "");
    for (char *c = t; *c; c++)
        if (*c == '\t' || *c == '\n' || *c == '\r') *c = ' ';
    return t;
}

typedef struct export_run {
    const py_source *src;
    const py_export_opts *o;
    const char *tmp, *final_dir;
    manifest m;
} export_run;

static int export_items(export_run *r, py_bridge *b, esp_err *err)
{
    json_t *rec;
    int got = py_bridge_next(b, &rec, err);
    if (got <= 0) return got < 0 ? -1 : esp_fail(err, "%s: the Python helper sent no item count", r->src->where);
    long long total = json_integer_value(json_object_get(rec, "n"));
    json_decref(rec);
    if (total == 0) return esp_fail(err, "%s: the dataset has no items (len() is 0)", r->src->where);
    char *audio_tmp = path_join(r->tmp, "audio"), *audio_final = path_join(r->final_dir, "audio");
    int rc = mkdir_p(audio_tmp, err);
    char label[256];
    snprintf(label, sizeof label, "export %s", r->src->where);
    progress p;
    progress_start(&p, label, total > 0 ? (size_t)total : 0);
    float *x = NULL;
    size_t x_cap = 0;
    while (rc == 0 && (got = py_bridge_next(b, &rec, err)) == 1) {
        long long i = json_integer_value(json_object_get(rec, "i"));
        const char *text = json_string_value(json_object_get(rec, "text"));
        const char *id = json_string_value(json_object_get(rec, "id"));
        const char *file = json_string_value(json_object_get(rec, "path"));
        const char *source = json_string_value(json_object_get(rec, "file"));
        json_t *fsj = json_object_get(rec, "fs");
        long fs = json_is_integer(fsj) ? (long)json_integer_value(fsj) : r->o->fs;
        size_t n = (size_t)json_integer_value(json_object_get(rec, "n"));
        char *wav = NULL;
        if (!text && r->o->need_text)
            rc = esp_fail(err, "%s: item %lld has no 'text' (training items need their transcript)", r->src->where, i);
        else if (fs <= 0 || (!r->o->resample && r->o->fs > 0 && fs != r->o->fs))
            rc = esp_fail(err, "%s: item %lld is at %ld Hz and the frontend at %ld Hz (model.frontend_conf.fs; "
                          "dataset.resample: true converts it)", r->src->where, i, fs, r->o->fs);
        else if (file)
            rc = check_item_file(file, r->o, r->src->where, i, err), wav = xstrdup(file);
        else {
            if (n > x_cap) x = xrealloc(x, (x_cap = n) * sizeof *x);
            rc = py_bridge_read(b, x, n * sizeof *x, err);
            for (size_t k = 0; rc == 0 && k < n; k++)
                if (!isfinite(x[k])) rc = esp_fail(err, "%s: item %lld: sample %zu of 'speech' is %g", r->src->where, i, k, x[k]);
            char *tmp_path = NULL;
            if (rc == 0 && source && same_samples(source, x, n, fs)) wav = xstrdup(source);
            else if (rc == 0) rc = write_audio(audio_tmp, (size_t)i, x, n, fs, &tmp_path, err);
            if (tmp_path) wav = path_join(audio_final, strrchr(tmp_path, '/') + 1);
            free(tmp_path);
        }
        if (rc == 0) {
            char *utt = id ? one_line(id) : xasprintf("%s-%06lld", r->src->name, i);
            for (char *c = utt; *c; c++)
                if (*c == ' ') *c = '_';
            char *t = one_line(text);
            manifest_add(&r->m, utt, wav, t, NULL);
            free(utt), free(t);
        }
        free(wav);
        json_decref(rec);
        progress_update(&p, r->m.n);
    }
    progress_finish(&p);
    free(x), free(audio_tmp), free(audio_final);
    if (rc == 0 && got < 0) rc = -1;
    if (rc == 0 && r->m.n == 0) rc = esp_fail(err, "%s: the dataset gave no items", r->src->where);
    return rc;
}

/* Exports into tmp under the lock; the caller renames tmp to the final folder. */
static int export_into(export_run *r, esp_err *err)
{
    json_error_t je;
    json_t *args = json_loads(r->src->args_json ? r->src->args_json : "{}", 0, &je);
    ESP_CHECK(json_is_object(args));
    json_t *req = json_pack("{s:o, s:s}", "args", args, "recipe_dir", r->o->env.recipe_dir ? r->o->env.recipe_dir : ".");
    if (r->src->data_src) json_object_set_new(req, "data_src", json_string(r->src->data_src));
    if (r->src->transform_json) json_object_set_new(req, "transform", json_loads(r->src->transform_json, JSON_DECODE_ANY, &je));
    py_bridge b;
    int rc = py_bridge_start(&b, &r->o->env, "export", req, r->src->where, err);
    json_decref(req);
    if (rc != 0) {
        py_bridge_finish(&b, 1, NULL);
        return -1;
    }
    rc = export_items(r, &b, err);
    esp_err fin;
    if (py_bridge_finish(&b, rc != 0, &fin) != 0 && rc == 0) *err = fin, rc = -1;
    if (rc != 0) return -1;
    char *mpath = path_join(r->tmp, "manifest.tsv");
    rc = manifest_write_tsv(mpath, &r->m, err);
    free(mpath);
    if (rc == 0) { /* what the folder holds, for a person looking at it */
        json_error_t je;
        json_t *about = json_pack("{s:s?, s:o, s:s, s:I}", "data_src", r->src->data_src, "data_src_args",
                                  json_loads(r->src->args_json ? r->src->args_json : "{}", 0, &je), "config",
                                  r->src->where, "items", (json_int_t)r->m.n);
        char *s = json_dumps(about, JSON_INDENT(2));
        char *apath = path_join(r->tmp, "source.json");
        rc = atomic_write_file(apath, s, strlen(s), err);
        free(apath), free(s);
        json_decref(about);
    }
    return rc;
}

/* Folders <key>.tmp-* left by a run that was killed: safe to remove while we hold the lock. */
static void remove_stale_tmp(const char *root, const char *key)
{
    DIR *d = opendir(root);
    if (!d) return;
    char *prefix = xasprintf("%s.tmp-", key);
    for (struct dirent *e; (e = readdir(d));)
        if (!strncmp(e->d_name, prefix, strlen(prefix))) {
            char *p = path_join(root, e->d_name);
            remove_tree(p);
            free(p);
        }
    closedir(d);
    free(prefix);
}

int py_export(const py_source *src, const py_export_opts *o, char **manifest_path, esp_err *err)
{
    *manifest_path = NULL;
    if (!o->data_dir) return esp_fail(err, "%s: data_dir: missing (the export of the recipe's Python dataset goes under it)", src->where);
    char key[17];
    snprintf(key, sizeof key, "%016llx", py_export_key(o->env.recipe_dir, src->data_src, src->args_json, src->transform_json));
    char *data_abs = path_absolute(o->data_dir); /* the manifest names audio by absolute paths */
    char *root = path_join(data_abs, "py_export");
    free(data_abs);
    char *final_dir = path_join(root, key);
    char *mpath = path_join(final_dir, "manifest.tsv");
    int rc = 0;
    if (path_exists(mpath)) goto done; /* exported before, by this code with these arguments */
    if ((rc = mkdir_p(root, err)) != 0) goto done;
    /* One export at a time (ranks, workers, two stages started together). */
    char *lock_path = path_join(root, ".lock");
    int lock = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    free(lock_path);
    if (lock < 0 || flock(lock, LOCK_EX) != 0) {
        rc = esp_fail(err, "%s/.lock: cannot lock: %s", root, strerror(errno));
        if (lock >= 0) close(lock);
        goto done;
    }
    if (!path_exists(mpath)) {
        remove_stale_tmp(root, key);
        char *tmp = xasprintf("%s.tmp-%ld", final_dir, (long)getpid());
        export_run r = {.src = src, .o = o, .tmp = tmp, .final_dir = final_dir};
        double t0 = now_seconds();
        rc = mkdir_p(tmp, err);
        if (rc == 0) rc = export_into(&r, err);
        if (rc == 0 && rename(tmp, final_dir) != 0)
            rc = esp_fail(err, "%s: cannot rename to %s: %s", tmp, final_dir, strerror(errno));
        if (rc != 0) remove_tree(tmp);
        else log_info("%s: exported %zu items of the recipe's Python dataset to %s in %.1f s", src->where, r.m.n,
                      final_dir, now_seconds() - t0);
        manifest_free(&r.m);
        free(tmp);
    }
    close(lock);
done:
    if (rc == 0) *manifest_path = mpath;
    else free(mpath);
    free(final_dir);
    free(root);
    return rc;
}

/* ---- builders and functions ------------------------------------------------------------------ */

static json_t *kwargs_of(const char *kwargs_json)
{
    json_error_t je;
    json_t *k = json_loads(kwargs_json ? kwargs_json : "{}", 0, &je);
    ESP_CHECK(json_is_object(k));
    return k;
}

int py_run_builders(const py_env *env, const char *const *data_srcs, size_t n, const char *kwargs_json,
                    const char *where, esp_err *err)
{
    json_t *srcs = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(srcs, data_srcs[i] ? json_string(data_srcs[i]) : json_null());
    json_t *req = json_pack("{s:o, s:o, s:s}", "data_srcs", srcs, "kwargs", kwargs_of(kwargs_json), "recipe_dir",
                            env->recipe_dir ? env->recipe_dir : ".");
    py_bridge b;
    int rc = py_bridge_start(&b, env, "build", req, where, err);
    json_decref(req);
    json_t *rec;
    while (rc == 0 && (rc = py_bridge_next(&b, &rec, err)) == 1) {
        const char *src = json_string_value(json_object_get(rec, "builder"));
        if (json_is_true(json_object_get(rec, "none")))
            log_info("create_dataset: %s has no DatasetBuilder: nothing to prepare", src && src[0] ? src : "the recipe's dataset/");
        else log_info("create_dataset: %s's DatasetBuilder: %s, %s", src && src[0] ? src : "the recipe's dataset/",
                 json_is_true(json_object_get(rec, "prepared")) ? "source prepared" : "source was prepared",
                 json_is_true(json_object_get(rec, "built")) ? "built" : "already built");
        json_decref(rec);
        rc = 0;
    }
    esp_err fin;
    if (py_bridge_finish(&b, rc != 0, &fin) != 0 && rc == 0) *err = fin, rc = -1;
    return rc;
}

typedef struct text_acc {
    char **v;
    size_t n, cap;
} text_acc;

static int add_line(void *ctx, char *line, size_t lineno, esp_err *err)
{
    (void)lineno, (void)err;
    text_acc *a = ctx;
    if (a->n == a->cap) a->v = xrealloc(a->v, (a->cap = a->cap ? 2 * a->cap : 256) * sizeof *a->v);
    a->v[a->n++] = xstrdup(line);
    return 0;
}

int py_call(const py_env *env, const char *func, const char *kwargs_json, const char *where, char ***texts,
            size_t *n_texts, esp_err *err)
{
    if (texts) *texts = NULL, *n_texts = 0;
    json_t *req = json_pack("{s:s, s:o}", "func", func, "kwargs", kwargs_of(kwargs_json));
    py_bridge b;
    int rc = py_bridge_start(&b, env, "call", req, where, err);
    json_decref(req);
    text_acc acc = {0};
    json_t *rec;
    while (rc == 0 && (rc = py_bridge_next(&b, &rec, err)) == 1) {
        const char *text = json_string_value(json_object_get(rec, "text"));
        const char *path = json_string_value(json_object_get(rec, "path"));
        rc = 0;
        if (text && texts) add_line(&acc, (char *)text, 0, err);
        else if (path && texts) {
            size_t len;
            char *buf = read_file(path, READ_LIST, &len, err);
            if (!buf) rc = esp_fail(err, "%s: %s returned %s, which cannot be read", where, func, path);
            else rc = for_each_line(buf, add_line, &acc, err);
            free(buf);
        }
        json_decref(rec);
    }
    esp_err fin;
    if (py_bridge_finish(&b, rc != 0, &fin) != 0 && rc == 0) *err = fin, rc = -1;
    if (rc == 0 && texts) {
        *texts = acc.v, *n_texts = acc.n;
        return 0;
    }
    for (size_t i = 0; i < acc.n; i++) free(acc.v[i]);
    free(acc.v);
    return rc;
}

int py_outputs(const py_env *env, const char *func, const char *const *utt_ids, const char *const *refs,
               const char *const *hyps, size_t n, const char *where, json_t ***outs, esp_err *err)
{
    json_t *items = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(items, json_pack("{s:s, s:s, s:s, s:I}", "utt_id", utt_ids[i], "text", refs[i], "hyp",
                                               hyps[i], "idx", (json_int_t)i));
    json_t *req = json_pack("{s:s, s:o}", "func", func, "items", items);
    py_bridge b;
    int rc = py_bridge_start(&b, env, "outputs", req, where, err);
    json_decref(req);
    *outs = xcalloc(n ? n : 1, sizeof **outs);
    json_t *rec;
    while (rc == 0 && (rc = py_bridge_next(&b, &rec, err)) == 1) {
        json_int_t i = json_integer_value(json_object_get(rec, "i"));
        json_t *out = json_object_get(rec, "out");
        rc = 0;
        if (i < 0 || (size_t)i >= n || !json_is_object(out) || (*outs)[i])
            rc = esp_fail(err, "%s: a broken record from the Python helper", where);
        else (*outs)[i] = json_incref(out);
        json_decref(rec);
    }
    esp_err fin;
    if (py_bridge_finish(&b, rc != 0, &fin) != 0 && rc == 0) *err = fin, rc = -1;
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (!(*outs)[i]) rc = esp_fail(err, "%s: no output for utterance %s", where, utt_ids[i]);
    if (rc != 0) {
        for (size_t i = 0; i < n; i++) json_decref((*outs)[i]);
        free(*outs);
        *outs = NULL;
    }
    return rc;
}
