/* An inference config's model: block (ESPnet's Speech2Text keys: beam_size, penalty, ctc_weight,
 * nbest, maxlenratio, minlenratio, lm_weight) as decoding options (each was ranged at its key when
 * the config loaded: core/config/config_values.c), and its
 * longform: block as long-form options. Stage 6 and the library (lib/) read a config through it. */
#ifndef ESPNET3_S2T_CONFIG_H
#define ESPNET3_S2T_CONFIG_H

#include "core/config/config.h"
#include "core/decode/longform.h"
#include "core/decode/speech2text.h"

/* Fills o from icfg->model (which must be set); file names the config in its warnings. opts.lm is
 * left NULL (lm_files_locate finds the LM's files). */
void s2t_opts_from_cfg(s2t_opts *o, const inference_cfg *icfg, const char *file);

/* The longform: block into o and *threshold (seconds; INFINITY when enabled is false); icfg NULL
 * or without the block (the library's own config for a model without a pack) takes the keys'
 * declared defaults (core/config/config_values.c). */
void longform_opts_from_cfg(longform_opts *o, double *threshold, const inference_cfg *icfg);

#endif
