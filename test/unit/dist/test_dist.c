/* Distributed building blocks: launcher detection from synthetic environments, SLURM host lists,
 * the rendezvous store (run id and rank checks, timeouts that name the rank) and the CPU
 * collectives between forked processes over shared memory, TCP and both. */
#include <criterion/criterion.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/dist/comm.h"
#include "core/dist/dist_env.h"
#include "core/dist/dist_store.h"
#include "test/unit/test_util.h"

/* ---- synthetic environments ------------------------------------------------------------------- */

static const char *fake_get(void *ctx, const char *name)
{
    for (const char **kv = ctx; *kv; kv += 2)
        if (!strcmp(kv[0], name)) return kv[1];
    return NULL;
}

static dist_env detect_ok(const char **env)
{
    dist_env d;
    esp_err err;
    cr_assert_eq(dist_env_detect(&d, fake_get, env, 1, &err), 0, "%s", err.msg);
    return d;
}

static void detect_fails(const char **env, const char *needle)
{
    dist_env d;
    esp_err err;
    cr_assert_eq(dist_env_detect(&d, fake_get, env, 1, &err), -1);
    cr_assert(strstr(err.msg, needle), "%s", err.msg);
}

Test(dist_env, plain_process_is_rank_0_of_1)
{
    const char *env[] = {"HOME", "/root", NULL};
    dist_env d = detect_ok(env);
    cr_assert_eq(d.source, DIST_NONE);
    cr_assert_eq(d.rank, 0);
    cr_assert_eq(d.world_size, 1);
}

Test(dist_env, torchrun_variables)
{
    const char *env[] = {"RANK", "3", "WORLD_SIZE", "4", "LOCAL_RANK", "1", "LOCAL_WORLD_SIZE", "2", "GROUP_RANK", "1",
                         "MASTER_ADDR", "10.0.0.1", "MASTER_PORT", "29500", NULL};
    dist_env d = detect_ok(env);
    cr_assert_eq(d.source, DIST_TORCHRUN);
    cr_assert_eq(d.rank, 3);
    cr_assert_eq(d.world_size, 4);
    cr_assert_eq(d.local_rank, 1);
    cr_assert_eq(d.local_world_size, 2);
    cr_assert_eq(d.node_rank, 1);
    cr_assert_str_eq(d.master_addr, "10.0.0.1");
    cr_assert_eq(d.store_port, 29500, "no torchrun agent: our store takes MASTER_PORT");
}

Test(dist_env, real_torchrun_agent_keeps_master_port_and_we_take_the_next)
{
    const char *env[] = {"RANK", "0", "WORLD_SIZE", "2", "LOCAL_RANK", "0", "LOCAL_WORLD_SIZE", "2", "MASTER_ADDR",
                         "127.0.0.1", "MASTER_PORT", "29500", "TORCHELASTIC_RUN_ID", "none", NULL};
    dist_env d = detect_ok(env);
    cr_assert_eq(d.master_port, 29500);
    cr_assert_eq(d.store_port, 29501);
    cr_assert_eq(d.node_rank, 0, "node rank derived from RANK / LOCAL_WORLD_SIZE");
    cr_assert_str_eq(d.run_id, "", "torchrun's default run id 'none' says nothing");
}

Test(dist_env, torchrun_variables_take_precedence_over_slurm)
{
    const char *env[] = {"SLURM_PROCID", "1", "SLURM_NTASKS", "2", "SLURM_STEP_NUM_TASKS", "2", "SLURM_JOB_NODELIST",
                         "n[1-2]", "RANK", "0", "WORLD_SIZE", "1", "MASTER_ADDR", "h", "MASTER_PORT", "1234", NULL};
    dist_env d = detect_ok(env);
    cr_assert_eq(d.source, DIST_TORCHRUN);
    cr_assert_eq(d.rank, 0);
}

