/* What `espnet3 transcribe` writes for one audio file, from the library's result (include/espnet3.h
 * only): text, JSON (a line per file: text, score, tokens and words with times and scores, the
 * n-best), NIST CTM (a line per word), SRT and WebVTT subtitles (words grouped into cues). */
#ifndef ESPNET3_CLI_TRANSCRIBE_OUTPUT_H
#define ESPNET3_CLI_TRANSCRIBE_OUTPUT_H

#include <stdio.h>

#include "include/espnet3.h"

typedef enum tr_format { TR_TEXT, TR_JSON, TR_CTM, TR_SRT, TR_VTT, TR_FORMATS } tr_format;

/* "text", "json", "ctm", "srt", "vtt"; -1 for another name. */
int tr_format_parse(const char *name, tr_format *out);
/* The file name extension of a format ("txt" for text). */
const char *tr_format_ext(tr_format f);

/* Writes r (the audio `name` as given; "-" is standard input) in format f. with_name: text lines
 * start with the name and a tab (several files on one stream). */
void tr_write(FILE *fp, tr_format f, const char *name, const espnet3_result *r, int with_name);

#endif
