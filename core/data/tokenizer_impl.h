/* The per-type halves of text_to_ids / ids_to_text (tokenizer_text.c dispatches on the type);
 * only core/data/tokenizer*.c include this. Each follows text_to_ids' and ids_to_text's contracts
 * (tokenizer.h) for its own type. */
#ifndef ESPNET3_TOKENIZER_IMPL_H
#define ESPNET3_TOKENIZER_IMPL_H

#include "core/data/tokenizer.h"

/* tokenizer_word.c: str.split() words looked up whole; text is the tokens joined with ' '. */
int word_to_ids(const token_list *tl, const char *text, long **ids, size_t *n_ids, esp_err *err);
char *word_ids_to_text(const token_list *tl, const int *ids, size_t n, long blank);

/* tokenizer_spm.c: SentencePiece pieces looked up as ESPnet's TokenIDConverter does; text from
 * DecodePieces of the token strings. */
int spm_attach(token_list *tl, const char *model_path, esp_err *err);
int spm_to_ids(const token_list *tl, const char *text, long **ids, size_t *n_ids, esp_err *err);
char *spm_ids_to_text(const token_list *tl, const int *ids, size_t n, long blank);

#endif
