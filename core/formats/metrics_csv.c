#include "core/formats/metrics_csv.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/fsio.h"
#include "core/formats/text_file.h"

/* ---- numbers as Python prints them ---------------------------------------------------- */

void format_py_float(char *buf, size_t cap, double v)
{
    if (isnan(v)) {
        snprintf(buf, cap, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, cap, v < 0 ? "-inf" : "inf");
        return;
    }
    if (v == 0) {
        snprintf(buf, cap, signbit(v) ? "-0.0" : "0.0");
        return;
    }
    /* Shortest digits that read back to the same double (what repr() picks). */
    char e[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, v);
        if (strtod(e, NULL) == v) break;
    }
    /* e = "-d.ddde+XX": split into sign, digit string and decimal exponent. */
    const char *p = e;
    int neg = *p == '-';
    if (neg) p++;
    char digits[24];
    size_t nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = '\0';
    int exp10 = atoi(p + 1);
    int decpt = exp10 + 1; /* value = 0.<digits> x 10^decpt */

    char out[48];
    size_t o = 0;
    if (neg) out[o++] = '-';
    if (decpt <= -4 || decpt > 16) { /* Python's switch to exponent notation */
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            memcpy(out + o, digits + 1, nd - 1);
            o += nd - 1;
        }
        o += (size_t)snprintf(out + o, sizeof out - o, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
    } else if (decpt <= 0) {
        out[o++] = '0';
        out[o++] = '.';
        for (int i = 0; i < -decpt; i++) out[o++] = '0';
        memcpy(out + o, digits, nd);
        o += nd;
    } else if ((size_t)decpt < nd) {
        memcpy(out + o, digits, (size_t)decpt);
        o += (size_t)decpt;
        out[o++] = '.';
        memcpy(out + o, digits + decpt, nd - (size_t)decpt);
        o += nd - (size_t)decpt;
    } else {
        memcpy(out + o, digits, nd);
        o += nd;
        for (size_t i = nd; i < (size_t)decpt; i++) out[o++] = '0';
        out[o++] = '.';
        out[o++] = '0';
    }
    out[o] = '\0';
    snprintf(buf, cap, "%s", out);
}

/* ---- CSV text -------------------------------------------------------------------------- */

typedef struct csv_rows {
    char ***cells;      /* rows of cells */
    size_t *n_cells;
    size_t n;
} csv_rows;

static void rows_free(csv_rows *r)
{
    for (size_t i = 0; i < r->n; i++) {
        for (size_t j = 0; j < r->n_cells[i]; j++) free(r->cells[i][j]);
        free(r->cells[i]);
    }
    free(r->cells);
    free(r->n_cells);
    memset(r, 0, sizeof *r);
}

/* RFC 4180 as Python's csv reads it: quoted cells may hold commas, quotes ("") and line ends.
 * Returns 0, or the line where a quoted cell starts that the file never closes (a damaged file:
 * rows are written whole, so the rest of the file would silently become one cell). */
static size_t parse_csv(const char *s, size_t len, csv_rows *out)
{
    memset(out, 0, sizeof *out);
    size_t i = 0, open_line = 0;
    while (i < len && !open_line) {
        char **cells = NULL;
        size_t nc = 0;
        for (;;) {
            size_t cap = 16, n = 0;
            char *cell = xmalloc(cap);
            if (i < len && s[i] == '"') {
                size_t start = i;
                int closed = 0;
                for (i++; i < len; i++) {
                    if (s[i] == '"') {
                        if (i + 1 < len && s[i + 1] == '"') i++;
                        else {
                            i++;
                            closed = 1;
                            break;
                        }
                    }
                    if (n + 1 >= cap) cell = xrealloc(cell, cap *= 2);
                    cell[n++] = s[i];
                }
                if (!closed) {
                    open_line = 1;
                    for (size_t k = 0; k < start; k++) open_line += s[k] == '\n';
                }
            }
            for (; i < len && s[i] != ',' && s[i] != '\n' && s[i] != '\r'; i++) {
                if (n + 1 >= cap) cell = xrealloc(cell, cap *= 2);
                cell[n++] = s[i];
            }
            cell[n] = '\0';
            cells = xrealloc(cells, (nc + 1) * sizeof *cells);
            cells[nc++] = cell;
            if (i < len && s[i] == ',') {
                i++;
                continue;
            }
            break;
        }
        if (i < len && s[i] == '\r') i++;
        if (i < len && s[i] == '\n') i++;
        out->cells = xrealloc(out->cells, (out->n + 1) * sizeof *out->cells);
        out->n_cells = xrealloc(out->n_cells, (out->n + 1) * sizeof *out->n_cells);
        out->cells[out->n] = cells;
        out->n_cells[out->n++] = nc;
    }
    return open_line;
}

