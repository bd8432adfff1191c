/* trainer.precision through the binary on the tiny recipe (CPU backend, mixed precision emulated:
 * core/compute/ops_precision.h): bf16-mixed and 16-mixed train with finite losses, compute
 * something other than 32 (the GEMMs' inputs are rounded), resume bit-identically (16-mixed's
 * loss scaler state travels in trainer_state.safetensors), and say what they do on the CPU. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test/unit/test_util.h"

static char dir[64];

static const char *command(const char *exp, const char *extra)
{
    static char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && timeout 300 '%s' --config recipes/espeak_fortunes/conf/training_tiny.yaml "
             "data_dir=%s/data dataset_dir=%s/dl stats_dir=%s/stats exp_dir=%s/%s %s >>%s/log 2>&1",
             test_root_dir(), test_bin_path(), dir, dir, dir, dir, exp, extra, dir);
    return cmd;
}

static int run(const char *exp, const char *extra) { return test_sh("%s", command(exp, extra)); }

static char *slurp(const char *rel) { return test_slurp_or_empty(test_path(dir, rel)); }
static int same_file(const char *a, const char *b) { return test_same_file(test_path(dir, a), test_path(dir, b)); }

/* Whether the file holds the bytes of s (safetensors headers are JSON). */
static int file_has(const char *rel, const char *s)
{
    char *path = (char *)test_path(dir, rel);
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    for (size_t i = 0; i + strlen(s) <= n; i++)
        if (!memcmp(buf + i, s, strlen(s))) return 1;
    return 0;
}

static void setup(void)
{
    test_tmpdir_make(dir, sizeof dir, "trainprec");
    /* The same in every test: once per run of the tests (test_sh_once). */
    cr_assert_eq(test_sh_once(dir, "%s", command("exp0", "--stage 1 --stop_stage 3")), 0, "stages 1-3 failed:\n%s",
                 slurp("log"));
}

static void teardown(void) { if (!getenv("KEEP")) test_tmpdir_remove(dir); }

TestSuite(train_precision, .init = setup, .fini = teardown);

#define CKPT "checkpoints/epoch=2-step=2/"

Test(train_precision, mixed_modes_train_differ_from_32_and_resume_bit_identically, .timeout = 600)
{
    cr_assert_eq(run("f32", "--stages train trainer.max_epochs=2 trainer.precision=32"), 0, "%s", slurp("log"));
    cr_assert_eq(run("bf", "--stages train trainer.max_epochs=2 trainer.precision=bf16-mixed"), 0, "%s", slurp("log"));
    char *log = slurp("log");
    cr_assert(strstr(log, "trainer.precision: bf16-mixed on the CPU: GEMM inputs rounded to bfloat16"), "%s", log);
    cr_assert(strstr(log, "threads, precision bf16-mixed,"), "%s", log);
    free(log);
    /* The rounding is on: another model, and losses that stayed finite. */
    cr_assert_not(same_file("f32/" CKPT "model.safetensors", "bf/" CKPT "model.safetensors"));
    char *csv = slurp("bf/metrics.csv");
    cr_assert(strstr(csv, "epoch,step") && !strstr(csv, "nan") && !strstr(csv, "inf"), "%s", csv);
    free(csv);
    cr_assert_not(file_has("bf/" CKPT "trainer_state.safetensors", "grad_scaler"));
    cr_assert_not(file_has("bf/" CKPT "trainer_state.json", "grad_scaler"));
    /* One epoch, stop, rerun to two: the same bits as the uninterrupted run. */
    cr_assert_eq(run("bf_split", "--stages train trainer.max_epochs=1 trainer.precision=bf16-mixed"), 0, "%s",
                 slurp("log"));
    cr_assert_eq(run("bf_split", "--stages train trainer.max_epochs=2 trainer.precision=bf16-mixed"), 0, "%s",
                 slurp("log"));
    cr_assert(same_file("bf/" CKPT "model.safetensors", "bf_split/" CKPT "model.safetensors"));
}

/* The tiny model's gradients (norm ~170, one step per epoch) overflow float16 at the initial scale
 * 65536: the first steps are skipped with the scale halved each time, as torch.amp.GradScaler does
 * on a GPU, until the scaled gradients fit; training then goes on. A run stopped in the middle of
 * the backoffs and resumed ends with the same bits (the scale is restored, not restarted). */
