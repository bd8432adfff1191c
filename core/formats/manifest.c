#include "core/formats/manifest.h"
#include "core/base/fsio.h"
#include "core/formats/text_file.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void manifest_add(manifest *m, const char *utt, const char *wav, const char *text, const char *spk)
{
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 64;
        m->items = xrealloc(m->items, m->cap * sizeof *m->items);
    }
    manifest_entry *e = &m->items[m->n++];
    e->utt = xstrdup(utt);
    e->wav = xstrdup(wav);
    e->text = xstrdup(text);
    e->spk = spk ? xstrdup(spk) : NULL;
    e->start = e->end = 0;
}

void manifest_add_span(manifest *m, const char *utt, const char *wav, const char *text, const char *spk, double start,
                       double end)
{
    manifest_add(m, utt, wav, text, spk);
    m->items[m->n - 1].start = start;
    m->items[m->n - 1].end = end;
}

static int cmp_entry_utt(const void *a, const void *b)
{
    return strcmp(((const manifest_entry *)a)->utt, ((const manifest_entry *)b)->utt);
}

void manifest_sort(manifest *m)
{
    if (m->n > 1) qsort(m->items, m->n, sizeof *m->items, cmp_entry_utt);
}

void manifest_free(manifest *m)
{
    for (size_t i = 0; i < m->n; i++) {
        free(m->items[i].utt);
        free(m->items[i].wav);
        free(m->items[i].text);
        free(m->items[i].spk);
    }
    free(m->items);
    memset(m, 0, sizeof *m);
}

static int has_separator(const char *s)
{
    return strpbrk(s, "\t\n\r") != NULL;
}

static int check_entry(const char *path, const manifest_entry *e, esp_err *err)
{
    if (!e->utt[0] || strpbrk(e->utt, " \t\n\r"))
        return esp_fail(err, "%s: utterance id '%s' is empty or holds whitespace", path, e->utt);
    if (has_separator(e->wav) || has_separator(e->text) || (e->spk && has_separator(e->spk)))
        return esp_fail(err, "%s: utterance %s: a field holds a tab or newline", path, e->utt);
    return 0;
}

int manifest_write_tsv(const char *path, const manifest *m, esp_err *err)
{
    for (size_t i = 0; i < m->n; i++)
        if (check_entry(path, &m->items[i], err) != 0) return -1;
    atomic_file af;
    if (atomic_open(&af, path, err) != 0) return -1;
    for (size_t i = 0; i < m->n; i++)
        fprintf(af.fp, "%s\t%s\t%s\n", m->items[i].utt, m->items[i].wav, m->items[i].text);
    return atomic_commit(&af, err);
}

typedef struct tsv_ctx {
    const char *path;
    manifest *m;
    size_t *lines; /* the line of each entry */
    size_t lines_cap;
} tsv_ctx;

static int tsv_line(void *vctx, char *line, size_t lineno, esp_err *err)
{
    tsv_ctx *c = vctx;
    if (!line[0]) return 0; /* blank lines are allowed */
    char *wav = strchr(line, '\t');
    char *text = wav ? strchr(wav + 1, '\t') : NULL;
    if (!text || strchr(text + 1, '\t'))
        return esp_fail(err, "%s:%zu: expected 3 tab-separated fields utt, wav, text (got %s)", c->path,
                        lineno, text ? "more" : "fewer");
    *wav++ = '\0';
    *text++ = '\0';
    if (!line[0] || !wav[0])
        return esp_fail(err, "%s:%zu: empty utterance id or wav path", c->path, lineno);
    /* What manifest_write_tsv and the Kaldi files refuse, and the line ends a reader may split at. */
    if (strpbrk(line, " \r\v\f"))
        return esp_fail(err, "%s:%zu: utterance id '%s' holds whitespace", c->path, lineno, line);
    if (strchr(wav, '\r') || strchr(text, '\r'))
        return esp_fail(err, "%s:%zu: utterance %s: a carriage return inside the line", c->path, lineno, line);
    if (c->m->n == c->lines_cap) {
        c->lines_cap = c->lines_cap ? 2 * c->lines_cap : 64;
        c->lines = xrealloc(c->lines, c->lines_cap * sizeof *c->lines);
    }
    c->lines[c->m->n] = lineno;
    manifest_add(c->m, line, wav, text, NULL);
    return 0;
}