/* Reads and parses the file; a NUL byte or an unclosed quote is an error naming file:line. */
static int read_csv(const char *path, csv_rows *rows, esp_err *err)
{
    memset(rows, 0, sizeof *rows);
    size_t len;
    char *text = text_file_read(path, "metrics.csv", &len, err);
    if (!text) return -1;
    size_t open_line = parse_csv(text, len, rows);
    free(text);
    if (!open_line) return 0;
    rows_free(rows);
    return esp_fail(err, "%s:%zu: a quoted cell that never ends (a damaged metrics.csv? move it away)", path,
                    open_line);
}

/* Appends a cell, quoted the way csv.QUOTE_MINIMAL does. */
static void put_cell(char **buf, size_t *len, size_t *cap, const char *cell, int first)
{
    size_t need = *len + 2 * strlen(cell) + 8;
    if (need > *cap) *buf = xrealloc(*buf, *cap = need * 2);
    char *b = *buf;
    if (!first) b[(*len)++] = ',';
    int quote = strpbrk(cell, ",\"\r\n") != NULL;
    if (quote) b[(*len)++] = '"';
    for (const char *c = cell; *c; c++) {
        if (*c == '"') b[(*len)++] = '"';
        b[(*len)++] = *c;
    }
    if (quote) b[(*len)++] = '"';
    b[*len] = '\0';
}

static void end_row(char **buf, size_t *len, size_t *cap)
{
    if (*len + 3 > *cap) *buf = xrealloc(*buf, *cap = *len * 2 + 8);
    (*buf)[(*len)++] = '\r';
    (*buf)[(*len)++] = '\n';
    (*buf)[*len] = '\0';
}

static int key_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static long find_key(char *const *keys, size_t n, const char *k)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(keys[i], k) == 0) return (long)i;
    return -1;
}

/* Rewrites the file atomically: header `keys`, the old rows remapped by column name, then `extra`. */
static int rewrite(metrics_csv *m, char *const *old_keys, size_t n_old, const csv_rows *rows, size_t first_row,
                   int64_t max_step, const char *extra, esp_err *err)
{
    size_t len = 0, cap = 256;
    char *buf = xmalloc(cap);
    buf[0] = '\0';
    for (size_t k = 0; k < m->n_keys; k++) put_cell(&buf, &len, &cap, m->keys[k], k == 0);
    end_row(&buf, &len, &cap);
    long step_col = find_key(old_keys, n_old, "step");
    long *map = xmalloc((m->n_keys + 1) * sizeof *map);
    for (size_t k = 0; k < m->n_keys; k++) map[k] = find_key(old_keys, n_old, m->keys[k]);
    for (size_t r = first_row; r < rows->n; r++) {
        char **cells = rows->cells[r];
        size_t nc = rows->n_cells[r];
        if (nc == 1 && cells[0][0] == '\0') continue; /* blank line */
        if (max_step >= 0 && step_col >= 0 && (size_t)step_col < nc) {
            char *end;
            long long st = strtoll(cells[step_col], &end, 10);
            if (end != cells[step_col] && *end == '\0' && st > max_step) continue;
        }
        for (size_t k = 0; k < m->n_keys; k++)
            put_cell(&buf, &len, &cap, map[k] >= 0 && (size_t)map[k] < nc ? cells[map[k]] : "", k == 0);
        end_row(&buf, &len, &cap);
    }
    free(map);
    if (extra) {
        size_t el = strlen(extra);
        if (len + el + 1 > cap) buf = xrealloc(buf, cap = len + el + 1);
        memcpy(buf + len, extra, el + 1);
        len += el;
    }
    int rc = atomic_write_file(m->path, buf, len, err);
    free(buf);
    return rc;
}

static void set_keys(metrics_csv *m, char **keys, size_t n)
{
    for (size_t i = 0; i < m->n_keys; i++) free(m->keys[i]);
    free(m->keys);
    m->keys = keys;
    m->n_keys = n;
}

