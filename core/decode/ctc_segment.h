/* CTC segmentation (Kürzinger et al. 2020, the `ctc_segmentation` package 1.7.5 that ESPnet2's
 * espnet2/bin/asr_align.py calls): where each utterance of a transcript lies in a recording, from
 * the recording's CTC log-probabilities, written here in C step for step:
 *
 *   text      ESPnet's "tokenize" converter: each utterance's token ids (<unk> removed); the ground
 *             truth is [-1, blank, utt 0's ids, blank, utt 1's ids, ..., blank] (prepare_token_list),
 *             utterance i beginning at the blank before it (utt_begin[i]), the last blank closing.
 *   trellis   cython_fill_table: a table of min(window, T) frames x ground-truth rows in float32,
 *             each row's window shifted along the frames as the best cell of the row before moves
 *             (at most (T - window) / rows + 1 frames a row); a row is reached by switching from
 *             the row before (+ the token's log-prob) or staying (+ the larger of blank's log-prob
 *             and the token's; 0 with gratis_blank on blank rows, and 0 before the first token).
 *   backtrack from the best cell of the last row: each step takes the transition whose log-prob
 *             best explains the table's difference; a switch records the row's time
 *             ((frame + offset) * index_duration) and the frame's probability. An index outside the
 *             table (Python's IndexError there, negative indices wrapping as numpy's do) doubles the
 *             window and starts again, up to max_window_size.
 *   segments  determine_utterance_segments: utterance i from the blanks around it (start: the
 *             middle of the blank's and the row before's times, at most 0.5 s before its first
 *             token; end likewise); its score is the minimum over windows of scoring_length frames
 *             of the mean frame probability (the whole span when shorter; -1e10 when empty), as
 *             ESPnet's: a low score (say below -2 to -5) says the text does not match the audio.
 * Arithmetic follows the package's: the table and the backtracking's differences in float32, times
 * and scores in double, means summed as numpy's pairwise sum, rounding half to even as Python's. */
#ifndef ESPNET3_CTC_SEGMENT_H
#define ESPNET3_CTC_SEGMENT_H

#include <stddef.h>

#include "core/base/log.h"

typedef struct ctcseg_opts {
    int min_window_size;   /* frames of the first try (ESPnet: 8000) */
    int max_window_size;   /* the window doubles while below it (100000) */
    int scoring_length;    /* score_min_mean_over_L (30) */
    int blank;             /* set_blank (0) */
    int gratis_blank;      /* blank_transition_cost_zero: staying on a blank row costs nothing */
    double index_duration; /* seconds per frame: samples / frames / fs (ESPnet's time_stamps "auto") */
} ctcseg_opts;

#define CTCSEG_OPTS_DEFAULT {.min_window_size = 8000, .max_window_size = 100000, .scoring_length = 30}

/* The ground truth of a transcript (one column: the tokenize converter). */
typedef struct ctcseg_text {
    int *gt;        /* rows ids: -1 (the start), the blank between utterances, tokens */
    int rows;
    int *utt_begin; /* n_utts + 1 row indices */
    int n_utts;
} ctcseg_text;

/* The ground truth of n utterances of token ids (ids[i][0..lens[i]); <unk> already removed). */
void ctcseg_text_build(ctcseg_text *out, const int *const *ids, const size_t *lens, int n, int blank);
void ctcseg_text_free(ctcseg_text *t);

typedef struct ctcseg_segment {
    double start, end, score;
} ctcseg_segment;

/* Aligns the transcript to lpz (T x V log-probs, host) and fills seg (n_utts). Errors: more rows
 * than frames (the audio is shorter than the text), the window grown past max_window_size. */
int ctcseg_run(const ctcseg_opts *o, const float *lpz, int T, int V, const ctcseg_text *text, ctcseg_segment *seg,
               esp_err *err);

/* One line of ESPnet's segments output (CTCSegmentationTask.__str__): "utt name start end score
 * text\n", times as %.2f, the score as %3.4f (left out without print_score), the text left out when
 * NULL. Caller frees. */
char *ctcseg_line(const char *utt, const char *name, const ctcseg_segment *s, int print_score, const char *text);

#endif