static int cmp_utt_index(const void *a, const void *b, void *m)
{
    const manifest_entry *e = ((const manifest *)m)->items;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    int c = strcmp(e[x].utt, e[y].utt);
    return c ? c : (x > y) - (x < y);
}

/* An utterance id given twice: an error naming both lines. */
static int check_unique(const char *path, const manifest *m, const size_t *lines, esp_err *err)
{
    size_t *ix = xmalloc((m->n ? m->n : 1) * sizeof *ix);
    for (size_t i = 0; i < m->n; i++) ix[i] = i;
    qsort_r(ix, m->n, sizeof *ix, cmp_utt_index, (void *)m);
    int rc = 0;
    for (size_t k = 1; k < m->n && rc == 0; k++)
        if (strcmp(m->items[ix[k - 1]].utt, m->items[ix[k]].utt) == 0)
            rc = esp_fail(err, "%s:%zu: utterance id %s appears again (first on line %zu)", path, lines[ix[k]],
                          m->items[ix[k]].utt, lines[ix[k - 1]]);
    free(ix);
    return rc;
}

int manifest_read_tsv(const char *path, manifest *out, esp_err *err)
{
    memset(out, 0, sizeof *out);
    char *buf = text_file_read(path, "a manifest", NULL, err);
    if (!buf) return -1;
    tsv_ctx c = {.path = path, .m = out};
    int rc = for_each_line(buf, tsv_line, &c, err);
    free(buf);
    if (rc == 0) rc = check_unique(path, out, c.lines, err);
    free(c.lines);
    if (rc == 0 && out->n == 0)
        rc = esp_fail(err, "%s: no utterances (an empty manifest; rerun create_dataset, stage 1)", path);
    if (rc != 0) manifest_free(out);
    return rc;
}

static int write_kaldi_file(const char *dir, const char *name, const manifest *m, int field,
                            esp_err *err)
{
    char *path = path_join(dir, name);
    atomic_file af;
    int rc = atomic_open(&af, path, err);
    if (rc == 0) {
        for (size_t i = 0; i < m->n; i++) {
            const manifest_entry *e = &m->items[i];
            const char *v = field == 0 ? e->wav : field == 1 ? e->text : e->spk;
            fprintf(af.fp, "%s%s%s\n", e->utt, v[0] ? " " : "", v);
        }
        rc = atomic_commit(&af, err);
    }
    free(path);
    return rc;
}

int manifest_write_kaldi_dir(const char *dir, const manifest *m, esp_err *err)
{
    for (size_t i = 0; i < m->n; i++) {
        if (check_entry(dir, &m->items[i], err) != 0) return -1;
        if (!m->items[i].spk || !m->items[i].spk[0])
            return esp_fail(err, "%s: utterance %s has no speaker id", dir, m->items[i].utt);
    }
    if (mkdir_p(dir, err) != 0) return -1;
    /* Kaldi wants every file sorted by utt id; sort a shallow copy so the caller's order stays. */
    manifest sorted = *m;
    sorted.items = xmalloc((m->n ? m->n : 1) * sizeof *m->items);
    if (m->n) memcpy(sorted.items, m->items, m->n * sizeof *m->items);
    manifest_sort(&sorted);
    int rc = write_kaldi_file(dir, "wav.scp", &sorted, 0, err);
    if (rc == 0) rc = write_kaldi_file(dir, "text", &sorted, 1, err);
    if (rc == 0) rc = write_kaldi_file(dir, "utt2spk", &sorted, 2, err);
    free(sorted.items);
    return rc;
}

