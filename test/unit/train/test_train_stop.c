/* Stage 5 inside an epoch (issue 41): checkpoints every N steps (Lightning's ModelCheckpoint
 * every_n_train_steps in trainer.callbacks) change nothing, a SIGTERM stops the run after its step
 * with a checkpoint (exit 75, one log line) from which the same command ends with the weights of an
 * uninterrupted run, validation inside epochs (trainer.val_check_interval) with Lightning's
 * EMAWeightAveraging, and the callbacks' and max_time's keys are checked at their line. The tiny
 * recipe at batch_bins 80000: 5 steps an epoch. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/compute/backend.h"
#include "core/formats/safetensors.h"
#include "test/unit/test_util.h"

static char dir[64];

#define CKPT_EVERY_2 "'+trainer.callbacks=[{_target_: lightning.pytorch.callbacks.ModelCheckpoint, every_n_train_steps: 2}]'"

static char *command(const char *exp, const char *extra)
{
    static char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && timeout 300 '%s' -q --config recipes/espeak_fortunes/conf/training_tiny.yaml "
             "data_dir=%s/data dataset_dir=%s/dl stats_dir=%s/stats exp_dir=%s/%s "
             "dataloader.train.iter_factory.batches.batch_bins=80000 %s",
             test_root_dir(), test_bin_path(), dir, dir, dir, dir, exp, extra);
    return cmd;
}

static int run(const char *exp, const char *extra) { return test_sh("%s >>%s/log 2>&1", command(exp, extra), dir); }

static char *slurp(const char *rel) { return test_slurp_or_empty(test_path(dir, rel)); }

static int same_file(const char *a, const char *b) { return test_same_file(test_path(dir, a), test_path(dir, b)); }

static void setup(void)
{
    test_tmpdir_make(dir, sizeof dir, "train_stop");
    /* The same in every test: once per run of the tests (test_sh_once). */
    cr_assert_eq(test_sh_once(dir, "%s >>%s/log 2>&1", command("exp0", "--stage 1 --stop_stage 3"), dir), 0,
                 "stages 1-3 failed:\n%s", slurp("log"));
}

static void teardown(void) { test_tmpdir_remove(dir); }

TestSuite(train_stop, .init = setup, .fini = teardown);

#define FINAL "checkpoints/epoch=6-step=30/model.safetensors"

Test(train_stop, checkpoints_every_n_steps_change_nothing)
{
    cr_assert_eq(run("full", "--stages train trainer.max_epochs=6"), 0, "%s", slurp("log"));
    cr_assert_eq(run("every2", "--stages train trainer.max_epochs=6 " CKPT_EVERY_2), 0, "%s", slurp("log"));
    char *log = slurp("every2/train.log");
    cr_assert(strstr(log, "train: checkpoint inside epoch 1 at step 2 (batch 2)") &&
                  strstr(log, "train: checkpoint inside epoch 6 at step 28 (batch 3)"),
              "%s", log);
    free(log);
    cr_assert(same_file("full/" FINAL, "every2/" FINAL));
    cr_assert(same_file("full/valid.loss.ave_3best.safetensors", "every2/valid.loss.ave_3best.safetensors"));
    /* only the epoch ends that rank stay; the mid-epoch ones were replaced by the next */
    cr_assert_not(test_exists(test_path(dir, "every2/checkpoints/epoch=5-step=28")));
}

/* The parent of a process, from /proc (0 when it cannot be read). */
static long parent_of(long pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *fp = fopen(path, "r");
    long ppid = 0;
    const char *close_paren = fp && fgets(buf, sizeof buf, fp) ? strrchr(buf, ')') : NULL;
    if (!close_paren || sscanf(close_paren + 2, "%*c %ld", &ppid) != 1) ppid = 0;
    if (fp) fclose(fp);
    return ppid;
}

/* Runs exp with args (its output in <exp>.out / <exp>.err) until checkpoints/<when> exists, then
 * freezes the process that holds the experiment's lock (rank 0), sends SIGTERM to it or, with
 * via_launcher, to its parent (the CLI's rank launcher), and wakes it. Returns the wait status. */
