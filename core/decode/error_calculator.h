/* ESPnet's validation error rates of decoded token ids against the labels, as its error
 * calculators turn both into text and count (model_conf report_cer / report_wer, sym_space,
 * sym_blank):
 *   ERR_ATTENTION: espnet/nets/e2e_asr_common.py's ErrorCalculator, which ESPnetASRModel runs on
 *     the attention decoder's teacher-forced argmax (valid/cer, valid/wer): a hypothesis is the
 *     first label-length ids, the reference the labels without padding; sym_blank is removed from
 *     the hypothesis' text only;
 *   ERR_TRANSDUCER_ASR / ERR_TRANSDUCER_BODY: the ASR task's ErrorCalculatorTransducer and the
 *     asr_transducer task's ErrorCalculator (valid/cer_transducer, valid/wer_transducer): the
 *     reference padded with token 0 to the batch's longest (get_transducer_task_io), sym_blank
 *     removed from both texts; the asr_transducer task's WER also takes each U+2581 as a space.
 * Text (convert_to_char): the ids' token strings joined, every sym_space replaced by ' ', sym_blank
 * by '' (Python's str.replace on the text). CER (calculate_cer): the edit distance over the
 * characters (code points) with spaces removed; WER (calculate_wer): over str.split() words. A
 * batch's rate is its sum of distances over its sum of reference lengths (an empty reference
 * counts); NaN where that sum is 0 (ESPnet divides by zero there) and where the rate is off.
 * The greedy CTC's cer_ctc, which skips ids instead, is ctc_decode.h's cer_add. */
#ifndef ESPNET3_DECODE_ERROR_CALCULATOR_H
#define ESPNET3_DECODE_ERROR_CALCULATOR_H

#include "core/config/config_types.h"
#include "core/data/tokenizer.h"

typedef enum { ERR_ATTENTION, ERR_TRANSDUCER_ASR, ERR_TRANSDUCER_BODY } err_calculator_kind;

typedef struct err_calculator {
    err_calculator_kind kind;
    const token_list *tl;
    const char *space, *blank; /* sym_space, sym_blank (borrowed) */
    int cer, wer;              /* report_cer, report_wer */
} err_calculator;

/* The calculator of kind from model_conf (NULL: all left out), with the model class's defaults:
 * report_cer and report_wer true (ESPnetASRModel), false for ERR_TRANSDUCER_BODY
 * (ESPnetASRTransducerModel); sym_space <space>, sym_blank <blank>. */
void err_calculator_from_cfg(err_calculator *c, err_calculator_kind kind, const token_list *tl,
                             const model_conf_cfg *mc);

/* Rates of one batch of B hypotheses (hyps[i], nh[i] ids) against its labels (row i of labels,
 * stride lstride, label_lens[i] ids): *cer and *wer. */
void err_calculator_rates(const err_calculator *c, int *const *hyps, const int *nh, const int *labels, int lstride,
                          const int *label_lens, int B, double *cer, double *wer);

#endif
