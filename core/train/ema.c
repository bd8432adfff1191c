/* Lightning's EMAWeightAveraging: its should_update and AveragedModel's update; see ema.h. */
#include "core/train/ema.h"

int ema_should_update_step(const ema_opts *o, int64_t step_idx)
{
    int from = o->start_step < 0 || step_idx >= o->start_step;
    return from && o->every_n_steps > 0 && step_idx % o->every_n_steps == 0;
}

int ema_should_update_epoch(const ema_opts *o, int64_t epoch_idx)
{
    return o->start_epoch >= 0 && epoch_idx >= o->start_epoch;
}

static void copy_floats(backend *be, float *dst, const float *src, size_t n)
{
    if (n) be->copy(be, dst, src, n * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
}

void ema_update(backend *be, const ema_opts *o, int64_t n_averaged, float *avg_params, const float *params,
                size_t n_params, float *avg_bufs, const float *bufs, const ema_span *spans, size_t n_spans)
{
    /* torch turns the Python scalars decay and 1 - decay (a double difference) into floats */
    float d = (float)o->decay, c = (float)(1.0 - o->decay);
    if (n_averaged == 0) copy_floats(be, avg_params, params, n_params);
    else be->ema_update(be, avg_params, params, n_params, d, c, 0);
    for (size_t i = 0; i < n_spans; i++) {
        const ema_span *s = &spans[i];
        if (n_averaged == 0 || !o->use_buffers) copy_floats(be, avg_bufs + s->offset, bufs + s->offset, s->count);
        else be->ema_update(be, avg_bufs + s->offset, bufs + s->offset, s->count, d, c, s->counts);
    }
}
