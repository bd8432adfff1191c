/* Checkpoint directories: top-k retention, the `last` link and loading, k-best averaging (against
 * numpy), `last` after a crash at every step of a save, a lost `last` link, and NaN metrics.
 * Helpers: train_files_test_util.{h,c}. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/train/checkpoint.h"
#include "core/base/fsio.h"
#include "core/formats/metrics_csv.h"
#include "core/formats/safetensors.h"
#include "test/unit/test_util.h"
#include "test/unit/train/train_files_test_util.h"

/* The test's experiment folder. */
static const char *const dir = train_files_dir;

/* ---- checkpoints ----------------------------------------------------------------------- */

TestSuite(checkpoint, .init = train_files_setup, .fini = train_files_teardown);

enum { NW = 5 };

/* The model at step s: weights s + i/10, an integer buffer s; optimizer moment 2s. */
typedef struct fake_model {
    float w[NW];
    int64_t counter;
    float moment[NW];
} fake_model;

static void fill(fake_model *fm, int64_t s)
{
    for (int i = 0; i < NW; i++) fm->w[i] = (float)s + (float)i / 10, fm->moment[i] = 2.0f * (float)s;
    fm->counter = s;
}

static int save_step(ckpt_manager *m, int64_t epoch, int64_t step, double loss, double acc, esp_err *err)
{
    fake_model fm;
    fill(&fm, step);
    st_tensor model[] = {
        {.name = "encoder.embed.out.0.weight", .dtype = ST_F32, .ndim = 1, .shape = {NW}, .data = fm.w},
        {.name = "bn.num_batches_tracked", .dtype = ST_I64, .ndim = 0, .data = &fm.counter},
    };
    st_tensor state[] = {{.name = "optimizer.exp_avg.encoder.embed.out.0.weight", .dtype = ST_F32, .ndim = 1,
                          .shape = {NW}, .data = fm.moment}};
    metric metrics[] = {{"valid/loss", loss, 0}, {"valid/acc", acc, 0}, {"epoch", (double)epoch, 1}};
    uint64_t rng[2] = {0xfedcba9876543210ULL, (uint64_t)step};
    ckpt_counter counters[] = {{"batch_in_epoch", step % 7}, {"nan_streak", 0}};
    ckpt_info info = {.epoch = epoch, .step = step, .metrics = metrics, .n_metrics = 3, .rng = rng, .n_rng = 2,
                      .counters = counters, .n_counters = 2, .config_hash = "abc123"};
    return ckpt_save(m, &info, model, 2, state, 1, err);
}

static const criterion_cfg CRIT[] = {{"valid/loss", 3, "min"}, {"valid/acc", 1, "max"}};

static int ckpt_exists(const char *name)
{
    char p[256];
    snprintf(p, sizeof p, "%s/checkpoints/%s", dir, name);
    return is_dir(p);
}

static int count_entries(const char *sub)
{
    char *p = path_join(dir, sub);
    DIR *d = opendir(p);
    cr_assert_not_null(d, "%s", p);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) n++;
    closedir(d);
    free(p);
    return n;
}

static void check_last(const char *name)
{
    char link[256], target[256];
    snprintf(link, sizeof link, "%s/last", dir);
    ssize_t n = readlink(link, target, sizeof target - 1);
    cr_assert_gt(n, 0, "no `last` link");
    target[n] = '\0';
    char want[256];
    snprintf(want, sizeof want, "checkpoints/%s", name);
    cr_assert_str_eq(target, want);
}

