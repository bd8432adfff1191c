#include "core/config/yamltree.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "core/base/fsio.h"
#include "core/config/config_limits.h"
#include "core/config/yindex.h"

/* ---- interned file names ------------------------------------------------------------- */

static char **interned;
static size_t n_interned;

const char *intern(const char *s)
{
    for (size_t i = 0; i < n_interned; i++)
        if (strcmp(interned[i], s) == 0) return interned[i];
    interned = xrealloc(interned, (n_interned + 1) * sizeof *interned);
    return interned[n_interned++] = xstrdup(s);
}

const char *ymark_str(ymark m, char *buf, size_t n)
{
    if (m.line > 0) snprintf(buf, n, "%s:%d:%d", m.file ? m.file : "<config>", m.line, m.col);
    else snprintf(buf, n, "%s", m.file ? m.file : "<config>");
    return buf;
}

/* ---- construction ------------------------------------------------------------------ */

static ynode *node_new(ynode_kind kind, ymark mark)
{
    ynode *n = xcalloc(1, sizeof *n);
    n->kind = kind;
    n->mark = mark;
    return n;
}

ynode *yt_scalar(const char *s, int quoted, ymark mark)
{
    ynode *n = node_new(YN_SCALAR, mark);
    n->str = xstrdup(s);
    n->quoted = quoted;
    return n;
}

ynode *yt_map(ymark mark) { return node_new(YN_MAP, mark); }
ynode *yt_seq(ymark mark) { return node_new(YN_SEQ, mark); }

/* ---- the key index of large mappings ---------------------------------------------------- */

/* Mappings with this many keys get a hash index; smaller ones are scanned. */
#define INDEX_MIN_KEYS 16

static const char *map_key_at(const void *map, size_t pos) { return ((const ynode *)map)->keys[pos]; }

static void index_drop(ynode *n)
{
    if (!n->index) return;
    yindex_free(n->index);
    free(n->index);
    n->index = NULL;
}

/* After keys were added at the end (or moved): keep the index in step, creating it when the
 * mapping has become large. */
static void index_update(ynode *map, size_t first_new)
{
    if (map->n < INDEX_MIN_KEYS) return;
    if (!map->index) {
        map->index = xcalloc(1, sizeof *map->index);
        first_new = 0;
    }
    for (size_t p = first_new; p < map->n; p++) yindex_put(map->index, map->keys[p], p, map_key_at, map);
}

/* Frees the value of n (text, children, index) but not n itself. */
static void free_value(ynode *n)
{
    for (size_t i = 0; i < n->n; i++) {
        yt_free(n->items[i]);
        if (n->keys) free(n->keys[i]);
    }
    free(n->items);
    free(n->keys);
    free(n->key_marks);
    free(n->str);
    index_drop(n);
}

void yt_free(ynode *n)
{
    if (!n) return;
    free_value(n);
    free(n);
}

void yt_take(ynode *dst, ynode *src)
{
    free_value(dst);
    dst->kind = src->kind;
    dst->str = src->str;
    dst->quoted = src->quoted;
    dst->n = src->n;
    dst->cap = src->cap;
    dst->keys = src->keys;
    dst->key_marks = src->key_marks;
    dst->items = src->items;
    dst->index = src->index;
    free(src);
}

void yt_measure(const ynode *n, size_t *bytes, int *height)
{
    size_t b = YT_NODE_COST + (n->str ? strlen(n->str) : 0);
    int h = 0;
    for (size_t i = 0; i < n->n; i++) {
        size_t cb;
        int ch;
        yt_measure(n->items[i], &cb, &ch);
        b += cb + (n->keys ? strlen(n->keys[i]) : 0);
        if (ch + 1 > h) h = ch + 1;
    }
    if (n->kind != YN_SCALAR && h == 0) h = 1;
    *bytes = b;
    *height = h;
}

static void grow(ynode *n)
{
    if (n->n < n->cap) return;
    n->cap = n->cap ? n->cap * 2 : 4;
    n->items = xrealloc(n->items, n->cap * sizeof *n->items);
    if (n->kind == YN_MAP) {
        n->keys = xrealloc(n->keys, n->cap * sizeof *n->keys);
        n->key_marks = xrealloc(n->key_marks, n->cap * sizeof *n->key_marks);
    }
}

