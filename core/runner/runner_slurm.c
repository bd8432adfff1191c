/* parallel.env: slurm — the workers are the tasks of SLURM array jobs. ESPnet3 builds a
 * dask-jobqueue SLURMCluster from parallel.options; the options keep that meaning here:
 *   queue -> -p, account -> -A, cores -> --cpus-per-task (one task per job), memory -> --mem
 *   (dask's sizes: 40GB = 40e9 bytes, 4GiB = 4 * 2^30, written as SLURM's ceiling K/M/G),
 *   walltime -> -t, processes = worker processes per job, job_extra_directives -> more
 *   "#SBATCH" lines, job_script_prologue -> shell lines before the command, log_directory ->
 *   where the job logs go (default <work_dir>/slurm/log).
 * n_workers counts worker processes, so ceil(n_workers / processes) jobs are submitted.
 *
 * Each task runs this same command line again (runner_set_command) with ESPNET3_RUNNER_* in its
 * environment naming the stage, the work_dir, the submission and the worker processes; the stage
 * re-creates its runner_job and runner_run computes only the task's shards (its list is in
 * <work_dir>/slurm/sub.<n>.<task>) with the local env, then returns RUNNER_PENDING.
 *
 * The driver records each submission in <work_dir>/slurm/jobs ("<n> <job id> <tasks> <log dir>").
 * A rerun asks squeue about them: shards of tasks still queued or running are left to them, the
 * other unfinished shards are submitted again. Sync mode polls squeue (every 5 s, or
 * $ESPNET3_SLURM_POLL_S) until the tasks end, fails naming a task that ended with shards
 * unfinished and its log, and otherwise returns 0 so the caller merges. Async mode
 * (parallel.async_mode) returns RUNNER_PENDING right after submitting. */
#include "core/runner/runner_env.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/base/fsio.h"
#include "core/base/proc.h"
#include "core/base/progress.h"
#include "core/runner/runner_proc.h"
#include "core/runner/runner_shard.h"


#define ENV_STAGE "ESPNET3_RUNNER_STAGE"
#define ENV_WORK_DIR "ESPNET3_RUNNER_WORK_DIR"
#define ENV_SUBMISSION "ESPNET3_RUNNER_SUBMISSION"
#define ENV_PROCESSES "ESPNET3_RUNNER_PROCESSES"
#define ENV_POLL "ESPNET3_SLURM_POLL_S"

static const double DEFAULT_POLL_S = 5.0;
enum { MAX_SQUEUE_FAILURES = 10 };

/* ---- running sbatch / squeue / scancel ---------------------------------------------------- */

/* Runs argv[0] from PATH, stdout and stderr together into *out (caller frees). Returns 0 with the
 * wait status, or -1 with err when it cannot start. */
static int run_cmd(char *const argv[], char **out, int *status, esp_err *err)
{
    proc_buf buf = {0};
    int rc = proc_run_capture(argv, &buf, NULL, 0, status, err);
    if (rc > 0)
        return esp_fail(err, "parallel.env: slurm: cannot run %s: %s (is this a SLURM login node? SLURM's "
                        "client commands must be on PATH)", argv[0], strerror(rc));
    if (rc != 0) {
        free(buf.data);
        return -1;
    }
    *out = buf.data ? (char *)buf.data : xstrdup("");
    return 0;
}

/* The output's first line, for messages. */
static const char *first_line(char *text)
{
    char *nl = strchr(text, '\n');
    if (nl) *nl = '\0';
    return *text ? text : "(no output)";
}

/* ---- the record of submissions ------------------------------------------------------------ */

typedef struct submission {
    int sub;
    long long job;
    int n_tasks;
    char *log_dir;
} submission;

typedef struct ledger {
    submission *s;
    size_t n;
} ledger;

static char *slurm_dir(const char *work_dir) { return path_join(work_dir, "slurm"); }

static void ledger_free(ledger *l)
{
    for (size_t i = 0; i < l->n; i++) free(l->s[i].log_dir);
    free(l->s);
    l->s = NULL;
    l->n = 0;
}

