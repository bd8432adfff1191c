/* Parity with PyTorch: Conv2dSubsampling and one pre-LN encoder block + after_norm + CTC linear +
 * log_softmax, composed from the CPU backend's ops, forward and every gradient (fixture made by
 * scripts/make_ops_fixtures.py, test/fixtures/ops). Suite `ops`. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/compute/backend.h"
#include "core/compute/ops.h"
#include "test/unit/compute/ops_test_util.h"
#include "test/unit/test_util.h"

typedef struct {
    char name[128];
    size_t off, n;
} fx_entry;

typedef struct {
    fx_entry *e;
    int n;
    float *data;
    size_t total;
} fixture;

static void fixture_load(fixture *f)
{
    char *dir = path_join(test_root_dir(), "test/fixtures/ops");
    char *ipath = path_join(dir, "index.txt"), *bpath = path_join(dir, "ops.f32");
    esp_err err;
    size_t len;
    char *idx = read_file(ipath, READ_LIST, &len, &err);
    cr_assert(idx, "%s", err.msg);
    char *blob = read_file(bpath, READ_LIST, &len, &err);
    cr_assert(blob, "%s", err.msg);
    f->total = len / sizeof(float);
    f->data = fz(f->total);
    memcpy(f->data, blob, f->total * sizeof(float));
    f->e = talloc(256 * sizeof(fx_entry));
    f->n = 0;
    for (char *line = strtok(idx, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#') continue;
        cr_assert(f->n < 256);
        fx_entry *e = &f->e[f->n++];
        int used = 0;
        cr_assert_eq(sscanf(line, "%127s %zu%n", e->name, &e->off, &used), 2, "%s", line);
        e->n = 1;
        char *s = line + used, *end;
        for (long dim; (dim = strtol(s, &end, 10)), end != s; s = end) e->n *= (size_t)dim;
        cr_assert(e->off + e->n <= f->total, "%s", e->name);
    }
    free(idx);
    free(blob);
    free(ipath);
    free(bpath);
    free(dir);
}

static float *fx(const fixture *f, const char *name, size_t n)
{
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->e[i].name, name) == 0) {
            cr_assert_eq(f->e[i].n, n, "%s: %zu values, expected %zu", name, f->e[i].n, n);
            return f->data + f->e[i].off;
        }
    cr_assert_fail("fixture has no %s", name);
    return NULL;
}

#define CHECK_TORCH(ours, f, name, n)                                                              \
    do {                                                                                           \
        double e_ = err_ff((ours), fx((f), (name), (n)), (n));                                     \
        cr_assert(e_ < F32_TOL, "%s: rel err %.3g against PyTorch", (name), e_);                   \
    } while (0)

Test(ops, torch_conv_subsampling, .fini = ops_arena_free)
{
    fixture f;
    fixture_load(&f);
    backend *be;
    esp_err err;
    cr_assert((be = backend_open(BACKEND_CPU, 0, 1, &err)) != NULL, "%s", err.msg);
    int nb = 2, t = 23, idim = 80, d = 8;
    int t1 = ops_conv_out_len(t), f1 = ops_conv_out_len(idim), t2 = ops_conv_out_len(t1),
        f2 = ops_conv_out_len(f1);
    cr_assert(t1 == 11 && f1 == 39 && t2 == 5 && f2 == 19);
    float *lens = fx(&f, "conv.in.lens", 2), *olens = fx(&f, "conv.out.lens", 2);
    for (int b = 0; b < nb; b++) cr_assert_eq(ops_subsample_len((int)lens[b]), (int)olens[b]);

    const float *x = fx(&f, "conv.in.x", (size_t)nb * t * idim);
    const float *w0 = fx(&f, "conv.embed.conv.0.weight", (size_t)d * 9),
                *b0 = fx(&f, "conv.embed.conv.0.bias", d);
    const float *w2 = fx(&f, "conv.embed.conv.2.weight", (size_t)d * d * 9),
                *b2 = fx(&f, "conv.embed.conv.2.bias", d);
    const float *wo = fx(&f, "conv.embed.out.0.weight", (size_t)d * d * f2),
                *bo = fx(&f, "conv.embed.out.0.bias", d);
    size_t n1 = (size_t)nb * d * t1 * f1, n2 = (size_t)nb * d * t2 * f2, ny = (size_t)nb * t2 * d;
    float *h1 = fz(n1), *h2 = fz(n2), *y = fz(ny);
    /* Channels last, as core/nn/model.c: h1 (B, T1, F1, C), h2 (B, T2, F2, C); embed.out's weight
     * columns reordered from torch's (c, f) to (f, c). */
    float *wo_fc = fz((size_t)d * d * f2), *h1_nchw = fz(n1);
    be->conv2d_forward(be, h1, x, w0, b0, nb, 1, d, t, idim, 1, NULL);
    be->conv2d_forward(be, h2, h1, w2, b2, nb, d, d, t1, f1, 1, NULL);
    be->swap12(be, wo_fc, wo, d, d, f2, 1);
    be->linear_forward(be, y, h2, wo_fc, bo, nb * t2, d * f2, d);
    be->posenc_forward(be, y, y, sqrt(d), nb, t2, d);
    be->swap12(be, h1_nchw, h1, nb, t1 * f1, d, 1);
    CHECK_TORCH(h1_nchw, &f, "conv.h1", n1);
    CHECK_TORCH(y, &f, "conv.out.y", ny);

    const float *g = fx(&f, "conv.in.g", ny);
    float *dlo = fz(ny), *dh2 = fz(n2), *dh1 = fz(n1);
    float *dw0 = fz((size_t)d * 9), *db0 = fz(d), *dw2 = fz((size_t)d * d * 9), *db2 = fz(d);
    float *dwo = fz((size_t)d * d * f2), *dbo = fz(d);
    be->scale(be, dlo, g, sqrt(d), ny);
    float *dwo_fc = fz((size_t)d * d * f2);
    be->linear_backward(be, dh2, dwo_fc, dbo, dlo, h2, wo_fc, nb * t2, d * f2, d, 0);
    be->swap12(be, dwo, dwo_fc, d, f2, d, 1);
    be->conv2d_backward(be, dh1, dw2, db2, dh2, h1, w2, h2, nb, d, d, t1, f1, 0, NULL);
    be->conv2d_backward(be, NULL, dw0, db0, dh1, x, w0, h1, nb, 1, d, t, idim, 0, NULL);
    CHECK_TORCH(dw0, &f, "grad.conv.embed.conv.0.weight", (size_t)d * 9);
    CHECK_TORCH(db0, &f, "grad.conv.embed.conv.0.bias", (size_t)d);
    CHECK_TORCH(dw2, &f, "grad.conv.embed.conv.2.weight", (size_t)d * d * 9);
    CHECK_TORCH(db2, &f, "grad.conv.embed.conv.2.bias", (size_t)d);
    CHECK_TORCH(dwo, &f, "grad.conv.embed.out.0.weight", (size_t)d * d * f2);
    CHECK_TORCH(dbo, &f, "grad.conv.embed.out.0.bias", (size_t)d);
    backend_close(be);
}

