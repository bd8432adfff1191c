#include "core/train/grad_buckets.h"

#include <stdlib.h>
#include <string.h>

size_t grad_bucket_floats(size_t n)
{
    size_t lo = (size_t)1 << 12, hi = (size_t)4 << 20, b = n / 8;
    return b < lo ? lo : b > hi ? hi : b;
}

void grad_buckets_init(grad_buckets *b, size_t n, size_t size)
{
    memset(b, 0, sizeof *b);
    ESP_CHECK(size > 0);
    b->n = n, b->size = size;
    b->nb = (n + size - 1) / size;
    b->ready = xcalloc(b->nb ? b->nb : 1, sizeof *b->ready);
}

void grad_buckets_free(grad_buckets *b)
{
    free(b->ready);
    b->ready = NULL;
}

static size_t bucket_len(const grad_buckets *b, size_t i)
{
    size_t off = i * b->size;
    return b->n - off < b->size ? b->n - off : b->size;
}

/* Starts the next bucket in the fixed order; 0 when started, -1 on failure. */
static int start_next(grad_buckets *b, esp_err *err)
{
    size_t i = b->nb - 1 - b->started++;
    return comm_all_reduce_start(b->c, b->g + i * b->size, bucket_len(b, i), COMM_AVG, err);
}

void grad_buckets_arm(grad_buckets *b, comm *c, float *g)
{
    b->c = c, b->g = g;
    memset(b->ready, 0, (b->nb ? b->nb : 1) * sizeof *b->ready);
    b->started = 0, b->armed = 1, b->failed = 0;
}

void grad_buckets_final(void *ctx, size_t lo, size_t hi)
{
    grad_buckets *b = ctx;
    if (!b->armed || b->failed) return;
    ESP_CHECK(lo <= hi && hi <= b->n);
    for (size_t i = lo / b->size; lo < hi; i++) {
        size_t end = (i + 1) * b->size < hi ? (i + 1) * b->size : hi;
        b->ready[i] += end - lo;
        ESP_CHECK(b->ready[i] <= bucket_len(b, i)); /* a range reported twice */
        lo = end;
    }
    while (b->started < b->nb) {
        size_t next = b->nb - 1 - b->started;
        if (b->ready[next] < bucket_len(b, next)) break;
        if (start_next(b, &b->err) != 0) {
            b->failed = 1;
            return;
        }
    }
}

int grad_buckets_finish(grad_buckets *b, esp_err *err)
{
    ESP_CHECK(b->armed);
    b->armed = 0;
    if (b->failed) {
        *err = b->err;
        return -1;
    }
    while (b->started < b->nb)
        if (start_next(b, err) != 0) return -1;
    return comm_wait(b->c, err);
}
