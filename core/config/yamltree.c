#include "core/config/yamltree.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "core/base/fsio.h"

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

void yt_free(ynode *n)
{
    if (!n) return;
    for (size_t i = 0; i < n->n; i++) {
        yt_free(n->items[i]);
        if (n->keys) free(n->keys[i]);
    }
    free(n->items);
    free(n->keys);
    free(n->key_marks);
    free(n->str);
    free(n);
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
    return n;
}

ptrdiff_t yt_map_index(const ynode *map, const char *key)
{
    if (!map || map->kind != YN_MAP) return -1;
    for (size_t i = 0; i < map->n; i++)
        if (strcmp(map->keys[i], key) == 0) return (ptrdiff_t)i;
    return -1;
}

ynode *yt_map_get(const ynode *map, const char *key)
{
    ptrdiff_t i = yt_map_index(map, key);
    return i < 0 ? NULL : map->items[i];
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
    grow(map);
    map->keys[map->n] = xstrdup(key);
    map->key_marks[map->n] = key_mark;
    map->items[map->n++] = value;
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
            char *key = xstrndup(p, len);
            cur = yt_map_get(cur, key);
            free(key);
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
    size_t alias_nodes; /* nodes copied for aliases so far */
    esp_err *err;
} parse_state;

/* Aliases copy their anchor; a bound stops "billion laughs" documents from exhausting memory. */
#define MAX_ALIAS_NODES 1000000

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

static void remember_anchor(parse_state *ps, const yaml_char_t *name, ynode *node)
{
    if (!name) return;
    ps->anchors = xrealloc(ps->anchors, (ps->n_anchors + 1) * sizeof *ps->anchors);
    ps->anchors[ps->n_anchors].name = xstrdup((const char *)name);
    ps->anchors[ps->n_anchors++].node = node;
}

/* Reads the node that starts with event ev (already pulled). Returns NULL on error. */
static ynode *parse_node(parse_state *ps, yaml_event_t *ev, int depth)
{
    char where[512];
    if (depth > 256) {
        esp_fail(ps->err, "%s: YAML nests deeper than 256 levels", ymark_str(mark_of(ps, ev->start_mark), where, sizeof where));
        return NULL;
    }
    switch (ev->type) {
    case YAML_SCALAR_EVENT: {
        ynode *n = yt_scalar((const char *)ev->data.scalar.value,
                             ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE, mark_of(ps, ev->start_mark));
        remember_anchor(ps, ev->data.scalar.anchor, n);
        return n;
    }
    case YAML_ALIAS_EVENT: {
        for (size_t i = ps->n_anchors; i-- > 0;) {
            if (!strcmp(ps->anchors[i].name, (const char *)ev->data.alias.anchor)) {
                ps->alias_nodes += count_nodes(ps->anchors[i].node);
                if (ps->alias_nodes > MAX_ALIAS_NODES) {
                    esp_fail(ps->err, "%s: aliases expand to more than %d values (is this a config file?)",
                             ymark_str(mark_of(ps, ev->start_mark), where, sizeof where), MAX_ALIAS_NODES);
                    return NULL;
                }
                return yt_copy(ps->anchors[i].node);
            }
        }
        esp_fail(ps->err, "%s: unknown alias *%s (define the &anchor before using it)",
                 ymark_str(mark_of(ps, ev->start_mark), where, sizeof where), ev->data.alias.anchor);
        return NULL;
    }
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
            yt_map_set(map, key, km, val);
            free(key);
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

ynode *yt_parse_string(const char *text, size_t len, const char *name, esp_err *err)
{
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
    if (failed) {
        yt_free(root);
        return NULL;
    }
    if (!root || yt_is_null(root)) {
        yt_free(root);
        return yt_map((ymark){ps.file, 1, 1}); /* an empty file is an empty mapping */
    }
    return root;
}

ynode *yt_parse_file(const char *path, esp_err *err)
{
    size_t len;
    esp_err rerr;
    char *text = read_file(path, &len, &rerr);
    if (!text) {
        esp_fail(err, "%s: cannot read config: %s", path, strerror(errno));
        return NULL;
    }
    ynode *root = yt_parse_string(text, len, path, err);
    free(text);
    return root;
}

/* ---- emitting ------------------------------------------------------------------------ */

typedef struct out_buf {
    char *data;
    size_t len, cap;
} out_buf;

static int write_handler(void *ctx, unsigned char *buffer, size_t size)
{
    out_buf *b = ctx;
    if (b->len + size + 1 > b->cap) {
        while (b->len + size + 1 > b->cap) b->cap = b->cap ? b->cap * 2 : 4096;
        b->data = xrealloc(b->data, b->cap);
    }
    memcpy(b->data + b->len, buffer, size);
    b->len += size;
    b->data[b->len] = '\0';
    return 1;
}

static int emit_scalar(yaml_emitter_t *em, const char *s, int quoted, int escape)
{
    char *escaped = NULL;
    if (escape && strstr(s, "${")) {
        size_t n = 0;
        escaped = xmalloc(strlen(s) * 2 + 1);
        for (const char *p = s; *p; p++) {
            if (p[0] == '$' && p[1] == '{') escaped[n++] = '\\';
            escaped[n++] = *p;
        }
        escaped[n] = '\0';
        s = escaped;
    }
    yaml_event_t ev;
    yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)strlen(s), !quoted, 1,
                                 quoted ? YAML_DOUBLE_QUOTED_SCALAR_STYLE : YAML_ANY_SCALAR_STYLE);
    int ok = yaml_emitter_emit(em, &ev);
    free(escaped);
    return ok;
}

