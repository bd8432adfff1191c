/* libFuzzer target for a checkpoint's trainer state as ckpt_open and ckpt_load_last read it: the
 * input is trainer_state.json, optionally followed by FUZZ_SEP and trainer_state.safetensors, of
 * checkpoints/epoch=1-step=10 (which `last` names) in an exp dir that also holds a complete
 * epoch=0-step=5. Then the best-k tables it restores are averaged (ckpt_average). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/fsio.h"
#include "core/train/checkpoint.h"
#include "test/fuzz/fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const criterion_cfg crit[] = {{"valid/loss", 2, "min"}, {"valid/acc", 2, "max"}};

/* The files of a valid two-checkpoint exp dir, as ckpt_save wrote them. */
static char *model_bytes, *state_bytes, *old_json;
static size_t model_len, state_len, old_json_len;

static char *slurp(const char *path, size_t *len)
{
    esp_err err;
    char *b = read_file(path, READ_LIST, len, &err);
    if (!b) abort();
    return b;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_scratch("trainer_state");
    float w[6] = {1, 2, 3, 4, 5, 6}, m1[6] = {0}, m2[6] = {0};
    st_tensor model[] = {{.name = "encoder.w", .dtype = ST_F32, .ndim = 2, .shape = {2, 3}, .data = w}};
    st_tensor state[] = {{.name = "optimizer.exp_avg", .dtype = ST_F32, .ndim = 1, .shape = {6}, .data = m1},
                         {.name = "optimizer.exp_avg_sq", .dtype = ST_F32, .ndim = 1, .shape = {6}, .data = m2}};
    uint64_t rng[2] = {1, 0xfedcba9876543210u};
    ckpt_counter counters[] = {{"optimizer.step", 5}};
    metric metrics[] = {{"valid/loss", 2.5, 0}, {"valid/acc", 0.5, 0}};
    ckpt_info info = {.epoch = 0, .step = 5, .metrics = metrics, .n_metrics = 2, .rng = rng, .n_rng = 2,
                      .counters = counters, .n_counters = 1, .config_hash = "abc"};
    ckpt_manager m;
    esp_err err;
    if (ckpt_open(&m, fuzz_path("exp"), crit, 2, &err) != 0 ||
        ckpt_save(&m, &info, model, 1, state, 2, &err) != 0)
        abort();
    ckpt_close(&m);
    model_bytes = slurp(fuzz_path("exp/checkpoints/epoch=0-step=5/model.safetensors"), &model_len);
    state_bytes = slurp(fuzz_path("exp/checkpoints/epoch=0-step=5/trainer_state.safetensors"), &state_len);
    old_json = slurp(fuzz_path("exp/checkpoints/epoch=0-step=5/trainer_state.json"), &old_json_len);
    return 0;
}

static void write_ckpt(const char *name, const void *json, size_t json_len, const void *state, size_t slen)
{
    esp_err err;
    char rel[128];
    snprintf(rel, sizeof rel, "exp/checkpoints/%s", name);
    if (mkdir_p(fuzz_path(rel), &err) != 0) abort();
    snprintf(rel, sizeof rel, "exp/checkpoints/%s/model.safetensors", name);
    fuzz_write(rel, model_bytes, model_len);
    snprintf(rel, sizeof rel, "exp/checkpoints/%s/trainer_state.safetensors", name);
    fuzz_write(rel, state, slen);
    snprintf(rel, sizeof rel, "exp/checkpoints/%s/trainer_state.json", name);
    fuzz_write(rel, json, json_len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *p = data, *end = data + size;
    size_t json_len = 0, slen = 0;
    const uint8_t *json = fuzz_next_part(&p, end, &json_len);
    const uint8_t *state = fuzz_next_part(&p, end, &slen);
    if (!state) state = (const uint8_t *)state_bytes, slen = state_len;
    fuzz_clear();
    write_ckpt("epoch=0-step=5", old_json, old_json_len, state_bytes, state_len);
    write_ckpt("epoch=1-step=10", json, json_len, state, slen);
    if (symlink("checkpoints/epoch=1-step=10", fuzz_path("exp/last")) != 0) abort();

    ckpt_manager m;
    esp_err err;
    if (ckpt_open(&m, fuzz_path("exp"), crit, 2, &err) != 0) abort(); /* a bad checkpoint is skipped */
    ckpt_loaded c;
    int rc = ckpt_load_last(&m, &c, &err);
    if (rc == 0) {
        if (c.epoch < 0 || c.step < 0 || !c.dir) abort();
        ckpt_counter_get(&c, "optimizer.step", 0);
        ckpt_loaded_free(&c);
    } else if (rc < 0 && !strstr(err.msg, fuzz_path("exp"))) {
        abort(); /* every error names the file */
    }
    ckpt_average(&m, &err);
    ckpt_close(&m);
    return 0;
}
