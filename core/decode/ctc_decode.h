/* Greedy CTC decoding and the error rates of validation: CER and WER between token id sequences
 * as ESPnet's ErrorCalculator computes them (espnet/nets/e2e_asr_common.py), over the Levenshtein
 * distance of core/base/edit_distance.h. Stage 7 scores with sclite's alignment instead
 * (core/decode/score.h).
 *
 * CER (ErrorCalculator.calculate_cer_ctc, the valid/cer_ctc of ESPnet2's CTC models): blank and
 * <space> ids are dropped, the remaining token strings are joined, and the edit distance is taken
 * over the characters (Unicode code points) of that text, so spaces do not count and a
 * multi-character token such as <unk> counts as its characters. An utterance whose reference has
 * no characters is skipped (adds nothing). ESPnet reports the ratio of one batch,
 * sum(edits) / sum(ref chars), and the trainer averages those ratios over batches weighted by
 * batch size; err_counts lets the caller do either.
 * WER (ErrorCalculator.calculate_wer): tokens joined into text with <space> as ' ' and blanks
 * removed, split on whitespace, edit distance over words.
 *
 * Differences from ESPnet2 on purpose: greedy decoding reads only the first hlen frames of each
 * utterance; ESPnet2 takes the argmax over the padded encoder output, so its CER of a padded
 * utterance depends on the batch it was in (at batch size 1 both agree). */
#ifndef ESPNET3_CTC_DECODE_H
#define ESPNET3_CTC_DECODE_H

#include <stddef.h>

#include "core/data/tokenizer.h"

/* Argmax of each of the first hlen frames of logp (hlen rows of V; logits give the same argmax;
 * the first maximum wins, as torch.argmax), repeats collapsed, blanks (0) dropped. out needs
 * room for hlen ids; returns how many were written. */
int ctc_greedy_decode(int *out, const float *logp, int hlen, int V);

/* Edits against reference length, summed over utterances. */
typedef struct err_counts {
    size_t edits;
    size_t ref_len;
} err_counts;

/* The token list and the ids of its blank and <space> (-1 when the list has none). */
typedef struct err_calc {
    const token_list *tl;
    int blank, space;
} err_calc;

void err_calc_init(err_calc *ec, const token_list *tl);

/* Adds one utterance's character (CER) or word (WER) edits and reference length. Ids must be
 * valid indices of the token list. */
void cer_add(err_counts *acc, const err_calc *ec, const int *hyp, size_t nhyp, const int *ref,
             size_t nref);
void wer_add(err_counts *acc, const err_calc *ec, const int *hyp, size_t nhyp, const int *ref,
             size_t nref);

/* edits / ref_len; NaN when nothing was counted (ESPnet's None). */
double err_rate(const err_counts *acc);

/* Text of a token id sequence as the list's tokenizer gives it (ids_to_text, tokenizer.h): for
 * char, token strings joined, <space> as ' ', blanks dropped (ESPnet's convert_to_char); for bpe,
 * SentencePiece's DecodePieces. Caller frees. */
char *token_ids_to_text(const err_calc *ec, const int *ids, size_t n);

#endif
