/* The runner on SLURM (parallel.env: slurm) against the project's own cluster
 * (scripts/slurm_local.sh up in a temp folder, down at the end), with collect_stats of the tiny
 * recipe as the vehicle: sync mode equals a local run byte for byte and reports a failed job with
 * its log; async mode submits and exits, a rerun while the jobs are queued submits nothing, and
 * after one job is cancelled a rerun completes without redoing the shards the other one finished.
 * Also local_gpu without a GPU. */
#include <sys/stat.h>
#include <time.h>

#include "core/runner/runner_env.h"
#include "test/unit/slurm_test_cluster.h"

/* The tiny recipe's stages through the binary, data under workdir, stats under <workdir>/<stats>. */
static const char *espnet3_command(const char *stats, const char *extra)
{
    static char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "timeout 300 '%s' --config recipes/espeak_fortunes/conf/training_tiny.yaml data_dir=%s/data "
             "dataset_dir=%s/dl stats_dir=%s/%s exp_dir=%s/exp %s",
             env_or("ESPNET3_BIN", "./espnet3"), workdir, workdir, workdir, stats, workdir, extra);
    return cmd;
}

static int espnet3(const char *log, const char *stats, const char *extra)
{
    return sh(log, "%s", espnet3_command(stats, extra));
}

/* Stages 1-2, then stage 3 locally as the reference under <workdir>/ref (once per run of the tests). */
static void prepare_reference(void)
{
    cr_assert_eq(slurm_cluster_sh_once(workdir, "prep", "%s", espnet3_command("ref", "--stage 1 --stop_stage 3")), 0, "stages 1-3 failed: %s",
                 slurp("%s/prep.err", workdir));
}

static void assert_same_as_reference(const char *stats)
{
    static const char *const files[] = {"feats_shape", "feats_stats.npz", "stats_keys", "text_shape.char"};
    static const char *const splits[] = {"train", "valid"};
    for (int s = 0; s < 2; s++)
        for (int f = 0; f < 4; f++)
            cr_assert_eq(sh("cmp", "cmp '%s/ref/%s/%s' '%s/%s/%s/%s'", workdir, splits[s], files[f], workdir, stats,
                            splits[s], files[f]),
                         0, "%s/%s/%s differs from the local run", stats, splits[s], files[f]);
}

/* No Criterion .timeout (it leaks under ASan): `timeout` bounds each run. */
TestSuite(runner_slurm, .init = setup, .fini = teardown);

Test(runner_slurm, sync_equals_local_and_a_failed_job_names_its_log)
{
    start_cluster();
    prepare_reference();
    cr_assert_eq(espnet3("sync", "st", "--stages collect_stats parallel.env=slurm parallel.n_workers=2"), 0,
                 "slurm run failed: %s", slurp("%s/sync.err", workdir));
    assert_same_as_reference("st");
    char *err = slurp("%s/sync.err", workdir);
    cr_assert(strstr(err, "submitted SLURM array job") && strstr(err, ": 2 tasks (1 worker process each)"), "%s", err);
    free(err);

    /* The options become sbatch settings; the job logs go to log_directory. 4 workers of 2
     * processes = 2 jobs. A broken wav fails its job, and the error names the job's log. */
    char *manifest = slurp("%s/data/manifest/valid.tsv", workdir);
    char wav[512];
    cr_assert_eq(sscanf(manifest, "%*[^\t]\t%511[^\t]", wav), 1);
    free(manifest);
    FILE *fp = fopen(wav, "w");
    cr_assert_not_null(fp);
    fputs("not a wav file\n", fp);
    fclose(fp);
    char extra[2048];
    snprintf(extra, sizeof extra,
             "--stages collect_stats parallel.env=slurm parallel.n_workers=4 parallel.options.processes=2 "
             "parallel.options.queue=debug parallel.options.memory=100MB parallel.options.walltime=00:05:00 "
             "parallel.options.cores=1 parallel.options.log_directory=%s/joblogs "
             "'parallel.options.job_script_prologue=[\"echo prologue-ran\"]' "
             "'parallel.options.job_extra_directives=[\"--comment=espnet3-test\"]'",
             workdir);
    cr_assert_eq(espnet3("broken", "st2", extra), 1, "a failed job must fail the run: %s",
                 slurp("%s/broken.err", workdir));
    char *script = slurp("%s/st2/train/.runner/slurm/sub.0.sh", workdir);
    cr_assert_not_null(script);
    cr_assert(strstr(script, "\n#SBATCH -p debug\n") && strstr(script, "\n#SBATCH --mem=96M\n") &&
                  strstr(script, "\n#SBATCH -t 00:05:00\n") && strstr(script, "\n#SBATCH --cpus-per-task=1\n") &&
                  strstr(script, "\n#SBATCH --comment=espnet3-test\n") && strstr(script, "\necho prologue-ran\n"),
              "%s", script);
    free(script);
    err = slurp("%s/broken.err", workdir);
    cr_assert(strstr(err, "collect_stats train: submitted SLURM array job") &&
                  strstr(err, ": 2 tasks (2 worker processes each)"),
              "%s", err);
    const char *line = strstr(err, "espnet3: error: collect_stats valid: SLURM job ");
    cr_assert_not_null(line, "%s", err);
    cr_assert(strstr(line, "ended (FAILED)") && strstr(line, "cannot read audio") && strstr(line, wav), "%s", line);
    char log[1024];
    const char *at = strstr(line, "(log: ");
    cr_assert_not_null(at);
    cr_assert_eq(sscanf(at + 6, "%1023[^:]", log), 1);
    cr_assert_eq(strncmp(log, workdir, strlen(workdir)), 0, "%s", log);
    cr_assert(strstr(log, "/joblogs/espnet3-"), "%s", log);
    char *text = slurp("%s", log);
    cr_assert_not_null(text, "no job log %s", log);
    cr_assert(strstr(text, "prologue-ran\n") && strstr(text, "cannot read audio"), "%s", text);
    free(text);
    free(err);
}

