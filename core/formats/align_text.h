/* The transcript espnet3 align reads (ESPnet2 asr_align.py's --text): one utterance per line, in
 * the order they are spoken. Kaldi style (its --kaldi_style_text, the default): `utt_id text...`
 * (text_scp.h's reading: the id ends at the first space or tab; a duplicate id is an error naming
 * both lines); else every line is text and the utterances are named <name>_0000, <name>_0001, ...
 * as asr_align.py names them. Blank lines are skipped. A transcript without utterances is an
 * error. */
#ifndef ESPNET3_ALIGN_TEXT_H
#define ESPNET3_ALIGN_TEXT_H

#include <stddef.h>

#include "core/base/log.h"

typedef struct align_text {
    char **ids, **texts;
    long *lines; /* each utterance's line in the file */
    size_t n;
} align_text;

int align_text_read(const char *path, int kaldi_style, const char *name, align_text *out, esp_err *err);
void align_text_free(align_text *t);

#endif
