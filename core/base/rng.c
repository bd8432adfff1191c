#include "core/base/rng.h"
#include "core/base/log.h"

#include <stdlib.h>
#include <string.h>

/* splitmix64 (Steele, Lea, Flood 2014): a Weyl sequence passed through a 64-bit finalizer. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

#define GOLDEN_GAMMA 0x9e3779b97f4a7c15ULL

uint64_t splitmix64_next(uint64_t *state)
{
    *state += GOLDEN_GAMMA;
    return mix64(*state);
}

uint64_t rng_derive(uint64_t seed, uint64_t stream, uint64_t index)
{
    /* Chained mixing, so (seed, stream, index) triples that differ anywhere give unrelated values. */
    uint64_t h = mix64(seed + GOLDEN_GAMMA);
    h = mix64(h ^ (stream + 2 * GOLDEN_GAMMA));
    return mix64(h ^ (index + 3 * GOLDEN_GAMMA));
}

void rng_init(rng *r, uint64_t seed)
{
    r->state = seed;
}

uint64_t rng_next(rng *r)
{
    return splitmix64_next(&r->state);
}

int64_t rng_uniform_int(rng *r, int64_t lo, int64_t hi)
{
    ESP_CHECK(lo <= hi);
    uint64_t span = (uint64_t)hi - (uint64_t)lo; /* hi - lo without signed overflow */
    if (span == UINT64_MAX) return (int64_t)rng_next(r);
    uint64_t range = span + 1;
    /* Rejection sampling: drop the top partial block so every value is equally likely. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % range;
    uint64_t x;
    do {
        x = rng_next(r);
    } while (x >= limit);
    return (int64_t)((uint64_t)lo + x % range);
}

void rng_shuffle(rng *r, void *base, size_t n, size_t size)
{
    if (n < 2) return;
    unsigned char *b = base;
    unsigned char small[64];
    unsigned char *tmp = size <= sizeof small ? small : xmalloc(size);
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)rng_uniform_int(r, 0, (int64_t)i);
        if (j == i) continue;
        memcpy(tmp, b + i * size, size);
        memcpy(b + i * size, b + j * size, size);
        memcpy(b + j * size, tmp, size);
    }
    if (tmp != small) free(tmp);
}