Test(runner_slurm, async_submits_then_a_rerun_after_scancel_redoes_only_unfinished_shards)
{
    start_cluster();
    prepare_reference();
    const char *slurm = "--stages collect_stats parallel.env=slurm parallel.n_workers=2";
    char held[512];
    snprintf(held, sizeof held, "%s parallel.async_mode=true 'parallel.options.job_extra_directives=[--hold]'", slurm);
    /* Held jobs: the test decides which one runs. */
    cr_assert_eq(espnet3("async", "st", held), 0, "async submit failed: %s", slurp("%s/async.err", workdir));
    char *out = slurp("%s/async.out", workdir);
    long long train = first_job_id("st/train/.runner"), valid = first_job_id("st/valid/.runner");
    char ids[128];
    snprintf(ids, sizeof ids, "submitted to SLURM (jobs %lld, %lld)", train, valid);
    cr_assert(strstr(out, ids) && strstr(out, "rerun the same command"), "%s", out);
    free(out);
    char path[512];
    snprintf(path, sizeof path, "%s/st/train/feats_shape", workdir);
    cr_assert_neq(access(path, F_OK), 0, "async mode must not merge before the jobs ran");

    /* A rerun while both jobs are queued submits nothing new. */
    cr_assert_eq(espnet3("again", "st", held), 0, "%s", slurp("%s/again.err", workdir));
    char *err = slurp("%s/again.err", workdir);
    cr_assert(strstr(err, "24 of the 24 unfinished shards are still in 2 queued or running SLURM tasks"), "%s", err);
    cr_assert_null(strstr(err, "submitted SLURM array job"), "%s", err);
    free(err);
    char *jobs = slurp("%s/st/train/.runner/slurm/jobs", workdir);
    cr_assert_eq(count_lines(jobs), 1, "%s", jobs);
    free(jobs);

    /* Cancel train's task 1, let task 0 and valid's job run, and wait for them. */
    cr_assert_eq(sh("cancel", "scancel %lld_1 && scontrol release %lld && scontrol release %lld", train, train, valid),
                 0, "%s", slurp("%s/cancel.err", workdir));
    char both[64];
    snprintf(both, sizeof both, "%lld,%lld", train, valid);
    wait_until_gone(both);
    /* Task 0 had the even shards (round robin); remember their files. */
    ino_t ino[24] = {0};
    for (int k = 0; k < 24; k++) {
        snprintf(path, sizeof path, "%s/st/train/.runner/shard.%d", workdir, k);
        struct stat sb;
        int have = stat(path, &sb) == 0;
        cr_assert_eq(have, k % 2 == 0, "shard %d %s", k, have ? "exists" : "is missing");
        if (have) ino[k] = sb.st_ino;
    }

    cr_assert_eq(espnet3("rerun", "st", slurm), 0, "rerun failed: %s", slurp("%s/rerun.err", workdir));
    assert_same_as_reference("st");
    err = slurp("%s/rerun.err", workdir);
    cr_assert(strstr(err, "resuming: 12 of 24 shards already done") &&
                  strstr(err, "for 12 shards; logs:") && strstr(err, "collect_stats valid: all 6 shards already done"),
              "%s", err);
    free(err);
    for (int k = 0; k < 24; k += 2) {
        snprintf(path, sizeof path, "%s/st/train/.runner/shard.%d", workdir, k);
        struct stat sb;
        cr_assert_eq(stat(path, &sb), 0);
        cr_assert_eq(sb.st_ino, ino[k], "shard %d was written again", k);
    }
}

