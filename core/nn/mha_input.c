/* The q/k/v projections and their norm, forward and backward; see mha_input.h. */
#include "core/nn/mha_input.h"

void mha_input_forward(backend *be, const nn_mha *a, const norm_spec *ns, const nn_norm *norm, const float *x,
                       float *ln, float *mean, float *rstd, float *q, float *k, float *v, int N, int D)
{
    norm_spec_forward(be, ns, norm, ln, mean, rstd, x, N, D);
    be->linear_forward(be, q, ln, a->linear_q.weight, a->linear_q.bias, N, D, D);
    be->linear_forward(be, k, ln, a->linear_k.weight, a->linear_k.bias, N, D, D);
    be->linear_forward(be, v, ln, a->linear_v.weight, a->linear_v.bias, N, D, D);
}

void mha_input_backward(backend *be, const nn_mha *a, const nn_mha *ga, const norm_spec *ns, const nn_norm *norm,
                        const nn_norm *gnorm, const mha_input_grads *t, int N, int D)
{
    const nn_linear *proj[] = {&a->linear_q, &a->linear_k, &a->linear_v};
    const nn_linear *gproj[] = {&ga->linear_q, &ga->linear_k, &ga->linear_v};
    const float *dproj[] = {t->dq, t->dk, t->dv};
    for (int i = 0; i < 3; i++) /* the first writes dln, the others add to it */
        be->linear_backward(be, t->dln, gproj[i]->weight, gproj[i]->bias, dproj[i], t->ln, proj[i]->weight, N, D, D,
                            i > 0);
    norm_spec_backward(be, ns, norm, gnorm, t->dx, t->dln, t->x, t->mean, t->rstd, N, D, 1);
}
