/* Stage 5 under SLURM on the project's local cluster (slurm_cluster.h), 2 ranks x 1 thread on the
 * tiny recipe (9 batches in file order, 1 epoch): `sbatch --wait` of the templates users copy,
 * scripts/sbatch/train_one_node.sh (1 node x 2 tasks) and train_multi_node.sh (2 emulated nodes x
 * 1 task), both `srun --mpi=pmix`, and a bare `srun --mpi=none` step of 2 tasks (the SLURM
 * variables). Each job must succeed, rank 0 must write the checkpoint, its weights must equal bit
 * for bit those of the same 2 ranks started by espnet3 itself, and each rank's log must say where
 * its rank came from. And a job of train_one_node.sh stopped by SIGUSR1 three times, requeueing
 * itself each time, ends with the weights of a run never stopped. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/dist/dist_env.h"
#include "test/unit/slurm_cluster.h"
#include "test/unit/test_util.h"

static char dir[64];
static int cluster_up;
static char text[1 << 16];

#define TINY "recipes/espeak_fortunes/conf/training_tiny.yaml"
#define CKPT "checkpoints/epoch=1-step=4/model.safetensors"

static const char *bin(void)
{
    const char *v = getenv("ESPNET3_BIN");
    return v && *v ? v : "./espnet3";
}

/* The overrides of every run here: data under dir, 9 batches in file order, 1 epoch. */
static const char *recipe_args(void)
{
    static char args[1024];
    snprintf(args, sizeof args,
             "data_dir=%s/data dataset_dir=%s/dl stats_dir=%s/stats dataloader.train.iter_factory.shuffle=false "
             "dataloader.train.iter_factory.batches.batch_bins=40000 trainer.max_epochs=1",
             dir, dir, dir);
    return args;
}

static const char *read_file(const char *name) { return slurm_cluster_read(dir, name, text, sizeof text); }

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/espnet3_dslurm_XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    cluster_up = 0;
}

/* Runs after a failed assertion too, so no daemon outlives the test. */
static void teardown(void)
{
    slurm_cluster_stop(dir, &cluster_up);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

/* The cluster, stages 1-3 once (a plain command, as the templates do), and the reference: the
 * same 2 ranks started by espnet3 itself (trainer.devices=2 on a plain command) in <dir>/ref. */
static void prepare(int nodes, int need_pmix)
{
    if (need_pmix && !dist_have_pmix())
        cr_skip_test("this build has no PMIx (libpmix-dev was missing when it was compiled: "
                     "scripts/install_deps.sh, then rebuild)");
    slurm_cluster_start(dir, nodes, &cluster_up);
    /* The same for every test: once per run of the tests (slurm_cluster_sh_once). */
    cr_assert_eq(slurm_cluster_sh_once(dir, "ref",
                                       "timeout 120 '%s' --config " TINY " %s exp_dir=%s/ref --stage 1 --stop_stage 3 && "
                                       "OMP_NUM_THREADS=1 timeout 120 '%s' --config " TINY
                                       " %s exp_dir=%s/ref --stage 5 --stop_stage 5 trainer.devices=2",
                                       bin(), recipe_args(), dir, bin(), recipe_args(), dir),
                 0, "stages 1-3 or the reference run failed: %s", read_file("ref.err"));
}

/* `sbatch --wait` of a template, unchanged but for the #SBATCH settings the command line
 * overrides (1 CPU per task: the node has only this machine's cores) and its variables. Each job
 * gets a free MASTER_PORT: the default (15000 + the job id's last digits) would collide between
 * clusters of concurrent tests, whose job ids all start at 1. */
static void sbatch_template(const char *tmpl, int nodes, int tasks_per_node, const char *exp)
{
    int rc = slurm_cluster_sh(dir, exp,
                              "CONFIG=" TINY " ESPNET3='%s' MASTER_ADDR=127.0.0.1 MASTER_PORT=%d timeout 120 sbatch "
                              "--wait --nodes=%d --ntasks-per-node=%d --cpus-per-task=1 --time=5 --output=%s/%s.job "
                              "scripts/sbatch/%s %s exp_dir=%s/%s trainer.per_rank_logs=true",
                              bin(), test_free_port(), nodes, tasks_per_node, dir, exp, tmpl, recipe_args(), dir, exp);
    if (rc != 0) {
        static char err[8192];
        char name[64];
        snprintf(name, sizeof name, "%s.err", exp);
        slurm_cluster_read(dir, name, err, sizeof err);
        snprintf(name, sizeof name, "%s.job", exp);
        cr_assert_fail("sbatch --wait %s: exit %d: %s\njob log:\n%s", tmpl, rc, err, read_file(name));
    }
}

/* The job wrote rank 0's checkpoint with the reference's bits; each rank's log names its source. */
static void assert_trained(const char *exp, const char *rank0, const char *rank1)
{
    char path[512], name[128];
    snprintf(path, sizeof path, "%s/%s/" CKPT, dir, exp);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "rank 0 wrote no checkpoint %s", path);
    cr_assert_eq(slurm_cluster_sh(dir, "cmp", "cmp '%s/ref/" CKPT "' '%s'", dir, path), 0,
                 "%s: the weights differ from the 2 ranks espnet3 started itself: %s", exp, read_file("cmp.out"));
    snprintf(name, sizeof name, "%s/train.log", exp);
    cr_assert(strstr(read_file(name), rank0), "%s has no '%s':\n%s", name, rank0, text);
    cr_assert(strstr(text, "train: epoch 1: parameters identical on all 2 ranks"), "%s", text);
    snprintf(name, sizeof name, "%s/train.rank1.log", exp);
    cr_assert(strstr(read_file(name), rank1), "%s has no '%s':\n%s", name, rank1, text);
}

