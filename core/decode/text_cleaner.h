/* ESPnet2's TextCleaner as the metrics' clean_types use it (espnet2/text/cleaner.py), for the
 * cleaners ESPnet3's ASR metrics take. Built: whisper_basic, Whisper's BasicTextNormalizer
 * (openai-whisper's whisper/normalizers/basic.py with its defaults: lower-case, drop [..] / <..>
 * and (..) spans, NFKC, every mark, symbol and punctuation character a space, lower-case again,
 * whitespace runs one space), with ICU for the Unicode tables. whisper_en (the English normalizer:
 * spellings, numbers, currencies) and the TTS cleaners (tacotron, jaconv, ...) are not. */
#ifndef ESPNET3_DECODE_TEXT_CLEANER_H
#define ESPNET3_DECODE_TEXT_CLEANER_H

#include <stddef.h>

typedef enum text_cleaner_kind { TEXT_CLEANER_WHISPER_BASIC = 0 } text_cleaner_kind;

/* The cleaner called `name` (the config's check allows only those built); -1 for another. */
int text_cleaner_of(const char *name);

/* utf8 through the cleaners kinds[0..n) in order (ESPnet2 applies them in the list's order).
 * NULL when utf8 is not valid UTF-8 (Python would not have read the file); caller frees. */
char *text_clean(const int *kinds, size_t n, const char *utf8);

#endif
