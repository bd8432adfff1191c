/* Aligning a transcript to a recording (espnet3 align, cli/cmd_align.c), as ESPnet2's asr_align.py
 * does with CTC segmentation: the recording's CTC log-probabilities (computed in windows, so a
 * long recording takes the memory of its window: speech2text_ctc_logp), each utterance's text as
 * the model's token ids (<unk> removed, as asr_align.py's tokenize converter), then
 * core/decode/ctc_segment.h's segments with ESPnet's timing (index_duration = samples / frames /
 * fs, its time_stamps "auto"). A segment scoring below min_score is marked low: the text likely
 * does not match the audio there. With words, each segment's tokens are also force-aligned
 * (Viterbi, the backend's ctc_align) within its frames and grouped into timed words
 * (core/decode/words.h). */
#ifndef ESPNET3_ALIGN_H
#define ESPNET3_ALIGN_H

#include <stddef.h>

#include "core/decode/ctc_segment.h"
#include "core/decode/speech2text.h"
#include "core/decode/words.h"

typedef struct align_opts {
    ctcseg_opts seg;   /* index_duration is set from the recording */
    double window_s;   /* the encoder's window over the recording */
    double min_score;  /* a segment scoring below is marked low */
    int words;         /* also the words of each segment */
} align_opts;

typedef struct align_result {
    ctcseg_segment seg;
    int low;           /* seg.score < min_score */
    size_t n_unk;      /* characters or pieces of the text the model has no token for (dropped) */
    s2t_word *words;   /* with opts.words: the segment's words (NaN times where no path fits) */
    size_t n_words;
} align_result;

/* Aligns texts[0..n) (the utterances in the order they are spoken) to the waveform (n_samples at
 * the model's rate) into out[0..n). */
int align_recording(speech2text *s, const float *wav, size_t n_samples, const char *const *texts, int n,
                    const align_opts *o, align_result *out, esp_err *err);
void align_results_free(align_result *r, int n);

#endif