static int run_and_stop(const char *exp, const char *args, const char *when, int via_launcher)
{
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        char cmd[4600];
        snprintf(cmd, sizeof cmd, "%s >%s/%s.out 2>%s/%s.err", command(exp, args), dir, exp, dir, exp);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    char ckpt[128], lock[128];
    snprintf(ckpt, sizeof ckpt, "%s/checkpoints/%s", exp, when);
    snprintf(lock, sizeof lock, "%s/.espnet3.lock", exp);
    struct timespec nap = {0, 500000};
    int sent = 0, st = 0;
    for (int waited = 0; waited < 240000 && !sent; waited++) {
        if (test_exists(test_path(dir, ckpt))) {
            char *line = slurp(lock);
            long owner = 0, target = 0;
            if (sscanf(line, "pid %ld", &owner) == 1 && owner > 0) target = via_launcher ? parent_of(owner) : owner;
            if (target > 1) {
                kill((pid_t)owner, SIGSTOP);
                kill((pid_t)target, SIGTERM);
                nanosleep(&(struct timespec){0, 50000000}, NULL); /* the launcher passes it on meanwhile */
                kill((pid_t)owner, SIGCONT);
                sent = 1;
            }
            free(line);
        }
        if (!sent && waitpid(pid, &st, WNOHANG) == pid) break;
        nanosleep(&nap, NULL);
    }
    cr_assert(sent, "%s ended before checkpoints/%s was seen", exp, when);
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    return st;
}

/* The run is frozen (SIGSTOP) once its first checkpoint inside an epoch exists, sent SIGTERM and
 * woken: it finishes its step, writes a checkpoint, says so and exits 75. The same command then
 * ends where the uninterrupted run ends, bit for bit. */
Test(train_stop, sigterm_stops_after_the_step_and_the_rerun_ends_identically)
{
    cr_assert_eq(run("full", "--stages train trainer.max_epochs=6"), 0, "%s", slurp("log"));
    int st = run_and_stop("stop", "--stages train trainer.max_epochs=6 " CKPT_EVERY_2, "epoch=0-step=2", 0);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 75, "exit status %d, stderr:\n%s", WEXITSTATUS(st),
              slurp("stop.err"));
    char *log = slurp("stop/train.log");
    cr_assert(strstr(log, "train: stopped by SIGTERM at epoch ") && strstr(log, "; resume with the same command"), "%s",
              log);
    cr_assert(strstr(log, "=== [STOPPED] stage: train"), "%s", log);
    free(log);
    cr_assert_not(test_exists(test_path(dir, "stop/" FINAL)));
    cr_assert_eq(run("stop", "--stages train trainer.max_epochs=6 " CKPT_EVERY_2), 0, "%s", slurp("log"));
    log = slurp("stop/train.log");
    cr_assert(strstr(log, "train: resuming from ") && strstr(log, " goes on at batch "), "%s", log);
    free(log);
    cr_assert(same_file("full/" FINAL, "stop/" FINAL), "stopped and resumed run differs from the uninterrupted one");
    cr_assert(same_file("full/valid.loss.ave_3best.safetensors", "stop/valid.loss.ave_3best.safetensors"));
}

/* trainer.max_time: the run stops with a checkpoint once it has trained that long (counting the
 * runs it resumes, as Lightning's Timer does), exit 75. */
Test(train_stop, max_time_stops_with_a_checkpoint)
{
    cr_assert_eq(run("timed", "--stages train trainer.max_epochs=200 trainer.max_time=00:00:00:01 "
                              "'+trainer.callbacks=[{_target_: lightning.pytorch.callbacks.ModelCheckpoint, "
                              "train_time_interval: {_target_: datetime.timedelta, seconds: 0.001}}]'"),
                 75, "%s", slurp("log"));
    char *log = slurp("timed/train.log");
    cr_assert(strstr(log, "train: stopped by trainer.max_time at epoch") && strstr(log, "train: checkpoint inside epoch"),
              "%s", log);
    free(log);
}

