/* CTC prefix beam search (frame-synchronous, Graves 2012 / Hannun et al. 2014): a beam of output
 * prefixes, each with the log-probability of all alignments of the frames so far that collapse to
 * it, split into alignments ending in blank (pb) and in a label (pnb). Per frame every prefix is
 * kept (blank, or the repeat of its last label) or extended by every label; an extension that
 * equals a prefix already in the beam is merged into it (log-sum-exp), so a prefix's probability
 * is the sum over its alignments, not the best one. Blank is id 0.
 *
 * Ranking: log p(prefix) + penalty * len(prefix) (ESPnet's `penalty`, its length bonus per token);
 * ties go to the shorter prefix, then to the smaller token ids, so the result never depends on
 * the order candidates were made in. Every label is considered at every frame (beam x vocab
 * candidates; right for character vocabularies). Scores are accumulated in double. */
#ifndef ESPNET3_CTC_PREFIX_BEAM_H
#define ESPNET3_CTC_PREFIX_BEAM_H

#include <stddef.h>

typedef struct ctc_beam_opts {
    int beam_size;   /* prefixes kept per frame, >= 1 */
    double penalty;  /* added per output token (ESPnet's length bonus); 0 = none */
} ctc_beam_opts;

/* Reusable workspace (grows to the largest utterance decoded; one per thread). */
typedef struct ctc_beam ctc_beam;

ctc_beam *ctc_beam_new(void);
void ctc_beam_free(ctc_beam *w);

/* Decodes the first hlen frames of logp (hlen rows of V log-probabilities). Writes the best
 * prefix's ids to out (room for hlen ids) and returns how many; *score (may be NULL) gets its
 * ranking score. */
int ctc_prefix_beam_search(ctc_beam *w, const float *logp, int hlen, int V, const ctc_beam_opts *o, int *out,
                           double *score);

/* The n-best of the last search: the k-th prefix of its final beam (k = 0 is what the search
 * returned; the beam is in rank order), written to out as above; returns its length, or -1 when
 * the beam holds k or fewer prefixes. o must be the options of that search. */
int ctc_prefix_beam_nth(ctc_beam *w, int k, const ctc_beam_opts *o, int *out, double *score);

#endif
