/* core/base/parallel.c: the pool's loops cover each index once, in the split that depends only on
 * n and the part count; slots are below the part count and never shared by parts running at once;
 * a loop started inside a loop or while another thread holds the pool runs on its caller; a forked
 * child gets a working pool; parallel_items runs every item once, each thread in order. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/base/parallel.h"

enum { N = 100003, MAXP = 16 };


typedef struct cover {
    _Atomic int hits[N];
    _Atomic int slot_busy[MAXP];
    _Atomic int nranges;
    size_t lo[MAXP], hi[MAXP];
    int nested, bad_slot;
} cover;

static void inner(void *ctx, size_t lo, size_t hi, int part)
{
    (void)part;
    _Atomic int *sum = ctx;
    atomic_fetch_add(sum, (int)(hi - lo));
}

static void mark(void *ctx, size_t lo, size_t hi, int slot)
{
    cover *c = ctx;
    if (slot < 0 || slot >= MAXP || atomic_fetch_add(&c->slot_busy[slot], 1) != 0) {
        c->bad_slot = 1;
        return;
    }
    for (size_t i = lo; i < hi; i++) atomic_fetch_add(&c->hits[i], 1);
    int r = atomic_fetch_add(&c->nranges, 1);
    if (r < MAXP) c->lo[r] = lo, c->hi[r] = hi;
    atomic_fetch_sub(&c->slot_busy[slot], 1);
    if (c->nested) { /* a loop inside a loop: runs here, whole */
        _Atomic int sum = 0;
        parallel_parts(1000, 1, 4, inner, &sum);
        cr_assert_eq(atomic_load(&sum), 1000);
    }
}

static void run_cover(int threads, size_t min, int nested)
{
    cover *c = calloc(1, sizeof *c);
    c->nested = nested;
    int parts = parallel_parts_count(N, min, threads);
    parallel_parts(N, min, threads, mark, c);
    cr_assert(!c->bad_slot, "a slot out of range or shared by parts running at once");
    for (size_t i = 0; i < N; i++) cr_assert_eq(atomic_load(&c->hits[i]), 1, "index %zu", i);
    cr_assert_eq(atomic_load(&c->nranges), parts);
    for (int p = 0; p < parts; p++) { /* the ranges are the split's, in any order */
        int found = 0;
        for (int r = 0; r < parts; r++)
            found += c->lo[r] == (size_t)N * p / parts && c->hi[r] == (size_t)N * (p + 1) / parts;
        cr_assert_eq(found, 1, "part %d", p);
    }
    free(c);
}

Test(parallel, covers_each_index_once)
{
    cr_assert_eq(parallel_parts_count(N, 1, 1), 1);
    cr_assert_eq(parallel_parts_count(N, 1, 3), 3);
    cr_assert_eq(parallel_parts_count(10, 4, 8), 2);
    cr_assert_eq(parallel_parts_count(0, 4, 8), 1);
    for (int t = 1; t <= 6; t++) run_cover(t, 1, 0);
    run_cover(4, N / 3, 0); /* min per part caps the parts at 3 */
    for (int r = 0; r < 200; r++) run_cover(3, 1, 0); /* many loops in a row on the same workers */
}

/* parallel_items: every item once, on slots below the thread count (and the item count) that no two
 * items running at once share; each thread takes items in increasing order; none when n is 0. */
typedef struct items_seen {
    _Atomic int hits[N];
    _Atomic int slot_busy[MAXP];
    size_t last[MAXP]; /* per slot: the last item + 1 */
    int slots, bad_slot, out_of_order;
} items_seen;

static void see_item(void *ctx, size_t i, int slot)
{
    items_seen *c = ctx;
    if (slot < 0 || slot >= c->slots || atomic_fetch_add(&c->slot_busy[slot], 1) != 0) {
        c->bad_slot = 1;
        return;
    }
    atomic_fetch_add(&c->hits[i], 1);
    if (i + 1 <= c->last[slot]) c->out_of_order = 1;
    c->last[slot] = i + 1;
    atomic_fetch_sub(&c->slot_busy[slot], 1);
}

Test(parallel, items_each_once)
{
    size_t sizes[] = {0, 1, 2, 5, 1000};
    for (int t = 1; t <= 6; t++)
        for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
            items_seen *c = calloc(1, sizeof *c);
            size_t n = sizes[k];
            c->slots = parallel_parts_count(n, 1, t);
            parallel_items(n, t, see_item, c);
            cr_assert(!c->bad_slot, "threads %d, n %zu: a slot out of range or shared", t, n);
            cr_assert(!c->out_of_order, "threads %d, n %zu: a thread took an item before one it had", t, n);
            for (size_t i = 0; i < N; i++)
                cr_assert_eq(atomic_load(&c->hits[i]), i < n, "threads %d, n %zu, item %zu", t, n, i);
            free(c);
        }
}

Test(parallel, nested_loops_run_on_the_caller)
{
    run_cover(3, 1, 1);
}

static void *other_thread(void *arg)
{
    (void)arg;
    for (int r = 0; r < 50; r++) run_cover(2, 1, 0);
    return NULL;
}

Test(parallel, two_callers_at_once)
{
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, other_thread, NULL), 0);
    for (int r = 0; r < 50; r++) run_cover(3, 1, 0);
    pthread_join(t, NULL);
}

Test(parallel, forked_child_has_a_pool)
{
    run_cover(3, 1, 0); /* workers exist before the fork */
    pid_t pid = fork();
    if (pid == 0) {
        cover *c = calloc(1, sizeof *c);
        parallel_parts(N, 1, 3, mark, c);
        int ok = 1;
        for (size_t i = 0; i < N; i++) ok &= atomic_load(&c->hits[i]) == 1;
        _exit(ok ? 0 : 1);
    }
    cr_assert(pid > 0);
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}