Test(train_stop, callback_keys_are_checked_at_their_line)
{
    static const struct { const char *override, *want; } bad[] = {
        {"'+trainer.callbacks=[{_target_: lightning.pytorch.callbacks.ModelCheckpoint, refresh_rate: 2}]'",
         "trainer.callbacks[0].refresh_rate: not an argument of ModelCheckpoint here (it takes every_n_train_steps"},
        {"'+trainer.callbacks=[{_target_: lightning.pytorch.callbacks.ModelCheckpoint, every_n_train_steps: 2, "
         "train_time_interval: {_target_: datetime.timedelta, minutes: 5}}]'",
         "every_n_train_steps and train_time_interval: one of them per ModelCheckpoint"},
        {"'+trainer.callbacks=[{_target_: lightning.pytorch.callbacks.ModelCheckpoint, save_last: false}]'",
         "save_last: true or link: espnet3 always keeps `last`"},
        {"'+trainer.callbacks=[{_target_: lightning.pytorch.callbacks.ModelCheckpoint, every_n_train_steps: -3}]'",
         "trainer.callbacks[0].every_n_train_steps: >= 1 (0 or left out: none)"},
        {"'+trainer.callbacks=[{_target_: lightning.pytorch.callbacks.StochasticWeightAveraging}]'",
         "unknown _target_ 'lightning.pytorch.callbacks.StochasticWeightAveraging'"},
        {"trainer.max_time=12h", "trainer.max_time: '12h' is not a duration \"DD:HH:MM:SS\""},
        {"trainer.val_check_interval=00:00:10:00", "trainer.val_check_interval: a time (validation on the clock"},
        {"trainer.check_val_every_n_epoch=null trainer.val_check_interval=0.5",
         "trainer.val_check_interval: with trainer.check_val_every_n_epoch: null it must be an integer"},
        {"trainer.check_val_every_n_epoch=null trainer.val_check_interval=2 trainer.accumulate_grad_batches=2",
         "trainer.check_val_every_n_epoch: null (batches counted over epochs) with trainer.accumulate_grad_batches 2 "
         "is not built"},
        {"'+trainer.callbacks=[{_target_: lightning.pytorch.callbacks.EMAWeightAveraging, decay: 1.5}]'",
         "trainer.callbacks[0].decay: in [0, 1]"},
        {"'+trainer.callbacks=[{_target_: lightning.pytorch.callbacks.EMAWeightAveraging, refresh_rate: 2}]'",
         "trainer.callbacks[0].refresh_rate: not an argument of EMAWeightAveraging here"},
        {"'+trainer.callbacks=[{_target_: lightning.pytorch.callbacks.WeightAveraging}]'",
         "lightning.pytorch.callbacks.WeightAveraging: its default average is SWA's equal-weight mean"},
        {"'+trainer.callbacks=[{_target_: lightning.pytorch.callbacks.EMAWeightAveraging}, "
         "{_target_: lightning.pytorch.callbacks.EMAWeightAveraging}]'",
         "trainer.callbacks[1]: one EMAWeightAveraging per run here"},
        {"'+trainer.callbacks=[{_target_: lightning.pytorch.callbacks.EarlyStopping, patience: 2}]'",
         "trainer.callbacks[0]: EarlyStopping needs monitor (e.g. valid/loss)"},
        {"'+trainer.callbacks=[{_target_: lightning.pytorch.callbacks.EarlyStopping, monitor: valid/loss, mode: up}]'",
         "trainer.callbacks[0].mode: min or max"},
        {"'+trainer.callbacks=[{_target_: lightning.pytorch.callbacks.EarlyStopping, monitor: valid/loss, patience: -1}]'",
         "trainer.callbacks[0].patience: >= 0"},
        {"'+trainer.callbacks=[{_target_: lightning.pytorch.callbacks.EarlyStopping, monitor: valid/loss, "
         "every_n_train_steps: 3}]'",
         "trainer.callbacks[0].every_n_train_steps: not an argument of EarlyStopping here"},
        {"'+trainer.callbacks=[{_target_: lightning.pytorch.callbacks.EarlyStopping, monitor: valid/loss}, "
         "{_target_: lightning.pytorch.callbacks.EarlyStopping, monitor: valid/cer_ctc}]'",
         "trainer.callbacks[1]: one EarlyStopping per run here"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char extra[1024], rel[32];
        snprintf(extra, sizeof extra, "--stages train %s", bad[i].override);
        snprintf(rel, sizeof rel, "bad%zu.err", i);
        cr_assert_eq(test_sh("%s >/dev/null 2>%s/%s", command("bad", extra), dir, rel), 1, "case %zu", i);
        char *e = slurp(rel);
        cr_expect(strstr(e, bad[i].want) && test_count_lines(e) == 1, "case %zu: %s", i, e);
        free(e);
    }
    cr_assert_not(test_exists(test_path(dir, "bad/checkpoints")), "a stage ran");
}

/* The valid/loss rows of a metrics.csv (CSV lines end in \r\n) as "step:value" (%.4f) joined by spaces. */
static char *valid_rows(const char *rel)
{
    char *csv = slurp(rel), *out = calloc(1, 4096), *save = NULL;
    int col = -1, k = 0;
    for (char *line = strtok_r(csv, "\r\n", &save); line; line = strtok_r(NULL, "\r\n", &save), k++) {
        char *cells[16], *cs = NULL;
        int n = 0;
        for (char *c = line; n < 16; c = NULL) {
            char *tok = c ? c : cs;
            if (!tok) break;
            char *comma = strchr(tok, ',');
            if (comma) *comma = '\0';
            cells[n++] = tok;
            cs = comma ? comma + 1 : NULL;
        }
        if (k == 0) {
            for (int i = 0; i < n; i++)
                if (!strcmp(cells[i], "valid/loss")) col = i;
            continue;
        }
        if (col >= 0 && col < n && cells[col][0])
            snprintf(out + strlen(out), 4096 - strlen(out), "%s%s:%.4f", out[0] ? " " : "", cells[1], atof(cells[col]));
    }
    free(csv);
    return out;
}

/* The average's update after one step, from the files: the "ema.*" tensors of the checkpoint
 * before, moved towards the next step's model by the decay (the CPU backend's op), are the
 * "ema.*" tensors of the checkpoint after it, bit for bit. */
static void expect_one_update(const char *before, const char *after, double decay)
{
    char p[300];
    st_file sb, sa, ma;
    esp_err err;
    snprintf(p, sizeof p, "%s/trainer_state.safetensors", before);
    cr_assert_eq(st_read(test_path(dir, p), &sb, &err), 0, "%s", err.msg);
    snprintf(p, sizeof p, "%s/trainer_state.safetensors", after);
    cr_assert_eq(st_read(test_path(dir, p), &sa, &err), 0, "%s", err.msg);
    snprintf(p, sizeof p, "%s/model.safetensors", after);
    cr_assert_eq(st_read(test_path(dir, p), &ma, &err), 0, "%s", err.msg);
    backend *be = backend_open(BACKEND_CPU, 0, 1, &err);
    cr_assert_not_null(be, "%s", err.msg);
    size_t checked = 0;
    for (size_t i = 0; i < ma.n; i++) {
        char name[160];
        snprintf(name, sizeof name, "ema.%s", ma.tensors[i].name);
        const st_tensor *b = st_get(&sb, name), *a = st_get(&sa, name);
        cr_assert(b && a && ma.tensors[i].dtype == ST_F32, "%s", name);
        size_t n = (size_t)st_numel(a);
        float *avg = malloc(n * sizeof *avg + 1);
        memcpy(avg, b->data, n * sizeof *avg);
        be->ema_update(be, avg, ma.tensors[i].data, n, (float)decay, (float)(1.0 - decay), 0);
        cr_assert(memcmp(avg, a->data, n * sizeof *avg) == 0, "%s: the average is not one update on", name);
        free(avg);
        checked++;
    }
    cr_assert(checked > 10);
    backend_close(be);
    st_close(&sb), st_close(&sa), st_close(&ma);
}

/* The average moved once between two retained checkpoints of a run one step apart (there is one). */
static void expect_one_update_in(const char *exp, double decay)
{
    char ckpts[96];
    snprintf(ckpts, sizeof ckpts, "%s/checkpoints", exp);
    DIR *d = opendir(test_path(dir, ckpts));
    cr_assert_not_null(d);
    long long steps[64], epochs[64];
    int n = 0;
    for (struct dirent *de; (de = readdir(d)) && n < 64;)
        if (sscanf(de->d_name, "epoch=%lld-step=%lld", &epochs[n], &steps[n]) == 2) n++;
    closedir(d);
    int pairs = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            if (steps[j] != steps[i] + 1) continue;
            char before[200], after[200];
            snprintf(before, sizeof before, "%s/epoch=%lld-step=%lld", ckpts, epochs[i], steps[i]);
            snprintf(after, sizeof after, "%s/epoch=%lld-step=%lld", ckpts, epochs[j], steps[j]);
            expect_one_update(before, after, decay);
            pairs++;
        }
    cr_assert(pairs > 0, "no two checkpoints of %s one step apart", exp);
}

