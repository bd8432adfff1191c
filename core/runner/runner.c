/* Runner front end: the env table, the work_dir (lock, signature, stale and finished shards),
 * slurm worker mode and the ordered iteration over results. The environments live in
 * runner_<env>.c; the shard file format in runner_shard.c. */
#include "core/runner/runner.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "core/base/fsio.h"
#include "core/config/config_values.h"
#include "core/runner/runner_env.h"
#include "core/runner/runner_proc.h"
#include "core/runner/runner_shard.h"

static const char sig_name[] = "runner.sig";

/* An environment: how many workers it resolves when n_workers as loaded does not say it (local_gpu
 * left out: one per GPU; may be NULL), and whether its workers outlive the driver (cluster jobs: their temp
 * files are not the driver's to remove, and a work_dir that changes job calls forget() first to
 * stop them). */
typedef struct runner_env {
    const char *name;
    int (*run)(const runner_plan *plan, esp_err *err);
    int (*workers)(const parallel_cfg *par, int *n_workers, esp_err *err);
    int detached;
    void (*forget)(const char *work_dir);
} runner_env;

/* Every env a config may name. */
static const runner_env envs[] = {
    {"local", runner_local_run, NULL, 0, NULL},
    {"local_gpu", runner_local_gpu_run, runner_gpu_workers, 0, NULL},
    {"slurm", runner_slurm_run, NULL, 1, runner_slurm_forget},
};
enum { N_ENVS = sizeof envs / sizeof envs[0] };

/* ---- helpers ------------------------------------------------------------------------------ */

/* "shard.<digits>" -> 1 (finished shard); "shard.<digits>.tmp.<anything>" -> 2 (leftover temp). */
static int shard_file_kind(const char *name)
{
    if (strncmp(name, "shard.", 6) != 0) return 0;
    const char *p = name + 6;
    if (*p < '0' || *p > '9') return 0;
    while (*p >= '0' && *p <= '9') p++;
    if (*p == '\0') return 1;
    return strncmp(p, ".tmp.", 5) == 0 ? 2 : 0;
}

/* Removes finished shards too when all is set, leftover temp files always; returns the count. */
static size_t clear_shards(const char *work_dir, int all)
{
    DIR *d = opendir(work_dir);
    if (!d) return 0;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        int kind = shard_file_kind(de->d_name);
        if (kind == 2 || (kind == 1 && all)) {
            char *p = path_join(work_dir, de->d_name);
            if (unlink(p) == 0 && kind == 1) n++;
            free(p);
        }
    }
    closedir(d);
    return n;
}

/* ---- the job signature -------------------------------------------------------------------- */

typedef struct job_sig {
    size_t n_items, chunk_size;
    char *signature;
} job_sig;

static char *format_sig(const job_sig *s)
{
    return xasprintf("espnet3 runner 1\nn_items %zu\nchunk_size %zu\nsignature %s\n", s->n_items, s->chunk_size,
                     s->signature);
}

/* Reads <work_dir>/runner.sig; 0 when absent or unreadable (treated as a different job). */
static int read_sig(const char *work_dir, job_sig *out)
{
    char *path = path_join(work_dir, sig_name);
    esp_err e;
    size_t len;
    char *text = path_exists(path) ? read_file(path, READ_SMALL, &len, &e) : NULL;
    free(path);
    if (!text) return 0;
    /* The signature is taken verbatim (it may hold any bytes but NUL) up to the final newline. */
    const char *sig = strstr(text, "\nsignature ");
    size_t pos = sig ? (size_t)(sig - text) + 11 : 0;
    int ok = sscanf(text, "espnet3 runner 1 n_items %zu chunk_size %zu", &out->n_items, &out->chunk_size) == 2 &&
             sig && len > pos && text[len - 1] == '\n';
    if (ok) out->signature = xstrndup(text + pos, len - pos - 1);
    free(text);
    return ok;
}

/* ---- runner_run --------------------------------------------------------------------------- */

