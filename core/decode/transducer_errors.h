/* The transducer's validation error rates, valid/cer_transducer and valid/wer_transducer, as
 * ESPnet2's two error calculators compute them (model_conf report_cer / report_wer):
 *   ASR task (espnet2/asr/transducer/error_calculator.py, ErrorCalculatorTransducer):
 *     BeamSearchTransducer with beam_size 2, search_type default, score_norm false;
 *   asr_transducer task (espnet2/asr_transducer/error_calculator.py, ErrorCalculator): its
 *     BeamSearchTransducer with beam_size 2, search_type maes, nstep model_conf.validation_nstep
 *     (2), score_norm false.
 * The best hypothesis of each utterance (without its leading blank) and the target (the labels
 * padded with the blank, id 0, to the batch's longest) become text: the token strings joined, every
 * sym_space replaced by ' ', every sym_blank removed (Python's str.replace, on the text). CER: the
 * edit distance over the characters (code points) with the spaces removed; WER: over the words
 * (str.split(); the asr_transducer task first turns every U+2581 '▁' into a space). Each is the
 * batch's sum of distances over the sum of reference lengths (utterances with an empty reference
 * count too); NaN where that sum is 0 (ESPnet2 divides by zero there) and where the rate is off.
 *
 * Difference from ESPnet2 on purpose: the ASR task's calculator searches the padded encoder output
 * of each utterance; here only its first hlen frames are searched (as the asr_transducer task
 * does, and as validation's greedy CTC does, core/decode/ctc_decode.h), so a rate does not depend
 * on the batch an utterance was in. */
#ifndef ESPNET3_DECODE_TRANSDUCER_ERRORS_H
#define ESPNET3_DECODE_TRANSDUCER_ERRORS_H

#include "core/config/config_types.h"
#include "core/data/tokenizer.h"
#include "core/decode/transducer_search.h"

typedef struct tr_err_calc {
    const token_list *tl;
    const char *space, *blank; /* sym_space, sym_blank */
    int cer, wer;              /* report_cer, report_wer */
    int wer_u2581;             /* the asr_transducer task: '▁' counts as a space in WER */
    int beam;
    ts_opts search;
} tr_err_calc;

/* The calculator of a transducer model: body is the asr_transducer task (model_dims.body), nstep
 * its validation_nstep; the strings are borrowed. Checks the search against the vocabulary as
 * ESPnet2 asserts (one-line error). */
int tr_err_calc_init(tr_err_calc *c, const token_list *tl, int body, int report_cer, int report_wer,
                     const char *sym_space, const char *sym_blank, int nstep, esp_err *err);

/* The same from model_conf (NULL: all left out), with each model class's defaults: report_cer and
 * report_wer true in the ASR task (ESPnetASRModel), false in the asr_transducer task
 * (ESPnetASRTransducerModel); sym_space <space>, sym_blank <blank>, validation_nstep 2. */
int tr_err_calc_from_cfg(tr_err_calc *c, const token_list *tl, int body, const model_conf_cfg *mc, esp_err *err);

/* Rates of one batch of B hypotheses (hyps[i], nh[i] ids) against its labels (row i of labels,
 * stride lstride, label_lens[i] ids; padded here with id 0 to the longest): *cer and *wer. */
void tr_err_rates(const tr_err_calc *c, int *const *hyps, const int *nh, const int *labels, int lstride,
                  const int *label_lens, int B, double *cer, double *wer);

/* Searches each utterance of the last forward of m (m->lnf: B x T2 x d, hlens[i] frames) and gives
 * the batch's rates. */
void tr_err_batch(const tr_err_calc *c, asr_model *m, const int *hlens, const int *labels, int lstride,
                  const int *label_lens, int B, double *cer, double *wer);

#endif
