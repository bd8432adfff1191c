/* An inference config's model: block (ESPnet's Speech2Text keys: beam_size, penalty, ctc_weight,
 * nbest, maxlenratio, minlenratio, lm_weight) as decoding options, each checked at its key. Stage 6
 * and the library (lib/) read a config through it. */
#ifndef ESPNET3_S2T_CONFIG_H
#define ESPNET3_S2T_CONFIG_H

#include "core/config/config.h"
#include "core/decode/speech2text.h"

/* Fills o from icfg->model (which must be set); file names the config in messages. opts.lm is left
 * NULL (lm_files_locate finds the LM's files). */
int s2t_opts_from_cfg(s2t_opts *o, const inference_cfg *icfg, const char *file, esp_err *err);

#endif
