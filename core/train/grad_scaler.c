#include "core/train/grad_scaler.h"

#include <math.h>

void grad_scaler_init(grad_scaler *s, int enabled)
{
    *s = (grad_scaler){.enabled = enabled,
                       .scale = enabled ? GRAD_SCALER_INIT_SCALE : 1.0f,
                       .growth_factor = GRAD_SCALER_GROWTH_FACTOR,
                       .backoff_factor = GRAD_SCALER_BACKOFF_FACTOR,
                       .growth_interval = GRAD_SCALER_GROWTH_INTERVAL};
}

float grad_scaler_loss_scale(const grad_scaler *s)
{
    return s->enabled ? s->scale : 1.0f;
}

int grad_scaler_unscale(const grad_scaler *s, backend *be, float *g, size_t n)
{
    if (!s->enabled) return 0;
    /* torch: self._scale.double().reciprocal().float() */
    float inv = (float)(1.0 / (double)s->scale);
    return be->unscale_grads(be, g, n, inv);
}

/* torch's _amp_update_scale_ (float arithmetic on the scale). */
void grad_scaler_update(grad_scaler *s, int found_inf)
{
    if (!s->enabled) return;
    if (found_inf) {
        s->scale = s->scale * s->backoff_factor;
        s->growth_tracker = 0;
        return;
    }
    int64_t successful = s->growth_tracker + 1;
    if (successful == s->growth_interval) {
        float grown = s->scale * s->growth_factor;
        if (isfinite(grown)) s->scale = grown;
        s->growth_tracker = 0;
    } else {
        s->growth_tracker = successful;
    }
}
