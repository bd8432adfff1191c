/* What scoring writes: sclite's per-utterance alignment lines (its `pra` output), the system
 * summary table of result.txt, and the Markdown rows of ESPnet's RESULTS.md. */
#ifndef ESPNET3_SCORE_REPORT_H
#define ESPNET3_SCORE_REPORT_H

#include <stdio.h>

#include "core/decode/score.h"

/* Totals of one test set under one metric. */
typedef struct score_summary {
    long n_sent;      /* utterances */
    long n_sent_err;  /* utterances with any error */
    long n_ref;       /* reference tokens (sclite's #Wrd) */
    score_counts c;
} score_summary;

/* Adds one utterance's counts. */
void score_summary_add(score_summary *s, const score_counts *utt);
long score_errors(const score_summary *s);
/* 100 * errors / reference tokens (0 without reference tokens, as sctk reports it). */
double score_error_rate(const score_summary *s);

/* One utterance as sclite's pra output prints it without -s: correct tokens lower case, errors
 * upper case, '*' filling the missing side, columns as wide as the wider token:
 *   id: (utt)
 *   Scores: (#C #S #D #I) 2 1 1 0
 *   REF:  a B c D
 *   HYP:  a X c *
 *   Eval:   S   D
 * followed by an empty line. */
void score_write_pra(FILE *fp, const char *utt, const score_tokens *ref, const score_tokens *hyp,
                     const score_step *steps, size_t n_steps, const score_counts *c);

/* result.txt: the system summary in percentages (its "Sum/Avg" row is what ESPnet's
 * show_asr_result.sh greps) and in raw counts (the "Sum" row), titled with `name`. */
void score_write_result(FILE *fp, const char *name, const score_summary *s);

/* A Markdown table in ESPnet's RESULTS.md layout, one row per dataset:
 *   |dataset|Snt|Wrd|Corr|Sub|Del|Ins|Err|S.Err|  (percentages with one decimal) */
void score_write_markdown_table(FILE *fp, const char *const *datasets, const score_summary *sums, size_t n);

#endif
