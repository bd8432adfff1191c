/* RNN-T loss (core/compute/rnnt.h): parity with torchaudio.functional.rnnt_loss on fixtures made by
 * scripts/make_rnnt_fixtures.py (mean loss, per-utterance losses, logits gradient; clamp; blank 0
 * and V - 1; U = 0 and T = 1) through the cpu and ref64 backends' ops; the same bits for any
 * thread count, any chunking of the frames, the gradient in place or not and either label layout;
 * central finite differences of the float64 loss, and of FastEmit's surrogate loss; the one-node
 * lattice by hand; rows split over threads with the same bits. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/compute/backend.h"
#include "core/compute/ops.h"
#include "core/compute/rnnt.h"
#include "core/formats/npz.h"
#include "test/unit/test_util.h"

typedef struct rn_fixture {
    npz_file npz;
    int B, T, U1, V, Umax, blank;
    float clamp;
    float *logits;
    int *hlens, *labels, *ylens;
    double loss, *losses, *grad;
} rn_fixture;

static void load_fixture(rn_fixture *f, const char *name)
{
    esp_err err;
    char *dir = path_join(test_root_dir(), "test/fixtures/rnnt"), *path = path_join(dir, name);
    free(dir);
    cr_assert_eq(npz_read(path, &f->npz, &err), 0, "%s", err.msg);
    const npy_array *x = npz_get(&f->npz, "logits"), *lab = npz_get(&f->npz, "labels");
    cr_assert(x && x->dtype == NPY_F32 && x->ndim == 4 && lab && lab->ndim == 2);
    f->B = (int)x->shape[0], f->T = (int)x->shape[1], f->U1 = (int)x->shape[2], f->V = (int)x->shape[3];
    f->Umax = (int)lab->shape[1];
    f->logits = xmalloc(x->count * sizeof *f->logits);
    memcpy(f->logits, x->data, x->count * sizeof *f->logits);
    f->hlens = test_npz_ints(&f->npz, path, "hlens", f->B);
    f->ylens = test_npz_ints(&f->npz, path, "ylens", f->B);
    f->labels = test_npz_ints(&f->npz, path, "labels", (size_t)f->B * f->Umax);
    f->blank = (int)test_npz_one(&f->npz, path, "blank");
    f->clamp = (float)test_npz_one(&f->npz, path, "clamp");
    f->loss = test_npz_one(&f->npz, path, "loss");
    f->losses = test_npz_doubles(&f->npz, path, "losses", f->B);
    f->grad = test_npz_doubles(&f->npz, path, "grad", x->count);
    free(path);
}

static void free_fixture(rn_fixture *f)
{
    npz_free(&f->npz);
    free(f->logits), free(f->hlens), free(f->ylens), free(f->labels), free(f->losses), free(f->grad);
}

typedef struct rn_result {
    double loss, *losses;
    float *grad; /* (B, T, U1, V) */
} rn_result;

static void free_result(rn_result *r)
{
    free(r->losses), free(r->grad);
}

/* The loss and gradient through a backend's ops: logits in chunks of tc frames (each uploaded as
 * (B, tc, U1, V)), the gradient in place over each chunk or into a separate buffer; labels padded
 * (stride Umax) or concatenated (stride 0). */
static rn_result run_backend(backend *be, const rn_fixture *f, int tc, int in_place, int concat)
{
    int *cat = xmalloc(((size_t)f->B * f->Umax + 1) * sizeof *cat), n = 0;
    for (int b = 0; b < f->B; b++)
        for (int i = 0; i < f->ylens[b]; i++) cat[n++] = f->labels[b * f->Umax + i];
    const int *lab = concat ? cat : f->labels;
    int stride = concat ? 0 : f->Umax;
    size_t row = (size_t)f->U1 * f->V, chunk = (size_t)f->B * tc * row;
    float *h = xmalloc(chunk * sizeof *h);
    float *x = be->alloc(be, chunk * sizeof *x), *dx = in_place ? x : be->alloc(be, chunk * sizeof *dx);
    rn_result r = {.losses = xmalloc((size_t)f->B * sizeof(double)),
                   .grad = xmalloc((size_t)f->B * f->T * row * sizeof(float))};
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) r.loss = be->rnnt_loss_forward(be, r.losses, f->hlens, f->ylens, f->B, f->T, f->U1);
        for (int t0 = 0; t0 < f->T; t0 += tc) {
            int k = f->T - t0 < tc ? f->T - t0 : tc;
            for (int b = 0; b < f->B; b++)
                memcpy(h + (size_t)b * k * row, f->logits + ((size_t)b * f->T + t0) * row, (size_t)k * row * sizeof *h);
            be->copy(be, x, h, (size_t)f->B * k * row * sizeof *h, BACKEND_HOST_TO_DEVICE);
            if (pass == 0) {
                be->rnnt_logprobs(be, x, f->hlens, lab, f->ylens, stride, f->B, f->T, f->U1, f->V, f->blank, t0, k);
                continue;
            }
            be->rnnt_loss_backward(be, dx, x, f->hlens, lab, f->ylens, stride, f->B, f->T, f->U1, f->V, f->blank, t0,
                                   k, 0.0f, f->clamp, 1.0f);
            be->copy(be, h, dx, (size_t)f->B * k * row * sizeof *h, BACKEND_DEVICE_TO_HOST);
            for (int b = 0; b < f->B; b++)
                memcpy(r.grad + ((size_t)b * f->T + t0) * row, h + (size_t)b * k * row, (size_t)k * row * sizeof *h);
        }
    }
    if (!in_place) be->free(be, dx);
    be->free(be, x);
    free(h);
    free(cat);
    return r;
}

