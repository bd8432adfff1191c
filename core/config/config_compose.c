#include "core/config/config_compose.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"

#define MAX_INCLUDE_DEPTH 16

static int has_global_package(const char *path)
{
    esp_err e;
    char *text = read_file(path, NULL, &e);
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
static void merge_at_package(ynode *dst, const char *package, const ynode *sub, ymark mark)
{
    char *pkg = xstrdup(package);
    for (char *c = pkg; *c; c++)
        if (*c == '/') *c = '.';
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
}

static ynode *load_rec(const char *path, int depth, const char **chain, esp_err *err);

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
    default_entry *ents = xcalloc(list->n + 1, sizeof *ents);
    size_t n = 0;
    for (size_t i = 0; i < list->n; i++) {
        const ynode *it = list->items[i];
        default_entry e = {.mark = it->mark};
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

static ynode *load_rec(const char *path, int depth, const char **chain, esp_err *err)
{
    for (int i = 0; i < depth; i++) {
        if (!strcmp(chain[i], path)) {
            char buf[2048];
            size_t used = 0;
            for (int k = 0; k < depth; k++) used += (size_t)snprintf(buf + used, sizeof buf - used, "%s -> ", chain[k]);
            snprintf(buf + used, sizeof buf - used, "%s", path);
            esp_fail(err, "%s: defaults include themselves: %s (remove one entry of the loop)", path, buf);
            return NULL;
        }
    }
    if (depth >= MAX_INCLUDE_DEPTH) {
        esp_fail(err, "%s: defaults nest deeper than %d files", path, MAX_INCLUDE_DEPTH);
        return NULL;
    }
    chain[depth] = path;
    ynode *self = yt_parse_file(path, err);
    if (!self) return NULL;
    char where[512];
    if (self->kind != YN_MAP) {
        esp_fail(err, "%s: a config file must be a mapping of keys, found %s",
                 ymark_str(self->mark, where, sizeof where), yt_kind_name(self));
        yt_free(self);
        return NULL;
    }
    ynode *defaults = yt_map_get(self, "defaults");
    if (!defaults) return self;

    default_entry *ents = NULL;
    size_t n = 0;
    if (read_defaults(defaults, &ents, &n, err) != 0) {
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
        default_entry *e = &ents[i];
        if (e->is_self) {
            yt_merge(out, own);
            continue;
        }
        char *rel = e->group ? xasprintf("%s/%s", e->group, e->name) : xstrdup(e->name);
        char *file = with_yaml_ext(rel);
        char *full = path_join(dir, file);
        if (!path_exists(full)) {
            esp_fail(err, "%s: defaults entry '%s' names %s, which does not exist (check the name and its folder)",
                     ymark_str(e->mark, where, sizeof where), rel, full);
            failed = 1;
        } else {
            ynode *sub = load_rec(full, depth + 1, chain, err);
            if (!sub) failed = 1;
            else {
                if (e->group && !has_global_package(full)) merge_at_package(out, e->group, sub, e->mark);
                else yt_merge(out, sub);
                yt_free(sub);
            }
        }
        free(rel);
        free(file);
        free(full);
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
    const char *chain[MAX_INCLUDE_DEPTH];
    return load_rec(path, 0, chain, err);
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
                if (!v) rc = -1;
                else yt_map_set(cur, part, mark, v);
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
