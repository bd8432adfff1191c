/* The NCCL comm's host logic on the CPU (suite comm_id, every build): NCCL's unique id (128
 * opaque bytes) through the store between two processes with store_share_blob, the function and
 * key cuda/comm_nccl.cu uses (a fake id producer stands in for ncclGetUniqueId), the store's
 * liveness, and dist_join's answer for "nccl" in a build without CUDA.
 *
 * In a CUDA build, suite comm_nccl: two ranks (forked processes) join with dist_join(..., COMM_KIND_NCCL)
 * and run every collective on CUDA backend buffers, then a rank dies and the other's collective
 * must fail naming it. It needs two devices; with fewer it prints "skipped: no CUDA device" (or
 * how many it sees). `make CUDA=1 cuda-check` runs it on a GPU machine and on the CPU emulation
 * (scripts/cuda_emu, whose NCCL is nccl_emu.cpp and which shows two devices). */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/base/progress.h"
#include "core/compute/backend.h"
#include "core/dist/comm_nccl.h"
#include "core/dist/dist.h"
#include "test/unit/test_util.h"

/* ---- the unique id through the store ---- */

typedef struct fake_id {
    int calls;
    unsigned char seed;
} fake_id;

/* Stands in for ncclGetUniqueId: 128 bytes with zeros, 0xff and everything between (an opaque
 * blob, not a string). */
static int fake_make(void *blob, size_t n, void *ctx, esp_err *err)
{
    (void)err;
    fake_id *f = ctx;
    f->calls++;
    unsigned char *b = blob;
    for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(i * 37u + f->seed);
    b[5] = 0, b[6] = 0xff;
    return 0;
}

static int fail_make(void *blob, size_t n, void *ctx, esp_err *err)
{
    (void)blob, (void)n, (void)ctx;
    return esp_fail(err, "no id today");
}

Test(comm_id, unique_id_passes_through_the_store_between_two_processes)
{
    int port = test_free_port(), fd[2];
    cr_assert_eq(pipe(fd), 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        esp_err e;
        dist_store *s = store_open("127.0.0.1", port, 0, "run-id", 1, 2, 10, &e);
        unsigned char id[COMM_NCCL_ID_BYTES];
        fake_id f = {0, 0};
        int ok = s && store_share_blob(s, COMM_NCCL_ID_KEY, 0, fake_make, &f, id, sizeof id, "rank 0's NCCL unique id",
                                       &e) == 0 && f.calls == 0;
        if (ok && write(fd[1], id, sizeof id) != (ssize_t)sizeof id) ok = 0;
        if (s) store_barrier(s, "done", &e);
        store_close(s);
        _exit(ok ? 0 : 1);
    }
    close(fd[1]);
    esp_err err;
    dist_store *s = store_open("127.0.0.1", port, 1, "run-id", 0, 2, 10, &err);
    cr_assert_not_null(s, "%s", err.msg);
    unsigned char mine[COMM_NCCL_ID_BYTES], theirs[COMM_NCCL_ID_BYTES];
    fake_id f = {0, 11};
    cr_assert_eq(store_share_blob(s, COMM_NCCL_ID_KEY, 1, fake_make, &f, mine, sizeof mine, "x", &err), 0, "%s", err.msg);
    cr_assert_eq(f.calls, 1, "rank 0 makes the id once");
    cr_assert_eq(read(fd[0], theirs, sizeof theirs), (ssize_t)sizeof theirs);
    cr_assert_eq(store_barrier(s, "done", &err), 0, "%s", err.msg);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank 1 did not get the id");
    cr_assert_eq(memcmp(mine, theirs, sizeof mine), 0, "rank 1 got other bytes than rank 0 made");
    close(fd[0]);
    store_close(s);
}

Test(comm_id, a_missing_or_wrong_sized_id_fails_naming_it)
{
    int port = test_free_port();
    esp_err err;
    dist_store *s = store_open("127.0.0.1", port, 1, "run-id", 0, 1, 1, &err);
    cr_assert_not_null(s, "%s", err.msg);
    unsigned char id[COMM_NCCL_ID_BYTES];
    double t0 = now_seconds();
    cr_assert_eq(store_share_blob(s, COMM_NCCL_ID_KEY, 0, fake_make, NULL, id, sizeof id, "rank 0's NCCL unique id", &err),
                 -1);
    cr_assert(strstr(err.msg, "rank 0's NCCL unique id"), "%s", err.msg);
    cr_assert_lt(now_seconds() - t0, 5.0, "the wait ends at the store's timeout");
    cr_assert_eq(store_set(s, COMM_NCCL_ID_KEY, "short", 5, &err), 0);
    cr_assert_eq(store_share_blob(s, COMM_NCCL_ID_KEY, 0, fake_make, NULL, id, sizeof id, "rank 0's NCCL unique id", &err),
                 -1);
    cr_assert(strstr(err.msg, "has 5 bytes, expected 128"), "%s", err.msg);
    cr_assert_eq(store_share_blob(s, "other", 1, fail_make, NULL, id, sizeof id, "x", &err), -1);
    cr_assert_str_eq(err.msg, "no id today");
    store_close(s);
}

