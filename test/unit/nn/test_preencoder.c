/* ESPnet2's LinearProjection preencoder (model.preencoder: linear): Linear(Dropout(feats)) between
 * the features and the encoder's input layer. Its parameters carry ESPnet2's names, and its
 * gradient, which flows back through the input layer's first conv (or Linear), agrees with a
 * central difference of the loss, dropout on, for each input layer kind. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/compute/backend.h"
#include "core/config/config_types.h"
#include "core/nn/model.h"
#include "core/nn/model_params.h"
#include "test/unit/nn/nn_fixture.h"

typedef struct batch {
    float *feats;
    int lens[2], labels[6], ylens[2], T;
} batch;

static double loss_at(asr_model *m, const batch *b)
{
    asr_model_forward(m, b->feats, b->lens, 2, b->T, 1, 99);
    return asr_model_loss(m, b->labels, b->ylens, 3, NULL);
}

/* The directional difference of the loss along the gradient of the parameters whose names start
 * with `group`, relative to the gradient's norm. */
static double directional_error(asr_model *m, const batch *b, const float *p0, const float *g, const char *group)
{
    size_t n = m->table.total;
    double g2 = 0;
    for (size_t i = 0; i < m->table.n; i++) {
        const param_info *p = &m->table.items[i];
        if (strncmp(p->name, group, strlen(group))) continue;
        for (size_t e = 0; e < p->count; e++) g2 += (double)g[p->offset + e] * g[p->offset + e];
    }
    double gn = sqrt(g2), eps = fmin(0.01 / gn, 0.02), l[2];
    cr_assert(gn > 0, "%s: no gradient", group);
    for (int s = 0; s < 2; s++) {
        memcpy(m->params, p0, n * sizeof *p0);
        for (size_t i = 0; i < m->table.n; i++) {
            const param_info *p = &m->table.items[i];
            if (strncmp(p->name, group, strlen(group))) continue;
            for (size_t e = 0; e < p->count; e++)
                m->params[p->offset + e] = p0[p->offset + e] + (float)((s ? -eps : eps) * g[p->offset + e] / gn);
        }
        l[s] = loss_at(m, b);
    }
    memcpy(m->params, p0, n * sizeof *p0);
    return fabs((l[0] - l[1]) / (2 * eps) - gn) / gn;
}

static void check_kind(int input_layer, int encoder, const char *name)
{
    backend *be;
    esp_err err;
    cr_assert((be = backend_open(BACKEND_CPU, 0, 1, &err)) != NULL, "%s", err.msg);
    model_dims d = {.idim = 20, .pre_in = 20, .pre_out = 16, .d = 16, .heads = 2, .ff = 32, .blocks = 1, .vocab = 6,
                    .input_layer = input_layer, .encoder = encoder};
    d.f2 = input_layer_out_bins(input_layer, d.pre_out);
    model_rates rates = {.dropout = 0.1f, .pos_dropout = 0.1f, .ctc_dropout = 0.1f, .pre_dropout = 0.2f,
                         .ctc_weight = 1.0f};
    asr_model m;
    asr_model_init(&m, be, &d, &rates);
    const param_info *w = param_find(&m.table, "preencoder.linear_out.weight");
    cr_assert_not_null(w, "%s: no preencoder.linear_out.weight", name);
    cr_assert(w->ndim == 2 && w->shape[0] == 16 && w->shape[1] == 20, "%s", name);
    cr_assert_not_null(param_find(&m.table, "preencoder.linear_out.bias"));
    cr_assert_eq(param_init(m.params, &m.table, NULL, 5, &err), 0, "%s", err.msg);
    batch b = {.lens = {40, 33}, .labels = {1, 2, 3, 4, 5, 0}, .ylens = {3, 2}, .T = 40};
    b.feats = malloc((size_t)2 * 40 * 20 * sizeof *b.feats);
    uint32_t s = 7;
    for (size_t i = 0; i < (size_t)2 * 40 * 20; i++) {
        s = s * 1664525u + 1013904223u;
        b.feats[i] = (float)(s >> 8) / (float)(1u << 23) - 1.0f;
    }
    asr_model_zero_grad(&m);
    loss_at(&m, &b);
    asr_model_backward(&m, 1.0f);
    float *p0, *g;
    fx_snapshot(&m, &p0, &g);
    static const char *const groups[] = {"preencoder.linear_out.", "encoder.embed.", "ctc.ctc_lo."};
    for (size_t k = 0; k < sizeof groups / sizeof *groups; k++) {
        double e = directional_error(&m, &b, p0, g, groups[k]);
        cr_expect_lt(e, 5e-3, "%s, %s: directional difference off by %g", name, groups[k], e);
    }
    free(p0), free(g), free(b.feats);
    asr_model_free(&m);
    backend_close(be);
}

Test(preencoder, gradient_through_a_conv2d_input_layer)
{
    check_kind(IN_CONV2D, ENC_TRANSFORMER, "conv2d");
}

Test(preencoder, gradient_through_a_conv1d2_input_layer)
{
    check_kind(IN_CONV1D2, ENC_TRANSFORMER, "conv1d2");
}

Test(preencoder, gradient_through_a_linear_input_layer)
{
    check_kind(IN_LINEAR, ENC_TRANSFORMER, "linear");
}

/* The config's preencoder: the input layer sees output_size; input_size must be the features'. */
Test(preencoder, dims_from_the_config)
{
    preencoder_conf_cfg pc = {.input_size = 80, .output_size = 40};
    model_cfg m = {.preencoder = "linear", .preencoder_conf = &pc};
    model_dims d;
    esp_err err;
    cr_assert_eq(model_dims_from_cfg(&d, &m, 80, 10, &err), 0, "%s", err.msg);
    cr_assert(d.idim == 80 && d.pre_in == 80 && d.pre_out == 40 && model_input_dim(&d) == 40);
    cr_assert_eq(d.f2, input_layer_out_bins(d.input_layer, 40));
    pc.input_size = 81;
    cr_assert_neq(model_dims_from_cfg(&d, &m, 80, 10, &err), 0);
    cr_assert(strstr(err.msg, "model.preencoder_conf.input_size: 81, but the features have 80 dimensions"), "%s", err.msg);
    pc.input_size = 0, pc.output_size = 0;
    cr_assert_neq(model_dims_from_cfg(&d, &m, 80, 10, &err), 0);
    cr_assert(strstr(err.msg, "model.preencoder_conf.output_size: missing"), "%s", err.msg);
}
