/* The flat parameter table: ESPnet2 names and shapes (checked against the PyTorch fixture's
 * index), aliases, and the init schemes' statistics. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/nn/model_params.h"
#include "test/unit/test_util.h"

static model_dims fixture_dims(void)
{
    model_dims d = {.idim = 80, .d = 32, .heads = 4, .ff = 64, .blocks = 2, .vocab = 31};
    d.f2 = ((d.idim - 1) / 2 - 1) / 2;
    return d;
}

Test(model_params, names_and_shapes_match_the_pytorch_fixture)
{
    model_dims d = fixture_dims();
    param_table t;
    param_table_build(&t, &d);
    char path[512];
    snprintf(path, sizeof path, "%s/test/fixtures/model/index.txt", test_root_dir());
    FILE *fp = fopen(path, "r");
    cr_assert_not_null(fp, "%s", path);
    char line[512];
    size_t seen = 0;
    while (fgets(line, sizeof line, fp)) {
        char name[128];
        int64_t shape[4] = {0};
        int n = sscanf(line, "%127s %ld %ld %ld %ld", name, &shape[0], &shape[1], &shape[2], &shape[3]);
        if (name[0] == '#' || !strncmp(name, "grad.", 5) || !strncmp(name, "in.", 3) || !strncmp(name, "out.", 4) ||
            !strncmp(name, "normalize.", 10))
            continue;
        const param_info *p = param_find(&t, name);
        cr_assert_not_null(p, "fixture tensor %s has no entry", name);
        cr_assert_eq(p->ndim, n - 1, "%s", name);
        for (int i = 0; i < p->ndim; i++) cr_assert_eq(p->shape[i], shape[i], "%s dim %d", name, i);
        seen++;
    }
    fclose(fp);
    cr_assert_eq(seen, t.n, "fixture has %zu parameters, table %zu", seen, t.n);
    size_t total = 0;
    for (size_t i = 0; i < t.n; i++) {
        cr_assert_eq(t.items[i].offset, total);
        total += t.items[i].count;
    }
    cr_assert_eq(total, t.total);
    param_table_free(&t);
}

Test(model_params, reference_model_has_6584862_parameters)
{
    /* The benchmark model of asr_ctc_ref.py: d 256, 4 heads, FF 1024, 6 blocks, vocab 30. */
    model_dims d = {.idim = 80, .d = 256, .heads = 4, .ff = 1024, .blocks = 6, .vocab = 30};
    d.f2 = 19;
    param_table t;
    param_table_build(&t, &d);
    cr_assert_eq(t.total, 6584862u);
    param_table_free(&t);
}

Test(model_params, aliases)
{
    model_dims d = fixture_dims();
    param_table t;
    param_table_build(&t, &d);
    cr_assert_eq(param_find_alias(&t, "model.encoder.after_norm.weight"), param_find(&t, "encoder.after_norm.weight"));
    /* ESPnet's name is the table's; espnet3's older one is read as it. */
    cr_assert_not_null(param_find(&t, "encoder.embed.out.0.weight"));
    cr_assert_null(param_find(&t, "encoder.embed.out.weight"));
    cr_assert_eq(param_find_alias(&t, "encoder.embed.out.weight"), param_find(&t, "encoder.embed.out.0.weight"));
    cr_assert_eq(param_find_alias(&t, "model.encoder.embed.out.bias"), param_find(&t, "encoder.embed.out.0.bias"));
    cr_assert_null(param_find_alias(&t, "encoder.embed.out.1.weight"));
    char buf[128];
    cr_assert(param_legacy_name("encoder.embed.out.0.bias", buf, sizeof buf));
    cr_assert_str_eq(buf, "encoder.embed.out.bias");
    cr_assert_not(param_legacy_name("encoder.after_norm.bias", buf, sizeof buf));
    cr_assert(param_current_name("encoder.embed.out.weight", buf, sizeof buf));
    cr_assert_str_eq(buf, "encoder.embed.out.0.weight");
    cr_assert_not(param_current_name("encoder.embed.out.0.weight", buf, sizeof buf));
    cr_assert_null(param_find_alias(&t, "decoder.embed.0.weight"));
    param_table_free(&t);
}

static void stats(const float *w, size_t n, double *mean, double *var, double *maxabs)
{
    double s = 0, s2 = 0, m = 0;
    for (size_t i = 0; i < n; i++) s += w[i], s2 += (double)w[i] * w[i], m = fmax(m, fabs(w[i]));
    *mean = s / (double)n;
    *var = s2 / (double)n - *mean * *mean;
    *maxabs = m;
}

Test(model_params, init_schemes)
{
    model_dims d = fixture_dims();
    param_table t;
    param_table_build(&t, &d);
    float *w = malloc(t.total * sizeof *w), *w2 = malloc(t.total * sizeof *w2);
    esp_err err;
    cr_assert_eq(param_init(w, &t, "xavier_uniform", 7, &err), 0);
    const param_info *ff = param_find(&t, "encoder.encoders.0.feed_forward.w_1.weight");
    double mean, var, maxabs, bound = sqrt(6.0 / (64 + 32));
    stats(w + ff->offset, ff->count, &mean, &var, &maxabs);
    cr_assert(maxabs <= bound && maxabs > 0.9 * bound, "max %g bound %g", maxabs, bound);
    cr_assert(fabs(var - bound * bound / 3) < 0.15 * bound * bound / 3, "var %g", var);
    const param_info *bias = param_find(&t, "encoder.encoders.0.feed_forward.w_1.bias");
    for (size_t i = 0; i < bias->count; i++) cr_assert_eq(w[bias->offset + i], 0.0f);
    const param_info *ln = param_find(&t, "encoder.after_norm.weight");
    for (size_t i = 0; i < ln->count; i++) cr_assert_eq(w[ln->offset + i], 1.0f);
    /* Same seed, same weights; another seed differs. */
    cr_assert_eq(param_init(w2, &t, "xavier_uniform", 7, &err), 0);
    cr_assert_eq(memcmp(w, w2, t.total * sizeof *w), 0);
    cr_assert_eq(param_init(w2, &t, "xavier_uniform", 8, &err), 0);
    cr_assert_neq(memcmp(w, w2, t.total * sizeof *w), 0);
    /* PyTorch defaults: biases nonzero within 1/sqrt(fan_in). */
    cr_assert_eq(param_init(w, &t, NULL, 7, &err), 0);
    stats(w + bias->offset, bias->count, &mean, &var, &maxabs);
    cr_assert(maxabs > 0 && maxabs <= 1 / sqrt(32.0));
    cr_assert_neq(param_init(w, &t, "orthogonal", 7, &err), 0);
    cr_assert(strstr(err.msg, "init: orthogonal is not supported"), "%s", err.msg);
    free(w);
    free(w2);
    param_table_free(&t);
}
