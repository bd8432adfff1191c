/* Text <-> token ids under a token list of any type: the dispatch over char (tokenizer.c), word
 * (tokenizer_word.c) and SentencePiece (tokenizer_spm.c), and the <unk> warning. See tokenizer.h. */
#include "core/data/tokenizer_impl.h"

#include <stdlib.h>
#include <string.h>

#include "core/data/spm_shim.h"

int token_list_set_type(token_list *tl, token_type type, const char *model_path, esp_err *err)
{
    if (type == TOKEN_TYPE_BPE) {
        if (!model_path) return esp_fail(err, "a bpe token list needs its SentencePiece model (set bpemodel)");
        if (spm_attach(tl, model_path, err) != 0) return -1;
    } else {
        if (tl->spm) spm_free(tl->spm);
        free(tl->piece_token);
        tl->spm = NULL;
        tl->piece_token = NULL;
    }
    tl->type = type;
    return 0;
}

int text_to_ids(const token_list *tl, const char *text, long **ids, size_t *n_ids, size_t *n_unk, esp_err *err)
{
    int rc;
    switch (tl->type) {
    case TOKEN_TYPE_WORD: rc = word_to_ids(tl, text, ids, n_ids, err); break;
    case TOKEN_TYPE_BPE: rc = spm_to_ids(tl, text, ids, n_ids, err); break;
    default: rc = char_tokenize(tl, text, ids, n_ids, err); break;
    }
    if (rc == 0 && n_unk) {
        long unk = token_list_find(tl, TOKEN_UNK);
        *n_unk = 0;
        for (size_t i = 0; i < *n_ids; i++) *n_unk += (*ids)[i] == unk;
    }
    return rc;
}

/* char: tokens joined, <space> as ' ' (ESPnet's CharTokenizer.tokens2text). */
static char *char_ids_to_text(const token_list *tl, const int *ids, size_t n, long blank)
{
    long space = token_list_find(tl, TOKEN_SPACE);
    size_t len = 1;
    for (size_t i = 0; i < n; i++) len += strlen(tl->tokens[ids[i]]);
    char *s = xmalloc(len), *p = s;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] == blank) continue;
        if (ids[i] == space) {
            *p++ = ' ';
            continue;
        }
        size_t l = strlen(tl->tokens[ids[i]]);
        memcpy(p, tl->tokens[ids[i]], l);
        p += l;
    }
    *p = '\0';
    return s;
}

char *ids_to_text(const token_list *tl, const int *ids, size_t n)
{
    for (size_t i = 0; i < n; i++) ESP_CHECK(ids[i] >= 0 && (size_t)ids[i] < tl->n);
    long blank = token_list_find(tl, TOKEN_BLANK);
    switch (tl->type) {
    case TOKEN_TYPE_WORD: return word_ids_to_text(tl, ids, n, blank);
    case TOKEN_TYPE_BPE: return spm_ids_to_text(tl, ids, n, blank);
    default: return char_ids_to_text(tl, ids, n, blank);
    }
}

size_t tokens_warn_unknown(const token_list *tl, const char *const *texts, size_t n_texts, const char *where)
{
    size_t total = 0, texts_with = 0, first = 0;
    for (size_t i = 0; i < n_texts; i++) {
        long *ids = NULL;
        size_t n = 0, unk = 0;
        esp_err e;
        if (text_to_ids(tl, texts[i], &ids, &n, &unk, &e) != 0) continue; /* the batch reports it */
        free(ids);
        if (unk && !texts_with++) first = i;
        total += unk;
    }
    if (total)
        log_warn("%s: %zu of %zu transcripts have text outside the %s token list: %zu tokens become %s "
                 "(first: \"%s\")",
                 where, texts_with, n_texts, token_type_name(tl->type), total, TOKEN_UNK, texts[first]);
    return total;
}
