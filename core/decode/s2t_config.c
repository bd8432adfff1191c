/* An inference config's model: block as s2t_opts; see s2t_config.h. */
#include "core/decode/s2t_config.h"

#include <inttypes.h>
#include <string.h>

int s2t_opts_from_cfg(s2t_opts *o, const inference_cfg *icfg, const char *file, esp_err *err)
{
    const infer_model_cfg *mc = icfg->model;
    memset(o, 0, sizeof *o);
    o->beam_size = mc->beam_size > 0 ? (int)mc->beam_size : 1;
    if (mc->beam_size < 0 || mc->beam_size > 10000)
        return esp_fail(err, "%s: model.beam_size: %" PRId64 " (use 1 for greedy, up to 10000)", file, mc->beam_size);
    if (mc->nbest < 0 || mc->nbest > 1000)
        return esp_fail(err, "%s: model.nbest: %" PRId64 " (use 1 to 1000)", file, mc->nbest);
    if (!(mc->ctc_weight >= 0.0 && mc->ctc_weight <= 1.0))
        return esp_fail(err, "%s: model.ctc_weight: %g (use a weight in [0, 1]; 1.0 = CTC only)", file, mc->ctc_weight);
    o->penalty = mc->penalty;
    o->ctc_weight = mc->ctc_weight;
    o->resample = icfg->dataset && icfg->dataset->resample;
    o->nbest = mc->nbest > 1 ? (int)mc->nbest : 1;
    o->maxlenratio = mc->maxlenratio;
    o->minlenratio = mc->minlenratio;
    o->lm_weight = mc->lm_weight;
    if (mc->lm_weight == 0 && (mc->lm_train_config || mc->lm_file))
        log_warn("%s: model.lm_train_config / lm_file: lm_weight is 0, so the LM is not used", file);
    if (mc->ctc_weight == 1.0 && mc->lm_weight == 0 && (mc->maxlenratio != 0 || mc->minlenratio != 0))
        log_warn("%s: model.maxlenratio/minlenratio: the CTC-only searches (ctc_weight 1.0) do not use them", file);
    return 0;
}
