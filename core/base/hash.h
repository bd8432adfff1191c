/* FNV-1a 64-bit: a small, stable hash for hash tables and for signatures of inputs written to disk
 * (its values must never change: stamps and runner signatures compare them across runs). */
#ifndef ESPNET3_HASH_H
#define ESPNET3_HASH_H

#include <stddef.h>
#include <stdint.h>

#define FNV1A64_INIT 0xcbf29ce484222325ULL

/* Continues hash h over n bytes (start with FNV1A64_INIT). */
static inline uint64_t fnv1a64_bytes(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

/* Hash of a NUL-terminated string. */
static inline uint64_t fnv1a64_str(const char *s)
{
    uint64_t h = FNV1A64_INIT;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return h;
}

#endif
