/* Deterministic random numbers: splitmix64 as a sequential generator and as a counter-based
 * hash, so work split across processes draws the same values as a single process would.
 *
 * The mixing functions are defined here, once, as `static inline RNG_HD`: they compile as C11
 * and as CUDA (__host__ __device__), so core/compute/kernel_math.h builds the dropout mask on the
 * GPU from the same code the CPU runs. */
#ifndef ESPNET3_RNG_H
#define ESPNET3_RNG_H

#include <stddef.h>
#include <stdint.h>

/* As core/compute/kernel_math.h's KM_HD: `static inline RNG_HD`. */
#ifdef __CUDACC__
#define RNG_HD __host__ __device__
#elif defined(__GNUC__)
#define RNG_HD __attribute__((always_inline))
#else
#define RNG_HD
#endif

/* splitmix64's Weyl increment (the golden ratio in 64 bits). */
#define RNG_GOLDEN_GAMMA 0x9e3779b97f4a7c15ULL

/* splitmix64's 64-bit finalizer (Steele, Lea, Flood 2014). */
static inline RNG_HD uint64_t rng_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* One splitmix64 step: advances *state and returns the next output. Output i (from 0) of a
 * generator started at s is rng_mix64(s + (i + 1) * RNG_GOLDEN_GAMMA). */
static inline RNG_HD uint64_t splitmix64_next(uint64_t *state)
{
    *state += RNG_GOLDEN_GAMMA;
    return rng_mix64(*state);
}

/* Counter-based seed: a well-mixed value of (seed, stream, index). Use it to give item `index`
 * of a named stream its own generator, independent of which worker handles the item. Chained
 * mixing, so triples that differ anywhere give unrelated values. */
static inline RNG_HD uint64_t rng_derive(uint64_t seed, uint64_t stream, uint64_t index)
{
    uint64_t h = rng_mix64(seed + RNG_GOLDEN_GAMMA);
    h = rng_mix64(h ^ (stream + 2 * RNG_GOLDEN_GAMMA));
    return rng_mix64(h ^ (index + 3 * RNG_GOLDEN_GAMMA));
}

typedef struct rng {
    uint64_t state;
} rng;

void rng_init(rng *r, uint64_t seed);
uint64_t rng_next(rng *r);
/* Uniform integer in [lo, hi] (inclusive, unbiased); lo <= hi. */
int64_t rng_uniform_int(rng *r, int64_t lo, int64_t hi);
/* Fisher-Yates shuffle of n elements of `size` bytes each. */
void rng_shuffle(rng *r, void *base, size_t n, size_t size);

#endif