/* Two ranks under the CLI's launcher with EMAWeightAveraging (fsdp: each rank averages its chunk of
 * the parameters): SIGTERM to the launcher reaches both ranks, which stop after the same step with
 * one checkpoint (exit 75; fsdp gathers its sharded moments and average for it); the rerun ends as
 * the uninterrupted run, its average too. fsdp validates after every batch, and its gathered
 * average moves once per step. */
#define EMA_HALF_ITEM "{_target_: lightning.pytorch.callbacks.EMAWeightAveraging, decay: 0.5}"

static void two_ranks_stop(const char *strategy, const char *vci)
{
    /* 2 steps an epoch here: a checkpoint after every step, the first inside epoch 1 at step 1; 6
     * epochs, 3 under ASan (the stop, the resume and the average's steps are all there at 3) */
    const int epochs = test_sanitized() ? 3 : 6;
    char args[1024], plain[512];
    snprintf(args, sizeof args,
             "--stages train trainer.max_epochs=%d trainer.devices=2 trainer.strategy=%s %s '+trainer.callbacks=["
             "{_target_: lightning.pytorch.callbacks.ModelCheckpoint, every_n_train_steps: 1}, " EMA_HALF_ITEM "]'",
             epochs, strategy, vci);
    snprintf(plain, sizeof plain, "--stages train trainer.max_epochs=%d trainer.devices=2 trainer.strategy=%s %s "
             "'+trainer.callbacks=[" EMA_HALF_ITEM "]'", epochs, strategy, vci);
    cr_assert_eq(run("full2", plain), 0, "%s", slurp("log"));
    int st = run_and_stop("stop2", args, "epoch=0-step=1", 1);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 75, "exit status %d, stderr:\n%s", WEXITSTATUS(st),
              slurp("stop2.err"));
    char *log = slurp("stop2/train.log");
    cr_assert(strstr(log, "train: stopped by SIGTERM at epoch "), "%s", log);
    free(log);
    cr_assert_eq(run("stop2", args), 0, "%s", slurp("log"));
    cr_assert(same_file("full2/last/model.safetensors", "stop2/last/model.safetensors"),
              "stopped and resumed ddp run differs from the uninterrupted one");
    cr_assert(same_file("full2/last/trainer_state.safetensors", "stop2/last/trainer_state.safetensors"));
    cr_assert(same_file("full2/last.ckpt", "stop2/last.ckpt"));
    if (*vci) expect_one_update_in("full2", 0.5); /* it keeps checkpoints inside epochs */
}

