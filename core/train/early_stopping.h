/* Lightning's EarlyStopping callback (lightning.pytorch.callbacks.EarlyStopping, 2.6): after each
 * validation the monitored metric, as the float32 tensor Lightning logs it, either improves on the
 * best by more than min_delta (the count of validations without one resets), or counts one; the
 * run stops when the count reaches patience, at a stopping or divergence threshold, or on a
 * non-finite value (check_finite). The same decisions as Lightning's on recorded sequences
 * (test/fixtures/train/early_stopping.json); its state goes into checkpoints. */
#ifndef ESPNET3_TRAIN_EARLY_STOPPING_H
#define ESPNET3_TRAIN_EARLY_STOPPING_H

#include <stdint.h>

typedef struct early_stopping {
    const char *monitor; /* NULL: no early stopping */
    int maximize;        /* mode max */
    float min_delta;     /* signed as Lightning keeps it: -min_delta for mode min */
    int64_t patience;
    int check_finite;
    int has_stopping_threshold, has_divergence_threshold;
    float stopping_threshold, divergence_threshold;
    float best;          /* +inf (min) / -inf (max) before the first value */
    int64_t wait_count;
} early_stopping;

/* Settings as EarlyStopping's constructor takes them (thresholds NULL: none). */
void early_stopping_init(early_stopping *e, const char *monitor, int maximize, double min_delta, int64_t patience,
                         int check_finite, const double *stopping_threshold, const double *divergence_threshold);

/* One validation's value: 1 when training should stop (*why says why, as Lightning's reason). */
int early_stopping_update(early_stopping *e, double value, const char **why);

#endif
