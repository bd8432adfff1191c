#include "core/base/parallel.h"

#include <pthread.h>

enum { MAX_THREADS = 256 };

typedef struct range_job {
    range_fn fn;
    void *ctx;
    size_t lo, hi;
} range_job;

static void *range_main(void *arg)
{
    range_job *j = arg;
    j->fn(j->ctx, j->lo, j->hi);
    return NULL;
}

void parallel_ranges(size_t n, size_t min_per_thread, int threads, range_fn fn, void *ctx)
{
    size_t t = threads < 1 ? 1 : (size_t)threads;
    if (t > MAX_THREADS) t = MAX_THREADS;
    if (min_per_thread < 1) min_per_thread = 1;
    if (t > n / min_per_thread) t = n / min_per_thread;
    if (t <= 1) {
        fn(ctx, 0, n);
        return;
    }
    range_job jobs[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    for (size_t i = 0; i < t; i++) jobs[i] = (range_job){fn, ctx, n * i / t, n * (i + 1) / t};
    size_t started = 1;
    for (; started < t; started++)
        if (pthread_create(&tid[started], NULL, range_main, &jobs[started]) != 0) break;
    range_main(&jobs[0]);
    for (size_t i = started; i < t; i++) range_main(&jobs[i]);
    for (size_t i = 1; i < started; i++) pthread_join(tid[i], NULL);
}