int metrics_csv_open(metrics_csv *m, const char *path, int64_t resume_step, esp_err *err)
{
    memset(m, 0, sizeof *m);
    char *dir = path_dirname(path);
    int rc = mkdir_p(dir, err);
    free(dir);
    if (rc != 0) return -1;
    m->path = xstrdup(path);
    if (!path_exists(path)) return 0;
    csv_rows rows;
    if (read_csv(path, &rows, err) != 0) {
        metrics_csv_close(m);
        return -1;
    }
    if (rows.n > 0) {
        char **keys = xmalloc((rows.n_cells[0] + 1) * sizeof *keys);
        for (size_t k = 0; k < rows.n_cells[0]; k++) keys[k] = xstrdup(rows.cells[0][k]);
        set_keys(m, keys, rows.n_cells[0]);
        if (find_key(m->keys, m->n_keys, "step") < 0) {
            rows_free(&rows);
            esp_fail(err, "%s: header has no 'step' column (not a metrics.csv? move it away)", path);
            metrics_csv_close(m);
            return -1;
        }
        if (resume_step >= 0) rc = rewrite(m, m->keys, m->n_keys, &rows, 1, resume_step, NULL, err);
    }
    rows_free(&rows);
    if (rc != 0) metrics_csv_close(m);
    return rc;
}

int metrics_csv_log(metrics_csv *m, int64_t step, const metric *vals, size_t n, esp_err *err)
{
    ESP_CHECK(m->path != NULL);
    /* The header after this row: every key seen, sorted (Lightning sorts metrics_keys). */
    size_t n_new = m->n_keys;
    char **keys = xmalloc((m->n_keys + n + 1) * sizeof *keys);
    for (size_t k = 0; k < m->n_keys; k++) keys[k] = xstrdup(m->keys[k]);
    for (size_t i = 0; i <= n; i++) {
        const char *name = i < n ? vals[i].name : "step";
        if (i < n) {
            ESP_CHECK(strcmp(name, "step") != 0);
            for (size_t j = 0; j < i; j++) ESP_CHECK(strcmp(vals[j].name, name) != 0);
        }
        if (find_key(keys, n_new, name) < 0) keys[n_new++] = xstrdup(name);
    }
    qsort(keys, n_new, sizeof *keys, key_cmp);

    size_t len = 0, cap = 256;
    char *row = xmalloc(cap);
    row[0] = '\0';
    for (size_t k = 0; k < n_new; k++) {
        char cell[48] = "";
        if (strcmp(keys[k], "step") == 0) snprintf(cell, sizeof cell, "%" PRId64, step);
        for (size_t i = 0; i < n; i++)
            if (strcmp(vals[i].name, keys[k]) == 0) {
                if (vals[i].is_int) snprintf(cell, sizeof cell, "%lld", (long long)vals[i].value);
                else format_py_float(cell, sizeof cell, vals[i].value);
            }
        put_cell(&row, &len, &cap, cell, k == 0);
    }
    end_row(&row, &len, &cap);

    int rc = 0;
    if (n_new != m->n_keys || !path_exists(m->path)) {
        /* New columns (or no file yet): rewrite everything under the wider header, atomically. */
        csv_rows rows = {0};
        if (path_exists(m->path)) rc = read_csv(m->path, &rows, err);
        char **old_keys = m->keys;
        size_t n_old = m->n_keys;
        m->keys = keys;
        m->n_keys = n_new;
        if (rc == 0) rc = rewrite(m, old_keys, n_old, &rows, rows.n ? 1 : 0, -1, row, err);
        for (size_t k = 0; k < n_old; k++) free(old_keys[k]);
        free(old_keys);
        rows_free(&rows);
    } else {
        for (size_t k = 0; k < n_new; k++) free(keys[k]);
        free(keys);
        int fd = open(m->path, O_WRONLY | O_APPEND | O_CLOEXEC);
        if (fd < 0) rc = esp_fail(err, "%s: cannot append: %s", m->path, strerror(errno));
        else {
            /* One write per row: a killed process leaves whole rows. */
            ssize_t w = write(fd, row, len);
            if (w != (ssize_t)len)
                rc = esp_fail(err, "%s: write failed: %s (check free disk space)", m->path,
                              w < 0 ? strerror(errno) : "short write");
            close(fd);
        }
    }
    free(row);
    return rc;
}

void metrics_csv_close(metrics_csv *m)
{
    set_keys(m, NULL, 0);
    free(m->path);
    m->path = NULL;
}
