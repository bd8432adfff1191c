/* Paths, copies, README templates and uploads of ESPnet3's publication stages (publish_files.h). */
#include "stages/publish_files.h"

#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/base/fsio.h"
#include "core/base/proc.h"

static int has_magic(const char *s) { return strpbrk(s, "*?[") != NULL; }

/* Splits a path into its components (in place); returns their count. */
static size_t split_parts(char *path, char **parts, size_t cap)
{
    size_t n = 0;
    for (char *save = NULL, *p = strtok_r(path, "/", &save); p && n < cap; p = strtok_r(NULL, "/", &save)) parts[n++] = p;
    return n;
}

/* Python's glob with recursive=True on components: ** is zero or more folders; a wildcard does
 * not match a name starting with '.'. */
static int match_parts(char **pat, size_t np, char **path, size_t nq)
{
    if (np == 0) return nq == 0;
    if (!strcmp(pat[0], "**"))
        return match_parts(pat + 1, np - 1, path, nq) || (nq > 0 && path[0][0] != '.' && match_parts(pat, np, path + 1, nq - 1));
    if (nq == 0) return 0;
    return fnmatch(pat[0], path[0], FNM_PERIOD) == 0 && match_parts(pat + 1, np - 1, path + 1, nq - 1);
}

typedef struct str_list {
    char **v;
    size_t n, cap;
} str_list;

static void list_add(str_list *l, char *s)
{
    if (l->n == l->cap) l->v = xrealloc(l->v, (l->cap = l->cap ? 2 * l->cap : 16) * sizeof *l->v);
    l->v[l->n++] = s;
}

/* Every path below dir (rel: its path below the walk's root) matching the pattern's parts. */
static void walk_match(const char *dir, const char *rel, char **pat, size_t np, str_list *out)
{
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *full = path_join(dir, e->d_name), *r = rel[0] ? xasprintf("%s/%s", rel, e->d_name) : xstrdup(e->d_name);
        char *copy = xstrdup(r), *parts[256];
        size_t nq = split_parts(copy, parts, 256);
        if (match_parts(pat, np, parts, nq)) list_add(out, xstrdup(full));
        free(copy);
        struct stat st;
        if (lstat(full, &st) == 0 && S_ISDIR(st.st_mode)) walk_match(full, r, pat, np, out);
        free(full), free(r);
    }
    closedir(d);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

size_t pack_expand(const char *const *raw, size_t n, const char *root, char ***out)
{
    str_list all = {0};
    for (size_t i = 0; i < n; i++) {
        if (!has_magic(raw[i])) {
            list_add(&all, xstrdup(raw[i]));
            continue;
        }
        char *abs_root = path_absolute(root);
        char *joined = raw[i][0] == '/' ? xstrdup(raw[i]) : path_join(abs_root, raw[i]);
        char *pattern = path_normalize(joined);
        free(joined), free(abs_root);
        char *copy = xstrdup(pattern), *parts[256];
        size_t np = split_parts(copy, parts, 256), fixed = 0;
        while (fixed < np && !has_magic(parts[fixed])) fixed++;
        char *base = xstrdup("/");
        for (size_t k = 0; k < fixed; k++) {
            char *next = path_join(base, parts[k]);
            free(base);
            base = next;
        }
        str_list found = {0};
        walk_match(base, "", parts + fixed, np - fixed, &found);
        qsort(found.v, found.n, sizeof *found.v, cmp_str);
        if (!found.n) log_warn("pack: the pattern %s matches nothing", raw[i]);
        for (size_t k = 0; k < found.n; k++) list_add(&all, found.v[k]);
        free(found.v), free(base), free(copy), free(pattern);
    }
    /* drop repeats of the same absolute path, keeping the first */
    size_t kept = 0;
    for (size_t i = 0; i < all.n; i++) {
        char *a = path_absolute(all.v[i]);
        int dup = 0;
        for (size_t j = 0; j < kept && !dup; j++) {
            char *b = path_absolute(all.v[j]);
            dup = !strcmp(a, b);
            free(b);
        }
        free(a);
        if (dup) free(all.v[i]);
        else all.v[kept++] = all.v[i];
    }
    *out = all.v;
    return kept;
}

