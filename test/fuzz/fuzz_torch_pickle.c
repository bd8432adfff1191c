/* libFuzzer target for the strict pickle interpreter of PyTorch checkpoints
 * (core/formats/torch_pickle.h): bytes -> pt_pickle_state_dict. Every error is one line naming
 * the input; every view it accepts lies inside its storage's declared size. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/formats/torch_pickle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pt_views v;
    esp_err err;
    if (pt_pickle_state_dict(data, size, "data.pkl", &v, &err) != 0) {
        if (!strstr(err.msg, "data.pkl") || strchr(err.msg, '\n')) abort();
        return 0;
    }
    for (size_t i = 0; i < v.n; i++) {
        const pt_view *t = &v.v[i];
        if (t->ndim < 0 || t->ndim > PT_MAX_DIMS || t->offset < 0) abort();
        int64_t last = t->offset, empty = 0;
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] < 0 || t->stride[d] < 0) abort();
            empty |= t->shape[d] == 0;
            last += (t->shape[d] ? t->shape[d] - 1 : 0) * t->stride[d];
        }
        if (!empty && last >= t->storage_numel) abort();
    }
    pt_views_free(&v);
    return 0;
}
