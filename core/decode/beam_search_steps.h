/* The steps of ESPnet's BatchBeamSearch (beam_search.h), shared by the whole-utterance search
 * (beam_search.c, which implements them) and the blockwise online one (beam_search_online.c).
 * Not for use elsewhere in core/decode.
 *
 * Hypotheses live in three slot arrays of the workspace: run (the beam), next (a step's best
 * extensions) and prev (the beam before the last step, for the online search's rewinding); each
 * slot owns a prefix and a CTC state buffer carved from one pool, and slots are swapped, never
 * copied. */
#ifndef ESPNET3_BEAM_SEARCH_STEPS_H
#define ESPNET3_BEAM_SEARCH_STEPS_H

#include <stddef.h>

#include "core/decode/beam_search.h"
#include "core/decode/ctc_prefix_score.h"

typedef struct bs_slot {
    int *yseq;         /* <sos> first */
    int len;
    double score, dec, ctc, lb, lm;
    double *r;         /* CTC state: T x 2 (the scorer's T when the state was made or extended) */
    double psi;        /* CTC prefix log-probability of yseq (ESPnet's s_prev) */
} bs_slot;

typedef struct bs_ended {
    bs_hyp h;
    int yseq_len;      /* with <sos> and <eos>, as end_detect counts */
    int order;         /* when it ended: ties keep this order (Python's stable sort) */
} bs_ended;

/* What one search needs besides the workspace. */
typedef struct bs_ctx {
    ctc_prefix_scorer cps;
    const bs_scorer *att, *lm;
    int V, beam, pre_beam;  /* pre_beam 0: CTC scores the whole vocabulary */
    int dec_on, ctc_on, lb_on, lm_on;
    double w_dec, w_ctc, w_lb, w_lm;
    int maxlen, minlen;
} bs_ctx;

struct beam_search {
    bs_slot *run, *next, *prev;
    int n_prev;                      /* hypotheses in prev (0: none to rewind to) */
    int *yseq_pool;
    double *r_pool;
    size_t cap_beam, cap_len, cap_T;
    float *att, *lmp;                /* beam x V: the decoder's and the LM's log-probs */
    double *wsc, *psi, *work;        /* beam x V, beam x V, T + 2V */
    int *pre, *top;                  /* beam x pre_beam, beam */
    size_t cap_bv, cap_work, cap_pre, cap_top;
    const int **prefixes;
    int *lens;
    bs_ended *ended;
    size_t n_ended, cap_ended;
    /* beam_search_run_batch: each utterance's search in a workspace of its own (its slots and
     * ended list; the step buffers above are this one's, used by each in turn), and the scorer rows
     * of all their running hypotheses (rows x V; one scorer call per step), utterance by utterance. */
    struct bs_batch_utt *batch;
    int cap_batch;
    const int **row_pfx;
    int *row_len, *row_utt;
    float *row_att, *row_lmp;
    size_t cap_rows, cap_v;
};

/* The scorers' weights, switches and pre-beam from o (T, maxlen, minlen left to the caller);
 * checks the scorers o needs are given. */
void bs_ctx_init(bs_ctx *c, const float *ctc_logp, int T, int V, const bs_scorer *att, const bs_scorer *lm,
                 const beam_search_opts *o);
/* Grows the buffers to beam B, prefixes of up to L ids, T frames, V tokens, pre-beam P; the
 * hypotheses in every slot keep their prefixes and states. */
void bs_reserve(beam_search *w, size_t B, size_t L, size_t T, size_t V, size_t P);
/* The beam of one hypothesis, <sos> alone, its CTC state over c's frames. */
void bs_start(beam_search *w, const bs_ctx *c);
/* One step over the n running hypotheses: the best extensions into w->next; returns how many.
 * last_step: the hypotheses made now never extend (their CTC states are not computed). */
int bs_search_step(beam_search *w, const bs_ctx *c, int n, int last_step);
/* BatchBeamSearch.post_process after step i of k extensions in next: eos appended at step
 * maxlen - 1, ended hypotheses out (into the ended list from step minlen on); the rest become
 * the running beam, whose size it returns. */
int bs_post_process(beam_search *w, const bs_ctx *c, int k, int i);
/* A hypothesis into the ended list. */
void bs_push_ended(beam_search *w, const bs_slot *h);
void bs_clear_ended(beam_search *w);
/* espnet/nets/e2e_asr_common.py end_detect at step i over the ended list. */
int bs_end_detect(const beam_search *w, int i);
/* The ended list sorted by score (stable) and its best nbest moved into out. */
void bs_take_nbest(beam_search *w, int nbest, bs_nbest *out);
/* ESPnet's maxlen for T frames: beam_search_maxlen (beam_search.h). */

#endif
