/* core/runner: ordered results for any worker count, dynamic balancing, resume from shards, crash
 * redo and repeated-crash failure, forward errors that stop the other workers, stale signatures,
 * env selection. Workers count their forward() calls in a file (one "idx pid" line per call). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/base/fsio.h"
#include "core/base/progress.h"
#include "core/runner/runner.h"
#include "test/unit/test_util.h"

static char tmpdir[64];
static FILE *log_fp;

static char *tmp_path(const char *name)
{
    return path_join(tmpdir, name);
}

static void setup(void)
{
    test_tmpdir_make(tmpdir, sizeof tmpdir, "runner");
    log_set_quiet(1);
    char *p = tmp_path("log.txt");
    log_fp = fopen(p, "w");
    free(p);
    log_set_file(log_fp);
}

static void teardown(void)
{
    log_set_file(NULL);
    if (log_fp) fclose(log_fp);
    test_tmpdir_remove(tmpdir);
}

TestSuite(runner, .init = setup, .fini = teardown);

/* ---- the test job ---------------------------------------------------------------------------- */

enum { MODE_OK, MODE_COSTLY_FIRST, MODE_CRASH_ONCE, MODE_CRASH_ALWAYS, MODE_ERROR, MODE_BAD_PROVIDE };

typedef struct tjob {
    int mode;
    size_t at;   /* the item the mode is about */
    int salt;    /* changes every result (a "different input") */
    char *calls; /* "idx pid" per forward call */
} tjob;

static void *t_provide(void *arg, esp_err *err)
{
    tjob *t = arg;
    if (t->mode == MODE_BAD_PROVIDE) {
        esp_fail(err, "model file missing");
        return NULL;
    }
    return t;
}

