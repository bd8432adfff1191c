/* Tokens of a timed hypothesis grouped into words; see words.h. */
#include "core/decode/words.h"

#include <stdlib.h>
#include <string.h>

#define BPE_MARK "\xe2\x96\x81" /* U+2581, SentencePiece's word start */

typedef struct word_acc {
    s2t_word *w;
    size_t n, cap;
    char *text;     /* the word being built (NULL: none) */
    size_t len, first, last; /* its text's length; its first and last token */
} word_acc;

static void word_close(word_acc *a, const s2t_hyp *h)
{
    if (!a->text) return;
    if (a->len == 0) { /* a lone "▁" or an empty token: no word */
        free(a->text);
        a->text = NULL;
        return;
    }
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 16;
        a->w = xrealloc(a->w, a->cap * sizeof *a->w);
    }
    double sum = 0;
    for (size_t i = a->first; i <= a->last; i++) sum += h->tok_score[i];
    a->w[a->n++] = (s2t_word){.text = a->text, .start = h->tok_start[a->first], .end = h->tok_end[a->last],
                              .score = sum / (double)(a->last - a->first + 1)};
    a->text = NULL;
}

/* Appends piece (len bytes) of token i to the word being built, starting one if there is none. */
static void word_add(word_acc *a, size_t i, const char *piece, size_t len)
{
    if (!a->text) {
        a->text = xmalloc(1);
        a->text[0] = 0;
        a->len = 0;
        a->first = i;
    }
    a->text = xrealloc(a->text, a->len + len + 1);
    memcpy(a->text + a->len, piece, len);
    a->len += len;
    a->text[a->len] = 0;
    a->last = i;
}

int s2t_hyp_words(const speech2text *s, const s2t_hyp *h, s2t_word **out, size_t *n, esp_err *err)
{
    *out = NULL;
    *n = 0;
    if (h->n_ids > 0 && !h->tok_start)
        return esp_fail(err, "words: the hypothesis has no token times (decode it with timestamps on)");
    const token_list *tl = speech2text_tokens(s);
    word_acc a = {0};
    size_t mark = strlen(BPE_MARK);
    for (size_t i = 0; i < h->n_ids; i++) {
        const char *tok = tl->tokens[h->ids[i]];
        if (tl->type == TOKEN_TYPE_WORD) {
            word_add(&a, i, tok, strlen(tok));
            word_close(&a, h);
        } else if (tl->type == TOKEN_TYPE_CHAR && !strcmp(tok, TOKEN_SPACE)) {
            word_close(&a, h);
        } else if (tl->type == TOKEN_TYPE_BPE && !strncmp(tok, BPE_MARK, mark)) {
            word_close(&a, h);
            word_add(&a, i, tok + mark, strlen(tok + mark));
        } else {
            word_add(&a, i, tok, strlen(tok));
        }
    }
    word_close(&a, h);
    *out = a.w;
    *n = a.n;
    return 0;
}

void s2t_words_free(s2t_word *w, size_t n)
{
    for (size_t i = 0; i < n; i++) free(w[i].text);
    free(w);
}
