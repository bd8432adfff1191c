/* What the reader fuzz targets share: a private scratch folder per process (in $FUZZ_TMPDIR,
 * else /dev/shm, else $TMPDIR, else /tmp, removed at exit), writing one input to a file there,
 * and splitting one input into the several files a reader takes (a Kaldi data dir, a checkpoint). */
#ifndef ESPNET3_FUZZ_UTIL_H
#define ESPNET3_FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Separates the parts of an input that becomes several files (ASCII record separator). */
#define FUZZ_SEP '\x1e'

/* Creates the scratch folder (once per process), quiets info logs; returns its path. */
const char *fuzz_scratch(const char *tag);
/* "<scratch>/<rel>" in one of 8 static buffers used in turn. */
const char *fuzz_path(const char *rel);
/* Writes the bytes to <scratch>/<rel>, replacing the file; aborts when it cannot. */
const char *fuzz_write(const char *rel, const void *data, size_t size);
/* The next part of [*p, end) up to FUZZ_SEP (or end): sets *len, moves *p past the separator.
 * Returns NULL when nothing is left (no separator ended the previous part). */
const uint8_t *fuzz_next_part(const uint8_t **p, const uint8_t *end, size_t *len);
/* Empties <scratch> (the files a previous input left). */
void fuzz_clear(void);

#endif