Test(dist_env, torchrun_errors_name_the_variables)
{
    const char *a[] = {"RANK", "2", "WORLD_SIZE", "2", "MASTER_ADDR", "h", "MASTER_PORT", "1", NULL};
    detect_fails(a, "RANK=2 must be below WORLD_SIZE=2");
    const char *b[] = {"RANK", "0", "WORLD_SIZE", "2", "MASTER_PORT", "1", NULL};
    detect_fails(b, "MASTER_ADDR is not");
    const char *c[] = {"RANK", "x", "WORLD_SIZE", "2", NULL};
    detect_fails(c, "RANK=x: expected a non-negative integer");
    const char *d[] = {"RANK", "0", NULL};
    detect_fails(d, "WORLD_SIZE is not");
}

Test(dist_env, srun_step_variables)
{
    const char *env[] = {"SLURM_JOB_ID", "123456", "SLURM_STEP_ID", "0", "SLURM_PROCID", "3", "SLURM_NTASKS", "4",
                         "SLURM_STEP_NUM_TASKS", "4", "SLURM_LOCALID", "1", "SLURM_NODEID", "1",
                         "SLURM_STEP_TASKS_PER_NODE", "2(x2)", "SLURM_STEP_NODELIST", "gpu[07-08]", NULL};
    dist_env d = detect_ok(env);
    cr_assert_eq(d.source, DIST_SLURM);
    cr_assert_eq(d.rank, 3);
    cr_assert_eq(d.world_size, 4);
    cr_assert_eq(d.local_rank, 1);
    cr_assert_eq(d.local_world_size, 2);
    cr_assert_eq(d.node_rank, 1);
    cr_assert_str_eq(d.master_addr, "gpu07");
    cr_assert_eq(d.master_port, 15000 + 3456, "Lightning's port: 15000 + last 4 digits of the job id");
    cr_assert_str_eq(d.run_id, "slurm-123456.0");
}

Test(dist_env, sbatch_shell_is_not_a_step)
{
    /* The batch script has SLURM_PROCID and SLURM_NTASKS but no step task count. */
    const char *env[] = {"SLURM_JOB_ID", "77", "SLURM_PROCID", "0", "SLURM_NTASKS", "2", "SLURM_LOCALID", "0",
                         "SLURM_NODEID", "0", "SLURM_JOB_NODELIST", "n1", NULL};
    dist_env d = detect_ok(env);
    cr_assert_eq(d.source, DIST_NONE);
    cr_assert_eq(d.world_size, 1);
}

Test(dist_env, slurm_master_addr_and_port_overrides)
{
    const char *env[] = {"SLURM_JOB_ID", "5", "SLURM_PROCID", "0", "SLURM_STEP_NUM_TASKS", "2", "SLURM_LOCALID", "0",
                         "SLURM_NODEID", "0", "SLURM_JOB_NODELIST", "a,b", "MASTER_PORT", "4000", NULL};
    dist_env d = detect_ok(env);
    cr_assert_str_eq(d.master_addr, "a", "the job list when the step list is absent");
    cr_assert_eq(d.master_port, 4000);
    const char *bad[] = {"SLURM_PROCID", "2", "SLURM_STEP_NUM_TASKS", "2", "SLURM_JOB_NODELIST", "a", NULL};
    detect_fails(bad, "SLURM_PROCID=2 must be below SLURM_NTASKS=2");
}

static void expands_to(const char *list, const char *want)
{
    char **h;
    size_t n;
    esp_err err;
    cr_assert_eq(slurm_hostlist_expand(list, &h, &n, &err), 0, "%s", err.msg);
    char got[512] = "";
    for (size_t i = 0; i < n; i++) {
        strcat(got, i ? " " : "");
        strcat(got, h[i]);
        free(h[i]);
    }
    cr_assert_null(h[n]);
    free(h);
    cr_assert_str_eq(got, want, "%s", list);
}

Test(dist_env, slurm_hostlists)
{
    expands_to("n1", "n1");
    expands_to("n[1-2]", "n1 n2");
    expands_to("a[01-03,7],b", "a01 a02 a03 a7 b");
    expands_to("r[1-2]-n[8-9]", "r1-n8 r1-n9 r2-n8 r2-n9");
    expands_to("x,y[009-011]", "x y009 y010 y011");
    char **h;
    size_t n;
    esp_err err;
    cr_assert_eq(slurm_hostlist_expand("n[1-", &h, &n, &err), -1);
    cr_assert(strstr(err.msg, "unbalanced"), "%s", err.msg);
    cr_assert_eq(slurm_hostlist_expand("n[3-1]", &h, &n, &err), -1);
    cr_assert(strstr(err.msg, "bad range '3-1'"), "%s", err.msg);
}

