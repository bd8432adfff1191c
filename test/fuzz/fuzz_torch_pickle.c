/* libFuzzer target for the strict pickle interpreter of PyTorch checkpoints
 * (core/formats/torch_pickle.h): bytes -> pt_pickle_state_dict and pt_pickle_tree (the whole
 * pickle as named leaves, fit.ckpt_path's reading). Every error is one line naming the input; every
 * view either accepts lies inside its storage's declared size; the tree's names stay bounded. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/formats/torch_pickle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Every view lies inside its storage's declared size. */
static void check_views(const pt_views *v)
{
    for (size_t i = 0; i < v->n; i++) {
        const pt_view *t = &v->v[i];
        if (t->ndim < 0 || t->ndim > PT_MAX_DIMS || t->offset < 0) abort();
        int64_t last = t->offset, empty = 0;
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] < 0 || t->stride[d] < 0) abort();
            empty |= t->shape[d] == 0;
            last += (t->shape[d] ? t->shape[d] - 1 : 0) * t->stride[d];
        }
        if (!empty && last >= t->storage_numel) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pt_views v;
    esp_err err;
    if (pt_pickle_state_dict(data, size, "data.pkl", &v, &err) != 0) {
        if (!strstr(err.msg, "data.pkl") || strchr(err.msg, '\n')) abort();
    } else {
        check_views(&v);
        pt_views_free(&v);
    }
    /* the whole tree (fit.ckpt_path's reading of a Lightning checkpoint): named leaves, bounded */
    pt_scalars sc;
    if (pt_pickle_tree(data, size, "data.pkl", &v, &sc, &err) != 0) {
        if (!strstr(err.msg, "data.pkl") || strchr(err.msg, '\n')) abort();
        return 0;
    }
    check_views(&v);
    for (size_t i = 0; i < v.n; i++)
        if (strlen(v.v[i].name) >= PT_TREE_MAX_PATH) abort();
    for (size_t i = 0; i < sc.n; i++)
        if (strlen(sc.v[i].name) >= PT_TREE_MAX_PATH || pt_scalar_get(&sc, sc.v[i].name) == NULL) abort();
    pt_views_free(&v);
    pt_scalars_free(&sc);
    return 0;
}
