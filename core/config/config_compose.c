#include "core/config/config_compose.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/config/config_limits.h"

/* What loading one config (its file and every file its defaults lists name) has used so far. */
typedef struct load_ctx {
    const char *chain[CFG_MAX_DEFAULTS_DEPTH + 1]; /* files being loaded, outermost first */
    int files;                                     /* files loaded in all */
    esp_err *err;
} load_ctx;

static int has_global_package(const char *path)
{
    esp_err e;
    char *text = read_file(path, READ_SMALL, NULL, &e);
    if (!text) return 0;
    int global = 0;
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        if (line[0] == '#' && strstr(line, "@package") && strstr(line, "_global_")) global = 1;
        if (line[0] != '#' && line[0] != '\0') break; /* the header comes before any content */
        line = nl ? nl + 1 : NULL;
    }
    free(text);
    return global;
}

static char *with_yaml_ext(const char *name)
{
    size_t n = strlen(name);
    if ((n > 5 && !strcmp(name + n - 5, ".yaml")) || (n > 4 && !strcmp(name + n - 4, ".yml"))) return xstrdup(name);
    return xasprintf("%s.yaml", name);
}

/* Places `sub` under the dotted/slashed package path inside dst (merging). */
static int merge_at_package(ynode *dst, const char *package, const ynode *sub, ymark mark, esp_err *err)
{
    char *pkg = xstrdup(package);
    int levels = 1;
    for (char *c = pkg; *c; c++) {
        if (*c == '/') *c = '.';
        levels += *c == '.';
    }
    size_t bytes;
    int height;
    yt_measure(sub, &bytes, &height);
    if (levels + height > CFG_MAX_TREE_DEPTH) {
        char where[512];
        free(pkg);
        return esp_fail(err, "%s: group '%s' puts its values %d levels deep (a config nests at most %d levels)",
                        ymark_str(mark, where, sizeof where), package, levels + height, CFG_MAX_TREE_DEPTH);
    }
    ynode *cur = dst;
    char *save = NULL;
    for (char *part = strtok_r(pkg, ".", &save); part; part = strtok_r(NULL, ".", &save)) {
        ynode *next = yt_map_get(cur, part);
        if (!next || next->kind != YN_MAP) {
            next = yt_map(mark);
            yt_map_set(cur, part, mark, next);
        }
        cur = next;
    }
    if (sub->kind == YN_MAP) yt_merge(cur, sub);
    free(pkg);
    return 0;
}

static ynode *load_rec(load_ctx *c, const char *path, int depth, const ymark *from);

typedef struct default_entry {
    char *group; /* NULL for a plain `- name` */
    char *name;  /* NULL for `_self_` */
    ymark mark;
    int is_self;
} default_entry;