Test(comm_id, a_rank_whose_store_connection_ends_is_reported_dead)
{
    int port = test_free_port();
    pid_t pid = fork();
    if (pid == 0) {
        esp_err e;
        dist_store *s = store_open("127.0.0.1", port, 0, "run-live", 1, 2, 10, &e);
        if (s) store_barrier(s, "up", &e);
        _exit(s ? 0 : 1); /* dies without closing: the kernel closes the connection */
    }
    esp_err err;
    dist_store *s = store_open("127.0.0.1", port, 1, "run-live", 0, 2, 10, &err);
    cr_assert_not_null(s, "%s", err.msg);
    int dead = 7;
    cr_assert_eq(store_barrier(s, "up", &err), 0, "%s", err.msg);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    double t0 = now_seconds();
    do {
        cr_assert_eq(store_dead_rank(s, &dead, &err), 0, "%s", err.msg);
    } while (dead < 0 && now_seconds() - t0 < 5);
    cr_assert_eq(dead, 1);
    store_close(s);
}

Test(comm_id, every_rank_alive_reports_none)
{
    esp_err err;
    dist_store *s = store_open("127.0.0.1", test_free_port(), 1, "run-live", 0, 1, 5, &err);
    cr_assert_not_null(s, "%s", err.msg);
    int dead = 7;
    cr_assert_eq(store_dead_rank(s, &dead, &err), 0, "%s", err.msg);
    cr_assert_eq(dead, -1);
    store_close(s);
}

Test(comm_id, each_rank_picks_its_gpu_or_none)
{
    dist_env e = {.source = DIST_TORCHRUN, .rank = 3, .world_size = 8, .local_rank = 3, .local_world_size = 4};
    cr_assert_eq(dist_local_device(&e, 4), 3, "ranks of a node share its GPUs: local rank = device");
    cr_assert_eq(dist_local_device(&e, 8), 3);
    cr_assert_eq(dist_local_device(&e, 2), -1, "4 ranks, 2 GPUs");
    cr_assert_eq(dist_local_device(&e, 1), -1, "4 ranks our launcher started, 1 GPU");
    cr_assert_eq(dist_local_device(&e, 0), -1);
    e.source = DIST_SLURM;
    cr_assert_eq(dist_local_device(&e, 1), 0, "srun gave each task its own GPU");
    cr_assert_eq(dist_local_device(&e, 2), -1);
    e.source = DIST_PMIX;
    cr_assert_eq(dist_local_device(&e, 1), 0);
    dist_env one = {.source = DIST_NONE, .world_size = 1, .local_world_size = 1};
    cr_assert_eq(dist_local_device(&one, 1), 0);
    cr_assert_eq(dist_local_device(&one, 0), -1);
}

#ifndef ESPNET3_CUDA
Test(comm_id, nccl_in_a_build_without_cuda_is_one_clear_error)
{
    dist_env env = {.source = DIST_TORCHRUN, .rank = 0, .world_size = 2, .local_world_size = 2,
                    .master_addr = "127.0.0.1", .store_port = test_free_port()};
    dist_ctx d;
    esp_err err;
    cr_assert_eq(dist_join(&d, &env, "run", COMM_KIND_NCCL, 5, &err), -1);
    cr_assert_str_eq(err.msg, "dist: comm nccl: not available in this build (build with make CUDA=1, or use the CPU)");
}
#else
/* ---- two ranks on the NCCL comm (CUDA build) ---- */

#define N_BIG 100003 /* uneven, and several chunks of the emulation's slots */

static int fails;
#define EXPECT(cond, ...)                                                                         \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            fprintf(stderr, "comm_nccl rank %d: %s:%d: ", rank, __FILE__, __LINE__);              \
            fprintf(stderr, __VA_ARGS__);                                                         \
            fprintf(stderr, "\n");                                                                \
            fails++;                                                                              \
        }                                                                                         \
    } while (0)

static float *upload(backend *be, const float *h, size_t n)
{
    float *d = be->alloc(be, n * sizeof *d);
    be->copy(be, d, h, n * sizeof *d, BACKEND_HOST_TO_DEVICE);
    return d;
}

static void download(backend *be, float *h, const float *d, size_t n)
{
    be->synchronize(be);
    be->copy(be, h, d, n * sizeof *h, BACKEND_DEVICE_TO_HOST);
}

static float val(int r, size_t i)
{
    return (float)((i * 7 + (size_t)r * 3) % 101);
}

