/* Stage 6 infer on the project's own SLURM cluster (parallel.env: slurm, n_workers 2) with the
 * tiny recipe's model, trained once: sync mode writes hyp.scp and ref.scp byte-identical to a
 * local run; async mode submits, exits 0 and stops the stage list there (measure does not run on
 * missing hypotheses); after one task is cancelled, reruns resubmit only its shard, keep the
 * finished one, and end with the local run's files and measure's scores. */
#include <sys/stat.h>

#include "test/unit/slurm_test_cluster.h"

/* Stages 1-5 of the tiny recipe (a few seconds): the model infer decodes with, under <workdir>/exp;
 * one epoch: the local and the SLURM runs need the same model, not a good one. */
static void train_tiny_model(void)
{
    cr_assert_eq(sh("train",
                    "timeout 300 '%s' --config recipes/espeak_fortunes/conf/training_tiny.yaml data_dir=%s/data "
                    "dataset_dir=%s/dl stats_dir=%s/stats exp_dir=%s/exp --stage 1 --stop_stage 5 trainer.max_epochs=1",
                    env_or("ESPNET3_BIN", "./espnet3"), workdir, workdir, workdir, workdir),
                 0, "stages 1-5 failed: %s", slurp("%s/train.err", workdir));
}

/* The binary with the tiny inference and metrics configs on that model; inference_dir (infer's
 * and measure's) is <workdir>/<out>. */
static int infer(const char *log, const char *out, const char *extra)
{
    return sh(log,
              "timeout 300 '%s' --inference_config recipes/espeak_fortunes/conf/inference_tiny.yaml "
              "--metrics_config recipes/espeak_fortunes/conf/metrics.yaml data_dir=%s/data exp_dir=%s/exp "
              "inference_dir=%s/%s %s",
              env_or("ESPNET3_BIN", "./espnet3"), workdir, workdir, workdir, out, extra);
}

static void assert_same_as_local(const char *out)
{
    static const char *const files[] = {"hyp.scp", "ref.scp"};
    for (int f = 0; f < 2; f++)
        cr_assert_eq(sh("cmp", "cmp '%s/local/test/%s' '%s/%s/test/%s'", workdir, files[f], workdir, out, files[f]), 0,
                     "%s/test/%s differs from the local run", out, files[f]);
}

static int exists(const char *rel)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", workdir, rel);
    return access(path, F_OK) == 0;
}

/* "stage infer: submitted to SLURM (jobs <id>)" in stdout, and nothing merged or measured. */
static long long assert_pending(const char *log)
{
    char *out = slurp("%s/%s.out", workdir, log), *err = slurp("%s/%s.err", workdir, log);
    long long job = 0;
    const char *at = strstr(out, "espnet3: stage infer: submitted to SLURM (jobs ");
    cr_assert(at && sscanf(at + strlen("espnet3: stage infer: submitted to SLURM (jobs "), "%lld)", &job) == 1, "%s",
              out);
    cr_assert(strstr(at, "rerun the same command when they are done to merge the results and go on with the next "
                         "stages"),
              "%s", out);
    cr_assert(strstr(err, "=== [SUBMITTED] stage: infer"), "%s", err);
    cr_assert_null(strstr(err, "stage: measure"), "measure ran on pending hypotheses: %s", err);
    free(out);
    free(err);
    cr_assert(!exists("async/test/hyp.scp") && !exists("async/test/ref.scp"),
              "async mode wrote results before a rerun");
    cr_assert(!exists("async/measure.log") && !exists("async/metrics.json"), "measure ran on pending hypotheses");
    return job;
}

/* No Criterion .timeout (it leaks under ASan): `timeout` bounds each run. */
TestSuite(infer_slurm, .init = setup, .fini = teardown);

Test(infer_slurm, sync_equals_local_and_async_reruns_after_scancel_redo_only_the_cancelled_shard)
{
    start_cluster();
    train_tiny_model();
    cr_assert_eq(infer("local", "local", "--stages infer"), 0, "%s", slurp("%s/local.err", workdir));

    /* Sync: 6 utterances in batches of 4 = 2 shards, one per task. */
    cr_assert_eq(infer("sync", "sync", "--stages infer parallel.env=slurm parallel.n_workers=2"), 0, "%s",
                 slurp("%s/sync.err", workdir));
    assert_same_as_local("sync");
    char *err = slurp("%s/sync.err", workdir);
    cr_assert(strstr(err, "infer test: submitted SLURM array job") &&
                  strstr(err, ": 2 tasks (1 worker process each) for 2 shards"),
              "%s", err);
    free(err);

    /* Async with every stage the configs allow (infer, measure, pack_model) and held jobs, so the
     * test decides which task runs. */
    const char *async = "parallel.env=slurm parallel.n_workers=2 parallel.async_mode=true";
    char held[512];
    snprintf(held, sizeof held, "%s 'parallel.options.job_extra_directives=[--hold]'", async);
    cr_assert_eq(infer("async", "async", held), 0, "%s", slurp("%s/async.err", workdir));
    long long first = assert_pending("async");
    cr_assert_eq(first_job_id("async/test/.runner"), first);

    /* Cancel task 1, let task 0 (shard 0) run. */
    cr_assert_eq(sh("cancel", "scancel %lld_1 && scontrol release %lld", first, first), 0, "%s",
                 slurp("%s/cancel.err", workdir));
    char ids[64];
    snprintf(ids, sizeof ids, "%lld", first);
    wait_until_gone(ids);
    char shard0[512], shard1[512];
    snprintf(shard0, sizeof shard0, "%s/async/test/.runner/shard.0", workdir);
    snprintf(shard1, sizeof shard1, "%s/async/test/.runner/shard.1", workdir);
    struct stat before, after;
    cr_assert_eq(stat(shard0, &before), 0, "task 0 did not write shard 0");
    cr_assert_neq(access(shard1, F_OK), 0, "the cancelled task 1 wrote shard 1");

    /* The rerun submits the cancelled shard only, and still merges and measures nothing. */
    cr_assert_eq(infer("rerun", "async", async), 0, "%s", slurp("%s/rerun.err", workdir));
    long long second = assert_pending("rerun");
    cr_assert_neq(second, first);
    err = slurp("%s/rerun.err", workdir);
    cr_assert(strstr(err, "infer test: resuming: 1 of 2 shards already done") &&
                  strstr(err, ": 1 task (1 worker process each) for 1 shards"),
              "%s", err);
    free(err);
    snprintf(ids, sizeof ids, "%lld", second);
    wait_until_gone(ids);

    /* The next rerun merges what the jobs wrote, then goes on with measure and pack_model. */
    cr_assert_eq(infer("merge", "async", async), 0, "%s", slurp("%s/merge.err", workdir));
    assert_same_as_local("async");
    err = slurp("%s/merge.err", workdir);
    cr_assert(strstr(err, "infer test: all 2 shards already done") && strstr(err, "=== [DONE] stage: measure") &&
                  strstr(err, "=== [DONE] stage: pack_model"),
              "%s", err);
    cr_assert_null(strstr(err, "submitted SLURM array job"), "%s", err);
    free(err);
    cr_assert(exists("async/metrics.json"), "measure did not write its scores");
    cr_assert_eq(stat(shard0, &after), 0);
    cr_assert(after.st_ino == before.st_ino && after.st_mtim.tv_sec == before.st_mtim.tv_sec &&
                  after.st_mtim.tv_nsec == before.st_mtim.tv_nsec,
              "shard 0, finished by the first job, was written again");
}
