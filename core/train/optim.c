#include "core/train/optim.h"

#include <stdlib.h>
#include <string.h>

/* ---- options ------------------------------------------------------------------------------ */

optim_opts optim_opts_default(optim_kind kind)
{
    return (optim_opts){.kind = kind, .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                        .weight_decay = 0.0, .amsgrad = 0};
}

int optim_opts_from_cfg(const optimizer_cfg *c, optim_opts *out, esp_err *err)
{
    if (!c || !c->target)
        return esp_fail(err, "optimizer._target_: missing (set torch.optim.Adam or torch.optim.AdamW)");
    optim_kind kind;
    if (strcmp(c->target, "torch.optim.Adam") == 0) kind = OPTIM_ADAM;
    else if (strcmp(c->target, "torch.optim.AdamW") == 0) kind = OPTIM_ADAMW;
    else
        return esp_fail(err, "optimizer._target_: '%s' is not supported (use torch.optim.Adam or "
                             "torch.optim.AdamW)", c->target);
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
    /* torch.optim.Adam.__init__'s checks, with its wording. */
    if (!(o.lr >= 0) || !isfinite(o.lr))
        return esp_fail(err, "optimizer.lr: Invalid learning rate: %g (must be a finite value >= 0)", o.lr);
    if (!(o.eps >= 0) || !isfinite(o.eps))
        return esp_fail(err, "optimizer.eps: Invalid epsilon value: %g (must be >= 0)", o.eps);
    if (!(o.beta1 >= 0 && o.beta1 < 1))
        return esp_fail(err, "optimizer.betas: Invalid beta parameter at index 0: %g (must be in [0, 1))", o.beta1);
    if (!(o.beta2 >= 0 && o.beta2 < 1))
        return esp_fail(err, "optimizer.betas: Invalid beta parameter at index 1: %g (must be in [0, 1))", o.beta2);
    if (!(o.weight_decay >= 0) || !isfinite(o.weight_decay))
        return esp_fail(err, "optimizer.weight_decay: Invalid weight_decay value: %g (must be >= 0)",
                        o.weight_decay);
    *out = o;
    return 0;
}

/* ---- Adam / AdamW --------------------------------------------------------------------------- */

void adam_state_init(adam_state *s, backend *be, size_t n, int amsgrad)
{
    size_t bytes = (n ? n : 1) * sizeof(float);
    *s = (adam_state){.be = be, .n = n, .step = 0};
    s->exp_avg = be->alloc(be, bytes); /* zero-filled */
    s->exp_avg_sq = be->alloc(be, bytes);
    s->max_exp_avg_sq = amsgrad ? be->alloc(be, bytes) : NULL;
}

void adam_state_free(adam_state *s)
{
    if (s->be) {
        s->be->free(s->be, s->exp_avg);
        s->be->free(s->be, s->exp_avg_sq);
        s->be->free(s->be, s->max_exp_avg_sq);
    }
    memset(s, 0, sizeof *s);
}

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
    };
}

void adam_step(float *params, adam_state *s, const float *grads, const optim_opts *o, double lr)
{
    ESP_CHECK((o->amsgrad != 0) == (s->max_exp_avg_sq != NULL)); /* state made for these opts */
    s->step++;
    adam_coefs c = adam_coefs_for(o, lr, s->step);
    s->be->adam_update(s->be, params, s->exp_avg, s->exp_avg_sq, s->max_exp_avg_sq, grads, s->n, &c);
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
