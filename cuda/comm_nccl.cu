// The NCCL comm (dist_join(..., "nccl", ...)): the collectives of core/dist/comm.h on device
// buffers of the CUDA backend, on the comm's own stream.
//
// Setup: cudaSetDevice(the rank's GPU: dist_local_device, the backend's too), rank 0's ncclGetUniqueId published through the run's store
// (store_share_blob; every other rank waits for it there), then a non-blocking
// ncclCommInitRankConfig, polled like every collective below. Ordering with the backend: a
// collective first makes the comm's stream wait for an event recorded on the attached backend's
// stream (comm_attach; without one, for the whole device), so it reads finished values.
// Synchronous collectives return when their result is in place; all_reduce_start only enqueues
// (gradient buckets overlap the rest of the backward pass) and wait returns when all of them are
// done. Every wait polls: NCCL's asynchronous error, the store's liveness (store_dead_rank: a rank
// whose process ended) and the run's timeout; on any of them the communicator is aborted
// (ncclCommAbort) and the call fails naming the cause, as the CPU comm fails on a dead peer.
// Every NCCL call is checked with file:line, ncclGetErrorString and ncclGetLastError; CUDA calls
// with CUDA_CHECK (cuda/cuda_common.cuh).
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/cuda_common.cuh"

extern "C" {
#include "core/base/progress.h"
#include "core/dist/comm.h"
#include "core/dist/dist_env.h"
#include "core/dist/dist_store.h"
}
#include "core/dist/comm_nccl.h"

static_assert(sizeof(ncclUniqueId) == COMM_NCCL_ID_BYTES, "NCCL's unique id is 128 opaque bytes");

typedef struct nccl_comm {
    comm base;
    ncclComm_t nc;
    int live;               // nc exists and was not aborted
    int device;
    cudaStream_t stream;    // the comm's own stream
    cudaStream_t compute;   // the attached backend's stream; NULL: wait for the whole device
    cudaEvent_t ready, done;
    dist_store *store;
    double timeout;
    int pending;            // all-reduces started since the last wait
    int closing;            // in destroy: the store's liveness no longer says anything
    float *one;             // a float of device memory for the barrier
} nccl_comm;

static nccl_comm *nc_of(comm *c)
{
    return (nccl_comm *)c;
}

static void abort_comm(nccl_comm *c)
{
    if (!c->live) return;
    c->live = 0;
    ncclResult_t r = ncclCommAbort(c->nc);
    if (r != ncclSuccess) log_warn("comm nccl: ncclCommAbort: %s", ncclGetErrorString(r));
}

// A failed NCCL call: file:line, the call, NCCL's error string and its last error text; the
// communicator is aborted (a failed collective leaves it unusable).
static int nccl_fail(nccl_comm *c, const char *file, int line, const char *call, ncclResult_t r, esp_err *err)
{
    const char *last = c && c->live ? ncclGetLastError(c->nc) : ncclGetLastError(NULL);
    esp_fail(err, "%s:%d: %s: %s (%s)", file, line, call, ncclGetErrorString(r), last && *last ? last : "no detail");
    if (c) abort_comm(c);
    return -1;
}

static double poll_nap(double waited)
{
    struct timespec ts = {0, waited < 0.01 ? 20000L : 1000000L};
    nanosleep(&ts, NULL);
    return waited;
}

