/* Runner front end: the env table, the work_dir (signature, stale and finished shards), the shard
 * file format and the ordered iteration over results. The environments live in runner_<env>.c.
 *
 * Shard file <work_dir>/shard.<k> (integers are u64 little-endian):
 *   "ESP3SHD1" first count   then per item: idx len <len bytes>   then end of file.
 * It is written to shard.<k>.tmp.<pid> and renamed, so a shard that exists is complete. */
#include "core/runner/runner_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "core/base/fsio.h"

static const char shard_magic[8] = {'E', 'S', 'P', '3', 'S', 'H', 'D', '1'};
static const char sig_name[] = "runner.sig";

/* Every env a config may name. */
static const runner_env envs[] = {
    {"local", runner_local_run, NULL, 0, NULL},
    {"local_gpu", runner_local_gpu_run, runner_gpu_workers, 0, NULL},
    {"slurm", runner_slurm_run, NULL, 1, runner_slurm_forget},
};
enum { N_ENVS = sizeof envs / sizeof envs[0] };

/* ---- runner_buf --------------------------------------------------------------------------- */

static void buf_reserve(runner_buf *b, size_t need)
{
    if (need <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) cap *= 2;
    b->data = xrealloc(b->data, cap);
    b->cap = cap;
}

void runner_buf_append(runner_buf *b, const void *data, size_t len)
{
    buf_reserve(b, b->len + len);
    if (len) memcpy(b->data + b->len, data, len);
    b->len += len;
}