static backend *open_kind(backend_kind kind, int threads)
{
    esp_err err;
    backend *be = backend_open(kind, 0, threads, &err);
    cr_assert(be, "%s", err.msg);
    return be;
}

static void expect_torch(const rn_result *r, const rn_fixture *f, const char *what)
{
    cr_assert(fabs(r->loss - f->loss) <= 1e-5 * fabs(f->loss), "%s: loss %.9g torchaudio %.9g", what, r->loss,
              f->loss);
    for (int b = 0; b < f->B; b++)
        cr_assert(fabs(r->losses[b] - f->losses[b]) <= 1e-5 * fabs(f->losses[b]) + 1e-6,
                  "%s: losses[%d] %.9g torchaudio %.9g", what, b, r->losses[b], f->losses[b]);
    size_t n = (size_t)f->B * f->T * f->U1 * f->V;
    long bad;
    double err = test_err_fd(r->grad, f->grad, n, &bad);
    cr_assert(err <= 2e-5, "%s: gradient error %.3g of max |grad| (first non-finite at %ld)", what, err, bad);
    if (f->clamp > 0) /* clamped per utterance, then the mean's 1 / B */
        cr_assert(test_max_abs(r->grad, n) <= f->clamp / f->B * (1 + 1e-6), "%s: clamp", what);
    /* Rows past an utterance's frames or labels get 0. */
    for (int b = 0; b < f->B; b++)
        for (int t = 0; t < f->T; t++)
            for (int u = 0; u < f->U1; u++) {
                if (t < f->hlens[b] && u <= f->ylens[b]) continue;
                size_t at = (((size_t)b * f->T + t) * f->U1 + u) * f->V;
                cr_assert_eq(test_max_abs(r->grad + at, f->V), 0.0, "%s: padding b=%d t=%d u=%d", what, b, t, u);
            }
}

static void check_fixture(const char *name)
{
    rn_fixture f;
    load_fixture(&f, name);
    backend *cpu = open_kind(BACKEND_CPU, 1), *ref = open_kind(BACKEND_REF64, 1);
    rn_result r = run_backend(cpu, &f, f.T, 0, 0), r64 = run_backend(ref, &f, f.T, 0, 0);
    expect_torch(&r, &f, "cpu");
    expect_torch(&r64, &f, "ref64");
    free_result(&r64);
    backend_close(ref);
    backend_close(cpu);

    /* Threads, chunks of frames, in place and the concatenated labels: the same bits. */
    size_t n = (size_t)f.B * f.T * f.U1 * f.V;
    backend *cpu3 = open_kind(BACKEND_CPU, 3);
    for (int v = 0; v < 3; v++) {
        int tc = v == 0 ? f.T : v == 1 ? 1 : (f.T + 1) / 2;
        rn_result q = run_backend(cpu3, &f, tc, v == 1, v == 2);
        cr_assert_eq(q.loss, r.loss, "%s variant %d", name, v);
        cr_assert_eq(memcmp(q.losses, r.losses, (size_t)f.B * sizeof *q.losses), 0, "%s variant %d", name, v);
        cr_assert_eq(memcmp(q.grad, r.grad, n * sizeof *q.grad), 0, "%s variant %d", name, v);
        free_result(&q);
    }
    backend_close(cpu3);
    free_result(&r);
    free_fixture(&f);
}

Test(rnnt, parity_with_torchaudio_mixed_batch)
{
    check_fixture("mixed.npz");
}

