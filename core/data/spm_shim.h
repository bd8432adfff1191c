/* A C interface to the SentencePiece library (Debian's libsentencepiece, C++): training a model,
 * loading one, splitting text into pieces and joining pieces back into text, with the calls ESPnet
 * makes (SentencePieceTrainer.Train, EncodeAsPieces, DecodePieces). Implemented in spm_shim.cc;
 * errors come back as SentencePiece's own message in a caller's buffer, never as exceptions. */
#ifndef ESPNET3_SPM_SHIM_H
#define ESPNET3_SPM_SHIM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What spm_train passes to SentencePieceTrainer::Train (the keys of spm_train's flags). */
typedef struct spm_train_opts {
    const char *const *sentences; /* the training text, one sentence per entry */
    size_t n_sentences;
    const char *model_path;       /* where the .model and .vocab files go (the model's trainer spec
                                   * keeps no model_prefix: the files do not depend on where they
                                   * were trained) */
    const char *vocab_path;
    const char *model_type;       /* bpe | unigram | char | word */
    long vocab_size;
    double character_coverage;
    const char *const *user_defined_symbols;
    size_t n_user_defined_symbols;
    long long input_sentence_size;
} spm_train_opts;

/* Trains and writes the model and its vocabulary (spm_train's <prefix>.vocab: piece<TAB>score
 * lines); 0, or -1 with SentencePiece's message (one line) in err, or -2 when a file could not be
 * written (the message names it). */
int spm_train(const spm_train_opts *o, char *err, size_t errlen);

typedef struct spm_model spm_model;

/* Loads a .model file; NULL with SentencePiece's message in err. */
spm_model *spm_load(const char *path, char *err, size_t errlen);
void spm_free(spm_model *m);

/* Pieces in id order (GetPieceSize, IdToPiece); the string lives as long as m. */
int spm_piece_count(const spm_model *m);
const char *spm_piece(const spm_model *m, int id);

/* EncodeAsPieces: the pieces of text (malloc'd strings in a malloc'd array) and, for each, its
 * id in the model (PieceToId; an unknown piece, whose string is the text it covers, has
 * unknown[i] = 1). Returns 0, or -1 with the message in err. Free with spm_pieces_free. */
int spm_encode(const spm_model *m, const char *text, char ***pieces, int **ids, unsigned char **unknown,
               size_t *n, char *err, size_t errlen);
void spm_pieces_free(char **pieces, int *ids, unsigned char *unknown, size_t n);

/* DecodePieces: the text of a piece sequence (malloc'd). Strings that are not pieces of the
 * model are decoded as SentencePiece decodes them (<unk> as " \u2047 ", others as written). */
char *spm_decode_pieces(const spm_model *m, const char *const *pieces, size_t n);

#ifdef __cplusplus
}
#endif

#endif
