/* test_backend_ops (after ggml's test-backend-ops): EVERY op of core/compute/backend_ops.h, forward
 * and backward, at a few shapes (test/unit/compute/backend_ops_cases_*.c: odd sizes, padded
 * lengths and masks for attention, dropout with p > 0, CTC labels with repeats and an impossible
 * alignment, Adam with and without amsgrad), run on each backend under test and on the float64
 * reference backend "ref64"; every output is compared by NMSE = sum((a - b)^2) / sum(b^2) (b: the
 * reference) against the op's tolerance. An op without a case does not link. One line per op and
 * backend goes to stderr with the largest NMSE of each output over the shapes.
 *
 * Backends under test: ESPNET3_TEST_BACKENDS (kinds for backend_open, comma-separated; each must
 * open) in all_ops; without it all_ops takes cpu and cuda_ops cuda, which is a skipped test (with
 * the reason) where cuda does not open, never a silent pass. An op
 * that a backend does not implement (backend_supports) is reported as skipped. ESPNET3_TEST_OPS: only the ops whose
 * name contains it. Alone: scripts/test_backend_ops [OP] [BACKENDS]. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/rng.h"
#include "test/unit/compute/backend_ops_test.h"

enum { TB_MAX_BUFS = 64, TB_MAX_OUTS = 12, TB_NAME = 24 };

typedef struct tb_output {
    char name[TB_NAME];
    double *v; /* host copy, widened to double */
    size_t n;
    double tol;
} tb_output;

struct tb_run {
    backend *be;
    const tb_case *c;
    rng g;
    char shape[160];
    void *dev[TB_MAX_BUFS];
    int ndev;
    void *host[TB_MAX_BUFS];
    int nhost;
    tb_output out[TB_MAX_OUTS];
    int nout;
};

/* ------------------------------------------------------------------ helpers for the cases */

backend *tb_be(tb_run *r)
{
    return r->be;
}

void tb_shape(tb_run *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->shape, sizeof r->shape, fmt, ap);
    va_end(ap);
}

uint64_t tb_bits(tb_run *r)
{
    return rng_next(&r->g);
}

double tb_uniform(tb_run *r, double lo, double hi)
{
    return lo + (hi - lo) * (double)(rng_next(&r->g) >> 11) * 0x1p-53;
}

void *tb_host(tb_run *r, size_t bytes)
{
    cr_assert(r->nhost < TB_MAX_BUFS);
    void *p = calloc(1, bytes ? bytes : 1);
    cr_assert(p);
    return r->host[r->nhost++] = p;
}

float *tb_host_rand(tb_run *r, size_t n, double lo, double hi)
{
    float *h = tb_host(r, n * sizeof(float));
    for (size_t i = 0; i < n; i++) h[i] = (float)tb_uniform(r, lo, hi);
    return h;
}

float *tb_host_logp(tb_run *r, int rows, int v, double range)
{
    float *h = tb_host(r, (size_t)rows * v * sizeof(float));
    double *z = tb_host(r, (size_t)v * sizeof(double));
    for (int i = 0; i < rows; i++) {
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j < v; j++) z[j] = tb_uniform(r, -range, range), mx = fmax(mx, z[j]);
        for (int j = 0; j < v; j++) sum += exp(z[j] - mx);
        for (int j = 0; j < v; j++) h[(size_t)i * v + j] = (float)(z[j] - mx - log(sum));
    }
    return h;
}

float *tb_zeros(tb_run *r, size_t n)
{
    cr_assert(r->ndev < TB_MAX_BUFS);
    return r->dev[r->ndev++] = r->be->alloc(r->be, n * sizeof(float));
}

float *tb_upload(tb_run *r, const float *host, size_t n)
{
    float *d = tb_zeros(r, n);
    r->be->copy(r->be, d, host, n * sizeof(float), BACKEND_HOST_TO_DEVICE);
    return d;
}

float *tb_rand(tb_run *r, size_t n, double lo, double hi)
{
    return tb_upload(r, tb_host_rand(r, n, lo, hi), n);
}

static tb_output *new_output(tb_run *r, const char *name, size_t n, double tol)
{
    cr_assert(r->nout < TB_MAX_OUTS);
    tb_output *o = &r->out[r->nout++];
    snprintf(o->name, sizeof o->name, "%s", name);
    o->v = calloc(n ? n : 1, sizeof(double));
    cr_assert(o->v);
    o->n = n;
    o->tol = tol;
    return o;
}

static void read_output(tb_run *r, const char *name, const float *dev, size_t n, double tol, int mask)
{
    float *h = tb_host(r, n * sizeof(float));
    r->be->synchronize(r->be);
    r->be->copy(r->be, h, dev, n * sizeof(float), BACKEND_DEVICE_TO_HOST);
    tb_output *o = new_output(r, name, n, tol);
    for (size_t i = 0; i < n; i++) o->v[i] = mask ? (double)(h[i] != 0) : (double)h[i];
}

void tb_out(tb_run *r, const char *name, const float *dev, size_t n)
{
    read_output(r, name, dev, n, r->c->tol, 0);
}