int pack_excluded(const char *rel, int is_dir, const char *const *patterns, size_t n)
{
    const char *slash = strrchr(rel, '/');
    const char *base = slash ? slash + 1 : rel;
    char *cands[6];
    size_t nc = 0;
    cands[nc++] = xstrdup(rel);
    cands[nc++] = xstrdup(base);
    cands[nc++] = xasprintf("**/%s", rel);
    if (is_dir) {
        cands[nc++] = xasprintf("%s/", rel);
        cands[nc++] = xasprintf("%s/", base);
        cands[nc++] = xasprintf("**/%s/", rel);
    }
    int hit = 0;
    for (size_t p = 0; p < n && !hit; p++)
        for (size_t c = 0; c < nc && !hit; c++) hit = fnmatch(patterns[p], cands[c], 0) == 0;
    for (size_t c = 0; c < nc; c++) free(cands[c]);
    return hit;
}

static int copy_one_file(const char *src, const char *dst, mode_t mode, esp_err *err)
{
    size_t len;
    char *bytes = read_file(src, READ_MODEL, &len, err);
    if (!bytes) return -1;
    char *dir = path_dirname(dst);
    int rc = mkdir_p(dir, err);
    free(dir);
    if (rc == 0) rc = atomic_write_file(dst, bytes, len, err);
    if (rc == 0) chmod(dst, mode & 0777);
    free(bytes);
    return rc;
}

static int copy_tree(const char *src_root, const char *rel, const char *dst_root, const char *const *ex, size_t n_ex,
                     int depth, esp_err *err)
{
    if (depth > 64) return esp_fail(err, "%s/%s: folders nested deeper than 64 (a link loop?)", src_root, rel);
    char *dir = rel[0] ? path_join(src_root, rel) : xstrdup(src_root);
    DIR *d = opendir(dir);
    if (!d) {
        int rc = esp_fail(err, "%s: cannot read: %s", dir, strerror(errno));
        free(dir);
        return rc;
    }
    int rc = 0;
    char *out_dir = rel[0] ? path_join(dst_root, rel) : xstrdup(dst_root);
    rc = mkdir_p(out_dir, err);
    for (struct dirent *e; rc == 0 && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char *r = rel[0] ? xasprintf("%s/%s", rel, e->d_name) : xstrdup(e->d_name);
        char *full = path_join(src_root, r);
        struct stat st;
        if (stat(full, &st) == 0 && !pack_excluded(r, S_ISDIR(st.st_mode), ex, n_ex)) {
            if (S_ISDIR(st.st_mode)) rc = copy_tree(src_root, r, dst_root, ex, n_ex, depth + 1, err);
            else if (S_ISREG(st.st_mode)) {
                char *to = path_join(dst_root, r);
                rc = copy_one_file(full, to, st.st_mode, err);
                free(to);
            }
        }
        free(full), free(r);
    }
    closedir(d);
    free(out_dir), free(dir);
    return rc;
}

int pack_copy(const char *src, const char *dst, const char *const *excludes, size_t n_ex, esp_err *err)
{
    struct stat st;
    if (stat(src, &st) != 0) return esp_fail(err, "%s: cannot read: %s", src, strerror(errno));
    if (S_ISDIR(st.st_mode)) return copy_tree(src, "", dst, excludes, n_ex, 0, err);
    return copy_one_file(src, dst, st.st_mode, err);
}

static const char *lookup(const char *key, size_t len, const char *const *keys, const char *const *values, size_t n)
{
    const char *v = NULL;
    for (size_t i = 0; i < n; i++)
        if (strlen(keys[i]) == len && !strncmp(keys[i], key, len)) v = values[i]; /* the last one wins */
    return v;
}

static int ident_char(char c, int first)
{
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && c >= '0' && c <= '9');
}

char *readme_render(const char *tmpl, const char *const *keys, const char *const *values, size_t n)
{
    char *out = NULL;
    size_t out_len = 0;
    FILE *fp = open_memstream(&out, &out_len);
    ESP_CHECK(fp);
    int first_line = 1, written = 0;
    for (const char *line = tmpl; *line || first_line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        first_line = 0;
        /* a ${key} with no value drops its line */
        int drop = 0;
        for (const char *p = line; p < line + len && !drop; p++) {
            if (p[0] != '$' || p[1] != '{') continue;
            const char *q = p + 2;
            while (q < line + len && ident_char(*q, 0)) q++;
            if (q < line + len && *q == '}' && q > p + 2) {
                const char *v = lookup(p + 2, (size_t)(q - p - 2), keys, values, n);
                drop = !v || !v[0];
            }
        }
        if (!drop) {
            if (written++) fputc('\n', fp);
            for (const char *p = line; p < line + len;) {
                if (p[0] == '$' && p + 1 < line + len && p[1] == '$') {
                    fputc('$', fp), p += 2;
                    continue;
                }
                if (p[0] == '$') {
                    int braced = p + 1 < line + len && p[1] == '{';
                    const char *k = p + 1 + braced, *q = k;
                    while (q < line + len && ident_char(*q, q == k)) q++;
                    int ok = q > k && (!braced || (q < line + len && *q == '}'));
                    const char *v = ok ? lookup(k, (size_t)(q - k), keys, values, n) : NULL;
                    if (v) {
                        fputs(v, fp);
                        p = q + braced;
                        continue;
                    }
                }
                fputc(*p++, fp);
            }
        }
        if (!nl) break;
        line = nl + 1;
        if (!*line) break;
    }
    ESP_CHECK(fclose(fp) == 0);
    return out;
}