/* ---- the store -------------------------------------------------------------------------------- */

Test(dist_store, set_get_add_and_barrier_between_processes)
{
    int port = test_free_port();
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        esp_err e;
        dist_store *s = store_open("127.0.0.1", port, 0, "run-a", 1, 2, 10, &e);
        char *v = NULL;
        int64_t n;
        int ok = s && store_set(s, "from1", "hello", 5, &e) == 0 && store_get(s, "from0", "rank 0", &v, NULL, &e) == 0 &&
                 !strcmp(v, "world") && store_add(s, "count", 5, &n, &e) == 0 && store_barrier(s, "end", &e) == 0;
        free(v);
        store_close(s);
        _exit(ok ? 0 : 1);
    }
    esp_err err;
    dist_store *s = store_open("127.0.0.1", port, 1, "run-a", 0, 2, 10, &err);
    cr_assert_not_null(s, "%s", err.msg);
    char *v = NULL;
    size_t n;
    cr_assert_eq(store_get(s, "from1", "rank 1", &v, &n, &err), 0, "%s", err.msg);
    cr_assert_str_eq(v, "hello");
    cr_assert_eq(n, 5);
    free(v);
    cr_assert_eq(store_set(s, "from0", "world", 5, &err), 0);
    cr_assert_eq(store_barrier(s, "end", &err), 0, "%s", err.msg);
    int64_t total;
    cr_assert_eq(store_add(s, "count", 2, &total, &err), 0);
    cr_assert_eq(total, 7);
    int st;
    waitpid(pid, &st, 0);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    store_close(s);
}

Test(dist_store, another_runs_rank_and_a_duplicate_rank_are_refused)
{
    int port = test_free_port();
    esp_err err;
    dist_store *s = store_open("127.0.0.1", port, 1, "run-a", 0, 2, 5, &err);
    cr_assert_not_null(s, "%s", err.msg);
    cr_assert_null(store_open("127.0.0.1", port, 0, "run-b", 1, 2, 5, &err));
    cr_assert(strstr(err.msg, "refused rank 1: this store belongs to run 'run-a', not 'run-b'"), "%s", err.msg);
    cr_assert_null(store_open("127.0.0.1", port, 0, "run-a", 1, 3, 5, &err));
    cr_assert(strstr(err.msg, "world size 3 differs from rank 0's 2"), "%s", err.msg);
    cr_assert_null(store_open("127.0.0.1", port, 0, "run-a", 0, 2, 5, &err));
    cr_assert(strstr(err.msg, "rank 0 already joined"), "%s", err.msg);
    /* A second server on the same port is a clear error too. */
    cr_assert_null(store_open("127.0.0.1", port, 1, "run-a", 0, 2, 5, &err));
    cr_assert(strstr(err.msg, "cannot listen on port"), "%s", err.msg);
    store_close(s);
}

Test(dist_store, waits_time_out_naming_the_missing_rank)
{
    int port = test_free_port();
    esp_err err;
    dist_store *s = store_open("127.0.0.1", port, 1, "run-t", 0, 3, 1, &err);
    cr_assert_not_null(s, "%s", err.msg);
    char *v = NULL;
    cr_assert_eq(store_get(s, "addr/2", "rank 2's address", &v, NULL, &err), -1);
    cr_assert(strstr(err.msg, "timed out after 1 s waiting for rank 2's address"), "%s", err.msg);
    store_close(s);
    port = test_free_port();
    s = store_open("127.0.0.1", port, 1, "run-t", 0, 3, 1, &err);
    cr_assert_not_null(s, "%s", err.msg);
    cr_assert_eq(store_barrier(s, "start", &err), -1);
    cr_assert(strstr(err.msg, "waiting for rank 1, 2"), "%s", err.msg);
    store_close(s);
    /* Nobody serves: the client gives up after the timeout and says where it looked. */
    cr_assert_null(store_open("127.0.0.1", test_free_port(), 0, "run-t", 1, 2, 0.3, &err));
    cr_assert(strstr(err.msg, "could not reach rank 0's store at 127.0.0.1"), "%s", err.msg);
}

