/* The command line: the binary under test (ESPNET3_BIN) run as a child process, plus
 * select_stages() and rotate_log() called directly. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/options.h"
#include "cli/stage_runner.h"
#include "cli/version.h"
#include "core/base/fsio.h"
#include "core/compute/backend.h"
#include "core/compute/blas_core.h"
#include "test/unit/test_util.h"

static char tmp[256];

static void setup(void)
{
    test_tmpdir_make(tmp, sizeof tmp, "cli");
    log_set_quiet(1);
}

static void teardown(void) { test_tmpdir_remove(tmp); }

/* No .timeout (criterion 2.4.1 leaks with it under ASan); run() has its own 20 s limit. */
TestSuite(cli, .init = setup, .fini = teardown);

static const char *tpath(const char *rel) { return test_path(tmp, rel); }

typedef struct result {
    int status; /* exit status; -1 when killed or timed out */
    char out[1 << 17];
    char err[1 << 16];
} result;

/* Runs the binary with args (NULL-terminated) in the temporary folder, 20 s at most. */
static const result *run(const char *const *args)
{
    static result r;
    const char *argv[64];
    int n = 0;
    argv[n++] = test_bin_path();
    for (; args[n - 1] && n < 63; n++) argv[n] = args[n - 1];
    argv[n] = NULL;
    const char *out_path = tpath("stdout.txt"), *err_path = tpath("stderr.txt");
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        int fo = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int fe = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0 || chdir(tmp) != 0) _exit(126);
        dup2(fo, 1);
        dup2(fe, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int st = 0;
    struct timespec pause = {0, 5 * 1000 * 1000};
    for (int waited = 0;; waited++) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) break;
        if (waited > 4000) { /* 20 s */
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            cr_assert_fail("%s timed out", argv[0]);
        }
        nanosleep(&pause, NULL);
    }
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    cr_assert_neq(r.status, 127, "cannot run %s (set ESPNET3_BIN)", argv[0]);
    char *o = test_slurp_or_empty(out_path), *e = test_slurp_or_empty(err_path);
    snprintf(r.out, sizeof r.out, "%s", o);
    snprintf(r.err, sizeof r.err, "%s", e);
    free(o);
    free(e);
    return &r;
}

#define RUN(...) run((const char *const[]){__VA_ARGS__, NULL})

#define assert_has(text, piece) \
    cr_assert(strstr((text), (piece)) != NULL, "output lacks '%s':\n%s", (piece), (text))

/* The tiny recipe configs copied into tmp/conf, so recipe_dir (conf/..) is the temporary folder. */
static const char *tiny_copy(void)
{
    esp_err err;
    cr_assert_eq(mkdir_p(tpath("conf"), &err), 0);
    const char *names[] = {"training_ctc.yaml", "training_tiny.yaml"};
    for (int i = 0; i < 2; i++) {
        char src[1024];
        snprintf(src, sizeof src, "%s/recipes/espeak_fortunes/conf/%s", test_root_dir(), names[i]);
        char *text = read_file(src, READ_LIST, NULL, &err);
        cr_assert_not_null(text, "%s", err.msg);
        char dst[64];
        snprintf(dst, sizeof dst, "conf/%s", names[i]);
        test_write_text(tpath(dst), text);
        free(text);
    }
    return tpath("conf/training_tiny.yaml");
}

static const char *template_dir(void)
{
    static char dir[1024];
    snprintf(dir, sizeof dir, "%s/conf", test_root_dir());
    return dir;
}

/* "# stages to run: 1:a 2:b" for the stages numbered lo..hi in the table. */
/* The stages a run with only a training config selects from [lo, hi]. */
static const char *stage_line(int lo, int hi)
{
    static char line[1024];
    size_t used = (size_t)snprintf(line, sizeof line, "# stages to run:");
    for (int i = 0; i < stage_count; i++)
        if (stage_table[i].number >= lo && stage_table[i].number <= hi && stage_table[i].needs == NEEDS_TRAINING)
            used += (size_t)snprintf(line + used, sizeof line - used, " %d:%s", stage_table[i].number,
                                     stage_table[i].name);
    snprintf(line + used, sizeof line - used, "\n");
    return line;
}

/* ---- help, version, usage errors ------------------------------------------------------------ */

