/* Stage 5 through the binary on the tiny recipe: the files a run leaves, bit-identical resume
 * (after a clean stop and after SIGKILL mid-epoch), falling validation loss, and config errors. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test/unit/test_util.h"

static char dir[64];

static char *command(const char *exp, const char *extra)
{
    static char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && timeout 300 '%s' -q --config recipes/espeak_fortunes/conf/training_tiny.yaml "
             "data_dir=%s/data dataset_dir=%s/dl stats_dir=%s/stats exp_dir=%s/%s %s",
             test_root_dir(), test_bin_path(), dir, dir, dir, dir, exp, extra);
    return cmd;
}

static int run(const char *exp, const char *extra) { return test_sh("%s >>%s/log 2>&1", command(exp, extra), dir); }

static int same_file(const char *a, const char *b) { return test_same_file(test_path(dir, a), test_path(dir, b)); }

static int exists(const char *rel) { return test_exists(test_path(dir, rel)); }

/* The epochs of the resume tests: 3, 2 under ASan (the resume after epoch 1 and the k-best
 * average over checkpoints from before and after it are there at 2 too). */
static int resume_epochs(void) { return test_sanitized() ? 2 : 3; }

/* A file under the temporary folder; "" when missing (the assertion after it says so). */
static char *slurp(const char *rel) { return test_slurp_or_empty(test_path(dir, rel)); }

/* Stages 1-3 once per test (about a second). */
static void setup(void)
{
    test_tmpdir_make(dir, sizeof dir, "train");
    /* The same in every test: once per run of the tests (test_sh_once). */
    cr_assert_eq(test_sh_once(dir, "%s >>%s/log 2>&1", command("exp0", "--stage 1 --stop_stage 3"), dir), 0,
                 "stages 1-3 failed:\n%s", slurp("log"));
}

static void teardown(void) { test_tmpdir_remove(dir); }

TestSuite(train, .init = setup, .fini = teardown);

/* SIGKILL to the process that holds an experiment's lock (the espnet3 process itself: `timeout`
 * runs it in a process group of its own, out of reach of a kill of the shell's group). */
static void kill_lock_owner(const char *exp)
{
    char rel[128];
    snprintf(rel, sizeof rel, "%s/.espnet3.lock", exp);
    char *line = slurp(rel);
    long owner = 0;
    cr_assert(sscanf(line, "pid %ld", &owner) == 1 && owner > 0, "no owner in %s: '%s'", rel, line);
    free(line);
    kill((pid_t)owner, SIGKILL);
    for (int i = 0; i < 5000 && kill((pid_t)owner, 0) == 0; i++) {
        struct timespec nap = {0, 1000000};
        nanosleep(&nap, NULL);
    }
}

Test(train, writes_checkpoints_logs_and_resumes_bit_identically)
{
    const int n = resume_epochs();
    char epochs[64], model[96], state[96], ave[64];
    snprintf(epochs, sizeof epochs, "--stages train trainer.max_epochs=%d", n);
    snprintf(model, sizeof model, "checkpoints/epoch=%d-step=%d/model.safetensors", n, n);
    snprintf(state, sizeof state, "checkpoints/epoch=%d-step=%d/trainer_state.safetensors", n, n);
    snprintf(ave, sizeof ave, "valid.loss.ave_%dbest.safetensors", n);
    cr_assert_eq(run("full", epochs), 0, "%s", slurp("log"));
    /* ESPnet2 names, safetensors, `last`, k-best average, TensorBoard events, metrics.csv, config. */
    cr_assert(exists(test_path("full", model)));
    cr_assert(exists(test_path("full", state)));
    cr_assert(exists("full/last"));
    cr_assert(exists(test_path("full", ave)));
    cr_assert(exists("full/config.yaml"));
    char *csv = slurp("full/metrics.csv");
    const char *header = "epoch,step,train/grad_norm,train/loss,train/lr,valid/cer_ctc,valid/loss,valid/loss_ctc\r\n";
    cr_assert(!strncmp(csv, header, strlen(header)), "%s", csv); /* ESPnet2's stats of a CTC model */
    free(csv);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls %s/full/tensorboard/tb_logger/version_0/ | grep -q tfevents", dir);
    cr_assert_eq(system(cmd), 0, "no TensorBoard event file");
    char *weights = slurp(test_path("full", model));
    /* The JSON header follows the u64 header length. */
    cr_assert(strstr(weights + 8, "\"encoder.encoders.0.self_attn.linear_q.weight\"") &&
              strstr(weights + 8, "\"ctc.ctc_lo.bias\""));
    free(weights);

    /* One epoch, stop, rerun to the end: the same weights bit for bit. */
    cr_assert_eq(run("split", "--stages train trainer.max_epochs=1"), 0, "%s", slurp("log"));
    cr_assert_eq(run("split", epochs), 0, "%s", slurp("log"));
    cr_assert(same_file(test_path("full", model), test_path("split", model)),
              "resumed run differs from the uninterrupted one");
    cr_assert(same_file(test_path("full", ave), test_path("split", ave)));
}

