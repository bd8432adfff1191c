/* The transducer's validation error rates, valid/cer_transducer and valid/wer_transducer, as
 * ESPnet2's two error calculators compute them (model_conf report_cer / report_wer):
 *   ASR task (espnet2/asr/transducer/error_calculator.py, ErrorCalculatorTransducer):
 *     BeamSearchTransducer with beam_size 2, search_type default, score_norm false;
 *   asr_transducer task (espnet2/asr_transducer/error_calculator.py, ErrorCalculator): its
 *     BeamSearchTransducer with beam_size 2, search_type maes, nstep model_conf.validation_nstep
 *     (2), score_norm false.
 * The best hypothesis of each utterance (without its leading blank) against the labels, as
 * error_calculator.h counts them (ERR_TRANSDUCER_ASR / ERR_TRANSDUCER_BODY).
 *
 * Difference from ESPnet2 on purpose: the ASR task's calculator searches the padded encoder output
 * of each utterance; here only its first hlen frames are searched (as the asr_transducer task
 * does, and as validation's greedy CTC does, core/decode/ctc_decode.h), so a rate does not depend
 * on the batch an utterance was in. */
#ifndef ESPNET3_DECODE_TRANSDUCER_ERRORS_H
#define ESPNET3_DECODE_TRANSDUCER_ERRORS_H

#include "core/config/config_types.h"
#include "core/data/tokenizer.h"
#include "core/decode/error_calculator.h"
#include "core/decode/transducer_search.h"

typedef struct tr_err_calc {
    err_calculator text; /* report_cer, report_wer, sym_space, sym_blank */
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

/* Searches each utterance of the last forward of m (m->lnf: B x T2 x d, hlens[i] frames) and gives
 * the batch's rates. */
void tr_err_batch(const tr_err_calc *c, asr_model *m, const int *hlens, const int *labels, int lstride,
                  const int *label_lens, int B, double *cer, double *wer);

#endif