/* ---- collectives ------------------------------------------------------------------------------ */

/* Value of element i on rank r before a collective. */
/* Quarters of integers below 2^22: their sums are exact in float in any order, so every collective
 * but the average is checked for equality (a neighbour's element differs by 0.25 per rank). */
static float input(int r, size_t i) { return (float)((r + 1) * 1000 + (int)(i % 997)) * 0.25f; }

/* One rank of a collective test: every collective, checked against the closed form. Exit status
 * 0 when all hold. */
static int rank_main(int port, int rank, int world, const char *node_key, size_t n)
{
    esp_err e;
    dist_store *s = store_open("127.0.0.1", port, rank == 0, "comm-test", rank, world, 20, &e);
    if (!s) return fprintf(stderr, "rank %d: %s\n", rank, e.msg), 10;
    comm *c = comm_cpu_create(s, rank, world, node_key, "comm-test", 20, &e);
    if (!c) return fprintf(stderr, "rank %d: %s\n", rank, e.msg), 11;
    float *b = malloc(n * sizeof *b);
    int bad = 0;
    for (int op = COMM_SUM; op <= COMM_MAX && !bad; op++) {
        for (size_t i = 0; i < n; i++) b[i] = input(rank, i);
        if (comm_all_reduce(c, b, n, (comm_op)op, &e) != 0) return fprintf(stderr, "%s\n", e.msg), 12;
        for (size_t i = 0; i < n && !bad; i++) {
            float want = 0;
            for (int r = 0; r < world; r++) want += input(r, i);
            if (op == COMM_AVG) want *= 1.0f / (float)world;
            if (op == COMM_MIN) want = input(0, i);
            if (op == COMM_MAX) want = input(world - 1, i);
            /* the average divides once more: one rounding's worth of slack */
            bad = op == COMM_AVG ? fabsf(b[i] - want) > 1e-6f * fabsf(want) : b[i] != want;
            if (bad) fprintf(stderr, "rank %d op %d: [%zu] = %g, want %g\n", rank, op, i, b[i], want);
        }
    }
    /* reduce_scatter leaves this rank's chunk; all_gather spreads the chunks. */
    for (size_t i = 0; i < n; i++) b[i] = input(rank, i);
    if (comm_reduce_scatter(c, b, n, COMM_SUM, &e) != 0) return 13;
    size_t lo, hi;
    comm_chunk(n, world, rank, &lo, &hi);
    for (size_t i = lo; i < hi && !bad; i++) {
        float want = 0;
        for (int r = 0; r < world; r++) want += input(r, i);
        bad = b[i] != want;
    }
    for (size_t i = 0; i < n; i++) b[i] = -1;
    for (size_t i = lo; i < hi; i++) b[i] = input(rank, i);
    if (comm_all_gather(c, b, n, &e) != 0) return 14;
    for (int r = 0; r < world && !bad; r++) {
        comm_chunk(n, world, r, &lo, &hi);
        for (size_t i = lo; i < hi && !bad; i++) bad = b[i] != input(r, i);
    }
    /* Broadcast of an odd number of bytes from the last rank, then a float all_reduce: the ring
     * must stay aligned. */
    char msg[7] = "......";
    if (rank == world - 1) memcpy(msg, "ranks!", 7);
    if (comm_broadcast(c, msg, 7, world - 1, &e) != 0 || strcmp(msg, "ranks!")) bad = 1;
    for (size_t i = 0; i < n; i++) b[i] = 1;
    if (comm_all_reduce(c, b, n, COMM_SUM, &e) != 0) return 15;
    for (size_t i = 0; i < n && !bad; i++) bad = b[i] != (float)world;
    if (comm_barrier(c, &e) != 0) return 16;
    free(b);
    comm_destroy(c);
    store_close(s);
    return bad ? 1 : 0;
}

