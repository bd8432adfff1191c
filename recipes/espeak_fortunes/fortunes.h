/* The espeak_fortunes recipe's text source: fortune files (Debian's `fortunes` package), split
 * into fortunes and those into sentences. The dataset's transcripts (builder.c) and the
 * character LM's text (lm_text.c) both come from here, so both split the same way. */
#ifndef ESPNET3_FORTUNES_H
#define ESPNET3_FORTUNES_H

#include <stddef.h>
#include "core/base/log.h"

/* One sentence: a span of its fortune's joined text (not NUL-terminated) ending in . ! or ?
 * (closing quotes and brackets included), or the rest of the fortune after the last one. */
typedef struct fortune_sentence {
    const char *text;
    size_t len;
    int has_abbrev; /* holds a word such as "Mr." or an initial, which a synthesizer expands */
} fortune_sentence;

/* Called once per fortune, in file order: joined is the fortune's lines joined by spaces
 * (attribution lines "-- Author" dropped), sentences its n sentences in order. */
typedef void (*fortune_fn)(void *ctx, const char *joined, const fortune_sentence *sentences, size_t n);

/* Every fortune of text_source: a directory's fortune files (sorted by name; *.dat / *.u8 indexes,
 * hidden files and subdirectories such as the offensive `off/` skipped) or the one file given.
 * Fortunes are separated by lines holding a single '%'. Errors name create_dataset.text_source. */
int fortunes_for_each(const char *text_source, fortune_fn fn, void *ctx, esp_err *err);

#endif
