/* The CPU backend's buffers (core/compute/backend_cpu.c cpu_alloc): zero-filled and 64-byte aligned
 * whatever memory they reuse, huge ones (calloc, aligned by hand) on a 2 MB boundary, and the cap's
 * count of held bytes back where it was once they are freed. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "core/compute/backend.h"

static backend *cpu_open(void)
{
    esp_err err = {0};
    backend *be = backend_open(BACKEND_CPU, 0, 1, &err);
    cr_assert_not_null(be);
    return be;
}

static int all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i]) return 0;
    return 1;
}

/* Sizes below, at and past a huge page; each buffer dirtied and freed before the next of its size,
 * so that a reused block must be zeroed again. */
Test(backend_cpu_alloc, buffers_are_zeroed_and_aligned_when_memory_is_reused)
{
    backend *be = cpu_open();
    const size_t sizes[] = {1, 100, 4096, (2u << 20) - 64, 2u << 20, (2u << 20) + 1, 5u << 20, 40u << 20};
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
        for (int round = 0; round < 3; round++) {
            unsigned char *p = be->alloc(be, sizes[s]);
            cr_assert_eq((uintptr_t)p % 64, 0, "size %zu", sizes[s]);
            if (sizes[s] >= 2u << 20) cr_assert_eq((uintptr_t)p % (2u << 20), 0, "size %zu", sizes[s]);
            cr_assert(all_zero(p, sizes[s]), "size %zu round %d: not zero-filled", sizes[s], round);
            memset(p, 0xa5, sizes[s]);
            be->free(be, p);
        }
    be->free(be, NULL);
    backend_close(be);
}

Test(backend_cpu_alloc, freed_buffers_give_their_bytes_back_to_the_cap)
{
    backend *be = cpu_open();
    be->set_mem_limit(be, 64u << 20);
    size_t before = be->mem_available(be);
    void *a = be->alloc(be, 3u << 20), *b = be->alloc(be, 1000);
    cr_assert_eq(be->mem_available(be), before - (4u << 20) - 1024, "held: a huge page multiple and 64 bytes");
    be->free(be, a), be->free(be, b);
    cr_assert_eq(be->mem_available(be), before);
    backend_close(be);
}
