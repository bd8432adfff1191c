/* rir_scp / noise_scp lists (core/data/noise_rir.h): "<id> <path>" or "<path>" per line, as
 * ESPnet2's CommonPreprocessor reads them (line.strip().split(None, 1); the path is the rest). */
#include "core/data/noise_rir.h"

#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"

#define NR_MAX_FILES 100000

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

int nr_scp_read(const char *scp, char ***paths, size_t *n, esp_err *err)
{
    *paths = NULL;
    *n = 0;
    size_t len = 0;
    char *text = read_file(scp, READ_LIST, &len, err);
    if (!text) return -1;
    int rc = 0;
    if (strlen(text) != len) rc = esp_fail(err, "%s: holds a NUL byte (not a text list of audio files)", scp);
    size_t line_no = 0;
    for (char *line = text, *next; rc == 0 && line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        line_no++;
        char *s = line;
        while (is_space(*s)) s++;
        size_t l = strlen(s);
        while (l && is_space(s[l - 1])) s[--l] = '\0';
        if (!*s) continue;
        char *file = s;
        for (char *p = s; *p; p++)
            if (is_space(*p)) { /* "<id> <path>": the path is what follows the id's whitespace */
                file = p;
                while (is_space(*file)) file++;
                break;
            }
        if (*n >= NR_MAX_FILES) {
            rc = esp_fail(err, "%s:%zu: more than %d entries", scp, line_no, NR_MAX_FILES);
            break;
        }
        *paths = xrealloc(*paths, (*n + 1) * sizeof **paths);
        (*paths)[(*n)++] = xstrdup(file);
    }
    free(text);
    if (rc == 0 && *n == 0) rc = esp_fail(err, "%s: lists no audio files", scp);
    if (rc != 0) {
        nr_scp_free(*paths, *n);
        *paths = NULL;
        *n = 0;
    }
    return rc;
}

void nr_scp_free(char **paths, size_t n)
{
    for (size_t i = 0; i < n; i++) free(paths[i]);
    free(paths);
}
