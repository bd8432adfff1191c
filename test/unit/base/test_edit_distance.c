/* Levenshtein distance (core/base/edit_distance.h) on hand-computed cases, over int symbols (what
 * validation CER/WER use) and over string bytes (what suggestions use): both must give the same. */
#include <criterion/criterion.h>
#include <string.h>

#include "core/base/edit_distance.h"

static const struct {
    const char *a, *b;
    size_t d;
} cases[] = {
    {"kitten", "sitting", 3}, {"sitting", "kitten", 3}, {"", "abc", 3},          {"abc", "", 3},
    {"", "", 0},              {"flaw", "lawn", 2},      {"abcdef", "abcdef", 0}, {"abc", "cab", 2},
    {"intention", "execution", 5}, {"max_epoch", "max_epochs", 1},
    /* Bytes, not characters: é is two bytes, both differ from e's one; é and è share the first. */
    {"caf\xc3\xa9", "cafe", 2}, {"\xc3\xa9", "\xc3\xa8", 1},
};

Test(edit_distance, symbols_and_strings_hand_computed)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *a = cases[i].a, *b = cases[i].b;
        int x[64], y[64];
        size_t na = strlen(a), nb = strlen(b);
        for (size_t k = 0; k < na; k++) x[k] = (unsigned char)a[k];
        for (size_t k = 0; k < nb; k++) y[k] = (unsigned char)b[k];
        cr_expect_eq(edit_distance(x, na, y, nb), cases[i].d, "'%s' '%s'", a, b);
        cr_expect_eq(str_edit_distance(a, b), (int)cases[i].d, "'%s' '%s'", a, b);
    }
}
