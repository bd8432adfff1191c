/* libFuzzer target for the shape file reader (feats_shape, text_shape.*): bytes ->
 * shape_table_read, as a shape file and as a key-only file. An accepted table finds every uid at
 * its row, and a slice of it by its own keys is the same table. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/formats/shapes.h"
#include "test/fuzz/fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_scratch("shapes");
    return 0;
}

static void check(const shape_table *t, int keys_only)
{
    for (size_t i = 0; i < t->n; i++) {
        if (!t->keys[i][0] || shape_table_find(t, t->keys[i]) != (ptrdiff_t)i) abort();
        if (!keys_only && (t->ndim[i] == 0 || shape_length(t, i) < 0)) abort();
    }
    shape_table s;
    esp_err err;
    if (shape_table_slice(&s, t, t, 0, t->n, &err) != 0 || s.n != t->n) abort();
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(s.keys[i], t->keys[i]) != 0 || (!keys_only && shape_length(&s, i) != shape_length(t, i)))
            abort();
    shape_table_free(&s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("feats_shape", data, size);
    for (int keys_only = 0; keys_only < 2; keys_only++) {
        shape_table t;
        esp_err err;
        if (shape_table_read(&t, path, keys_only, &err) != 0) {
            if (!strstr(err.msg, path)) abort(); /* every error names the file */
            continue;
        }
        check(&t, keys_only);
        shape_table_free(&t);
    }
    return 0;
}
