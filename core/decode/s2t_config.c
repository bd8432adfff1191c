/* An inference config's model: block as s2t_opts; see s2t_config.h. */
#include "core/decode/s2t_config.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/config/config_values.h"

void s2t_opts_from_cfg(s2t_opts *o, const inference_cfg *icfg, const char *file)
{
    const infer_model_cfg *mc = icfg->model;
    memset(o, 0, sizeof *o);
    o->beam_size = (int)mc->beam_size;
    o->nbest = (int)mc->nbest;
    o->penalty = mc->penalty;
    o->ctc_weight = mc->ctc_weight;
    o->resample = icfg->dataset && icfg->dataset->resample;
    o->maxlenratio = mc->maxlenratio;
    o->minlenratio = mc->minlenratio;
    o->lm_weight = mc->lm_weight;
    o->transducer = (ts_opts)TS_OPTS_DEFAULT;
    const transducer_conf_cfg *tc = mc->transducer_conf;
    if (mc->target && !strcmp(mc->target, TARGET_ASR_TRANSDUCER_S2T)) {
        o->transducer = (ts_opts)TS_OPTS_ASR_TRANSDUCER;
        tc = mc->beam_search_config;
        o->streaming = mc->streaming, o->decoding_window = (int)mc->decoding_window;
        o->left_context = mc->left_context > 0 ? (int)mc->left_context : 0; /* max(left_context, 0) */
    }
    if (tc) { /* each key ranged at load (core/config/config_values.c) */
        static const char *const types[] = {"default", "tsd", "alsd", "nsc", "maes"};
        for (int k = 0; tc->search_type && k < 5; k++)
            if (!strcmp(tc->search_type, types[k])) o->transducer.search_type = k;
        ts_opts *t = &o->transducer;
        if (tc->max_sym_exp) t->max_sym_exp = (int)*tc->max_sym_exp;
        if (tc->u_max) t->u_max = (int)*tc->u_max;
        if (tc->nstep) t->nstep = (int)*tc->nstep;
        if (tc->prefix_alpha) t->prefix_alpha = (int)*tc->prefix_alpha;
        if (tc->expansion_gamma) t->expansion_gamma = *tc->expansion_gamma;
        if (tc->expansion_beta) t->expansion_beta = (int)*tc->expansion_beta;
        if (tc->score_norm) t->score_norm = *tc->score_norm;
        if (tc->score_norm_during) t->score_norm_during = *tc->score_norm_during;
        if (tc->nbest) t->nbest = (int)*tc->nbest;
    }
    if (mc->lm_weight == 0 && (mc->lm_train_config || mc->lm_file))
        log_warn("%s: model.lm_train_config / lm_file: lm_weight is 0, so the LM is not used", file);
    if (mc->ctc_weight == 1.0 && mc->lm_weight == 0 && (mc->maxlenratio != 0 || mc->minlenratio != 0))
        log_warn("%s: model.maxlenratio/minlenratio: the CTC-only searches (ctc_weight 1.0) do not use them", file);
}

void longform_opts_from_cfg(longform_opts *o, double *threshold, const inference_cfg *icfg)
{
    const longform_cfg *lf = icfg ? icfg->longform : NULL;
    *o = (longform_opts){0};
    if (lf) {
        o->window = lf->window, o->overlap = lf->overlap;
        *threshold = lf->enabled ? lf->threshold : INFINITY;
        return;
    }
    o->window = atof(config_default_value("longform.window"));
    o->overlap = atof(config_default_value("longform.overlap"));
    *threshold = atof(config_default_value("longform.threshold"));
}