Test(checkpoint, top_k_retention_last_link_and_load)
{
    ckpt_manager m;
    esp_err err;
    cr_assert_eq(ckpt_open(&m, dir, CRIT, 2, &err), 0, "%s", err.msg);
    ckpt_loaded c;
    cr_assert_eq(ckpt_load_last(&m, &c, &err), 1);
    /* valid/loss by epoch: 5 3 4 1 2 6 (k=3, min); valid/acc: .1 .9 .2 .3 .4 .5 (k=1, max). */
    double loss[] = {5, 3, 4, 1, 2, 6}, acc[] = {.1, .9, .2, .3, .4, .5};
    for (int e = 1; e <= 6; e++) cr_assert_eq(save_step(&m, e, e * 10, loss[e - 1], acc[e - 1], &err), 0, "%s", err.msg);
    /* Kept: loss best 3 = epochs 4, 5, 2; acc best = epoch 2; last = epoch 6. */
    cr_assert(ckpt_exists("epoch=4-step=40") && ckpt_exists("epoch=5-step=50") && ckpt_exists("epoch=2-step=20"));
    cr_assert(ckpt_exists("epoch=6-step=60"));
    cr_assert(!ckpt_exists("epoch=1-step=10") && !ckpt_exists("epoch=3-step=30"));
    cr_assert_eq(count_entries("checkpoints"), 4);
    check_last("epoch=6-step=60");
    cr_assert_eq(m.tables[0].n, 3);
    cr_assert_str_eq(m.tables[0].entries[0].dir, "epoch=4-step=40");
    cr_assert_str_eq(m.tables[0].entries[2].dir, "epoch=2-step=20");
    cr_assert_str_eq(m.tables[1].entries[0].dir, "epoch=2-step=20");

    cr_assert_eq(ckpt_load_last(&m, &c, &err), 0, "%s", err.msg);
    cr_assert_eq(c.epoch, 6);
    cr_assert_eq(c.step, 60);
    cr_assert_str_eq(c.config_hash, "abc123");
    cr_assert_eq(c.n_rng, 2);
    cr_assert_eq(c.rng[0], 0xfedcba9876543210ULL);
    cr_assert_eq(ckpt_counter_get(&c, "batch_in_epoch", -1), 60 % 7);
    cr_assert_eq(ckpt_counter_get(&c, "missing", -1), -1);
    cr_assert_eq(c.n_metrics, 3);
    cr_assert_str_eq(c.metrics[0].name, "valid/loss");
    cr_assert_eq(c.metrics[0].value, 6.0);
    const float *w;
    int64_t shape[1] = {NW};
    cr_assert_eq(st_get_f32(&c.model, "encoder.embed.out.0.weight", 1, shape, &w, &err), 0, "%s", err.msg);
    cr_assert_eq(w[3], 60.3f);
    cr_assert_eq(st_get_f32(&c.state, "optimizer.exp_avg.encoder.embed.out.0.weight", 1, shape, &w, &err), 0);
    cr_assert_eq(w[0], 120.0f);
    cr_assert_str_eq(st_meta_get(&c.model, "step"), "60");
    ckpt_loaded_free(&c);

    /* Saving the same step twice is refused and changes nothing. */
    cr_assert_neq(save_step(&m, 6, 60, 0.5, 0.5, &err), 0);
    cr_assert(strstr(err.msg, "already saved"), "%s", err.msg);
    ckpt_close(&m);

    /* A resumed run gets the tables back from trainer_state.json and ranks on. */
    cr_assert_eq(ckpt_open(&m, dir, CRIT, 2, &err), 0, "%s", err.msg);
    cr_assert_str_eq(m.last, "epoch=6-step=60");
    cr_assert_eq(m.tables[0].n, 3);
    cr_assert_eq(m.tables[0].entries[1].value, 2.0);
    cr_assert_eq(save_step(&m, 7, 70, 1.5, 0.0, &err), 0, "%s", err.msg); /* beats epoch 2 (loss 3) */
    cr_assert(ckpt_exists("epoch=2-step=20")); /* still the acc best */
    cr_assert(!ckpt_exists("epoch=6-step=60"));
    cr_assert_str_eq(m.tables[0].entries[1].dir, "epoch=7-step=70");
    ckpt_close(&m);

    /* A changed criterion (k=1) trims on open and the next save prunes. */
    criterion_cfg one[] = {{"valid/loss", 1, "min"}};
    cr_assert_eq(ckpt_open(&m, dir, one, 1, &err), 0, "%s", err.msg);
    cr_assert(ckpt_exists("epoch=4-step=40") && ckpt_exists("epoch=7-step=70"));
    cr_assert_eq(count_entries("checkpoints"), 2);
    ckpt_close(&m);
}

/* Five epochs saved with valid/loss 5, 3, 4, 1, 2 and valid/acc 0.1 .. 0.5, then the averages. */
static void five_epochs_averaged(ckpt_manager *m)
{
    esp_err err;
    cr_assert_eq(ckpt_open(m, dir, CRIT, 2, &err), 0, "%s", err.msg);
    double loss[] = {5, 3, 4, 1, 2};
    for (int e = 1; e <= 5; e++) cr_assert_eq(save_step(m, e, e * 10, loss[e - 1], 0.1 * e, &err), 0, "%s", err.msg);
    cr_assert_eq(ckpt_average(m, &err), 0, "%s", err.msg);
}

