/* Stage 6's hyp.ctm (write_ctm): NIST CTM of the best hypothesis's words, as sclite and Kaldi's
 * scoring read it: `<file> 1 <start> <dur> <word> <conf>` per word, sorted by file, then start
 * time. <file> is the utterance id, or for a Kaldi segment the recording (its audio file's name
 * without folder and extension, as an STM names it), the times then relative to the recording (the
 * segment's start added, as utils/convert_ctm.pl makes them); channel 1; conf = exp(the word's
 * mean frame log-posterior), in [0, 1]. Words without times (no CTC path, warned about when
 * decoded) are left out. */
#ifndef ESPNET3_INFER_CTM_H
#define ESPNET3_INFER_CTM_H

#include <stddef.h>

#include "core/base/log.h"
#include "core/formats/manifest.h"

typedef struct ctm_lines ctm_lines;

ctm_lines *ctm_lines_new(void);
void ctm_lines_free(ctm_lines *c);
/* A word of utterance e: [start, end) seconds from the start of what was decoded, its score, its
 * text (len bytes). */
void ctm_add(ctm_lines *c, const manifest_entry *e, double start, double end, double score, const char *text,
             size_t len);
/* Sorts and writes the lines to path (temp file + rename). */
int ctm_write(ctm_lines *c, const char *path, esp_err *err);

#endif
