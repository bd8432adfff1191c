/* The loading thread of core/train/batch_prefetch.h: one batch ahead of the step. */
#include "core/train/batch_prefetch.h"

#include <stdlib.h>
#include <string.h>

#include "core/base/progress.h"

static void *load_main(void *arg)
{
    batch_prefetch *p = arg;
    p->rc = asr_batch_load(&p->b, p->d, p->items, p->n, p->seed, &p->err);
    size_t nf = p->rc == 0 && p->b.feats ? (size_t)p->b.B * p->b.Tmax * (size_t)p->b.D : 0;
    p->in_pinned = nf && p->pinned && nf <= p->pinned_floats;
    if (p->in_pinned) memcpy(p->pinned, p->b.feats, nf * sizeof(float));
    return NULL;
}

void batch_prefetch_start(batch_prefetch *p, asr_data *d, const size_t *items, int n, uint64_t seed, size_t key,
                          float *pinned, size_t pinned_floats)
{
    ESP_CHECK(!p->running && n > 0);
    if ((size_t)n > p->items_cap) {
        p->items = xrealloc(p->items, (size_t)n * sizeof *p->items);
        p->items_cap = (size_t)n;
    }
    memcpy(p->items, items, (size_t)n * sizeof *items);
    p->d = d, p->n = n, p->seed = seed, p->key = key, p->pinned = pinned, p->pinned_floats = pinned_floats;
    p->rc = 0, p->in_pinned = 0;
    memset(&p->b, 0, sizeof p->b);
    int e = pthread_create(&p->th, NULL, load_main, p);
    if (e != 0) esp_die("train: cannot start the batch loading thread: %s", strerror(e));
    p->running = 1;
}

static void join(batch_prefetch *p)
{
    double t0 = now_seconds();
    int e = pthread_join(p->th, NULL);
    ESP_CHECK(e == 0);
    p->wait_s += now_seconds() - t0;
    p->running = 0;
}

int batch_prefetch_take(batch_prefetch *p, size_t key, asr_batch *b, int *in_pinned, esp_err *err)
{
    if (!p->running) return 0;
    join(p);
    if (p->key != key) {
        if (p->rc == 0) asr_batch_free(&p->b);
        return 0;
    }
    if (p->rc != 0) {
        *err = p->err;
        return -1;
    }
    *b = p->b;
    *in_pinned = p->in_pinned;
    memset(&p->b, 0, sizeof p->b);
    return 1;
}

void batch_prefetch_close(batch_prefetch *p)
{
    if (p->running) {
        join(p);
        if (p->rc == 0) asr_batch_free(&p->b);
    }
    free(p->items);
    p->items = NULL, p->items_cap = 0;
}
