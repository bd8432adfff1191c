/* Training on the GPU against the CPU: the tiny joint CTC/attention recipe (encoder, decoder,
 * CTC, label smoothing, dropout, Adam, clipping) with the Transformer, Conformer (CTC only) and
 * E-Branchformer encoders, trained 3 steps with trainer.accelerator gpu and cpu from the same
 * seed; the per-step losses and the final weights must agree within float rounding (dropout
 * masks are the same by construction: core/compute/kernel_math.h). Without a
 * CUDA device it prints "train_cuda: skipped: no CUDA device" and passes. The GPU run uses
 * $ESPNET3_CUDA_BIN when set (scripts/cuda_emu/run points it at the emulated binary), else the
 * binary under test (build-cuda/espnet3 in the CUDA build). ESPNET3_TEST_TRAIN_CUDA_ON_CPU=1 runs
 * the "GPU" side on the CPU too, to check this test's own logic on a machine without a GPU. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/compute/backend.h"
#include "core/formats/safetensors.h"
#include "test/unit/test_util.h"

static char dir[64];

static void setup(void) { test_tmpdir_make(dir, sizeof dir, "train_cuda"); }
static void teardown(void) { test_tmpdir_remove(dir); }

TestSuite(train_cuda, .init = setup, .fini = teardown);

static int train(const char *bin, const char *config, const char *extra, const char *exp, const char *accelerator,
                 const char *stages)
{
    return test_sh("cd '%s' && timeout 600 '%s' -q --template_dir conf --config recipes/espeak_fortunes/conf/%s.yaml "
                   "%s data_dir=%s/data dataset_dir=%s/dl stats_dir=%s/stats exp_dir=%s/%s "
                   "trainer.accelerator=%s trainer.max_epochs=-1 trainer.max_steps=3 trainer.log_every_n_steps=1 "
                   /* the steps are compared, not validation: no sanity check, one validation batch */
                   "trainer.num_sanity_val_steps=0 trainer.limit_val_batches=1 "
                   "dataloader.train.iter_factory.batches.batch_bins=40000 %s >>%s/log 2>&1",
                   test_root_dir(), bin, config, stages, dir, dir, dir, dir, exp, accelerator, extra, dir);
}

/* Parameters whose gradient is zero in exact arithmetic, so it is rounding noise that Adam scales
 * up to +-lr, differently on the two backends, legitimately: the key projection's bias (a shift of
 * every key by q.b leaves the softmax unchanged), the Conformer's depthwise conv bias (BatchNorm
 * follows it and removes any per-channel shift) and the running mean BatchNorm takes of it. */
static int zero_gradient(const char *name)
{
    return strstr(name, "linear_k.bias") || strstr(name, "conv_module.depthwise_conv.bias") ||
           strstr(name, "conv_module.norm.running_mean");
}

/* Field `col` (from 0) of a comma-separated line, copied into buf. */
static const char *field(const char *line, int col, char *buf, size_t cap)
{
    for (int c = 0; c < col && line; c++) line = strchr(line, ','), line = line ? line + 1 : NULL;
    if (!line) return NULL;
    size_t n = strcspn(line, ",\r\n");
    snprintf(buf, cap, "%.*s", (int)(n < cap ? n : cap - 1), line);
    return buf;
}

/* train/loss of each step that logged one, from metrics.csv. */
static int losses(const char *exp, double *out, int cap)
{
    char rel[128], buf[64];
    snprintf(rel, sizeof rel, "%s/metrics.csv", exp);
    char *csv = test_slurp_or_empty(test_path(dir, rel));
    char *save = NULL, *line = strtok_r(csv, "\r\n", &save);
    int col = -1, n = 0;
    for (int c = 0; line && field(line, c, buf, sizeof buf); c++)
        if (!strcmp(buf, "train/loss")) col = c;
    for (line = strtok_r(NULL, "\r\n", &save); line && col >= 0 && n < cap; line = strtok_r(NULL, "\r\n", &save))
        if (field(line, col, buf, sizeof buf) && *buf) out[n++] = strtod(buf, NULL);
    free(csv);
    return n;
}