/* optimizer: torch.optim.SGD with nesterov momentum trains through the CLI, and its momentum buffer
 * (torch's: a copy of the first step's gradient) goes into the checkpoint under torch's name:
 * one epoch, then a resume to two (whose step reads the restored buffer), ends with the weights and
 * the buffer of an uninterrupted run, bit for bit. */
Test(train, sgd_with_momentum_trains_and_resumes_bit_identically)
{
    const char *sgd = "optimizer._target_=torch.optim.SGD optimizer.lr=0.5 optimizer.momentum=0.9 "
                      "optimizer.nesterov=true optimizer.foreach=true";
    char extra[512];
    snprintf(extra, sizeof extra, "--stages train trainer.max_epochs=2 %s", sgd);
    cr_assert_eq(run("full", extra), 0, "%s", slurp("log"));
    snprintf(extra, sizeof extra, "--stages train trainer.max_epochs=1 %s", sgd);
    cr_assert_eq(run("split", extra), 0, "%s", slurp("log"));
    snprintf(extra, sizeof extra, "--stages train trainer.max_epochs=2 %s", sgd);
    cr_assert_eq(run("split", extra), 0, "%s", slurp("log"));
    char *state = slurp("full/checkpoints/epoch=2-step=2/trainer_state.safetensors");
    cr_assert(strstr(state + 8, "\"optimizer.momentum_buffer\"") && !strstr(state + 8, "exp_avg"), "%s", state + 8);
    free(state);
    cr_assert(same_file("full/checkpoints/epoch=2-step=2/model.safetensors",
                        "split/checkpoints/epoch=2-step=2/model.safetensors"),
              "the resumed SGD run differs from the uninterrupted one");
    cr_assert(same_file("full/checkpoints/epoch=2-step=2/trainer_state.safetensors",
                        "split/checkpoints/epoch=2-step=2/trainer_state.safetensors"),
              "the resumed SGD run's momentum buffer differs");
    char *cfg = slurp("full/config.yaml");
    cr_assert(strstr(cfg, "torch.optim.SGD") && strstr(cfg, "nesterov: true"), "%s", cfg);
    free(cfg);
}

/* Checkpoints written before espnet3 used ESPnet's name for the subsampling output layer
 * (encoder.embed.out.* for encoder.embed.out.0.*) still resume, and average with new ones. */
