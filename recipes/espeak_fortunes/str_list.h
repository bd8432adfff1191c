/* A growable list of owned strings, shared by the recipe's builder, fortune reader and LM text. */
#ifndef ESPNET3_ESPEAK_FORTUNES_STR_LIST_H
#define ESPNET3_ESPEAK_FORTUNES_STR_LIST_H

#include <stdlib.h>
#include <string.h>

#include "core/base/log.h"

typedef struct str_list {
    char **v;
    size_t n, cap;
} str_list;

/* Appends s (the list owns it from now on). */
static inline void str_list_push(str_list *l, char *s)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->v = xrealloc(l->v, l->cap * sizeof *l->v);
    }
    l->v[l->n++] = s;
}

static inline void str_list_free(str_list *l)
{
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

/* qsort's comparison of two entries (strcmp order). */
static inline int str_list_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

#endif
