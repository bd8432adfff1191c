/* fit.ckpt_path (issue 41; core/train/train_import.c): a run starts from a named checkpoint. A
 * Lightning .ckpt that Lightning 2.6 wrote while training an ESPnet2 model as ESPnet3 does
 * (test/fixtures/train/lightning_resume.ckpt, scripts/make_lightning_resume_fixture.py) gives its
 * weights, Adam's moments and step, the scheduler's step and the counters; a rerun of the same
 * command goes on from its own newest checkpoint; our own checkpoint named by its ESPnet3 name in
 * another exp_dir goes on bit for bit; the values Lightning refuses are refused at their line. The
 * tiny recipe at d 16 (the fixture's model), 5 steps an epoch. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/formats/safetensors.h"
#include "core/formats/torch_zip.h"
#include "test/unit/test_util.h"

static char dir[64];

static const char *command(const char *exp, const char *extra)
{
    static char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && timeout 300 '%s' -q --config recipes/espeak_fortunes/conf/training_tiny.yaml "
             "data_dir=%s/data dataset_dir=%s/dl stats_dir=%s/stats exp_dir=%s/%s "
             "dataloader.train.iter_factory.batches.batch_bins=80000 model.encoder_conf.output_size=16 "
             "model.encoder_conf.linear_units=32 model.encoder_conf.attention_heads=2 %s >>%s/log 2>&1",
             test_root_dir(), test_bin_path(), dir, dir, dir, dir, exp, extra, dir);
    return cmd;
}

static int run(const char *exp, const char *extra) { return test_sh("%s", command(exp, extra)); }

static char *slurp(const char *rel) { return test_slurp_or_empty(test_path(dir, rel)); }

static void setup(void)
{
    test_tmpdir_make(dir, sizeof dir, "fit_ckpt");
    /* The same in every test: once per run of the tests (test_sh_once). */
    cr_assert_eq(test_sh_once(dir, "%s", command("exp0", "--stage 1 --stop_stage 3")), 0, "stages 1-3 failed:\n%s",
                 slurp("log"));
}

static void teardown(void) { test_tmpdir_remove(dir); }

TestSuite(fit_ckpt_path, .init = setup, .fini = teardown);

static const char *fixture(const char *name)
{
    static char path[1024];
    snprintf(path, sizeof path, "%s/test/fixtures/train/%s", test_root_dir(), name);
    return path;
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* The checkpoint exp/checkpoints/<ck> holds the Lightning file's weights bit for bit under their
 * ESPnet2 names, and the optimizer's buffer `buf` (torch's state name) as a multiset: torch
 * numbers the state by its parameter order, we keep it in our flat layout. */
static void assert_taken(const char *file, const char *ck, const char *buf)
{
    st_file ours, state, lit;
    pt_scalars sc;
    esp_err err;
    char rel[256], suffix[64];
    snprintf(rel, sizeof rel, "%s/model.safetensors", ck);
    cr_assert_eq(st_read(test_path(dir, rel), &ours, &err), 0, "%s", err.msg);
    snprintf(rel, sizeof rel, "%s/trainer_state.safetensors", ck);
    cr_assert_eq(st_read(test_path(dir, rel), &state, &err), 0, "%s", err.msg);
    cr_assert_eq(pt_read_tree(fixture(file), &lit, &sc, &err), 0, "%s", err.msg);
    snprintf(suffix, sizeof suffix, ".%s", buf);
    size_t n = 0;
    float *theirs = NULL;
    for (size_t i = 0; i < lit.n; i++) {
        const st_tensor *t = &lit.tensors[i];
        size_t nl = strlen(t->name), sl = strlen(suffix);
        if (!strncmp(t->name, "state_dict.model.", 17)) {
            const st_tensor *o = st_get(&ours, t->name + 17);
            if (!o) continue; /* ESPnet's buffers we do not keep: the mel matrix, normalize's statistics */
            cr_assert(st_nbytes(o) == st_nbytes(t) && !memcmp(o->data, t->data, st_nbytes(t)), "%s", o->name);
        } else if (!strncmp(t->name, "optimizer_states.", 17) && nl > sl && !strcmp(t->name + nl - sl, suffix)) {
            size_t k = st_nbytes(t) / sizeof(float);
            theirs = realloc(theirs, (n + k) * sizeof *theirs);
            memcpy(theirs + n, t->data, k * sizeof *theirs);
            n += k;
        }
    }
    char name[64];
    snprintf(name, sizeof name, "optimizer.%s", buf);
    const st_tensor *m = st_get(&state, name);
    cr_assert(n > 0 && m && (size_t)m->shape[0] == n, "%s: %zu values in the file", name, n);
    float *mine = malloc(n * sizeof *mine);
    memcpy(mine, m->data, n * sizeof *mine);
    qsort(mine, n, sizeof *mine, cmp_float);
    qsort(theirs, n, sizeof *theirs, cmp_float);
    cr_assert(!memcmp(mine, theirs, n * sizeof *mine), "%s differs from the file's", name);
    free(mine), free(theirs);
    st_close(&ours), st_close(&state), st_close(&lit);
    pt_scalars_free(&sc);
}