Test(train_cuda, three_steps_match_the_cpu, .timeout = 1200)
{
    int on_cpu = getenv("ESPNET3_TEST_TRAIN_CUDA_ON_CPU") && !strcmp(getenv("ESPNET3_TEST_TRAIN_CUDA_ON_CPU"), "1");
    if (!on_cpu && backend_cuda_devices() <= 0) /* a skip, never a pass: Criterion counts it as one */
        cr_skip_test("no CUDA device (make CUDA=1 cuda-check runs it on the emulation; on a GPU, "
                     "build-cuda/espnet3_tests --filter 'train_cuda/*')");
    const char *gpu_bin = test_env_or("ESPNET3_CUDA_BIN", test_bin_path());
    /* The Conformer with PyTorch's default init (init=null): under xavier_uniform its biases start
     * at zero, the padded rows of its embedding are exactly zero, and the LayerNorms (eps 1e-12,
     * as ESPnet's) scale their gradient by 1e6: the first step's gradient norm is ~2e10 on both
     * backends, clipped to 5, and Adam's eps then weighs every rounding difference. That measures
     * the conditioning, not the backend. */
    static const char *configs[][2] = {{"training_tiny_hybrid", ""},
                                       {"training_tiny_conformer", "init=null"},
                                       {"training_tiny_ebranchformer", ""}};
    for (int ci = 0; ci < 3; ci++) {
        const char *cfg = configs[ci][0], *extra = configs[ci][1];
        char exp_cpu[96], exp_gpu[96], rel[160];
        snprintf(exp_cpu, sizeof exp_cpu, "%s_cpu", cfg), snprintf(exp_gpu, sizeof exp_gpu, "%s_gpu", cfg);
        char *log = NULL;
        cr_assert_eq(train(test_bin_path(), cfg, extra, exp_cpu, "cpu", ci ? "--stages train" : "--stage 1 --stop_stage 5"), 0,
                     "%s", log = test_slurp_or_empty(test_path(dir, "log")));
        cr_assert_eq(train(gpu_bin, cfg, extra, exp_gpu, on_cpu ? "cpu" : "gpu", "--stages train"), 0, "%s",
                     log = test_slurp_or_empty(test_path(dir, "log")));
        free(log);

        double lc[16], lg[16];
        int nc = losses(exp_cpu, lc, 16), ng = losses(exp_gpu, lg, 16);
        cr_assert(nc >= 3 && nc == ng, "%s: steps logged: cpu %d, gpu %d", cfg, nc, ng);
        for (int i = 0; i < nc; i++)
            cr_assert(fabs(lc[i] - lg[i]) <= 1e-4 * fabs(lc[i]) + 1e-5, "%s: step %d loss: cpu %.9g gpu %.9g", cfg,
                      i + 1, lc[i], lg[i]);

        /* Weights after 3 Adam steps: per tensor, |gpu - cpu|^2 / |cpu|^2. One wrong update of
         * size lr in a tensor would be about 1e-5 here; float rounding is below 1e-10. */
        st_file a, b;
        esp_err err = {0};
        snprintf(rel, sizeof rel, "%s/last/model.safetensors", exp_cpu);
        cr_assert_eq(st_read(test_path(dir, rel), &a, &err), 0, "%s", err.msg);
        snprintf(rel, sizeof rel, "%s/last/model.safetensors", exp_gpu);
        cr_assert_eq(st_read(test_path(dir, rel), &b, &err), 0, "%s", err.msg);
        cr_assert_eq(a.n, b.n);
        size_t compared = 0;
        double worst = 0;
        const char *worst_name = "";
        for (size_t i = 0; i < a.n; i++) {
            const st_tensor *ta = &a.tensors[i], *tb = st_get(&b, ta->name);
            cr_assert_not_null(tb, "%s: %s missing from the GPU model", cfg, ta->name);
            if (ta->dtype != ST_F32 || zero_gradient(ta->name)) continue;
            cr_assert_eq(st_numel(ta), st_numel(tb), "%s", ta->name);
            const float *x = ta->data, *y = tb->data;
            double num = 0, den = 0;
            for (int64_t k = 0; k < st_numel(ta); k++) {
                double d = (double)x[k] - (double)y[k];
                num += d * d;
                den += (double)x[k] * (double)x[k];
            }
            double nmse = den > 0 ? num / den : num;
            cr_assert(nmse <= 1e-8, "%s: %s: NMSE %.3g between the CPU's and the GPU's weights", cfg, ta->name, nmse);
            if (nmse >= worst) worst = nmse, worst_name = ta->name;
            compared++;
        }
        fprintf(stderr, "train_cuda: %s: %zu tensors, worst weight NMSE %.3g (%s); losses of %d steps within 1e-4\n",
                cfg, compared, worst, worst_name, nc);
        cr_assert(compared > 10);
        st_close(&a);
        st_close(&b);
    }
}