Test(train_stop, sigterm_to_the_launcher_stops_both_ddp_ranks_at_one_step) { two_ranks_stop("ddp", ""); }
Test(train_stop, sigterm_to_the_launcher_stops_both_fsdp_ranks_at_one_step)
{
    two_ranks_stop("fsdp", "trainer.val_check_interval=1");
}

/* EarlyStopping (core/train/early_stopping.c, Lightning's decisions): the run ends after the
 * validation that asks, with its checkpoint and the k-best average, exit 0; a monitor validation
 * does not report is an error before training (strict, Lightning's default). */
Test(train_stop, early_stopping_ends_the_run_after_the_validation_that_asks)
{
    cr_assert_eq(run("early", "--stages train trainer.max_epochs=6 '+trainer.callbacks=[{_target_: "
                              "lightning.pytorch.callbacks.EarlyStopping, monitor: valid/loss, stopping_threshold: "
                              "1000000.0}]'"),
                 0, "%s", slurp("log"));
    char *log = slurp("early/train.log");
    cr_assert(strstr(log, "train: early stopping after epoch 1: the stopping threshold is reached (valid/loss "), "%s",
              log);
    free(log);
    cr_assert(test_exists(test_path(dir, "early/checkpoints/epoch=1-step=5/model.safetensors")));
    cr_assert_not(test_exists(test_path(dir, "early/checkpoints/epoch=2-step=10")));
    cr_assert(test_exists(test_path(dir, "early/valid.loss.ave_1best.safetensors")));
    /* trainer.min_epochs holds the stop off until epoch 3 (Lightning's rule) */
    cr_assert_eq(run("early3", "--stages train trainer.max_epochs=6 +trainer.min_epochs=3 '~trainer.num_sanity_val_steps' "
                               "'+trainer.callbacks=[{_target_: "
                               "lightning.pytorch.callbacks.EarlyStopping, monitor: valid/loss, stopping_threshold: "
                               "1000000.0}]'"),
                 0, "%s", slurp("log"));
    log = slurp("early3/train.log");
    cr_assert(strstr(log, "train: early stopping asked after epoch 1 (the stopping threshold is reached), but "
                          "trainer.min_epochs 3 / min_steps 0 are not reached yet") &&
                  strstr(log, "train: early stopping after epoch 3: the stopping threshold is reached"),
              "%s", log);
    /* Lightning's sanity check ran first: 2 validation batches by default (the tiny recipe sets 0;
     * the override above removes it) */
    cr_assert(strstr(log, "train: sanity check: 2 validation batches ran before training"), "%s", log);
    free(log);
    cr_assert(test_exists(test_path(dir, "early3/checkpoints/epoch=3-step=15/model.safetensors")));
    cr_assert_not(test_exists(test_path(dir, "early3/checkpoints/epoch=4-step=20")));
    cr_assert_eq(run("strict", "--stages train trainer.max_epochs=2 '+trainer.callbacks=[{_target_: "
                               "lightning.pytorch.callbacks.EarlyStopping, monitor: valid/acc}]'"),
                 1);
    char *all = slurp("log");
    cr_assert(strstr(all, "trainer.callbacks: EarlyStopping's monitor valid/acc is not reported by this model's "
                          "validation (it reports valid/loss, valid/loss_ctc, valid/cer_ctc; or strict: false)"),
              "%s", all);
    free(all);
}