static int resolve_env(const parallel_cfg *par, const runner_env **env, int *n_workers, esp_err *err)
{
    const char *name = par && par->env ? par->env : "local";
    *env = NULL;
    for (int i = 0; i < N_ENVS; i++)
        if (strcmp(envs[i].name, name) == 0) *env = &envs[i];
    char known[128] = "";
    for (int i = 0; i < N_ENVS; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", envs[i].name);
    if (!*env) return esp_fail(err, "parallel.env: %s is not supported (supported: %s)", name, known);
    /* The SLURM-only keys do nothing elsewhere: say so once rather than drop them silently. */
    static int warned;
    if (strcmp(name, "slurm") != 0 && par && (par->options || par->async_mode) && !warned) {
        warned = 1;
        log_warn("parallel.%s: only env slurm uses it; ignored with env %s", par->options ? "options" : "async_mode",
                 name);
    }
    if ((*env)->workers) return (*env)->workers(par, n_workers, err);
    /* No parallel: block is one worker; a loaded block holds its declared default (config_values.c). */
    int64_t n = par ? par->n_workers : 1;
    if (n < 1) return esp_fail(err, "parallel.n_workers: must be at least 1, got %lld", (long long)n);
    if (n > CFG_MAX_WORKERS)
        return esp_fail(err, "parallel.n_workers: %lld is more than the %d supported", (long long)n, CFG_MAX_WORKERS);
    *n_workers = (int)n;
    return 0;
}

int runner_workers(const parallel_cfg *par, int *n_workers, esp_err *err)
{
    const runner_env *env;
    return resolve_env(par, &env, n_workers, err);
}

static int run_locked(const runner_job *job, const runner_env *env, const parallel_cfg *par, int n_workers,
                      esp_err *err);

static int run_worker(const runner_job *job, esp_err *err);

int runner_run(const runner_job *job, const parallel_cfg *par, esp_err *err)
{
    ESP_CHECK(job && job->forward && job->work_dir);
    int worker = run_worker(job, err);
    if (worker != 0) return worker;
    const runner_env *env;
    int n_workers = 1;
    if (resolve_env(par, &env, &n_workers, err) != 0) return -1;
    if (mkdir_p(job->work_dir, err) != 0) return -1;
    /* Two runs on one work_dir would delete each other's temp files: the second one stops. */
    char *lock_path = path_join(job->work_dir, "runner.lock");
    int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    int rc;
    if (fd < 0) {
        rc = esp_fail(err, "%s: cannot open: %s", lock_path, strerror(errno));
    } else if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        rc = esp_fail(err, "%s: another run is using %s (wait for it to end)", job->name ? job->name : "runner",
                      job->work_dir);
    } else {
        rc = run_locked(job, env, par, n_workers, err);
    }
    if (fd >= 0) close(fd); /* workers inherited it but are all reaped by now */
    free(lock_path);
    return rc;
}

static int run_locked(const runner_job *job, const runner_env *env, const parallel_cfg *par, int n_workers,
                      esp_err *err)
{
    const char *name = job->name ? job->name : "runner";
    job_sig want = {job->n_items, job->chunk_size, (char *)(job->signature ? job->signature : "")};
    job_sig have = {0};
    int had = read_sig(job->work_dir, &have);
    int same_inputs = had && have.n_items == want.n_items && strcmp(have.signature, want.signature) == 0;
    if (want.chunk_size == 0) {
        /* Keep an earlier run's automatic choice, so changing n_workers does not throw work away. */
        size_t mult = job->chunk_multiple ? job->chunk_multiple : 1;
        if (same_inputs && have.chunk_size % mult == 0) want.chunk_size = have.chunk_size;
        else want.chunk_size = (job->n_items / (8 * (size_t)n_workers) + mult - 1) / mult * mult;
        if (want.chunk_size == 0) want.chunk_size = mult;
    }
    int same = same_inputs && have.chunk_size == want.chunk_size;
    /* Cluster jobs of an earlier job may still write here: stop them before clearing. */
    if (!same && had && env->forget) env->forget(job->work_dir);
    /* Temp files belong to workers that died with their driver, unless workers outlive drivers. */
    size_t removed = !same || !env->detached ? clear_shards(job->work_dir, !same) : 0;
    if (removed)
        log_info("%s: %s holds %zu shards of a different job (%s); cleared them", name, job->work_dir, removed,
                 !had ? "no runner.sig" : !same_inputs ? "other inputs" : "other chunk size");
    free(have.signature);
    if (!same) {
        char *text = format_sig(&want);
        char *path = path_join(job->work_dir, sig_name);
        int rc = atomic_write_file(path, text, strlen(text), err);
        free(path);
        free(text);
        if (rc != 0) return -1;
    }

    runner_plan plan = {job, par, n_workers, want.chunk_size, 0, NULL, 0, NULL};
    plan.n_shards = (job->n_items + plan.chunk_size - 1) / plan.chunk_size;
    plan.pending = xcalloc(plan.n_shards ? plan.n_shards : 1, sizeof *plan.pending);
    for (size_t k = 0; k < plan.n_shards; k++) {
        char *path = runner_shard_path(job->work_dir, k);
        size_t first, count;
        runner_shard_range(&plan, k, &first, &count);
        if (!path_exists(path)) {
            plan.pending[plan.n_pending++] = k;
        } else if (!runner_shard_done(&plan, k)) {
            log_warn("%s: %s does not hold items %zu-%zu; redoing it", name, path, first, first + count - 1);
            unlink(path);
            plan.pending[plan.n_pending++] = k;
        }
        free(path);
    }
    int rc = 0;
    if (plan.n_pending == 0) {
        log_info("%s: all %zu shards already done in %s", name, plan.n_shards, job->work_dir);
    } else {
        if (plan.n_pending < plan.n_shards)
            log_info("%s: resuming: %zu of %zu shards already done in %s", name, plan.n_shards - plan.n_pending,
                     plan.n_shards, job->work_dir);
        rc = env->run(&plan, err);
    }
    free(plan.pending);
    return rc;
}

