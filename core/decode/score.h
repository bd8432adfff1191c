/* Error-rate scoring as ESPnet scores with sctk's sclite: text cleaning, word and character
 * tokens (a space is the token "<space>", as ESPnet2's char tokenizer writes it into sclite's
 * trn files), and sclite's weighted alignment (correct 0, substitution 4, insertion and deletion
 * 3, with sclite's tie-breaking), so the counts per utterance equal `sclite -i rm` on the same
 * pairs. Tokens compare ignoring ASCII case, as sclite does without -s. */
#ifndef ESPNET3_SCORE_H
#define ESPNET3_SCORE_H

#include <stddef.h>

typedef enum score_unit { SCORE_WORDS, SCORE_CHARS } score_unit;

typedef enum score_op { SCORE_CORR, SCORE_SUB, SCORE_DEL, SCORE_INS } score_op;

/* One aligned pair: indices into the ref and hyp tokens, -1 on the missing side. */
typedef struct score_step {
    score_op op;
    int ref, hyp;
} score_step;

typedef struct score_counts {
    long corr, sub, del, ins;
} score_counts;

typedef struct score_tokens {
    char **tok;
    size_t n;
} score_tokens;

/* Whitespace runs (space, tab, CR, LF, VT, FF) become one space, leading and trailing ones go;
 * what ESPnet3 does before tokenizing (" ".join(text.split())). Caller frees. */
char *score_clean(const char *text);

/* Tokens of cleaned text: words split at spaces, or characters (UTF-8 code points) with each
 * space as "<space>". */
void score_tokenize(const char *clean, score_unit unit, score_tokens *out);
void score_tokens_free(score_tokens *t);

/* Equal ignoring ASCII case. */
int score_token_equal(const char *a, const char *b);

/* sclite's alignment of ref against hyp. Returns the steps in order (caller frees) and their
 * number in *n_steps; adds the counts to *counts (not cleared). */
score_step *score_align(const score_tokens *ref, const score_tokens *hyp, size_t *n_steps, score_counts *counts);

#endif
