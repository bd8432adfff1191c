/* Token lists (ESPnet2's tokens.txt: one token per line, id = line number) and the tokenizers that
 * map text to their ids and back, as ESPnet's token_type:
 *   char     <blank>, <unk>, characters by descending frequency (space as <space>), <sos/eos>
 *            (tokenizer.c);
 *   word     <blank>, <unk>, whitespace-separated words by descending frequency, <sos/eos>
 *            (tokenizer_word.c);
 *   bpe      a SentencePiece model (model_type bpe or unigram; ESPnet calls both token_type bpe):
 *            <blank>, <unk>, the model's pieces in id order without <unk>, <s>, </s>, <sos/eos>
 *            (tokenizer_spm.c over the SentencePiece library, spm_shim.h).
 * A token list read from tokens.txt maps text as char until token_list_set_type gives it another
 * type; tokenizer_spec.c works out which type and model a config names. */
#ifndef ESPNET3_TOKENIZER_H
#define ESPNET3_TOKENIZER_H

#include <stddef.h>
#include "core/base/log.h"
#include "core/config/config_types.h"

#define TOKEN_BLANK "<blank>"
#define TOKEN_UNK "<unk>"
#define TOKEN_SPACE "<space>"
#define TOKEN_SOS_EOS "<sos/eos>"

typedef enum token_type { TOKEN_TYPE_CHAR = 0, TOKEN_TYPE_WORD, TOKEN_TYPE_BPE } token_type;

struct spm_model;

typedef struct token_list {
    char **tokens;
    size_t n;
    token_type type;        /* how text maps to these ids */
    struct spm_model *spm;  /* TOKEN_TYPE_BPE: the SentencePiece model (owned) */
    long *piece_token;      /* TOKEN_TYPE_BPE: the token id of each piece id, -1 when not listed */
    long *index;            /* hash slots of token ids (-1: empty) for token_list_find, or NULL */
    size_t index_cap;
} token_list;

/* ---- token lists (tokenizer.c) ---- */

/* Character token list from training texts (UTF-8; a byte that is not valid UTF-8 counts as its
 * own character). Characters are ordered by descending count, ties by code point. */
void char_token_list_build(const char *const *texts, size_t n_texts, token_list *out);

/* Writes one token per line, atomically. */
int token_list_write(const char *path, const token_list *tl, esp_err *err);
/* Reads tokens.txt (type char); empty lines and duplicate tokens are errors naming file:line. */
int token_list_read(const char *path, token_list *out, esp_err *err);
/* Id of a token (the first, should it be listed twice), or -1. */
long token_list_find(const token_list *tl, const char *token);
/* Builds the hash index token_list_find uses; call again after changing the tokens. The lists
 * made here (read, built) come indexed; a list filled by hand is searched linearly. */
void token_list_index(token_list *tl);
/* Frees the tokens and the model. */
void token_list_free(token_list *tl);

/* Splits text into character tokens mapped to ids (space -> <space>, unknown -> <unk>).
 * Returns the number of ids; *ids is allocated (caller frees). Fails when the list lacks <unk>
 * and an unknown character appears. */
int char_tokenize(const token_list *tl, const char *text, long **ids, size_t *n_ids, esp_err *err);

/* ---- word lists (tokenizer_word.c) ---- */

/* ESPnet2's word token list (tokenize_text --token_type word --write_vocabulary): words of
 * str.split() by descending count, ties in order of first appearance; vocab_size > 0 keeps the
 * first vocab_size - 3 words (the list then has vocab_size entries). */
void word_token_list_build(const char *const *texts, size_t n_texts, long vocab_size, token_list *out);

/* ---- SentencePiece (tokenizer_spm.c) ---- */

typedef struct spm_train_cfg {
    const char *model_type;  /* bpe | unigram */
    long vocab_size;
    double character_coverage; /* in (0, 1] */
    const char *const *user_defined_symbols;
    size_t n_user_defined_symbols;
} spm_train_cfg;

/* Trains a SentencePiece model on texts with ESPnet's settings (spm_train's flags of ESPnet2's
 * asr.sh and ESPnet3's train_sentencepiece: input_sentence_size 100000000) and writes
 * <save_path>/<model_type>.model, .vocab and tokens.txt, each under a temporary name renamed into
 * place once all are complete. text_file names the training text in errors. */
int spm_train_tokenizer(const spm_train_cfg *c, const char *const *texts, size_t n_texts, const char *save_path,
                        const char *text_file, esp_err *err);

/* ---- text <-> ids under any type (tokenizer_text.c) ---- */

/* Gives tl the type; TOKEN_TYPE_BPE loads the SentencePiece model at model_path (an unreadable
 * or missing file is an error naming it). */
int token_list_set_type(token_list *tl, token_type type, const char *model_path, esp_err *err);

/* Ids of text as ESPnet's tokenizer + TokenIDConverter give them: pieces (characters, words) that
 * are not in the list become <unk>, counted in *n_unk (may be NULL). *ids is allocated. Fails when
 * the list has no <unk> and one is needed. */
int text_to_ids(const token_list *tl, const char *text, long **ids, size_t *n_ids, size_t *n_unk, esp_err *err);

/* Text of ids as ESPnet's tokens2text: blanks dropped; char: tokens joined, <space> as ' ';
 * word: tokens joined with ' '; bpe: SentencePiece's DecodePieces of the token strings.
 * Ids must index the list. Caller frees. */
char *ids_to_text(const token_list *tl, const int *ids, size_t n);

/* Encodes every text and logs one warning when any maps to <unk>: how many tokens in how many
 * texts, and the first one (where names the texts' file). Returns the number of <unk> tokens. */
size_t tokens_warn_unknown(const token_list *tl, const char *const *texts, size_t n_texts, const char *where);

/* ---- which tokenizer a config names (tokenizer_spec.c) ---- */

typedef struct tokenizer_spec {
    token_type type;
    char *tokens_path;  /* ${tokenizer.save_path}/tokens.txt */
    char *model_path;   /* TOKEN_TYPE_BPE: the SentencePiece model; else NULL */
} tokenizer_spec;

/* As ESPnet's Speech2Text: token_type and bpemodel (an inference config's model.* or a training
 * config's top-level keys, NULL when absent; a bpemodel alone means bpe) take precedence over the
 * tokenizer block (model_type bpe|unigram -> bpe with <save_path>/<model_type>.model, char and
 * word as they are). cfg_file names the config in errors. */
int tokenizer_spec_resolve(tokenizer_spec *s, const tokenizer_cfg *tc, const char *token_type, const char *bpemodel,
                           const char *cfg_file, esp_err *err);
void tokenizer_spec_free(tokenizer_spec *s);
/* Name of a type as ESPnet writes it (char, word, bpe). */
const char *token_type_name(token_type t);

#endif
