/* Lightning's EarlyStopping decision; see early_stopping.h. Every comparison is in float32, as the
 * tensors Lightning compares (a Python float meets a float32 tensor as a float32). */
#include "core/train/early_stopping.h"

#include <math.h>
#include <stddef.h>

void early_stopping_init(early_stopping *e, const char *monitor, int maximize, double min_delta, int64_t patience,
                         int check_finite, const double *stopping_threshold, const double *divergence_threshold)
{
    *e = (early_stopping){.monitor = monitor, .maximize = maximize, .patience = patience,
                          .check_finite = check_finite, .best = maximize ? -INFINITY : INFINITY};
    e->min_delta = (float)(maximize ? min_delta : -min_delta); /* Lightning: *= 1 if gt else -1 */
    if (stopping_threshold) e->has_stopping_threshold = 1, e->stopping_threshold = (float)*stopping_threshold;
    if (divergence_threshold) e->has_divergence_threshold = 1, e->divergence_threshold = (float)*divergence_threshold;
}

/* monitor_op: torch.gt for max, torch.lt for min (false with a NaN on either side). */
static int better(const early_stopping *e, float a, float b) { return e->maximize ? a > b : a < b; }

int early_stopping_update(early_stopping *e, double value, const char **why)
{
    float current = (float)value;
    if (e->check_finite && !isfinite(current)) {
        *why = "the monitored metric is not finite";
        return 1;
    }
    if (e->has_stopping_threshold && better(e, current, e->stopping_threshold)) {
        *why = "the stopping threshold is reached";
        return 1;
    }
    if (e->has_divergence_threshold && better(e, -current, -e->divergence_threshold)) {
        *why = "the divergence threshold is reached";
        return 1;
    }
    float shifted = current - e->min_delta;
    if (better(e, shifted, e->best)) {
        e->best = current;
        e->wait_count = 0;
        *why = NULL;
        return 0;
    }
    e->wait_count++;
    *why = "the monitored metric did not improve in patience validations";
    return e->wait_count >= e->patience;
}