void tb_out_exact(tb_run *r, const char *name, const float *dev, size_t n)
{
    read_output(r, name, dev, n, 0, 0);
}

void tb_out_mask(tb_run *r, const char *name, const float *dev, size_t n)
{
    read_output(r, name, dev, n, 0, 1);
}

void tb_out_host(tb_run *r, const char *name, const double *v, size_t n)
{
    tb_output *o = new_output(r, name, n, r->c->tol);
    if (n) memcpy(o->v, v, n * sizeof(double));
}

/* ------------------------------------------------------------------ the harness */

/* Each op's case, from the op list (an op without its tb_case_<name> does not link). */
static const tb_case *const cases[BACKEND_OP_COUNT] = {
#define X(OP, name, ret, params, args) [BACKEND_OP_##OP] = &tb_case_##name,
    BACKEND_OPS(X)
#undef X
};

/* Runs one shape of a case on be; the outputs stay in r (run_free releases them). */
static void run_case(tb_run *r, backend *be, backend_op op, const tb_case *c, int shape)
{
    memset(r, 0, sizeof *r);
    r->be = be;
    r->c = c;
    rng_init(&r->g, rng_derive(0x7e57, (uint64_t)op, (uint64_t)shape));
    c->run(r, shape);
    be->synchronize(be);
    while (r->ndev > 0) be->free(be, r->dev[--r->ndev]);
    while (r->nhost > 0) free(r->host[--r->nhost]);
}

static void run_free(tb_run *r)
{
    while (r->nout > 0) free(r->out[--r->nout].v);
}

/* NMSE of a against the reference b. Non-finite values must match in kind (NaN, +inf, -inf) and
 * stay out of the sums; a mismatch gives +inf. When sum(b^2) is 0 it is sum((a - b)^2). */
static double nmse(const double *a, const double *b, size_t n)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i])) {
            int same = isnan(b[i]) ? isnan(a[i]) != 0 : a[i] == b[i];
            if (!same) return INFINITY;
            continue;
        }
        double d = a[i] - b[i];
        num += d * d;
        den += b[i] * b[i];
    }
    return den > 0 ? num / den : num;
}

typedef struct tb_tally {
    int quiet; /* no per-op lines */
    int compared, skipped, failed;
} tb_tally;

/* The worst NMSE of one output name over the shapes of an op. */
typedef struct tb_worst {
    char name[TB_NAME];
    double nmse, tol;
} tb_worst;

static tb_worst *worst_of(tb_worst *w, int *nw, const char *name, double tol)
{
    for (int i = 0; i < *nw; i++)
        if (strcmp(w[i].name, name) == 0) return &w[i];
    cr_assert(*nw < TB_MAX_OUTS);
    tb_worst *x = &w[(*nw)++];
    snprintf(x->name, sizeof x->name, "%s", name);
    x->nmse = 0;
    x->tol = tol;
    return x;
}

/* Compares the outputs of one shape; returns the number over tolerance (each one reported). */
static int compare_outputs(const tb_run *ref, const tb_run *got, const char *kind, const char *op,
                           tb_worst *w, int *nw)
{
    int bad = 0;
    cr_expect_eq(got->nout, ref->nout, "%s %s [%s]: %d outputs, the reference %d", kind, op,
                 ref->shape, got->nout, ref->nout);
    for (int i = 0; i < ref->nout && i < got->nout; i++) {
        const tb_output *a = &got->out[i], *b = &ref->out[i];
        cr_assert(strcmp(a->name, b->name) == 0 && a->n == b->n, "%s %s: output %d differs in name/size",
                  kind, op, i);
        double e = nmse(a->v, b->v, a->n);
        tb_worst *x = worst_of(w, nw, b->name, b->tol);
        if (e > x->nmse || isnan(e)) x->nmse = e;
        if (!(e <= b->tol)) {
            bad++;
            cr_expect_fail("%s %s [%s]: %s NMSE %.3g > tol %.3g", kind, op, ref->shape, b->name, e, b->tol);
        }
    }
    return bad;
}

/* Runs op on be and on ref at every shape of its case and prints its line. */
static void compare_op(backend *ref, backend *be, backend_op op, tb_tally *t)
{
    const char *name = backend_op_name(op);
    const tb_case *c = cases[op];
    cr_assert(backend_supports(ref, op), "the reference backend must support %s", name);
    if (!backend_supports(be, op)) {
        t->skipped++;
        if (!t->quiet) fprintf(stderr, "test_backend_ops: %-6s %-21s skipped (not supported)\n", be->name, name);
        return;
    }
    tb_worst w[TB_MAX_OUTS];
    int nw = 0, bad = 0;
    for (int s = 0; s < c->nshapes; s++) {
        tb_run rr, rg;
        run_case(&rr, ref, op, c, s);
        run_case(&rg, be, op, c, s);
        bad += compare_outputs(&rr, &rg, be->name, name, w, &nw);
        run_free(&rr);
        run_free(&rg);
    }
    char line[512];
    int len = snprintf(line, sizeof line, "%-6s %-21s %d shapes ", be->name, name, c->nshapes);
    for (int i = 0; i < nw && len < (int)sizeof line; i++)
        len += w[i].tol == 0 ? snprintf(line + len, sizeof line - len, " %s %.1e (exact)", w[i].name, w[i].nmse)
                             : snprintf(line + len, sizeof line - len, " %s %.1e", w[i].name, w[i].nmse);
    if (!t->quiet) fprintf(stderr, "test_backend_ops: %s  (tol %.0e)  %s\n", line, c->tol, bad ? "FAIL" : "OK");
    t->compared++;
    if (bad) t->failed++;
}

