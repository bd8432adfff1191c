// The token embedding (core/compute/ops_decl.h): y[r] = w[ids[r]], and its backward, which adds
// dy[r] into dw[ids[r]] in row order. The ids are on the host, so the backward groups them there
// (a stable counting sort by id: for each distinct id, the rows that hold it, in row order) and
// one thread owns each element of each touched row of dw, adding its rows' gradients in row order:
// no atomics, and every element gets the CPU's additions in the CPU's order, so the result has
// the CPU's bits (a float add is one IEEE operation on both).
#include <stdlib.h>

#include "cuda/cuda_common.cuh"

static __global__ void embedding_forward_kernel(float *y, const float *w, const int *ids, size_t total, int d)
{
    CU_GRID_STRIDE(o, total)
    {
        size_t r = o / d, i = o % d;
        y[o] = w[(size_t)ids[r] * d + i];
    }
}

// Element (u, i): column i of the u-th distinct id tok[u], whose rows are rows[start[u]] ..
// rows[start[u + 1] - 1] in increasing order.
static __global__ void embedding_backward_kernel(float *dw, const float *dy, const int *tok, const int *start,
                                                 const int *rows, size_t total, int d)
{
    CU_GRID_STRIDE(o, total)
    {
        size_t u = o / d, i = o % d;
        float *g = dw + (size_t)tok[u] * d + i;
        float acc = *g;
        for (int k = start[u]; k < start[u + 1]; k++) acc += dy[(size_t)rows[k] * d + i];
        *g = acc;
    }
}

// Checks the ids as the CPU does (each in [0, v)).
static void check_ids(const int *ids, int n, int v)
{
    for (int r = 0; r < n; r++) ESP_CHECK(ids[r] >= 0 && ids[r] < v);
}

void cu_embedding_forward(backend *be, float *y, const float *w, const int *ids, int n, int v, int d)
{
    if (n <= 0 || d <= 0) return;
    check_ids(ids, n, v);
    cu_grow(be, &cu_of(be)->ints, (size_t)n * sizeof(int));
    const int *dids = cu_upload_ints(be, ids, (size_t)n, 0);
    size_t total = (size_t)n * d;
    embedding_forward_kernel<<<cu_blocks(be, total), CU_THREADS, 0, cu_stream(be)>>>(y, w, dids, total, d);
    KERNEL_CHECK();
}

void cu_embedding_backward(backend *be, float *dw, const float *dy, const int *ids, int n, int v, int d)
{
    if (n <= 0 || d <= 0) return;
    check_ids(ids, n, v);
    // Host layout, uploaded as one array: tok[U], start[U + 1], rows[n]. first[id]: the position of
    // id among the distinct ids in order of first occurrence, -1 before it occurs.
    int *first = (int *)xmalloc((size_t)v * sizeof(int));
    int *h = (int *)xmalloc((2 * (size_t)n + 1 + (size_t)n) * sizeof(int));
    int *cnt = (int *)xcalloc((size_t)n + 1, sizeof(int));
    for (int i = 0; i < v; i++) first[i] = -1;
    int U = 0;
    for (int r = 0; r < n; r++) {
        int *f = &first[ids[r]];
        if (*f < 0) *f = U, h[U++] = ids[r];
        cnt[*f]++;
    }
    int *tok = h, *start = h + U, *rows = start + U + 1;
    start[0] = 0;
    for (int u = 0; u < U; u++) start[u + 1] = start[u] + cnt[u], cnt[u] = start[u];
    for (int r = 0; r < n; r++) rows[cnt[first[ids[r]]]++] = r; // stable: rows stay in order
    size_t len = 2 * (size_t)U + 1 + (size_t)n;
    cu_grow(be, &cu_of(be)->ints, len * sizeof(int));
    const int *dtok = cu_upload_ints(be, tok, len, 0); // staged before it returns: h may go
    free(first);
    free(h);
    free(cnt);
    size_t total = (size_t)U * d;
    embedding_backward_kernel<<<cu_blocks(be, total), CU_THREADS, 0, cu_stream(be)>>>(
        dw, dy, dtok, dtok + U, dtok + 2 * U + 1, total, d);
    KERNEL_CHECK();
}