Test(train, resumes_from_checkpoints_with_the_older_names)
{
    const int n = resume_epochs();
    char epochs[64], model[96], ave[64];
    snprintf(epochs, sizeof epochs, "--stages train trainer.max_epochs=%d", n);
    snprintf(model, sizeof model, "checkpoints/epoch=%d-step=%d/model.safetensors", n, n);
    snprintf(ave, sizeof ave, "valid.loss.ave_%dbest.safetensors", n);
    cr_assert_eq(run("full", epochs), 0, "%s", slurp("log"));
    cr_assert_eq(run("old", "--stages train trainer.max_epochs=1"), 0, "%s", slurp("log"));
    char code[2048];
    snprintf(code, sizeof code,
             "import glob, json, struct\n"
             "n = 0\n"
             "for p in glob.glob('%s/old/checkpoints/*/model.safetensors'):\n"
             "    b = open(p, 'rb').read(); hl = struct.unpack('<Q', b[:8])[0]\n"
             "    h = json.loads(b[8:8 + hl])\n"
             "    h = {k.replace('encoder.embed.out.0.', 'encoder.embed.out.'): v for k, v in h.items()}\n"
             "    j = json.dumps(h).encode(); j += b' ' * (-len(j) %% 8)\n"
             "    open(p, 'wb').write(struct.pack('<Q', len(j)) + j + b[8 + hl:]); n += 1\n"
             "assert n == 1, n\n",
             dir);
    cr_assert_eq(test_run_python(dir, code), 0);
    char *renamed = slurp("old/checkpoints/epoch=1-step=1/model.safetensors");
    cr_assert(strstr(renamed + 8, "\"encoder.embed.out.weight\"") && !strstr(renamed + 8, "embed.out.0."));
    free(renamed);
    cr_assert_eq(run("old", epochs), 0, "%s", slurp("log"));
    cr_assert(same_file(test_path("full", model), test_path("old", model)),
              "run resumed from an old-name checkpoint differs from the uninterrupted one");
    cr_assert(same_file(test_path("full", ave), test_path("old", ave)),
              "the average over old- and new-name checkpoints differs");
    char *average = slurp(test_path("full", ave));
    cr_assert(strstr(average + 8, "\"encoder.embed.out.0.weight\""), "ESPnet's name is written");
    free(average);

    /* ESPnet's init_param (path:src_key:dst_key:exclude) starts another run from such a file. */
    char extra[512];
    snprintf(extra, sizeof extra,
             "--stages train trainer.max_epochs=1 'init_param=[%s/old/checkpoints/epoch=1-step=1/model.safetensors:::ctc]'",
             dir);
    cr_assert_eq(run("ft", extra), 0, "%s", slurp("log"));
    char *log = slurp("ft/train.log");
    cr_assert(strstr(log, "model.safetensors:::ctc: ") && strstr(log, " tensors"), "%s", log);
    free(log);
}

Test(train, sigkill_mid_epoch_then_rerun_ends_with_the_same_weights)
{
    /* 4 epochs, 3 under ASan: the kill still lands inside epoch 3, with an epoch left after it. */
    const int n = resume_epochs() + 1;
    char epochs[64], model[96];
    snprintf(epochs, sizeof epochs, "--stages train trainer.max_epochs=%d", n);
    snprintf(model, sizeof model, "checkpoints/epoch=%d-step=%d/model.safetensors", n, n);
    cr_assert_eq(run("full", epochs), 0, "%s", slurp("log"));
    /* Start the same run, kill it as soon as its second checkpoint exists (inside epoch 3). */
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        setpgid(0, 0);
        char cmd[4600];
        snprintf(cmd, sizeof cmd, "%s >/dev/null 2>&1", command("killed", epochs));
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    struct timespec nap = {0, 2000000};
    int waited = 0, killed = 0;
    for (; waited < 120000; waited += 2) {
        if (exists("killed/checkpoints/epoch=2-step=2/model.safetensors")) {
            kill_lock_owner("killed");
            kill(-pid, SIGKILL);
            killed = 1;
            break;
        }
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) break;
        nanosleep(&nap, NULL);
    }
    if (killed) waitpid(pid, NULL, 0);
    cr_assert(killed, "the run ended before it could be killed");
    cr_assert_not(exists(test_path("killed", model)));
    cr_assert_eq(run("killed", epochs), 0, "%s", slurp("log"));
    /* The killed run's lock file stayed behind with its owner's line: the rerun says whose it took over. */
    char *tlog = slurp("log");
    cr_assert(strstr(tlog, "taking over the lock of a run that is no longer alive (pid "), "%s", tlog);
    free(tlog);
    cr_assert_not(exists("killed/.espnet3.lock"), "the lock file outlived a clean run");
    cr_assert(same_file(test_path("full", model), test_path("killed", model)),
              "run killed and resumed differs from the uninterrupted one");
}