static int emit_node(yaml_emitter_t *em, const ynode *n, int escape)
{
    yaml_event_t ev;
    if (n->kind == YN_SCALAR) return emit_scalar(em, n->str, n->quoted, escape && n->resolved);
    if (n->kind == YN_SEQ) {
        yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_ANY_SEQUENCE_STYLE);
        if (!yaml_emitter_emit(em, &ev)) return 0;
        for (size_t i = 0; i < n->n; i++)
            if (!emit_node(em, n->items[i], escape)) return 0;
        yaml_sequence_end_event_initialize(&ev);
        return yaml_emitter_emit(em, &ev);
    }
    yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_ANY_MAPPING_STYLE);
    if (!yaml_emitter_emit(em, &ev)) return 0;
    for (size_t i = 0; i < n->n; i++) {
        if (!emit_scalar(em, n->keys[i], 0, 0) || !emit_node(em, n->items[i], escape)) return 0;
    }
    yaml_mapping_end_event_initialize(&ev);
    return yaml_emitter_emit(em, &ev);
}

static char *emit_tree(const ynode *root, size_t *len_out, int escape)
{
    yaml_emitter_t em;
    yaml_event_t ev;
    out_buf b = {0};
    yaml_emitter_initialize(&em);
    yaml_emitter_set_output(&em, write_handler, &b);
    yaml_emitter_set_unicode(&em, 1);
    yaml_emitter_set_width(&em, 100);
    yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING);
    int ok = yaml_emitter_emit(&em, &ev);
    yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1);
    ok = ok && yaml_emitter_emit(&em, &ev);
    ok = ok && emit_node(&em, root, escape);
    yaml_document_end_event_initialize(&ev, 1);
    ok = ok && yaml_emitter_emit(&em, &ev);
    yaml_stream_end_event_initialize(&ev);
    ok = ok && yaml_emitter_emit(&em, &ev);
    ESP_CHECK(ok); /* the tree holds only valid UTF-8 scalars we read with libyaml */
    yaml_emitter_delete(&em);
    if (!b.data) b.data = xstrdup("");
    if (len_out) *len_out = b.len;
    return b.data;
}

char *yt_emit(const ynode *root, size_t *len_out) { return emit_tree(root, len_out, 0); }
char *yt_emit_config(const ynode *root, size_t *len_out) { return emit_tree(root, len_out, 1); }

int utf8_valid(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int extra = *p < 0x80 ? 0 : (*p & 0xE0) == 0xC0 ? 1 : (*p & 0xF0) == 0xE0 ? 2 : (*p & 0xF8) == 0xF0 ? 3 : -1;
        if (extra < 0 || (extra == 1 && *p < 0xC2)) return 0;
        p++;
        for (int i = 0; i < extra; i++, p++)
            if ((*p & 0xC0) != 0x80) return 0;
    }
    return 1;
}
