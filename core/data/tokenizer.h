/* Token lists (ESPnet2's tokens.txt: one token per line, id = line number) and the character
 * tokenizer: <blank>, <unk>, characters by descending frequency (space as <space>), <sos/eos>. */
#ifndef ESPNET3_TOKENIZER_H
#define ESPNET3_TOKENIZER_H

#include <stddef.h>
#include "core/base/log.h"

#define TOKEN_BLANK "<blank>"
#define TOKEN_UNK "<unk>"
#define TOKEN_SPACE "<space>"
#define TOKEN_SOS_EOS "<sos/eos>"

typedef struct token_list {
    char **tokens;
    size_t n;
} token_list;

/* Character token list from training texts (UTF-8; a byte that is not valid UTF-8 counts as its
 * own character). Characters are ordered by descending count, ties by code point. */
void char_token_list_build(const char *const *texts, size_t n_texts, token_list *out);

/* Writes one token per line, atomically. */
int token_list_write(const char *path, const token_list *tl, esp_err *err);
/* Reads tokens.txt; empty lines and duplicate tokens are errors naming file:line. */
int token_list_read(const char *path, token_list *out, esp_err *err);
/* Id of a token, or -1. */
long token_list_find(const token_list *tl, const char *token);
void token_list_free(token_list *tl);

/* Splits text into character tokens mapped to ids (space -> <space>, unknown -> <unk>).
 * Returns the number of ids; *ids is allocated (caller frees). Fails when the list lacks <unk>
 * and an unknown character appears. */
int char_tokenize(const token_list *tl, const char *text, long **ids, size_t *n_ids, esp_err *err);

#endif