Test(ops, torch_encoder_block, .fini = ops_arena_free)
{
    fixture f;
    fixture_load(&f);
    backend *be;
    esp_err err;
    cr_assert((be = backend_open(BACKEND_CPU, 0, 2, &err)) != NULL, "%s", err.msg);
    enum { B = 2, T = 9, D = 16, H = 2, FF = 32, V = 7, N = B * T };
    const float *fl = fx(&f, "block.in.lens", B);
    int lens[B] = {(int)fl[0], (int)fl[1]};
    cr_assert(lens[0] == 9 && lens[1] == 6);
#define P(name, n) fx(&f, "block." name, (n))
    const float *x = P("in.x", N * D);
    /* q, k, v weights side by side: one GEMM makes a fused (N, 3D) qkv buffer. */
    float *wqkv = fz(3 * D * D), *bqkv = fz(3 * D);
    const char *qkv_names[3] = {"q", "k", "v"};
    for (int i = 0; i < 3; i++) {
        char nm[64];
        snprintf(nm, sizeof nm, "block.self_attn.linear_%s.weight", qkv_names[i]);
        memcpy(wqkv + i * D * D, fx(&f, nm, D * D), D * D * sizeof(float));
        snprintf(nm, sizeof nm, "block.self_attn.linear_%s.bias", qkv_names[i]);
        memcpy(bqkv + i * D, fx(&f, nm, D), D * sizeof(float));
    }
    const float *wo = P("self_attn.linear_out.weight", D * D),
                *bo = P("self_attn.linear_out.bias", D);
    const float *w1 = P("feed_forward.w_1.weight", FF * D), *b1 = P("feed_forward.w_1.bias", FF);
    const float *w2 = P("feed_forward.w_2.weight", D * FF), *b2 = P("feed_forward.w_2.bias", D);
    const float *wc = P("ctc_lo.weight", V * D), *bc = P("ctc_lo.bias", V);
    const float *n1w = P("norm1.weight", D), *n1b = P("norm1.bias", D);
    const float *n2w = P("norm2.weight", D), *n2b = P("norm2.bias", D);
    const float *n3w = P("after_norm.weight", D), *n3b = P("after_norm.bias", D);

    /* Forward: x1 = x + MHA(LN1(x)); x2 = x1 + W2 ReLU(W1 LN2(x1)); logp = log_softmax(Wc LN3(x2)).
     */
    float *ln1 = fz(N * D), *m1 = fz(N), *r1 = fz(N), *qkv = fz(N * 3 * D),
          *att = fz(B * H * T * T);
    float *ya = fz(N * D), *x1 = fz(N * D), *ln2 = fz(N * D), *m2 = fz(N), *r2 = fz(N),
          *hh = fz(N * FF);
    float *x2 = fz(N * D), *ln3 = fz(N * D), *m3 = fz(N), *r3 = fz(N), *logp = fz(N * V);
    be->layernorm_forward(be, ln1, m1, r1, x, n1w, n1b, N, D, 1e-12);
    be->linear_forward(be, qkv, ln1, wqkv, bqkv, N, D, 3 * D);
    be->attention_forward(be, ya, att, qkv, qkv + D, qkv + 2 * D, 3 * D, lens, B, T, H, D / H, 0, 0,
                         0);
    be->linear_forward(be, x1, ya, wo, bo, N, D, D);
    be->add(be, x1, x1, x, N * D);
    be->layernorm_forward(be, ln2, m2, r2, x1, n2w, n2b, N, D, 1e-12);
    be->linear_forward(be, hh, ln2, w1, b1, N, D, FF);
    be->relu_forward(be, hh, hh, N * FF);
    be->linear_forward(be, x2, hh, w2, b2, N, FF, D);
    be->add(be, x2, x2, x1, N * D);
    be->layernorm_forward(be, ln3, m3, r3, x2, n3w, n3b, N, D, 1e-12);
    be->linear_forward(be, logp, ln3, wc, bc, N, D, V);
    be->log_softmax_forward(be, logp, logp, N, V);
    CHECK_TORCH(att, &f, "block.att", B * H * T * T);
    CHECK_TORCH(x2, &f, "block.out.y", N * D);
    CHECK_TORCH(logp, &f, "block.out.logp", N * V);

    /* Backward of loss = sum(logp * g); residual branches add into the trunk's gradient (acc 1). */
    float *dl = fz(N * V), *dln3 = fz(N * D), *dx2 = fz(N * D), *dhh = fz(N * FF),
          *dln2 = fz(N * D);
    float *dx1 = fz(N * D), *dya = fz(N * D), *dqkv = fz(N * 3 * D), *dln1 = fz(N * D),
          *dx = fz(N * D);
    float *dwc = fz(V * D), *dbc = fz(V), *dn3w = fz(D), *dn3b = fz(D), *dw2 = fz(D * FF),
          *db2 = fz(D);
    float *dw1 = fz(FF * D), *db1 = fz(FF), *dn2w = fz(D), *dn2b = fz(D), *dwo = fz(D * D),
          *dbo = fz(D);
    float *dwqkv = fz(3 * D * D), *dbqkv = fz(3 * D), *dn1w = fz(D), *dn1b = fz(D);
    be->log_softmax_backward(be, dl, P("in.g", N * V), logp, N, V);
    be->linear_backward(be, dln3, dwc, dbc, dl, ln3, wc, N, D, V, 0);
    be->layernorm_backward(be, dx2, dn3w, dn3b, dln3, x2, n3w, m3, r3, N, D, 0);
    be->linear_backward(be, dhh, dw2, db2, dx2, hh, w2, N, FF, D, 0);
    be->relu_backward(be, dhh, dhh, hh, N * FF);
    be->linear_backward(be, dln2, dw1, db1, dhh, ln2, w1, N, D, FF, 0);
    be->copy(be, dx1, dx2, N * D * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
    be->layernorm_backward(be, dx1, dn2w, dn2b, dln2, x1, n2w, m2, r2, N, D, 1);
    be->linear_backward(be, dya, dwo, dbo, dx1, ya, wo, N, D, D, 0);
    be->attention_backward(be, dqkv, dqkv + D, dqkv + 2 * D, dya, att, qkv, qkv + D, qkv + 2 * D,
                          3 * D, lens, B, T, H, D / H, 0, 0, 0);
    be->linear_backward(be, dln1, dwqkv, dbqkv, dqkv, ln1, wqkv, N, D, 3 * D, 0);
    be->copy(be, dx, dx1, N * D * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
    be->layernorm_backward(be, dx, dn1w, dn1b, dln1, x, n1w, m1, r1, N, D, 1);

    CHECK_TORCH(dx, &f, "grad.block.in.x", N * D);
    CHECK_TORCH(dwc, &f, "grad.block.ctc_lo.weight", V * D);
    CHECK_TORCH(dbc, &f, "grad.block.ctc_lo.bias", V);
    CHECK_TORCH(dn3w, &f, "grad.block.after_norm.weight", D);
    CHECK_TORCH(dn3b, &f, "grad.block.after_norm.bias", D);
    CHECK_TORCH(dw2, &f, "grad.block.feed_forward.w_2.weight", D * FF);
    CHECK_TORCH(db2, &f, "grad.block.feed_forward.w_2.bias", D);
    CHECK_TORCH(dw1, &f, "grad.block.feed_forward.w_1.weight", FF * D);
    CHECK_TORCH(db1, &f, "grad.block.feed_forward.w_1.bias", FF);
    CHECK_TORCH(dn2w, &f, "grad.block.norm2.weight", D);
    CHECK_TORCH(dn2b, &f, "grad.block.norm2.bias", D);
    CHECK_TORCH(dwo, &f, "grad.block.self_attn.linear_out.weight", D * D);
    CHECK_TORCH(dbo, &f, "grad.block.self_attn.linear_out.bias", D);
    CHECK_TORCH(dwqkv, &f, "grad.block.self_attn.linear_q.weight", D * D);
    CHECK_TORCH(dwqkv + D * D, &f, "grad.block.self_attn.linear_k.weight", D * D);
    CHECK_TORCH(dwqkv + 2 * D * D, &f, "grad.block.self_attn.linear_v.weight", D * D);
    CHECK_TORCH(dbqkv, &f, "grad.block.self_attn.linear_q.bias", D);
    /* The key bias cannot change the softmax (it adds q.b to a whole row of scores): its gradient
     * is 0 up to rounding in both, so compare it on the scale of the key weight's gradient. */
    const float *tdbk = fx(&f, "grad.block.self_attn.linear_k.bias", D);
    double kscale = 0;
    for (int i = 0; i < D * D; i++) kscale = fmax(kscale, fabs(dwqkv[D * D + i]));
    for (int i = 0; i < D; i++)
        cr_assert(fabs(dbqkv[D + i]) < 1e-5 * kscale && fabs(tdbk[i]) < 1e-5 * kscale);
    CHECK_TORCH(dbqkv + 2 * D, &f, "grad.block.self_attn.linear_v.bias", D);
    CHECK_TORCH(dn1w, &f, "grad.block.norm1.weight", D);
    CHECK_TORCH(dn1b, &f, "grad.block.norm1.bias", D);
#undef P
    backend_close(be);
}