static int read_defaults(const ynode *list, default_entry **out, size_t *n_out, esp_err *err)
{
    char where[512];
    if (list->kind != YN_SEQ)
        return esp_fail(err, "%s: defaults must be a list (e.g. `defaults: [trainer: default, _self_]`)",
                        ymark_str(list->mark, where, sizeof where));
    /* Each entry loads a file (or merges the file's own keys): bounded like the files. */
    if (list->n > CFG_MAX_DEFAULTS_FILES)
        return esp_fail(err, "%s: the defaults list has %zu entries (at most %d files load for one config)",
                        ymark_str(list->mark, where, sizeof where), list->n, CFG_MAX_DEFAULTS_FILES);
    default_entry *ents = xcalloc(list->n + 1, sizeof *ents);
    size_t n = 0;
    int self_seen = 0;
    for (size_t i = 0; i < list->n; i++) {
        const ynode *it = list->items[i];
        default_entry e = {.mark = it->mark};
        if (it->kind == YN_SCALAR && !yt_is_null(it) && !strcmp(it->str, "_self_") && self_seen++) {
            for (size_t k = 0; k < n; k++) free(ents[k].group), free(ents[k].name);
            free(ents);
            return esp_fail(err, "%s: _self_ is listed twice in defaults (list it once, as Hydra requires)",
                            ymark_str(it->mark, where, sizeof where));
        }
        if (it->kind == YN_SCALAR && !yt_is_null(it)) {
            if (!strcmp(it->str, "_self_")) e.is_self = 1;
            else e.name = xstrdup(it->str);
        } else if (it->kind == YN_MAP && it->n == 1 && it->items[0]->kind == YN_SCALAR) {
            const char *g = it->keys[0];
            int is_override = !strncmp(g, "override ", 9);
            if (is_override) g += 9;
            if (!strncmp(g, "optional ", 9)) g += 9;
            if (yt_is_null(it->items[0])) continue; /* `group: null` selects nothing */
            e.group = xstrdup(g);
            e.name = xstrdup(it->items[0]->str);
            if (is_override) { /* replace the earlier choice for this group */
                int found = 0;
                for (size_t k = 0; k < n; k++) {
                    if (ents[k].group && !strcmp(ents[k].group, e.group)) {
                        free(ents[k].name);
                        ents[k].name = e.name;
                        found = 1;
                    }
                }
                if (found) {
                    free(e.group);
                    continue;
                }
            }
        } else {
            for (size_t k = 0; k < n; k++) free(ents[k].group), free(ents[k].name);
            free(ents);
            return esp_fail(err, "%s: a defaults entry is `- name`, `- group: name` or `- _self_`",
                            ymark_str(it->mark, where, sizeof where));
        }
        ents[n++] = e;
    }
    *out = ents;
    *n_out = n;
    return 0;
}

static int fail_include_depth(load_ctx *c, const char *path, const ymark *from, int depth)
{
    char where[512], chain[2048];
    size_t used = 0;
    chain[0] = '\0';
    for (int k = 0; k < depth && used < sizeof chain; k++)
        used += (size_t)snprintf(chain + used, sizeof chain - used, "%s -> ", c->chain[k]);
    if (used < sizeof chain) snprintf(chain + used, sizeof chain - used, "%s", path);
    return esp_fail(c->err, "%s: defaults nest deeper than %d levels: %s (include the inner files from fewer levels)",
                    ymark_str(*from, where, sizeof where), CFG_MAX_DEFAULTS_DEPTH, chain);
}

/* Checks made before a file is read: include loops, depth, count. */
static int may_load(load_ctx *c, const char *path, int depth, const ymark *from)
{
    char where[512];
    for (int i = 0; i < depth; i++) {
        if (!strcmp(c->chain[i], path)) {
            char buf[2048];
            size_t used = 0;
            buf[0] = '\0';
            for (int k = 0; k < depth && used < sizeof buf; k++)
                used += (size_t)snprintf(buf + used, sizeof buf - used, "%s -> ", c->chain[k]);
            if (used < sizeof buf) snprintf(buf + used, sizeof buf - used, "%s", path);
            return esp_fail(c->err, "%s: defaults include themselves: %s (remove one entry of the loop)", path, buf);
        }
    }
    if (depth > CFG_MAX_DEFAULTS_DEPTH) return fail_include_depth(c, path, from, depth);
    if (++c->files > CFG_MAX_DEFAULTS_FILES)
        return esp_fail(c->err, "%s: defaults load more than %d files for one config (files that include the "
                        "same files many times multiply; include each once)",
                        from ? ymark_str(*from, where, sizeof where) : path, CFG_MAX_DEFAULTS_FILES);
    return 0;
}

/* Merges the file a defaults entry names into out. */
static int load_entry(load_ctx *c, ynode *out, const default_entry *e, const char *dir, int depth)
{
    char where[512];
    char *rel = e->group ? xasprintf("%s/%s", e->group, e->name) : xstrdup(e->name);
    char *file = with_yaml_ext(rel);
    char *full = path_join(dir, file);
    int rc = 0;
    if (!path_exists(full)) {
        rc = esp_fail(c->err, "%s: defaults entry '%s' names %s, which does not exist (check the name and its folder)",
                      ymark_str(e->mark, where, sizeof where), rel, full);
    } else {
        ynode *sub = load_rec(c, full, depth + 1, &e->mark);
        if (!sub) rc = -1;
        else if (e->group && !has_global_package(full)) rc = merge_at_package(out, e->group, sub, e->mark, c->err);
        else yt_merge(out, sub);
        yt_free(sub);
    }
    free(rel);
    free(file);
    free(full);
    return rc;
}

