/* libFuzzer target for the safetensors reader (model.safetensors, averaged models, trainer state
 * tensors): bytes -> st_read. A file it accepts must keep every tensor inside the mapping (or an
 * aligned copy), aligned, without overlap, and must come back the same through st_write + st_read. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/formats/safetensors.h"
#include "test/fuzz/fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_scratch("safetensors");
    return 0;
}

static int owned(const st_file *f, const void *p)
{
    for (size_t i = 0; i < f->n_owned; i++)
        if (f->owned[i] == p) return 1;
    return 0;
}

static volatile uint64_t sink;

/* Every tensor's bytes lie in the file after the header, or in a copy; sorted, they tile. */
static void check_layout(const st_file *f)
{
    const unsigned char *lo = f->map, *hi = lo + f->map_len;
    uint64_t sum = 0;
    for (size_t i = 0; i < f->n; i++) {
        const st_tensor *t = &f->tensors[i];
        size_t nb = st_nbytes(t);
        if (t->ndim < 0 || t->ndim > ST_MAX_DIMS || (unsigned)t->dtype >= ST_NDTYPES) abort();
        if ((uintptr_t)t->data % st_dtype_size(t->dtype) != 0 && nb) abort();
        if (!owned(f, t->data) && ((const unsigned char *)t->data < lo || (const unsigned char *)t->data + nb > hi))
            abort();
        const unsigned char *b = t->data;
        for (size_t k = 0; k < nb; k++) sum += b[k]; /* ASan sees reads of the copies */
        if (st_get(f, t->name) != t) abort();       /* names are unique */
    }
    sink += sum;
}

static void check_round_trip(const st_file *f)
{
    esp_err err;
    const char *again = fuzz_path("again.safetensors");
    if (st_write(again, f->tensors, f->n, f->meta, f->n_meta, &err) != 0) abort();
    st_file g;
    if (st_read(again, &g, &err) != 0) abort();
    if (g.n != f->n || g.n_meta != f->n_meta) abort();
    for (size_t i = 0; i < f->n; i++) {
        const st_tensor *a = &f->tensors[i], *b = st_get(&g, a->name);
        if (!b || b->dtype != a->dtype || b->ndim != a->ndim) abort();
        if (memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof *a->shape) != 0) abort();
        if (st_nbytes(a) && memcmp(a->data, b->data, st_nbytes(a)) != 0) abort();
    }
    for (size_t i = 0; i < f->n_meta; i++) {
        const char *v = st_meta_get(&g, f->meta[i].key);
        if (!v || strcmp(v, f->meta[i].value) != 0) abort();
    }
    st_close(&g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("model.safetensors", data, size);
    st_file f;
    esp_err err;
    if (st_read(path, &f, &err) != 0) {
        if (!strstr(err.msg, path)) abort(); /* every error names the file */
        return 0;
    }
    check_layout(&f);
    if (f.n) {
        const float *v;
        st_get_f32(&f, f.tensors[0].name, f.tensors[0].ndim, f.tensors[0].shape, &v, &err);
    }
    check_round_trip(&f);
    st_close(&f);
    return 0;
}
