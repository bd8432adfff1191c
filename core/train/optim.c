/* The optimizers of core/train/optim.h: options from the config with torch's checks, the state's
 * buffers, the Python-side scalars of each update, and the NaN guard. */
#include "core/train/optim.h"

#include <stdlib.h>
#include <string.h>

/* ---- options ------------------------------------------------------------------------------ */

static const struct {
    const char *target;
    optim_kind kind;
} optim_targets[] = {
    {"torch.optim.Adam", OPTIM_ADAM},
    {"torch.optim.AdamW", OPTIM_ADAMW},
    {"torch.optim.SGD", OPTIM_SGD},
    {"torch.optim.Adadelta", OPTIM_ADADELTA},
};

const char *optim_kind_name(optim_kind kind)
{
    switch (kind) {
    case OPTIM_ADAM: return "Adam";
    case OPTIM_ADAMW: return "AdamW";
    case OPTIM_SGD: return "SGD";
    case OPTIM_ADADELTA: return "Adadelta";
    }
    return "?";
}

optim_opts optim_opts_default(optim_kind kind)
{
    optim_opts o = {.kind = kind, .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
    if (kind == OPTIM_ADADELTA) o.lr = 1.0, o.eps = 1e-6, o.rho = 0.9;
    return o;
}

/* torch's __init__ checks of the options (the config loader reports them at their lines first). */
static int check_opts(const optim_opts *o, esp_err *err)
{
    if (!(o->lr >= 0) || !isfinite(o->lr))
        return esp_fail(err, "optimizer.lr: Invalid learning rate: %g (must be a finite value >= 0)", o->lr);
    if (!(o->weight_decay >= 0) || !isfinite(o->weight_decay))
        return esp_fail(err, "optimizer.weight_decay: Invalid weight_decay value: %g (must be >= 0)",
                        o->weight_decay);
    if (!(o->eps >= 0) || !isfinite(o->eps))
        return esp_fail(err, "optimizer.eps: Invalid epsilon value: %g (must be >= 0)", o->eps);
    if (!(o->beta1 >= 0 && o->beta1 < 1))
        return esp_fail(err, "optimizer.betas: Invalid beta parameter at index 0: %g (must be in [0, 1))", o->beta1);
    if (!(o->beta2 >= 0 && o->beta2 < 1))
        return esp_fail(err, "optimizer.betas: Invalid beta parameter at index 1: %g (must be in [0, 1))", o->beta2);
    if (!(o->momentum >= 0) || !isfinite(o->momentum))
        return esp_fail(err, "optimizer.momentum: Invalid momentum value: %g (must be >= 0)", o->momentum);
    if (o->nesterov && (o->momentum <= 0 || o->dampening != 0))
        return esp_fail(err, "optimizer.nesterov: Nesterov momentum requires a momentum and zero dampening "
                             "(momentum %g, dampening %g)", o->momentum, o->dampening);
    if (!(o->rho >= 0 && o->rho <= 1))
        return esp_fail(err, "optimizer.rho: Invalid rho value: %g (must be in [0, 1])", o->rho);
    return 0;
}

int optim_opts_from_cfg(const optimizer_cfg *c, optim_opts *out, esp_err *err)
{
    if (!c || !c->target)
        return esp_fail(err, "optimizer._target_: missing (set torch.optim.Adam, AdamW, SGD or Adadelta)");
    size_t i = 0, nt = sizeof optim_targets / sizeof *optim_targets;
    while (i < nt && strcmp(c->target, optim_targets[i].target) != 0) i++;
    if (i == nt)
        return esp_fail(err, "optimizer._target_: '%s' is not supported (use torch.optim.Adam, torch.optim.AdamW, "
                             "torch.optim.SGD or torch.optim.Adadelta)", c->target);
    optim_kind kind = optim_targets[i].kind;
    if (kind == OPTIM_ADAM && c->decoupled_weight_decay) kind = OPTIM_ADAMW; /* what torch's AdamW is */
    optim_opts o = optim_opts_default(kind);
    if (c->lr != 0) o.lr = c->lr;
    if (c->eps != 0) o.eps = c->eps;
    if (c->n_betas != 0) {
        if (c->n_betas != 2)
            return esp_fail(err, "optimizer.betas: expected two values [beta1, beta2], got %u", c->n_betas);
        o.beta1 = c->betas[0];
        o.beta2 = c->betas[1];
    }
    o.weight_decay = c->weight_decay;
    o.amsgrad = c->amsgrad != 0;
    o.maximize = c->maximize != 0;
    o.momentum = c->momentum;
    o.dampening = c->dampening;
    o.nesterov = c->nesterov != 0;
    if (kind == OPTIM_ADADELTA) o.rho = c->rho;
    if (check_opts(&o, err) != 0) return -1;
    *out = o;
    return 0;
}

/* ---- state ---------------------------------------------------------------------------------- */

/* torch's state names per optimizer, in the order the buffers are allocated. */
static size_t buffer_names(const optim_opts *o, const char *names[OPTIM_MAX_BUFFERS])
{
    switch (o->kind) {
    case OPTIM_ADAM:
    case OPTIM_ADAMW:
        names[0] = "exp_avg", names[1] = "exp_avg_sq", names[2] = "max_exp_avg_sq";
        return o->amsgrad ? 3 : 2;
    case OPTIM_SGD: names[0] = "momentum_buffer"; return o->momentum != 0 ? 1 : 0;
    case OPTIM_ADADELTA: names[0] = "square_avg", names[1] = "acc_delta"; return 2;
    }
    return 0;
}

size_t optim_buffer_count(const optim_opts *o)
{
    const char *names[OPTIM_MAX_BUFFERS];
    return buffer_names(o, names);
}

void optim_state_init(optim_state *s, backend *be, size_t n, const optim_opts *o)
{
    *s = (optim_state){.be = be, .n = n, .step = 0};
    s->n_buffers = buffer_names(o, s->buffer_names);
    for (size_t i = 0; i < s->n_buffers; i++) s->buffers[i] = be->alloc(be, (n ? n : 1) * sizeof(float)); /* zeroed */
}

void optim_state_free(optim_state *s)
{
    for (size_t i = 0; s->be && i < s->n_buffers; i++) s->be->free(s->be, s->buffers[i]);
    memset(s, 0, sizeof *s);
}

float *optim_state_buffer(const optim_state *s, const char *name)
{
    for (size_t i = 0; i < s->n_buffers; i++)
        if (!strcmp(s->buffer_names[i], name)) return s->buffers[i];
    return NULL;
}

/* ---- the updates ------------------------------------------------------------------------------ */

adam_coefs adam_coefs_for(const optim_opts *o, double lr, int64_t step)
{
    ESP_CHECK(step >= 1);
    /* The Python side of torch's update, in double: step is a float, `**` is C pow. */
    double bias_correction1 = 1 - pow(o->beta1, (double)step);
    double bias_correction2 = 1 - pow(o->beta2, (double)step);
    double step_size = lr / bias_correction1;
    int adamw = o->kind == OPTIM_ADAMW;
    return (adam_coefs){
        .beta1 = (float)o->beta1,
        .one_minus_beta1 = (float)(1 - o->beta1),
        .beta2 = (float)o->beta2,
        .one_minus_beta2 = (float)(1 - o->beta2),
        .l2 = adamw ? 0.0f : (float)o->weight_decay,
        .decay = adamw ? (float)(1 - lr * o->weight_decay) : 1.0f,
        .bc2_sqrt = (float)sqrt(bias_correction2),
        .eps = (float)o->eps,
        .neg_step_size = (float)-step_size,
        .maximize = o->maximize,
    };
}

sgd_coefs sgd_coefs_for(const optim_opts *o, double lr, int64_t step)
{
    ESP_CHECK(step >= 1);
    return (sgd_coefs){
        .weight_decay = (float)o->weight_decay,
        .momentum = (float)o->momentum,
        .one_minus_dampening = (float)(1 - o->dampening),
        .neg_lr = (float)-lr,
        .nesterov = o->nesterov,
        .maximize = o->maximize,
        .first = step == 1,
    };
}

adadelta_coefs adadelta_coefs_for(const optim_opts *o, double lr)
{
    return (adadelta_coefs){
        .weight_decay = (float)o->weight_decay,
        .rho = (float)o->rho,
        .one_minus_rho = (float)(1 - o->rho),
        .eps = (float)o->eps,
        .neg_lr = (float)-lr,
        .maximize = o->maximize,
    };
}

void optim_step(float *params, optim_state *s, const float *grads, const optim_opts *o, double lr)
{
    ESP_CHECK(s->n_buffers == optim_buffer_count(o)); /* state made for these opts */
    s->step++;
    backend *be = s->be;
    switch (o->kind) {
    case OPTIM_ADAM:
    case OPTIM_ADAMW: {
        adam_coefs c = adam_coefs_for(o, lr, s->step);
        be->adam_update(be, params, s->buffers[0], s->buffers[1], o->amsgrad ? s->buffers[2] : NULL, grads, s->n, &c);
        break;
    }
    case OPTIM_SGD: {
        sgd_coefs c = sgd_coefs_for(o, lr, s->step);
        be->sgd_update(be, params, s->n_buffers ? s->buffers[0] : NULL, grads, s->n, &c);
        break;
    }
    case OPTIM_ADADELTA: {
        adadelta_coefs c = adadelta_coefs_for(o, lr);
        be->adadelta_update(be, params, s->buffers[0], s->buffers[1], grads, s->n, &c);
        break;
    }
    }
}

/* ---- NaN/Inf guard -------------------------------------------------------------------------- */

guard_verdict nan_guard_update(nan_guard *g, int invalid, int64_t batch_idx, int64_t epoch, esp_err *err)
{
    if (invalid == NAN_GUARD_OK) {
        g->countdown = 1;
        return GUARD_STEP;
    }
    if (g->countdown >= NAN_GUARD_LIMIT) {
        esp_fail(err, "%s", NAN_GUARD_MESSAGE);
        return GUARD_STOP;
    }
    if (invalid & NAN_GUARD_LOSS)
        log_warn("NaN loss in batch %lld of epoch %lld, skipping the whole batch across all workers.",
                 (long long)batch_idx, (long long)epoch);
    else
        log_warn("Non-finite gradient norm in batch %lld of epoch %lld, skipping the whole batch across all "
                 "workers.", (long long)batch_idx, (long long)epoch);
    g->countdown++;
    return GUARD_SKIP;
}