Test(train, validation_loss_falls)
{
    cr_assert_eq(run("fall", "--stages train trainer.max_epochs=8 optimizer.lr=0.005"), 0, "%s", slurp("log"));
    char *csv = slurp("fall/metrics.csv");
    /* valid/loss is the last column of the validation rows (those with an empty train/loss). */
    double first = -1, last = -1;
    for (char *line = strtok(csv, "\r\n"); line; line = strtok(NULL, "\r\n")) {
        char *c = strrchr(line, ',');
        if (!c || !c[1] || strstr(line, "valid/loss")) continue;
        double v = atof(c + 1);
        if (first < 0) first = v;
        last = v;
    }
    free(csv);
    cr_assert(first > 0 && last > 0 && last < 0.9 * first, "valid/loss %f -> %f did not fall", first, last);
}

Test(train, keys_not_acted_on_are_announced_and_post_ln_refused)
{
    cr_assert_eq(run("warn", "--stages train trainer.max_epochs=1 +model.model_conf.ctc_weight=0.3"), 0, "%s",
                 slurp("log"));
    char *log = slurp("log");
    cr_assert(strstr(log, "model.model_conf.ctc_weight: 0.3 asks for an attention decoder, but model.decoder is not "
                          "transformer"),
              "%s", log);
    free(log);
    cr_assert_eq(run("postln", "--stages train model.encoder_conf.normalize_before=false"), 1);
    log = slurp("log");
    cr_assert(strstr(log, "model.encoder_conf.normalize_before: false (post-LN blocks) is not supported"), "%s", log);
    free(log);
}

Test(train, max_steps_ends_training_mid_epoch_and_max_epochs_minus_one_needs_it)
{
    /* 5 batches per epoch: 7 steps end in epoch 2, which validates and checkpoints as any epoch end. */
    const char *small = "dataloader.train.iter_factory.batches.batch_bins=80000";
    char extra[512];
    snprintf(extra, sizeof extra, "--stages train trainer.max_epochs=-1 trainer.max_steps=7 %s", small);
    cr_assert_eq(run("steps", extra), 0, "%s", slurp("log"));
    cr_assert(exists("steps/checkpoints/epoch=1-step=5/model.safetensors"), "%s", slurp("log"));
    cr_assert(exists("steps/checkpoints/epoch=2-step=7/model.safetensors"), "%s", slurp("log"));
    cr_assert(!exists("steps/checkpoints/epoch=3-step=10"));
    char *log = slurp("steps/train.log");
    cr_assert(strstr(log, "no epoch limit (trainer.max_epochs -1): training stops after 7 optimizer steps"), "%s", log);
    free(log);
    /* A rerun finds the steps done. */
    cr_assert_eq(run("steps", extra), 0, "%s", slurp("log"));
    log = slurp("steps/train.log");
    cr_assert(strstr(log, "already trained 7 steps (trainer.max_steps 7)"), "%s", log);
    free(log);
    /* max_steps also ends a run that has an epoch limit. */
    snprintf(extra, sizeof extra, "--stages train trainer.max_epochs=5 trainer.max_steps=3 %s", small);
    cr_assert_eq(run("both", extra), 0, "%s", slurp("log"));
    cr_assert(exists("both/checkpoints/epoch=1-step=3/model.safetensors"), "%s", slurp("log"));
    cr_assert(!exists("both/checkpoints/epoch=2-step=5"));
    /* No epoch limit and no step limit would never end. */
    cr_assert_eq(run("forever", "--stages train trainer.max_epochs=-1"), 1);
    log = slurp("log");
    cr_assert(strstr(log, "trainer.max_epochs: -1 (no epoch limit) without trainer.max_steps would train forever"),
              "%s", log);
    free(log);
}

