/* libFuzzer target for the PyTorch checkpoint reader (.pth / .ckpt: torch.save's zip with a pickle,
 * core/formats/torch_zip.h): bytes -> pt_read_mem. Every error names the input; a file it accepts
 * comes back the same through pt_write + pt_read (the writer's own files are read bit for bit).
 * fuzz_torch_pickle fuzzes the pickle interpreter alone, which a zip's CRCs mostly hide from this. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/formats/torch_zip.h"
#include "test/fuzz/fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_scratch("torch");
    return 0;
}

static volatile uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    st_file f;
    esp_err err;
    if (pt_read_mem(data, size, "model.pth", &f, &err) != 0) {
        if (!strstr(err.msg, "model.pth") || strchr(err.msg, '\n')) abort(); /* one line naming the file */
        return 0;
    }
    uint64_t sum = 0;
    for (size_t i = 0; i < f.n; i++) {
        const st_tensor *t = &f.tensors[i];
        if (t->dtype != ST_F32 && t->dtype != ST_I64) abort();
        const unsigned char *b = t->data;
        for (size_t k = 0; k < st_nbytes(t); k++) sum += b[k];
    }
    sink += sum;
    const char *again = fuzz_path("again.pth");
    if (pt_write(again, f.tensors, f.n, &err) != 0) abort();
    st_file g;
    if (pt_read(again, &g, &err) != 0 || g.n != f.n) abort();
    for (size_t i = 0; i < f.n; i++) {
        const st_tensor *a = &f.tensors[i], *b = &g.tensors[i];
        if (strcmp(a->name, b->name) || a->dtype != b->dtype || a->ndim != b->ndim) abort();
        if (memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof *a->shape)) abort();
        if (st_nbytes(a) && memcmp(a->data, b->data, st_nbytes(a))) abort();
    }
    st_close(&g);
    st_close(&f);
    return 0;
}