/* Reads path; the top file (depth 0) must hold keys: an empty one is a mistake, not a config. */
static ynode *read_config_file(load_ctx *c, const char *path, int depth)
{
    int empty;
    ynode *self = yt_parse_file_doc(path, &empty, c->err);
    if (!self) return NULL;
    char where[512];
    if (empty && depth == 0) {
        esp_fail(c->err, "%s: the config file is empty (no YAML document, only comments, or null; write its keys, "
                 "or `{}` to take the template as it is)", path);
        yt_free(self);
        return NULL;
    }
    if (self->kind != YN_MAP) {
        esp_fail(c->err, "%s: a config file must be a mapping of keys, found %s",
                 ymark_str(self->mark, where, sizeof where), yt_kind_name(self));
        yt_free(self);
        return NULL;
    }
    return self;
}

static ynode *load_rec(load_ctx *c, const char *path, int depth, const ymark *from)
{
    if (may_load(c, path, depth, from) != 0) return NULL;
    c->chain[depth] = path;
    ynode *self = read_config_file(c, path, depth);
    if (!self) return NULL;
    ynode *defaults = yt_map_get(self, "defaults");
    if (!defaults) return self;

    default_entry *ents = NULL;
    size_t n = 0;
    if (read_defaults(defaults, &ents, &n, c->err) != 0) {
        yt_free(self);
        return NULL;
    }
    ynode *own = yt_copy(self);
    yt_map_remove(own, "defaults");
    int self_listed = 0;
    for (size_t i = 0; i < n; i++) self_listed |= ents[i].is_self;
    ynode *out = yt_map(self->mark);
    char *dir = path_dirname(path);
    int failed = 0;
    for (size_t i = 0; i < n && !failed; i++) {
        if (ents[i].is_self) yt_merge(out, own);
        else failed = load_entry(c, out, &ents[i], dir, depth) != 0;
    }
    /* Hydra appends _self_ last when the list does not name it: the file overrides its defaults. */
    if (!failed && !self_listed) yt_merge(out, own);
    for (size_t i = 0; i < n; i++) free(ents[i].group), free(ents[i].name);
    free(ents);
    free(dir);
    yt_free(own);
    yt_free(self);
    if (failed) {
        yt_free(out);
        return NULL;
    }
    return out;
}

ynode *config_load_file(const char *path, esp_err *err)
{
    load_ctx c = {.err = err};
    return load_rec(&c, path, 0, NULL);
}

/* The YAML value of an override's right-hand side. */
static ynode *override_value(const char *text, ymark mark, esp_err *err)
{
    size_t n = strlen(text);
    if (n >= 2 && (text[0] == '\'' || text[0] == '"') && text[n - 1] == text[0]) {
        char *inner = xstrndup(text + 1, n - 2);
        ynode *v = yt_scalar(inner, 1, mark);
        free(inner);
        return v;
    }
    if (text[0] == '[' || text[0] == '{') {
        ynode *v = yt_parse_string(text, n, mark.file, err);
        if (!v) return NULL;
        /* Positions inside the command line are not lines of a file: point at the option. */
        ynode *stack[64];
        int sp = 0;
        stack[sp++] = v;
        while (sp) {
            ynode *c = stack[--sp];
            c->mark = mark;
            for (size_t i = 0; i < c->n && sp < 64; i++) stack[sp++] = c->items[i];
            if (c->key_marks)
                for (size_t i = 0; i < c->n; i++) c->key_marks[i] = mark;
        }
        return v;
    }
    return yt_scalar(text, 0, mark);
}

