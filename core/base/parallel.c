#include "core/base/parallel.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
#define CPU_RELAX() __builtin_ia32_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

enum {
    MAX_THREADS = 256,
    /* Pause iterations a worker waits for the next loop before it sleeps (~10-30 us): loops that
     * follow each other closely (the elementwise passes of a step) find it awake, and between them
     * it leaves the core to OpenBLAS' threads. */
    WORKER_SPIN = 1000,
    GEN_PARTS_BITS = 16,
};

/* The pool: workers 1 .. started - 1; the caller is slot 0. A loop is published by bumping `gen`,
 * whose low 16 bits hold its part count. Parts are claimed one at a time from `claim` (the loop's
 * generation in the high 32 bits, the next part in the low 32) by the caller and by the workers
 * whose slot is below the part count, so a worker that is asleep or descheduled never holds the
 * caller up: the caller runs what nobody claimed and waits only for parts already running. A
 * worker reads the loop's fields only after it claimed a part of that generation, and the caller
 * does not return before every part is done, so the fields cannot change under it. */
static struct {
    pthread_mutex_t busy; /* held by the loop running on the pool */
    pthread_mutex_t lock; /* guards the sleep / wake-up of workers */
    pthread_cond_t wake;
    int started; /* threads (the caller included) the pool can run: workers + 1 */
    _Atomic unsigned long gen;
    _Atomic uint64_t claim;
    _Atomic int done;
    /* the current loop, written before gen is bumped */
    part_fn fn;
    void *ctx;
    size_t n;
    int atfork;
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 1, 0, 0, 0, 0, 0, 0, 0};

static unsigned long start_gen[MAX_THREADS];

static void run_part(part_fn fn, void *ctx, size_t n, int parts, int i, int slot)
{
    size_t lo = n * (size_t)i / (size_t)parts, hi = n * (size_t)(i + 1) / (size_t)parts;
    fn(ctx, lo, hi, slot);
}

/* Claims and runs parts of loop generation g (parts of them) on `slot` until none is left. */
static void run_claims(unsigned long g, int parts, int slot)
{
    uint64_t tag = (uint64_t)(g >> GEN_PARTS_BITS) & 0xffffffffu;
    for (;;) {
        uint64_t c = atomic_load_explicit(&pool.claim, memory_order_acquire);
        if (c >> 32 != tag || (int)(c & 0xffffffffu) >= parts) return;
        if (!atomic_compare_exchange_weak_explicit(&pool.claim, &c, c + 1, memory_order_acq_rel,
                                                   memory_order_relaxed))
            continue;
        run_part(pool.fn, pool.ctx, pool.n, parts, (int)(c & 0xffffffffu), slot);
        atomic_fetch_add_explicit(&pool.done, 1, memory_order_release);
    }
}

static void *worker_main(void *arg)
{
    int me = (int)(size_t)arg;
    unsigned long seen = start_gen[me]; /* the loop before the one it was started for */
    for (;;) {
        unsigned long g;
        int spin = 0;
        while ((g = atomic_load_explicit(&pool.gen, memory_order_acquire)) == seen && spin < WORKER_SPIN) {
            CPU_RELAX();
            spin++;
        }
        if (g == seen) {
            pthread_mutex_lock(&pool.lock);
            while ((g = atomic_load(&pool.gen)) == seen) pthread_cond_wait(&pool.wake, &pool.lock);
            pthread_mutex_unlock(&pool.lock);
        }
        seen = g;
        int parts = (int)(g & ((1ul << GEN_PARTS_BITS) - 1));
        if (me < parts) run_claims(g, parts, me);
    }
    return NULL;
}

/* In a forked child the workers are gone: start over with none (and locks that no one holds). */
static void after_fork_child(void)
{
    pthread_mutex_init(&pool.busy, NULL);
    pthread_mutex_init(&pool.lock, NULL);
    pthread_cond_init(&pool.wake, NULL);
    pool.started = 1;
}

/* Starts workers until the pool runs `want` threads (the busy lock held); fewer if one cannot be
 * started. */
static void grow(int want)
{
    if (!pool.atfork) {
        pthread_atfork(NULL, NULL, after_fork_child);
        pool.atfork = 1;
    }
    while (pool.started < want) {
        pthread_t tid;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        start_gen[pool.started] = atomic_load(&pool.gen);
        int ok = pthread_create(&tid, &attr, worker_main, (void *)(size_t)pool.started) == 0;
        pthread_attr_destroy(&attr);
        if (!ok) break;
        pool.started++;
    }
}

int parallel_parts_count(size_t n, size_t min_per_thread, int threads)
{
    size_t t = threads < 1 ? 1 : (size_t)threads;
    if (t > MAX_THREADS) t = MAX_THREADS;
    if (min_per_thread < 1) min_per_thread = 1;
    if (t > n / min_per_thread) t = n / min_per_thread;
    return t < 1 ? 1 : (int)t;
}

void parallel_parts(size_t n, size_t min_per_thread, int threads, part_fn fn, void *ctx)
{
    int t = parallel_parts_count(n, min_per_thread, threads);
    if (t <= 1 || pthread_mutex_trylock(&pool.busy) != 0) {
        /* serial: the same parts, one after the other */
        for (int i = 0; i < t; i++) run_part(fn, ctx, n, t, i, 0);
        return;
    }
    grow(t);
    pool.fn = fn, pool.ctx = ctx, pool.n = n;
    atomic_store(&pool.done, 0);
    unsigned long g = ((atomic_load(&pool.gen) >> GEN_PARTS_BITS) + 1) << GEN_PARTS_BITS | (unsigned long)t;
    atomic_store(&pool.claim, ((uint64_t)(g >> GEN_PARTS_BITS) & 0xffffffffu) << 32);
    pthread_mutex_lock(&pool.lock);
    atomic_store(&pool.gen, g);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
    run_claims(g, t, 0);
    /* every part is claimed: wait for the ones other threads are running */
    for (int spin = 0; atomic_load_explicit(&pool.done, memory_order_acquire) < t; spin++) {
        if (spin < 4000)
            CPU_RELAX();
        else
            sched_yield();
    }
    pthread_mutex_unlock(&pool.busy);
}

typedef struct ranges_ctx {
    range_fn fn;
    void *ctx;
} ranges_ctx;

static void ranges_part(void *ctx, size_t lo, size_t hi, int slot)
{
    (void)slot;
    ranges_ctx *r = ctx;
    r->fn(r->ctx, lo, hi);
}

void parallel_ranges(size_t n, size_t min_per_thread, int threads, range_fn fn, void *ctx)
{
    ranges_ctx r = {fn, ctx};
    parallel_parts(n, min_per_thread, threads, ranges_part, &r);
}

typedef struct items_ctx {
    item_fn fn;
    void *ctx;
    size_t n;
    _Atomic size_t next;
} items_ctx;

static void items_part(void *ctx, size_t lo, size_t hi, int slot)
{
    (void)lo, (void)hi;
    items_ctx *c = ctx;
    for (size_t i; (i = atomic_fetch_add_explicit(&c->next, 1, memory_order_relaxed)) < c->n;) c->fn(c->ctx, i, slot);
}

void parallel_items(size_t n, int threads, item_fn fn, void *ctx)
{
    items_ctx c = {fn, ctx, n, 0};
    int t = parallel_parts_count(n, 1, threads);
    parallel_parts((size_t)t, 1, t, items_part, &c);
}
