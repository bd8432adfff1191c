/* ESPnet's CTC prefix scorer (espnet/nets/ctc_prefix_score.py, CTCPrefixScoreTH as
 * espnet/nets/scorers/ctc.py's CTCPrefixScorer runs it in BatchBeamSearch): the label-synchronous
 * CTC score of a prefix g extended by a token c, over the T frames of one utterance's CTC
 * log-probabilities (host, T x V, row-major).
 *
 * A prefix's state is r (T x 2: r[t][0] = log r_t^n(g), the alignments of frames 0..t that spell g
 * and end in its last label; r[t][1] = log r_t^b(g), those ending in blank) and psi(g), its
 * prefix log-probability. With phi_c[t] = r_b[t] when c repeats g's last label (a blank must
 * come between) and log(r_n[t] + r_b[t]) otherwise, and start = max(|g|, 1):
 *   psi(g + c)  = logsumexp(phi_c[t-1] + x[t][c] for t in [start, T)  (+ x[0][c] when g is empty))
 *   psi(g + eos) = log(r_n[T-1] + r_b[T-1])   (the whole utterance spells g)
 *   psi(g + blank) = LOGZERO (blank 0 is never an output token)
 * and the search's CTC score of c is psi(g + c) - psi(g). Tokens outside the scored set (the
 * pre-beam of BatchBeamSearch) get LOGZERO, except eos, which ESPnet scores always.
 *
 * ESPnet's conventions kept on purpose: "log zero" is the finite -1e10 (so impossible extensions
 * still get an ordered, finite score); the <sos> that starts every prefix is not a label. ESPnet
 * computes in float32, this in double. */
#ifndef ESPNET3_CTC_PREFIX_SCORE_H
#define ESPNET3_CTC_PREFIX_SCORE_H

#define CTC_LOGZERO (-10000000000.0)

typedef struct ctc_prefix_scorer {
    const float *logp;  /* T x V log-probabilities (borrowed) */
    int T, V;
    int blank;          /* 0 */
    int eos;            /* V - 1 (= sos) */
} ctc_prefix_scorer;

/* r of the empty prefix (<sos> alone): r_n = LOGZERO, r_b[t] = sum of blank log-probs up to t. */
void ctc_prefix_init_state(const ctc_prefix_scorer *s, double *r);

/* psi(g + c) for every c: g has out_len labels, last token `last` (<sos> when out_len is 0) and
 * state r_prev. ids (n_ids of them) restricts the labels scored; NULL scores all V. psi (V) gets
 * LOGZERO for unscored labels and blank, r_sum[T-1] for eos. work: T + 2 * V doubles. */
void ctc_prefix_psi(const ctc_prefix_scorer *s, const double *r_prev, int last, int out_len, const int *ids,
                    int n_ids, double *psi, double *work);

/* r of g + c (T x 2), given g's state as above. */
void ctc_prefix_extend(const ctc_prefix_scorer *s, const double *r_prev, int last, int out_len, int c,
                       double *r_new);

#endif