Test(rnnt, parity_with_torchaudio_clamp_and_last_blank)
{
    check_fixture("clamp.npz");
}

Test(rnnt, parity_with_torchaudio_one_frame_and_no_labels)
{
    check_fixture("edges.npz");
}

Test(rnnt, parity_with_torchaudio_longer)
{
    check_fixture("longer.npz");
}

/* ---- float64: the loss and the gradient of the ops themselves */

static double loss_f64(double *lat, const double *z, const int *hlens, const ctc_labels *y, int B, int T, int U1,
                       int V, int blank)
{
    ops_rnnt_logprobs_f64(lat, z, hlens, y, B, T, U1, V, blank, 0, T, 1);
    return rnnt_lattice_forward(lat, NULL, hlens, y->lens, B, T, U1, 1);
}

Test(rnnt, gradient_matches_finite_differences_f64)
{
    enum { B = 2, T = 4, U1 = 4, V = 5 };
    int hlens[B] = {4, 3}, ylens[B] = {3, 1}, labels[B * 3] = {1, 3, 3, 4, 0, 0};
    ctc_labels y = {labels, ylens, 3};
    size_t n = (size_t)B * T * U1 * V;
    double *z = xmalloc(n * sizeof *z), *g = xmalloc(n * sizeof *g);
    double *lat = xmalloc(rnnt_lattice_size(B, T, U1) * sizeof *lat);
    unsigned s = 12345;
    for (size_t i = 0; i < n; i++) s = s * 1103515245u + 12345u, z[i] = 3.0 * ((s >> 8) / 16777216.0 - 0.5);
    loss_f64(lat, z, hlens, &y, B, T, U1, V, 0);
    ops_rnnt_grad_f64(g, z, lat, hlens, &y, B, T, U1, V, 0, 0, T, 0.0, 0.0, 0.5 / B, 1); /* dloss 0.5 */
    double worst = 0, eps = 1e-5;
    for (size_t i = 0; i < n; i++) {
        double keep = z[i];
        z[i] = keep + eps;
        double lp = loss_f64(lat, z, hlens, &y, B, T, U1, V, 0);
        z[i] = keep - eps;
        double lm = loss_f64(lat, z, hlens, &y, B, T, U1, V, 0);
        z[i] = keep;
        double fd = 0.5 * (lp - lm) / (2 * eps), d = fabs(fd - g[i]);
        worst = d > worst ? d : worst;
    }
    cr_assert(worst < 1e-8, "max |gradient - finite difference| %.3g", worst);
    free(z), free(g), free(lat);
}

/* FastEmit's gradient is the gradient of the loss whose label arcs' log-probs are (1 + lambda)
 * lp_emit(z) - lambda lp_emit(z0) (the same value at z0: warp-transducer's scaling, written as a
 * function): central finite differences of that loss at z0 against the op's gradient with lambda. */
static double fastemit_surrogate(double *lat, const double *z, const double *emit0, const int *hlens,
                                 const ctc_labels *y, int B, int T, int U1, int V, double lambda)
{
    ops_rnnt_logprobs_f64(lat, z, hlens, y, B, T, U1, V, 0, 0, T, 1);
    size_t plane = (size_t)B * T * U1;
    double *le = lat + RNNT_LP_EMIT * plane;
    for (size_t i = 0; i < plane; i++)
        if (isfinite(le[i])) le[i] = (1 + lambda) * le[i] - lambda * emit0[i];
    return rnnt_lattice_forward(lat, NULL, hlens, y->lens, B, T, U1, 1);
}