Test(runner_local_gpu, without_a_gpu_is_a_clear_error, .init = setup, .fini = teardown)
{
    cr_assert_eq(slurm_cluster_sh_once(workdir, "prep", "%s", espnet3_command("ref", "--stage 1 --stop_stage 2")), 0, "%s", slurp("%s/prep.err", workdir));
    /* An empty CUDA_VISIBLE_DEVICES hides every GPU, also in a CUDA build on a GPU machine. */
    cr_assert_eq(sh("gpu", "CUDA_VISIBLE_DEVICES= timeout 60 '%s' --config "
                           "recipes/espeak_fortunes/conf/training_tiny.yaml data_dir=%s/data dataset_dir=%s/dl stats_dir=%s/st "
                           "exp_dir=%s/exp --stages collect_stats parallel.env=local_gpu parallel.n_workers=2",
                    env_or("ESPNET3_BIN", "./espnet3"), workdir, workdir, workdir, workdir),
                 1);
    char *err = slurp("%s/gpu.err", workdir);
    cr_assert(strstr(err, "espnet3: error: parallel.env: local_gpu: no GPU is visible (n_workers=2 > num_gpus=0"),
              "%s", err);
    free(err);
}

Test(runner_slurm, changed_inputs_cancel_the_queued_jobs_of_the_old_ones)
{
    start_cluster();
    cr_assert_eq(slurm_cluster_sh_once(workdir, "prep", "%s", espnet3_command("ref", "--stage 1 --stop_stage 2")), 0, "%s", slurp("%s/prep.err", workdir));
    const char *held = "--stages collect_stats parallel.env=slurm parallel.n_workers=2 parallel.async_mode=true "
                       "'parallel.options.job_extra_directives=[--hold]'";
    cr_assert_eq(espnet3("old", "st", held), 0, "%s", slurp("%s/old.err", workdir));
    long long old = first_job_id("st/train/.runner");
    char extra[512];
    snprintf(extra, sizeof extra, "%s model.frontend_conf.n_mels=40", held);
    cr_assert_eq(espnet3("new", "st", extra), 0, "%s", slurp("%s/new.err", workdir));
    char *err = slurp("%s/new.err", workdir), want[128];
    for (int t = 0; t < 2; t++) {
        snprintf(want, sizeof want, "cancelled SLURM job %lld_%d of the earlier job", old, t);
        cr_assert(strstr(err, want), "%s", err);
    }
    free(err);
    cr_assert_neq(first_job_id("st/train/.runner"), old);
    char *jobs = slurp("%s/st/train/.runner/slurm/jobs", workdir);
    cr_assert_eq(count_lines(jobs), 1, "%s", jobs);
    free(jobs);
    cr_assert_eq(sh("q", "squeue -h -j %lld 2>/dev/null || true", old), 0);
    char *q = slurp("%s/q.out", workdir);
    cr_assert_str_eq(q, "", "the old job is still queued: %s", q);
    free(q);
}

/* The two-node form other tests build on (distributed training under srun): n1 and n2 are two
 * slurmd on localhost, and srun --mpi=pmix gives each task its PMIx rank. */
Test(runner_slurm, two_node_cluster_runs_srun_with_pmix)
{
    if (geteuid() != 0) cr_skip_test("the SLURM tests start munged, slurmctld and slurmd as root; run them as root");
    if (sh("install", "scripts/slurm_local.sh install") != 0)
        cr_skip_test("the SLURM packages are missing and could not be installed: %s", slurp("%s/install.err", workdir));
    cluster_up = 1;
    cr_assert_eq(sh("up", "SLURM_LOCAL_NODES=2 scripts/slurm_local.sh up -d '%s/cluster'", workdir), 0, "%s",
                 slurp("%s/up.err", workdir));
    cr_assert_eq(sh("srun",
                    "export SLURM_CONF='%s/cluster/slurm.conf'; timeout 60 srun -N2 -n2 --mpi=pmix sh -c "
                    "'echo $SLURMD_NODENAME rank=$PMIX_RANK' | sort",
                    workdir),
                 0, "%s", slurp("%s/srun.err", workdir));
    char *out = slurp("%s/srun.out", workdir);
    cr_assert_str_eq(out, "n1 rank=0\nn2 rank=1\n");
    free(out);
}

