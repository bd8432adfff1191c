#include "core/data/tokenizer.h"

#include "core/base/fsio.h"
#include "core/base/hash.h"
#include "core/data/spm_shim.h"
#include "core/formats/text_file.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Length of the UTF-8 character at s (1 for an invalid byte, so every byte is consumed). */
static size_t utf8_char_len(const unsigned char *s)
{
    size_t len = s[0] < 0x80 ? 1 : (s[0] >> 5) == 0x6 ? 2 : (s[0] >> 4) == 0xE ? 3 : (s[0] >> 3) == 0x1E ? 4 : 1;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return 1;
    return len;
}

/* A character and how often it occurs; chars are compared as UTF-8 bytes, which orders them by
 * code point. */
typedef struct char_count {
    char ch[5];
    size_t count;
} char_count;

/* Open-addressing table of char_count, keyed by the character's bytes. */
typedef struct count_table {
    char_count *slots;
    size_t cap, used;
} count_table;

/* The slot holding ch, inserted with count 0 when new; the table must have a free slot. */
static char_count *table_slot(count_table *t, const char *ch)
{
    size_t j = fnv1a64_str(ch) & (t->cap - 1);
    while (t->slots[j].ch[0] && strcmp(t->slots[j].ch, ch) != 0) j = (j + 1) & (t->cap - 1);
    if (!t->slots[j].ch[0]) {
        strcpy(t->slots[j].ch, ch);
        t->used++;
    }
    return &t->slots[j];
}

static void table_add(count_table *t, const char *ch)
{
    if (2 * (t->used + 1) > t->cap) { /* keep the load at most 1/2 */
        count_table bigger = {xcalloc(t->cap ? 2 * t->cap : 256, sizeof(char_count)), t->cap ? 2 * t->cap : 256, 0};
        for (size_t i = 0; i < t->cap; i++)
            if (t->slots[i].ch[0]) table_slot(&bigger, t->slots[i].ch)->count = t->slots[i].count;
        free(t->slots);
        *t = bigger;
    }
    table_slot(t, ch)->count++;
}

static int cmp_by_count(const void *a, const void *b)
{
    const char_count *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    return strcmp(x->ch, y->ch);
}

void char_token_list_build(const char *const *texts, size_t n_texts, token_list *out)
{
    count_table t = {0};
    for (size_t i = 0; i < n_texts; i++) {
        const unsigned char *s = (const unsigned char *)texts[i];
        while (*s) {
            size_t len = utf8_char_len(s);
            char ch[5] = {0};
            memcpy(ch, s, len);
            table_add(&t, ch);
            s += len;
        }
    }
    char_count *chars = xmalloc((t.used ? t.used : 1) * sizeof *chars);
    size_t n = 0;
    for (size_t i = 0; i < t.cap; i++)
        if (t.slots[i].ch[0]) chars[n++] = t.slots[i];
    qsort(chars, n, sizeof *chars, cmp_by_count);
    free(t.slots);

    memset(out, 0, sizeof *out);
    out->n = n + 3;
    out->tokens = xmalloc(out->n * sizeof *out->tokens);
    out->tokens[0] = xstrdup(TOKEN_BLANK);
    out->tokens[1] = xstrdup(TOKEN_UNK);
    for (size_t i = 0; i < n; i++)
        out->tokens[2 + i] = xstrdup(strcmp(chars[i].ch, " ") == 0 ? TOKEN_SPACE : chars[i].ch);
    out->tokens[n + 2] = xstrdup(TOKEN_SOS_EOS);
    free(chars);
    token_list_index(out);
}

int token_list_write(const char *path, const token_list *tl, esp_err *err)
{
    atomic_file af;
    if (atomic_open(&af, path, err) != 0) return -1;
    for (size_t i = 0; i < tl->n; i++) fprintf(af.fp, "%s\n", tl->tokens[i]);
    return atomic_commit(&af, err);
}

