/* The loss scaler of trainer.precision 16-mixed: torch.amp.GradScaler with its defaults, as
 * Lightning's MixedPrecision("16-mixed") plugin drives it:
 *   - the backward starts from loss * scale (init_scale 2^16 = 65536);
 *   - at the optimizer step, after the gradients are averaged across ranks, unscale_ multiplies
 *     them by inv_scale = (float)(1 / (double)scale) and checks them for inf/NaN (the backend op
 *     unscale_grads); clipping and the norm then see unscaled gradients;
 *   - a step with inf/NaN gradients is skipped (no Adam update, Adam's step count unchanged;
 *     Lightning's global_step and the LR scheduler still advance), and update() halves the scale
 *     (backoff_factor 0.5, the growth tracker reset); after growth_interval (2000) clean steps in
 *     a row the scale doubles (growth_factor 2; kept when the doubled scale is not finite).
 * scale and growth_tracker are the whole state: checkpoints keep them (grad_scaler.scale,
 * grad_scaler.growth_tracker), so a resumed run continues with the same bits. */
#ifndef ESPNET3_TRAIN_GRAD_SCALER_H
#define ESPNET3_TRAIN_GRAD_SCALER_H

#include <stddef.h>
#include <stdint.h>

#include "core/compute/backend.h"

#define GRAD_SCALER_INIT_SCALE 65536.0f
#define GRAD_SCALER_GROWTH_FACTOR 2.0f
#define GRAD_SCALER_BACKOFF_FACTOR 0.5f
#define GRAD_SCALER_GROWTH_INTERVAL 2000

typedef struct grad_scaler {
    int enabled; /* 0: every call below is the identity (scale 1, nothing found, no update) */
    float scale;
    int64_t growth_tracker; /* clean steps since the last change of the scale */
    float growth_factor, backoff_factor;
    int64_t growth_interval;
} grad_scaler;

/* torch's defaults (enabled: 16-mixed). */
void grad_scaler_init(grad_scaler *s, int enabled);

/* The factor the backward multiplies the loss's gradient by: scale (1 when disabled). */
float grad_scaler_loss_scale(const grad_scaler *s);

/* unscale_ on n device gradients: g *= inv_scale; 1 when any was inf or NaN. Disabled: 0, g left
 * alone. */
int grad_scaler_unscale(const grad_scaler *s, backend *be, float *g, size_t n);

/* update() after a step that ran the backward (found_inf: whether any rank's gradients were
 * inf/NaN). */
void grad_scaler_update(grad_scaler *s, int found_inf);

#endif
