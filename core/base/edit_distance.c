/* Levenshtein distance (see edit_distance.h). */
#include "core/base/edit_distance.h"

#include <stdlib.h>
#include <string.h>

#include "core/base/log.h"

size_t edit_distance(const int *a, size_t na, const int *b, size_t nb)
{
    /* One row of the DP table: row[j] = distance between a[:i] and b[:j]. */
    size_t *row = xmalloc((nb + 1) * sizeof *row);
    for (size_t j = 0; j <= nb; j++) row[j] = j;
    for (size_t i = 1; i <= na; i++) {
        size_t diag = row[0];  /* d(i-1, j-1) */
        row[0] = i;
        for (size_t j = 1; j <= nb; j++) {
            size_t up = row[j];  /* d(i-1, j) */
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    size_t d = row[nb];
    free(row);
    return d;
}

/* Bytes widened to ints, so the one DP above serves strings too (keys and options are short). */
static int *bytes_as_ints(const char *s, size_t n)
{
    int *v = xmalloc((n ? n : 1) * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = (unsigned char)s[i];
    return v;
}

int str_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    int *x = bytes_as_ints(a, la), *y = bytes_as_ints(b, lb);
    size_t d = edit_distance(x, la, y, lb);
    free(x);
    free(y);
    return (int)d;
}
