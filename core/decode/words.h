/* Words of a timed hypothesis (speech2text with opts.timestamps): its tokens grouped into words by
 * the model's token type, as its text reads them. BPE: a token that starts with "▁" starts a word
 * (the mark itself is not part of the word; a lone "▁" only starts one); char: <space> separates
 * words; word: every token is a word. A word's start is its first token's start, its end its last
 * token's end, its score the mean of its tokens' scores (tok_score: mean frame log-posteriors). */
#ifndef ESPNET3_WORDS_H
#define ESPNET3_WORDS_H

#include <stddef.h>

#include "core/base/log.h"
#include "core/decode/speech2text.h"

typedef struct s2t_word {
    char *text;
    double start, end, score;
} s2t_word;

/* The words of h into *out (*n of them; none for an empty hypothesis). A hypothesis without
 * times (decoded without opts.timestamps) is an error. */
int s2t_hyp_words(const speech2text *s, const s2t_hyp *h, s2t_word **out, size_t *n, esp_err *err);
void s2t_words_free(s2t_word *w, size_t n);

#endif