/* The schedulers the trainer steps beyond once per step or epoch, in one test (one setup):
 * ReduceLROnPlateau on valid/loss (patience 0, threshold 5%: the tiny recipe's valid/loss improves by
 * less after epoch 2, so the lr halves after epochs 3 and 4): a run of 3 epochs resumed to 5 ends
 * with the weights of 5 uninterrupted epochs (the checkpoint keeps the scheduler's lr, best and
 * counts); a monitor that validation does not report is an error at the line that sets it.
 * OneCycleLR: its beta1 reaches Adam (the weights differ from cycle_momentum: false), and the run
 * fails where torch raises, after the 13th update of total_steps 12. */
#define PLATEAU_ARGS                                                                                                   \
    "--stages train scheduler._target_=torch.optim.lr_scheduler.ReduceLROnPlateau '~scheduler.warmup_steps' "        \
    "+scheduler.patience=0 +scheduler.factor=0.5 +scheduler.threshold=0.05 +scheduler_interval=epoch "
#define ONE_CYCLE_ARGS                                                                                                 \
    "--stages train scheduler._target_=torch.optim.lr_scheduler.OneCycleLR '~scheduler.warmup_steps' "               \
    "+scheduler.max_lr=0.01 +scheduler.total_steps=12 "
Test(train_stop, plateau_and_one_cycle_schedulers_through_the_trainer)
{
    cr_assert_eq(run("plateau", PLATEAU_ARGS "+scheduler_monitor=valid/loss trainer.max_epochs=5"), 0, "%s",
                 slurp("log"));
    char *log = slurp("plateau/train.log");
    cr_assert(strstr(log, "train epoch 3 step 15 loss") && strstr(log, "lr 2.00e-03") &&
                  strstr(log, "train epoch 4 step 20 loss") && strstr(log, "lr 1.00e-03 ") && strstr(log, "lr 5.00e-04 "),
              "%s", log);
    free(log);
    cr_assert_eq(run("plateau35", PLATEAU_ARGS "+scheduler_monitor=valid/loss trainer.max_epochs=3"), 0, "%s",
                 slurp("log"));
    cr_assert_eq(run("plateau35", PLATEAU_ARGS "+scheduler_monitor=valid/loss trainer.max_epochs=5"), 0, "%s",
                 slurp("log"));
    cr_assert(same_file("plateau/checkpoints/epoch=5-step=25/model.safetensors",
                        "plateau35/checkpoints/epoch=5-step=25/model.safetensors"),
              "a run resumed at epoch 3 differs from the uninterrupted one");
    cr_assert_eq(run("acc", PLATEAU_ARGS "+scheduler_monitor=valid/acc trainer.max_epochs=2"), 1);
    char *all = slurp("log");
    cr_assert(strstr(all, "espnet3: error: +scheduler_monitor=valid/acc: scheduler_monitor: valid/acc is not reported "
                          "by this model's validation (it reports valid/loss, valid/loss_ctc, valid/cer_ctc;"),
              "%s", all);
    free(all);
    cr_assert_not(test_exists(test_path(dir, "acc/checkpoints/epoch=1-step=5")), "training ran");
    cr_assert_eq(run("cycle", ONE_CYCLE_ARGS "trainer.max_epochs=3"), 1);
    all = slurp("log");
    cr_assert(strstr(all, "espnet3: error: scheduler: OneCycleLR: Tried to step 13 times. The specified number of total "
                          "steps is 12"),
              "%s", all);
    free(all);
    cr_assert_eq(run("nocycle", ONE_CYCLE_ARGS "+scheduler.cycle_momentum=false trainer.max_epochs=2"), 0, "%s",
                 slurp("log"));
    cr_assert_not(same_file("cycle/checkpoints/epoch=2-step=10/model.safetensors",
                            "nocycle/checkpoints/epoch=2-step=10/model.safetensors"),
                  "cycle_momentum changed nothing: Adam did not take OneCycleLR's beta1");
}

