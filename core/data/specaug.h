/* SpecAugment as ESPnet2's SpecAug (espnet2/asr/specaug/specaug.py): time warp, then frequency
 * masks, then time masks, on one utterance's log-mel features (T x F row-major, before
 * normalization), with masked values set to 0 (replace_with_zero). Draws come from the caller's
 * seeded rng, so a (seed, utterance) pair always gives the same augmentation.
 *
 * ESPnet2 works on a padded batch: its time masks and ratio-based widths use the padded length,
 * its time warp uses each utterance's own length. Here everything uses the utterance's own
 * length T, so padding never changes what a given utterance gets. */
#ifndef ESPNET3_SPECAUG_H
#define ESPNET3_SPECAUG_H

#include <stddef.h>

#include "core/config/config_types.h"
#include "core/base/log.h"
#include "core/base/rng.h"

typedef enum specaug_warp_mode { SPECAUG_WARP_BICUBIC, SPECAUG_WARP_BILINEAR } specaug_warp_mode;

typedef struct specaug_opts {
    int apply_time_warp;
    int time_warp_window;               /* 5 */
    specaug_warp_mode time_warp_mode;   /* bicubic */
    int apply_freq_mask;
    int freq_mask_width_range[2];       /* [0, 20): widths drawn in [lo, hi) */
    int num_freq_mask;                  /* 2 */
    int apply_time_mask;
    int use_time_mask_ratio;            /* 1: widths from time_mask_width_ratio_range * T */
    int time_mask_width_range[2];       /* [0, 100) */
    double time_mask_width_ratio_range[2];
    int num_time_mask;                  /* 2 */
} specaug_opts;

/* ESPnet2's defaults (all three parts on). */
void specaug_opts_default(specaug_opts *o);
/* Defaults, then the keys of c (NULL: defaults). Numbers that are 0 keep their default; the
 * apply_* booleans are taken as given. Errors name the model.specaug_conf key: a width range
 * with hi <= lo or lo < 0, both time mask ranges given, an unknown time_warp_mode, or nothing to
 * apply (ESPnet2 rejects that too). */
int specaug_opts_from_cfg(const specaug_conf_cfg *c, specaug_opts *o, esp_err *err);

/* Augments x (T x F) in place. */
void specaug_apply(float *x, size_t T, int F, const specaug_opts *o, rng *r);

/* The parts, for tests and for callers that draw their own positions.
 * Time warp: frames [0, center) are resized to `warped` frames and [center, T) to T - warped
 * (torch.nn.functional.interpolate, align_corners=False); identity when warped == center. */
void specaug_time_warp_at(float *x, size_t T, int F, size_t center, size_t warped, specaug_warp_mode mode);
/* ESPnet2's draw: nothing when T <= 2 * window; else center in [window, T - window),
 * warped in [center - window, center + window) + 1. */
void specaug_time_warp(float *x, size_t T, int F, int window, specaug_warp_mode mode, rng *r);
/* mask_along_axis: num_mask widths in [lo, hi), then starts in [0, max(1, D - max width)); rows
 * (axis 0, time) or columns (axis 1, freq) in [start, start + width) set to 0. D = T or F. */
void specaug_mask(float *x, size_t T, int F, int axis, int lo, int hi, int num_mask, rng *r);
/* MaskAlongAxisVariableMaxWidth's range: [max(0, floor(T*r0)), min(T, floor(T*r1))); returns 0
 * when that range is empty (no mask). */
int specaug_ratio_range(size_t T, const double ratio[2], int range[2]);

#endif