Test(fit_ckpt_path, a_lightning_checkpoint_gives_weights_moments_and_counters)
{
    char extra[1400];
    /* max_epochs 2: the file's two epochs are done, so the run only saves what it took */
    snprintf(extra, sizeof extra, "--stages train trainer.max_epochs=2 +fit.ckpt_path=%s", fixture("lightning_resume.ckpt"));
    cr_assert_eq(run("imp", extra), 0, "%s", slurp("log"));
    char *log = slurp("imp/train.log");
    cr_assert(strstr(log, "(Lightning checkpoint: epoch 1, step 6; 2 epochs done)"), "%s", log);
    free(log);
    assert_taken("lightning_resume.ckpt", "imp/checkpoints/epoch=2-step=6", "exp_avg");
    assert_taken("lightning_resume.ckpt", "imp/checkpoints/epoch=2-step=6", "exp_avg_sq");
    char *js = slurp("imp/checkpoints/epoch=2-step=6/trainer_state.json");
    cr_assert(strstr(js, "\"optimizer.step\": 6") && strstr(js, "\"scheduler.last_epoch\": 6"), "%s", js);
    free(js);

    /* the same command again (a requeued job) goes on from its own newest checkpoint */
    snprintf(extra, sizeof extra, "--stages train trainer.max_epochs=3 +fit.ckpt_path=%s", fixture("lightning_resume.ckpt"));
    cr_assert_eq(run("imp", extra), 0, "%s", slurp("log"));
    log = slurp("imp/train.log");
    cr_assert(strstr(log, "this run started from it; going on from its newest checkpoint"), "%s", log);
    free(log);
    cr_assert(test_exists(test_path(dir, "imp/checkpoints/epoch=3-step=11")));
}

Test(fit_ckpt_path, our_checkpoint_by_its_espnet3_name_goes_on_bit_for_bit)
{
    cr_assert_eq(run("a", "--stages train trainer.max_epochs=2"), 0, "%s", slurp("log"));
    char extra[600];
    snprintf(extra, sizeof extra, "--stages train trainer.max_epochs=3 +fit.ckpt_path=%s/a/last.ckpt", dir);
    cr_assert_eq(run("b", extra), 0, "%s", slurp("log"));
    cr_assert_eq(run("a", "--stages train trainer.max_epochs=3"), 0, "%s", slurp("log"));
    char *log = slurp("b/train.log");
    cr_assert(strstr(log, "a/last.ckpt is checkpoint") && strstr(log, "epoch=2-step=10 of its run"), "%s", log);
    free(log);
    cr_assert(test_same_file(test_path(dir, "a/checkpoints/epoch=3-step=15/model.safetensors"),
                             test_path(dir, "b/checkpoints/epoch=3-step=15/model.safetensors")));
}

/* SGD (nesterov momentum, no scheduler): its momentum_buffer by torch's name */
Test(fit_ckpt_path, a_lightning_checkpoint_of_sgd_gives_its_momentum_buffer)
{
    char extra[1400];
    snprintf(extra, sizeof extra, "--stages train trainer.max_epochs=2 optimizer._target_=torch.optim.SGD "
             "optimizer.weight_decay=0 +optimizer.momentum=0.9 +optimizer.nesterov=true '~scheduler' "
             "+fit.ckpt_path=%s", fixture("lightning_resume_sgd.ckpt"));
    cr_assert_eq(run("sgd", extra), 0, "%s", slurp("log"));
    assert_taken("lightning_resume_sgd.ckpt", "sgd/checkpoints/epoch=2-step=6", "momentum_buffer");
}

Test(fit_ckpt_path, what_lightning_refuses_is_one_line)
{
    const char *at_line[] = {"+fit.ckpt_path=best", "+fit.ckpt_path=/nonexistent/last.ckpt"};
    const char *says[] = {"fit.ckpt_path: 'best' names the best checkpoint", "/nonexistent/last.ckpt does not exist"};
    for (int i = 0; i < 2; i++) {
        char extra[300];
        snprintf(extra, sizeof extra, "--stages train %s", at_line[i]);
        cr_assert_neq(run("bad", extra), 0);
        char *log = slurp("log");
        cr_assert(strstr(log, says[i]) && strstr(log, "espnet3: error: +fit.ckpt_path="), "%s", log);
        free(log);
    }
    cr_assert_neq(run("bad", "--stages train +fit.ckpt_path=hpc"), 0);
    char *log = slurp("log");
    cr_assert(strstr(log, "'hpc' is set but no checkpoint of a requeued job was found"), "%s", log);
    free(log);
    char extra[1400];
    snprintf(extra, sizeof extra, "--stages train optimizer.lr=0.001 +fit.ckpt_path=%s", fixture("lightning_resume.ckpt"));
    cr_assert_neq(run("bad", extra), 0);
    log = slurp("log");
    cr_assert(strstr(log, "initial_lr is 0.002, the config's 0.001 (Lightning would go on with the checkpoint's"),
              "%s", log);
    free(log);
    /* a weights-only file (a best-k .ckpt whose checkpoint directory is not beside it) */
    cr_assert_eq(run("w", "--stages train trainer.max_epochs=1"), 0, "%s", slurp("log"));
    cr_assert_eq(test_sh("cp %s/w/epoch0_step5_valid.loss.ckpt %s/alone.ckpt", dir, dir), 0);
    snprintf(extra, sizeof extra, "--stages train +fit.ckpt_path=%s/alone.ckpt", dir);
    cr_assert_neq(run("bad", extra), 0);
    log = slurp("log");
    cr_assert(strstr(log, "alone.ckpt: holds only the model (a weights-only checkpoint"), "%s", log);
    free(log);
}