static void note_call(const tjob *t, size_t idx)
{
    int fd = open(t->calls, O_WRONLY | O_APPEND | O_CREAT, 0644);
    char line[64];
    int n = snprintf(line, sizeof line, "%zu %d\n", idx, (int)getpid());
    if (fd < 0 || write(fd, line, (size_t)n) != n) _exit(99);
    close(fd);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static int t_forward(size_t idx, void *env, runner_buf *out, esp_err *err)
{
    tjob *t = env;
    note_call(t, idx);
    if (t->mode == MODE_COSTLY_FIRST) sleep_ms(idx == 0 ? 400 : 5);
    if (t->mode == MODE_CRASH_ONCE && idx == t->at) {
        char *marker = xasprintf("%s/crashed.%zu", tmpdir, idx);
        int first = !path_exists(marker);
        if (first) atomic_write_file(marker, "", 0, err);
        free(marker);
        if (first) kill(getpid(), SIGKILL);
    }
    if (t->mode == MODE_CRASH_ALWAYS && idx == t->at) _exit(7);
    if (t->mode == MODE_ERROR) {
        if (idx == t->at) return esp_fail(err, "bad audio");
        sleep_ms(4000); /* the others must be stopped, not waited for */
    }
    if (idx % 5 == 3) return 0; /* an empty result */
    runner_buf_printf(out, "utt%03zu %zu\n", idx, idx * idx + (size_t)t->salt);
    if (idx == 2) { /* one large binary result */
        for (int i = 0; i < 70000; i++) runner_buf_append(out, &i, 1);
    }
    return 0;
}

static const char *t_name(size_t idx, void *arg)
{
    (void)arg;
    static char buf[32];
    snprintf(buf, sizeof buf, "utt%03zu", idx);
    return buf;
}

static runner_job make_job(tjob *t, const char *work, size_t n, size_t chunk, const char *sig)
{
    if (!t->calls) t->calls = tmp_path("calls");
    return (runner_job){.name = "test",
                        .n_items = n,
                        .chunk_size = chunk,
                        .work_dir = work,
                        .signature = sig,
                        .provide = t_provide,
                        .forward = t_forward,
                        .item_name = t_name,
                        .arg = t};
}

static int collect(size_t idx, const void *data, size_t len, void *ctx)
{
    runner_buf *b = ctx;
    runner_buf_printf(b, "[%zu:%zu]", idx, len);
    runner_buf_append(b, data, len);
    return 0;
}

/* All results in index order as one byte string. */
static runner_buf merged(const runner_job *job)
{
    runner_buf b = {0};
    esp_err err;
    cr_assert_eq(runner_for_each(job, collect, &b, &err), 0, "%s", err.msg);
    return b;
}

static runner_buf expected(size_t n, int salt)
{
    runner_buf b = {0};
    for (size_t idx = 0; idx < n; idx++) {
        runner_buf item = {0};
        if (idx % 5 != 3) runner_buf_printf(&item, "utt%03zu %zu\n", idx, idx * idx + (size_t)salt);
        if (idx == 2)
            for (int i = 0; i < 70000; i++) runner_buf_append(&item, &i, 1);
        runner_buf_printf(&b, "[%zu:%zu]", idx, item.len);
        runner_buf_append(&b, item.data, item.len);
        runner_buf_free(&item);
    }
    return b;
}

/* calls[idx] = how many times forward ran on idx; returns the total. */
static size_t count_calls(const tjob *t, size_t *per_item, size_t n, int *pids, size_t *per_pid, int *n_pids)
{
    memset(per_item, 0, n * sizeof *per_item);
    if (n_pids) *n_pids = 0;
    FILE *fp = fopen(t->calls, "r");
    if (!fp) return 0;
    size_t total = 0, idx;
    int pid;
    while (fscanf(fp, "%zu %d", &idx, &pid) == 2) {
        cr_assert_lt(idx, n);
        per_item[idx]++;
        total++;
        if (!pids) continue;
        int k = 0;
        while (k < *n_pids && pids[k] != pid) k++;
        if (k == *n_pids) pids[(*n_pids)++] = pid, per_pid[k] = 0;
        per_pid[k]++;
    }
    fclose(fp);
    return total;
}

static void assert_no_children(void)
{
    int status;
    errno = 0;
    cr_assert_eq(waitpid(-1, &status, WNOHANG), -1, "a worker process was left behind");
    cr_assert_eq(errno, ECHILD);
}

static int log_contains(const char *needle)
{
    fflush(log_fp);
    char *p = tmp_path("log.txt");
    esp_err err;
    char *text = read_file(p, READ_LIST, NULL, &err);
    free(p);
    int found = text && strstr(text, needle) != NULL;
    free(text);
    return found;
}

static void run_ok(const runner_job *job, const parallel_cfg *par)
{
    esp_err err;
    cr_assert_eq(runner_run(job, par, &err), 0, "%s", err.msg);
    assert_no_children();
}

/* ---- tests ----------------------------------------------------------------------------------- */

Test(runner, ordered_and_identical_for_1_2_3_workers)
{
    const size_t n = 23;
    runner_buf want = expected(n, 0);
    for (int workers = 1; workers <= 3; workers++) {
        for (size_t chunk = 0; chunk <= 4; chunk += 4) { /* automatic and explicit chunking */
            char name[32];
            snprintf(name, sizeof name, "w%d_c%zu", workers, chunk);
            char *work = tmp_path(name);
            tjob t = {0};
            runner_job job = make_job(&t, work, n, chunk, "inputs-1");
            parallel_cfg par = {.env = "local", .n_workers = workers};
            run_ok(&job, &par);
            runner_buf got = merged(&job);
            cr_assert_eq(got.len, want.len, "%d workers chunk %zu", workers, chunk);
            cr_assert(memcmp(got.data, want.data, want.len) == 0, "%d workers chunk %zu", workers, chunk);
            size_t per[23];
            cr_assert_eq(count_calls(&t, per, n, NULL, NULL, NULL), n);
            for (size_t i = 0; i < n; i++) cr_assert_eq(per[i], 1, "item %zu ran %zu times", i, per[i]);
            runner_buf_free(&got);
            free(t.calls);
            char *calls = tmp_path("calls");
            unlink(calls);
            free(calls);
            free(work);
        }
    }
    runner_buf_free(&want);
}

Test(runner, parallel_null_is_one_worker)
{
    char *work = tmp_path("w");
    tjob t = {0};
    runner_job job = make_job(&t, work, 7, 2, "s");
    run_ok(&job, NULL);
    runner_buf got = merged(&job), want = expected(7, 0);
    cr_assert_eq(got.len, want.len);
    cr_assert(memcmp(got.data, want.data, want.len) == 0);
    size_t per[7], per_pid[8];
    int pids[8], n_pids;
    count_calls(&t, per, 7, pids, per_pid, &n_pids);
    cr_assert_eq(n_pids, 1);
    cr_assert_neq(pids[0], (int)getpid(), "forward runs in a forked worker");
    runner_buf_free(&got);
    runner_buf_free(&want);
    free(t.calls);
    free(work);
}

Test(runner, dynamic_balancing)
{
    const size_t n = 20;
    char *work = tmp_path("w");
    tjob t = {.mode = MODE_COSTLY_FIRST};
    runner_job job = make_job(&t, work, n, 1, "s");
    parallel_cfg par = {.env = "local", .n_workers = 2};
    run_ok(&job, &par);
    size_t per[20], per_pid[8];
    int pids[8], n_pids;
    cr_assert_eq(count_calls(&t, per, n, pids, per_pid, &n_pids), n);
    cr_assert_eq(n_pids, 2, "both workers did work");
    /* Item 0 costs 80 times the others: its worker does few items while the other takes the rest. */
    size_t slow = per_pid[0] < per_pid[1] ? per_pid[0] : per_pid[1];
    cr_assert_lt(slow, n / 2, "the busy worker did %zu of %zu items", slow, n);
    runner_buf got = merged(&job), want = expected(n, 0);
    cr_assert(got.len == want.len && memcmp(got.data, want.data, want.len) == 0);
    runner_buf_free(&got);
    runner_buf_free(&want);
    free(t.calls);
    free(work);
}

Test(runner, crashed_worker_is_redone_and_rerun_resumes)
{
    const size_t n = 12;
    char *work = tmp_path("w");
    tjob t = {.mode = MODE_CRASH_ONCE, .at = 5};
    runner_job job = make_job(&t, work, n, 2, "s");
    parallel_cfg par = {.env = "local", .n_workers = 2};
    run_ok(&job, &par);
    cr_assert(log_contains("died (killed by signal 9"), "the redo is reported");
    cr_assert(log_contains("in shard 2 (items 4-5) at utt005; redoing the shard"));
    size_t per[12];
    cr_assert_eq(count_calls(&t, per, n, NULL, NULL, NULL), n + 2, "only shard 2 (items 4, 5) ran twice");
    cr_assert_eq(per[4], 2);
    cr_assert_eq(per[5], 2);
    runner_buf got = merged(&job), want = expected(n, 0);
    cr_assert(got.len == want.len && memcmp(got.data, want.data, want.len) == 0);
    runner_buf_free(&got);

    /* A rerun computes nothing; with one shard removed it computes just that shard. */
    run_ok(&job, &par);
    cr_assert_eq(count_calls(&t, per, n, NULL, NULL, NULL), n + 2);
    char *shard3 = path_join(work, "shard.3");
    cr_assert_eq(unlink(shard3), 0);
    run_ok(&job, &par);
    cr_assert_eq(count_calls(&t, per, n, NULL, NULL, NULL), n + 4);
    cr_assert_eq(per[6], 2);
    cr_assert_eq(per[7], 2);
    got = merged(&job);
    cr_assert(got.len == want.len && memcmp(got.data, want.data, want.len) == 0);
    runner_buf_free(&got);
    runner_buf_free(&want);
    free(shard3);
    free(t.calls);
    free(work);
}

Test(runner, repeated_crash_names_the_item_and_rerun_resumes)
{
    const size_t n = 12;
    char *work = tmp_path("w");
    tjob t = {.mode = MODE_CRASH_ALWAYS, .at = 9};
    runner_job job = make_job(&t, work, n, 2, "s");
    esp_err err;
    /* One worker: shards 0-3 finish, then every worker that takes shard 4 dies on item 9. */
    cr_assert_eq(runner_run(&job, NULL, &err), -1);
    assert_no_children();
    cr_assert(strstr(err.msg, "test: utt009 (index 9) crashed its worker 3 times (last: exit status 7)"), "%s",
              err.msg);
    size_t per[12];
    cr_assert_eq(count_calls(&t, per, n, NULL, NULL, NULL), 8 + 3 * 2 /* items 8, 9 per try */);
    t.mode = MODE_OK;
    run_ok(&job, NULL);
    cr_assert(log_contains("resuming: 4 of 6 shards already done"));
    cr_assert_eq(count_calls(&t, per, n, NULL, NULL, NULL), 8 + 3 * 2 + 4, "only shards 4 and 5 ran again");
    for (size_t i = 0; i < 8; i++) cr_assert_eq(per[i], 1);
    runner_buf got = merged(&job), want = expected(n, 0);
    cr_assert(got.len == want.len && memcmp(got.data, want.data, want.len) == 0);
    runner_buf_free(&got);
    runner_buf_free(&want);
    free(t.calls);
    free(work);
}

Test(runner, forward_error_stops_everyone)
{
    char *work = tmp_path("w");
    tjob t = {.mode = MODE_ERROR, .at = 1};
    runner_job job = make_job(&t, work, 30, 1, "s");
    parallel_cfg par = {.env = "local", .n_workers = 3};
    esp_err err;
    double t0 = now_seconds();
    cr_assert_eq(runner_run(&job, &par, &err), -1);
    double took = now_seconds() - t0;
    assert_no_children();
    cr_assert_str_eq(err.msg, "test: utt001: bad audio");
    cr_assert_lt(took, 3.0, "the sleeping workers were waited for (%.1f s)", took);
    /* Nothing half written stays behind. */
    char *tmp = path_join(work, "shard.0");
    cr_assert(!path_exists(tmp));
    free(tmp);
    runner_buf b = {0};
    cr_assert_neq(runner_for_each(&job, collect, &b, &err), 0);
    runner_buf_free(&b);
    free(t.calls);
    free(work);
}

Test(runner, provide_error_fails_the_run)
{
    char *work = tmp_path("w");
    tjob t = {.mode = MODE_BAD_PROVIDE};
    runner_job job = make_job(&t, work, 5, 1, "s");
    parallel_cfg par = {.env = "local", .n_workers = 2};
    esp_err err;
    cr_assert_eq(runner_run(&job, &par, &err), -1);
    assert_no_children();
    cr_assert_str_eq(err.msg, "test: building the worker environment: model file missing");
    free(t.calls);
    free(work);
}

Test(runner, stale_signature_clears_shards)
{
    const size_t n = 9;
    char *work = tmp_path("w");
    tjob t = {0};
    runner_job job = make_job(&t, work, n, 3, "inputs-A");
    run_ok(&job, NULL);
    size_t per[9];
    cr_assert_eq(count_calls(&t, per, n, NULL, NULL, NULL), n);
    /* A leftover temp file from a killed run goes away too. */
    char *junk = path_join(work, "shard.1.tmp.12345");
    cr_assert_eq(atomic_write_file(junk, "x", 1, &(esp_err){0}), 0);

    t.salt = 1000;
    job.signature = "inputs-B";
    runner_buf stale = {0};
    esp_err err;
    cr_assert_neq(runner_for_each(&job, collect, &stale, &err), 0, "results of another job are not used");
    cr_assert(strstr(err.msg, "holds no results of this job"), "%s", err.msg);
    run_ok(&job, NULL);
    cr_assert(log_contains("holds 3 shards of a different job (other inputs); cleared them"));
    cr_assert(!path_exists(junk));
    cr_assert_eq(count_calls(&t, per, n, NULL, NULL, NULL), 2 * n, "everything was recomputed");
    runner_buf got = merged(&job), want = expected(n, 1000);
    cr_assert(got.len == want.len && memcmp(got.data, want.data, want.len) == 0);

    /* Another chunk size is another job as well; automatic chunking keeps the existing one. */
    job.chunk_size = 0;
    run_ok(&job, NULL);
    cr_assert_eq(count_calls(&t, per, n, NULL, NULL, NULL), 2 * n);
    job.chunk_size = 4;
    run_ok(&job, NULL);
    cr_assert_eq(count_calls(&t, per, n, NULL, NULL, NULL), 3 * n);
    runner_buf_free(&got);
    runner_buf_free(&want);
    runner_buf_free(&stale);
    free(junk);
    free(t.calls);
    free(work);
}

/* Automatic chunks of whole batches (infer's batch_size): another n_workers keeps the finished
 * shards; another batch size that the old chunks are no multiple of chooses again. */
Test(runner, automatic_chunks_are_whole_batches_and_kept_for_another_n_workers)
{
    const size_t n = 40;
    char *work = tmp_path("w");
    tjob t = {0};
    runner_job job = make_job(&t, work, n, 0, "inputs-A");
    job.chunk_multiple = 4;
    parallel_cfg one = {.env = "local", .n_workers = 1}, two = {.env = "local", .n_workers = 2};
    run_ok(&job, &one); /* 40 / 8 = 5 -> 8 */
    char *sig = path_join(work, "runner.sig");
    char *text = read_file(sig, READ_LIST, NULL, &(esp_err){0});
    cr_assert(text && strstr(text, "chunk_size 8\n"), "%s", text);
    free(text);
    size_t per[40];
    cr_assert_eq(count_calls(&t, per, n, NULL, NULL, NULL), n);
    run_ok(&job, &two); /* would be 40 / 16 = 2 -> 4 */
    cr_assert(log_contains("all 5 shards already done"));
    cr_assert_eq(count_calls(&t, per, n, NULL, NULL, NULL), n, "nothing was recomputed");
    job.chunk_multiple = 3;
    run_ok(&job, &two); /* 8 is no multiple of 3: 2 -> 3 */
    cr_assert(log_contains("other chunk size); cleared them"));
    cr_assert_eq(count_calls(&t, per, n, NULL, NULL, NULL), 2 * n);
    text = read_file(sig, READ_LIST, NULL, &(esp_err){0});
    cr_assert(text && strstr(text, "chunk_size 3\n"), "%s", text);
    free(text);
    runner_buf got = merged(&job), want = expected(n, 0);
    cr_assert(got.len == want.len && memcmp(got.data, want.data, want.len) == 0);
    runner_buf_free(&got);
    runner_buf_free(&want);
    free(sig);
    free(t.calls);
    free(work);
}

Test(runner, env_selection)
{
    char *work = tmp_path("w");
    tjob t = {0};
    runner_job job = make_job(&t, work, 3, 1, "s");
    esp_err err;
    parallel_cfg par = {.env = "dask", .n_workers = 2};
    cr_assert_eq(runner_run(&job, &par, &err), -1);
    cr_assert_str_eq(err.msg, "parallel.env: dask is not supported (supported: local, local_gpu, slurm)");
    /* slurm jobs rerun the espnet3 command line, which a bare runner_run call does not have. */
    par.env = "slurm";
    cr_assert_eq(runner_run(&job, &par, &err), -1);
    cr_assert(strstr(err.msg, "parallel.env: slurm: ") && strstr(err.msg, "the espnet3 command line is unknown"), "%s",
              err.msg);
    /* This test binary has no CUDA backend. */
    par.env = "local_gpu";
    cr_assert_eq(runner_run(&job, &par, &err), -1);
    cr_assert(strstr(err.msg, "local_gpu: no GPU is visible (n_workers=2 > num_gpus=0)"), "%s", err.msg);
    par.env = "local";
    par.n_workers = -2;
    cr_assert_eq(runner_run(&job, &par, &err), -1);
    cr_assert_str_eq(err.msg, "parallel.n_workers: must be at least 1, got -2");
    /* n_workers 0 never comes from a loaded config (its default is declared): refused here too. */
    par = (parallel_cfg){0};
    cr_assert_eq(runner_run(&job, &par, &err), -1);
    cr_assert_str_eq(err.msg, "parallel.n_workers: must be at least 1, got 0");
    /* No parallel block: one local worker. */
    run_ok(&job, NULL);
    free(t.calls);
    free(work);
}

Test(runner, slurm_only_keys_warn_with_another_env)
{
    char *work = tmp_path("w"), *log = tmp_path("stderr.txt");
    tjob t = {0};
    runner_job job = make_job(&t, work, 3, 1, "s");
    slurm_options_cfg opts = {.queue = "cpu"};
    parallel_cfg par = {.env = "local", .n_workers = 1, .options = &opts};
    /* Warnings go to stderr: catch them in a file for the length of the run. */
    fflush(stderr);
    int saved = dup(STDERR_FILENO), fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert(saved >= 0 && fd >= 0);
    dup2(fd, STDERR_FILENO);
    close(fd);
    run_ok(&job, &par);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    char *text = test_slurp(log);
    cr_assert(strstr(text, "parallel.options: only env slurm uses it; ignored with env local"), "%s", text);
    free(text);
    free(t.calls);
    free(work);
    free(log);
}

Test(runner, empty_job_and_misplaced_shard)
{
    char *work = tmp_path("w");
    tjob t = {0};
    runner_job job = make_job(&t, work, 0, 0, "s");
    run_ok(&job, NULL);
    runner_buf b = {0};
    esp_err err;
    cr_assert_eq(runner_for_each(&job, collect, &b, &err), 0, "%s", err.msg);
    cr_assert_eq(b.len, 0);

    /* A shard file holding other items (copied by hand) is redone, not trusted. */
    job.n_items = 6;
    job.chunk_size = 2;
    run_ok(&job, NULL);
    char *s0 = path_join(work, "shard.0"), *s1 = path_join(work, "shard.1");
    size_t len;
    char *data = read_file(s0, READ_LIST, &len, &err);
    cr_assert_eq(atomic_write_file(s1, data, len, &err), 0);
    run_ok(&job, NULL);
    cr_assert(log_contains("does not hold items 2-3; redoing it"));
    runner_buf got = merged(&job), want = expected(6, 0);
    cr_assert(got.len == want.len && memcmp(got.data, want.data, want.len) == 0);
    runner_buf_free(&got);
    runner_buf_free(&want);
    free(data);
    free(s0);
    free(s1);
    free(t.calls);
    free(work);
}

Test(runner, one_run_per_work_dir)
{
    char *work = tmp_path("w");
    esp_err err;
    cr_assert_eq(mkdir_p(work, &err), 0);
    char *lock = path_join(work, "runner.lock");
    int fd = open(lock, O_RDWR | O_CREAT, 0644);
    cr_assert_eq(flock(fd, LOCK_EX), 0);
    tjob t = {0};
    runner_job job = make_job(&t, work, 3, 1, "s");
    cr_assert_eq(runner_run(&job, NULL, &err), -1);
    cr_assert(strstr(err.msg, "another run is using"), "%s", err.msg);
    close(fd);
    run_ok(&job, NULL);
    free(lock);
    free(t.calls);
    free(work);
}