Test(train, second_run_on_a_live_experiment_is_refused_and_changes_nothing)
{
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        setpgid(0, 0);
        char cmd[4600];
        snprintf(cmd, sizeof cmd, "%s >/dev/null 2>&1", command("busy", "--stages train trainer.max_epochs=500"));
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    struct timespec nap = {0, 2000000};
    int ready = 0;
    for (int waited = 0; waited < 60000 && !ready; waited += 2) {
        ready = exists("busy/checkpoints/epoch=1-step=1/model.safetensors");
        if (!ready) nanosleep(&nap, NULL);
    }
    cr_assert(ready, "the first run did not start training:\n%s", slurp("log"));
    char *csv_before = slurp("busy/metrics.csv");
    int status = run("busy", "--stages train trainer.max_epochs=500");
    char *log = slurp("log");
    kill_lock_owner("busy");
    kill(-pid, SIGKILL);
    waitpid(pid, NULL, 0);
    cr_assert_eq(status, 1, "%s", log);
    cr_assert(strstr(log, "/busy: in use by another espnet3 run (pid "), "%s", log);
    cr_assert(strstr(log, ", stage train) (wait for it to finish or stop it; nothing was changed)"), "%s", log);
    cr_assert_not(exists("busy/train1.log"), "the refused run rotated the stage log");
    char *csv_after = slurp("busy/metrics.csv");
    /* The refused run wrote no row (the first one may have logged more since: compare the prefix). */
    cr_assert(!strncmp(csv_before, csv_after, strlen(csv_before)));
    free(csv_before), free(csv_after), free(log);
}

/* gradient_clip_algorithm value (torch's clip_grad_value_ after the unscale, as Lightning): a bound
 * above every gradient changes nothing, a tiny one changes the run, and not as the norm would. */
Test(train, gradient_clip_by_value)
{
    cr_assert_eq(run("none", "--stages train trainer.max_epochs=2 trainer.gradient_clip_val=0"), 0, "%s", slurp("log"));
    cr_assert_eq(run("wide", "--stages train trainer.max_epochs=2 trainer.gradient_clip_val=1e9 "
                             "trainer.gradient_clip_algorithm=value"),
                 0, "%s", slurp("log"));
    cr_assert_eq(run("tight", "--stages train trainer.max_epochs=2 trainer.gradient_clip_val=1e-3 "
                              "trainer.gradient_clip_algorithm=value"),
                 0, "%s", slurp("log"));
    cr_assert_eq(run("tightn", "--stages train trainer.max_epochs=2 trainer.gradient_clip_val=1e-3 "
                               "trainer.gradient_clip_algorithm=norm"),
                 0, "%s", slurp("log"));
    const char *m = "checkpoints/epoch=2-step=2/model.safetensors";
    char a[128], b[128], c[128], d[128];
    snprintf(a, sizeof a, "none/%s", m), snprintf(b, sizeof b, "wide/%s", m);
    snprintf(c, sizeof c, "tight/%s", m), snprintf(d, sizeof d, "tightn/%s", m);
    cr_assert(same_file(a, b), "a bound above every gradient changed the run");
    cr_assert_not(same_file(a, c), "a tight bound changed nothing");
    cr_assert_not(same_file(c, d), "clipping by value computed what clipping by norm does");
    cr_assert_eq(run("bad", "--stages train trainer.gradient_clip_algorithm=max"), 1);
    char *log = slurp("log");
    cr_assert(strstr(log, "trainer.gradient_clip_algorithm: 'max'"), "%s", log);
    free(log);
}

/* trainer.profiler (Lightning's key; any profiler name runs ours): the same weights as without it,
 * and <exp_dir>/profile.txt with the ops and layer kinds of the step. ESPNET3_PROFILE=1 does the
 * same for stage 6, whose workers log the report. */
Test(train, profiler_reports_ops_and_layers_and_changes_no_weight)
{
    cr_assert_eq(run("plain", "--stages train trainer.max_epochs=1"), 0, "%s", slurp("log"));
    cr_assert_eq(run("prof", "--stages train trainer.max_epochs=1 trainer.profiler=simple"), 0, "%s", slurp("log"));
    cr_assert(same_file("plain/checkpoints/epoch=1-step=1/model.safetensors",
                        "prof/checkpoints/epoch=1-step=1/model.safetensors"));
    cr_assert(!exists("plain/profile.txt"));
    char *p = slurp("prof/profile.txt");
    cr_assert(strstr(p, "profile (cpu backend): train, 1 optimizer steps, rank 0:"), "%s", p);
    static const char *const rows[] = {"\nlinear_forward ", "\nlinear_backward ", "\nctc_loss_forward ",
                                       "\nadam_update ", "\ntransformer blocks ", "\ninput layer ",
                                       "\nctc loss ", "\noptimizer (reduce, clip, step) "};
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) cr_assert(strstr(p, rows[i]), "no%s row:\n%s", rows[i], p);
    free(p);
}
