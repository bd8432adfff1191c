/* The whole Transformer-CTC model against PyTorch: the fixture (scripts/make_model_fixture.py) holds
 * the reference model's weights, a padded batch of 2 (lengths 120 and 97), its log-probs, CTC loss
 * and every parameter gradient, dropout off. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/compute/backend.h"
#include "core/nn/model.h"
#include "test/unit/test_util.h"

/* Reads test/fixtures/model/<name>.f32; returns its element count in *n. */
static float *load(const char *name, size_t *n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/test/fixtures/model/%s.f32", test_root_dir(), name);
    FILE *fp = fopen(path, "rb");
    cr_assert_not_null(fp, "%s", path);
    fseek(fp, 0, SEEK_END);
    long bytes = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    float *v = malloc((size_t)bytes);
    cr_assert_eq(fread(v, 1, (size_t)bytes, fp), (size_t)bytes);
    fclose(fp);
    *n = (size_t)bytes / sizeof(float);
    return v;
}

/* max |a - b| / max |b|: the error relative to the tensor's scale. */
static double rel_err(const float *a, const float *b, size_t n) { return test_err_ff(a, b, n, 1.0, NULL); }

Test(model, matches_pytorch_logprobs_loss_and_every_gradient)
{
    model_dims d = {.idim = 80, .d = 32, .heads = 4, .ff = 64, .blocks = 2, .vocab = 31};
    d.f2 = ((d.idim - 1) / 2 - 1) / 2;
    backend *be;
    esp_err err;
    cr_assert((be = backend_open(BACKEND_CPU, 0, 1, &err)) != NULL, "%s", err.msg);
    asr_model m;
    model_rates rates = {0};
    asr_model_init(&m, be, &d, &rates);
    for (size_t i = 0; i < m.table.n; i++) {
        size_t n;
        float *v = load(m.table.items[i].name, &n);
        cr_assert_eq(n, m.table.items[i].count, "%s", m.table.items[i].name);
        memcpy(m.params + m.table.items[i].offset, v, n * sizeof *v);
        free(v);
    }
    size_t nf, nm, ns, n;
    float *feats = load("in.feats", &nf), *mean = load("normalize.mean", &nm), *std = load("normalize.std", &ns);
    /* The reference applies global MVN inside the model to every frame, padding included. */
    for (size_t i = 0; i < nf; i++) feats[i] = (feats[i] - mean[i % 80]) / std[i % 80];
    float *lens_f = load("in.lens", &n), *ys_f = load("in.ys", &n), *ylens_f = load("in.ylens", &n);
    int lens[2] = {(int)lens_f[0], (int)lens_f[1]}, ylens[2] = {(int)ylens_f[0], (int)ylens_f[1]};
    int stride = 12; /* the fixture's labels are 2 padded rows of 12 */
    int labels[24];
    for (int i = 0; i < 24; i++) labels[i] = (int)ys_f[i];
    int T = (int)(nf / 2 / 80);

    asr_model_zero_grad(&m);
    asr_model_forward(&m, feats, lens, 2, T, 0, 0);
    float *hl = load("out.hlens", &n);
    cr_assert_eq(m.hlens[0], (int)hl[0]);
    cr_assert_eq(m.hlens[1], (int)hl[1]);
    float *logp = load("out.logp", &n);
    cr_assert_eq(n, (size_t)2 * m.T2 * d.vocab);
    double e = rel_err(m.logp, logp, n);
    cr_assert_lt(e, 1e-4, "log-probs differ: %g", e);
    double loss = asr_model_loss(&m, labels, ylens, stride, NULL);
    float *ref_loss = load("out.loss", &n);
    cr_assert_lt(fabs(loss - ref_loss[0]) / fabs(ref_loss[0]), 1e-5, "loss %f vs %f", loss, ref_loss[0]);
    asr_model_backward(&m, 1.0f);
    for (size_t i = 0; i < m.table.n; i++) {
        char name[128];
        snprintf(name, sizeof name, "grad.%s", m.table.items[i].name);
        float *g = load(name, &n);
        double ge = rel_err(m.grads + m.table.items[i].offset, g, n);
        /* The key bias adds the same q.b_k to every score of a query, which softmax ignores: its
         * true gradient is 0 and both sides hold rounding noise, so compare it absolutely. */
        if (strstr(m.table.items[i].name, "linear_k.bias")) {
            double worst = 0;
            worst = fmax(worst, test_max_abs(m.grads + m.table.items[i].offset, n));
            cr_expect_lt(worst, 1e-5, "gradient of %s should vanish: %g", m.table.items[i].name, worst);
        } else {
            cr_expect_lt(ge, 1e-4, "gradient of %s differs: %g", m.table.items[i].name, ge);
        }
        free(g);
    }
    free(feats), free(mean), free(std), free(lens_f), free(ys_f), free(ylens_f), free(hl), free(logp), free(ref_loss);
    asr_model_free(&m);
    backend_close(be);
}
