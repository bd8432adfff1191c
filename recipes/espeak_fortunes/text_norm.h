/* Transcript normalization shared by dataset building and scoring: upper-case letters A-Z,
 * apostrophes inside words, words separated by single spaces. */
#ifndef ESPNET3_TEXT_NORM_H
#define ESPNET3_TEXT_NORM_H

#include <stddef.h>

/* Normalizes text: ASCII letters are upper-cased; an apostrophe (ASCII ' or UTF-8 U+2019) is kept
 * only between two letters ("DON'T", but 'quoted' -> QUOTED); every other character (digits,
 * punctuation, whitespace, other bytes) separates words. Returns a new string, "" when no word
 * is left (caller frees). */
char *text_normalize(const char *text);

/* Number of space-separated words in a normalized string. */
size_t text_word_count(const char *normalized);

/* 1 when a synthesizer would read `text` exactly as its normalized transcript: no digits, no
 * non-ASCII bytes, no symbols that are spoken as words (& @ # $ % + = < > / \ and similar). */
int text_is_plain_prose(const char *text);

#endif
