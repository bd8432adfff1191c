/* test_backend_ops cases of conv1d_gen (backend_ops_test.h), the asr_transducer conv1d block's
 * Conv1d: strides, dilations and groups, with and without bias, dx NULL or accumulating, and an
 * input shorter than the dilated kernel (no output frame: dx zeroed). */
#include <stddef.h>

#include "core/compute/ops.h"
#include "test/unit/compute/backend_ops_test.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const struct {
    int nb, t, ic, oc, k, s, d, g, bias, dx, acc;
} C1G_S[] = {
    {2, 19, 6, 5, 3, 2, 2, 1, 1, 1, 0}, /* stride 2, dilation 2 (the parity fixture's block) */
    {3, 11, 4, 6, 3, 1, 1, 2, 1, 1, 1}, /* two groups, dx accumulates */
    {1, 17, 6, 6, 2, 3, 1, 3, 0, 0, 0}, /* three groups, no bias, no dx */
    {2, 9, 5, 7, 1, 1, 1, 1, 1, 1, 0},  /* kernel 1: a Linear per frame */
    {1, 4, 3, 2, 3, 1, 2, 1, 1, 1, 0},  /* 4 frames under a dilated kernel of 5: no output */
};

static size_t c1g_ny(int s)
{
    return (size_t)C1G_S[s].nb * ops_conv1d_gen_len(C1G_S[s].t, C1G_S[s].k, C1G_S[s].s, C1G_S[s].d) * C1G_S[s].oc;
}

static void conv1d_gen_forward_run(tb_run *r, int s)
{
    int nb = C1G_S[s].nb, t = C1G_S[s].t, ic = C1G_S[s].ic, oc = C1G_S[s].oc, k = C1G_S[s].k, g = C1G_S[s].g;
    tb_shape(r, "nb %d t %d ic %d oc %d k %d stride %d dil %d groups %d bias %d", nb, t, ic, oc, k, C1G_S[s].s,
             C1G_S[s].d, g, C1G_S[s].bias);
    float *x = tb_rand(r, (size_t)nb * t * ic, -1, 1), *w = tb_rand(r, (size_t)oc * (ic / g) * k, -0.5, 0.5);
    float *b = C1G_S[s].bias ? tb_rand(r, (size_t)oc, -0.5, 0.5) : NULL;
    size_t ny = c1g_ny(s);
    float *y = tb_rand(r, ny ? ny : 1, -9, 9);
    backend *be = tb_be(r);
    be->conv1d_gen_forward(be, y, x, w, b, nb, t, ic, oc, k, C1G_S[s].s, C1G_S[s].d, g);
    tb_out(r, "y", y, ny ? ny : 1);
}

static void conv1d_gen_backward_run(tb_run *r, int s)
{
    int nb = C1G_S[s].nb, t = C1G_S[s].t, ic = C1G_S[s].ic, oc = C1G_S[s].oc, k = C1G_S[s].k, g = C1G_S[s].g;
    tb_shape(r, "nb %d t %d ic %d oc %d k %d stride %d dil %d groups %d bias %d dx %d acc %d", nb, t, ic, oc, k,
             C1G_S[s].s, C1G_S[s].d, g, C1G_S[s].bias, C1G_S[s].dx, C1G_S[s].acc);
    size_t nx = (size_t)nb * t * ic, nw = (size_t)oc * (ic / g) * k, ny = c1g_ny(s);
    float *dy = tb_rand(r, ny ? ny : 1, -1, 1), *x = tb_rand(r, nx, -1, 1), *w = tb_rand(r, nw, -0.5, 0.5);
    float *dx = C1G_S[s].dx ? tb_rand(r, nx, -1, 1) : NULL;
    float *dw = tb_rand(r, nw, -1, 1), *db = C1G_S[s].bias ? tb_rand(r, (size_t)oc, -1, 1) : NULL;
    backend *be = tb_be(r);
    be->conv1d_gen_backward(be, dx, dw, db, dy, x, w, nb, t, ic, oc, k, C1G_S[s].s, C1G_S[s].d, g, C1G_S[s].acc);
    if (dx) tb_out(r, "dx", dx, nx);
    tb_out(r, "dw", dw, nw);
    if (db) tb_out(r, "db", db, (size_t)oc);
}

const tb_case tb_case_conv1d_gen_forward = {LEN(C1G_S), TOL_ACC, conv1d_gen_forward_run};
const tb_case tb_case_conv1d_gen_backward = {LEN(C1G_S), TOL_ACC, conv1d_gen_backward_run};