Test(cli, help_lists_options_defaults_and_stages)
{
    const result *r = RUN("--help");
    cr_assert_eq(r->status, 0);
    const char *opts[] = {"--training_config", "--config",   "--inference_config", "--metrics_config",
                          "--stage N",         "--stop_stage M", "--stages NAME...", "--dry_run",
                          "--template_dir",    "--quiet",    "--version",          "--help"};
    for (size_t i = 0; i < sizeof opts / sizeof *opts; i++) assert_has(r->out, opts[i]);
    assert_has(r->out, "usage: espnet3");
    assert_has(r->out, "(default: first stage)");
    assert_has(r->out, "(default: last stage)");
    assert_has(r->out, "(default: all)");
    assert_has(r->out, "(default: conf/ beside the binary)");
    for (int i = 0; i < stage_count; i++) {
        char row[128];
        snprintf(row, sizeof row, "  %d  %s", stage_table[i].number, stage_table[i].name);
        assert_has(r->out, row);
        assert_has(r->out, stage_table[i].summary);
    }
    cr_assert_str_eq(r->err, "");
    cr_assert_eq(RUN("-h")->status, 0);
}

Test(cli, version_names_backends)
{
    const result *r = RUN("--version");
    cr_assert_eq(r->status, 0);
    assert_has(r->out, "espnet3 " ESPNET3_VERSION "\n");
    assert_has(r->out, "backends: cpu");
    /* OpenBLAS' kernels: never a fallback without AVX2 on a CPU with it, unless the user chose
     * (core/compute/blas_core.h) */
    const char *core = strstr(r->out, "openblas core ");
    cr_assert(core, "no OpenBLAS core in --version:\n%s", r->out);
    char name[64] = "";
    cr_assert_eq(sscanf(core, "openblas core %63s", name), 1);
    if (!getenv("OPENBLAS_CORETYPE") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        cr_assert_null(blas_core_better(name, 1, __builtin_cpu_supports("avx512f")),
                       "espnet3 runs OpenBLAS' %s kernels on a CPU with AVX2", name);
}

Test(cli, unknown_option_suggests_and_exits_2)
{
    const result *r = RUN("--stag", "1");
    cr_assert_eq(r->status, 2);
    assert_has(r->err, "espnet3: error: unknown option '--stag' (did you mean --stage?)\n");
    assert_has(r->err, "\nusage: espnet3 ");
    cr_assert_str_eq(r->out, "");

    r = RUN("--completely-different");
    cr_assert_eq(r->status, 2);
    assert_has(r->err, "unknown option '--completely-different'");
    r = RUN("stray");
    cr_assert_eq(r->status, 2);
    assert_has(r->err, "unexpected argument 'stray'");
}

/* A config or model named as a device or a FIFO is one error line, read no further (issue 44:
 * /dev/zero was read until memory ran out, a FIFO hung the open). */
Test(cli, a_config_or_model_that_is_not_a_regular_file_is_one_line)
{
    const result *r = RUN("-c", "/dev/zero", "--stages", "train");
    cr_assert_eq(r->status, 1, "%s", r->err);
    assert_has(r->err, "espnet3: error: /dev/zero: not a regular file");
    cr_assert_eq(mkfifo(tpath("fifo.yaml"), 0600), 0);
    r = RUN("-c", "fifo.yaml", "--stages", "train");
    cr_assert_eq(r->status, 1, "%s", r->err);
    assert_has(r->err, "fifo.yaml: not a regular file");
    test_write_text(tpath("inf.yaml"), "model:\n  asr_train_config: /dev/urandom\n  asr_model_file: /dev/zero\n");
    r = RUN("--inference_config", "inf.yaml", "--stages", "infer");
    cr_assert_eq(r->status, 1, "%s", r->err);
    assert_has(r->err, "/dev/urandom: not a regular file");
}

/* A message longer than its buffer (a 2,700-byte path) keeps its end: what is wrong and the hint
 * (it was cut off before them, issue 44), on one line. */
Test(cli, a_long_path_does_not_cut_off_the_message)
{
    char path[3000] = "/nonexistent/";
    for (int i = 0; i < 12; i++) {
        size_t n = strlen(path);
        memset(path + n, 'x', 200);
        strcpy(path + n + 200, "/");
    }
    strcat(path, "config.yaml");
    const result *r = RUN("--training_config", path, "--stages", "train");
    cr_assert_eq(r->status, 1, "%s", r->err);
    assert_has(r->err, "espnet3: error: /nonexistent/xxx");
    assert_has(r->err, "xxx [...] xxx");
    assert_has(r->err, "/config.yaml: config file not found (check --training_config)\n");
    cr_assert_eq(test_count_lines(r->err), 1, "%s", r->err);
}

Test(cli, bad_values_exit_2)
{
    const result *r = RUN("--stage", "x");
    cr_assert_eq(r->status, 2);
    assert_has(r->err, "espnet3: error: --stage: expected a stage number, got 'x'");
    assert_has(r->err, "usage:");
    cr_assert_eq(RUN("--stop_stage", "-3")->status, 2);
    r = RUN("--stage");
    cr_assert_eq(r->status, 2);
    assert_has(r->err, "--stage needs a value");
    r = RUN("--stage", "2", "--stop_stage", "1");
    cr_assert_eq(r->status, 2);
    assert_has(r->err, "--stop_stage 1 is before --stage 2");
    r = RUN("--stages", "create_dataset", "--stage", "1");
    cr_assert_eq(r->status, 2);
    assert_has(r->err, "cannot be combined");
    r = RUN("--dry_run=1");
    cr_assert_eq(r->status, 2);
    assert_has(r->err, "--dry_run takes no value");
}

Test(cli, unknown_stage_name_exits_2)
{
    const result *r = RUN("--stages", "create_dataset", "nosuchstage");
    cr_assert_eq(r->status, 2);
    assert_has(r->err, "unknown stage 'nosuchstage'");
    assert_has(r->err, "create_dataset");
}

Test(cli, range_leaves_out_stages_without_their_config)
{
    if (!stage_by_name("measure")) cr_skip_test("measure is not in this build");
    const char *cfg = tiny_copy();
    const result *r = RUN("--config", cfg, "--template_dir", template_dir(), "--dry_run");
    cr_assert_eq(r->status, 0, "stderr:\n%s", r->err);
    cr_assert_null(strstr(r->out, "measure"), "stdout:\n%s", r->out);
    assert_has(r->err, "skipping stage measure: no metrics config given");
    /* Named, it needs its config. */
    r = RUN("--config", cfg, "--template_dir", template_dir(), "--stages", "train", "measure", "--dry_run");
    cr_assert_eq(r->status, 1);
    assert_has(r->err, "espnet3: error: stage measure needs a metrics config (give --metrics_config FILE)");
    cr_assert_eq(test_count_lines(r->err), 1, "stderr:\n%s", r->err);
    r = RUN("--config", cfg, "--template_dir", template_dir(), "--stage", "7", "--stop_stage", "7", "--dry_run");
    cr_assert_eq(r->status, 1);
    assert_has(r->err, "stage measure needs a metrics config");
}

Test(cli, stage_without_its_config_exits_1)
{
    const result *r = RUN("--stage", "1", "--stop_stage", "1");
    cr_assert_eq(r->status, 1);
    assert_has(r->err, "espnet3: error: stage create_dataset needs a training config");
    assert_has(r->err, "--training_config");
    cr_assert_eq(test_count_lines(r->err), 1, "stderr:\n%s", r->err);
}

/* ---- dry runs ----------------------------------------------------------------------------- */

Test(cli, dry_run_tiny_recipe_prints_stages_and_resolved_config)
{
    const char *cfg = tiny_copy();
    const result *r = RUN("--config", cfg, "--template_dir", template_dir(), "--dry_run");
    cr_assert_eq(r->status, 0, "stderr:\n%s", r->err);
    /* Only a training config: the training stages (1-5). */
    cr_assert(!strncmp(r->out, stage_line(0, 5), strlen(stage_line(0, 5))), "stdout:\n%s", r->out);
    cr_assert(!strncmp(r->out, "# stages to run: 1:create_dataset 2:train_tokenizer", 51), "stdout:\n%s", r->out);
    assert_has(r->out, "# resolved training config (");
    assert_has(r->out, "num_train: 24\n");
    assert_has(r->out, "exp_tag: training_tiny\n");
    assert_has(r->out, "task: espnet3.systems.asr.task.ASRTask\n"); /* from the template */
    char line[1024];
    snprintf(line, sizeof line, "data_dir: %s/data_tiny\n", tmp);
    assert_has(r->out, line);
    cr_assert_null(strstr(r->out, "${"), "unresolved interpolation:\n%s", r->out);
    /* Nothing ran. */
    cr_assert(!path_exists(tpath("data_tiny")), "dry run created the data folder");
    cr_assert(!path_exists(tpath("downloads_tiny")), "dry run created the download folder");
}

Test(cli, dry_run_stage_range_and_names)
{
    const char *cfg = tiny_copy();
    const result *r = RUN("--config", cfg, "--template_dir", template_dir(), "--stage", "2", "--stop_stage", "2",
                          "--dry_run");
    cr_assert_eq(r->status, 0, "stderr:\n%s", r->err);
    cr_assert(!strncmp(r->out, "# stages to run: 2:train_tokenizer\n", 35), "stdout:\n%s", r->out);

    r = RUN("--training_config", cfg, "--template_dir", template_dir(), "--stages", "all", "--dry_run");
    cr_assert_eq(r->status, 0, "stderr:\n%s", r->err);
    cr_assert(!strncmp(r->out, stage_line(0, 5), strlen(stage_line(0, 5))), "stdout:\n%s", r->out);

    r = RUN("-c", cfg, "--template_dir", template_dir(), "--stages", "train_tokenizer", "create_dataset", "-n");
    cr_assert_eq(r->status, 0, "stderr:\n%s", r->err);
    cr_assert(!strncmp(r->out, "# stages to run: 1:create_dataset 2:train_tokenizer\n", 52), "stdout:\n%s", r->out);

    r = RUN("--config=" , "--dry_run");
    cr_assert_neq(r->status, 0);
}

Test(cli, dry_run_shows_overrides)
{
    const char *cfg = tiny_copy();
    const result *r = RUN("--config", cfg, "--template_dir", template_dir(), "--dry_run", "create_dataset.num_train=7",
                          "trainer.max_epochs=2", "+trainer.deterministic=true", "~create_dataset.nj");
    cr_assert_eq(r->status, 0, "stderr:\n%s", r->err);
    assert_has(r->out, "num_train: 7\n");
    assert_has(r->out, "max_epochs: 2\n");
    assert_has(r->out, "deterministic: true\n");
    cr_assert_null(strstr(r->out, "nj:"), "stdout:\n%s", r->out);
}

Test(cli, dry_run_finds_template_beside_binary)
{
    const char *cfg = tiny_copy();
    const result *r = RUN("--config", cfg, "--dry_run");
    cr_assert_eq(r->status, 0, "stderr:\n%s", r->err);
    assert_has(r->out, "task: espnet3.systems.asr.task.ASRTask\n");
    /* --template_dir '' turns the template off: the template-only key is gone. */
    test_write_text(tpath("plain.yaml"), "seed: 3\n");
    r = RUN("--config", tpath("plain.yaml"), "--template_dir", "", "--dry_run");
    cr_assert_eq(r->status, 0, "stderr:\n%s", r->err);
    assert_has(r->out, "seed: 3\n");
    cr_assert_null(strstr(r->out, "task:"), "stdout:\n%s", r->out);
    /* A template dir without the template: loading says so (a copied binary finds no conf/). */
    esp_err err;
    cr_assert_eq(mkdir_p(tpath("empty"), &err), 0);
    r = RUN("--config", tpath("plain.yaml"), "--template_dir", tpath("empty"), "--dry_run");
    cr_assert_eq(r->status, 0, "stderr:\n%s", r->err);
    assert_has(r->err, "no template ");
    assert_has(r->err, "empty/training.yaml");
}

Test(cli, overrides_go_to_the_configs_that_know_their_key)
{
    const char *cfg = tiny_copy();
    const char *names[] = {"inference_ctc.yaml", "inference_tiny.yaml"}; /* the tiny one is over the other */
    for (int i = 0; i < 2; i++) {
        char src[1024], dst[64];
        snprintf(src, sizeof src, "%s/recipes/espeak_fortunes/conf/%s", test_root_dir(), names[i]);
        char *text = read_file(src, READ_LIST, NULL, &(esp_err){0});
        cr_assert_not_null(text, "%s", src);
        snprintf(dst, sizeof dst, "conf/%s", names[i]);
        test_write_text(tpath(dst), text);
        free(text);
    }
    const result *r = RUN("--config", cfg, "--inference_config", tpath("conf/inference_tiny.yaml"), "--template_dir",
                          template_dir(), "--dry_run", "trainer.max_epochs=7", "model.beam_size=5",
                          "parallel.n_workers=3");
    cr_assert_eq(r->status, 0, "stderr:\n%s", r->err);
    const char *inf_part = strstr(r->out, "# resolved inference config");
    cr_assert_not_null(inf_part, "%s", r->out);
    /* max_epochs only in the training part, beam_size only in the inference part, n_workers in both. */
    const char *me = strstr(r->out, "max_epochs: 7\n"), *bs = strstr(r->out, "beam_size: 5\n");
    cr_assert(me && me < inf_part, "%s", r->out);
    cr_assert(bs && bs > inf_part, "%s", r->out);
    const char *nw = strstr(r->out, "n_workers: 3\n");
    cr_assert(nw && nw < inf_part && strstr(inf_part, "n_workers: 3\n"), "%s", r->out);
    /* A typo below a known key still reaches validation, with its suggestion. */
    r = RUN("--config", cfg, "--inference_config", tpath("conf/inference_tiny.yaml"), "--template_dir",
            template_dir(), "--dry_run", "trainer.max_epoch=7");
    cr_assert_eq(r->status, 1, "stderr:\n%s", r->err);
    assert_has(r->err, "did you mean max_epochs?");
}

/* --show_config: the merged, resolved config with every left-out key's default; overrides are in
 * it, a key we refuse is still the one-line error, and nothing runs. */
Test(cli, show_config_fills_defaults_and_runs_nothing)
{
    const char *cfg = tiny_copy();
    const result *r = RUN("--config", cfg, "--template_dir", template_dir(), "--show_config", "trainer.max_epochs=2",
                          "create_dataset.num_train=7");
    cr_assert_eq(r->status, 0, "stderr:\n%s", r->err);
    cr_assert(!strncmp(r->out, "# training config (", 19), "stdout:\n%s", r->out);
    assert_has(r->out, "), with defaults\n");
    assert_has(r->out, "max_epochs: 2\n");           /* overrides */
    assert_has(r->out, "num_train: 7\n");
    assert_has(r->out, "num_sanity_val_steps: 0\n"); /* as the recipe writes it */
    assert_has(r->out, "max_steps: -1\n");           /* defaults the configs leave out */
    assert_has(r->out, "character_coverage: 1.0\n");
    assert_has(r->out, "task: espnet3.systems.asr.task.ASRTask\n"); /* the template */
    cr_assert_null(strstr(r->out, "# stages to run"), "stdout:\n%s", r->out);
    cr_assert_null(strstr(r->out, "${"), "unresolved interpolation:\n%s", r->out);
    cr_assert(!path_exists(tpath("data_tiny")), "--show_config created the data folder");
    /* --dry_run still shows the config as written (what config.yaml holds). */
    r = RUN("--config", cfg, "--template_dir", template_dir(), "--dry_run");
    cr_assert_eq(r->status, 0, "stderr:\n%s", r->err);
    cr_assert_null(strstr(r->out, "max_steps"), "stdout:\n%s", r->out);
    /* A bad key: the same one-line error as a run. */
    test_write_text(tpath("bad.yaml"), "seed: 1\ntrainer:\n  devics: 2\n");
    r = RUN("--config", tpath("bad.yaml"), "--template_dir", "", "--show_config");
    cr_assert_eq(r->status, 1);
    assert_has(r->err, "bad.yaml:3:3: trainer.devics: unknown key (did you mean devices?)");
    cr_assert_eq(test_count_lines(r->err), 1, "stderr:\n%s", r->err);
    cr_assert_str_eq(r->out, "");
    /* Without a config there is nothing to show. */
    r = RUN("--show_config");
    cr_assert_eq(r->status, 1);
    assert_has(r->err, "--show_config: no config given");
}

Test(cli, config_error_is_one_line_exit_1)
{
    test_write_text(tpath("bad.yaml"), "seed: 1\ntrainer:\n  devices: abc\n");
    const result *r = RUN("--config", tpath("bad.yaml"), "--template_dir", "", "--dry_run");
    cr_assert_eq(r->status, 1);
    char want[1024];
    snprintf(want, sizeof want, "espnet3: error: %s:3:12: trainer.devices: expected an integer, got a string 'abc'\n",
             tpath("bad.yaml"));
    cr_assert_str_eq(r->err, want);
    cr_assert_str_eq(r->out, "");

    r = RUN("--config", tpath("nothere.yaml"), "--dry_run");
    cr_assert_eq(r->status, 1);
    assert_has(r->err, "nothere.yaml: config file not found");

    test_write_text(tpath("syntax.yaml"), "a: [1,\n");
    r = RUN("--config", tpath("syntax.yaml"), "--template_dir", "", "--dry_run");
    cr_assert_eq(r->status, 1);
    assert_has(r->err, "espnet3: error: ");
    assert_has(r->err, "syntax.yaml:");
    assert_has(r->err, "YAML syntax error");
    cr_assert_eq(test_count_lines(r->err), 1, "stderr:\n%s", r->err);
}

Test(cli, accelerator_without_its_backend_fails_before_any_stage)
{
    const char *cfg = tiny_copy();
    /* The user's file names the accelerator: the error points at its line and column. */
    test_write_text(tpath("conf/gpu.yaml"), "defaults:\n  - training_tiny\n  - _self_\ntrainer:\n  accelerator: gpu\n");
    (void)cfg;
    const result *r = RUN("--config", tpath("conf/gpu.yaml"), "--template_dir", template_dir(), "--stage", "1",
                          "--stop_stage", "5");
    cr_assert_eq(r->status, 1);
    char want[1024];
    snprintf(want, sizeof want, "espnet3: error: %s:5:16: trainer.accelerator: gpu: ", tpath("conf/gpu.yaml"));
    cr_assert(strncmp(r->err, want, strlen(want)) == 0, "stderr:\n%s", r->err);
    cr_assert_eq(test_count_lines(r->err), 1, "stderr:\n%s", r->err);
    cr_assert(!path_exists(tpath("data_tiny")), "stage 1 ran before the accelerator was checked");
    /* The inference config's device key likewise, also under --dry_run. */
    r = RUN("--inference_config", test_path(test_root_dir(), "recipes/espeak_fortunes/conf/inference_tiny.yaml"),
            "--stage", "6", "--dry_run", "model.device=cuda");
    cr_assert_eq(r->status, 1);
    assert_has(r->err, "model.device: cuda: ");
    /* cpu and auto open the CPU backend here. */
    r = RUN("--config", cfg, "--template_dir", template_dir(), "--stage", "5", "--dry_run", "trainer.accelerator=cpu");
    cr_assert_eq(r->status, 0, "stderr:\n%s", r->err);
    r = RUN("--config", cfg, "--template_dir", template_dir(), "--stage", "5", "--dry_run", "trainer.accelerator=auto");
    cr_assert_eq(r->status, 0, "stderr:\n%s", r->err);
    /* auto is Lightning's: a GPU where the build opens one (scripts/cuda_emu checks that side). */
    esp_err e;
    backend_kind k;
    cr_assert_eq(backend_kind_for("auto", &k, &e), 0, "%s", e.msg);
    cr_assert_eq(k, backend_cuda_devices() > 0 ? BACKEND_CUDA : BACKEND_CPU);
#ifndef ESPNET3_CUDA
    cr_assert_eq(k, BACKEND_CPU);
#endif
    cr_assert_str_eq(backend_kind_name(k), k == BACKEND_CPU ? "cpu" : "cuda");
    cr_assert_eq(backend_kind_for("tpu", &k, &e), -1);
    assert_has(e.msg, "tpu: unknown accelerator (auto, cpu, gpu or cuda)");
}

/* What stages 3 and 5 read from the tree beyond the schema (speed_perturb_factors, the data_aug_*
 * keys against the frontend's sample rate) fails before stage 1, at the user's line and column. */
Test(cli, augmentation_keys_fail_before_any_stage)
{
    tiny_copy();
    test_write_text(tpath("conf/aug.yaml"),
                    "defaults:\n  - training_tiny\n  - _self_\ndataset:\n  preprocessor:\n    data_aug_effects:\n"
                    "      - [0.5, lowpass, {cutoff_freq: 9000}]\n    data_aug_num: [1, 1]\n    data_aug_prob: 1.0\n");
    const result *r = RUN("--config", tpath("conf/aug.yaml"), "--template_dir", template_dir(), "--stage", "1",
                          "--stop_stage", "5");
    cr_assert_eq(r->status, 1, "stderr:\n%s", r->err);
    assert_has(r->err, "aug.yaml:7:");
    assert_has(r->err, "lowpass: frequency 9000 Hz is not below the Nyquist frequency 8000 Hz of model.frontend_conf.fs");
    cr_assert_eq(test_count_lines(r->err), 1, "stderr:\n%s", r->err);
    cr_assert(!path_exists(tpath("data_tiny")), "stage 1 ran before the augmentation keys were checked");
    /* speed_perturb_factors: its rules are the config load's, as every key's range is. */
    test_write_text(tpath("conf/sp.yaml"), "defaults:\n  - training_tiny\n  - _self_\nspeed_perturb_factors: [0.9, 0.9]\n");
    r = RUN("--config", tpath("conf/sp.yaml"), "--template_dir", template_dir(), "--stage", "1", "--stop_stage", "3");
    cr_assert_eq(r->status, 1, "stderr:\n%s", r->err);
    assert_has(r->err, "sp.yaml:4:");
    assert_has(r->err, "speed_perturb_factors[1]: factor 0.9 is listed twice");
    cr_assert(!path_exists(tpath("data_tiny")), "stage 1 ran before speed_perturb_factors was checked");
    r = RUN("--config", tpath("conf/sp.yaml"), "--template_dir", template_dir(), "--stages", "train_tokenizer",
            "--dry_run");
    cr_assert_eq(r->status, 1, "stderr:\n%s", r->err);
    assert_has(r->err, "sp.yaml:4:");
}

Test(cli, stage_flags_mark_the_training_stage)
{
    for (int i = 0; i < stage_count; i++) {
        const stage_def *s = &stage_table[i];
        cr_assert_eq(!!(s->flags & STAGE_SPAWNS_RANKS), s->number == 5, "stage %s", s->name);
        cr_assert_eq(!!(s->flags & STAGE_NEEDS_BACKEND), s->number == 5 || s->number == 6, "stage %s", s->name);
    }
}

Test(cli, override_error_exits_1)
{
    const char *cfg = tiny_copy();
    const result *r = RUN("--config", cfg, "--template_dir", template_dir(), "--dry_run", "trainer.max_epoch=3");
    cr_assert_eq(r->status, 1);
    assert_has(r->err, "trainer.max_epoch: unknown key (did you mean max_epochs?)");
}

/* ---- select_stages / check_stage_configs / rotate_log ------------------------------------------ */

static cli_args args_range(long lo, long hi)
{
    cli_args a;
    memset(&a, 0, sizeof a);
    a.stage = lo;
    a.stop_stage = hi;
    return a;
}

Test(cli, select_stages_by_range)
{
    const stage_def *sel[64];
    esp_err err;
    cli_args a = args_range(-1, -1);
    cr_assert_eq(select_stages(&a, sel, &err), stage_count);
    for (int i = 0; i < stage_count; i++) cr_assert_eq(sel[i], &stage_table[i]);

    a = args_range(2, 2);
    cr_assert_eq(select_stages(&a, sel, &err), 1, "%s", err.msg);
    cr_assert_str_eq(sel[0]->name, "train_tokenizer");

    a = args_range(1, 1);
    cr_assert_eq(select_stages(&a, sel, &err), 1);
    cr_assert_str_eq(sel[0]->name, "create_dataset");

    a = args_range(2, -1); /* from 2 to the end */
    int n = select_stages(&a, sel, &err);
    cr_assert_geq(n, 1);
    cr_assert_str_eq(sel[0]->name, "train_tokenizer");

    a = args_range(-1, 1); /* from the start to 1 */
    cr_assert_eq(select_stages(&a, sel, &err), 1);
    cr_assert_str_eq(sel[0]->name, "create_dataset");

    a = args_range(2, 1);
    cr_assert_lt(select_stages(&a, sel, &err), 0);
    cr_assert(strstr(err.msg, "--stop_stage 1 is before --stage 2"), "%s", err.msg);

    a = args_range(90, 99);
    cr_assert_lt(select_stages(&a, sel, &err), 0);
    cr_assert(strstr(err.msg, "no stage numbered 90..99"), "%s", err.msg);
}

Test(cli, select_stages_by_name)
{
    const stage_def *sel[64];
    esp_err err;
    cli_args a;
    memset(&a, 0, sizeof a);
    a.stage = a.stop_stage = -1;
    const char *names[] = {"train_tokenizer", "create_dataset", NULL};
    a.stages = names;
    a.n_stages = 2;
    cr_assert_eq(select_stages(&a, sel, &err), 2);
    cr_assert_str_eq(sel[0]->name, "create_dataset"); /* table order, not argument order */
    cr_assert_str_eq(sel[1]->name, "train_tokenizer");

    const char *all[] = {"all", NULL};
    a.stages = all;
    a.n_stages = 1;
    cr_assert_eq(select_stages(&a, sel, &err), stage_count);

    const char *bad[] = {"create_dataset", "nosuch", NULL};
    a.stages = bad;
    a.n_stages = 2;
    cr_assert_lt(select_stages(&a, sel, &err), 0);
    cr_assert(strstr(err.msg, "unknown stage 'nosuch'"), "%s", err.msg);

    if (!stage_by_name("decode")) {
        const char *planned[] = {"decode", NULL};
        a.stages = planned;
        a.n_stages = 1;
        cr_assert_lt(select_stages(&a, sel, &err), 0);
        cr_assert(strstr(err.msg, "stage 'decode' (6) is not available in this build yet"), "%s", err.msg);
    }
}

Test(cli, check_stage_configs_names_missing_config)
{
    const stage_def *sel[64];
    backend_kind kinds[64];
    esp_err err;
    cli_args a = args_range(-1, -1);
    int n = select_stages(&a, sel, &err);
    esp_configs none = {0};
    cr_assert_lt(check_stage_configs(&a, sel, kinds, n, &none, &err), 0);
    cr_assert(strstr(err.msg, "stage create_dataset needs a training config"), "%s", err.msg);
    cr_assert(strstr(err.msg, "--training_config"), "%s", err.msg);
}

Test(cli, cli_parse_collects_overrides)
{
    char *argv[] = {"espnet3", "--config", "x.yaml", "a.b=3", "+c=1", "~d", "--stages", "create_dataset",
                    "train_tokenizer", "--dry_run", NULL};
    cli_args a;
    esp_err err;
    cr_assert_eq(cli_parse(10, argv, &a, &err), 0, "%s", err.msg);
    cr_assert_str_eq(a.training_config, "x.yaml");
    cr_assert_eq(a.n_overrides, 3);
    cr_assert_str_eq(a.overrides[0], "a.b=3");
    cr_assert_str_eq(a.overrides[2], "~d");
    cr_assert_eq(a.n_stages, 2);
    cr_assert_str_eq(a.stages[1], "train_tokenizer");
    cr_assert_eq(a.dry_run, 1);
    cr_assert_eq(a.stage, -1);
    cli_args_free(&a);
}

Test(cli, rotate_log_shifts_old_logs)
{
    esp_err err;
    /* Nothing to rotate. */
    cr_assert_eq(rotate_log(tmp, "X", &err), 0, "%s", err.msg);
    cr_assert(!path_exists(tpath("X1.log")));

    test_write_text(tpath("X.log"), "first");
    cr_assert_eq(rotate_log(tmp, "X", &err), 0, "%s", err.msg);
    cr_assert(!path_exists(tpath("X.log")));
    char *s = test_slurp(tpath("X1.log"));
    cr_assert_str_eq(s, "first");
    free(s);

    test_write_text(tpath("X.log"), "second");
    cr_assert_eq(rotate_log(tmp, "X", &err), 0, "%s", err.msg);
    cr_assert(!path_exists(tpath("X.log")));
    s = test_slurp(tpath("X1.log"));
    cr_assert_str_eq(s, "second");
    free(s);
    s = test_slurp(tpath("X2.log"));
    cr_assert_str_eq(s, "first");
    free(s);
    cr_assert(!path_exists(tpath("X3.log")));
}

Test(cli, decode_is_infer_and_default_selection_keeps_configured_stages)
{
    const stage_def *infer = stage_by_name("infer");
    cr_assert_not_null(infer);
    cr_assert_eq(stage_by_name("decode"), infer);
    cr_assert_eq(infer->number, 6);
    cr_assert_eq(stage_by_number(8), stage_by_name("pack_model"));

    /* No stage options: a training config alone keeps only the training stages. */
    const stage_def *sel[64];
    backend_kind kinds[64];
    esp_err err;
    cli_args a = args_range(-1, -1);
    int n = select_stages(&a, sel, &err);
    esp_config fake = {0};
    esp_configs training_only = {.training = &fake};
    int kept = check_stage_configs(&a, sel, kinds, n, &training_only, &err);
    cr_assert(kept > 0 && kept < n, "%s", err.msg);
    for (int i = 0; i < kept; i++) cr_assert_eq(sel[i]->needs, NEEDS_TRAINING, "%s kept", sel[i]->name);

    /* An explicit selection is kept as given, so a missing config is still an error. */
    const char *want[] = {"decode", NULL};
    a.stages = want;
    a.n_stages = 1;
    n = select_stages(&a, sel, &err);
    cr_assert_eq(n, 1);
    cr_assert_lt(check_stage_configs(&a, sel, kinds, n, &training_only, &err), 0);
    cr_assert(strstr(err.msg, "stage infer needs a inference config"), "%s", err.msg);
}
