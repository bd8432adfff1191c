/* Collectives between the ranks of a run, on float buffers (and bytes for broadcast). One
 * interface, several implementations: comm_cpu.c (host buffers: shared memory inside a node, TCP
 * between nodes) and, in a CUDA build, cuda/comm_nccl.cu (device buffers of the CUDA backend).
 *
 * Sharded collectives split n elements into world_size contiguous chunks, chunk r =
 * [r * n / W, (r + 1) * n / W) (comm_chunk): reduce_scatter leaves the reduced chunk r on rank r,
 * all_gather sends chunk r of rank r to everyone. all_reduce = reduce_scatter + all_gather, so
 * every rank ends with the same bits. A peer that dies, or sends nothing for `timeout` seconds,
 * fails the call with an error naming that rank. */
#ifndef ESPNET3_COMM_H
#define ESPNET3_COMM_H

#include <stddef.h>
#include "core/base/log.h"

typedef enum comm_op { COMM_SUM, COMM_AVG, COMM_MIN, COMM_MAX } comm_op;

typedef struct comm comm;

typedef struct comm_vtbl {
    int (*all_reduce)(comm *c, float *buf, size_t n, comm_op op, esp_err *err);
    int (*reduce_scatter)(comm *c, float *buf, size_t n, comm_op op, esp_err *err);
    int (*all_gather)(comm *c, float *buf, size_t n, esp_err *err);
    int (*broadcast)(comm *c, void *buf, size_t bytes, int root, esp_err *err);
    int (*barrier)(comm *c, esp_err *err);
    void (*destroy)(comm *c);
    /* Optional (NULL: the synchronous all_reduce, and nothing to wait for). all_reduce_start
     * begins an all-reduce of buf, which the caller leaves alone until the next wait; wait returns
     * when every started all-reduce has finished (or fails as all_reduce does). */
    int (*all_reduce_start)(comm *c, float *buf, size_t n, comm_op op, esp_err *err);
    int (*wait)(comm *c, esp_err *err);
    /* Optional: the backend whose buffers this comm reduces (a `backend *`; core/dist does not
     * see core/compute), so a device comm orders its collectives after that backend's work;
     * NULL detaches (call it before that backend closes). */
    void (*attach)(comm *c, void *backend);
} comm_vtbl;

/* The kinds of comm: host buffers (shared memory and TCP; the CPU backend's) or NCCL (a CUDA
 * backend's device buffers). The trainer derives it from its backend_kind. */
typedef enum comm_kind { COMM_KIND_CPU, COMM_KIND_NCCL } comm_kind;

struct comm {
    const comm_vtbl *v;
    int rank, world;
    const char *name; /* "cpu", "nccl" */
};

/* Chunk r of n elements across world ranks. */
static inline void comm_chunk(size_t n, int world, int rank, size_t *begin, size_t *end)
{
    *begin = (size_t)rank * n / (size_t)world;
    *end = (size_t)(rank + 1) * n / (size_t)world;
}

static inline int comm_all_reduce(comm *c, float *buf, size_t n, comm_op op, esp_err *err)
{
    return c->v->all_reduce(c, buf, n, op, err);
}
/* In place: on return buf's chunk `rank` holds the reduction of every rank's chunk `rank`; the
 * rest of buf is scratch. */
static inline int comm_reduce_scatter(comm *c, float *buf, size_t n, comm_op op, esp_err *err)
{
    return c->v->reduce_scatter(c, buf, n, op, err);
}
/* In place: every rank's chunk `rank` of buf is copied into the same chunk on every rank. */
static inline int comm_all_gather(comm *c, float *buf, size_t n, esp_err *err)
{
    return c->v->all_gather(c, buf, n, err);
}
static inline int comm_broadcast(comm *c, void *buf, size_t bytes, int root, esp_err *err)
{
    return c->v->broadcast(c, buf, bytes, root, err);
}
static inline int comm_barrier(comm *c, esp_err *err) { return c->v->barrier(c, err); }
/* Asynchronous all-reduce (gradient buckets overlapped with the backward pass): start each buffer
 * when its values are final, wait once before they are read. A comm without an asynchronous
 * path (the CPU comm) reduces in comm_all_reduce_start itself; the result is the same bits. */
static inline int comm_all_reduce_start(comm *c, float *buf, size_t n, comm_op op, esp_err *err)
{
    return c->v->all_reduce_start ? c->v->all_reduce_start(c, buf, n, op, err) : c->v->all_reduce(c, buf, n, op, err);
}
static inline int comm_wait(comm *c, esp_err *err) { return c->v->wait ? c->v->wait(c, err) : 0; }
static inline void comm_attach(comm *c, void *backend)
{
    if (c && c->v->attach) c->v->attach(c, backend);
}
static inline void comm_destroy(comm *c)
{
    if (c) c->v->destroy(c);
}

struct dist_store;
/* The CPU implementation. Ranks with the same node_key share memory; the others talk TCP. Uses
 * the store to exchange addresses (keys under "comm/"). */
comm *comm_cpu_create(struct dist_store *store, int rank, int world, const char *node_key, const char *run_id,
                      double timeout_s, esp_err *err);

#endif