// Waits until `ev` has completed (ev NULL: until the communicator's pending operation, a
// non-blocking init or group, is through). Fails on NCCL's asynchronous error, a rank whose store
// connection ended (unless c->closing: at the end of a run the ranks leave the store one by one),
// or the timeout; each of them aborts the communicator.
static int settle(nccl_comm *c, cudaEvent_t ev, const char *what, esp_err *err)
{
    double t0 = now_seconds(), last_check = t0;
    for (;;) {
        ncclResult_t ae = ncclSuccess;
        ncclResult_t r = ncclCommGetAsyncError(c->nc, &ae);
        if (r != ncclSuccess) return nccl_fail(c, __FILE__, __LINE__, "ncclCommGetAsyncError", r, err);
        if (ae != ncclSuccess && ae != ncclInProgress) {
            char call[128];
            snprintf(call, sizeof call, "%s (asynchronous error)", what);
            return nccl_fail(c, __FILE__, __LINE__, call, ae, err);
        }
        if (ae == ncclSuccess) {
            if (!ev) return 0;
            cudaError_t q = cudaEventQuery(ev);
            if (q == cudaSuccess) return 0;
            if (q != cudaErrorNotReady) CUDA_CHECK(q);
        }
        double now = now_seconds();
        if (!c->closing && now - last_check > 0.1) {
            last_check = now;
            int dead = -1;
            esp_err e2;
            if (store_dead_rank(c->store, &dead, &e2) != 0) {
                abort_comm(c);
                return esp_fail(err, "comm nccl: %s: rank 0's store is gone (rank 0 died?): %s", what, e2.msg);
            }
            if (dead >= 0 && dead != c->base.rank) {
                abort_comm(c);
                return esp_fail(err, "comm nccl: rank %d died during %s (its store connection ended); aborted the "
                                     "communicator", dead, what);
            }
        }
        if (now - t0 > c->timeout) {
            abort_comm(c);
            return esp_fail(err, "comm nccl: %s did not finish within %.0f s (a rank hung or died? "
                                 "trainer.dist_timeout sets the limit); aborted the communicator", what, c->timeout);
        }
        poll_nap(now - t0);
    }
}

