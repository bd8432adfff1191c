#include "core/train/trainer_internal.h"

/* A device buffer of at least `bytes` (grown; zero-filled when new). */
static float *staging(trainer *t, size_t bytes)
{
    size_t n = (bytes + sizeof(float) - 1) / sizeof(float);
    if (n > t->scratch_cap) {
        t->be->free(t->be, t->dev_scratch);
        t->dev_scratch = t->be->alloc(t->be, n * sizeof(float));
        t->scratch_cap = n;
    }
    return t->dev_scratch;
}

static void to_dev(trainer *t, float *dev, const void *host, size_t bytes)
{
    t->be->copy(t->be, dev, host, bytes, BACKEND_HOST_TO_DEVICE);
}

static void to_host(trainer *t, void *host, const float *dev, size_t bytes)
{
    t->be->synchronize(t->be);
    t->be->copy(t->be, host, dev, bytes, BACKEND_DEVICE_TO_HOST);
}

/* buf holds world equal chunks of bytes / world; chunk `rank` is this rank's. */
int host_all_gather(trainer *t, void *buf, size_t bytes, esp_err *err)
{
    ESP_CHECK(bytes % ((size_t)t->world * sizeof(float)) == 0);
    float *d = staging(t, bytes);
    to_dev(t, d, buf, bytes);
    if (comm_all_gather(t->dist.comm, d, bytes / sizeof(float), err) != 0) return -1;
    to_host(t, buf, d, bytes);
    return 0;
}

int host_all_reduce(trainer *t, float *buf, size_t n, comm_op op, esp_err *err)
{
    float *d = staging(t, n * sizeof(float));
    to_dev(t, d, buf, n * sizeof(float));
    if (comm_all_reduce(t->dist.comm, d, n, op, err) != 0) return -1;
    to_host(t, buf, d, n * sizeof(float));
    return 0;
}

int host_broadcast(trainer *t, void *buf, size_t bytes, esp_err *err)
{
    float *d = staging(t, bytes);
    to_dev(t, d, buf, bytes);
    if (comm_broadcast(t->dist.comm, d, bytes, 0, err) != 0) return -1;
    to_host(t, buf, d, bytes);
    return 0;
}

void bn_all_reduce(void *ctx, float *host, size_t n)
{
    trainer *t = ctx;
    esp_err err;
    if (host_all_reduce(t, host, n, COMM_SUM, &err) != 0) esp_die_err(&err);
}
