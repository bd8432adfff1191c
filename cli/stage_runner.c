#include "cli/stage_runner.h"
#include "cli/version.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/dirlock.h"
#include "core/base/fsio.h"
#include "core/base/progress.h"
#include "core/compute/backend.h"
#include "core/config/yamltree.h"
#include "core/dist/dist.h"
#include "core/runner/runner.h"

static void available_list(char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < stage_count && used < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%d %s", i ? ", " : "", stage_table[i].number,
                                 stage_table[i].name);
}

static int unknown_stage(const char *name, esp_err *err)
{
    char avail[512];
    available_list(avail, sizeof avail);
    return esp_fail(err, "unknown stage '%s' (available: %s, or all)", name, avail);
}

int select_stages(const cli_args *a, const stage_def **out, esp_err *err)
{
    int n = 0;
    if (a->stages) {
        int all = 0;
        for (int k = 0; k < a->n_stages; k++) {
            if (!strcmp(a->stages[k], "all")) all = 1;
            else if (!stage_by_name(a->stages[k])) return unknown_stage(a->stages[k], err);
        }
        for (int i = 0; i < stage_count; i++) {
            int want = all;
            for (int k = 0; k < a->n_stages && !want; k++)
                want = stage_by_name(a->stages[k]) == &stage_table[i];
            if (want) out[n++] = &stage_table[i];
        }
        return n;
    }
    long lo = a->stage >= 0 ? a->stage : stage_table[0].number;
    long hi = a->stop_stage >= 0 ? a->stop_stage : (a->stage >= 0 ? 100 : stage_table[stage_count - 1].number);
    if (hi < lo) return esp_fail(err, "--stop_stage %ld is before --stage %ld", hi, lo);
    for (int i = 0; i < stage_count; i++)
        if (stage_table[i].number >= lo && stage_table[i].number <= hi) out[n++] = &stage_table[i];
    if (n == 0) {
        char avail[512];
        available_list(avail, sizeof avail);
        return esp_fail(err, "no stage numbered %ld..%ld (available: %s)", lo, hi, avail);
    }
    return n;
}

static const esp_config *config_for(const stage_def *s, const esp_configs *cfgs) { return stage_config(s, cfgs); }

static const char *needs_name(const stage_def *s)
{
    return s->needs == NEEDS_PACK ? "publication or inference" : config_kind_name((config_kind)s->needs);
}

static int missing_config(const stage_def *s, esp_err *err)
{
    return esp_fail(err, "stage %s needs a %s config (give %s FILE%s)", s->name, needs_name(s), stage_config_option(s),
                    s->needs == NEEDS_TRAINING ? ", or --config FILE" : "");
}

/* "file:line:col" of key in cfg, else the file. */
static void where_is(const esp_config *cfg, const char *key, char *where, size_t n)
{
    const ynode *y = cfg ? yt_get_path(cfg->tree, key) : NULL;
    if (y) ymark_str(y->mark, where, n);
    else snprintf(where, n, "%s", cfg ? cfg->path : "config");
}

/* Training on GPUs: the ranks this command starts on its node (trainer.devices) need as many
 * GPUs. A process that a launcher already made a rank (srun, torchrun) is checked by stage 5
 * itself, where its local rank is known (dist_local_device). */
static int check_gpus_per_node(const esp_configs *cfgs, esp_err *err)
{
    const trainer_cfg *tc = training_of(cfgs)->trainer;
    int64_t devices = tc->devices; /* defaulted at load */
    esp_err e2;
    const dist_env *env = dist_process_env(&e2);
    if (!env || (env->source != DIST_NONE && env->world_size > 1)) return 0;
    int visible = backend_cuda_devices();
    if (devices <= visible) return 0;
    char where[512];
    where_is(cfgs->training, "trainer.devices", where, sizeof where);
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");
    return esp_fail(err, "%s: trainer.devices: %lld GPUs per node, but this node shows %d (CUDA_VISIBLE_DEVICES=%s; "
                         "one rank per GPU: lower trainer.devices or give the job more GPUs)",
                    where, (long long)devices, visible, vis ? vis : "(unset)");
}

