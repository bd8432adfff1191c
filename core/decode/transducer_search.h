/* ESPnet2's BeamSearchTransducer (espnet2/asr/transducer/beam_search_transducer.py), the search
 * Speech2Text runs for a model with a transducer decoder (core/nn/transducer.h), on one utterance's
 * encoder output:
 *   beam_size <= 1    greedy_search: per frame, the best label if it is not blank (one label a frame);
 *   default           default_beam_search (Graves 2012 as ESPnet modifies it);
 *   tsd               time_sync_decoding, up to max_sym_exp - 1 labels a frame;
 *   alsd              align_length_sync_decoding, T + min(u_max, T - 1) steps, hypotheses recombined;
 *   nsc               nsc_beam_search (N-step constrained, nstep expansions a frame, prefix search);
 *   maes              modified_adaptive_expansion_search (nstep >= 2, prune-by-value expansion_gamma,
 *                     beam_size + expansion_beta candidates, prefix search).
 * Each step as ESPnet writes it: the same hypotheses in the same order, scores in double from float
 * log-probabilities, Python's stable sorts and first maxima, np.logaddexp where ESPnet merges, and
 * the n-best as each algorithm returns it (sort_nbest's score / len(yseq) with score_norm; greedy
 * its one hypothesis; alsd its final hypotheses, or its last beam unsorted when none reached the
 * last frame). The prediction network's output and state are a function of the label sequence, so
 * they are cached by it (as ESPnet's decoder cache), and the hypotheses that need a new one are
 * computed in one batched step (where ESPnet's batch_score batches; default_beam_search scores one
 * hypothesis a step, as ESPnet's score does). No LM (ESPnet's lm / lm_weight): Speech2Text refuses
 * lm_weight with a transducer. */
#ifndef ESPNET3_DECODE_TRANSDUCER_SEARCH_H
#define ESPNET3_DECODE_TRANSDUCER_SEARCH_H

#include "core/config/config_values.h"
#include "core/nn/model.h"

typedef enum ts_type { TS_DEFAULT = 0, TS_TSD, TS_ALSD, TS_NSC, TS_MAES } ts_type;

/* The inference config's transducer_conf, with ESPnet's defaults (TS_OPTS_DEFAULT, made from
 * core/config/config_values.h's TS_DEF_*). */
typedef struct ts_opts {
    int search_type; /* ts_type */
    int max_sym_exp;
    int u_max;
    int nstep;
    int prefix_alpha;
    double expansion_gamma;
    int expansion_beta;
    int score_norm;
    int score_norm_during; /* 0 */
    int nbest;
    /* ESPnet2's asr_transducer BeamSearchTransducer (espnet2/asr_transducer/beam_search_transducer.py,
     * asr_transducer_inference's): it has no greedy branch, so beam_size 1 runs default with a beam
     * of 1 (which may emit more than one label a frame); its default, tsd, alsd and maes are the
     * algorithms above, but that every result goes through sort_nbest (alsd's last beam when no
     * hypothesis reached the last frame too) and that its maes has no prefix search or duplication
     * check, recombines the hypotheses it keeps and runs nstep as given (1 too); score_norm_during,
     * prefix_alpha and nsc are not its (core/config/config_rules.c refuses them), and some of its
     * defaults differ (TS_DEF_AT_*). Compared with ESPnet on a fixture:
     * test/unit/decode/test_asr_transducer_search.c. */
    int no_greedy;
} ts_opts;

#define TS_OPTS_DEFAULT                                                                                    \
    {.search_type = TS_DEFAULT, .max_sym_exp = TS_DEF_MAX_SYM_EXP, .u_max = TS_DEF_U_MAX,                  \
     .nstep = TS_DEF_NSTEP, .prefix_alpha = TS_DEF_PREFIX_ALPHA, .expansion_gamma = TS_DEF_EXPANSION_GAMMA, \
     .expansion_beta = TS_DEF_EXPANSION_BETA, .score_norm = TS_DEF_SCORE_NORM, .nbest = TS_DEF_NBEST}

/* espnet2/asr_transducer's BeamSearchTransducer's defaults (asr_transducer_inference.Speech2Text). */
#define TS_OPTS_ASR_TRANSDUCER                                                                             \
    {.search_type = TS_DEFAULT, .max_sym_exp = TS_DEF_AT_MAX_SYM_EXP, .u_max = TS_DEF_U_MAX,               \
     .nstep = TS_DEF_AT_NSTEP, .prefix_alpha = TS_DEF_PREFIX_ALPHA, .expansion_gamma = TS_DEF_EXPANSION_GAMMA, \
     .expansion_beta = TS_DEF_EXPANSION_BETA, .score_norm = TS_DEF_AT_SCORE_NORM, .nbest = TS_DEF_NBEST,     \
     .no_greedy = 1}

/* The search_type's name ("default", ...). */
const char *ts_type_name(int type);

/* One hypothesis of the result: yseq without its leading blank. */
typedef struct ts_hyp {
    int *ids;
    int n;
    double score;
} ts_hyp;

typedef struct ts_result {
    ts_hyp *hyps; /* as the algorithm returns them (best first where it sorts) */
    int n;
} ts_result;

void ts_result_free(ts_result *r);

/* The search over T frames of the encoder output enc (device, T x d: after after_norm) of model m
 * (which has a transducer) with beam_size; fills out. beam_size + expansion_beta must not pass the
 * vocabulary with maes (ESPnet asserts it; checked by the caller: ts_check). */
void transducer_search(asr_model *m, const float *enc, int T, int beam_size, const ts_opts *o, ts_result *out);

/* espnet2/asr_transducer's BeamSearchTransducer called chunk by chunk (Speech2Text.streaming_decode):
 * the search over this chunk's T encoder frames (T may be 0) starts from the hypotheses carry holds
 * (its search_cache; {0}: the blank alone). Not final: out gets the hypotheses the algorithm kept,
 * unsorted, as ESPnet returns them, and carry a copy of them; final: out the sorted n-best and carry
 * is emptied (reset_cache). Default, tsd and maes (ALSD does not carry: ESPnet's streaming asserts
 * it away; the caller refuses it). carry is the caller's, freed by ts_result_free. */
void transducer_search_chunk(asr_model *m, const float *enc, int T, int beam_size, const ts_opts *o, ts_result *carry,
                             int is_final, ts_result *out);

/* The options' checks against a model of `vocab` classes (ESPnet's assertions), as one-line errors. */
int ts_check(const ts_opts *o, int beam_size, int vocab, esp_err *err);

#endif