/* A Kaldi "key rest-of-line" table, with each row's line and the rows sorted by key. */
typedef struct kv_table {
    char **keys, **vals;
    size_t *lines;
    size_t n, cap;
    size_t *order;     /* rows sorted by key, for kv_lookup */
    const char *path;
} kv_table;

static int kv_line(void *vctx, char *line, size_t lineno, esp_err *err)
{
    kv_table *t = vctx;
    if (!line[0]) return 0; /* blank lines are allowed */
    char *sp = strpbrk(line, " \t");
    if (sp == line)
        return esp_fail(err, "%s:%zu: line starts with whitespace (expected '<utt> <value>')", t->path, lineno);
    if (t->n == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->keys = xrealloc(t->keys, t->cap * sizeof *t->keys);
        t->vals = xrealloc(t->vals, t->cap * sizeof *t->vals);
        t->lines = xrealloc(t->lines, t->cap * sizeof *t->lines);
    }
    t->keys[t->n] = sp ? xstrndup(line, (size_t)(sp - line)) : xstrdup(line);
    t->vals[t->n] = xstrdup(sp ? sp + 1 : "");
    t->lines[t->n] = lineno;
    t->n++;
    return 0;
}

static void kv_free(kv_table *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->keys[i]);
        free(t->vals[i]);
    }
    free(t->keys);
    free(t->vals);
    free(t->lines);
    free(t->order);
    memset(t, 0, sizeof *t);
}

static int cmp_order(const void *a, const void *b, void *table)
{
    const kv_table *t = table;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    int c = strcmp(t->keys[x], t->keys[y]);
    return c ? c : (x > y) - (x < y);
}

/* Reads <dir>/<name>; a key given twice is an error naming both lines. */
static int kv_read(const char *dir, const char *name, kv_table *t, esp_err *err)
{
    memset(t, 0, sizeof *t);
    char *path = path_join(dir, name);
    char *buf = text_file_read(path, "a Kaldi data file", NULL, err);
    int rc = -1;
    if (buf) {
        t->path = path;
        rc = for_each_line(buf, kv_line, t, err);
        free(buf);
    }
    if (rc == 0) {
        t->order = xmalloc((t->n ? t->n : 1) * sizeof *t->order);
        for (size_t i = 0; i < t->n; i++) t->order[i] = i;
        qsort_r(t->order, t->n, sizeof *t->order, cmp_order, t);
        for (size_t k = 1; k < t->n && rc == 0; k++) {
            size_t a = t->order[k - 1], b = t->order[k];
            if (strcmp(t->keys[a], t->keys[b]) == 0)
                rc = esp_fail(err, "%s:%zu: utterance %s appears again (first on line %zu)", path, t->lines[b],
                              t->keys[b], t->lines[a]);
        }
    }
    t->path = NULL;
    free(path);
    if (rc != 0) kv_free(t);
    return rc;
}

