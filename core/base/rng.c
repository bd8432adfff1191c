/* The sequential generator and its helpers, on the splitmix64 of core/base/rng.h. */
#include "core/base/rng.h"
#include "core/base/log.h"

#include <stdlib.h>
#include <string.h>

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
