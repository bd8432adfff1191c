/* Which task a training config runs: ESPnet3 names it with `task:` (a Python class path). espnet3
 * trains the ASR model (ESPnet's ASRTask, the default) or a language model (LMTask). */
#ifndef ESPNET3_CONFIG_TASK_H
#define ESPNET3_CONFIG_TASK_H

#include "core/config/config_types.h"
#include "core/config/yamltree.h"

/* Whether a training config's tree trains a language model: its task is ESPnet's LMTask (any
 * module path ending in ".LMTask", e.g. espnet3.systems.esp2_asr.lm_task.LMTask or
 * espnet2.tasks.lm.LMTask), or model.lm is set. Its data are transcripts alone
 * (core/data/asr_data.h) and its model is core/nn/lm_conf.h's. The defaults that depend on the task
 * ask it of the tree; the typed config carries the answer (training_cfg.lm_task). */
int config_is_lm_task(const ynode *root);

/* Whether data_src names ESPnet3's LM text reader (espnet3.systems.esp2_asr.lm_dataset: any module
 * path ending in ".lm_dataset", or lm_dataset alone). */
int config_is_lm_data_src(const char *data_src);

#endif
