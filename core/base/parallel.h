/* Data-parallel loops on a persistent pool of plain pthreads: [0, n) split into contiguous ranges
 * (parts, at most one per thread), run by the calling thread and the pool's workers. The split
 * depends on n and the number of parts only, and callers give each element of an output to exactly one range, so results never
 * depend on how many threads ran (a loop that reduces splits by output element, or into a fixed
 * number of blocks that does not depend on the thread count).
 *
 * The pool's workers are started on the first call that wants them and kept: a call costs a wake-up
 * (the workers spin a few microseconds after a loop, then sleep), not a thread creation. Parts are
 * claimed one at a time by whichever thread is free, the caller included, so a worker that is
 * asleep or descheduled (a busy machine) delays a loop by at most the part it is running. One loop
 * runs on the pool at a time: a call made while it is busy (from another thread, or from inside a
 * loop) runs its parts on the calling thread, with the same results. After fork() the child starts
 * with no workers. */
#ifndef ESPNET3_BASE_PARALLEL_H
#define ESPNET3_BASE_PARALLEL_H

#include <stddef.h>

typedef void (*range_fn)(void *ctx, size_t lo, size_t hi);
/* One part of a loop: [lo, hi) and the slot of the thread running it (0 .. parts - 1; parts that run
 * at the same time have different slots: an index for per-thread scratch, which a part must not
 * expect to find as another part left it). */
typedef void (*part_fn)(void *ctx, size_t lo, size_t hi, int slot);

/* Calls fn(ctx, lo, hi) over contiguous ranges covering [0, n) on up to `threads` threads, each
 * range at least min_per_thread long (threads <= 1 or a small n: one call on this thread). */
void parallel_ranges(size_t n, size_t min_per_thread, int threads, range_fn fn, void *ctx);

/* The same with the slot; the parts are the ranges of parallel_parts_count(...) parts. */
void parallel_parts(size_t n, size_t min_per_thread, int threads, part_fn fn, void *ctx);

/* One item of parallel_items: i and the slot of the thread running it (as part_fn's). */
typedef void (*item_fn)(void *ctx, size_t i, int slot);

/* Calls fn(ctx, i, slot) for every i in [0, n) on up to `threads` threads, the items handed out
 * one at a time, in order, to whichever thread is free: for items of uneven cost (or a thread the
 * machine slows down), the loop ends when the last item does rather than when the slowest fixed
 * share does. Results do not depend on the thread count when each item writes its own outputs. */
void parallel_items(size_t n, int threads, item_fn fn, void *ctx);

/* How many parts parallel_parts(n, min_per_thread, threads, ...) uses at most (>= 1). */
int parallel_parts_count(size_t n, size_t min_per_thread, int threads);

#endif