int config_apply_override(ynode *root, const char *override, esp_err *err)
{
    if (!utf8_valid(override)) return esp_fail(err, "an override on the command line is not UTF-8 text");
    ymark mark = {intern(override), 0, 0};
    char *o = xstrdup(override);
    int rc = 0;
    int add = 0, del = 0;
    char *key = o;
    if (*key == '+') add = 1, key++;
    else if (*key == '~') del = 1, key++;
    (void)add; /* `+key=value` and `key=value` both set: validation reports unknown keys */
    char *eq = strchr(key, '=');
    if (del) {
        if (eq) *eq = '\0';
    } else if (!eq || eq == key) {
        free(o);
        return esp_fail(err, "override '%s': expected key.path=value (e.g. trainer.max_epochs=5)", override);
    } else {
        *eq = '\0';
    }
    int levels = 1;
    for (const char *c = key; *c; c++) levels += *c == '.';
    if (levels > CFG_MAX_TREE_DEPTH) {
        free(o);
        return esp_fail(err, "override '%.60s...': the key has %d levels (a config nests at most %d)", override, levels,
                        CFG_MAX_TREE_DEPTH);
    }
    /* Walk to the parent map, creating maps on the way. */
    ynode *cur = root;
    char *save = NULL, *part = strtok_r(key, ".", &save);
    while (part) {
        char *next = strtok_r(NULL, ".", &save);
        if (!*part) break;
        if (!next) {
            if (del) {
                if (!yt_map_remove(cur, part))
                    rc = esp_fail(err, "override '%s': there is no key '%s' to delete", override, part);
            } else {
                ynode *v = override_value(eq + 1, mark, err);
                size_t bytes;
                int height = 0;
                if (v) yt_measure(v, &bytes, &height);
                if (!v) rc = -1;
                else if (levels + height > CFG_MAX_TREE_DEPTH) {
                    rc = esp_fail(err, "override '%.60s...': the value would sit %d levels deep (a config nests at "
                                  "most %d)", override, levels + height, CFG_MAX_TREE_DEPTH);
                    yt_free(v);
                } else yt_map_set(cur, part, mark, v);
            }
            break;
        }
        ynode *child = yt_map_get(cur, part);
        if (!child || child->kind != YN_MAP) {
            if (del) {
                rc = esp_fail(err, "override '%s': there is no key '%s' to delete", override, key);
                break;
            }
            child = yt_map(mark);
            yt_map_set(cur, part, mark, child);
        }
        cur = child;
        part = next;
    }
    free(o);
    return rc;
}

/* A recipe's scheduler block that names another class than the template's replaces it: the
 * template's arguments belong to its class (its WarmupLR's warmup_steps would change an ESPnet2
 * class whose own default is 0, CosineAnnealingWarmupRestarts or ExponentialDecayWarmup), and an
 * ESPnet3 recipe's block stands alone. */
static void drop_other_scheduler(ynode *tmpl, const ynode *user)
{
    const ynode *u = yt_get_path(user, "scheduler._target_"), *t = yt_get_path(tmpl, "scheduler._target_");
    if (u && t && u->kind == YN_SCALAR && t->kind == YN_SCALAR && strcmp(u->str, t->str) != 0)
        yt_map_remove(tmpl, "scheduler");
}

ynode *config_compose(const char *path, const char *template_path, const char **overrides, int n_overrides,
                      esp_err *err)
{
    ynode *user = config_load_file(path, err);
    if (!user) return NULL;
    ynode *root = user;
    if (template_path) {
        ynode *tmpl = config_load_file(template_path, err);
        if (!tmpl) {
            yt_free(user);
            return NULL;
        }
        drop_other_scheduler(tmpl, user);
        yt_merge(tmpl, user);
        yt_free(user);
        root = tmpl;
    }
    for (int i = 0; i < n_overrides; i++) {
        if (config_apply_override(root, overrides[i], err) != 0) {
            yt_free(root);
            return NULL;
        }
    }
    return root;
}