/* Inside a slurm job: compute this job's shards of the work_dir the driver named and return
 * RUNNER_PENDING (the driver merges); any other runner_job of the stage is skipped the same way. */
static int run_worker(const runner_job *job, esp_err *err)
{
    char *target;
    size_t *shards, n;
    int processes;
    int is = runner_slurm_worker_task(&target, &shards, &n, &processes, err);
    if (is <= 0) return is;
    char *mine = path_absolute(job->work_dir);
    int rc = RUNNER_PENDING;
    if (strcmp(mine, target) == 0) {
        runner_note_worker_found();
        const char *name = job->name ? job->name : "runner";
        job_sig have = {0};
        if (!read_sig(job->work_dir, &have) || have.n_items != job->n_items ||
            strcmp(have.signature, job->signature ? job->signature : "") != 0 || have.chunk_size == 0) {
            rc = esp_fail(err, "%s: the inputs changed since this job was submitted (%s/runner.sig); rerun the stage",
                          name, job->work_dir);
        } else {
            runner_plan plan = {job, NULL, processes, have.chunk_size, 0, NULL, 0, NULL};
            plan.n_shards = (job->n_items + plan.chunk_size - 1) / plan.chunk_size;
            plan.pending = xcalloc(n ? n : 1, sizeof *plan.pending);
            for (size_t i = 0; i < n && rc == RUNNER_PENDING; i++) {
                if (shards[i] >= plan.n_shards)
                    rc = esp_fail(err, "%s: shard %zu of this job is beyond the %zu shards of %s", name, shards[i],
                                  plan.n_shards, job->work_dir);
                else if (!runner_shard_done(&plan, shards[i])) plan.pending[plan.n_pending++] = shards[i];
            }
            if (rc == RUNNER_PENDING && plan.n_pending > 0 && runner_local_run(&plan, err) != 0) rc = -1;
            if (rc == RUNNER_PENDING)
                log_info("%s: this job's %zu shards are done (%zu computed now)", name, n, plan.n_pending);
            free(plan.pending);
        }
        free(have.signature);
    }
    free(mine);
    free(target);
    free(shards);
    return rc;
}

/* ---- ordered iteration -------------------------------------------------------------------- */

int runner_for_each(const runner_job *job, int (*fn)(size_t idx, const void *data, size_t len, void *ctx),
                    void *ctx, esp_err *err)
{
    const char *name = job->name ? job->name : "runner";
    job_sig have = {0};
    if (!read_sig(job->work_dir, &have) || have.n_items != job->n_items ||
        strcmp(have.signature, job->signature ? job->signature : "") != 0 ||
        (job->chunk_size && have.chunk_size != job->chunk_size) || have.chunk_size == 0) {
        free(have.signature);
        return esp_fail(err, "%s: %s holds no results of this job (run it first)", name, job->work_dir);
    }
    free(have.signature);
    runner_plan plan = {job, NULL, 1, have.chunk_size, 0, NULL, 0, NULL};
    plan.n_shards = (job->n_items + plan.chunk_size - 1) / plan.chunk_size;
    unsigned char *data = NULL;
    size_t cap = 0;
    int rc = 0;
    for (size_t k = 0; k < plan.n_shards && rc == 0; k++) {
        size_t first, count;
        runner_shard_range(&plan, k, &first, &count);
        char *path = runner_shard_path(job->work_dir, k);
        FILE *fp = fopen(path, "rb");
        if (!fp) {
            rc = esp_fail(err, "%s: %s: %s (the run did not finish; run it again)", name, path, strerror(errno));
        } else if (!runner_shard_read_header(fp, first, count)) {
            rc = esp_fail(err, "%s: %s: not a shard of items %zu-%zu (remove %s and run again)", name, path, first,
                          first + count - 1, job->work_dir);
        }
        for (size_t idx = first; rc == 0 && idx < first + count; idx++) {
            uint64_t at, len;
            if (!runner_shard_read_item(fp, &at, &len) || at != idx) {
                rc = esp_fail(err, "%s: %s: item %zu missing or out of order (remove %s and run again)", name, path,
                              idx, job->work_dir);
                break;
            }
            if (len > cap) {
                cap = (size_t)len;
                data = xrealloc(data, cap);
            }
            if (len && fread(data, 1, (size_t)len, fp) != len) {
                rc = esp_fail(err, "%s: %s: item %zu is cut short (remove %s and run again)", name, path, idx,
                              job->work_dir);
                break;
            }
            rc = fn(idx, data, (size_t)len, ctx);
        }
        if (rc == 0 && fgetc(fp) != EOF)
            rc = esp_fail(err, "%s: %s: data after item %zu (remove %s and run again)", name, path,
                          first + count - 1, job->work_dir);
        if (fp) fclose(fp);
        free(path);
    }
    free(data);
    return rc;
}