/* With GPU ids in the plan, worker slot i runs with CUDA_VISIBLE_DEVICES = ids[i]: every shard is
 * made under one of them, and both workers get work. */
static int gpu_forward(size_t idx, void *env, runner_buf *out, esp_err *err)
{
    (void)idx, (void)env, (void)err;
    struct timespec ts = {0, 10 * 1000 * 1000};
    nanosleep(&ts, NULL);
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    runner_buf_printf(out, "%s", v ? v : "(unset)");
    return 0;
}

Test(runner_local_gpu, each_worker_slot_has_its_own_cuda_visible_devices, .init = setup, .fini = teardown)
{
    log_set_quiet(1);
    runner_job job = {.name = "gpu test", .n_items = 16, .work_dir = workdir, .forward = gpu_forward};
    size_t pending[8];
    for (size_t k = 0; k < 8; k++) pending[k] = k;
    char *ids[] = {"3", "GPU-5"};
    runner_plan plan = {&job, NULL, 2, 2, 8, pending, 8, ids};
    esp_err err;
    cr_assert_eq(runner_local_run(&plan, &err), 0, "%s", err.msg);
    int seen[2] = {0, 0};
    for (size_t k = 0; k < 8; k++) {
        char *path = runner_shard_path(workdir, k);
        FILE *fp = fopen(path, "rb");
        cr_assert_not_null(fp, "%s", path);
        unsigned char h[24];
        cr_assert_eq(fread(h, 1, 24, fp), 24);
        char first[16] = "";
        for (int i = 0; i < 2; i++) {
            unsigned char ih[16];
            cr_assert_eq(fread(ih, 1, 16, fp), 16);
            size_t len = ih[8]; /* little-endian u64, short values */
            char val[16] = "";
            cr_assert(len < sizeof val);
            cr_assert_eq(fread(val, 1, len, fp), len);
            cr_assert(!strcmp(val, "3") || !strcmp(val, "GPU-5"), "shard %zu ran with CUDA_VISIBLE_DEVICES=%s", k, val);
            if (i == 0) strcpy(first, val);
            else cr_assert_str_eq(val, first, "one shard, one worker");
            seen[!strcmp(val, "GPU-5")] = 1;
        }
        fclose(fp);
        free(path);
    }
    cr_assert(seen[0] && seen[1], "both GPU workers should have had shards");
}

/* scripts/slurm_local.sh up: a slurmd that dies while starting (here a stand-in that logs a fatal
 * line and exits, first on PATH) is started again on other ports twice, then `up` fails naming the
 * daemon and quoting its log, and stops what it started. */
Test(runner_slurm, a_daemon_that_dies_at_start_is_retried_then_named_with_its_log, .init = setup, .fini = teardown)
{
    if (geteuid() != 0) cr_skip_test("the SLURM tests start munged and slurmctld as root; run them as root");
    if (sh("install", "scripts/slurm_local.sh install") != 0)
        cr_skip_test("the SLURM packages are missing and could not be installed: %s",
                     slurp("%s/install.err", workdir));
    cr_assert_eq(sh("fake", "mkdir -p '%s/bin' && printf '%%s\\n' '#!/bin/sh' "
                            "'echo \"slurmd: fatal: stand-in for a failed bind\" >&2' 'exit 1' >'%s/bin/slurmd' && "
                            "chmod +x '%s/bin/slurmd'",
                    workdir, workdir, workdir),
                 0);
    cr_assert_eq(sh("up", "PATH='%s/bin':\"$PATH\" scripts/slurm_local.sh up -d '%s/cl'", workdir, workdir), 1);
    char *err = slurp("%s/up.err", workdir);
    cr_assert_not_null(err);
    int retries = 0;
    for (const char *p = err; (p = strstr(p, "; starting again on other ports")); p++) retries++;
    cr_assert_eq(retries, 2, "%s", err);
    cr_assert(strstr(err, "slurm_local.sh: error: slurmd localhost exited (see ") &&
                  strstr(err, "slurmd: fatal: stand-in for a failed bind") &&
                  strstr(err, "up failed; stopping what was started"),
              "%s", err);
    free(err);
    cr_assert_eq(sh("status", "scripts/slurm_local.sh status -d '%s/cl'", workdir), 3,
                 "daemons left running: %s", slurp("%s/status.out", workdir));
}
