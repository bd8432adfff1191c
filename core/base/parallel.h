/* Data-parallel loops on plain pthreads: [0, n) split into contiguous ranges, one per thread, the
 * calling thread running the first. Per-element work is a few nanoseconds in the loops that use it
 * (optimizer updates, gradient reductions), so small ranges stay on the calling thread. */
#ifndef ESPNET3_BASE_PARALLEL_H
#define ESPNET3_BASE_PARALLEL_H

#include <stddef.h>

typedef void (*range_fn)(void *ctx, size_t lo, size_t hi);

/* Calls fn(ctx, lo, hi) over contiguous ranges covering [0, n) on up to `threads` threads, each
 * range at least min_per_thread long (threads <= 1 or a small n: one call on this thread). A thread
 * that cannot be started has its range run here: same results, only slower. */
void parallel_ranges(size_t n, size_t min_per_thread, int threads, range_fn fn, void *ctx);

#endif