/* A stage that computes must be able to open the backend its config names, before any stage runs
 * (trainer.accelerator: gpu on a machine without one fails here, not after stages 1-3); *kind is
 * what it runs on. */
static int check_backend(const stage_def *s, const esp_configs *cfgs, backend_kind *kind, esp_err *err)
{
    if (stage_backend(s, cfgs, kind, err) != 0) return -1;
    if (*kind == BACKEND_CUDA && s->needs == NEEDS_TRAINING) return check_gpus_per_node(cfgs, err);
    return 0;
}

int check_stage_configs(const cli_args *a, const stage_def **sel, backend_kind *kinds, int n, const esp_configs *cfgs,
                        esp_err *err)
{
    int named_all = 0;
    for (int k = 0; a->stages && k < a->n_stages; k++) named_all |= !strcmp(a->stages[k], "all");
    const stage_def *skipped[64];
    int kept = 0, n_skipped = 0;
    ESP_CHECK(n <= (int)(sizeof skipped / sizeof *skipped));
    for (int i = 0; i < n; i++) {
        if (config_for(sel[i], cfgs)) sel[kept++] = sel[i];
        /* A stage asked for by name must have its config; a range or `all` takes what it can run. */
        else if (a->stages && !named_all) return missing_config(sel[i], err);
        else skipped[n_skipped++] = sel[i];
    }
    if (kept == 0 && n > 0) return missing_config(skipped[0], err);
    for (int i = 0; i < kept; i++)
        if (check_backend(sel[i], cfgs, &kinds[i], err) != 0 || (sel[i]->check && sel[i]->check(cfgs, err) != 0))
            return -1;
    for (int i = 0; i < n_skipped; i++)
        log_info("skipping stage %s: no %s config given", skipped[i]->name, needs_name(skipped[i]));
    return kept;
}

int rotate_log(const char *dir, const char *stage, esp_err *err)
{
    char *cur = xasprintf("%s/%s.log", dir, stage);
    if (!path_exists(cur)) {
        free(cur);
        return 0;
    }
    int top = 1;
    for (;; top++) {
        char *p = xasprintf("%s/%s%d.log", dir, stage, top);
        int exists = path_exists(p);
        free(p);
        if (!exists) break;
    }
    int rc = 0;
    for (int k = top; k >= 1 && rc == 0; k--) {
        char *from = k == 1 ? xstrdup(cur) : xasprintf("%s/%s%d.log", dir, stage, k - 1);
        char *to = xasprintf("%s/%s%d.log", dir, stage, k);
        if (rename(from, to) != 0) rc = esp_fail(err, "%s: cannot rotate log to %s: %s", from, to, strerror(errno));
        free(from);
        free(to);
    }
    free(cur);
    return rc;
}

/* Ranks above 0 of a distributed stage write no config (rank 0 does) and print only warnings and
 * errors; with trainer.per_rank_logs each also logs everything to <stage>.rank<r>.log. */
static int run_stage_other_rank(const stage_def *s, backend_kind kind, const esp_configs *cfgs, int rank, esp_err *err)
{
    log_set_quiet(1);
    char *dir = s->output_dir(cfgs);
    const training_cfg *tc = training_of(cfgs);
    FILE *log_fp = NULL;
    if (tc && tc->trainer && tc->trainer->per_rank_logs) {
        char *path = xasprintf("%s/%s.rank%d.log", dir, s->name, rank);
        if (mkdir_p(dir, err) != 0 || !(log_fp = fopen(path, "w"))) {
            if (!log_fp && path_exists(dir)) esp_fail(err, "%s: cannot write the rank's log: %s", path, strerror(errno));
            free(path);
            free(dir);
            return -1;
        }
        free(path);
        log_set_file(log_fp);
        log_info("=== [START] stage: %s (rank %d) ===", s->name, rank);
    }
    stage_ctx ctx = {.configs = cfgs, .log_dir = dir, .backend = kind};
    int rc = s->run(&ctx, err);
    if (log_fp) {
        if (rc < 0) fprintf(log_fp, "espnet3: error: %s\n", err->msg);
        log_set_file(NULL);
        fclose(log_fp);
    }
    free(dir);
    return rc;
}