TestSuite(dist_slurm, .init = setup, .fini = teardown);

Test(dist_slurm, sbatch_one_node_template_two_tasks_ranks_from_pmix)
{
    prepare(1, 1);
    sbatch_template("train_one_node.sh", 1, 2, "one");
    assert_trained("one", "train: rank 0 of 2 (local 0 of 2, node 0) via PMIx (srun --mpi=pmix)",
                   "train: rank 1 of 2 (local 1 of 2, node 0) via PMIx (srun --mpi=pmix)");
}

Test(dist_slurm, sbatch_multi_node_template_two_nodes_ranks_from_pmix)
{
    prepare(2, 1);
    sbatch_template("train_multi_node.sh", 2, 1, "multi");
    assert_trained("multi", "train: rank 0 of 2 (local 0 of 1, node 0) via PMIx (srun --mpi=pmix)",
                   "train: rank 1 of 2 (local 0 of 1, node 1) via PMIx (srun --mpi=pmix)");
}

Test(dist_slurm, srun_without_pmix_two_tasks_ranks_from_slurm_variables)
{
    prepare(1, 0);
    /* No MASTER_ADDR: rank 0's host is the step's first node (localhost on a 1-node cluster). */
    int rc = slurm_cluster_sh(dir, "none",
                              "MASTER_PORT=%d OMP_NUM_THREADS=1 timeout 120 srun --mpi=none --nodes=1 --ntasks=2 "
                              "--cpus-per-task=1 --time=5 '%s' --config " TINY
                              " %s exp_dir=%s/none --stage 5 --stop_stage 5 trainer.devices=2 trainer.per_rank_logs=true",
                              test_free_port(), bin(), recipe_args(), dir);
    cr_assert_eq(rc, 0, "srun --mpi=none: exit %d: %s", rc, read_file("none.err"));
    assert_trained("none", "train: rank 0 of 2 (local 0 of 2, node 0) via SLURM step variables",
                   "train: rank 1 of 2 (local 1 of 2, node 0) via SLURM step variables");
}

/* The job's state and restart count from `scontrol show job`; 0 when it cannot be read. */
static int job_state(const char *job, char *state, int *restarts)
{
    if (slurm_cluster_sh(dir, "show", "scontrol show job %s", job) != 0) return 0;
    const char *s = strstr(read_file("show.out"), "JobState="), *r = strstr(text, "Restarts=");
    return s && r && sscanf(s, "JobState=%31s", state) == 1 && sscanf(r, "Restarts=%d", restarts) == 1;
}

static double seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The checkpoint `last` names ("" when none). */
static void last_of(const char *exp, char *out, size_t cap)
{
    char link[512];
    snprintf(link, sizeof link, "%s/%s/last", dir, exp);
    ssize_t n = readlink(link, out, cap - 1);
    out[n > 0 ? n : 0] = '\0';
}

/* A job at its time limit, three times: SLURM's --signal=USR1@120 of the templates, sent here with
 * `scancel -s USR1` once the run has written a checkpoint inside an early epoch past where it
 * started. The ranks stop after a step with a checkpoint, rank 0 requeues the job (scontrol
 * requeue), and its next start (SLURM's own, once the last start's credentials expire: the local
 * cluster's cred_expire) resumes there. After three requeues the job ends with the weights of the same 2 ranks never interrupted. */
