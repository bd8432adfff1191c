/* The embedding lookup (documented in core/compute/ops_decl.h), instantiated by core/compute/ops_f32.c
 * and core/compute/ops_f64.c after core/compute/ops_impl.h (same `real` and OPS_FN); not a header to
 * include elsewhere. */

void OPS_FN(embedding_forward)(real *y, const real *w, const int *ids, int n, int v, int d)
{
    for (int r = 0; r < n; r++) {
        ESP_CHECK(ids[r] >= 0 && ids[r] < v);
        memcpy(y + (size_t)r * d, w + (size_t)ids[r] * d, (size_t)d * sizeof(real));
    }
}

void OPS_FN(embedding_backward)(real *dw, const real *dy, const int *ids, int n, int v, int d)
{
    /* Rows in order: a token that occurs several times adds its gradients in row order. */
    for (int r = 0; r < n; r++) {
        ESP_CHECK(ids[r] >= 0 && ids[r] < v);
        real *restrict g = dw + (size_t)ids[r] * d;
        const real *restrict s = dy + (size_t)r * d;
#pragma omp simd
        for (int i = 0; i < d; i++) g[i] += s[i];
    }
}
