/* ESPnet's blockwise synchronous beam search (espnet/nets/batch_beam_search_online.py,
 * BatchBeamSearchOnline, as espnet2/bin/asr_inference_streaming.py's Speech2TextStreaming builds
 * it; Tsunoo et al., arXiv:2006.14941): the joint CTC/attention search of beam_search.h run on an
 * encoder output that grows as audio comes.
 *
 * The output is cut into the search's own blocks, whatever the encoder's: block b ends at encoder
 * frame 24 + 16 b (BatchBeamSearchOnline's defaults block_size 40, look_ahead 16, hop_size 16,
 * which Speech2TextStreaming never changes) and is searched once that many frames and one more
 * have come; the final call searches the rest as the last block. A block's steps see the frames
 * up to its end (the decoder attends to them, CTC scores over them), and:
 *   - before its first step the CTC states of the running hypotheses are extended to the block's
 *     frames as CTCPrefixScoreTH.extend_state does (blank-only paths: r_n stays log zero, r_b
 *     adds the blank log-probs), the empty prefix's recomputed;
 *   - a block that is not the last stops at the step where the best hypotheses hold one ending in
 *     <eos> or one whose last token occurs earlier in it (ESPnet's repetition check), without
 *     taking that step; the beam then goes back one step (prev_hyps) once past the second;
 *   - the last block runs to the end as beam_search.h does (end_detect when maxlenratio is 0),
 *     the hypotheses that end being appended twice, as ESPnet appends them.
 * A call returns what forward returns: the n-best of the ended hypotheses (the last block's; of a
 * block that is not the last, those that ended at the step it stopped at, which is why partial
 * results are mostly empty), or, when no block ran, the previous call's.
 * maxlen and minlen follow maxlenratio and minlenratio over all frames so far. Not followed: a
 * hypothesis reaching maxlen - 1 steps in a block ends there (ESPnet appends <eos> to it twice). */
#ifndef ESPNET3_BEAM_SEARCH_ONLINE_H
#define ESPNET3_BEAM_SEARCH_ONLINE_H

#include "core/decode/beam_search.h"

#define BS_ONLINE_BLOCK 40
#define BS_ONLINE_HOP 16
#define BS_ONLINE_LOOK_AHEAD 16

/* The scorers and how the attention decoder learns the frames a block sees: source(ctx, T) is
 * called before each block's first step with its T frames (first: the utterance's first block). */
typedef struct bs_online_io {
    const bs_scorer *att, *lm; /* as beam_search_run takes them */
    void (*source)(void *ctx, int T, int first);
    void *ctx;
} bs_online_io;

typedef struct bs_online bs_online;

/* io and o are copied; V tokens (blank 0, <sos/eos> V - 1). */
bs_online *bs_online_new(const bs_online_io *io, const beam_search_opts *o, int V);
void bs_online_free(bs_online *s);
/* The encoder output is now T frames; ctc_logp (host, T x V, may be NULL when ctc_weight is 0)
 * holds their CTC log-probabilities (the earlier rows as before). Searches the blocks that are
 * complete, with is_final the rest too (the search is then ready for a new utterance). out gets
 * this call's n-best (free with bs_nbest_free). Returns the blocks searched. */
int bs_online_push(bs_online *s, const float *ctc_logp, int T, int is_final, bs_nbest *out);
/* The best running hypothesis (tokens after <sos>) into *ids (n of them; valid until the next
 * call); 0 when none runs. */
int bs_online_running(bs_online *s, const int **ids);
/* Frames the searched blocks reach (the last block's end). */
int bs_online_frames(const bs_online *s);
/* ESPnet's disable_repetition_detection: a block that is not the last goes on past a best
 * hypothesis repeating a token (it still stops at one ending in <eos>). Default off, as ESPnet's. */
void bs_online_set_repetition_check(bs_online *s, int on);
void bs_online_reset(bs_online *s);

#endif
