/* libFuzzer target for the .npz reader (feats_stats.npz): bytes -> npz_read. An accepted file's
 * arrays must hold count elements of their dtype (read through npz_get_doubles) and come back the
 * same through npz_write + npz_read. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/formats/npz.h"
#include "test/fuzz/fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_scratch("npz");
    return 0;
}

static size_t elem_size(npy_dtype t) { return t == NPY_F32 ? 4 : 8; }

static void check_round_trip(const npz_file *f)
{
    esp_err err;
    const char *again = fuzz_path("again.npz");
    if (npz_write(again, f->arrays, f->n, &err) != 0) abort();
    npz_file g;
    if (npz_read(again, &g, &err) != 0) abort();
    if (g.n != f->n) abort();
    for (size_t i = 0; i < f->n; i++) {
        const npy_array *a = &f->arrays[i], *b = &g.arrays[i];
        if (strcmp(a->name, b->name) != 0 || a->dtype != b->dtype || a->ndim != b->ndim || a->count != b->count)
            abort();
        if (memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof *a->shape) != 0) abort();
        if (a->count && memcmp(a->data, b->data, a->count * elem_size(a->dtype)) != 0) abort();
    }
    npz_free(&g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("feats_stats.npz", data, size);
    npz_file f;
    esp_err err;
    if (npz_read(path, &f, &err) != 0) {
        if (!strstr(err.msg, path)) abort(); /* every error names the file */
        return 0;
    }
    for (size_t i = 0; i < f.n; i++) {
        const npy_array *a = &f.arrays[i];
        size_t count = 1;
        for (int d = 0; d < a->ndim; d++) count *= a->shape[d];
        if (count != a->count || a->ndim < 0 || a->ndim > 4) abort();
        double *v;
        size_t n;
        if (npz_get_doubles(&f, path, a->name, &v, &n, &err) != 0 || n != a->count) abort();
        free(v);
    }
    check_round_trip(&f);
    npz_free(&f);
    return 0;
}
