/* ESPnet3's inference output_fn for stage 6: the recipe's Python function that shapes each decoded
 * utterance into the fields written as <inference_dir>/<test>/<field>.scp (stages/infer_output.c). */
#ifndef ESPNET3_INFER_OUTPUT_H
#define ESPNET3_INFER_OUTPUT_H

#include "core/base/log.h"
#include "core/config/config.h"

/* Runs output_fn over the test set stage 6 wrote in out_dir (hyp.scp, ref.scp) and writes a
 * <field>.scp per field (output_keys, else the first output's fields; the idx_key field, default
 * utt_id, is each line's id). No output_fn: nothing to do. */
int infer_output_fn(const esp_config *inference, const char *out_dir, esp_err *err);

#endif