// One NCCL call: a hard error fails; ncclInProgress (the communicator is non-blocking) is waited
// for before the next call.
#define NCCL_TRY(c, call, err)                                                                \
    do {                                                                                      \
        ncclResult_t nc_r_ = (call);                                                          \
        if (nc_r_ == ncclInProgress) {                                                        \
            if (settle((c), NULL, #call, (err)) != 0) return -1;                              \
        } else if (nc_r_ != ncclSuccess) {                                                    \
            return nccl_fail((c), __FILE__, __LINE__, #call, nc_r_, (err));                   \
        }                                                                                     \
    } while (0)

static int usable(nccl_comm *c, esp_err *err)
{
    return c->live ? 0 : esp_fail(err, "comm nccl: the communicator was aborted after an earlier failure");
}

// The comm's stream waits for what the backend has enqueued (the values to reduce).
static void after_compute(nccl_comm *c)
{
    if (c->compute) {
        CUDA_CHECK(cudaEventRecord(c->ready, c->compute));
        CUDA_CHECK(cudaStreamWaitEvent(c->stream, c->ready, 0));
    } else {
        CUDA_CHECK(cudaDeviceSynchronize());
    }
}

// Waits (with the checks of settle) for everything enqueued on the comm's stream.
static int finish(nccl_comm *c, const char *what, esp_err *err)
{
    CUDA_CHECK(cudaEventRecord(c->done, c->stream));
    if (settle(c, c->done, what, err) != 0) return -1;
    // The backend's later work is ordered after the collective (the host wait already is).
    if (c->compute) CUDA_CHECK(cudaStreamWaitEvent(c->compute, c->done, 0));
    return 0;
}

static ncclRedOp_t red_op(comm_op op)
{
    switch (op) {
    case COMM_SUM: return ncclSum;
    case COMM_AVG: return ncclAvg;
    case COMM_MIN: return ncclMin;
    case COMM_MAX: return ncclMax;
    }
    ESP_CHECK(!"unknown comm_op");
    return ncclSum;
}

static int enqueue_all_reduce(nccl_comm *c, float *buf, size_t n, comm_op op, esp_err *err)
{
    NCCL_TRY(c, ncclAllReduce(buf, buf, n, ncclFloat, red_op(op), c->nc, c->stream), err);
    return 0;
}

static int nc_all_reduce(comm *cc, float *buf, size_t n, comm_op op, esp_err *err)
{
    nccl_comm *c = nc_of(cc);
    if (usable(c, err) != 0) return -1;
    after_compute(c);
    if (enqueue_all_reduce(c, buf, n, op, err) != 0) return -1;
    return finish(c, "all_reduce", err);
}

static int nc_all_reduce_start(comm *cc, float *buf, size_t n, comm_op op, esp_err *err)
{
    nccl_comm *c = nc_of(cc);
    if (usable(c, err) != 0) return -1;
    after_compute(c);
    if (enqueue_all_reduce(c, buf, n, op, err) != 0) return -1;
    c->pending++;
    return 0;
}

static int nc_wait(comm *cc, esp_err *err)
{
    nccl_comm *c = nc_of(cc);
    if (!c->pending) return 0;
    if (usable(c, err) != 0) return -1;
    c->pending = 0;
    return finish(c, "all_reduce (gradient buckets)", err);
}

// Chunks of comm_chunk, rank r's chunk r: reduce-scatter (the sum into the owner's chunk) or
// all-gather (each owner's chunk to all), in place. Equal chunks are one ncclReduceScatter /
// ncclAllGather; unequal ones one ncclReduce / ncclBroadcast per rank (root r) in a group.
static int chunked(comm *cc, float *buf, size_t n, int gather, comm_op op, esp_err *err)
{
    nccl_comm *c = nc_of(cc);
    int W = cc->world;
    if (usable(c, err) != 0) return -1;
    after_compute(c);
    if (n % (size_t)W == 0) {
        size_t k = n / (size_t)W;
        float *own = buf + (size_t)cc->rank * k;
        NCCL_TRY(c, gather ? ncclAllGather(own, buf, k, ncclFloat, c->nc, c->stream)
                           : ncclReduceScatter(buf, own, k, ncclFloat, red_op(op), c->nc, c->stream), err);
    } else {
        NCCL_TRY(c, ncclGroupStart(), err);
        for (int r = 0; r < W; r++) {
            size_t b, e;
            comm_chunk(n, W, r, &b, &e);
            NCCL_TRY(c, gather ? ncclBroadcast(buf + b, buf + b, e - b, ncclFloat, r, c->nc, c->stream)
                               : ncclReduce(buf + b, buf + b, e - b, ncclFloat, red_op(op), r, c->nc, c->stream), err);
        }
        NCCL_TRY(c, ncclGroupEnd(), err);
    }
    return finish(c, gather ? "all_gather" : "reduce_scatter", err);
}

static int nc_reduce_scatter(comm *cc, float *buf, size_t n, comm_op op, esp_err *err)
{
    return chunked(cc, buf, n, 0, op, err);
}

static int nc_all_gather(comm *cc, float *buf, size_t n, esp_err *err)
{
    return chunked(cc, buf, n, 1, COMM_SUM, err); /* op unused */
}

static int nc_broadcast(comm *cc, void *buf, size_t bytes, int root, esp_err *err)
{
    nccl_comm *c = nc_of(cc);
    if (usable(c, err) != 0) return -1;
    after_compute(c);
    NCCL_TRY(c, ncclBroadcast(buf, buf, bytes, ncclUint8, root, c->nc, c->stream), err);
    return finish(c, "broadcast", err);
}

static int nc_barrier(comm *cc, esp_err *err)
{
    nccl_comm *c = nc_of(cc);
    if (usable(c, err) != 0) return -1;
    NCCL_TRY(c, ncclAllReduce(c->one, c->one, 1, ncclFloat, ncclSum, c->nc, c->stream), err);
    return finish(c, "barrier", err);
}

static void nc_attach(comm *cc, void *be)
{
    backend *b = (backend *)be; // NULL: detach (before the backend closes)
    ESP_CHECK(!b || b->kind == BACKEND_CUDA); // device buffers of the CUDA backend only
    nc_of(cc)->compute = b ? cu_stream(b) : NULL;
}

static int close_comm(nccl_comm *c, esp_err *err)
{
    c->closing = 1;
    NCCL_TRY(c, ncclCommFinalize(c->nc), err);
    if (settle(c, NULL, "ncclCommFinalize", err) != 0) return -1;
    c->live = 0;
    NCCL_TRY(c, ncclCommDestroy(c->nc), err);
    return 0;
}

static void nc_destroy(comm *cc)
{
    nccl_comm *c = nc_of(cc);
    esp_err e;
    if (c->live && close_comm(c, &e) != 0) log_warn("comm nccl: closing: %s", e.msg);
    if (c->one) CUDA_CHECK(cudaFree(c->one));
    if (c->ready) CUDA_CHECK(cudaEventDestroy(c->ready));
    if (c->done) CUDA_CHECK(cudaEventDestroy(c->done));
    if (c->stream) CUDA_CHECK(cudaStreamDestroy(c->stream));
    free(c);
}

static const comm_vtbl nccl_vtbl = {
    nc_all_reduce, nc_reduce_scatter, nc_all_gather, nc_broadcast, nc_barrier, nc_destroy,
    nc_all_reduce_start, nc_wait, nc_attach,
};

// Rank 0's part of the unique-id exchange (store_share_blob calls it).
static int make_unique_id(void *blob, size_t n, void *ctx, esp_err *err)
{
    (void)ctx;
    ESP_CHECK(n == sizeof(ncclUniqueId));
    ncclResult_t r = ncclGetUniqueId((ncclUniqueId *)blob);
    if (r != ncclSuccess) return nccl_fail(NULL, __FILE__, __LINE__, "ncclGetUniqueId", r, err);
    return 0;
}

static int init_comm(nccl_comm *c, int world, const ncclUniqueId &id, esp_err *err)
{
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0; // so a rank that never arrives ends the wait after the timeout
    ncclResult_t r = ncclCommInitRankConfig(&c->nc, world, id, c->base.rank, &cfg);
    if (r != ncclSuccess && r != ncclInProgress)
        return nccl_fail(NULL, __FILE__, __LINE__, "ncclCommInitRankConfig", r, err);
    c->live = 1;
    return settle(c, NULL, "ncclCommInitRankConfig", err);
}

extern "C" comm *comm_nccl_create(dist_store *store, const dist_env *env, double timeout_s, esp_err *err)
{
    int devices = 0, rank = env->rank, world = env->world_size;
    cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess || devices <= 0) {
        esp_fail(err, "comm nccl: rank %d: no CUDA device is visible (%s)", rank,
                 e != cudaSuccess ? cudaGetErrorString(e) : "check nvidia-smi and CUDA_VISIBLE_DEVICES");
        return NULL;
    }
    int local_rank = dist_local_device(env, devices);
    if (local_rank < 0) {
        esp_fail(err, "comm nccl: rank %d is local rank %d of %d on its node, which shows %d GPU%s (trainer.devices "
                      "must not exceed the GPUs of a node)", rank, env->local_rank, env->local_world_size, devices,
                 devices == 1 ? "" : "s");
        return NULL;
    }
    CUDA_CHECK(cudaSetDevice(local_rank)); // before ncclCommInitRank: the communicator binds this device
    nccl_comm *c = (nccl_comm *)xcalloc(1, sizeof *c);
    c->base.v = &nccl_vtbl;
    c->base.rank = rank, c->base.world = world, c->base.name = "nccl";
    c->device = local_rank, c->store = store, c->timeout = timeout_s;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (store_share_blob(store, COMM_NCCL_ID_KEY, rank == 0, make_unique_id, NULL, &id, sizeof id,
                         "rank 0's NCCL unique id", err) != 0 ||
        init_comm(c, world, id, err) != 0) {
        nc_destroy(&c->base);
        return NULL;
    }
    CUDA_CHECK(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&c->ready, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming));
    CUDA_CHECK(cudaMalloc((void **)&c->one, sizeof(float)));
    CUDA_CHECK(cudaMemset(c->one, 0, sizeof(float)));
    return &c->base;
}