/* <dir>/requirements.txt: the build that ran the stage (version, backends, library versions), in
 * place of ESPnet3's pip freeze. */
static int write_requirements_file(const char *dir, esp_err *err)
{
    char *text = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&text, &len);
    ESP_CHECK(fp != NULL);
    print_version(fp);
    ESP_CHECK(fclose(fp) == 0);
    char *path = xasprintf("%s/requirements.txt", dir);
    int rc = atomic_write_file(path, text, len, err);
    free(path);
    free(text);
    return rc;
}

int run_stage(const stage_def *s, backend_kind kind, const esp_configs *cfgs, int write_requirements, esp_err *err)
{
    const dist_env *env = s->flags & STAGE_SPAWNS_RANKS ? dist_process_env(err) : NULL;
    if ((s->flags & STAGE_SPAWNS_RANKS) && !env) return -1;
    if (env && env->rank > 0) return run_stage_other_rank(s, kind, cfgs, env->rank, err);
    char *dir = s->output_dir(cfgs);
    /* One run per output folder: the lock comes before anything is written (log rotation too). */
    dir_lock lock = {.fd = -1};
    char *what = xasprintf("stage %s", s->name);
    int locked = mkdir_p(dir, err) == 0 && dir_lock_take(&lock, dir, what, err) == 0;
    free(what);
    if (!locked || rotate_log(dir, s->name, err) != 0) {
        dir_lock_release(&lock);
        free(dir);
        return -1;
    }
    char *log_path = xasprintf("%s/%s.log", dir, s->name);
    FILE *log_fp = fopen(log_path, "w");
    if (!log_fp) {
        esp_fail(err, "%s: cannot write the stage log: %s", log_path, strerror(errno));
        dir_lock_release(&lock);
        free(log_path);
        free(dir);
        return -1;
    }
    log_set_file(log_fp);
    double t0 = now_seconds();
    log_info("=== [START] stage: %s ===", s->name);
    const esp_config *cfg = config_for(s, cfgs);
    /* config.yaml for training (what asr_train_config points at, as ESPnet); the inference and
     * metrics configs under their own names, since stages 6 and 7 share ${inference_dir}. */
    char *cfg_out = s->needs == NEEDS_TRAINING ? xasprintf("%s/config.yaml", dir)
                                                : xasprintf("%s/%s.yaml", dir, config_kind_name(cfg->kind));
    int rc = config_write_resolved(cfg, cfg_out, err);
    free(cfg_out);
    if (rc == 0 && write_requirements) rc = write_requirements_file(dir, err);
    stage_ctx ctx = {.configs = cfgs, .log_dir = dir, .backend = kind};
    runner_set_stage(s->name); /* SLURM workers are told which stage to run */
    int pending_before = runner_pending_count();
    if (rc == 0) {
        err->msg[0] = '\0';
        rc = s->run(&ctx, err);
        ESP_CHECK(rc >= 0 || err->msg[0]); /* a failing stage must say why */
    }
    if (rc == STAGE_STOPPED)
        log_info("=== [STOPPED] stage: %s (%.1fs): resume with the same command ===", s->name, now_seconds() - t0);
    else if (rc == 0 && runner_pending_count() > pending_before)
        log_info("=== [SUBMITTED] stage: %s (%.1fs): results pending in SLURM jobs %s ===", s->name,
                 now_seconds() - t0, runner_pending_jobs());
    else if (rc == 0) log_info("=== [DONE] stage: %s (%.1fs) ===", s->name, now_seconds() - t0);
    else {
        fprintf(log_fp, "espnet3: error: %s\n", err->msg);
        log_info("=== [FAILED] stage: %s (%.1fs) ===", s->name, now_seconds() - t0);
    }
    log_set_file(NULL);
    fclose(log_fp);
    dir_lock_release(&lock);
    free(log_path);
    free(dir);
    return rc;
}