#define CKPT8 "checkpoints/epoch=8-step=8/"
Test(train_precision, fp16_overflow_skips_steps_backs_off_and_resumes_bit_identically, .timeout = 600)
{
    test_skip_under_sanitizer("three 16-mixed runs of 8, 2 and 8 epochs; the loss scaler's skips, backoff and resume run under "
                              "ASan in train_precision/mixed_modes_* and dist_train/fp16_mixed_*");
    cr_assert_eq(run("h", "--stages train trainer.max_epochs=8 trainer.precision=16-mixed"), 0, "%s", slurp("log"));
    char *log = slurp("log");
    cr_assert(strstr(log, "trainer.precision: 16-mixed on the CPU is emulated"), "%s", log);
    cr_assert(strstr(log, "threads, precision 16-mixed,"), "%s", log);
    cr_assert(strstr(log, "train: step 1: inf/NaN gradients at loss scale 65536: optimizer step skipped, scale 32768"),
              "%s", log);
    cr_assert(strstr(log, "train: step 2: inf/NaN gradients at loss scale 32768: optimizer step skipped, scale 16384"),
              "%s", log);
    free(log);
    /* Some step was taken in the end: its grad_norm is finite, and the model moved. */
    char *csv = slurp("h/metrics.csv");
    int finite_steps = 0;
    for (char *line = strtok(csv, "\r\n"); line; line = strtok(NULL, "\r\n")) {
        char *c1 = strchr(line, ','), *c2 = c1 ? strchr(c1 + 1, ',') : NULL;
        if (c2 && c2[1] && c2[1] != ',' && strncmp(c2 + 1, "nan", 3) && strncmp(c2 + 1, "train", 5)) finite_steps++;
    }
    free(csv);
    cr_assert(finite_steps >= 1, "no step of 8 fitted in float16");
    cr_assert(file_has("h/" CKPT8 "trainer_state.safetensors", "grad_scaler.scale"));
    cr_assert(file_has("h/" CKPT8 "trainer_state.json", "grad_scaler.growth_tracker"));
    cr_assert_eq(run("h_split", "--stages train trainer.max_epochs=2 trainer.precision=16-mixed"), 0, "%s",
                 slurp("log"));
    cr_assert_eq(run("h_split", "--stages train trainer.max_epochs=8 trainer.precision=16-mixed"), 0, "%s",
                 slurp("log"));
    cr_assert(same_file("h/" CKPT8 "model.safetensors", "h_split/" CKPT8 "model.safetensors"),
              "resumed 16-mixed run differs from the uninterrupted one");
    cr_assert(same_file("h/" CKPT8 "trainer_state.safetensors", "h_split/" CKPT8 "trainer_state.safetensors"));
    cr_assert(same_file("h/" CKPT8 "trainer_state.json", "h_split/" CKPT8 "trainer_state.json"));

    /* A checkpoint whose scale is not a positive finite number is refused on resume. */
    const char *path = test_path(dir, "h_split/" CKPT8 "trainer_state.safetensors");
    FILE *f = fopen(path, "r+b");
    cr_assert(f);
    uint64_t hlen;
    cr_assert_eq(fread(&hlen, 8, 1, f), 1);
    char *hdr = calloc(hlen + 1, 1);
    cr_assert_eq(fread(hdr, 1, hlen, f), hlen);
    char *e = strstr(hdr, "\"grad_scaler.scale\"");
    cr_assert(e);
    char *o = strstr(e, "\"data_offsets\"");
    cr_assert(o);
    long begin = strtol(strchr(o, '[') + 1, NULL, 10);
    float bad = -2.0f;
    cr_assert_eq(fseek(f, (long)(8 + hlen) + begin, SEEK_SET), 0);
    cr_assert_eq(fwrite(&bad, sizeof bad, 1, f), 1);
    fclose(f);
    free(hdr);
    cr_assert_neq(run("h_split", "--stages train trainer.max_epochs=9 trainer.precision=16-mixed"), 0);
    char *refused = slurp("log");
    cr_assert(strstr(refused, "grad_scaler.scale -2 / growth_tracker"), "%s", refused);
    free(refused);
}
