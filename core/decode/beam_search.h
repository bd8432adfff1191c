/* ESPnet's joint CTC/attention beam search, as espnet2.bin.asr_inference.Speech2Text runs it:
 * espnet/nets/batch_beam_search.py's BatchBeamSearch over the scorers
 *   decoder       (weight 1 - ctc_weight): an attention decoder's next-token log-probs, full vocabulary;
 *   ctc           (weight ctc_weight): CTCPrefixScorer (core/decode/ctc_prefix_score.h), a partial
 *                 scorer: only the pre-beam candidates when there is a pre-beam;
 *   length_bonus  (weight penalty): 1 per token, eos included;
 *   lm            (weight lm_weight): a language model's next-token log-probs, full vocabulary
 *                 (Speech2Text's shallow fusion);
 * a scorer of weight 0 is off, as in ESPnet (ctc_weight 1.0: CTC only; 0.0: attention only).
 *
 * Label-synchronous: every step extends each running hypothesis (a prefix that starts with <sos>)
 * by one token. Per step, as BatchBeamSearch.search does:
 *   full = w_dec * decoder + w_len * 1 + w_lm * lm over the whole vocabulary;
 *   pre-beam (ESPnet's pre_beam_score_key "full", pre_beam_size = int(1.5 * beam_size), done when
 *   the CTC scorer is on, the decoder too, and pre_beam_size < V): the top pre_beam_size tokens of
 *   `full` per hypothesis are the ones CTC scores; the others get CTC's LOGZERO - psi(g), eos is
 *   always scored;
 *   score(g + c) = score(g) + full[c] + w_ctc * (psi(g + c) - psi(g));
 *   the beam_size best (hypothesis, token) pairs over all hypotheses x V become the new beam.
 * After each step (post_process): at step maxlen - 1 every hypothesis gets <eos> appended (no
 * score); a hypothesis ending in <eos> leaves the beam and, when the step i >= minlen, joins the
 * ended list. The search stops when no hypothesis runs, after maxlen steps, or (maxlenratio 0)
 * when ESPnet's end_detect (espnet/nets/e2e_asr_common.py: M = 3, D_end = -10) fires. Results are
 * the ended hypotheses sorted by score (a stable sort: equal scores keep the order they ended in);
 * none ended: ESPnet retries with minlenratio - 0.1 while minlenratio >= 0.1, else returns none.
 *   maxlen = T (maxlenratio 0), max(1, int(maxlenratio * T)) (> 0), int(-maxlenratio) (< 0);
 *   minlen = int(minlenratio * T) (>= 0), int(-minlenratio) (< 0).
 * Token ids: blank 0, <sos> = <eos> = V - 1 (ESPnet's token list convention).
 *
 * Ties: where scores are exactly equal, ESPnet's order is whatever torch.topk returns (not
 * specified); here the lower (hypothesis, token) index wins, which is the order a stable sort
 * gives. ESPnet sums in float32, this in double: decisions agree unless two candidates are
 * within float32 rounding of each other (the parity fixtures check they are not).
 *
 * The attention decoder is a callback scoring n prefixes per call (n = all running hypotheses,
 * or at most max_batch), so a model's decoder can batch a step's hypotheses into one forward.
 *
 * beam_search_run_batch searches several utterances at once (ESPnet3's inference batch_size): per
 * step, one scorer call over the running hypotheses of every utterance still searching, then each
 * utterance's CTC prefix scores, beam, post-processing and end detection on its own, exactly as
 * beam_search_run would (which is the batch of one); an utterance that ends none is retried with
 * its own smaller minlenratio. The hypotheses are those of searching each alone wherever the
 * scorers give each prefix the same log-probs in both (beam_search_run's own results already
 * depend on that: a decoder's GEMMs over more rows may round its last bits otherwise). */
#ifndef ESPNET3_BEAM_SEARCH_H
#define ESPNET3_BEAM_SEARCH_H

/* The attention decoder as a scorer: for n prefixes (prefixes[i]: lens[i] ids, the first <sos>),
 * the log-softmax next-token distributions, n x V floats into logp (host). Any n up to max_batch
 * (0: as many as there are running hypotheses, at most beam_size); results must not depend on n. */
typedef struct bs_scorer {
    void (*score)(void *ctx, const int *const *prefixes, const int *lens, int n, float *logp);
    void *ctx;
    int max_batch;
    /* A scorer that depends on the utterance (an attention decoder over a batch's encoder output):
     * when set it is called instead of score, utt[i] naming prefix i's utterance (its index in
     * beam_search_run_batch's list; all 0 in beam_search_run; utt NULL, as the online search of
     * beam_search_online.h gives it: all 0). NULL: score, which must then not
     * depend on the utterance (a language model, a stand-in table). */
    void (*score_utts)(void *ctx, const int *utt, const int *const *prefixes, const int *lens, int n, float *logp);
} bs_scorer;

typedef struct beam_search_opts {
    int beam_size;       /* >= 1 */
    int nbest;           /* hypotheses returned (at most), best first; >= 1 */
    double ctc_weight;   /* [0, 1]: decoder weight 1 - ctc_weight */
    double lm_weight;    /* >= 0: the language model's weight; 0: off */
    double penalty;      /* length bonus weight (ESPnet's `penalty`); 0: off */
    double maxlenratio;
    double minlenratio;
} beam_search_opts;

/* One n-best entry. The scores are ESPnet's hyp.score and hyp.scores: per scorer the unweighted
 * sum over the hypothesis' tokens (eos included: ctc then ends at the prefix's full CTC
 * log-probability); a scorer that is off reports 0. */
typedef struct bs_hyp {
    int *ids;            /* yseq[1:-1]: the tokens between <sos> and the final <eos> (blanks kept) */
    int n_ids;
    double score;        /* weighted sum */
    double decoder, ctc, length_bonus, lm;
} bs_hyp;

typedef struct bs_nbest {
    bs_hyp *hyps;        /* best first */
    int n;
} bs_nbest;

void bs_nbest_free(bs_nbest *nb);

/* Workspace reused across utterances (one per thread). */
typedef struct beam_search beam_search;

beam_search *beam_search_new(void);
void beam_search_free(beam_search *w);
/* The most steps a search of T frames takes (ESPnet's maxlen, above). */
int beam_search_maxlen(double maxlenratio, int T);

/* Decodes one utterance: ctc_logp is its CTC log-probabilities (host, T x V; may be NULL when
 * ctc_weight is 0), att the decoder (may be NULL when ctc_weight is 1), lm the language model
 * (the same callback form; may be NULL when lm_weight is 0). Fills out (freed by the caller with
 * bs_nbest_free, also when empty). */
void beam_search_run(beam_search *w, const float *ctc_logp, int T, int V, const bs_scorer *att, const bs_scorer *lm,
                     const beam_search_opts *o, bs_nbest *out);

/* One utterance of a batch: its CTC log-probabilities (host, T x V; NULL when ctc_weight is 0). */
typedef struct bs_utt {
    const float *ctc_logp;
    int T;
} bs_utt;

/* Decodes n utterances together (see above) into out[0..n), each as beam_search_run fills it. */
void beam_search_run_batch(beam_search *w, const bs_utt *utts, int n, int V, const bs_scorer *att,
                           const bs_scorer *lm, const beam_search_opts *o, bs_nbest *out);

#endif
