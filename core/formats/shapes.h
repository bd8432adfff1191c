/* ESPnet shape files: one utterance a line, "uid d1,d2,..." (feats_shape "uid T,80",
 * text_shape.char "uid L,V"), the first number being the length the samplers sort by.
 * Read as ESPnet2's load_num_sequence_text(..., "csv_int"): a blank line, a line with one column,
 * a duplicated uid or a value that is not a comma-separated list of integers is an error naming
 * file:line; a file without utterances is an error naming the file. */
#ifndef ESPNET3_SHAPES_H
#define ESPNET3_SHAPES_H

#include <stddef.h>
#include <stdint.h>
#include "core/base/log.h"

typedef struct shape_table {
    char *path;        /* for error messages */
    size_t n;          /* utterances, in file order */
    char **keys;       /* [n] */
    size_t *line;      /* [n] 1-based line of each utterance */
    /* Row i holds ndim[i] values at dims + off[i]. Key-only tables (the unsorted sampler's key
     * file, whose second column may be anything) have dims, off and ndim NULL. */
    int64_t *dims;
    size_t *off;
    unsigned *ndim;
    size_t *by_key;    /* [n] rows sorted by key (byte order), for shape_table_find */
} shape_table;

/* Parses a shape file's text (len bytes; NUL inside is an error). keys_only keeps the first
 * column and only checks that a second one exists, as ESPnet2's read_2column_text. */
int shape_table_parse(shape_table *t, const char *path, const char *text, size_t len, int keys_only,
                      esp_err *err);
int shape_table_read(shape_table *t, const char *path, int keys_only, esp_err *err);
void shape_table_free(shape_table *t);

/* Row of `key`, or -1. O(log n). */
ptrdiff_t shape_table_find(const shape_table *t, const char *key);

/* The first number of row i (the length). */
static inline int64_t shape_length(const shape_table *t, size_t i) { return t->dims[t->off[i]]; }

/* Rows keys_from->keys[begin..end) of `in`, in that order, into a new table (path copied). A key
 * missing from `in` is an error. With in == keys_from this is a plain slice. */
int shape_table_slice(shape_table *out, const shape_table *in, const shape_table *keys_from, size_t begin,
                      size_t end, esp_err *err);

#endif
