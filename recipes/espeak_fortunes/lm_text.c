#include "recipes/espeak_fortunes/lm_text.h"
#include "recipes/espeak_fortunes/str_list.h"
#include "core/base/fsio.h"
#include "core/base/hash.h"
#include "core/formats/manifest.h"
#include "recipes/espeak_fortunes/fortunes.h"
#include "recipes/espeak_fortunes/text_norm.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Bump when train.txt or valid.txt would change for the same dataset, so old LM text is redone. */
#define LM_TEXT_FORMAT 1

static char *lm_stamp(const char *dataset_stamp)
{
    return xasprintf("lm_format: %d\n%s", LM_TEXT_FORMAT, dataset_stamp);
}

static char *lm_path(const char *data_dir, const char *name)
{
    char *dir = path_join(data_dir, "lm");
    char *p = path_join(dir, name);
    free(dir);
    return p;
}

int lm_text_is_built(const char *data_dir, const char *stamp)
{
    char *stamp_path = lm_path(data_dir, ".built"), *train = lm_path(data_dir, "train.txt"),
         *valid = lm_path(data_dir, "valid.txt");
    esp_err ignored;
    char *have = path_exists(stamp_path) ? read_file(stamp_path, READ_SMALL, NULL, &ignored) : NULL;
    char *want = lm_stamp(stamp);
    int built = have && strcmp(have, want) == 0 && path_exists(train) && path_exists(valid);
    free(have), free(want), free(stamp_path), free(train), free(valid);
    return built;
}

/* ---- held-out transcripts: a hash set of strings ------------------------------------------- */

typedef struct held_entry {
    const char *text; /* NULL: empty slot */
    size_t len;
    uint64_t hash;
} held_entry;

typedef struct held_set {
    held_entry *slot;
    size_t cap;     /* a power of two, at least twice the entries */
    size_t max_len; /* longest transcript in bytes */
} held_set;

static int held_has(const held_set *h, const char *text, size_t len, uint64_t hash)
{
    for (size_t i = hash & (h->cap - 1);; i = (i + 1) & (h->cap - 1)) {
        const held_entry *e = &h->slot[i];
        if (!e->text) return 0;
        if (e->hash == hash && e->len == len && memcmp(e->text, text, len) == 0) return 1;
    }
}

static void held_add(held_set *h, const char *text)
{
    size_t len = strlen(text);
    uint64_t hash = fnv1a64_bytes(FNV1A64_INIT, text, len);
    if (!len || held_has(h, text, len, hash)) return;
    size_t i = hash & (h->cap - 1);
    while (h->slot[i].text) i = (i + 1) & (h->cap - 1);
    h->slot[i] = (held_entry){text, len, hash};
    if (len > h->max_len) h->max_len = len;
}

/* 1 when a held-out transcript occurs in the normalized text as whole words. */
static int held_occurs_in(const held_set *h, const char *norm)
{
    for (const char *p = norm; *p; p++) {
        if (p != norm && p[-1] != ' ') continue;
        uint64_t hash = FNV1A64_INIT;
        for (size_t len = 0; len <= h->max_len; len++) {
            if (len && (p[len] == ' ' || p[len] == '\0') && held_has(h, p, len, hash)) return 1;
            if (p[len] == '\0') break;
            hash = fnv1a64_bytes(hash, p + len, 1);
        }
    }
    return 0;
}

/* ---- the sentences ------------------------------------------------------------------------ */


typedef struct lm_collect {
    const held_set *held;
    str_list kept, fortune; /* fortune: the current fortune's sentences until it is judged */
    size_t fortunes, dropped;
} lm_collect;

/* A fortune's sentences go in unless the fortune holds a held-out transcript: in its whole
 * normalized text (as whole words) or as one of its sentences (which the first test already
 * catches; the second keeps the rule "no LM sentence equals a held-out transcript" explicit). */
static void collect_fortune(void *ctx, const char *joined, const fortune_sentence *sentences, size_t n)
{
    lm_collect *c = ctx;
    c->fortunes++;
    char *whole = text_normalize(joined);
    int drop = held_occurs_in(c->held, whole);
    free(whole);
    for (size_t i = 0; i < n && !drop; i++) {
        char *raw = xstrndup(sentences[i].text, sentences[i].len);
        char *norm = text_normalize(raw);
        free(raw);
        size_t len = strlen(norm);
        drop = len && held_has(c->held, norm, len, fnv1a64_bytes(FNV1A64_INIT, norm, len));
        if (len && !drop) str_list_push(&c->fortune, norm);
        else free(norm);
    }
    for (size_t i = 0; i < c->fortune.n; i++) {
        if (drop) free(c->fortune.v[i]);
        else str_list_push(&c->kept, c->fortune.v[i]);
    }
    c->fortune.n = 0;
    c->dropped += drop != 0;
}