/* One all-reduce of n values val(r, i) with op; checks every element. */
static void check_all_reduce(comm *c, backend *be, int rank, size_t n, comm_op op, float *h)
{
    for (size_t i = 0; i < n; i++) h[i] = val(rank, i);
    float *d = upload(be, h, n);
    esp_err err;
    EXPECT(comm_all_reduce(c, d, n, op, &err) == 0, "all_reduce: %s", err.msg);
    download(be, h, d, n);
    for (size_t i = 0; i < n; i++) {
        float a = val(0, i), b = val(1, i);
        float want = op == COMM_SUM ? a + b : op == COMM_AVG ? (a + b) / 2 : op == COMM_MIN ? (a < b ? a : b) : (a > b ? a : b);
        if (h[i] != want) {
            EXPECT(0, "all_reduce op %d n %zu: [%zu] = %g, want %g", (int)op, n, i, h[i], want);
            break;
        }
    }
    be->free(be, d);
}

static void check_sharded(comm *c, backend *be, int rank, size_t n, float *h)
{
    esp_err err;
    for (size_t i = 0; i < n; i++) h[i] = val(rank, i);
    float *d = upload(be, h, n);
    EXPECT(comm_reduce_scatter(c, d, n, COMM_SUM, &err) == 0, "reduce_scatter: %s", err.msg);
    download(be, h, d, n);
    size_t b, e;
    comm_chunk(n, 2, rank, &b, &e);
    for (size_t i = b; i < e; i++)
        if (h[i] != val(0, i) + val(1, i)) {
            EXPECT(0, "reduce_scatter n %zu: [%zu] = %g", n, i, h[i]);
            break;
        }
    /* all_gather: chunk r of rank r everywhere */
    for (size_t i = 0; i < n; i++) h[i] = -1;
    for (size_t i = b; i < e; i++) h[i] = val(rank, i) + 1000;
    be->copy(be, d, h, n * sizeof *h, BACKEND_HOST_TO_DEVICE);
    EXPECT(comm_all_gather(c, d, n, &err) == 0, "all_gather: %s", err.msg);
    download(be, h, d, n);
    for (int r = 0; r < 2; r++) {
        comm_chunk(n, 2, r, &b, &e);
        for (size_t i = b; i < e; i++)
            if (h[i] != val(r, i) + 1000) {
                EXPECT(0, "all_gather n %zu: [%zu] = %g, want rank %d's", n, i, h[i], r);
                break;
            }
    }
    be->free(be, d);
}

static dist_env env_for(int rank, int port)
{
    dist_env env = {.source = DIST_TORCHRUN, .rank = rank, .world_size = 2, .local_rank = rank,
                    .local_world_size = 2, .master_addr = "127.0.0.1", .master_port = port, .store_port = port};
    return env;
}

static int rank_main(int rank, int port)
{
    dist_env env = env_for(rank, port);
    dist_ctx d;
    esp_err err;
    if (dist_join(&d, &env, "nccl-two", COMM_KIND_NCCL, 30, &err) != 0) {
        fprintf(stderr, "comm_nccl rank %d: dist_join: %s\n", rank, err.msg);
        return 1;
    }
    EXPECT(!strcmp(d.comm->name, "nccl"), "comm %s", d.comm->name);
    backend *be = backend_open(BACKEND_CUDA, rank, 1, &err);
    if (!be) {
        fprintf(stderr, "comm_nccl rank %d: backend: %s\n", rank, err.msg);
        return 1;
    }
    comm_attach(d.comm, be);
    float *h = malloc(N_BIG * sizeof *h);
    check_all_reduce(d.comm, be, rank, N_BIG, COMM_SUM, h);
    comm_op ops[] = {COMM_AVG, COMM_MIN, COMM_MAX};
    for (int k = 0; k < 3; k++) check_all_reduce(d.comm, be, rank, 1001, ops[k], h);
    check_sharded(d.comm, be, rank, 1001, h);  /* unequal chunks */
    check_sharded(d.comm, be, rank, 1000, h);  /* equal chunks */
    /* broadcast of bytes from rank 1 */
    char msg[64] = "", want[64] = "rank one says hello";
    if (rank == 1) memcpy(msg, want, sizeof msg);
    float *db = upload(be, (float *)msg, sizeof msg / sizeof(float));
    EXPECT(comm_broadcast(d.comm, db, sizeof msg, 1, &err) == 0, "broadcast: %s", err.msg);
    download(be, (float *)msg, db, sizeof msg / sizeof(float));
    EXPECT(!strcmp(msg, want), "broadcast got '%s'", msg);
    be->free(be, db);
    EXPECT(comm_barrier(d.comm, &err) == 0, "barrier: %s", err.msg);
    /* gradient buckets: started one by one, waited for once */
    for (size_t i = 0; i < N_BIG; i++) h[i] = val(rank, i);
    float *g = upload(be, h, N_BIG);
    size_t bucket = 30000;
    for (size_t off = 0; off < N_BIG; off += bucket) {
        size_t len = N_BIG - off < bucket ? N_BIG - off : bucket;
        EXPECT(comm_all_reduce_start(d.comm, g + off, len, COMM_AVG, &err) == 0, "start: %s", err.msg);
    }
    EXPECT(comm_wait(d.comm, &err) == 0, "wait: %s", err.msg);
    EXPECT(comm_wait(d.comm, &err) == 0, "a second wait: %s", err.msg);
    download(be, h, g, N_BIG);
    for (size_t i = 0; i < N_BIG; i++)
        if (h[i] != (val(0, i) + val(1, i)) / 2) {
            EXPECT(0, "bucket all_reduce: [%zu] = %g", i, h[i]);
            break;
        }
    be->free(be, g);
    free(h);
    comm_attach(d.comm, NULL);
    backend_close(be);
    EXPECT(comm_barrier(d.comm, &err) == 0, "barrier after the backend closed: %s", err.msg);
    EXPECT(dist_leave(&d, &err) == 0, "leave: %s", err.msg);
    return fails ? 1 : 0;
}

