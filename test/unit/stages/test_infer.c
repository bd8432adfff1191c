/* Decoding's model side: the inference-only forward equals the training forward bit for bit,
 * padding never reaches an utterance's valid frames (equal up to GEMM rounding: OpenBLAS rounds a
 * row differently for other row and thread counts, which is why infer runs one utterance per
 * forward on a fixed thread count), model file names as ESPnet users give them, and weight
 * loading errors. */
#include <math.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/compute/backend.h"
#include "core/base/fsio.h"
#include "core/nn/model.h"
#include "core/nn/model_files.h"
#include "core/base/rng.h"
#include "core/formats/safetensors.h"
#include "test/unit/test_util.h"

static model_dims small_dims(void)
{
    model_dims d = {.idim = 20, .d = 16, .heads = 2, .ff = 24, .blocks = 2, .vocab = 9};
    d.f2 = ((d.idim - 1) / 2 - 1) / 2;
    return d;
}

static void random_feats(float *x, size_t n, uint64_t seed)
{
    rng r;
    rng_init(&r, seed);
    for (size_t i = 0; i < n; i++) x[i] = (float)((double)(rng_next(&r) % 2001) / 1000.0 - 1.0);
}

/* log-probs of utterance b's first hlen frames after a forward of lens[] padded to Tmax. */
static float *forward_logp(asr_model *m, const float *utts[], const int *lens, int B, int idim, int b, int *hlen)
{
    int Tmax = 0;
    for (int i = 0; i < B; i++) Tmax = lens[i] > Tmax ? lens[i] : Tmax;
    float *x = calloc((size_t)B * Tmax * idim, sizeof *x);
    for (int i = 0; i < B; i++) memcpy(x + (size_t)i * Tmax * idim, utts[i], (size_t)lens[i] * idim * sizeof *x);
    asr_model_forward(m, x, lens, B, Tmax, 0, 0);
    *hlen = m->hlens[b];
    size_t n = (size_t)*hlen * m->dims.vocab;
    float *out = malloc(n * sizeof *out);
    memcpy(out, m->logp + (size_t)b * m->T2 * m->dims.vocab, n * sizeof *out);
    free(x);
    return out;
}

Test(infer, inference_path_is_exact_and_padding_never_reaches_valid_frames)
{
    model_dims d = small_dims();
    esp_err err;
    backend *be1, *be2;
    cr_assert((be1 = backend_open(BACKEND_CPU, 0, 1, &err)) != NULL, "%s", err.msg);
    cr_assert((be2 = backend_open(BACKEND_CPU, 0, 2, &err)) != NULL, "%s", err.msg);
    model_rates rates = {.dropout = 0.1f, .pos_dropout = 0.1f};
    asr_model train_m, inf1, inf2;
    asr_model_init(&train_m, be1, &d, &rates);
    cr_assert_eq(param_init(train_m.params, &train_m.table, "xavier_uniform", 3, &err), 0);
    asr_model_init_inference(&inf1, be1, &d);
    asr_model_init_inference(&inf2, be2, &d);
    memcpy(inf1.params, train_m.params, train_m.table.total * sizeof(float));
    memcpy(inf2.params, train_m.params, train_m.table.total * sizeof(float));

    int lens[3] = {57, 130, 23};
    float *u[3];
    for (int i = 0; i < 3; i++) {
        u[i] = malloc((size_t)lens[i] * d.idim * sizeof(float));
        random_feats(u[i], (size_t)lens[i] * d.idim, 100 + (uint64_t)i);
    }
    for (int b = 0; b < 3; b++) {
        int h_alone, h_batch, h_train, h_thr;
        const float *one[1] = {u[b]};
        float *alone = forward_logp(&inf1, one, &lens[b], 1, d.idim, 0, &h_alone);
        float *batch = forward_logp(&inf1, (const float **)u, lens, 3, d.idim, b, &h_batch);
        float *trained = forward_logp(&train_m, (const float **)u, lens, 3, d.idim, b, &h_train);
        float *threads = forward_logp(&inf2, (const float **)u, lens, 3, d.idim, b, &h_thr);
        cr_assert_eq(h_alone, h_batch);
        cr_assert_eq(h_alone, ((lens[b] - 1) / 2 - 1) / 2);
        size_t n = (size_t)h_alone * d.vocab;
        cr_assert_eq(memcmp(batch, trained, n * sizeof(float)), 0, "utterance %d: inference path differs", b);
        /* Padding is masked out: only rounding separates a padded batch (or 2 threads) from alone. */
        for (size_t k = 0; k < n; k++) {
            cr_assert(fabsf(alone[k] - batch[k]) <= 1e-4f * (1 + fabsf(alone[k])), "utterance %d [%zu]: %g vs %g", b, k,
                      alone[k], batch[k]);
            cr_assert(fabsf(threads[k] - batch[k]) <= 1e-4f * (1 + fabsf(batch[k])), "utterance %d [%zu]", b, k);
        }
        free(alone), free(batch), free(trained), free(threads);
    }
    for (int i = 0; i < 3; i++) free(u[i]);
    asr_model_free(&train_m);
    asr_model_free(&inf1);
    asr_model_free(&inf2);
    backend_close(be1);
    backend_close(be2);
}