/* A missing or unreadable record is an empty one (nothing to wait for). */
static void ledger_read(const char *sdir, ledger *l)
{
    char *path = path_join(sdir, "jobs");
    FILE *fp = fopen(path, "r");
    free(path);
    if (!fp) return;
    char line[8192];
    while (fgets(line, sizeof line, fp)) {
        submission s = {0};
        int off = 0;
        if (sscanf(line, "%d %lld %d %n", &s.sub, &s.job, &s.n_tasks, &off) != 3 || off == 0 || s.n_tasks <= 0)
            continue;
        line[strcspn(line, "\n")] = '\0';
        s.log_dir = xstrdup(line + off);
        l->s = xrealloc(l->s, (l->n + 1) * sizeof *l->s);
        l->s[l->n++] = s;
    }
    fclose(fp);
}

static int ledger_write(const char *sdir, const ledger *l, esp_err *err)
{
    char *text = xstrdup(""), *path = path_join(sdir, "jobs");
    for (size_t i = 0; i < l->n; i++) {
        char *t = xasprintf("%s%d %lld %d %s\n", text, l->s[i].sub, l->s[i].job, l->s[i].n_tasks, l->s[i].log_dir);
        free(text);
        text = t;
    }
    int rc = atomic_write_file(path, text, strlen(text), err);
    free(text);
    free(path);
    return rc;
}

static char *task_path(const char *sdir, int sub, int task) { return xasprintf("%s/sub.%d.%d", sdir, sub, task); }

static char *log_path(const submission *s, int task)
{
    return xasprintf("%s/espnet3-%lld_%d.log", s->log_dir, s->job, task);
}

/* The shard numbers of one task ("k k k\n"); 0, or -1 when the file is missing or malformed. */
static int read_task(const char *sdir, int sub, int task, size_t **shards, size_t *n)
{
    char *path = task_path(sdir, sub, task);
    esp_err e;
    size_t len;
    char *text = path_exists(path) ? read_file(path, READ_SMALL, &len, &e) : NULL;
    free(path);
    *shards = NULL;
    *n = 0;
    if (!text) return -1;
    size_t cap = 0;
    int rc = 0;
    for (char *p = text;;) {
        while (*p == ' ' || *p == '\n') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        unsigned long long k = strtoull(p, &end, 10);
        if (end == p || errno) {
            rc = -1;
            break;
        }
        if (*n == cap) *shards = xrealloc(*shards, (cap = cap ? 2 * cap : 16) * sizeof **shards);
        (*shards)[(*n)++] = (size_t)k;
        p = end;
    }
    free(text);
    return rc;
}

/* ---- squeue ------------------------------------------------------------------------------- */

typedef struct task_state {
    long long job;
    int task;
    char state[32];
} task_state;

/* Queued, running or on their way out: still able to write their shards. */
static int state_active(const char *st)
{
    static const char *const ended[] = {"COMPLETED", "FAILED",    "CANCELLED", "TIMEOUT",      "NODE_FAIL",
                                        "PREEMPTED", "BOOT_FAIL", "DEADLINE",  "OUT_OF_MEMORY", "REVOKED",
                                        "SPECIAL_EXIT"};
    for (size_t i = 0; i < sizeof ended / sizeof *ended; i++)
        if (strcmp(st, ended[i]) == 0) return 0;
    return 1;
}

/* The states squeue knows of the ledger's tasks. A task squeue does not list has left the queue
 * (ended long ago, or cancelled while queued). */
static int query(const ledger *l, task_state **out, size_t *n_out, esp_err *err)
{
    *out = NULL;
    *n_out = 0;
    if (l->n == 0) return 0;
    char *ids = xstrdup("");
    for (size_t i = 0; i < l->n; i++) {
        char *t = xasprintf("%s%s%lld", ids, i ? "," : "", l->s[i].job);
        free(ids);
        ids = t;
    }
    char *argv[] = {"squeue", "-h", "-r", "--states=all", "-o", "%F %K %T", "-j", ids, NULL};
    char *text;
    int status;
    if (run_cmd(argv, &text, &status, err) != 0) {
        free(ids);
        return -1;
    }
    free(ids);
    int rc = 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        /* squeue refuses a list of only unknown ids: none of them is queued any more. */
        if (!strstr(text, "Invalid job id")) rc = esp_fail(err, "squeue failed: %s", first_line(text));
        free(text);
        return rc;
    }
    size_t cap = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        task_state t;
        if (sscanf(line, "%lld %d %31s", &t.job, &t.task, t.state) != 3) continue;
        if (*n_out == cap) *out = xrealloc(*out, (cap = cap ? 2 * cap : 16) * sizeof **out);
        (*out)[(*n_out)++] = t;
    }
    free(text);
    return 0;
}

