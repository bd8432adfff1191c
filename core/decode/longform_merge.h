/* The merge of long-form decoding (core/decode/longform.h): the timed hypotheses of overlapping
 * windows become one hypothesis of the recording, each word from exactly one window.
 *
 * Two neighbouring windows share an overlap. The cut between them is a time in that overlap that
 * lies outside every word of either window (a gap in the union of both windows' word spans), the
 * gap nearest the overlap's middle, where both windows heard the most context. The earlier window
 * gives the words whose centre is before the cut, the later one those after it. A word both windows
 * heard lies on the same side of the cut in both (the cut is outside both estimates of it), so it
 * is taken once, and a word that straddles a window's edge is taken from the window that heard it
 * whole. Only when the words of both windows cover the whole overlap (a word longer than it) does
 * the cut fall at the overlap's middle.
 *
 * Separator tokens (a char model's <space>: tokens in no word) between two kept words are kept; at
 * a join between windows the separators come from the later window when it heard a word before
 * its first kept one, else from the earlier window's after its last kept one. */
#ifndef ESPNET3_LONGFORM_MERGE_H
#define ESPNET3_LONGFORM_MERGE_H

#include <stddef.h>

/* One window's hypothesis on the recording's time axis (seconds from the recording's start). */
typedef struct lf_piece {
    int *ids;                     /* n tokens */
    double *start, *end, *score;  /* per token: its span and mean frame log-posterior */
    int *word;                    /* per token: the index of its word, -1 for a separator */
    size_t n;
    double *wstart, *wend;        /* n_words word spans, in time order */
    size_t n_words;
    double t0, t1;                /* the window's span of the recording */
    double hyp_score;             /* the window's hypothesis score */
} lf_piece;

void lf_piece_free(lf_piece *p);

/* The merged hypothesis, grown as windows arrive. */
typedef struct lf_merge {
    int *ids;
    double *start, *end, *score;
    size_t n, cap;
    double hyp_score;             /* the sum of the windows' scores */
    lf_piece pending;             /* the last window, waiting for the cut after it */
    int has_pending;
    double lo;                    /* the pending window's cut before it */
    int ends_in_word;             /* the output's last token belongs to a word */
    int *trail;                   /* the separators after the last window's last kept word */
    size_t n_trail;
} lf_merge;

/* The cut between window a and the next one, b (b->t0 < a->t1 when they overlap; without an
 * overlap the cut is b->t0). */
double lf_cut(const lf_piece *a, const lf_piece *b);

/* Adds the next window (in time order; the merge takes p's arrays and zeroes p). */
void lf_merge_add(lf_merge *m, lf_piece *p);
/* After the last window: its words up to the end of the recording. */
void lf_merge_finish(lf_merge *m);
void lf_merge_free(lf_merge *m);

#endif
