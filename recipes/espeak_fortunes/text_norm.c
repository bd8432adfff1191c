#include "recipes/espeak_fortunes/text_norm.h"
#include "core/base/log.h"

#include <string.h>

static int is_letter(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
}

/* Length of an apostrophe at s (ASCII or UTF-8 right single quotation mark), 0 if none. */
static size_t apostrophe_len(const unsigned char *s)
{
    if (s[0] == '\'') return 1;
    if (s[0] == 0xE2 && s[1] == 0x80 && s[2] == 0x99) return 3;
    return 0;
}

char *text_normalize(const char *text)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t n = strlen(text);
    char *out = xmalloc(n + 1);
    size_t o = 0;
    int pending_space = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        if (is_letter(c)) {
            if (pending_space && o > 0) out[o++] = ' ';
            pending_space = 0;
            out[o++] = (char)(c >= 'a' ? c - 'a' + 'A' : c);
            i++;
            continue;
        }
        size_t ap = apostrophe_len(s + i);
        if (ap && o > 0 && !pending_space && is_letter((unsigned char)out[o - 1]) &&
            is_letter(s[i + ap])) {
            out[o++] = '\'';
            i += ap;
            continue;
        }
        pending_space = 1;
        i += ap ? ap : 1;
    }
    out[o] = '\0';
    return out;
}

size_t text_word_count(const char *normalized)
{
    if (!normalized[0]) return 0;
    size_t words = 1;
    for (const char *p = normalized; *p; p++) words += *p == ' ';
    return words;
}

int text_is_plain_prose(const char *text)
{
    /* Characters espeak-ng and flite read aloud as words, which the transcript would not have. */
    static const char spoken_symbols[] = "@#$%^&*+=<>|\\/~_`{}[]";
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        if (*p >= 0x80 || (*p >= '0' && *p <= '9')) return 0;
        if (strchr(spoken_symbols, *p)) return 0;
    }
    return 1;
}