Test(checkpoint, k_best_average_values_and_names)
{
    ckpt_manager m;
    esp_err err;
    five_epochs_averaged(&m);
    /* valid/loss best 3: steps 40, 50, 20; valid/acc best 1: step 50. */
    char *p = in_dir("valid.loss.ave_3best.safetensors");
    st_file f;
    cr_assert_eq(st_read(p, &f, &err), 0, "%s", err.msg);
    const float *w;
    int64_t shape[1] = {NW};
    cr_assert_eq(st_get_f32(&f, "encoder.embed.out.0.weight", 1, shape, &w, &err), 0, "%s", err.msg);
    for (int i = 0; i < NW; i++) {
        float a = 40 + i / 10.0f, b = 50 + i / 10.0f, c = 20 + i / 10.0f;
        cr_assert_eq(w[i], (float)(((double)a + b + c) / 3), "w[%d] = %.9g", i, w[i]);
    }
    cr_assert_eq(*(const int64_t *)st_get(&f, "bn.num_batches_tracked")->data, 50, "integers from the newest");
    cr_assert_str_eq(st_meta_get(&f, "averaged_models"), "3");
    st_close(&f);
    free(p);
    char link[256], target[256];
    snprintf(link, sizeof link, "%s/valid.loss.ave.safetensors", dir);
    ssize_t n = readlink(link, target, sizeof target - 1);
    cr_assert_gt(n, 0);
    target[n] = '\0';
    cr_assert_str_eq(target, "valid.loss.ave_3best.safetensors");
    p = in_dir("valid.acc.ave_1best.safetensors");
    cr_assert_eq(st_read(p, &f, &err), 0, "%s", err.msg);
    cr_assert_eq(((const float *)st_get(&f, "encoder.embed.out.0.weight")->data)[1], 50.1f);
    st_close(&f);
    free(p);

    /* numpy agrees on the mean. */
    int rc = run_python("import json, struct, numpy as np\n"
                        "def load(p):\n"
                        "    b = open(p, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]; h = json.loads(b[8:8 + n])\n"
                        "    e = h['encoder.embed.out.0.weight']; s, t = e['data_offsets']\n"
                        "    return np.frombuffer(b[8 + n + s:8 + n + t], '<f4')\n"
                        "ws = [load('checkpoints/epoch=%d-step=%d/model.safetensors' % (e, e * 10)) for e in (4, 5, 2)]\n"
                        "ave = np.mean(np.stack(ws).astype(np.float64), 0).astype(np.float32)\n"
                        "assert (load('valid.loss.ave.safetensors') == ave).all()\n");
    cr_assert_eq(rc, 0);

    /* Files of different models are refused with both named. */
    char *a = in_dir("checkpoints/epoch=5-step=50/model.safetensors");
    char *b = in_dir("checkpoints/epoch=5-step=50/trainer_state.safetensors");
    const char *inputs[] = {a, b};
    char *out = in_dir("x.safetensors");
    cr_assert_neq(ckpt_average_files(out, inputs, 2, 0, &err), 0);
    cr_assert(strstr(err.msg, "trainer_state.safetensors"), "%s", err.msg);
    free(a);
    free(b);
    free(out);
    ckpt_close(&m);
}

static const char *crash_at;
static void crash_hook(const char *point)
{
    if (strcmp(point, crash_at) == 0) _exit(42);
}