static const char *kv_lookup(const kv_table *t, const char *key)
{
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(t->keys[t->order[mid]], key);
        if (c == 0) return t->vals[t->order[mid]];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

/* <dir>/segments: "<utt> <recording> <start> <end>" (seconds; end -1 or beyond the file: to its end,
 * as Kaldi's extract-segments), recordings keyed in wav.scp, text and utt2spk keyed by utterance. */
static int read_segments(const char *dir, const kv_table *wav, const kv_table *text, const kv_table *spk,
                         manifest *out, esp_err *err)
{
    kv_table seg;
    if (kv_read(dir, "segments", &seg, err) != 0) return -1;
    int rc = 0;
    if (seg.n == 0) rc = esp_fail(err, "%s/segments: no segments (an empty data dir)", dir);
    for (size_t i = 0; i < seg.n && rc == 0; i++) {
        char rec[256];
        double a, b;
        int used = 0;
        if (sscanf(seg.vals[i], "%255s %lf %lf %n", rec, &a, &b, &used) != 3 || seg.vals[i][used] != '\0' ||
            !isfinite(a) || !isfinite(b) || a < 0 || (b <= a && b != -1)) {
            rc = esp_fail(err, "%s/segments:%zu: expected '<utt> <recording> <start> <end>' with 0 <= start < end "
                          "seconds (end -1: to the end)", dir, seg.lines[i]);
            break;
        }
        const char *w = kv_lookup(wav, rec);
        const char *t = kv_lookup(text, seg.keys[i]);
        const char *s = spk ? kv_lookup(spk, seg.keys[i]) : NULL;
        if (!w)
            rc = esp_fail(err, "%s/segments:%zu: recording %s is not in wav.scp", dir, seg.lines[i], rec);
        else if (!t)
            rc = esp_fail(err, "%s/text: no transcript for utterance %s (listed in segments)", dir, seg.keys[i]);
        else if (spk && !s)
            rc = esp_fail(err, "%s/utt2spk: no speaker for utterance %s (listed in segments)", dir, seg.keys[i]);
        else manifest_add_span(out, seg.keys[i], w, t, s, a, b == -1 ? 1e300 : b);
    }
    kv_free(&seg);
    return rc;
}

int manifest_read_kaldi_dir(const char *dir, manifest *out, esp_err *err)
{
    memset(out, 0, sizeof *out);
    kv_table wav, text, spk = {0};
    char *seg_path = path_join(dir, "segments");
    int have_seg = path_exists(seg_path);
    free(seg_path);
    if (kv_read(dir, "wav.scp", &wav, err) != 0) return -1;
    if (kv_read(dir, "text", &text, err) != 0) {
        kv_free(&wav);
        return -1;
    }
    char *spk_path = path_join(dir, "utt2spk");
    int have_spk = path_exists(spk_path);
    free(spk_path);
    if (have_spk && kv_read(dir, "utt2spk", &spk, err) != 0) {
        kv_free(&wav);
        kv_free(&text);
        return -1;
    }
    int rc = 0;
    if (wav.n == 0) rc = esp_fail(err, "%s/wav.scp: no utterances (an empty data dir)", dir);
    for (size_t i = 0; i < wav.n && rc == 0; i++) { /* plain audio paths only */
        size_t vl = strlen(wav.vals[i]);
        while (vl && (wav.vals[i][vl - 1] == ' ' || wav.vals[i][vl - 1] == '\r')) wav.vals[i][--vl] = '\0';
        if (!wav.vals[i][0])
            rc = esp_fail(err, "%s/wav.scp:%zu: utterance %s has no audio path", dir, wav.lines[i], wav.keys[i]);
        else if (wav.vals[i][vl - 1] == '|' || wav.vals[i][0] == '|')
            rc = esp_fail(err, "%s/wav.scp:%zu: utterance %s: '%s' is a command pipe; espnet3 reads audio files only "
                          "(run the command once into a .wav or .flac and list that file)", dir, wav.lines[i],
                          wav.keys[i], wav.vals[i]);
    }
    if (rc == 0 && have_seg) rc = read_segments(dir, &wav, &text, have_spk ? &spk : NULL, out, err);
    for (size_t i = 0; i < wav.n && rc == 0 && !have_seg; i++) {
        const char *t = kv_lookup(&text, wav.keys[i]);
        const char *s = have_spk ? kv_lookup(&spk, wav.keys[i]) : NULL;
        if (!t)
            rc = esp_fail(err, "%s/text: no transcript for utterance %s (listed in wav.scp)", dir, wav.keys[i]);
        else if (have_spk && !s)
            rc = esp_fail(err, "%s/utt2spk: no speaker for utterance %s (listed in wav.scp)", dir, wav.keys[i]);
        else manifest_add(out, wav.keys[i], wav.vals[i], t, s);
    }
    kv_free(&wav);
    kv_free(&text);
    kv_free(&spk);
    if (rc != 0) manifest_free(out);
    return rc;
}