ynode *yt_copy(const ynode *src)
{
    if (!src) return NULL;
    ynode *n = node_new(src->kind, src->mark);
    n->via = src->via;
    n->quoted = src->quoted;
    n->resolved = src->resolved;
    if (src->str) n->str = xstrdup(src->str);
    for (size_t i = 0; i < src->n; i++) {
        grow(n);
        n->items[i] = yt_copy(src->items[i]);
        if (src->kind == YN_MAP) {
            n->keys[i] = xstrdup(src->keys[i]);
            n->key_marks[i] = src->key_marks[i];
        }
        n->n++;
    }
    if (n->kind == YN_MAP) index_update(n, 0);
    return n;
}

ptrdiff_t yt_map_index(const ynode *map, const char *key)
{
    if (!map || map->kind != YN_MAP) return -1;
    if (map->index) return yindex_find(map->index, key, map_key_at, map);
    for (size_t i = 0; i < map->n; i++)
        if (strcmp(map->keys[i], key) == 0) return (ptrdiff_t)i;
    return -1;
}

ynode *yt_map_get(const ynode *map, const char *key)
{
    ptrdiff_t i = yt_map_index(map, key);
    return i < 0 ? NULL : map->items[i];
}

/* Appends a key the map does not have yet, taking ownership of key and value. */
static void map_append(ynode *map, char *key, ymark key_mark, ynode *value)
{
    grow(map);
    map->keys[map->n] = key;
    map->key_marks[map->n] = key_mark;
    map->items[map->n++] = value;
    index_update(map, map->n - 1);
}

void yt_map_set(ynode *map, const char *key, ymark key_mark, ynode *value)
{
    ESP_CHECK(map->kind == YN_MAP);
    ptrdiff_t i = yt_map_index(map, key);
    if (i >= 0) {
        yt_free(map->items[i]);
        map->items[i] = value;
        return;
    }
    map_append(map, xstrdup(key), key_mark, value);
}

int yt_map_remove(ynode *map, const char *key)
{
    ptrdiff_t i = yt_map_index(map, key);
    if (i < 0) return 0;
    yt_free(map->items[i]);
    free(map->keys[i]);
    size_t rest = map->n - (size_t)i - 1;
    memmove(&map->items[i], &map->items[i + 1], rest * sizeof *map->items);
    memmove(&map->keys[i], &map->keys[i + 1], rest * sizeof *map->keys);
    memmove(&map->key_marks[i], &map->key_marks[i + 1], rest * sizeof *map->key_marks);
    map->n--;
    if (map->index) yindex_rebuild(map->index, map->n, map_key_at, map);
    return 1;
}

void yt_seq_push(ynode *seq, ynode *item)
{
    ESP_CHECK(seq->kind == YN_SEQ);
    grow(seq);
    seq->items[seq->n++] = item;
}

void yt_merge(ynode *dst, const ynode *src)
{
    ESP_CHECK(dst->kind == YN_MAP && src->kind == YN_MAP);
    for (size_t i = 0; i < src->n; i++) {
        ynode *cur = yt_map_get(dst, src->keys[i]);
        const ynode *val = src->items[i];
        if (cur && cur->kind == YN_MAP && val->kind == YN_MAP) yt_merge(cur, val);
        else yt_map_set(dst, src->keys[i], src->key_marks[i], yt_copy(val));
    }
}

/* ---- path lookup --------------------------------------------------------------------- */

static int all_digits(const char *s, size_t n)
{
    if (n == 0) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i])) return 0;
    return 1;
}

ynode *yt_get_path(const ynode *root, const char *path)
{
    const ynode *cur = root;
    const char *p = path;
    while (*p && cur) {
        if (*p == '.') {
            p++;
            continue;
        }
        if (*p == '[') {
            char *end;
            long idx = strtol(p + 1, &end, 10);
            if (*end != ']' || end == p + 1 || cur->kind != YN_SEQ || idx < 0 || (size_t)idx >= cur->n)
                return NULL;
            cur = cur->items[idx];
            p = end + 1;
            continue;
        }
        size_t len = strcspn(p, ".[");
        if (cur->kind == YN_SEQ && all_digits(p, len)) {
            size_t idx = (size_t)strtoul(p, NULL, 10);
            cur = idx < cur->n ? cur->items[idx] : NULL;
        } else if (cur->kind == YN_MAP) {
            char small[128];
            char *key = len < sizeof small ? memcpy(small, p, len) : xstrndup(p, len);
            key[len] = '\0';
            cur = yt_map_get(cur, key);
            if (key != small) free(key);
        } else {
            return NULL;
        }
        p += len;
    }
    return (ynode *)cur;
}

