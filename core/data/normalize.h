/* Feature normalization after the frontend (and SpecAugment), as ESPnet2's layers do it:
 * GlobalMVN from collect_stats' feats_stats.npz (count, sum, sum_square) and UtteranceMVN.
 * Features are T x dim row-major float; frames from T_valid on are padding and come out zero. */
#ifndef ESPNET3_NORMALIZE_H
#define ESPNET3_NORMALIZE_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/log.h"

typedef struct global_mvn {
    int dim;
    int norm_means, norm_vars;
    float *mean; /* dim: sum / count */
    float *std;  /* dim: sqrt(max(sum_square / count - mean^2, eps)) */
} global_mvn;

/* ESPnet2's defaults: norm_means and norm_vars true, eps 1e-20. Statistics are computed in double and
 * rounded to float, as ESPnet2 loads them with numpy and casts to the feature dtype. Errors:
 * count <= 0, dim <= 0, non-finite statistics (rerun collect_stats). */
int global_mvn_init(global_mvn *g, const double *sum, const double *sum_square, int64_t count, int dim,
                    int norm_means, int norm_vars, double eps, esp_err *err);
void global_mvn_free(global_mvn *g);
/* x: T x g->dim. Valid frames: (x - mean) / std (each step only when enabled); padding: 0. */
void global_mvn_apply(float *x, const global_mvn *g, size_t T, size_t T_valid);

/* ESPnet2's utterance_mvn (UtteranceMVN: defaults norm_means true, norm_vars false, eps 1e-20) on
 * one utterance padded to T frames, as ESPnet2 runs it on a padded batch: padding zeroed, mean per
 * dimension over the T_valid valid frames; norm_means subtracts it from every frame (padding then
 * holds -mean); norm_vars divides every frame by max(sqrt(var), eps), var = the sum of squares / T_valid
 * over all T frames after the subtraction with norm_means (so padding adds mean^2 per frame: ESPnet's
 * result depends on the batch's padding), over the valid frames' (x - mean) without. With T = T_valid
 * (decoding, one utterance) it is the plain per-utterance normalization. T_valid 0: zeros. */
void utterance_mvn_apply(float *x, size_t T, size_t T_valid, int dim, int norm_means, int norm_vars, double eps);

#endif