void runner_buf_printf(runner_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    ESP_CHECK(n >= 0);
    buf_reserve(b, b->len + (size_t)n + 1); /* vsnprintf's NUL is written but not kept */
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void runner_buf_free(runner_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* ---- the process's command line, stage and pending work ------------------------------------ */

static struct {
    int argc;
    char **argv;
    char *stage;
    int n_pending;
    char *pending_jobs;
    int worker_matched; /* a slurm worker found the runner_job it was started for */
} proc;

static void free_proc(void)
{
    for (int i = 0; i < proc.argc; i++) free(proc.argv[i]);
    free(proc.argv);
    free(proc.stage);
    free(proc.pending_jobs);
}

void runner_set_command(int argc, char *const argv[])
{
    if (!proc.argv && !proc.stage && !proc.pending_jobs) atexit(free_proc);
    for (int i = 0; i < proc.argc; i++) free(proc.argv[i]);
    free(proc.argv);
    proc.argc = argc;
    proc.argv = xcalloc((size_t)argc + 1, sizeof *proc.argv);
    for (int i = 0; i < argc; i++) proc.argv[i] = xstrdup(argv[i]);
}

void runner_set_stage(const char *name)
{
    if (!proc.argv && !proc.stage && !proc.pending_jobs) atexit(free_proc);
    free(proc.stage);
    proc.stage = name ? xstrdup(name) : NULL;
}

char *const *runner_command(int *argc)
{
    *argc = proc.argc;
    return proc.argv;
}

const char *runner_stage(void) { return proc.stage; }

void runner_note_pending(const char *job_ids)
{
    if (!proc.argv && !proc.stage && !proc.pending_jobs) atexit(free_proc);
    proc.n_pending++;
    if (!job_ids || !*job_ids) return;
    char *all = proc.pending_jobs && *proc.pending_jobs ? xasprintf("%s, %s", proc.pending_jobs, job_ids)
                                                        : xstrdup(job_ids);
    free(proc.pending_jobs);
    proc.pending_jobs = all;
}

int runner_pending_count(void) { return proc.n_pending; }
int runner_worker_found_job(void) { return proc.worker_matched; }
const char *runner_pending_jobs(void) { return proc.pending_jobs ? proc.pending_jobs : ""; }

/* ---- helpers ------------------------------------------------------------------------------ */

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

void runner_shard_range(const runner_plan *plan, size_t k, size_t *first, size_t *count)
{
    size_t n = plan->job->n_items;
    *first = k * plan->chunk_size;
    *count = n - *first < plan->chunk_size ? n - *first : plan->chunk_size;
}

char *runner_shard_path(const char *work_dir, size_t k)
{
    return xasprintf("%s/shard.%zu", work_dir, k);
}

const char *runner_item_name(const runner_job *job, size_t idx)
{
    static char buf[64];
    const char *name = job->item_name ? job->item_name(idx, job->arg) : NULL;
    if (name) return name;
    snprintf(buf, sizeof buf, "item %zu", idx);
    return buf;
}

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
    char *text = path_exists(path) ? read_file(path, &len, &e) : NULL;
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
    /* An absent n_workers reads as 0: one worker, as without a parallel: block. */
    int64_t n = par ? par->n_workers : 1;
    if (n < 0) return esp_fail(err, "parallel.n_workers: must be at least 1, got %lld", (long long)n);
    if (n > 4096) return esp_fail(err, "parallel.n_workers: %lld is more than the 4096 supported", (long long)n);
    *n_workers = n == 0 ? 1 : (int)n;
    return 0;
}

/* A finished shard whose header does not describe its items is from elsewhere: redo it. */
static int shard_header_ok(const char *path, size_t first, size_t count);

int runner_shard_done(const runner_plan *plan, size_t k)
{
    size_t first, count;
    runner_shard_range(plan, k, &first, &count);
    char *path = runner_shard_path(plan->job->work_dir, k);
    int ok = shard_header_ok(path, first, count);
    free(path);
    return ok;
}

static int shard_header_ok(const char *path, size_t first, size_t count)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) return 0;
    unsigned char h[24];
    int ok = fread(h, 1, sizeof h, fp) == sizeof h && memcmp(h, shard_magic, 8) == 0 && get_u64(h + 8) == first &&
             get_u64(h + 16) == count;
    fclose(fp);
    return ok;
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
        } else if (!shard_header_ok(path, first, count)) {
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
        proc.worker_matched = 1;
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

/* ---- the worker side: one shard ----------------------------------------------------------- */

int runner_write_shard(const runner_plan *plan, size_t k, void *env, void (*before_item)(size_t idx, void *ctx),
                       void *ctx, esp_err *err)
{
    const runner_job *job = plan->job;
    size_t first, count;
    runner_shard_range(plan, k, &first, &count);
    char *path = runner_shard_path(job->work_dir, k);
    atomic_file af;
    if (atomic_open(&af, path, err) != 0) {
        free(path);
        return -1;
    }
    unsigned char h[24];
    memcpy(h, shard_magic, 8);
    put_u64(h + 8, first);
    put_u64(h + 16, count);
    fwrite(h, 1, sizeof h, af.fp);
    runner_buf out = {0};
    int rc = 0;
    for (size_t idx = first; idx < first + count; idx++) {
        if (before_item) before_item(idx, ctx);
        out.len = 0;
        esp_err e;
        strcpy(e.msg, "forward failed");
        if (job->forward(idx, env, &out, &e) != 0) {
            rc = esp_fail(err, "%s: %s", runner_item_name(job, idx), e.msg);
            break;
        }
        put_u64(h, idx);
        put_u64(h + 8, out.len);
        fwrite(h, 1, 16, af.fp);
        if (out.len) fwrite(out.data, 1, out.len, af.fp);
    }
    runner_buf_free(&out);
    if (rc == 0 && ferror(af.fp)) rc = esp_fail(err, "%s: write failed: %s (check free disk space)", path, strerror(errno));
    if (rc == 0) rc = atomic_commit(&af, err);
    else atomic_abort(&af);
    free(path);
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
        unsigned char h[24];
        if (!fp) {
            rc = esp_fail(err, "%s: %s: %s (the run did not finish; run it again)", name, path, strerror(errno));
        } else if (fread(h, 1, 24, fp) != 24 || memcmp(h, shard_magic, 8) != 0 || get_u64(h + 8) != first ||
                   get_u64(h + 16) != count) {
            rc = esp_fail(err, "%s: %s: not a shard of items %zu-%zu (remove %s and run again)", name, path, first,
                          first + count - 1, job->work_dir);
        }
        for (size_t idx = first; rc == 0 && idx < first + count; idx++) {
            if (fread(h, 1, 16, fp) != 16 || get_u64(h) != idx) {
                rc = esp_fail(err, "%s: %s: item %zu missing or out of order (remove %s and run again)", name, path,
                              idx, job->work_dir);
                break;
            }
            uint64_t len = get_u64(h + 8);
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