/* ---- scalar types ---------------------------------------------------------------------- */

int yt_is_null(const ynode *n)
{
    if (!n || n->kind != YN_SCALAR || n->quoted) return 0;
    const char *s = n->str;
    return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

int yt_as_int(const ynode *n, int64_t *out)
{
    if (!n || n->kind != YN_SCALAR || n->quoted || !*n->str) return 0;
    const char *s = n->str;
    char *end;
    errno = 0;
    int base = 10;
    const char *digits = s + (s[0] == '-' || s[0] == '+');
    if (digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X')) base = 16;
    else if (digits[0] == '0' && digits[1] == 'o') return 0;
    long long v = strtoll(s, &end, base);
    if (*end || errno || end == s) return 0;
    if (out) *out = v;
    return 1;
}

int yt_as_float(const ynode *n, double *out)
{
    if (!n || n->kind != YN_SCALAR || n->quoted || !*n->str) return 0;
    const char *s = n->str;
    if (!strcmp(s, ".inf") || !strcmp(s, "+.inf") || !strcmp(s, ".Inf")) {
        if (out) *out = INFINITY;
        return 1;
    }
    if (!strcmp(s, "-.inf") || !strcmp(s, "-.Inf")) {
        if (out) *out = -INFINITY;
        return 1;
    }
    if (!strcmp(s, ".nan") || !strcmp(s, ".NaN")) {
        if (out) *out = NAN;
        return 1;
    }
    /* Only decimal numbers: strtod would also take "inf", "nan" and hex floats. */
    for (const char *p = s; *p; p++)
        if (!strchr("0123456789+-.eE_", *p)) return 0;
    if (!strpbrk(s, "0123456789")) return 0;
    char *clean = xstrdup(s), *w = clean;
    for (const char *p = s; *p; p++)
        if (*p != '_') *w++ = *p;
    *w = '\0';
    char *end;
    errno = 0;
    double v = strtod(clean, &end);
    int ok = !*end && errno != ERANGE;
    free(clean);
    if (ok && out) *out = v;
    return ok;
}

int yt_as_bool(const ynode *n, int *out)
{
    if (!n || n->kind != YN_SCALAR || n->quoted) return 0;
    static const char *yes[] = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"};
    static const char *no[] = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"};
    for (size_t i = 0; i < sizeof yes / sizeof *yes; i++) {
        if (!strcmp(n->str, yes[i])) {
            if (out) *out = 1;
            return 1;
        }
        if (!strcmp(n->str, no[i])) {
            if (out) *out = 0;
            return 1;
        }
    }
    return 0;
}

const char *yt_kind_name(const ynode *n)
{
    if (!n) return "nothing";
    if (n->kind == YN_MAP) return "a mapping";
    if (n->kind == YN_SEQ) return "a list";
    if (yt_is_null(n)) return "null";
    if (yt_as_bool(n, NULL)) return "a boolean";
    if (yt_as_int(n, NULL)) return "an integer";
    if (yt_as_float(n, NULL)) return "a float";
    return "a string";
}

/* ---- parsing ------------------------------------------------------------------------- */

typedef struct anchor {
    char *name;
    ynode *node;
} anchor;

typedef struct parse_state {
    yaml_parser_t parser;
    const char *file;
    anchor *anchors;
    size_t n_anchors;
    yindex anchor_index; /* name -> latest anchor of that name */
    size_t alias_nodes;  /* values copied for aliases so far */
    size_t alias_bytes;  /* and the text they hold */
    esp_err *err;
} parse_state;

static size_t count_nodes(const ynode *n)
{
    size_t c = 1;
    for (size_t i = 0; i < n->n; i++) c += count_nodes(n->items[i]);
    return c;
}

static ymark mark_of(const parse_state *ps, yaml_mark_t m)
{
    return (ymark){ps->file, (int)m.line + 1, (int)m.column + 1};
}

static int parser_error(parse_state *ps)
{
    yaml_parser_t *p = &ps->parser;
    char where[512];
    ymark m = mark_of(ps, p->problem_mark);
    if (p->context)
        return esp_fail(ps->err, "%s: YAML syntax error: %s %s (check indentation and quoting)",
                        ymark_str(m, where, sizeof where), p->problem ? p->problem : "", p->context);
    return esp_fail(ps->err, "%s: YAML syntax error: %s (check indentation and quoting)",
                    ymark_str(m, where, sizeof where), p->problem ? p->problem : "unknown problem");
}

static const char *anchor_name_at(const void *ps, size_t pos) { return ((const parse_state *)ps)->anchors[pos].name; }

static void remember_anchor(parse_state *ps, const yaml_char_t *name, ynode *node)
{
    if (!name) return;
    ps->anchors = xrealloc(ps->anchors, (ps->n_anchors + 1) * sizeof *ps->anchors);
    ps->anchors[ps->n_anchors].name = xstrdup((const char *)name);
    ps->anchors[ps->n_anchors].node = node;
    yindex_put(&ps->anchor_index, (const char *)name, ps->n_anchors++, anchor_name_at, ps);
}

/* Aliases copy their anchor: bounds on what they copy stop "billion laughs" documents. */
static ynode *expand_alias(parse_state *ps, const yaml_event_t *ev)
{
    char where[512];
    ptrdiff_t i = yindex_find(&ps->anchor_index, (const char *)ev->data.alias.anchor, anchor_name_at, ps);
    if (i < 0) {
        esp_fail(ps->err, "%s: unknown alias *%s (define the &anchor before using it)",
                 ymark_str(mark_of(ps, ev->start_mark), where, sizeof where), ev->data.alias.anchor);
        return NULL;
    }
    const ynode *a = ps->anchors[i].node;
    size_t nodes = count_nodes(a), bytes;
    int height;
    yt_measure(a, &bytes, &height);
    ps->alias_nodes += nodes;
    ps->alias_bytes += bytes - nodes * YT_NODE_COST;
    if (ps->alias_nodes > CFG_MAX_ALIAS_NODES) {
        esp_fail(ps->err, "%s: aliases expand to more than %d values (is this a config file?)",
                 ymark_str(mark_of(ps, ev->start_mark), where, sizeof where), CFG_MAX_ALIAS_NODES);
        return NULL;
    }
    if (ps->alias_bytes > CFG_MAX_ALIAS_BYTES) {
        esp_fail(ps->err, "%s: aliases expand to more than %u MiB of text (is this a config file?)",
                 ymark_str(mark_of(ps, ev->start_mark), where, sizeof where), CFG_MAX_ALIAS_BYTES >> 20);
        return NULL;
    }
    return yt_copy(a);
}

/* Reads the node that starts with event ev (already pulled). Returns NULL on error. */
static ynode *parse_node(parse_state *ps, yaml_event_t *ev, int depth)
{
    char where[512];
    if (depth > CFG_MAX_TREE_DEPTH) {
        esp_fail(ps->err, "%s: YAML nests deeper than %d levels (is this a config file?)",
                 ymark_str(mark_of(ps, ev->start_mark), where, sizeof where), CFG_MAX_TREE_DEPTH);
        return NULL;
    }
    switch (ev->type) {
    case YAML_SCALAR_EVENT: {
        ynode *n = yt_scalar((const char *)ev->data.scalar.value,
                             ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE, mark_of(ps, ev->start_mark));
        remember_anchor(ps, ev->data.scalar.anchor, n);
        return n;
    }
    case YAML_ALIAS_EVENT:
        return expand_alias(ps, ev);
    case YAML_SEQUENCE_START_EVENT: {
        ynode *seq = yt_seq(mark_of(ps, ev->start_mark));
        yaml_char_t *anchor_name = ev->data.sequence_start.anchor ? (yaml_char_t *)xstrdup((char *)ev->data.sequence_start.anchor) : NULL;
        for (;;) {
            yaml_event_t item;
            if (!yaml_parser_parse(&ps->parser, &item)) {
                parser_error(ps);
                yt_free(seq);
                free(anchor_name);
                return NULL;
            }
            if (item.type == YAML_SEQUENCE_END_EVENT) {
                yaml_event_delete(&item);
                break;
            }
            ynode *child = parse_node(ps, &item, depth + 1);
            yaml_event_delete(&item);
            if (!child) {
                yt_free(seq);
                free(anchor_name);
                return NULL;
            }
            yt_seq_push(seq, child);
        }
        remember_anchor(ps, anchor_name, seq);
        free(anchor_name);
        return seq;
    }
    case YAML_MAPPING_START_EVENT: {
        ynode *map = yt_map(mark_of(ps, ev->start_mark));
        yaml_char_t *anchor_name = ev->data.mapping_start.anchor ? (yaml_char_t *)xstrdup((char *)ev->data.mapping_start.anchor) : NULL;
        for (;;) {
            yaml_event_t kev;
            if (!yaml_parser_parse(&ps->parser, &kev)) {
                parser_error(ps);
                goto fail;
            }
            if (kev.type == YAML_MAPPING_END_EVENT) {
                yaml_event_delete(&kev);
                break;
            }
            ymark km = mark_of(ps, kev.start_mark);
            if (kev.type != YAML_SCALAR_EVENT) {
                yaml_event_delete(&kev);
                esp_fail(ps->err, "%s: mapping keys must be plain strings", ymark_str(km, where, sizeof where));
                goto fail;
            }
            char *key = xstrdup((const char *)kev.data.scalar.value);
            yaml_event_delete(&kev);
            if (yt_map_index(map, key) >= 0) {
                esp_fail(ps->err, "%s: duplicate key '%s' (each key may appear once in a mapping)",
                         ymark_str(km, where, sizeof where), key);
                free(key);
                goto fail;
            }
            yaml_event_t vev;
            if (!yaml_parser_parse(&ps->parser, &vev)) {
                parser_error(ps);
                free(key);
                goto fail;
            }
            ynode *val = parse_node(ps, &vev, depth + 1);
            yaml_event_delete(&vev);
            if (!val) {
                free(key);
                goto fail;
            }
            map_append(map, key, km, val); /* not there: checked above */
        }
        remember_anchor(ps, anchor_name, map);
        free(anchor_name);
        return map;
    fail:
        yt_free(map);
        free(anchor_name);
        return NULL;
    }
    default:
        esp_fail(ps->err, "%s: unexpected YAML event", ymark_str(mark_of(ps, ev->start_mark), where, sizeof where));
        return NULL;
    }
}

static ynode *parse_text(const char *text, size_t len, const char *name, int *empty, esp_err *err)
{
    *empty = 0;
    parse_state ps = {.file = intern(name), .err = err};
    yaml_parser_initialize(&ps.parser);
    yaml_parser_set_input_string(&ps.parser, (const unsigned char *)text, len);
    ynode *root = NULL;
    int docs = 0, failed = 0;
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&ps.parser, &ev)) {
            parser_error(&ps);
            failed = 1;
            break;
        }
        yaml_event_type_t t = ev.type;
        if (t == YAML_STREAM_END_EVENT) {
            yaml_event_delete(&ev);
            break;
        }
        if (t == YAML_STREAM_START_EVENT || t == YAML_DOCUMENT_START_EVENT || t == YAML_DOCUMENT_END_EVENT) {
            if (t == YAML_DOCUMENT_START_EVENT && ++docs > 1) {
                char where[512];
                esp_fail(err, "%s: more than one YAML document (a config file holds one)",
                         ymark_str(mark_of(&ps, ev.start_mark), where, sizeof where));
                yaml_event_delete(&ev);
                failed = 1;
                break;
            }
            yaml_event_delete(&ev);
            continue;
        }
        ynode *n = parse_node(&ps, &ev, 0);
        yaml_event_delete(&ev);
        if (!n) {
            failed = 1;
            break;
        }
        yt_free(root);
        root = n;
    }
    yaml_parser_delete(&ps.parser);
    for (size_t i = 0; i < ps.n_anchors; i++) free(ps.anchors[i].name);
    free(ps.anchors);
    yindex_free(&ps.anchor_index);
    if (failed) {
        yt_free(root);
        return NULL;
    }
    if (!root || yt_is_null(root)) {
        yt_free(root);
        *empty = 1;
        return yt_map((ymark){ps.file, 1, 1}); /* an empty file is an empty mapping */
    }
    return root;
}

ynode *yt_parse_string(const char *text, size_t len, const char *name, esp_err *err)
{
    int empty;
    return parse_text(text, len, name, &empty, err);
}

ynode *yt_parse_file(const char *path, esp_err *err)
{
    int empty;
    return yt_parse_file_doc(path, &empty, err);
}

ynode *yt_parse_file_doc(const char *path, int *empty, esp_err *err)
{
    *empty = 0;
    size_t len;
    esp_err rerr;
    char *text = read_file(path, READ_SMALL, &len, &rerr);
    if (!text) { /* read_file's message names the path and why (missing, not a file, too large) */
        esp_fail(err, "%s", rerr.msg);
        return NULL;
    }
    ynode *root = parse_text(text, len, path, empty, err);
    free(text);
    return root;
}
