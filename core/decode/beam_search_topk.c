/* Top-k by a bounded min-heap (the worst kept entry at the root); see beam_search_topk.h. */
#include "core/decode/beam_search_topk.h"

#include <math.h>

#include "core/base/log.h"

/* 1 when index a ranks before index b: higher score, then lower index; NaN is lowest. */
static int before(const double *v, int a, int b)
{
    double x = isnan(v[a]) ? -INFINITY : v[a], y = isnan(v[b]) ? -INFINITY : v[b];
    if (x != y) return x > y;
    if (isnan(v[a]) != isnan(v[b])) return !isnan(v[a]);
    return a < b;
}

/* Restores the heap below slot i (heap[0] the entry every other ranks before). */
static void sift_down(const double *v, int *heap, int n, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && before(v, heap[w], heap[l])) w = l;
        if (r < n && before(v, heap[w], heap[r])) w = r;
        if (w == i) return;
        int t = heap[i];
        heap[i] = heap[w], heap[w] = t;
        i = w;
    }
}

void bs_topk(const double *v, int n, int k, int *out)
{
    ESP_CHECK(k >= 0 && k <= n);
    if (k == 0) return;
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m < k) {
            /* Sift up. */
            int j = m++;
            out[j] = i;
            while (j > 0 && before(v, out[(j - 1) / 2], out[j])) {
                int p = (j - 1) / 2, t = out[p];
                out[p] = out[j], out[j] = t;
                j = p;
            }
        } else if (before(v, i, out[0])) {
            out[0] = i;
            sift_down(v, out, k, 0);
        }
    }
    /* Heap sort in place: the worst goes last. */
    for (int end = k - 1; end > 0; end--) {
        int t = out[0];
        out[0] = out[end], out[end] = t;
        sift_down(v, out, end, 0);
    }
}