void readme_context_add(const ynode *map, const char ***keys, const char ***values, size_t *n)
{
    if (!map || map->kind != YN_MAP) return;
    for (size_t i = 0; i < map->n; i++) {
        const ynode *v = map->items[i];
        if (v->kind != YN_SCALAR || yt_is_null(v)) continue;
        *keys = xrealloc((void *)*keys, (*n + 1) * sizeof **keys);
        *values = xrealloc((void *)*values, (*n + 1) * sizeof **values);
        (*keys)[*n] = map->keys[i];
        (*values)[*n] = v->str;
        (*n)++;
    }
}

int pack_swap_into_place(const char *staging, const char *out, esp_err *err)
{
    char *old = xasprintf("%s.old-%ld", out, (long)getpid());
    int had = path_exists(out) && rename(out, old) == 0, rc = 0;
    if (rename(staging, out) != 0) {
        rc = esp_fail(err, "%s: cannot rename to %s: %s", staging, out, strerror(errno));
        if (had) rename(old, out);
        remove_tree(staging);
    } else if (had) {
        remove_tree(old);
    }
    free(old);
    return rc;
}

int hf_upload(const char *where, const char *repo, const char *folder, const char *repo_type, esp_err *err)
{
    const char *cli = which("hf") ? "hf" : which("huggingface-cli") ? "huggingface-cli" : NULL;
    if (!cli)
        return esp_fail(err, "%s: no Hugging Face command-line tool on PATH; %s is ready to upload (pip install "
                        "huggingface_hub, log in with `hf auth login`, then: hf upload %s %s --repo-type %s)",
                        where, folder, repo, folder, repo_type);
    char *argv[] = {(char *)cli, "upload", (char *)repo, (char *)folder, "--repo-type", (char *)repo_type, NULL};
    proc_buf out = {0}, errs = {0};
    int status = 0;
    int rc = proc_run_capture(argv, &out, &errs, 4096, &status, err);
    if (rc == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        log_info("uploaded %s to %s (%s)", folder, repo, repo_type);
        free(out.data), free(errs.data);
        return 0;
    }
    /* the tool's last non-empty line says why (a traceback ends with the exception) */
    char *text = errs.len ? (char *)errs.data : out.len ? (char *)out.data : "";
    char *last = NULL;
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
        if (l[strspn(l, " \t")]) last = l;
    char shown[600];
    esp_shown(last ? last : "no message", shown, sizeof shown);
    if (rc >= 0) /* -1: proc_run_capture said why */
        esp_fail(err, "%s: %s upload %s failed (%s); %s is ready to upload: rerun when the hub is reachable and you "
                 "are logged in", where, cli, repo, rc > 0 ? strerror(rc) : shown, folder);
    free(out.data), free(errs.data);
    return -1;
}

int upload_stage(const esp_config *c, const char *section, const upload_cfg *up, const char *folder,
                 const char *repo_type, const char *made_by, esp_err *err)
{
    char *key = xasprintf("%s.hf_repo", section);
    char *w = config_where(c, up ? key : section);
    int rc;
    if (!up || !up->hf_repo)
        rc = esp_fail(err, "%s%s: missing (the Hugging Face %s to upload to, user/name)", w, up ? "" : ".hf_repo",
                      !strcmp(repo_type, "space") ? "Space" : "repo");
    else if (!is_dir(folder))
        rc = esp_fail(err, "%s: not found (run %s first)", folder, made_by);
    else rc = hf_upload(w, up->hf_repo, folder, repo_type, err);
    free(w), free(key);
    return rc;
}
