/* The ESPnet2 side of stage 8's pack: <root> (model_pack/espnet) laid out as an ESPnet2 packed model
 * (what espnet2's pack writes and espnet_model_zoo unpacks), paths relative to <root>:
 *
 *   meta.yaml                           asr_model_file and asr_train_config, as ESPnet's pack
 *   exp/asr_train/config.yaml           ESPnet2 training config (ASRTask.build_model_from_file):
 *                                       the model block's keys, token_list inline, token_type, bpemodel
 *   exp/asr_train/valid.loss.ave.pth    the state dict (torch.save's zip; load_state_dict(strict=True)
 *                                       finds every key: ours, frontend.logmel.melmat, normalize.*)
 *   exp/asr_stats/train/feats_stats.npz the global_mvn statistics (when the model uses them)
 *   data/token_list/<bpe|unigram>.model the SentencePiece model (bpe tokens)
 *
 * so that, from <root>, Speech2Text("exp/asr_train/config.yaml", "exp/asr_train/valid.loss.ave.pth")
 * decodes the model. */
#ifndef ESPNET3_STAGES_PACK_ESPNET_H
#define ESPNET3_STAGES_PACK_ESPNET_H

#include "core/base/log.h"
#include "core/formats/safetensors.h"
#include "core/nn/model_files.h"

/* weights: the model's safetensors file (ESPnet2 names, optionally with ESPnet3's "model."). */
int pack_espnet(const char *root, const model_files *mf, const st_file *weights, esp_err *err);

#endif
