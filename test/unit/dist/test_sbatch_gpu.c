/* The GPU sbatch templates (scripts/sbatch/train_gpu_*.sh; docs/gpu.md): valid bash, one rank per
 * GPU (--gpus-per-node equal to --ntasks-per-node), the GPU backend asked for, trainer.devices
 * from the GPUs per node, and the run's shape the template names. No SLURM is run. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test/unit/test_util.h"

static int sbatch_int(const char *text, const char *opt)
{
    char key[64];
    snprintf(key, sizeof key, "#SBATCH %s=", opt);
    const char *p = strstr(text, key);
    cr_assert_not_null(p, "no %s line", key);
    return atoi(p + strlen(key));
}

static void check(const char *name, int nodes, int gpus, const char *devices, const char *num_nodes)
{
    char path[512];
    snprintf(path, sizeof path, "%s/scripts/sbatch/%s", test_root_dir(), name);
    cr_assert_eq(test_sh("bash -n '%s'", path), 0, "%s is not valid bash", name);
    char *t = test_slurp(path);
    cr_assert_eq(sbatch_int(t, "--nodes"), nodes, "%s", name);
    cr_assert_eq(sbatch_int(t, "--gpus-per-node"), gpus, "%s", name);
    cr_assert_eq(sbatch_int(t, "--ntasks-per-node"), gpus, "%s: one rank per GPU", name);
    cr_assert(strstr(t, "trainer.accelerator=gpu"), "%s", name);
    cr_assert(strstr(t, devices), "%s: %s", name, devices);
    cr_assert(strstr(t, num_nodes), "%s: %s", name, num_nodes);
    free(t);
}

Test(sbatch_gpu, one_gpu_trains_and_decodes_on_it)
{
    check("train_gpu_one.sh", 1, 1, "trainer.devices=1", "trainer.num_nodes=1");
    char path[512];
    snprintf(path, sizeof path, "%s/scripts/sbatch/train_gpu_one.sh", test_root_dir());
    char *t = test_slurp(path);
    cr_assert(strstr(t, "model.device=cuda") && strstr(t, "--stage 6"), "the decode on the GPU");
    free(t);
}

Test(sbatch_gpu, the_gpus_of_a_node_and_of_several_nodes)
{
    check("train_gpu_node.sh", 1, 4, "trainer.devices=\"$GPUS\"", "trainer.num_nodes=1");
    check("train_gpu_multi_node.sh", 2, 4, "trainer.devices=\"$GPUS\"", "trainer.num_nodes=\"$SLURM_JOB_NUM_NODES\"");
}

/* GPUS comes from SLURM_GPUS_PER_NODE, with or without a GPU type. */
Test(sbatch_gpu, gpus_per_node_with_a_type)
{
    cr_assert_eq(test_sh("[ \"$(SLURM_GPUS_PER_NODE=a100:4 bash -c 'echo ${SLURM_GPUS_PER_NODE##*:}')\" = 4 ] && "
                         "[ \"$(SLURM_GPUS_PER_NODE=2 bash -c 'echo ${SLURM_GPUS_PER_NODE##*:}')\" = 2 ]"), 0);
}
