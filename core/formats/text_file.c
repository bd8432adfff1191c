/* Whole text files without NUL bytes; see text_file.h. */
#include "core/formats/text_file.h"

#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"

char *text_file_read(const char *path, const char *what, size_t *len_out, esp_err *err)
{
    size_t len;
    char *buf = read_file(path, READ_LIST, &len, err);
    if (!buf) return NULL;
    const char *nul = memchr(buf, '\0', len);
    if (nul) {
        size_t line = 1;
        for (const char *p = buf; p < nul; p++) line += *p == '\n';
        esp_fail(err, "%s:%zu: holds a NUL byte (%s is text; a binary or damaged file?)", path, line, what);
        free(buf);
        return NULL;
    }
    if (len_out) *len_out = len;
    return buf;
}