/* Whether two ranks can run here; prints the skip line when not. */
static int two_devices(void)
{
    int n = backend_cuda_devices();
    if (n >= 2) return 1;
    if (n == 0) fprintf(stderr, "comm_nccl: skipped: no CUDA device\n");
    else fprintf(stderr, "comm_nccl: skipped: the 2-rank NCCL check needs 2 CUDA devices, %d visible\n", n);
    return 0;
}

static void run_two(int (*body)(int rank, int port), int *status)
{
    int port = test_free_port();
    pid_t pids[2];
    for (int r = 0; r < 2; r++) {
        fflush(NULL);
        pids[r] = fork();
        if (pids[r] == 0) _exit(body(r, port));
    }
    for (int r = 0; r < 2; r++) {
        int st = 0;
        cr_assert_eq(waitpid(pids[r], &st, 0), pids[r]);
        status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
}

Test(comm_nccl, two_ranks_every_collective, .timeout = 120)
{
    if (!two_devices()) cr_skip_test("no 2 CUDA devices");
    int st[2];
    run_two(rank_main, st);
    cr_assert(st[0] == 0 && st[1] == 0, "rank 0 exit %d, rank 1 exit %d (their lines above)", st[0], st[1]);
}

/* Rank 1 dies after the setup; rank 0's next all-reduce must fail naming it, within the timeout. */
static int dead_main(int rank, int port)
{
    dist_env env = env_for(rank, port);
    dist_ctx d;
    esp_err err;
    if (dist_join(&d, &env, "nccl-dead", COMM_KIND_NCCL, 8, &err) != 0) {
        fprintf(stderr, "comm_nccl rank %d: dist_join: %s\n", rank, err.msg);
        return 1;
    }
    if (comm_barrier(d.comm, &err) != 0) return 1;
    if (rank == 1) _exit(0); /* dies: no leave, no goodbye */
    backend *be = backend_open(BACKEND_CUDA, rank, 1, &err);
    if (!be) return 1;
    comm_attach(d.comm, be);
    float *g = be->alloc(be, 1000 * sizeof(float));
    double t0 = now_seconds();
    int rc = comm_all_reduce(d.comm, g, 1000, COMM_SUM, &err);
    double took = now_seconds() - t0;
    if (rc == 0) fprintf(stderr, "comm_nccl rank 0: the all-reduce with a dead rank 1 succeeded\n");
    else if (!strstr(err.msg, "rank 1")) fprintf(stderr, "comm_nccl rank 0: the error does not name rank 1: %s\n", err.msg);
    else if (took > 8 + 2) fprintf(stderr, "comm_nccl rank 0: failing took %.1f s (timeout 8 s)\n", took);
    else fprintf(stderr, "comm_nccl rank 0: as expected after %.1f s: %s\n", took, err.msg);
    int ok = rc != 0 && strstr(err.msg, "rank 1") && took <= 10;
    /* The communicator is aborted: later calls fail at once, and closing works. */
    if (ok && comm_all_reduce(d.comm, g, 1000, COMM_SUM, &err) == 0) ok = 0;
    be->free(be, g);
    comm_attach(d.comm, NULL);
    backend_close(be);
    dist_abort(&d);
    return ok ? 0 : 1;
}

Test(comm_nccl, a_dead_rank_ends_the_other_within_the_timeout, .timeout = 120)
{
    if (!two_devices()) cr_skip_test("no 2 CUDA devices");
    int st[2];
    run_two(dead_main, st);
    cr_assert_eq(st[0], 0, "rank 0 (its line above)");
}
#endif
