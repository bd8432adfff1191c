/* test_backend_ops cases of the transducer's joint activation (backend_ops_test.h): the whole
 * frame range and a chunk inside it (t0 > 0, tc < T), one prefix and many, J past one tanh block of
 * the CPU's loop (512) and rows enough to split over threads; the backward accumulates into
 * non-zero gradients, with z a real forward's. */
#include <math.h>
#include <stddef.h>

#include "test/unit/compute/backend_ops_test.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const struct {
    int B, T, t0, tc, U1, J;
} JT_S[] = {
    {1, 1, 0, 1, 1, 1}, {2, 7, 0, 7, 5, 6}, {3, 9, 4, 3, 4, 13}, {2, 5, 1, 2, 3, 520}, {4, 40, 8, 30, 12, 33},
};

static void joint_shape(tb_run *r, int s)
{
    tb_shape(r, "B %d T %d t0 %d tc %d U1 %d J %d", JT_S[s].B, JT_S[s].T, JT_S[s].t0, JT_S[s].tc, JT_S[s].U1,
             JT_S[s].J);
}

static void joint_tanh_forward_run(tb_run *r, int s)
{
    int B = JT_S[s].B, T = JT_S[s].T, U1 = JT_S[s].U1, J = JT_S[s].J, tc = JT_S[s].tc;
    joint_shape(r, s);
    size_t nz = (size_t)B * tc * U1 * J;
    float *enc = tb_rand(r, (size_t)B * T * J, -2, 2), *dec = tb_rand(r, (size_t)B * U1 * J, -2, 2);
    float *z = tb_rand(r, nz, -9, 9); /* overwritten */
    tb_be(r)->joint_tanh_forward(tb_be(r), z, enc, dec, B, T, JT_S[s].t0, tc, U1, J);
    tb_out(r, "z", z, nz);
}

static void joint_tanh_backward_run(tb_run *r, int s)
{
    int B = JT_S[s].B, T = JT_S[s].T, U1 = JT_S[s].U1, J = JT_S[s].J, tc = JT_S[s].tc;
    joint_shape(r, s);
    size_t nz = (size_t)B * tc * U1 * J, ne = (size_t)B * T * J, nd = (size_t)B * U1 * J;
    float *hz = tb_host_rand(r, nz, -3, 3);
    for (size_t i = 0; i < nz; i++) hz[i] = (float)tanh(hz[i]);
    float *z = tb_upload(r, hz, nz), *dz = tb_rand(r, nz, -1, 1);
    float *denc = tb_rand(r, ne, -1, 1), *ddec = tb_rand(r, nd, -1, 1); /* accumulated into */
    tb_be(r)->joint_tanh_backward(tb_be(r), denc, ddec, dz, z, B, T, JT_S[s].t0, tc, U1, J);
    tb_out(r, "denc", denc, ne);
    tb_out(r, "ddec", ddec, nd);
}

const tb_case tb_case_joint_tanh_forward = {LEN(JT_S), TOL_ELEM, joint_tanh_forward_run};
const tb_case tb_case_joint_tanh_backward = {LEN(JT_S), TOL_ACC, joint_tanh_backward_run};
