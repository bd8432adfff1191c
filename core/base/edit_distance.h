/* Levenshtein distance with unit costs (insertion, deletion, substitution): the one
 * implementation behind validation CER/WER (core/decode/ctc_decode.c) and the "did you mean"
 * suggestions of configs and options. sclite's weighted alignment (core/decode/score.c) is a
 * different computation and stays there. */
#ifndef ESPNET3_EDIT_DISTANCE_H
#define ESPNET3_EDIT_DISTANCE_H

#include <stddef.h>

/* Distance between two sequences of integer symbols (ids, code points). */
size_t edit_distance(const int *a, size_t na, const int *b, size_t nb);

/* Distance between the bytes of two strings. */
int str_edit_distance(const char *a, const char *b);

#endif
