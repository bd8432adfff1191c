/* Stage 5 under SLURM on the project's local cluster (slurm_cluster.h), 2 ranks x 1 thread on the
 * tiny recipe (9 batches in file order, 1 epoch): `sbatch --wait` of the templates users copy,
 * scripts/sbatch/train_one_node.sh (1 node x 2 tasks) and train_multi_node.sh (2 emulated nodes x
 * 1 task), both `srun --mpi=pmix`, and a bare `srun --mpi=none` step of 2 tasks (the SLURM
 * variables). Each job must succeed, rank 0 must write the checkpoint, its weights must equal bit
 * for bit those of the same 2 ranks started by espnet3 itself, and each rank's log must say where
 * its rank came from. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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
    cr_assert_eq(slurm_cluster_sh(dir, "prep", "timeout 120 '%s' --config " TINY " %s exp_dir=%s/ref --stage 1 --stop_stage 3",
                                  bin(), recipe_args(), dir),
                 0, "stages 1-3 failed: %s", read_file("prep.err"));
    cr_assert_eq(slurm_cluster_sh(dir, "ref",
                                  "OMP_NUM_THREADS=1 timeout 120 '%s' --config " TINY
                                  " %s exp_dir=%s/ref --stage 5 --stop_stage 5 trainer.devices=2",
                                  bin(), recipe_args(), dir),
                 0, "the reference run failed: %s", read_file("ref.err"));
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
