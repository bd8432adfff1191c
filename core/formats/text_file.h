/* Reading the text files of the line-based readers (manifests, Kaldi tables, token lists,
 * metrics.csv, text lists): the whole file, refused when it holds a NUL byte, which would end
 * every C string early and silently drop the rest of the file. */
#ifndef ESPNET3_TEXT_FILE_H
#define ESPNET3_TEXT_FILE_H

#include <stddef.h>

#include "core/base/log.h"

/* The file NUL-terminated (caller frees; *len_out may be NULL), or NULL with an error naming the
 * file, and the line for a NUL byte ("<path>:<line>: holds a NUL byte (<what> is text)"). */
char *text_file_read(const char *path, const char *what, size_t *len_out, esp_err *err);

#endif
