/* The encoder's norms by kind; see norm_spec.h. */
#include "core/nn/norm_spec.h"

#include "core/compute/rownorm.h"

/* ESPnet's LayerNorm eps, when the spec leaves it at 0 (the models other than asr_transducer's). */
static double eps_of(const norm_spec *s) { return s && s->eps > 0 ? (double)s->eps : 1e-12; }

static int rownorm_kind(const norm_spec *s)
{
    return s->kind == NORM_BASIC ? ROWNORM_BASIC : s->kind == NORM_RMS ? ROWNORM_RMS : ROWNORM_SCALE;
}

void norm_spec_forward(backend *be, const norm_spec *s, const nn_norm *nm, float *y, float *mean, float *rstd,
                       const float *x, int N, int D)
{
    if (!s || s->kind == NORM_LAYER)
        be->layernorm_forward(be, y, mean, rstd, x, nm->weight, nm->bias, N, D, eps_of(s));
    else
        be->rownorm_forward(be, y, rstd, x, nm->weight, N, D, rownorm_kind(s), s->p, eps_of(s));
}

void norm_spec_backward(backend *be, const norm_spec *s, const nn_norm *nm, const nn_norm *gnm, float *dx,
                        const float *dy, const float *x, const float *mean, const float *rstd, int N, int D, int acc)
{
    if (!s || s->kind == NORM_LAYER)
        be->layernorm_backward(be, dx, gnm->weight, gnm->bias, dy, x, nm->weight, mean, rstd, N, D, acc);
    else
        be->rownorm_backward(be, dx, gnm->weight, dy, x, nm->weight, rstd, N, D, rownorm_kind(s), s->p, eps_of(s), acc);
}