#define EMA_HALF "'+trainer.callbacks=[{_target_: lightning.pytorch.callbacks.EMAWeightAveraging, decay: 0.5}]'"

/* trainer.val_check_interval 3 with check_val_every_n_epoch null, epochs of 5 batches: validation
 * after every 3 batches counted over epochs (steps 3, 6, 9: batches 3 of epoch 1, 1 and 4 of epoch 2,
 * none at the epochs' ends, as Lightning), logged at those steps, each with a checkpoint that ranks
 * (ESPnet3's names epoch0_step3, epoch1_step6, epoch1_step9). With EMAWeightAveraging (decay 0.5)
 * the training is the same (the model's weights), validation sees the average (other losses),
 * last.ckpt holds the average, the best-k .ckpt files the model (ESPnet3 saves them weights-only),
 * and the average moves once per step. A run stopped after its first validation and rerun (the
 * count of batches in its checkpoint) ends with the same files. An integer interval above an
 * epoch's batches and points inside accumulations are errors. */
Test(train_stop, ema_and_validation_inside_epochs)
{
    static const char *vci = "--stages train trainer.max_epochs=2 trainer.val_check_interval=3 "
                             "trainer.check_val_every_n_epoch=null";
    char args[1024];
    cr_assert_eq(run("plain", vci), 0, "%s", slurp("log"));
    snprintf(args, sizeof args, "%s %s", vci, EMA_HALF);
    cr_assert_eq(run("ema", args), 0, "%s", slurp("log"));
    char *vp = valid_rows("plain/metrics.csv"), *ve = valid_rows("ema/metrics.csv");
    for (int i = 0; i < 2; i++) {
        const char *v = i ? ve : vp;
        cr_assert(!strncmp(v, "3:", 2) && strstr(v, " 6:") && strstr(v, " 9:") && !strstr(v, " 5:") &&
                      !strstr(v, " 10:"),
                  "%s", v);
    }
    cr_assert(strcmp(vp, ve) != 0, "the average validated as the model: %s", ve);
    free(vp), free(ve);
    char *log = slurp("ema/train.log");
    cr_assert(strstr(log, "epoch 1 step 3 (batch 3): valid/loss ") && strstr(log, "epoch 2 step 6 (batch 1): ") &&
                  strstr(log, "epoch 2 step 9 (batch 4): "),
              "%s", log);
    free(log);
    cr_assert(same_file("plain/checkpoints/epoch=2-step=10/model.safetensors",
                        "ema/checkpoints/epoch=2-step=10/model.safetensors"));
    static const char *const best[] = {"epoch0_step3_valid.loss.ckpt", "epoch1_step6_valid.loss.ckpt",
                                       "epoch1_step9_valid.loss.ckpt", "valid.loss.ave_3best.safetensors"};
    for (size_t i = 0; i < sizeof best / sizeof *best; i++) {
        char a[128], b[128];
        snprintf(a, sizeof a, "plain/%s", best[i]);
        snprintf(b, sizeof b, "ema/%s", best[i]);
        cr_assert(same_file(a, b), "%s: not the model's weights", best[i]);
    }
    cr_assert_not(same_file("plain/last.ckpt", "ema/last.ckpt"));
    /* the average after step 10 is the one after step 9 (a validation's checkpoint) moved towards
     * step 10's weights */
    expect_one_update_in("ema", 0.5);
    /* stopped after the first validation's checkpoint, rerun: the same files */
    int st = run_and_stop("stop", args, "epoch=0-step=3", 0);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 75, "exit status %d, stderr:\n%s", WEXITSTATUS(st),
              slurp("stop.err"));
    cr_assert_eq(run("stop", args), 0, "%s", slurp("log"));
    static const char *const same[] = {"checkpoints/epoch=2-step=10/model.safetensors",
                                       "checkpoints/epoch=2-step=10/trainer_state.safetensors", "last.ckpt",
                                       "epoch1_step6_valid.loss.ckpt", "epoch1_step9_valid.loss.ckpt",
                                       "valid.loss.ave_3best.safetensors"};
    for (size_t i = 0; i < sizeof same / sizeof *same; i++) {
        char a[128], b[128];
        snprintf(a, sizeof a, "ema/%s", same[i]);
        snprintf(b, sizeof b, "stop/%s", same[i]);
        cr_assert(same_file(a, b), "%s differs after the stop and the rerun", same[i]);
    }
    /* what the epoch's batches decide, at its start: Lightning's error for an integer above them,
     * and points inside accumulations */
    static const struct { const char *args, *want; } bad[] = {
        {"--stages train trainer.val_check_interval=6",
         "trainer.val_check_interval: 6 must be less than or equal to the number of the training batches (5 in epoch 1"},
        {"--stages train trainer.val_check_interval=0.5 trainer.accumulate_grad_batches=3",
         "trainer.val_check_interval: validation after every 2 batches of epoch 1 falls inside accumulations"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cr_assert_eq(test_sh("%s >/dev/null 2>%s/vbad.err", command("vbad", bad[i].args), dir), 1, "case %zu", i);
        char *e = slurp("vbad.err");
        cr_expect(strstr(e, bad[i].want), "case %zu: %s", i, e);
        free(e);
    }
}