static char dir[64];

static void mkdirs(void) { test_tmpdir_make(dir, sizeof dir, "infer"); }

static void rmdirs(void) { test_tmpdir_remove(dir); }

static void touch(const char *rel) { test_write_text(test_path(dir, rel), ""); }

static void expect_resolves(const char *given, const char *exp_dir, const char *want_rel)
{
    char *out;
    esp_err err;
    cr_assert_eq(model_file_resolve(given, exp_dir, &out, &err), 0, "%s: %s", given, err.msg);
    char want[256];
    snprintf(want, sizeof want, "%s/%s", dir, want_rel);
    cr_assert_str_eq(out, want, "%s", given);
    free(out);
}

Test(infer, model_file_names_as_espnet_users_give_them, .init = mkdirs, .fini = rmdirs)
{
    touch("valid.loss.ave_3best.safetensors");
    char p[256];
    snprintf(p, sizeof p, "%s/checkpoints/epoch=3-step=9", dir);
    esp_err err;
    cr_assert_eq(mkdir_p(p, &err), 0);
    touch("checkpoints/epoch=3-step=9/model.safetensors");
    char link[256];
    snprintf(link, sizeof link, "%s/last", dir);
    cr_assert_eq(symlink("checkpoints/epoch=3-step=9", link), 0);

    char a[256];
    snprintf(a, sizeof a, "%s/valid.loss.ave_3best.safetensors", dir);
    expect_resolves(a, NULL, "valid.loss.ave_3best.safetensors");
    snprintf(a, sizeof a, "%s/valid.loss.ave_3best.pth", dir);
    expect_resolves(a, NULL, "valid.loss.ave_3best.safetensors");
    snprintf(a, sizeof a, "%s/valid.loss.ave_3best", dir);
    expect_resolves(a, NULL, "valid.loss.ave_3best.safetensors");
    snprintf(a, sizeof a, "%s/last.ckpt", dir);
    expect_resolves(a, NULL, "last/model.safetensors");
    snprintf(a, sizeof a, "%s/last", dir);
    expect_resolves(a, NULL, "last/model.safetensors");
    /* A bare name is looked up in exp_dir. */
    expect_resolves("valid.loss.ave_3best.pth", dir, "valid.loss.ave_3best.safetensors");

    char *out;
    snprintf(a, sizeof a, "%s/valid.acc.best.pth", dir);
    cr_assert_eq(model_file_resolve(a, NULL, &out, &err), -1);
    cr_assert(strstr(err.msg, "valid.acc.best.safetensors"), "%s", err.msg);
    cr_assert(strstr(err.msg, "no model weights"), "%s", err.msg);
}

Test(infer, weights_load_with_espnet3_prefix_and_errors_name_the_tensor, .init = mkdirs, .fini = rmdirs)
{
    model_dims d = small_dims();
    esp_err err;
    backend *be;
    cr_assert((be = backend_open(BACKEND_CPU, 0, 1, &err)) != NULL, "%s", err.msg);
    asr_model src, dst;
    asr_model_init_inference(&src, be, &d);
    asr_model_init_inference(&dst, be, &d);
    cr_assert_eq(param_init(src.params, &src.table, "xavier_normal", 5, &err), 0);
    size_t n = src.table.n;
    st_tensor *t = calloc(n + 1, sizeof *t);
    char (*names)[128] = calloc(n + 1, sizeof *names);
    for (size_t i = 0; i < n; i++) {
        const param_info *p = &src.table.items[i];
        snprintf(names[i], sizeof names[i], "model.%s", p->name); /* ESPnet3's Lightning wrapper */
        t[i] = (st_tensor){.name = names[i], .dtype = ST_F32, .ndim = p->ndim, .data = src.params + p->offset};
        for (int k = 0; k < p->ndim; k++) t[i].shape[k] = p->shape[k];
    }
    float extra = 1;
    t[n] = (st_tensor){.name = "decoder.embed.0.weight", .dtype = ST_F32, .ndim = 1, .shape = {1}, .data = &extra};
    char path[256];
    snprintf(path, sizeof path, "%s/m.safetensors", dir);
    cr_assert_eq(st_write(path, t, n + 1, NULL, 0, &err), 0, "%s", err.msg);
    cr_assert_eq(asr_model_load_weights(&dst, path, &err), 0, "%s", err.msg);
    cr_assert_eq(memcmp(src.params, dst.params, src.table.total * sizeof(float)), 0);

    /* One tensor missing, then one of the wrong shape. */
    cr_assert_eq(st_write(path, t, n - 1, NULL, 0, &err), 0);
    cr_assert_eq(asr_model_load_weights(&dst, path, &err), -1);
    cr_assert(strstr(err.msg, src.table.items[n - 1].name), "%s", err.msg);
    t[0].shape[0] += 1;
    cr_assert_eq(st_write(path, t, n, NULL, 0, &err), 0);
    cr_assert_eq(asr_model_load_weights(&dst, path, &err), -1);
    cr_assert(strstr(err.msg, names[0]) && strstr(err.msg, "the model needs F32"), "%s", err.msg);
    free(t);
    free(names);
    asr_model_free(&src);
    asr_model_free(&dst);
    backend_close(be);
}
