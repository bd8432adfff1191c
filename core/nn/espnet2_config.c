#include "core/nn/espnet2_config.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/base/tmpdir.h"
#include "core/config/yamltree.h"
#include "core/formats/zip_unpack.h"

/* A value espnet3 writes in place of the user's, marked where the user's was written. */
static ynode *scalar_at(const char *s, int quoted, ymark at) { return yt_scalar(s, quoted, at); }

/* ESPnet's relative paths: from the working directory, else from the packed model's root. */
static char *find_path(const char *p, const char *config)
{
    if (p[0] == '/' || path_exists(p)) return path_absolute(p);
    char *dir = path_dirname(config), *root = xasprintf("%s/../../%s", dir, p);
    char *norm = path_normalize(root);
    free(dir), free(root);
    if (path_exists(norm)) {
        char *abs = path_absolute(norm);
        free(norm);
        return abs;
    }
    free(norm);
    return path_absolute(p); /* not there: the error that follows names where it was looked for */
}

/* "16k" as ESPnet's humanfriendly.parse_size reads a sampling rate. */
static void fix_fs(ynode *model)
{
    ynode *fc = yt_map_get(model, "frontend_conf");
    ynode *fs = fc && fc->kind == YN_MAP ? yt_map_get(fc, "fs") : NULL;
    if (!fs || fs->kind != YN_SCALAR) return;
    size_t n = strlen(fs->str);
    if (n > 1 && (fs->str[n - 1] == 'k' || fs->str[n - 1] == 'K')) {
        char *end;
        double v = strtod(fs->str, &end);
        if (end == fs->str + n - 1) {
            char buf[32];
            snprintf(buf, sizeof buf, "%.0f", v * 1000);
            yt_map_set(fc, "fs", fs->mark, scalar_at(buf, 0, fs->mark));
        }
    }
}

static int write_tokens(const ynode *tl, const char *config, const char *dst, esp_err *err)
{
    if (tl->kind == YN_SCALAR) { /* a file of tokens, one a line */
        char *src = find_path(tl->str, config);
        size_t len;
        char *data = read_file(src, READ_LIST, &len, err);
        free(src);
        if (!data) return -1;
        int rc = atomic_write_file(dst, data, len, err);
        free(data);
        return rc;
    }
    if (tl->kind != YN_SEQ || tl->n < 2)
        return esp_fail(err, "%s: token_list: expected a list of tokens or a file name", config);
    size_t cap = 1, used = 0;
    for (size_t i = 0; i < tl->n; i++) {
        if (tl->items[i]->kind != YN_SCALAR || !tl->items[i]->str[0] || strchr(tl->items[i]->str, '\n'))
            return esp_fail(err, "%s: token_list[%zu]: not a token", config, i);
        cap += strlen(tl->items[i]->str) + 1;
    }
    char *text = xmalloc(cap);
    for (size_t i = 0; i < tl->n; i++) used += (size_t)sprintf(text + used, "%s\n", tl->items[i]->str);
    int rc = atomic_write_file(dst, text, used, err);
    free(text);
    return rc;
}


static void tokens_origin(const ynode *tl, const char *config, const char *shown_as, espnet2_tokens_origin *o)
{
    if (tl->kind == YN_SCALAR) {
        o->file = find_path(tl->str, config);
        return;
    }
    o->n = tl->n;
    o->marks = xmalloc(tl->n * sizeof *o->marks);
    for (size_t i = 0; i < tl->n; i++) {
        o->marks[i] = tl->items[i]->mark;
        if (shown_as) o->marks[i].file = intern(shown_as);
    }
}

/* dir/rel when it names a regular file inside dir, after normalisation and with links resolved;
 * NULL when meta.yaml's path leaves the pack (absolute, "..", a link out) or names no file. */
static char *pack_member(const char *dir, const char *rel)
{
    if (!rel[0] || rel[0] == '/') return NULL;
    char *joined = path_join(dir, rel), *norm = path_normalize(joined);
    free(joined);
    char *real = realpath(norm, NULL), *rdir = realpath(dir, NULL);
    size_t l = rdir ? strlen(rdir) : 0;
    struct stat st;
    int inside = real && rdir && !strncmp(real, rdir, l) && real[l] == '/' && stat(real, &st) == 0 && S_ISREG(st.st_mode);
    free(real), free(rdir);
    if (!inside) {
        free(norm);
        return NULL;
    }
    return norm;
}