long token_list_find(const token_list *tl, const char *token)
{
    if (tl->index) {
        size_t mask = tl->index_cap - 1;
        for (size_t j = fnv1a64_str(token) & mask; tl->index[j] >= 0; j = (j + 1) & mask)
            if (strcmp(tl->tokens[tl->index[j]], token) == 0) return tl->index[j];
        return -1;
    }
    for (size_t i = 0; i < tl->n; i++)
        if (strcmp(tl->tokens[i], token) == 0) return (long)i;
    return -1;
}

/* Puts token i in the open-addressing index (a repeat lands after the first: lookups find the first). */
static void index_insert(token_list *tl, size_t i)
{
    size_t mask = tl->index_cap - 1;
    size_t j = fnv1a64_str(tl->tokens[i]) & mask;
    while (tl->index[j] >= 0) j = (j + 1) & mask;
    tl->index[j] = (long)i;
}

void token_list_index(token_list *tl)
{
    size_t cap = 16;
    while (cap < 2 * tl->n + 2) cap *= 2;
    free(tl->index);
    tl->index = xmalloc(cap * sizeof *tl->index);
    tl->index_cap = cap;
    for (size_t j = 0; j < cap; j++) tl->index[j] = -1;
    for (size_t i = 0; i < tl->n; i++) index_insert(tl, i);
}

void token_list_free(token_list *tl)
{
    for (size_t i = 0; i < tl->n; i++) free(tl->tokens[i]);
    free(tl->tokens);
    if (tl->spm) spm_free(tl->spm);
    free(tl->piece_token);
    free(tl->index);
    memset(tl, 0, sizeof *tl);
}

typedef struct token_ctx {
    const char *path;
    token_list *out;
    size_t cap;
} token_ctx;

/* One token per line: empty lines and repeats are errors. */
static int token_line(void *vctx, char *line, size_t lineno, esp_err *err)
{
    token_ctx *c = vctx;
    token_list *out = c->out;
    if (!line[0]) return esp_fail(err, "%s:%zu: empty line (one token per line expected)", c->path, lineno);
    /* The index grows with the list (rebuilt at half full, doubling), so a 200,000-token list
     * reads in linear time instead of one linear search per token. */
    if (!out->index || 2 * (out->n + 1) > out->index_cap) token_list_index(out);
    if (token_list_find(out, line) >= 0)
        return esp_fail(err, "%s:%zu: token %s appears more than once", c->path, lineno, line);
    if (out->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        out->tokens = xrealloc(out->tokens, c->cap * sizeof *out->tokens);
    }
    out->tokens[out->n] = xstrdup(line);
    index_insert(out, out->n++);
    return 0;
}

int token_list_read(const char *path, token_list *out, esp_err *err)
{
    memset(out, 0, sizeof *out);
    char *buf = text_file_read(path, "a token list", NULL, err);
    if (!buf) return -1;
    token_ctx c = {.path = path, .out = out};
    int rc = for_each_line(buf, token_line, &c, err);
    free(buf);
    if (rc == 0 && out->n == 0) rc = esp_fail(err, "%s: holds no tokens (run stage train_tokenizer)", path);
    if (rc != 0) token_list_free(out);
    else token_list_index(out);
    return rc;
}

int char_tokenize(const token_list *tl, const char *text, long **ids, size_t *n_ids, esp_err *err)
{
    long unk = token_list_find(tl, TOKEN_UNK);
    size_t cap = strlen(text) + 1, n = 0;
    long *out = xmalloc(cap * sizeof *out);
    for (const unsigned char *s = (const unsigned char *)text; *s;) {
        size_t len = utf8_char_len(s);
        char ch[5] = {0};
        memcpy(ch, s, len);
        long id = token_list_find(tl, strcmp(ch, " ") == 0 ? TOKEN_SPACE : ch);
        if (id < 0) id = unk;
        if (id < 0) {
            free(out);
            return esp_fail(err, "character '%s' is not in the token list, which has no %s", ch, TOKEN_UNK);
        }
        out[n++] = id;
        s += len;
    }
    *ids = out;
    *n_ids = n;
    return 0;
}