/* A process killed at `point` of the third save: `last` must load, and a reopened manager goes on. */
static void crash_during_save(const char *point, const char *want_last)
{
    ckpt_manager m;
    esp_err err;
    cr_assert_eq(ckpt_open(&m, dir, CRIT, 1, &err), 0, "%s", err.msg);
    cr_assert_eq(save_step(&m, 1, 10, 5.0, 0, &err), 0, "%s", err.msg);
    cr_assert_eq(save_step(&m, 2, 20, 4.0, 0, &err), 0, "%s", err.msg);
    cr_assert_eq(save_step(&m, 3, 30, 3.0, 0, &err), 0, "%s", err.msg);
    cr_assert_eq(save_step(&m, 4, 40, 9.0, 0, &err), 0, "%s", err.msg); /* loss table: 30, 20, 10 */
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        crash_at = point;
        ckpt_crash_hook = crash_hook;
        esp_err e2;
        save_step(&m, 5, 50, 1.0, 0, &e2); /* would push out step 10 */
        _exit(0);
    }
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 42, "the hook at '%s' did not fire", point);
    ckpt_close(&m);

    check_last(want_last);
    cr_assert_eq(ckpt_open(&m, dir, CRIT, 1, &err), 0, "%s", err.msg);
    ckpt_loaded c;
    cr_assert_eq(ckpt_load_last(&m, &c, &err), 0, "%s", err.msg);
    cr_assert_eq(c.model.n, 2);
    char want_dir[256];
    snprintf(want_dir, sizeof want_dir, "%s/checkpoints/%s", dir, want_last);
    cr_assert_str_eq(c.dir, want_dir);
    ckpt_loaded_free(&c);
    /* No temporary directory or unreferenced checkpoint is left after the reopen. */
    int want_n = strcmp(want_last, "epoch=5-step=50") == 0 ? 3 : 4; /* 50, 30, 20 (+ 10 and 40 before) */
    cr_assert_eq(count_entries("checkpoints"), want_n, "after a crash at %s", point);
    cr_assert_eq(save_step(&m, 6, 60, 8.0, 0, &err), 0, "%s", err.msg);
    check_last("epoch=6-step=60");
    ckpt_close(&m);
}

Test(checkpoint, crash_after_model_file) { crash_during_save("model", "epoch=4-step=40"); }
Test(checkpoint, crash_after_state_file) { crash_during_save("state", "epoch=4-step=40"); }
Test(checkpoint, crash_after_json_file) { crash_during_save("json", "epoch=4-step=40"); }
Test(checkpoint, crash_after_rename) { crash_during_save("renamed", "epoch=4-step=40"); }
Test(checkpoint, crash_after_link_swap) { crash_during_save("linked", "epoch=5-step=50"); }
Test(checkpoint, crash_during_prune) { crash_during_save("pruned", "epoch=5-step=50"); }

Test(checkpoint, lost_last_link_falls_back_to_newest_complete)
{
    ckpt_manager m;
    esp_err err;
    cr_assert_eq(ckpt_open(&m, dir, CRIT, 1, &err), 0, "%s", err.msg);
    cr_assert_eq(save_step(&m, 1, 10, 2.0, 0, &err), 0, "%s", err.msg);
    cr_assert_eq(save_step(&m, 2, 20, 1.0, 0, &err), 0, "%s", err.msg);
    ckpt_close(&m);
    char p[256];
    snprintf(p, sizeof p, "%s/last", dir);
    cr_assert_eq(unlink(p), 0);
    cr_assert_eq(ckpt_open(&m, dir, CRIT, 1, &err), 0, "%s", err.msg);
    cr_assert_str_eq(m.last, "epoch=2-step=20");
    cr_assert_eq(m.tables[0].n, 2);
    ckpt_close(&m);
    /* A bad criterion is a user error naming the key. */
    criterion_cfg bad[] = {{"valid/loss", 3, "lowest"}};
    cr_assert_neq(ckpt_open(&m, dir, bad, 1, &err), 0);
    cr_assert(strstr(err.msg, "best_model_criterion[0]") && strstr(err.msg, "min or max"), "%s", err.msg);
}

Test(checkpoint, nan_metrics_are_stored_and_never_ranked)
{
    ckpt_manager m;
    esp_err err;
    cr_assert_eq(ckpt_open(&m, dir, CRIT, 1, &err), 0, "%s", err.msg);
    cr_assert_eq(save_step(&m, 1, 10, NAN, 0, &err), 0, "%s", err.msg);
    cr_assert_eq(m.tables[0].n, 0);
    ckpt_loaded c;
    cr_assert_eq(ckpt_load_last(&m, &c, &err), 0, "%s", err.msg);
    cr_assert(isnan(c.metrics[0].value));
    ckpt_loaded_free(&c);
    ckpt_close(&m);
}

/* input_layer conv2d8's Linear (and the contextual block encoders') is ESPnet's encoder.embed.out
 * itself: averaging keeps that name (the output has the newest file's names). */