/* Every op whose name contains filter (NULL or "": all), be against ref. */
static void compare_backend(backend *ref, backend *be, const char *filter, tb_tally *t)
{
    for (int op = 0; op < BACKEND_OP_COUNT; op++) {
        if (filter && *filter && !strstr(backend_op_name((backend_op)op), filter)) continue;
        compare_op(ref, be, (backend_op)op, t);
    }
}

static backend *open_or_fail(const char *name, int threads)
{
    esp_err err;
    backend_kind kind;
    cr_assert_eq(backend_kind_parse(name, &kind, &err), 0, "%s", err.msg);
    backend *be = backend_open(kind, 0, threads, &err);
    cr_assert(be, "%s", err.msg);
    return be;
}

/* ------------------------------------------------------------------ tests */

TestSuite(backend_ops);

Test(backend_ops, op_names)
{
    for (int i = 0; i < BACKEND_OP_COUNT; i++) {
        const char *a = backend_op_name((backend_op)i);
        cr_assert(a && *a && strcmp(a, "?") != 0, "op %d has no name", i);
        for (int j = 0; j < i; j++) cr_assert_str_neq(a, backend_op_name((backend_op)j));
    }
    cr_assert_str_eq(backend_op_name(BACKEND_OP_COUNT), "?");
    cr_assert_str_eq(backend_op_name(BACKEND_OP_GEMM), "gemm");
    cr_assert_str_eq(backend_op_name(BACKEND_OP_CLIP_GRAD_NORM), "clip_grad_norm");
    /* Each op's case is its own (a case used for two ops would be a copy-paste slip). */
    for (int op = 0; op < BACKEND_OP_COUNT; op++)
        for (int j = 0; j < op; j++)
            cr_assert(cases[op] != cases[j] && cases[op]->run != cases[j]->run, "ops %s and %s share a case",
                      backend_op_name((backend_op)op), backend_op_name((backend_op)j));
}

/* Every op of each kind in list against ref64; each kind must open. */
static void compare_kinds(char *list)
{
    const char *filter = getenv("ESPNET3_TEST_OPS");
    backend *ref = open_or_fail("ref64", 1);
    tb_tally t = {0};
    int opened = 0;
    for (char *save = NULL, *kind = strtok_r(list, ",", &save); kind; kind = strtok_r(NULL, ",", &save)) {
        backend *be = open_or_fail(kind, 2);
        opened++;
        fprintf(stderr, "test_backend_ops: %s against %s (NMSE = sum((a-b)^2) / sum(b^2))\n", be->name, ref->name);
        compare_backend(ref, be, filter, &t);
        backend_close(be);
    }
    backend_close(ref);
    fprintf(stderr, "test_backend_ops: %d backend(s), %d op comparisons, %d failed, %d skipped\n", opened,
            t.compared, t.failed, t.skipped);
    cr_expect(opened > 0, "no backend under test opened");
    cr_expect(t.failed == 0);
}

Test(backend_ops, all_ops, .timeout = 600)
{
    const char *env = getenv("ESPNET3_TEST_BACKENDS");
    char list[256];
    snprintf(list, sizeof list, "%s", env && *env ? env : "cpu");
    compare_kinds(list);
}

Test(backend_ops, cuda_ops, .timeout = 600)
{
    const char *env = getenv("ESPNET3_TEST_BACKENDS");
    if (env && *env) cr_skip_test("ESPNET3_TEST_BACKENDS names the backends: all_ops compares them");
    esp_err err;
    backend *be = backend_open(BACKEND_CUDA, 0, 2, &err);
    if (!be) cr_skip_test("cuda does not open here: %s", err.msg);
    backend_close(be);
    char list[] = "cuda";
    compare_kinds(list);
}

/* A backend whose only op is `add`: the harness reports every other op as skipped. */
Test(backend_ops, unsupported_ops_are_skipped)
{
    backend *ref = open_or_fail("ref64", 1), *cpu = open_or_fail("cpu", 1);
    /* the CPU backend's memory entries, state and add under another name */
    backend partial = {.name = "part", .kind = cpu->kind, .impl = cpu->impl, .alloc = cpu->alloc, .free = cpu->free,
                       .copy = cpu->copy, .fill = cpu->fill, .synchronize = cpu->synchronize, .add = cpu->add};
    tb_tally t = {.quiet = 1};
    compare_backend(ref, &partial, NULL, &t);
    cr_assert_eq(t.compared, 1);
    cr_assert_eq(t.skipped, BACKEND_OP_COUNT - 1);
    cr_assert_eq(t.failed, 0);
    backend_close(cpu);
    backend_close(ref);
}