/* Runs world ranks; node_of[r] picks each rank's node key. */
static void run_ranks(int world, const int *node_of, size_t n)
{
    int port = test_free_port();
    pid_t pids[8];
    for (int r = 0; r < world; r++) {
        pids[r] = fork();
        cr_assert(pids[r] >= 0);
        if (pids[r] == 0) {
            char key[32];
            snprintf(key, sizeof key, "host#%d", node_of[r]);
            _exit(rank_main(port, r, world, key, n));
        }
    }
    for (int r = 0; r < world; r++) {
        int st;
        waitpid(pids[r], &st, 0);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "rank %d failed (status %d)", r, st);
    }
}

Test(comm_cpu, two_ranks_shared_memory_large_buffer)
{
    int nodes[] = {0, 0};
    run_ranks(2, nodes, (size_t)3 << 20); /* 12 MB: several laps of the 4 MB rings */
}

Test(comm_cpu, two_ranks_tcp)
{
    int nodes[] = {0, 1};
    run_ranks(2, nodes, 300001);
}

Test(comm_cpu, four_ranks_two_nodes_mixed_links_and_tiny_buffers)
{
    int nodes[] = {0, 0, 1, 1};
    run_ranks(4, nodes, 100003);
    run_ranks(4, nodes, 3); /* fewer elements than ranks: empty chunks */
}

Test(comm_cpu, a_dead_peer_is_named)
{
    int port = test_free_port();
    pid_t victim = fork();
    if (victim == 0) {
        esp_err e;
        dist_store *s = store_open("127.0.0.1", port, 0, "dead", 1, 2, 20, &e);
        comm *c = s ? comm_cpu_create(s, 1, 2, "same", "dead", 20, &e) : NULL;
        pause();
        _exit(c ? 0 : 1);
    }
    esp_err e;
    dist_store *s = store_open("127.0.0.1", port, 1, "dead", 0, 2, 20, &e);
    cr_assert_not_null(s, "%s", e.msg);
    comm *c = comm_cpu_create(s, 0, 2, "same", "dead", 20, &e);
    cr_assert_not_null(c, "%s", e.msg);
    kill(victim, SIGKILL);
    waitpid(victim, NULL, 0);
    float b[64] = {0};
    cr_assert_eq(comm_all_reduce(c, b, 64, COMM_SUM, &e), -1);
    cr_assert(strstr(e.msg, "rank 1 died"), "%s", e.msg);
    comm_destroy(c);
    store_close(s);
}

/* ---- the command line of a launched rank ------------------------------------------------------ */

#include "cli/options.h"

Test(dist_cli, rank_argv_drops_stage_selection_and_launch_flags)
{
    char *argv[] = {"espnet3", "-c", "x.yaml", "--stage", "1", "--stop_stage=5", "--nproc_per_node", "2", "--nnodes=2",
                    "--node_rank", "1", "--master_addr", "h", "--master_port", "29500", "-q", "a.b=1", NULL};
    char **r = cli_rank_argv(17, argv, "train");
    const char *want[] = {"espnet3", "-c", "x.yaml", "-q", "a.b=1", "--stages", "train", NULL};
    for (int i = 0; want[i] || r[i]; i++) cr_assert(want[i] && r[i] && !strcmp(want[i], r[i]), "arg %d: %s", i, r[i]);
    free(r);
    char *argv2[] = {"espnet3", "--stages", "collect_stats", "train", "--config", "y.yaml", NULL};
    r = cli_rank_argv(6, argv2, "train");
    const char *want2[] = {"espnet3", "--config", "y.yaml", "--stages", "train", NULL};
    for (int i = 0; want2[i] || r[i]; i++) cr_assert(want2[i] && r[i] && !strcmp(want2[i], r[i]), "arg %d: %s", i, r[i]);
    free(r);
    /* The launch flags parse like the other integer options. */
    cli_args a;
    esp_err err;
    char *bad[] = {"espnet3", "--nnodes", "two", NULL};
    cr_assert_eq(cli_parse(3, bad, &a, &err), -1);
    cr_assert(strstr(err.msg, "--nnodes: expected a non-negative integer, got 'two'"), "%s", err.msg);
    cli_args_free(&a);
}