Test(rnnt, fastemit_gradient_matches_finite_differences_f64)
{
    enum { B = 2, T = 4, U1 = 4, V = 5 };
    const double lambda = 0.7;
    int hlens[B] = {4, 3}, ylens[B] = {3, 1}, labels[B * 3] = {1, 3, 3, 4, 0, 0};
    ctc_labels y = {labels, ylens, 3};
    size_t n = (size_t)B * T * U1 * V, plane = (size_t)B * T * U1;
    double *z = xmalloc(n * sizeof *z), *g = xmalloc(n * sizeof *g), *g0 = xmalloc(n * sizeof *g0);
    double *lat = xcalloc(rnnt_lattice_size(B, T, U1), sizeof *lat), *emit0 = xmalloc(plane * sizeof *emit0);
    unsigned s = 777;
    for (size_t i = 0; i < n; i++) s = s * 1103515245u + 12345u, z[i] = 3.0 * ((s >> 8) / 16777216.0 - 0.5);
    double plain = loss_f64(lat, z, hlens, &y, B, T, U1, V, 0);
    memcpy(emit0, lat + RNNT_LP_EMIT * plane, plane * sizeof *emit0);
    ops_rnnt_grad_f64(g0, z, lat, hlens, &y, B, T, U1, V, 0, 0, T, 0.0, 0.0, 1.0 / B, 1);
    ops_rnnt_grad_f64(g, z, lat, hlens, &y, B, T, U1, V, 0, 0, T, lambda, 0.0, 1.0 / B, 1);
    cr_assert(fabs(fastemit_surrogate(lat, z, emit0, hlens, &y, B, T, U1, V, lambda) - plain) < 1e-12);
    double worst = 0, moved = 0, eps = 1e-5;
    for (size_t i = 0; i < n; i++) {
        double keep = z[i];
        z[i] = keep + eps;
        double lp = fastemit_surrogate(lat, z, emit0, hlens, &y, B, T, U1, V, lambda);
        z[i] = keep - eps;
        double lm = fastemit_surrogate(lat, z, emit0, hlens, &y, B, T, U1, V, lambda);
        z[i] = keep;
        double fd = (lp - lm) / (2 * eps);
        worst = fmax(worst, fabs(fd - g[i]));
        moved = fmax(moved, fabs(g[i] - g0[i]));
    }
    cr_assert(worst < 1e-8, "max |FastEmit gradient - finite difference| %.3g", worst);
    cr_assert(moved > 1e-3, "lambda %g left the gradient as it was (max change %.3g)", lambda, moved);
    free(z), free(g), free(g0), free(lat), free(emit0);
}

/* One frame and no labels: one node, left by the blank: loss = -log softmax(blank), gradient
 * softmax - onehot(blank), both by hand. */
Test(rnnt, one_node_by_hand)
{
    enum { V = 4 };
    double z[V] = {0.5, -1.0, 2.0, 0.25}, g[V], s = 0;
    int hlens[1] = {1}, ylens[1] = {0}, labels[1] = {0};
    ctc_labels y = {labels, ylens, 1};
    double lat[RNNT_PLANES + 1];
    cr_assert_eq(rnnt_lattice_size(1, 1, 1), (size_t)RNNT_PLANES + 1);
    for (int d = 0; d < V; d++) s += exp(z[d]);
    double loss = loss_f64(lat, z, hlens, &y, 1, 1, 1, V, 2);
    cr_assert(fabs(loss - (log(s) - z[2])) < 1e-14, "loss %.17g", loss);
    ops_rnnt_grad_f64(g, z, lat, hlens, &y, 1, 1, 1, V, 2, 0, 1, 0.0, 0.0, 1.0, 1);
    for (int d = 0; d < V; d++) cr_assert(fabs(g[d] - (exp(z[d]) / s - (d == 2))) < 1e-14, "g[%d] %.17g", d, g[d]);
}

/* A vocabulary wide enough that the rows split over threads: 1 and 4 threads, the same bits. */
Test(rnnt, threads_give_the_same_bits)
{
    rn_fixture f = {.B = 2, .T = 20, .U1 = 9, .V = 700, .Umax = 8, .blank = 0};
    int hlens[2] = {20, 13}, ylens[2] = {8, 5}, labels[16] = {5, 9, 9, 699, 1, 1, 7, 20, 3, 1, 4, 1, 5, 0, 0, 0};
    f.hlens = hlens, f.ylens = ylens, f.labels = labels;
    size_t n = (size_t)f.B * f.T * f.U1 * f.V;
    f.logits = xmalloc(n * sizeof *f.logits);
    unsigned s = 7;
    for (size_t i = 0; i < n; i++) s = s * 1103515245u + 12345u, f.logits[i] = (float)((s >> 8) % 8000) / 1000.0f - 4;
    backend *one = open_kind(BACKEND_CPU, 1), *four = open_kind(BACKEND_CPU, 4);
    rn_result a = run_backend(one, &f, f.T, 0, 0), b = run_backend(four, &f, 7, 1, 1);
    cr_assert(isfinite(a.loss) && a.loss > 0);
    cr_assert_eq(a.loss, b.loss);
    cr_assert_eq(memcmp(a.losses, b.losses, (size_t)f.B * sizeof *a.losses), 0);
    cr_assert_eq(memcmp(a.grad, b.grad, n * sizeof *a.grad), 0);
    free_result(&a), free_result(&b);
    backend_close(one), backend_close(four);
    free(f.logits);
}
