/* Kaldi-style text lists (`<utt_id> <text>` per line, text may be empty), as stage 6 writes
 * ${inference_dir}/<test>/{hyp,ref}.scp. */
#ifndef ESPNET3_TEXT_SCP_H
#define ESPNET3_TEXT_SCP_H

#include <stddef.h>

#include "core/base/log.h"

typedef struct text_scp_entry {
    char *id;
    char *text;
    long line;
} text_scp_entry;

typedef struct text_scp {
    char *path;
    text_scp_entry *items; /* file order */
    size_t n;
    size_t *by_id;         /* indices sorted by id, for text_scp_find */
} text_scp;

/* Reads the file; the id ends at the first space or tab, the rest of the line (without the line
 * end) is the text. Blank lines are skipped. A duplicate id is an error naming both lines. */
int text_scp_read(const char *path, text_scp *out, esp_err *err);
/* The entry with this id, or NULL. */
const text_scp_entry *text_scp_find(const text_scp *scp, const char *id);
void text_scp_free(text_scp *scp);

#endif
