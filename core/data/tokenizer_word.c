/* Word token lists and word tokenization, as ESPnet2's WordTokenizer (delimiter None: str.split())
 * and tokenize_text's --write_vocabulary. See tokenizer.h. */
#include "core/data/tokenizer_impl.h"

#include <stdlib.h>
#include <string.h>

#include "core/base/hash.h"

#define WS " \t\n\r\f\v"

typedef struct word_count {
    char *word;
    size_t count, first; /* occurrences; index of the first occurrence among all words */
} word_count;

typedef struct word_table {
    word_count *slots;
    size_t cap, used;
} word_table;

/* The slot of word (len bytes), inserted with count 0 when new. */
static word_count *table_slot(word_table *t, const char *word, size_t len, size_t first)
{
    if (2 * (t->used + 1) > t->cap) { /* keep the load at most 1/2 */
        word_table bigger = {xcalloc(t->cap ? 2 * t->cap : 1024, sizeof(word_count)), t->cap ? 2 * t->cap : 1024, 0};
        for (size_t i = 0; i < t->cap; i++) {
            if (!t->slots[i].word) continue;
            size_t j = fnv1a64_str(t->slots[i].word) & (bigger.cap - 1);
            while (bigger.slots[j].word) j = (j + 1) & (bigger.cap - 1);
            bigger.slots[j] = t->slots[i];
            bigger.used++;
        }
        free(t->slots);
        *t = bigger;
    }
    size_t j = fnv1a64_bytes(FNV1A64_INIT, word, len) & (t->cap - 1);
    while (t->slots[j].word && !(strlen(t->slots[j].word) == len && !memcmp(t->slots[j].word, word, len)))
        j = (j + 1) & (t->cap - 1);
    if (!t->slots[j].word) {
        t->slots[j] = (word_count){xstrndup(word, len), 0, first};
        t->used++;
    }
    return &t->slots[j];
}

static int cmp_by_count(const void *a, const void *b)
{
    const word_count *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    return x->first < y->first ? -1 : x->first > y->first;
}

void word_token_list_build(const char *const *texts, size_t n_texts, long vocab_size, token_list *out)
{
    word_table t = {0};
    size_t seen = 0;
    for (size_t i = 0; i < n_texts; i++) {
        for (const char *s = texts[i] + strspn(texts[i], WS); *s; s += strspn(s, WS)) {
            size_t len = strcspn(s, WS);
            table_slot(&t, s, len, seen++)->count++;
            s += len;
        }
    }
    word_count *words = xmalloc((t.used ? t.used : 1) * sizeof *words);
    size_t n = 0;
    for (size_t i = 0; i < t.cap; i++)
        if (t.slots[i].word) words[n++] = t.slots[i];
    free(t.slots);
    qsort(words, n, sizeof *words, cmp_by_count);
    size_t keep = n;
    if (vocab_size > 0) keep = (size_t)vocab_size > 3 + n ? n : (size_t)vocab_size < 3 ? 0 : (size_t)vocab_size - 3;

    memset(out, 0, sizeof *out);
    out->type = TOKEN_TYPE_WORD;
    out->n = keep + 3;
    out->tokens = xmalloc(out->n * sizeof *out->tokens);
    out->tokens[0] = xstrdup(TOKEN_BLANK);
    out->tokens[1] = xstrdup(TOKEN_UNK);
    for (size_t i = 0; i < n; i++) {
        if (i < keep) out->tokens[2 + i] = words[i].word;
        else free(words[i].word);
    }
    out->tokens[keep + 2] = xstrdup(TOKEN_SOS_EOS);
    free(words);
    token_list_index(out);
}

int word_to_ids(const token_list *tl, const char *text, long **ids, size_t *n_ids, esp_err *err)
{
    long unk = token_list_find(tl, TOKEN_UNK);
    size_t cap = 16, n = 0;
    long *out = xmalloc(cap * sizeof *out);
    char *word = NULL;
    for (const char *s = text + strspn(text, WS); *s; s += strspn(s, WS)) {
        size_t len = strcspn(s, WS);
        free(word);
        word = xstrndup(s, len);
        s += len;
        long id = token_list_find(tl, word);
        if (id < 0) id = unk;
        if (id < 0) {
            esp_fail(err, "word '%s' is not in the token list, which has no %s", word, TOKEN_UNK);
            free(word);
            free(out);
            return -1;
        }
        if (n == cap) out = xrealloc(out, (cap *= 2) * sizeof *out);
        out[n++] = id;
    }
    free(word);
    *ids = out;
    *n_ids = n;
    return 0;
}

char *word_ids_to_text(const token_list *tl, const int *ids, size_t n, long blank)
{
    size_t len = 1;
    for (size_t i = 0; i < n; i++) len += strlen(tl->tokens[ids[i]]) + 1;
    char *s = xmalloc(len), *p = s;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] == blank) continue;
        if (p != s) *p++ = ' ';
        size_t l = strlen(tl->tokens[ids[i]]);
        memcpy(p, tl->tokens[ids[i]], l);
        p += l;
    }
    *p = '\0';
    return s;
}