static const char *state_of(const task_state *st, size_t n, long long job, int task)
{
    for (size_t i = 0; i < n; i++)
        if (st[i].job == job && st[i].task == task) return st[i].state;
    return NULL;
}

/* ---- the job script ----------------------------------------------------------------------- */

/* 'text' for sh, with ' written as '\'' */
static char *shell_quote(const char *text)
{
    runner_buf q = {0};
    runner_buf_append(&q, "'", 1);
    for (const char *p = text; *p; p++) {
        if (*p == '\'') runner_buf_append(&q, "'\\''", 4);
        else runner_buf_append(&q, p, 1);
    }
    runner_buf_append(&q, "'", 2); /* with its NUL */
    return (char *)q.data;
}

/* dask's parse_bytes (what ESPnet3's memory: goes through) and dask-jobqueue's ceiling in K/M/G. */
static int slurm_memory(const char *text, char *out, size_t n, esp_err *err)
{
    static const struct {
        const char *unit;
        double bytes;
    } units[] = {{"", 1},        {"b", 1},           {"k", 1e3},         {"kb", 1e3},         {"m", 1e6},
                 {"mb", 1e6},    {"g", 1e9},         {"gb", 1e9},        {"t", 1e12},         {"tb", 1e12},
                 {"p", 1e15},    {"pb", 1e15},       {"kib", 1024.0},    {"mib", 1048576.0},  {"gib", 1073741824.0},
                 {"tib", 1099511627776.0}, {"pib", 1125899906842624.0}};
    char *end;
    double v = strtod(text, &end);
    while (*end == ' ') end++;
    char unit[8] = "";
    size_t ul = strlen(end);
    int ok = end != text && v > 0 && ul < sizeof unit;
    for (size_t i = 0; ok && i < ul; i++) unit[i] = (char)tolower((unsigned char)end[i]);
    double bytes = -1;
    for (size_t i = 0; ok && i < sizeof units / sizeof *units; i++)
        if (strcmp(unit, units[i].unit) == 0) bytes = v * units[i].bytes;
    if (bytes <= 0)
        return esp_fail(err, "parallel.options.memory: cannot read '%s' as a size (write e.g. 40GB or 4GiB)", text);
    const double G = 1073741824.0, M = 1048576.0, K = 1024.0;
    if (bytes >= G) snprintf(out, n, "%.0fG", ceil(bytes / G));
    else if (bytes >= M) snprintf(out, n, "%.0fM", ceil(bytes / M));
    else snprintf(out, n, "%.0fK", ceil(bytes / K));
    return 0;
}