static void average_keeps_embed_out(const char *conv)
{
    float w4[2] = {1, 2}, wo[2] = {3, 4}, w4b[2] = {3, 4}, wob[2] = {5, 6};
    const char *names[2] = {conv, "encoder.embed.out.weight"};
    float *vals[2][2] = {{w4, wo}, {w4b, wob}};
    char *in[2];
    esp_err err;
    for (int k = 0; k < 2; k++) {
        st_tensor t[2];
        for (int i = 0; i < 2; i++)
            t[i] = (st_tensor){.name = names[i], .dtype = ST_F32, .ndim = 1, .shape = {2}, .data = vals[k][i]};
        in[k] = in_dir(k ? "b.safetensors" : "a.safetensors");
        cr_assert_eq(st_write(in[k], t, 2, NULL, 0, &err), 0, "%s", err.msg);
    }
    char *out = in_dir("avg.safetensors");
    const char *inputs[] = {in[0], in[1]};
    cr_assert_eq(ckpt_average_files(out, inputs, 2, 1, &err), 0, "%s", err.msg);
    st_file f;
    cr_assert_eq(st_read(out, &f, &err), 0, "%s", err.msg);
    const st_tensor *o = st_get(&f, "encoder.embed.out.weight");
    cr_assert_not_null(o, "encoder.embed.out was renamed (%s)", conv);
    cr_assert_eq(((const float *)o->data)[1], 5.0f);
    cr_assert_null(st_get(&f, "encoder.embed.out.0.weight"));
    st_close(&f);
    free(in[0]), free(in[1]), free(out);
}

Test(checkpoint, average_keeps_conv2d8_embed_out) { average_keeps_embed_out("encoder.embed.conv.4.weight"); }

/* The contextual block encoders' Conv2dSubsamplingWOPosEnc has two convs and a plain out Linear: the
 * averaged file once said out.0, which no loader of that model read. */
Test(checkpoint, average_keeps_the_contextual_encoders_embed_out)
{
    average_keeps_embed_out("encoder.embed.conv.2.weight");
}

/* ESPnet3's names of the run (last.ckpt, epoch<E>_step<S>_<monitor>.ckpt, <monitor>.ave_<n>best.pth)
 * load in the real PyTorch (the test venv's; scripts/check_torch_load.py, weights_only=True) with
 * Lightning's keys and "model." names, and the average holds the mean. */
Test(checkpoint, espnet3_names_load_in_pytorch)
{
    const char *python = test_venv_tool("python");
    ckpt_manager m;
    five_epochs_averaged(&m);
    ckpt_close(&m); /* the files are what PyTorch reads */
    cr_assert_eq(test_sh("cd '%s' && '%s' '%s/scripts/check_torch_load.py' . > loaded 2>&1", dir, python, test_root_dir()), 0,
                 "%s", test_slurp_or_empty(test_path(dir, "loaded")));
    char *out = test_slurp(test_path(dir, "loaded"));
    static const char *const want[] = {
        /* Lightning counts epochs from 0: our epoch e is its e - 1 */
        "./last.ckpt: ok, epoch 4 global_step 50, 2 tensors, 6 values",
        "./epoch3_step40_valid.loss.ckpt: ok, epoch 3 global_step 40",
        "./epoch4_step50_valid.loss.ckpt: ok",
        "./epoch1_step20_valid.loss.ckpt: ok",
        "./epoch4_step50_valid.acc.ckpt: ok",
        "./valid.loss.ave_3best.pth: ok, state dict, 2 tensors, 6 values",
        "./valid.acc.ave_1best.pth: ok",
    };
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) cr_expect(strstr(out, want[i]), "no '%s' in:\n%s", want[i], out);
    free(out);
    int rc = test_run_python_with(python, dir,
                                  "import torch\n"
                                  "w = torch.load('valid.loss.ave_3best.pth', weights_only=True)['encoder.embed.out.0.weight']\n"
                                  "i = torch.arange(5, dtype=torch.float32) / 10\n"
                                  "ref = (((40 + i).double() + (50 + i).double() + (20 + i).double()) / 3).float()\n"
                                  "assert torch.equal(w, ref), (w, ref)\n");
    cr_assert_eq(rc, 0, "PyTorch reads another mean than the average's");
}