/* ---- the files ---------------------------------------------------------------------------- */

static int write_lines(const char *path, const str_list *ids, const str_list *texts, esp_err *err)
{
    atomic_file af;
    if (atomic_open(&af, path, err) != 0) return -1;
    for (size_t i = 0; i < texts->n; i++) {
        if (ids) fprintf(af.fp, "%s %s\n", ids->v[i], texts->v[i]);
        else fprintf(af.fp, "lm_%06zu %s\n", i + 1, texts->v[i]);
    }
    if (ferror(af.fp)) {
        atomic_abort(&af);
        return esp_fail(err, "%s: write failed (check free disk space)", path);
    }
    return atomic_commit(&af, err);
}

/* Reads the held-out manifests into held (texts owned by m[]), valid's ids and texts into valid_*. */
static int read_held_out(const lm_text_args *a, manifest *m, held_set *held, str_list *valid_ids,
                         str_list *valid_texts, esp_err *err)
{
    size_t total = 0;
    for (size_t k = 0; k < a->n_held_out; k++) {
        char *name = xasprintf("%s.tsv", a->held_out[k]);
        char *path = path_join(a->manifest_dir, name);
        int rc = manifest_read_tsv(path, &m[k], err);
        free(name), free(path);
        if (rc != 0) return -1;
        total += m[k].n;
        if (strcmp(a->held_out[k], "valid") != 0) continue;
        for (size_t i = 0; i < m[k].n; i++) {
            str_list_push(valid_ids, xstrdup(m[k].items[i].utt));
            str_list_push(valid_texts, xstrdup(m[k].items[i].text));
        }
    }
    held->cap = 16;
    while (held->cap < 2 * total + 1) held->cap *= 2;
    held->slot = xcalloc(held->cap, sizeof *held->slot);
    for (size_t k = 0; k < a->n_held_out; k++)
        for (size_t i = 0; i < m[k].n; i++) held_add(held, m[k].items[i].text);
    return 0;
}

int lm_text_write(const lm_text_args *a, esp_err *err)
{
    manifest *m = xcalloc(a->n_held_out, sizeof *m);
    held_set held = {0};
    str_list valid_ids = {0}, valid_texts = {0};
    lm_collect c = {.held = &held};
    char *dir = path_join(a->data_dir, "lm"), *stamp_path = lm_path(a->data_dir, ".built"),
         *train = lm_path(a->data_dir, "train.txt"), *valid = lm_path(a->data_dir, "valid.txt");
    int rc = read_held_out(a, m, &held, &valid_ids, &valid_texts, err);
    if (rc == 0) rc = fortunes_for_each(a->text_source, collect_fortune, &c, err);
    if (rc == 0) {
        if (c.kept.n) qsort(c.kept.v, c.kept.n, sizeof *c.kept.v, str_list_cmp);
        size_t u = 0;
        for (size_t i = 0; i < c.kept.n; i++) {
            if (u > 0 && strcmp(c.kept.v[u - 1], c.kept.v[i]) == 0) free(c.kept.v[i]);
            else c.kept.v[u++] = c.kept.v[i];
        }
        c.kept.n = u;
        unlink(stamp_path); /* half-written LM text must not look built */
        rc = mkdir_p(dir, err);
    }
    if (rc == 0) rc = write_lines(train, NULL, &c.kept, err);
    if (rc == 0) rc = write_lines(valid, &valid_ids, &valid_texts, err);
    if (rc == 0) {
        char *stamp = lm_stamp(a->stamp);
        rc = atomic_write_file(stamp_path, stamp, strlen(stamp), err);
        free(stamp);
    }
    if (rc == 0)
        log_info("create_dataset: wrote %s/{train,valid}.txt: %zu distinct LM sentences from %zu of %zu fortunes "
                 "(%zu dropped for holding a held-out transcript), %zu valid transcripts",
                 dir, c.kept.n, c.fortunes - c.dropped, c.fortunes, c.dropped, valid_texts.n);
    for (size_t k = 0; k < a->n_held_out; k++) manifest_free(&m[k]);
    free(m), free(held.slot);
    str_list_free(&valid_ids), str_list_free(&valid_texts), str_list_free(&c.kept);
    free(c.fortune.v);
    free(dir), free(stamp_path), free(train), free(valid);
    return rc;
}
