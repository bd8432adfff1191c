/* CTC loss: hand-computed cases, central finite differences (float64) of the loss w.r.t. the
 * logits through log_softmax, parity with torch's ctc_loss on fixtures made by
 * scripts/make_ctc_fixtures.py (loss, per-utterance losses, gradient; zero_infinity; padding),
 * label layouts and threads. CTC decoding: greedy decode, CER and WER as ESPnet's ErrorCalculator
 * on hand-computed cases (the edit distance itself: test/unit/base/test_edit_distance.c). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/compute/ctc.h"
#include "core/decode/ctc_decode.h"
#include "core/base/fsio.h"
#include "core/formats/npz.h"
#include "test/unit/test_util.h"

/* ------------------------------------------------------------------ helpers */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static double urand(void)  /* xorshift64*: uniform in [0, 1) */
{
    rng_state ^= rng_state >> 12, rng_state ^= rng_state << 25, rng_state ^= rng_state >> 27;
    return (double)((rng_state * 0x2545F4914F6CDD1Dull) >> 11) / 9007199254740992.0;
}

static double nrand(void)
{
    double u = urand() + 1e-300, v = urand();
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* Row-wise log_softmax in double, rounded to float as the model hands it over. */
static void log_softmax_rows(float *out, const double *z, size_t rows, int V)
{
    for (size_t r = 0; r < rows; r++) {
        const double *x = z + r * V;
        double m = x[0], s = 0.0;
        for (int c = 1; c < V; c++) m = x[c] > m ? x[c] : m;
        for (int c = 0; c < V; c++) s += exp(x[c] - m);
        for (int c = 0; c < V; c++) out[r * V + c] = (float)(x[c] - m - log(s));
    }
}

static void log_softmax_rows_f64(double *out, const double *z, size_t rows, int V)
{
    for (size_t r = 0; r < rows; r++) {
        const double *x = z + r * V;
        double m = x[0], s = 0.0;
        for (int c = 1; c < V; c++) m = x[c] > m ? x[c] : m;
        for (int c = 0; c < V; c++) s += exp(x[c] - m);
        for (int c = 0; c < V; c++) out[r * V + c] = x[c] - m - log(s);
    }
}

static double loss_of_logits_f64(const double *z, const int *hlens, const ctc_labels *y, int B,
                                 int T, int V)
{
    double *lp = xmalloc((size_t)B * T * V * sizeof *lp);
    double *work = xmalloc(ctc_workspace_size(B, T, ctc_max_label_len(y, B)) * sizeof *work);
    log_softmax_rows_f64(lp, z, (size_t)B * T, V);
    double l = ctc_loss_forward_f64(NULL, work, lp, hlens, y, B, T, V, 1, 1);
    free(lp);
    free(work);
    return l;
}

/* The CTC batch loss as a function of the logits (through log_softmax). */
static double loss_of_logits(const double *z, const int *hlens, const ctc_labels *y, int B, int T,
                             int V)
{
    float *lp = xmalloc((size_t)B * T * V * sizeof *lp);
    double *work = xmalloc(ctc_workspace_size(B, T, ctc_max_label_len(y, B)) * sizeof *work);
    log_softmax_rows(lp, z, (size_t)B * T, V);
    double l = ctc_loss_forward(NULL, work, lp, hlens, y, B, T, V, 1, 1);
    free(lp);
    free(work);
    return l;
}

typedef struct ctc_run {
    double loss;
    double *losses;
    float *grad;
} ctc_run;

static ctc_run run_ctc(const float *lp, const int *hlens, const ctc_labels *y, int B, int T, int V,
                       int zero_inf, ctc_grad_kind kind, int nthreads)
{
    ctc_run r;
    double *work = xmalloc(ctc_workspace_size(B, T, ctc_max_label_len(y, B)) * sizeof *work);
    r.losses = xmalloc((size_t)B * sizeof *r.losses);
    r.grad = xmalloc((size_t)B * T * V * sizeof *r.grad);
    r.loss = ctc_loss_forward(r.losses, work, lp, hlens, y, B, T, V, zero_inf, nthreads);
    ctc_loss_backward(r.grad, work, lp, hlens, y, B, T, V, zero_inf, 1.0f, kind, nthreads);
    free(work);
    return r;
}

static void free_run(ctc_run *r)
{
    free(r->losses);
    free(r->grad);
}

/* ------------------------------------------------------------------ CTC loss */

TestSuite(ctc);

Test(ctc, hand_computed_small_cases)
{
    /* T=2, V=2, label [1]: paths 11, 01, 10. */
    const double p[2][2] = {{0.3, 0.7}, {0.6, 0.4}};
    float lp[4];
    for (int i = 0; i < 4; i++) lp[i] = (float)log(p[i / 2][i % 2]);
    int lab[1] = {1}, ylen[1] = {1}, hlen[1] = {2};
    ctc_labels y = {lab, ylen, 1};
    ctc_run r = run_ctc(lp, hlen, &y, 1, 2, 2, 1, CTC_GRAD_TORCH, 1);
    double want = -log(0.7 * 0.4 + 0.3 * 0.4 + 0.7 * 0.6);
    cr_assert_float_eq(r.loss, want, 1e-6, "loss %.9f want %.9f", r.loss, want);
    /* Posterior of emitting 1 at t=0: (0.7*0.4 + 0.7*0.6) / p; gradient = softmax - posterior. */
    double pt = exp(-want), g01 = 0.7 - (0.7 * 0.4 + 0.7 * 0.6) / pt;
    cr_assert_float_eq(r.grad[1], g01, 1e-6);
    cr_assert_float_eq(r.grad[0] + r.grad[1], 0.0, 1e-6, "rows of the gradient sum to zero");
    free_run(&r);

    /* Empty label sequence: every frame emits blank; no frames and no labels: probability 1. */
    ylen[0] = 0;
    r = run_ctc(lp, hlen, &y, 1, 2, 2, 1, CTC_GRAD_TORCH, 1);
    cr_assert_float_eq(r.loss, -log(0.3 * 0.6), 1e-6);
    free_run(&r);
    hlen[0] = 0;
    r = run_ctc(lp, hlen, &y, 1, 2, 2, 1, CTC_GRAD_TORCH, 1);
    cr_assert_eq(r.loss, 0.0);
    for (int i = 0; i < 4; i++) cr_assert_eq(r.grad[i], 0.0f);
    free_run(&r);

    /* "1 1" needs a blank between: 2 frames cannot, 3 frames have exactly one path (1 0 1). */
    int lab2[2] = {1, 1}, ylen2[1] = {2}, hlen2[1] = {2};
    ctc_labels y2 = {lab2, ylen2, 0};
    r = run_ctc(lp, hlen2, &y2, 1, 2, 2, 1, CTC_GRAD_TORCH, 1);
    cr_assert_eq(r.losses[0], 0.0, "zero_infinity reports 0");
    for (int i = 0; i < 4; i++) cr_assert_eq(r.grad[i], 0.0f);
    free_run(&r);
    float lp3[6] = {logf(0.2f), logf(0.8f), logf(0.5f), logf(0.5f), logf(0.9f), logf(0.1f)};
    hlen2[0] = 3;
    r = run_ctc(lp3, hlen2, &y2, 1, 3, 2, 1, CTC_GRAD_TORCH, 1);
    cr_assert_float_eq(r.loss, -(double)(lp3[1] + lp3[2] + lp3[5]), 1e-6);
    free_run(&r);
}

/* Central finite differences (4th order) of the loss w.r.t. the logits, through log_softmax.
 * B=3, T=12, V=6, label lengths 1..5 with repeats, shorter utterances padded. */
Test(ctc, finite_differences_through_log_softmax)
{
    enum { B = 3, T = 12, V = 6 };
    int hlens[B] = {12, 9, 7};
    int labs[B][5] = {{2, 2, 3, 1, 1}, {4, 4, 0, 0, 0}, {5, 0, 0, 0, 0}};
    int ylens[B] = {5, 2, 1};
    ctc_labels y = {&labs[0][0], ylens, 5};
    for (int trial = 0; trial < 3; trial++) {
        if (trial == 1) ylens[1] = 3, labs[1][2] = 1;         /* "4 4 1" */
        if (trial == 2) ylens[2] = 4, labs[2][1] = 5, labs[2][2] = 2, labs[2][3] = 3; /* "5 5 2 3" */
        double z[B * T * V];
        float lp[B * T * V];
        for (int i = 0; i < B * T * V; i++) z[i] = 1.5 * nrand();
        log_softmax_rows(lp, z, B * T, V);
        ctc_run r = run_ctc(lp, hlens, &y, B, T, V, 1, CTC_GRAD_TORCH, 1);
        ctc_run plain = run_ctc(lp, hlens, &y, B, T, V, 1, CTC_GRAD_LOGPROBS, 1);
        cr_assert(isfinite(r.loss) && r.loss > 0);
        double max_err = 0.0;
        for (int i = 0; i < B * T * V; i++) {
            const double h = 1e-2, z0 = z[i];
            double f[4], d[4] = {2 * h, h, -h, -2 * h};
            for (int k = 0; k < 4; k++) {
                z[i] = z0 + d[k];
                f[k] = loss_of_logits(z, hlens, &y, B, T, V);
            }
            z[i] = z0;
            double fd = (-f[0] + 8 * f[1] - 8 * f[2] + f[3]) / (12 * h);
            double err = fabs(fd - r.grad[i]);
            max_err = err > max_err ? err : max_err;
            cr_assert(err < 5e-5 + 1e-4 * fabs(fd), "trial %d elem %d: fd %.7f analytic %.7f",
                      trial, i, fd, r.grad[i]);
            int b = i / (T * V), t = (i / V) % T;
            if (t >= hlens[b]) cr_assert_eq(r.grad[i], 0.0f, "padding frame b=%d t=%d", b, t);
        }
        /* The plain d loss / d logp through the log_softmax backward gives the same gradient. */
        for (int row = 0; row < B * T; row++) {
            double sum = 0.0;
            for (int c = 0; c < V; c++) sum += plain.grad[row * V + c];
            for (int c = 0; c < V; c++) {
                double sm = exp((double)lp[row * V + c]);
                double g = plain.grad[row * V + c] - sm * sum;
                cr_assert_float_eq(g, r.grad[row * V + c], 1e-6, "row %d c %d", row, c);
            }
        }
        cr_log_info("ctc fd trial %d: loss %.6f max |fd - analytic| %.2e", trial, r.loss, max_err);
        free_run(&r);
        free_run(&plain);
    }
}

/* The same in float64 end to end (ctc_loss_*_f64), where central differences are exact enough
 * for a tight bound; also checks that float and double agree. */
Test(ctc, finite_differences_f64)
{
    enum { B = 3, T = 12, V = 6 };
    int hlens[B] = {11, 12, 6};
    int labs[] = {1, 1, 2, 3, 3, /**/ 4, 5, 5, 5, /**/ 2, 2};  /* concatenated */
    int ylens[B] = {5, 4, 2};
    ctc_labels y = {labs, ylens, 0};
    double z[B * T * V], lp[B * T * V], g[B * T * V], gl[B * T * V];
    float lpf[B * T * V];
    for (int i = 0; i < B * T * V; i++) z[i] = 2.0 * nrand();
    log_softmax_rows_f64(lp, z, B * T, V);
    double *work = xmalloc(ctc_workspace_size(B, T, 5) * sizeof *work);
    double loss = ctc_loss_forward_f64(NULL, work, lp, hlens, &y, B, T, V, 1, 2);
    ctc_loss_backward_f64(g, work, lp, hlens, &y, B, T, V, 1, 1.0, CTC_GRAD_TORCH, 2);
    ctc_loss_backward_f64(gl, work, lp, hlens, &y, B, T, V, 1, 1.0, CTC_GRAD_LOGPROBS, 2);
    double max_err = 0.0;
    for (int i = 0; i < B * T * V; i++) {
        const double h = 1e-5, z0 = z[i];
        z[i] = z0 + h;
        double fp = loss_of_logits_f64(z, hlens, &y, B, T, V);
        z[i] = z0 - h;
        double fm = loss_of_logits_f64(z, hlens, &y, B, T, V);
        z[i] = z0;
        double fd = (fp - fm) / (2 * h), err = fabs(fd - g[i]);
        max_err = err > max_err ? err : max_err;
        cr_assert(err < 1e-8 + 1e-7 * fabs(fd), "elem %d: fd %.10f analytic %.10f", i, fd, g[i]);
    }
    /* d loss / d logp is the plain derivative: check it directly against differences in logp. */
    for (int i = 0; i < B * T * V; i += 5) {
        const double h = 1e-6, l0 = lp[i];
        double *w2 = xmalloc(ctc_workspace_size(B, T, 5) * sizeof *w2);
        lp[i] = l0 + h;
        double fp = ctc_loss_forward_f64(NULL, w2, lp, hlens, &y, B, T, V, 1, 1);
        lp[i] = l0 - h;
        double fm = ctc_loss_forward_f64(NULL, w2, lp, hlens, &y, B, T, V, 1, 1);
        lp[i] = l0;
        free(w2);
        cr_assert_float_eq((fp - fm) / (2 * h), gl[i], 1e-6, "elem %d", i);
    }
    cr_log_info("ctc fd f64: loss %.9f max |fd - analytic| %.2e", loss, max_err);
    /* The float path on the same log-probs agrees with the double one. */
    for (int i = 0; i < B * T * V; i++) lpf[i] = (float)lp[i];
    ctc_run r = run_ctc(lpf, hlens, &y, B, T, V, 1, CTC_GRAD_TORCH, 1);
    cr_assert_float_eq(r.loss, loss, 1e-5 * loss);
    for (int i = 0; i < B * T * V; i++) cr_assert_float_eq(r.grad[i], g[i], 1e-5);
    free_run(&r);
    free(work);
}

static char *fixture(const char *name)
{
    char *dir = path_join(test_root_dir(), "test/fixtures/ctc");
    char *p = path_join(dir, name);
    free(dir);
    return p;
}

typedef struct ctc_fixture {
    npz_file npz;
    int B, T, V, Lmax;
    float *logp;
    int *hlens, *labels, *ylens;
    double loss, *losses, *grad;
    double loss32, *losses32, *grad32;
} ctc_fixture;

static void load_fixture(ctc_fixture *f, const char *name)
{
    esp_err err;
    char *path = fixture(name);
    cr_assert_eq(npz_read(path, &f->npz, &err), 0, "%s", err.msg);
    const npy_array *lp = npz_get(&f->npz, "logp"), *lab = npz_get(&f->npz, "labels");
    cr_assert(lp && lp->dtype == NPY_F32 && lp->ndim == 3 && lab && lab->ndim == 2);
    f->B = (int)lp->shape[0], f->T = (int)lp->shape[1], f->V = (int)lp->shape[2];
    f->Lmax = (int)lab->shape[1];
    size_t n = lp->count;
    f->logp = xmalloc(n * sizeof *f->logp);
    memcpy(f->logp, lp->data, n * sizeof *f->logp);
    f->hlens = test_npz_ints(&f->npz, path, "hlens", f->B);
    f->ylens = test_npz_ints(&f->npz, path, "ylens", f->B);
    f->labels = test_npz_ints(&f->npz, path, "labels", (size_t)f->B * f->Lmax);
    f->loss = test_npz_one(&f->npz, path, "loss");
    f->loss32 = test_npz_one(&f->npz, path, "loss32");
    f->losses = test_npz_doubles(&f->npz, path, "losses", f->B);
    f->losses32 = test_npz_doubles(&f->npz, path, "losses32", f->B);
    f->grad = test_npz_doubles(&f->npz, path, "grad", n);
    f->grad32 = test_npz_doubles(&f->npz, path, "grad32", n);
    free(path);
}

static void free_fixture(ctc_fixture *f)
{
    npz_free(&f->npz);
    free(f->logp), free(f->hlens), free(f->ylens), free(f->labels);
    free(f->losses), free(f->losses32), free(f->grad), free(f->grad32);
}

static void expect_close(const ctc_run *r, const ctc_fixture *f, double loss, const double *losses,
                         const double *grad, const char *what)
{
    cr_assert(fabs(r->loss - loss) <= 1e-5 * fabs(loss), "%s: loss %.9g torch %.9g", what,
              r->loss, loss);
    for (int b = 0; b < f->B; b++)
        cr_assert(fabs(r->losses[b] - losses[b]) <= 1e-5 * fabs(losses[b]) + 1e-9,
                  "%s: losses[%d] %.9g torch %.9g", what, b, r->losses[b], losses[b]);
    size_t n = (size_t)f->B * f->T * f->V;
    double gmax = 0.0;
    for (size_t i = 0; i < n; i++) gmax = fabs(grad[i]) > gmax ? fabs(grad[i]) : gmax;
    for (size_t i = 0; i < n; i++)
        cr_assert(fabs(r->grad[i] - grad[i]) <= 1e-4 * gmax, "%s: grad[%zu] %.9g torch %.9g "
                  "(max |grad| %.3g)", what, i, r->grad[i], grad[i], gmax);
}

static void check_fixture(const char *name)
{
    ctc_fixture f;
    load_fixture(&f, name);
    ctc_labels y = {f.labels, f.ylens, f.Lmax};
    ctc_run r = run_ctc(f.logp, f.hlens, &y, f.B, f.T, f.V, 1, CTC_GRAD_TORCH, 1);
    expect_close(&r, &f, f.loss, f.losses, f.grad, name);
    expect_close(&r, &f, f.loss32, f.losses32, f.grad32, name);
    for (int b = 0; b < f.B; b++)
        for (int t = f.hlens[b]; t < f.T; t++)
            for (int c = 0; c < f.V; c++)
                cr_assert_eq(r.grad[((size_t)b * f.T + t) * f.V + c], 0.0f, "padding b=%d t=%d", b, t);

    /* Threads and the concatenated layout give bit-identical results. */
    int *cat = xmalloc((size_t)f.B * f.Lmax * sizeof *cat), n = 0;
    for (int b = 0; b < f.B; b++)
        for (int i = 0; i < f.ylens[b]; i++) cat[n++] = f.labels[b * f.Lmax + i];
    ctc_labels yc = {cat, f.ylens, 0};
    for (int nt = 2; nt <= 4; nt += 2) {
        ctc_run r2 = run_ctc(f.logp, f.hlens, nt == 2 ? &y : &yc, f.B, f.T, f.V, 1, CTC_GRAD_TORCH, nt);
        cr_assert_eq(r2.loss, r.loss);
        cr_assert_eq(memcmp(r2.losses, r.losses, f.B * sizeof *r.losses), 0);
        cr_assert_eq(memcmp(r2.grad, r.grad, (size_t)f.B * f.T * f.V * sizeof *r.grad), 0);
        free_run(&r2);
    }
    free(cat);
    free_run(&r);
    free_fixture(&f);
}

Test(ctc, parity_with_torch_mixed_batch)
{
    check_fixture("mixed.npz");
}

Test(ctc, parity_with_torch_peaky_batch)
{
    check_fixture("peaky.npz");
}

Test(ctc, zero_infinity)
{
    ctc_fixture f;
    load_fixture(&f, "mixed.npz");
    ctc_labels y = {f.labels, f.ylens, f.Lmax};
    const int bad = 3;  /* 4 repeated labels in 5 frames */
    cr_assert_eq(f.losses[bad], 0.0);

    ctc_run r = run_ctc(f.logp, f.hlens, &y, f.B, f.T, f.V, 1, CTC_GRAD_TORCH, 1);
    cr_assert_eq(r.losses[bad], 0.0);
    for (int i = 0; i < f.T * f.V; i++) cr_assert_eq(r.grad[(size_t)bad * f.T * f.V + i], 0.0f);
    free_run(&r);

    /* Without zero_infinity: +inf loss, NaN gradient on its valid frames (as torch), the other
     * utterances unchanged. */
    r = run_ctc(f.logp, f.hlens, &y, f.B, f.T, f.V, 0, CTC_GRAD_TORCH, 1);
    cr_assert(isinf(r.losses[bad]) && r.losses[bad] > 0 && isinf(r.loss));
    for (int t = 0; t < f.T; t++) {
        float g = r.grad[((size_t)bad * f.T + t) * f.V];
        cr_assert(t < f.hlens[bad] ? isnan(g) : g == 0.0f, "t=%d g=%g", t, g);
    }
    for (int b = 0; b < bad; b++) cr_assert_float_eq(r.losses[b], f.losses[b], 1e-5 * f.losses[b]);
    free_run(&r);

    /* A NaN in the log-probs is not hidden by zero_infinity. */
    f.logp[f.V] = NAN;  /* blank of frame 1 of utterance 0: on live paths */
    r = run_ctc(f.logp, f.hlens, &y, f.B, f.T, f.V, 1, CTC_GRAD_TORCH, 1);
    cr_assert(isnan(r.losses[0]) && isnan(r.loss));
    free_run(&r);
    /* Also when the NaN meets only impossible states (-inf) on its way. */
    float *u1 = f.logp + (size_t)1 * f.T * f.V;
    u1[0] = -INFINITY, u1[2] = NAN;  /* frame 0 of "2 2 2": blank impossible, label 2 NaN */
    r = run_ctc(f.logp, f.hlens, &y, f.B, f.T, f.V, 1, CTC_GRAD_TORCH, 1);
    cr_assert(isnan(r.losses[1]), "losses[1] = %g", r.losses[1]);
    free_run(&r);
    free_fixture(&f);
}

Test(ctc, dloss_scales_the_gradient)
{
    ctc_fixture f;
    load_fixture(&f, "peaky.npz");
    ctc_labels y = {f.labels, f.ylens, f.Lmax};
    size_t n = (size_t)f.B * f.T * f.V;
    double *work = xmalloc(ctc_workspace_size(f.B, f.T, ctc_max_label_len(&y, f.B)) * sizeof *work);
    float *g = xmalloc(n * sizeof *g);
    ctc_loss_forward(NULL, work, f.logp, f.hlens, &y, f.B, f.T, f.V, 1, 1);
    ctc_loss_backward(g, work, f.logp, f.hlens, &y, f.B, f.T, f.V, 1, 0.5f, CTC_GRAD_TORCH, 1);
    for (size_t i = 0; i < n; i++) cr_assert_float_eq(g[i], 0.5 * f.grad[i], 1e-6);
    free(work);
    free(g);
    free_fixture(&f);
}

/* ------------------------------------------------------------------ decoding and error rates */

TestSuite(ctc_decode);

Test(ctc_decode, greedy_collapses_repeats_and_drops_blanks)
{
    enum { V = 4 };
    const int path[9] = {0, 1, 1, 0, 1, 2, 2, 0, 3};
    float lp[9 * V];
    for (int t = 0; t < 9; t++)
        for (int c = 0; c < V; c++) lp[t * V + c] = c == path[t] ? -0.1f : -3.0f;
    int out[9];
    int n = ctc_greedy_decode(out, lp, 9, V);
    cr_assert_eq(n, 4);
    cr_assert(out[0] == 1 && out[1] == 1 && out[2] == 2 && out[3] == 3);
    cr_assert_eq(ctc_greedy_decode(out, lp, 3, V), 1, "frames past hlen are not read");
    cr_assert_eq(ctc_greedy_decode(out, lp, 0, V), 0);
    /* Ties: the first maximum wins (torch.argmax). */
    float tie[V] = {-1.0f, -0.5f, -0.5f, -2.0f};
    cr_assert_eq(ctc_greedy_decode(out, tie, 1, V), 1);
    cr_assert_eq(out[0], 1);
}

/* 0 <blank>, 1 <unk>, 2 <space>, 3 A, 4 B, 5 C, 6 é, 7 <sos/eos> */
static char *toks[] = {"<blank>", "<unk>", "<space>", "A", "B", "C", "\xc3\xa9", "<sos/eos>"};
static const token_list tl = {.tokens = toks, .n = 8};

Test(ctc_decode, cer_as_espnet_error_calculator)
{
    err_calc ec;
    err_calc_init(&ec, &tl);
    cr_assert(ec.blank == 0 && ec.space == 2);
    err_counts acc = {0, 0};
    /* ref "AB C" -> chars ABC; hyp "A C" -> AC: one deletion over 3 characters. */
    int ref[] = {3, 4, 2, 5}, hyp[] = {3, 2, 5};
    cer_add(&acc, &ec, hyp, 3, ref, 4);
    cr_assert(acc.edits == 1 && acc.ref_len == 3);
    /* Spaces do not count: "A BC" against "AB C" is exact. */
    int hyp2[] = {3, 2, 4, 5};
    cer_add(&acc, &ec, hyp2, 4, ref, 4);
    cr_assert(acc.edits == 1 && acc.ref_len == 6);
    /* <unk> counts as its 5 characters; é as one (code points, not bytes). */
    int ref3[] = {6, 3}, hyp3[] = {1, 3};
    cer_add(&acc, &ec, hyp3, 2, ref3, 2);
    cr_assert(acc.edits == 6 && acc.ref_len == 8, "edits %zu ref %zu", acc.edits, acc.ref_len);
    /* An empty reference (only spaces) is skipped. */
    int ref4[] = {2, 2};
    cer_add(&acc, &ec, hyp, 3, ref4, 2);
    cer_add(&acc, &ec, hyp, 3, ref4, 0);
    cr_assert(acc.edits == 6 && acc.ref_len == 8);
    cr_assert_float_eq(err_rate(&acc), 6.0 / 8.0, 1e-12);
    err_counts none = {0, 0};
    cr_assert(isnan(err_rate(&none)));
}

Test(ctc_decode, wer_over_words)
{
    err_calc ec;
    err_calc_init(&ec, &tl);
    err_counts acc = {0, 0};
    /* ref "AB C" (2 words), hyp "A C": AB -> A substitution. */
    int ref[] = {3, 4, 2, 5}, hyp[] = {3, 2, 5};
    wer_add(&acc, &ec, hyp, 3, ref, 4);
    cr_assert(acc.edits == 1 && acc.ref_len == 2);
    /* Leading, trailing and doubled spaces do not make words; blanks are dropped. */
    int hyp2[] = {2, 3, 0, 4, 2, 2, 5, 2};
    wer_add(&acc, &ec, hyp2, 8, ref, 4);
    cr_assert(acc.edits == 1 && acc.ref_len == 4);
    /* "C AB C" against "AB C": one insertion; empty hyp: two deletions. */
    int hyp3[] = {5, 2, 3, 4, 2, 5};
    wer_add(&acc, &ec, hyp3, 6, ref, 4);
    wer_add(&acc, &ec, hyp3, 0, ref, 4);
    cr_assert(acc.edits == 4 && acc.ref_len == 8, "edits %zu ref %zu", acc.edits, acc.ref_len);
    cr_assert_float_eq(err_rate(&acc), 0.5, 1e-12);
}

Test(ctc_decode, token_ids_to_text)
{
    err_calc ec;
    err_calc_init(&ec, &tl);
    int ids[] = {3, 0, 4, 2, 6, 1};
    char *s = token_ids_to_text(&ec, ids, 6);
    cr_assert_str_eq(s, "AB \xc3\xa9<unk>");
    free(s);
    s = token_ids_to_text(&ec, ids, 0);
    cr_assert_str_eq(s, "");
    free(s);
}