int espnet2_pack_unpack(const char *zip, char **out_dir, char **out_config, char **out_model, esp_err *err)
{
    *out_dir = *out_config = *out_model = NULL;
    int has = zip_has_entry(zip, "meta.yaml", err);
    if (has < 0) return -1;
    if (!has) return esp_fail(err, "%s: no meta.yaml in the zip (not an ESPnet2 packed model)", zip);
    char *dir = tmpdir_make("espnet2_pack", err);
    if (!dir) return -1;
    int rc = zip_unpack(zip, dir, ZIP_UNPACK_MAX_BYTES, err);
    char *meta = xasprintf("%s/meta.yaml", dir);
    ynode *m = rc ? NULL : yt_parse_file(meta, err);
    if (rc == 0 && !m) rc = -1;
    const ynode *c = m ? yt_get_path(m, "yaml_files.asr_train_config") : NULL;
    const ynode *w = m ? yt_get_path(m, "files.asr_model_file") : NULL;
    if (rc == 0 && (!c || c->kind != YN_SCALAR || !w || w->kind != YN_SCALAR))
        rc = esp_fail(err, "%s: meta.yaml names no yaml_files.asr_train_config and files.asr_model_file", zip);
    if (rc == 0) {
        /* every path meta.yaml names stays inside the pack */
        *out_config = pack_member(dir, c->str);
        *out_model = pack_member(dir, w->str);
        char shown[300];
        if (!*out_config || !*out_model)
            rc = esp_fail(err, "%s: meta.yaml names %s, which is not a file inside the zip (a packed model's files are "
                          "in it)", zip, esp_shown(!*out_config ? c->str : w->str, shown, sizeof shown));
    }
    if (m) yt_free(m);
    free(meta);
    if (rc != 0) {
        tmpdir_remove(dir);
        free(*out_config), free(*out_model);
        *out_config = *out_model = NULL;
        return -1;
    }
    *out_dir = dir;
    return 0;
}

/* Marks read from `from` renamed `to` (a config unpacked from a zip is named by the zip). */
static void rename_marks(ynode *n, const char *from, const char *to)
{
    if (!n) return;
    if (n->mark.file && !strcmp(n->mark.file, from)) n->mark.file = to;
    for (size_t i = 0; i < n->n; i++) {
        if (n->kind == YN_MAP && n->key_marks[i].file && !strcmp(n->key_marks[i].file, from))
            n->key_marks[i].file = to;
        rename_marks(n->items[i], from, to);
    }
}

void espnet2_tokens_origin_free(espnet2_tokens_origin *o)
{
    free(o->file);
    free(o->marks);
    memset(o, 0, sizeof *o);
}

int espnet2_config_convert(const char *path, const char *shown_as, char **out_dir, ynode **out_tree,
                           espnet2_tokens_origin *origin, esp_err *err)
{
    if (origin) memset(origin, 0, sizeof *origin);
    *out_dir = NULL;
    *out_tree = NULL;
    ynode *root = yt_parse_file(path, err);
    if (!root) return -1;
    const ynode *model = root->kind == YN_MAP ? yt_map_get(root, "model") : NULL;
    const ynode *tl = root->kind == YN_MAP ? yt_map_get(root, "token_list") : NULL;
    if (!tl || (model && model->kind == YN_MAP)) {
        yt_free(root);
        return 0;
    }
    ynode *cfg = yt_map((ymark){0}), *m = yt_map((ymark){0});
    static const char *const keys[] = {"frontend",    "frontend_conf", "specaug",    "specaug_conf", "normalize",
                                       "normalize_conf", "preencoder", "preencoder_conf", "encoder", "encoder_conf",
                                       "decoder",     "decoder_conf",  "joint_net_conf", "ctc_conf", "model_conf",
                                       "joint_network_conf"}; /* the last: the asr_transducer task's */
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        const ynode *v = yt_map_get(root, keys[i]);
        /* normalize: null stays (none): left out, it would be the task's utterance_mvn */
        if (v && (!yt_is_null(v) || !strcmp(keys[i], "normalize"))) yt_map_set(m, keys[i], v->mark, yt_copy(v));
    }
    fix_fs(m);
    ynode *nc = yt_map_get(m, "normalize_conf"), *sf = nc && nc->kind == YN_MAP ? yt_map_get(nc, "stats_file") : NULL;
    if (sf && sf->kind == YN_SCALAR) {
        char *p = find_path(sf->str, path);
        yt_map_set(nc, "stats_file", sf->mark, scalar_at(p, 1, sf->mark));
        free(p);
    }
    yt_map_set(cfg, "model", (ymark){0}, m);
    char *dir_tmpl = tmpdir_make("espnet2_config", err);
    if (!dir_tmpl) {
        yt_free(cfg);
        yt_free(root);
        return -1;
    }
    char *tok_dir = xasprintf("%s/tokens", dir_tmpl), *tok = xasprintf("%s/tokens.txt", tok_dir);
    int rc = mkdir_p(tok_dir, err);
    if (rc == 0) rc = write_tokens(tl, path, tok, err);
    ynode *tz = yt_map((ymark){0});
    yt_map_set(tz, "save_path", tl->mark, scalar_at(tok_dir, 1, tl->mark));
    yt_map_set(cfg, "tokenizer", (ymark){0}, tz);
    const ynode *tt = yt_map_get(root, "token_type"), *bpe = yt_map_get(root, "bpemodel");
    if (tt && tt->kind == YN_SCALAR && !yt_is_null(tt)) yt_map_set(cfg, "token_type", tt->mark, yt_copy(tt));
    if (bpe && bpe->kind == YN_SCALAR && !yt_is_null(bpe)) {
        char *p = find_path(bpe->str, path);
        yt_map_set(cfg, "bpemodel", bpe->mark, scalar_at(p, 1, bpe->mark));
        free(p);
    }
    free(tok_dir), free(tok);
    if (rc == 0 && origin) tokens_origin(tl, path, shown_as, origin);
    yt_free(root);
    if (rc != 0) {
        yt_free(cfg);
        tmpdir_remove(dir_tmpl);
        return -1;
    }
    if (shown_as) rename_marks(cfg, path, intern(shown_as));
    *out_dir = dir_tmpl, *out_tree = cfg;
    return 1;
}