static char *job_script(const runner_plan *plan, int sub, int processes, esp_err *err)
{
    const slurm_options_cfg *o = plan->par ? plan->par->options : NULL;
    int argc;
    char *const *argv = runner_command(&argc);
    const char *stage = runner_stage();
    ESP_CHECK(argv && argc >= 1 && stage); /* checked by runner_slurm_run */
    char exe[4096];
    ssize_t en = readlink("/proc/self/exe", exe, sizeof exe - 1);
    char cwd[4096];
    if (en <= 0 || !getcwd(cwd, sizeof cwd)) {
        esp_fail(err, "parallel.env: slurm: cannot find this binary or the working directory: %s", strerror(errno));
        return NULL;
    }
    exe[en] = '\0';
    runner_buf b = {0};
    runner_buf_printf(&b, "#!/bin/sh\n");
    runner_buf_printf(&b, "# written by espnet3 for %s (submission %d)\n", plan->job->name ? plan->job->name : "runner", sub);
    runner_buf_printf(&b, "#SBATCH -J espnet3-%s\n", stage);
    if (o && o->queue) runner_buf_printf(&b, "#SBATCH -p %s\n", o->queue);
    if (o && o->account) runner_buf_printf(&b, "#SBATCH -A %s\n", o->account);
    runner_buf_printf(&b, "#SBATCH -n 1\n");
    runner_buf_printf(&b, "#SBATCH --cpus-per-task=%lld\n", (long long)(o && o->cores > 0 ? o->cores : processes));
    if (o && o->memory) {
        char mem[32];
        if (slurm_memory(o->memory, mem, sizeof mem, err) != 0) {
            runner_buf_free(&b);
            return NULL;
        }
        runner_buf_printf(&b, "#SBATCH --mem=%s\n", mem);
    }
    if (o && o->walltime) runner_buf_printf(&b, "#SBATCH -t %s\n", o->walltime);
    for (unsigned i = 0; o && i < o->n_job_extra_directives; i++) runner_buf_printf(&b, "#SBATCH %s\n", o->job_extra_directives[i]);
    char *q = shell_quote(cwd);
    runner_buf_printf(&b, "cd %s || exit 1\n", q);
    free(q);
    for (unsigned i = 0; o && i < o->n_job_script_prologue; i++) runner_buf_printf(&b, "%s\n", o->job_script_prologue[i]);
    char *wd = path_absolute(plan->job->work_dir), *qwd = shell_quote(wd), *qst = shell_quote(stage);
    runner_buf_printf(&b, "export %s=%s %s=%s %s=%d %s=%d\n", ENV_STAGE, qst, ENV_WORK_DIR, qwd, ENV_SUBMISSION, sub,
           ENV_PROCESSES, processes);
    free(wd);
    free(qwd);
    free(qst);
    q = shell_quote(exe);
    runner_buf_printf(&b, "exec %s", q);
    free(q);
    for (int i = 1; i < argc; i++) {
        q = shell_quote(argv[i]);
        runner_buf_printf(&b, " %s", q);
        free(q);
    }
    runner_buf_append(&b, "\n", 2); /* with its NUL */
    return (char *)b.data;
}

/* ---- submitting --------------------------------------------------------------------------- */

/* Removes shard.<k>.tmp.* of the given shards: what killed workers left. */
static void remove_temps(const char *work_dir, const size_t *shards, size_t n)
{
    DIR *d = opendir(work_dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t k;
        int off = 0;
        if (sscanf(de->d_name, "shard.%zu.tmp.%n", &k, &off) != 1 || off == 0) continue;
        for (size_t i = 0; i < n; i++)
            if (shards[i] == k) {
                char *p = path_join(work_dir, de->d_name);
                unlink(p);
                free(p);
                break;
            }
    }
    closedir(d);
}

/* Submits one array job for the shards; appends it to the ledger. */
static int submit(const runner_plan *plan, const char *sdir, ledger *l, const size_t *shards, size_t n,
                  esp_err *err)
{
    const slurm_options_cfg *o = plan->par ? plan->par->options : NULL;
    const char *name = plan->job->name ? plan->job->name : "runner";
    int processes = o && o->processes > 0 ? (int)o->processes : 1;
    size_t jobs = ((size_t)plan->n_workers + (size_t)processes - 1) / (size_t)processes;
    if (jobs > n) jobs = n;
    int sub = 0;
    for (size_t i = 0; i < l->n; i++)
        if (l->s[i].sub >= sub) sub = l->s[i].sub + 1;

    char *log_dir = o && o->log_directory ? path_absolute(o->log_directory) : path_join(sdir, "log");
    char *script = NULL, *script_path = xasprintf("%s/sub.%d.sh", sdir, sub);
    int rc = mkdir_p(log_dir, err);
    /* Round robin, so every task gets shards from the whole input. */
    for (size_t t = 0; t < jobs && rc == 0; t++) {
        runner_buf list = {0};
        for (size_t i = t; i < n; i += jobs) runner_buf_printf(&list, "%zu ", shards[i]);
        runner_buf_printf(&list, "\n");
        char *path = task_path(sdir, sub, (int)t);
        rc = atomic_write_file(path, list.data, list.len, err);
        free(path);
        runner_buf_free(&list);
    }
    if (rc == 0 && !(script = job_script(plan, sub, processes, err))) rc = -1;
    if (rc == 0) rc = atomic_write_file(script_path, script, strlen(script), err);
    char *out = NULL;
    int status = 0;
    if (rc == 0) {
        remove_temps(plan->job->work_dir, shards, n);
        char *array = xasprintf("--array=0-%zu", jobs - 1);
        char *log = xasprintf("%s/espnet3-%%A_%%a.log", log_dir);
        char *argv[] = {"sbatch", "--parsable", array, "-o", log, "-e", log, script_path, NULL};
        rc = run_cmd(argv, &out, &status, err);
        free(array);
        free(log);
    }
    long long job = 0;
    if (rc == 0) {
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || sscanf(out, "%lld", &job) != 1 || job <= 0)
            rc = esp_fail(err, "%s: sbatch %s failed: %s (check parallel.options)", name, script_path, first_line(out));
    }
    free(out);
    if (rc == 0) {
        l->s = xrealloc(l->s, (l->n + 1) * sizeof *l->s);
        l->s[l->n++] = (submission){sub, job, (int)jobs, xstrdup(log_dir)};
        rc = ledger_write(sdir, l, err);
        log_info("%s: submitted SLURM array job %lld: %zu task%s (%d worker process%s each) for %zu shards; logs: "
                 "%s/espnet3-%lld_<task>.log",
                 name, job, jobs, jobs == 1 ? "" : "s", processes, processes == 1 ? "" : "es", n, log_dir, job);
    }
    free(script);
    free(script_path);
    free(log_dir);
    return rc;
}

