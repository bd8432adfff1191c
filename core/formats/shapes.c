#include "core/formats/shapes.h"
#include "core/base/fsio.h"

#include <stdlib.h>
#include <string.h>

/* Python's str.split()/rstrip() whitespace, ASCII part (ESPnet2 reads with these). */
static int is_pyspace(unsigned char c)
{
    return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1c && c <= 0x1f);
}

typedef struct growbuf {
    void *p;
    size_t n, cap, elem;
} growbuf;

static void *grow(growbuf *g)
{
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 256;
        g->p = xrealloc(g->p, g->cap * g->elem);
    }
    return (char *)g->p + g->elem * g->n++;
}

/* Shortened copy of a line for error messages. */
static const char *excerpt(char *buf, size_t cap, const char *s, size_t len)
{
    size_t n = len < cap - 4 ? len : cap - 4;
    memcpy(buf, s, n);
    strcpy(buf + n, len > n ? "..." : "");
    return buf;
}

/* Python's int() on one comma-separated field: surrounding whitespace, an optional sign, digits.
 * Negative values parse in ESPnet but make no sense as lengths or dims, so they are refused. */
static int parse_dim(const char *s, size_t len, int64_t *out)
{
    while (len && is_pyspace((unsigned char)*s)) s++, len--;
    while (len && is_pyspace((unsigned char)s[len - 1])) len--;
    if (len && *s == '+') s++, len--;
    if (len == 0) return -1;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        if (v > (INT64_MAX - (s[i] - '0')) / 10) return -1;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

typedef struct keyrow {
    const char *key;
    size_t row;
} keyrow;

static int cmp_keyrow(const void *a, const void *b)
{
    const keyrow *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (c) return c;
    return (x->row > y->row) - (x->row < y->row);
}

/* Fills t->by_key; returns the row of the earliest second occurrence of a uid, or -1. */
static ptrdiff_t index_keys(shape_table *t)
{
    keyrow *kr = xmalloc((t->n ? t->n : 1) * sizeof *kr);
    for (size_t i = 0; i < t->n; i++) kr[i] = (keyrow){t->keys[i], i};
    qsort(kr, t->n, sizeof *kr, cmp_keyrow);
    t->by_key = xmalloc((t->n ? t->n : 1) * sizeof *t->by_key);
    ptrdiff_t dup = -1;
    for (size_t k = 0; k < t->n; k++) {
        t->by_key[k] = kr[k].row;
        /* Rows tie-break ascending, so kr[k] is a later occurrence of kr[k - 1]'s uid. */
        if (k && strcmp(kr[k - 1].key, kr[k].key) == 0 && (dup < 0 || kr[k].row < (size_t)dup))
            dup = (ptrdiff_t)kr[k].row;
    }
    free(kr);
    return dup;
}

int shape_table_parse(shape_table *t, const char *path, const char *text, size_t len, int keys_only,
                      esp_err *err)
{
    memset(t, 0, sizeof *t);
    t->path = xstrdup(path);
    growbuf keys = {.elem = sizeof(char *)}, lines = {.elem = sizeof(size_t)};
    growbuf dims = {.elem = sizeof(int64_t)}, offs = {.elem = sizeof(size_t)}, nd = {.elem = sizeof(unsigned)};
    char ex[80];
    int rc = 0;
    size_t lineno = 0, pos = 0;
    while (rc == 0 && pos < len) {
        /* Python's universal newlines: \n, \r\n and \r end a line. */
        size_t end = pos;
        while (end < len && text[end] != '\n' && text[end] != '\r') end++;
        size_t next = end < len ? end + 1 : end;
        if (end < len && text[end] == '\r' && next < len && text[next] == '\n') next++;
        lineno++;
        const char *line = text + pos;
        size_t n = end - pos;
        pos = next;
        if (memchr(line, '\0', n)) {
            rc = esp_fail(err, "%s:%zu: holds a NUL byte (a shape file is text)", path, lineno);
            break;
        }
        /* line.rstrip().split(maxsplit=1) */
        while (n && is_pyspace((unsigned char)line[n - 1])) n--;
        size_t k0 = 0;
        while (k0 < n && is_pyspace((unsigned char)line[k0])) k0++;
        size_t k1 = k0;
        while (k1 < n && !is_pyspace((unsigned char)line[k1])) k1++;
        size_t v0 = k1;
        while (v0 < n && is_pyspace((unsigned char)line[v0])) v0++;
        if (k0 == k1 || v0 == n) {
            rc = esp_fail(err, "%s:%zu: expected two columns '<uid> %s' (got '%s')", path, lineno,
                          keys_only ? "<value>" : "<d1>,<d2>,...", excerpt(ex, sizeof ex, line, n));
            break;
        }
        *(char **)grow(&keys) = xstrndup(line + k0, k1 - k0);
        *(size_t *)grow(&lines) = lineno;
        if (keys_only) continue;
        *(size_t *)grow(&offs) = dims.n;
        unsigned count = 0;
        for (size_t f = v0; rc == 0;) {
            size_t g = f;
            while (g < n && line[g] != ',') g++;
            int64_t v;
            if (parse_dim(line + f, g - f, &v) != 0) {
                char kb[64];
                rc = esp_fail(err,
                              "%s:%zu: uid %s: '%s' is not a comma-separated list of non-negative integers "
                              "(shape values look like 'T,80')",
                              path, lineno, excerpt(kb, sizeof kb, line + k0, k1 - k0),
                              excerpt(ex, sizeof ex, line + v0, n - v0));
                break;
            }
            *(int64_t *)grow(&dims) = v;
            count++;
            if (g == n) break;
            f = g + 1;
        }
        *(unsigned *)grow(&nd) = count;
    }
    t->n = keys.n;
    t->keys = keys.p;
    t->line = lines.p;
    if (!keys_only) {
        t->dims = dims.p ? dims.p : xmalloc(sizeof(int64_t));
        t->off = offs.p ? offs.p : xmalloc(sizeof(size_t));
        t->ndim = nd.p ? nd.p : xmalloc(sizeof(unsigned));
    }
    if (rc == 0 && t->n == 0)
        rc = esp_fail(err, "%s: no utterances (an empty shape file; rerun collect_stats, stage 3)", path);
    if (rc == 0) {
        ptrdiff_t dup = index_keys(t);
        if (dup >= 0) {
            size_t first = 0;
            for (size_t i = 0; i < (size_t)dup; i++)
                if (strcmp(t->keys[i], t->keys[dup]) == 0) {
                    first = t->line[i];
                    break;
                }
            rc = esp_fail(err, "%s:%zu: uid %s is duplicated (first on line %zu)", path, t->line[dup],
                          t->keys[dup], first);
        }
    }
    if (rc != 0) shape_table_free(t);
    return rc;
}

int shape_table_read(shape_table *t, const char *path, int keys_only, esp_err *err)
{
    size_t len;
    char *text = read_file(path, READ_LIST, &len, err);
    if (!text) {
        memset(t, 0, sizeof *t);
        return -1;
    }
    int rc = shape_table_parse(t, path, text, len, keys_only, err);
    free(text);
    return rc;
}

void shape_table_free(shape_table *t)
{
    if (t->keys)
        for (size_t i = 0; i < t->n; i++) free(t->keys[i]);
    free(t->keys);
    free(t->line);
    free(t->dims);
    free(t->off);
    free(t->ndim);
    free(t->by_key);
    free(t->path);
    memset(t, 0, sizeof *t);
}

ptrdiff_t shape_table_find(const shape_table *t, const char *key)
{
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(t->keys[t->by_key[mid]], key);
        if (c == 0) return (ptrdiff_t)t->by_key[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

int shape_table_slice(shape_table *out, const shape_table *in, const shape_table *keys_from, size_t begin,
                      size_t end, esp_err *err)
{
    ESP_CHECK(begin <= end && end <= keys_from->n);
    memset(out, 0, sizeof *out);
    size_t n = end - begin, total = 0;
    size_t *rows = xmalloc((n ? n : 1) * sizeof *rows);
    for (size_t i = 0; i < n; i++) {
        const char *key = keys_from->keys[begin + i];
        ptrdiff_t r = in == keys_from ? (ptrdiff_t)(begin + i) : shape_table_find(in, key);
        if (r < 0) {
            free(rows);
            return esp_fail(err, "%s: uid %s (from %s) is missing (shape files must list the same uids)",
                            in->path, key, keys_from->path);
        }
        rows[i] = (size_t)r;
        if (in->dims) total += in->ndim[r];
    }
    out->path = xstrdup(in->path);
    out->n = n;
    out->keys = xmalloc((n ? n : 1) * sizeof *out->keys);
    out->line = xmalloc((n ? n : 1) * sizeof *out->line);
    if (in->dims) {
        out->dims = xmalloc((total ? total : 1) * sizeof *out->dims);
        out->off = xmalloc((n ? n : 1) * sizeof *out->off);
        out->ndim = xmalloc((n ? n : 1) * sizeof *out->ndim);
    }
    for (size_t i = 0, o = 0; i < n; i++) {
        size_t r = rows[i];
        out->keys[i] = xstrdup(in->keys[r]);
        out->line[i] = in->line[r];
        if (in->dims) {
            out->off[i] = o;
            out->ndim[i] = in->ndim[r];
            memcpy(out->dims + o, in->dims + in->off[r], in->ndim[r] * sizeof *out->dims);
            o += in->ndim[r];
        }
    }
    free(rows);
    ESP_CHECK(index_keys(out) < 0); /* the rows of a table are distinct uids */
    return 0;
}
