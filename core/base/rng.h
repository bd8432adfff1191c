/* Deterministic random numbers: splitmix64 as a sequential generator and as a counter-based
 * hash, so work split across processes draws the same values as a single process would. */
#ifndef ESPNET3_RNG_H
#define ESPNET3_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct rng {
    uint64_t state;
} rng;

/* One splitmix64 step: advances *state and returns the next output. */
uint64_t splitmix64_next(uint64_t *state);

/* Counter-based seed: a well-mixed value of (seed, stream, index). Use it to give item `index`
 * of a named stream its own generator, independent of which worker handles the item. */
uint64_t rng_derive(uint64_t seed, uint64_t stream, uint64_t index);

void rng_init(rng *r, uint64_t seed);
uint64_t rng_next(rng *r);
/* Uniform integer in [lo, hi] (inclusive, unbiased); lo <= hi. */
int64_t rng_uniform_int(rng *r, int64_t lo, int64_t hi);
/* Fisher-Yates shuffle of n elements of `size` bytes each. */
void rng_shuffle(rng *r, void *base, size_t n, size_t size);

#endif