Test(dist_slurm, a_job_requeued_three_times_ends_as_one_never_requeued, .timeout = 600)
{
    /* SLURM's timing under the sanitizer's slowdown is not what this checks; the stop, the
     * checkpoint and the resume run under ASan in train_stop/ */
    if (test_sanitized())
        cr_skip_test("make asan: the SLURM requeue runs in make check's plain build (its code paths: train_stop)");
    prepare(1, 1);
    const char *more = "trainer.max_epochs=12 '+trainer.callbacks=[{_target_: lightning.pytorch.callbacks.ModelCheckpoint, "
                       "every_n_train_steps: 1}]'";
    cr_assert_eq(slurm_cluster_sh(dir, "ref12",
                                  "OMP_NUM_THREADS=1 timeout 120 '%s' --config " TINY " %s exp_dir=%s/ref12 --stage 5 "
                                  "--stop_stage 5 trainer.devices=2 trainer.max_epochs=12",
                                  bin(), recipe_args(), dir),
                 0, "the reference run failed: %s", read_file("ref12.err"));
    cr_assert_eq(slurm_cluster_sh(dir, "submit",
                                  "CONFIG=" TINY " ESPNET3='%s' MASTER_ADDR=127.0.0.1 MASTER_PORT=%d sbatch --parsable "
                                  "--nodes=1 --ntasks-per-node=2 --cpus-per-task=1 --time=5 --output=%s/rq.job "
                                  "scripts/sbatch/train_one_node.sh %s exp_dir=%s/rq %s",
                                  bin(), test_free_port(), dir, recipe_args(), dir, more),
                 0, "sbatch: %s", read_file("submit.err"));
    char job[32] = "", seen[256] = "", now[256], state[32] = "?";
    sscanf(read_file("submit.out"), "%31s", job);
    cr_assert(job[0], "no job id");
    int restarts = 0;
    for (int round = 1; round <= 3; round++) {
        /* a checkpoint inside epochs 1-9, past the one this start resumed from */
        int signalled = 0;
        for (double t0 = seconds(); !signalled && seconds() - t0 < 180;) {
            last_of("rq", now, sizeof now);
            int epoch = -1;
            if (now[0] && strcmp(now, seen) != 0 && sscanf(now, "checkpoints/epoch=%d", &epoch) == 1 && epoch < 9) {
                cr_assert_eq(slurm_cluster_sh(dir, "usr1", "scancel -s USR1 %s", job), 0, "%s", read_file("usr1.err"));
                signalled = 1;
            }
            usleep(5000);
        }
        if (!signalled) { /* what SLURM says of the job, and its controller's log */
            slurm_cluster_sh(dir, "why", "scontrol show job %s; tail -40 %s/cluster/log/slurmctld.log; "
                                         "tail -20 %s/cluster/log/slurmd-*.log", job, dir, dir);
            char why[1 << 14];
            cr_assert(signalled, "round %d: no new checkpoint to stop at (last %s); SLURM:\n%s\njob log:\n%s", round,
                      now, slurm_cluster_read(dir, "why.out", why, sizeof why), read_file("rq.job"));
        }
        int requeued = 0;
        for (double t0 = seconds(); !requeued && seconds() - t0 < 60; usleep(100000))
            requeued = job_state(job, state, &restarts) && restarts == round && !strcmp(state, "PENDING");
        cr_assert(requeued, "round %d: the job was not requeued (state %s, restarts %d); job log:\n%s", round, state,
                  restarts, read_file("rq.job"));
        last_of("rq", seen, sizeof seen); /* the checkpoint the next start resumes from */
        /* SLURM holds a requeued job until the credentials of its last start expire (the local
         * cluster's cred_expire, 10 s; 120 s by default): releasing it sooner races slurmd, which
         * refuses the start ("Job credential revoked") and fails the job */
        int running = 0;
        for (double t0 = seconds(); !running && seconds() - t0 < 90; usleep(200000))
            running = job_state(job, state, &restarts) && strcmp(state, "PENDING") != 0;
        cr_assert(running, "round %d: the requeued job did not start again (state %s); job log:\n%s", round, state,
                  read_file("rq.job"));
    }
    for (double t0 = seconds(); seconds() - t0 < 120 && !(job_state(job, state, &restarts) && !strcmp(state, "COMPLETED"));)
        usleep(20000);
    cr_assert_str_eq(state, "COMPLETED", "job log:\n%s", read_file("rq.job"));
    /* the job's output holds every start's log (--open-mode=append; each start rotates train.log) */
    const char *log = read_file("rq.job");
    int stops = 0;
    for (const char *p = log; (p = strstr(p, "train: stopped by SIGUSR1 at epoch")); p++) stops++;
    cr_assert_eq(stops, 3, "%s", log);
    cr_assert(strstr(log, "train: SLURM job ") && strstr(log, " requeued (scontrol requeue)"), "%s", log);
    cr_assert_eq(slurm_cluster_sh(dir, "cmp12", "cmp '%s/ref12/checkpoints/epoch=12-step=48/model.safetensors' "
                                                "'%s/rq/checkpoints/epoch=12-step=48/model.safetensors'",
                                  dir, dir),
                 0, "the requeued job's weights differ from the uninterrupted run's: %s", read_file("cmp12.out"));
    /* and the k-best average, made from the tables the checkpoints carried across the requeues */
    cr_assert_eq(slurm_cluster_sh(dir, "cmpave", "cmp '%s/ref12/valid.loss.ave_3best.safetensors' "
                                                 "'%s/rq/valid.loss.ave_3best.safetensors'", dir, dir),
                 0, "the requeued job's k-best average differs from the uninterrupted run's: %s",
                 read_file("cmpave.out"));
}