/* ---- the driver --------------------------------------------------------------------------- */

typedef struct live_task {
    size_t si; /* index in the ledger */
    int task;
    size_t *shards, n;
} live_task;

/* The last line of a job's log that says "error:", so a failure explains itself. */
static char *last_error_line(const char *path)
{
    FILE *fp = fopen(path, "r");
    if (!fp) return NULL;
    char line[1024], *found = NULL;
    while (fgets(line, sizeof line, fp)) {
        if (!strstr(line, "error:")) continue; /* ours, and slurmstepd's "error: *** JOB ... CANCELLED" */
        line[strcspn(line, "\n")] = '\0';
        free(found);
        found = xstrdup(line);
    }
    fclose(fp);
    return found;
}

static double poll_seconds(void)
{
    const char *v = getenv(ENV_POLL);
    double s = v ? strtod(v, NULL) : 0;
    return s > 0 ? s : DEFAULT_POLL_S;
}

static void sleep_seconds(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* Tasks of the ledger still queued or running, with their shard lists. */
static int live_tasks(const char *sdir, const ledger *l, const task_state *st, size_t n_st, live_task **out,
                      size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    for (size_t i = 0; i < l->n; i++)
        for (int t = 0; t < l->s[i].n_tasks; t++) {
            const char *state = state_of(st, n_st, l->s[i].job, t);
            if (!state || !state_active(state)) continue;
            live_task lt = {i, t, NULL, 0};
            if (read_task(sdir, l->s[i].sub, t, &lt.shards, &lt.n) != 0) continue; /* not ours to wait for */
            *out = xrealloc(*out, (*n_out + 1) * sizeof **out);
            (*out)[(*n_out)++] = lt;
        }
    return 0;
}

static void free_live(live_task *lt, size_t n)
{
    for (size_t i = 0; i < n; i++) free(lt[i].shards);
    free(lt);
}

/* A task that is no longer live but left shards undone: the run's error. */
static int task_failed(const runner_plan *plan, const ledger *l, const live_task *lt, const char *state,
                       esp_err *err)
{
    size_t undone = 0;
    for (size_t i = 0; i < lt->n; i++) undone += !runner_shard_done(plan, lt->shards[i]);
    if (undone == 0) return 0;
    const submission *s = &l->s[lt->si];
    char *log = log_path(s, lt->task);
    char *why = last_error_line(log);
    esp_fail(err, "%s: SLURM job %lld_%d %s%s%s with %zu of its %zu shards unfinished (log: %s%s%s); rerun the stage "
                  "to resubmit them",
             plan->job->name ? plan->job->name : "runner", s->job, lt->task, state ? "ended (" : "left the queue",
             state ? state : "", state ? ")" : "", undone, lt->n, log, why ? ": " : "", why ? why : "");
    free(why);
    free(log);
    return -1;
}

/* Polls squeue until every watched task (the live ones and the new submission's; the list is
 * taken over) has left the queue or ended; a task that ends with shards undone fails the run. */
static int wait_for(const runner_plan *plan, const char *sdir, const ledger *l, live_task *watched, size_t n_watched,
                    esp_err *err)
{
    const char *name = plan->job->name ? plan->job->name : "runner";
    size_t total = 0;
    for (size_t i = 0; i < plan->n_pending; i++) {
        size_t first, count;
        runner_shard_range(plan, plan->pending[i], &first, &count);
        total += count;
    }
    unsigned char *done = xcalloc(plan->n_pending ? plan->n_pending : 1, 1);
    size_t items_done = 0;
    progress prog;
    progress_start(&prog, name, total);
    double poll = poll_seconds();
    int rc = 0, failures = 0;
    while (n_watched > 0 && rc == 0) {
        task_state *st;
        size_t n_st;
        esp_err qe;
        if (query(l, &st, &n_st, &qe) != 0) {
            if (++failures >= MAX_SQUEUE_FAILURES)
                rc = esp_fail(err, "%s: %s (%d times in a row; the jobs may still run: rerun the stage later)", name,
                              qe.msg, failures);
            else sleep_seconds(poll);
            continue;
        }
        failures = 0;
        /* Shards are counted after the queue was read: a task seen gone has committed all it will. */
        for (size_t i = 0; i < plan->n_pending; i++)
            if (!done[i] && runner_shard_done(plan, plan->pending[i])) {
                size_t first, count;
                runner_shard_range(plan, plan->pending[i], &first, &count);
                done[i] = 1;
                items_done += count;
            }
        progress_update(&prog, items_done);
        size_t keep = 0;
        for (size_t i = 0; i < n_watched; i++) {
            const char *state = state_of(st, n_st, l->s[watched[i].si].job, watched[i].task);
            if (state && state_active(state)) {
                watched[keep++] = watched[i];
                continue;
            }
            if (rc == 0) rc = task_failed(plan, l, &watched[i], state, err);
            free(watched[i].shards);
        }
        n_watched = keep;
        free(st);
        if (n_watched > 0 && rc == 0) sleep_seconds(poll);
    }
    free_live(watched, n_watched);
    for (size_t i = 0; i < plan->n_pending && rc == 0; i++)
        if (!runner_shard_done(plan, plan->pending[i]))
            rc = esp_fail(err, "%s: shard %zu is unfinished although no SLURM job is running it (see the logs under "
                               "%s; rerun the stage to resubmit it)",
                          name, plan->pending[i], sdir);
    if (rc == 0) progress_finish(&prog);
    free(done);
    return rc;
}

int runner_slurm_run(const runner_plan *plan, esp_err *err)
{
    const char *name = plan->job->name ? plan->job->name : "runner";
    int argc;
    if (!runner_command(&argc) || argc < 1 || !runner_stage())
        return esp_fail(err, "parallel.env: slurm: %s: the espnet3 command line is unknown (the jobs rerun it; run "
                             "stages through the espnet3 binary)",
                        name);
    char *sdir = slurm_dir(plan->job->work_dir);
    ledger l = {0};
    task_state *st = NULL;
    size_t n_st = 0, n_live = 0;
    live_task *live = NULL;
    unsigned char *in_flight = xcalloc(plan->n_shards ? plan->n_shards : 1, 1);
    size_t *todo = xcalloc(plan->n_pending ? plan->n_pending : 1, sizeof *todo), n_todo = 0;
    const slurm_options_cfg *o = plan->par ? plan->par->options : NULL;
    if (o && o->death_timeout)
        log_warn("parallel.options.death_timeout: has no effect here (it is how long a dask worker waits for its "
                 "scheduler; these workers are SLURM tasks that need none)");
    int rc = mkdir_p(sdir, err);
    if (rc == 0) {
        ledger_read(sdir, &l);
        rc = query(&l, &st, &n_st, err);
    }
    if (rc == 0) {
        live_tasks(sdir, &l, st, n_st, &live, &n_live);
        for (size_t i = 0; i < n_live; i++)
            for (size_t j = 0; j < live[i].n; j++)
                if (live[i].shards[j] < plan->n_shards) in_flight[live[i].shards[j]] = 1;
        for (size_t i = 0; i < plan->n_pending; i++)
            if (!in_flight[plan->pending[i]]) todo[n_todo++] = plan->pending[i];
        if (n_live)
            log_info("%s: %zu of the %zu unfinished shards are still in %zu queued or running SLURM task%s", name,
                     plan->n_pending - n_todo, plan->n_pending, n_live, n_live == 1 ? "" : "s");
        if (n_todo) rc = submit(plan, sdir, &l, todo, n_todo, err);
    }
    if (rc == 0 && plan->par && plan->par->async_mode) {
        /* The ids to wait for: every job with a live task, and the one just submitted. */
        runner_buf ids = {0};
        for (size_t i = 0; i < l.n; i++) {
            int wanted = n_todo && i == l.n - 1;
            for (size_t j = 0; j < n_live && !wanted; j++) wanted = live[j].si == i;
            if (wanted) runner_buf_printf(&ids, "%s%lld", ids.len ? ", " : "", l.s[i].job);
        }
        runner_buf_append(&ids, "", 1);
        const char *text = (const char *)ids.data;
        log_info("%s: async mode: SLURM job%s %s will compute the results; rerun the stage when they are done to "
                 "merge them",
                 name, strchr(text, ',') ? "s" : "", text);
        runner_note_pending(text);
        runner_buf_free(&ids);
        rc = RUNNER_PENDING;
    } else if (rc == 0) {
        /* Wait for the live tasks and every task of the new submission (even one already over). */
        if (n_todo) {
            const submission *s = &l.s[l.n - 1];
            live = xrealloc(live, (n_live + (size_t)s->n_tasks) * sizeof *live);
            for (int t = 0; t < s->n_tasks; t++) {
                live_task lt = {l.n - 1, t, NULL, 0};
                if (read_task(sdir, s->sub, t, &lt.shards, &lt.n) == 0) live[n_live++] = lt;
            }
        }
        rc = wait_for(plan, sdir, &l, live, n_live, err);
        live = NULL;
        n_live = 0;
    }
    free_live(live, n_live);
    free(st);
    ledger_free(&l);
    free(in_flight);
    free(todo);
    free(sdir);
    return rc;
}

/* The work_dir now holds another job: cancel what the old one still has queued or running. */
void runner_slurm_forget(const char *work_dir)
{
    char *sdir = slurm_dir(work_dir);
    ledger l = {0};
    ledger_read(sdir, &l);
    task_state *st = NULL;
    size_t n_st = 0;
    esp_err e;
    if (l.n && query(&l, &st, &n_st, &e) == 0) {
        for (size_t i = 0; i < n_st; i++) {
            if (!state_active(st[i].state)) continue;
            char *id = xasprintf("%lld_%d", st[i].job, st[i].task);
            char *argv[] = {"scancel", id, NULL}, *out = NULL;
            int status;
            if (run_cmd(argv, &out, &status, &e) == 0)
                log_info("%s: cancelled SLURM job %s of the earlier job in this folder", work_dir, id);
            free(out);
            free(id);
        }
    }
    char *path = path_join(sdir, "jobs");
    unlink(path);
    free(path);
    free(st);
    ledger_free(&l);
    free(sdir);
}

/* ---- the worker side ---------------------------------------------------------------------- */

const char *runner_worker_stage(void) { return getenv(ENV_WORK_DIR) ? getenv(ENV_STAGE) : NULL; }

int runner_slurm_worker_task(char **work_dir, size_t **shards, size_t *n_shards, int *processes, esp_err *err)
{
    const char *wd = getenv(ENV_WORK_DIR);
    if (!wd) return 0;
    const char *sub = getenv(ENV_SUBMISSION), *task = getenv("SLURM_ARRAY_TASK_ID"), *procs = getenv(ENV_PROCESSES);
    int s, t, p;
    if (!sub || !task || !procs || sscanf(sub, "%d", &s) != 1 || sscanf(task, "%d", &t) != 1 ||
        sscanf(procs, "%d", &p) != 1 || p < 1)
        return esp_fail(err, "%s=%s is set but %s, SLURM_ARRAY_TASK_ID or %s is missing or bad (espnet3 sets them "
                             "in the jobs it submits; unset %s to run normally)",
                        ENV_WORK_DIR, wd, ENV_SUBMISSION, ENV_PROCESSES, ENV_WORK_DIR);
    char *sdir = slurm_dir(wd);
    int rc = read_task(sdir, s, t, shards, n_shards);
    char *path = task_path(sdir, s, t);
    free(sdir);
    if (rc != 0) {
        esp_fail(err, "%s: missing or unreadable: this job's shard list (was the work folder removed?)", path);
        free(path);
        return -1;
    }
    free(path);
    *work_dir = xstrdup(wd);
    *processes = p;
    return 1;
}
