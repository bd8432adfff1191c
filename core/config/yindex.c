#include "core/config/yindex.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/hash.h"
#include "core/base/log.h"

/* The slot that holds key, or the free slot where it would go. */
static size_t probe(const yindex *ix, const char *key, yindex_key_fn key_at, const void *owner)
{
    size_t mask = ix->cap - 1, i = (size_t)fnv1a64_str(key) & mask;
    while (ix->slot[i] && strcmp(key_at(owner, ix->slot[i] - 1), key) != 0) i = (i + 1) & mask;
    return i;
}

ptrdiff_t yindex_find(const yindex *ix, const char *key, yindex_key_fn key_at, const void *owner)
{
    if (!ix->cap) return -1;
    size_t i = probe(ix, key, key_at, owner);
    return ix->slot[i] ? (ptrdiff_t)(ix->slot[i] - 1) : -1;
}

static void grow_to(yindex *ix, size_t cap, yindex_key_fn key_at, const void *owner)
{
    size_t *old = ix->slot, old_cap = ix->cap;
    ix->slot = xcalloc(cap, sizeof *ix->slot);
    ix->cap = cap;
    for (size_t k = 0; k < old_cap; k++)
        if (old[k]) ix->slot[probe(ix, key_at(owner, old[k] - 1), key_at, owner)] = old[k];
    free(old);
}

void yindex_put(yindex *ix, const char *key, size_t pos, yindex_key_fn key_at, const void *owner)
{
    if ((ix->used + 1) * 2 > ix->cap) grow_to(ix, ix->cap ? ix->cap * 2 : 16, key_at, owner);
    size_t i = probe(ix, key, key_at, owner);
    if (!ix->slot[i]) ix->used++;
    ix->slot[i] = pos + 1;
}

void yindex_rebuild(yindex *ix, size_t n, yindex_key_fn key_at, const void *owner)
{
    size_t cap = 16;
    while (cap < 2 * n + 2) cap *= 2;
    free(ix->slot);
    ix->slot = xcalloc(cap, sizeof *ix->slot);
    ix->cap = cap;
    ix->used = 0;
    for (size_t p = 0; p < n; p++) yindex_put(ix, key_at(owner, p), p, key_at, owner);
}

void yindex_free(yindex *ix)
{
    free(ix->slot);
    memset(ix, 0, sizeof *ix);
}
