/* A hash index from strings to positions in an array the caller owns (the keys of a YAML mapping,
 * the anchors of a document), so that looking a key up costs O(1) instead of a scan: configs with
 * 100,000 keys load in linear time. The index stores positions only; key_at reads the string at a
 * position back from the owner. */
#ifndef ESPNET3_YINDEX_H
#define ESPNET3_YINDEX_H

#include <stddef.h>

typedef const char *(*yindex_key_fn)(const void *owner, size_t pos);

typedef struct yindex {
    size_t cap;   /* slots, a power of two (0: empty index) */
    size_t used;  /* positions stored */
    size_t *slot; /* position + 1; 0 marks a free slot */
} yindex;

/* The position stored for key, or -1. */
ptrdiff_t yindex_find(const yindex *ix, const char *key, yindex_key_fn key_at, const void *owner);
/* Stores pos for key (replacing the position of an equal key), growing the table as needed. */
void yindex_put(yindex *ix, const char *key, size_t pos, yindex_key_fn key_at, const void *owner);
/* Empties the index and rebuilds it from positions 0..n-1 (later positions win on equal keys). */
void yindex_rebuild(yindex *ix, size_t n, yindex_key_fn key_at, const void *owner);
void yindex_free(yindex *ix);

#endif
