// The emulated NCCL of scripts/cuda_emu/nccl.h: ranks are processes that map one POSIX
// shared-memory segment (its name is the unique id). Each collective goes through per-rank slots
// of EMU_SLOT bytes, a chunk at a time: every rank copies its chunk into its slot and marks
// arrival, waits for all, combines the slots in rank order, marks departure and waits for all
// again (so no slot is overwritten while a peer still reads it). A wait fails with
// ncclRemoteError when a peer process is gone (or a zombie), and with ncclSystemError after
// EMU_NCCL_TIMEOUT seconds (default 120): the comm's own timeout and liveness checks are the ones
// under test, this is only a backstop.
#include "nccl.h"

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

enum { EMU_MAX_RANKS = 8, EMU_SLOT = 1 << 16 };

struct emu_shm {
    std::atomic<int> joined;
    std::atomic<int> pid[EMU_MAX_RANKS];
    std::atomic<unsigned long long> mark[EMU_MAX_RANKS];
    alignas(64) unsigned char slot[EMU_MAX_RANKS][EMU_SLOT];
};

struct emu_nccl {
    char name[NCCL_UNIQUE_ID_BYTES];
    emu_shm *shm;
    int rank, nranks, ready;
    unsigned long long seq;
    ncclResult_t async;
    char last[256];
};

static char last_global[256];

static ncclResult_t fail(emu_nccl *c, ncclResult_t r, const char *what)
{
    snprintf(c ? c->last : last_global, sizeof last_global, "emu nccl: %s", what);
    if (c) c->async = r;
    return r;
}

const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

const char *ncclGetLastError(ncclComm_t c) { return c ? c->last : last_global; }

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    static int counter;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    memset(id, 0, sizeof *id);
    snprintf(id->internal, sizeof id->internal, "/esp3-ncclemu-%d-%d-%ld", (int)getpid(), counter++, ts.tv_nsec);
    return ncclSuccess;
}

static int gone(int pid)
{
    if (pid <= 0) return 0;
    if (kill(pid, 0) != 0 && errno == ESRCH) return 1;
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *fp = fopen(path, "r");
    if (!fp) return 1;
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *out, int nranks, ncclUniqueId id, int rank, ncclConfig_t *config)
{
    if (nranks < 1 || nranks > EMU_MAX_RANKS || rank < 0 || rank >= nranks || id.internal[0] != '/')
        return fail(nullptr, ncclInvalidArgument, "bad nranks, rank or unique id");
    int fd = shm_open(id.internal, O_CREAT | O_RDWR, 0600);
    if (fd < 0 || ftruncate(fd, sizeof(emu_shm)) != 0) {
        if (fd >= 0) close(fd);
        return fail(nullptr, ncclSystemError, "shm_open/ftruncate failed");
    }
    void *p = mmap(nullptr, sizeof(emu_shm), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return fail(nullptr, ncclSystemError, "mmap failed");
    emu_nccl *c = new emu_nccl();
    memcpy(c->name, id.internal, sizeof c->name);
    c->shm = (emu_shm *)p;
    c->rank = rank, c->nranks = nranks;
    c->shm->pid[rank] = (int)getpid();
    c->shm->joined++;
    *out = c;
    // Non-blocking (config->blocking == 0): the join completes in ncclCommGetAsyncError.
    if (config && config->blocking == 0) return c->async = ncclInProgress;
    while (c->shm->joined < nranks) usleep(1000);
    c->ready = 1;
    return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *e)
{
    if (!c->ready && c->async == ncclInProgress && c->shm->joined >= c->nranks) {
        c->ready = 1;
        c->async = ncclSuccess;
        if (c->rank == 0) shm_unlink(c->name); // every rank has it mapped
    }
    *e = c->async;
    return ncclSuccess;
}

static void release(emu_nccl *c)
{
    munmap(c->shm, sizeof(emu_shm));
    if (!c->ready) shm_unlink(c->name); // a rank never came: nobody else will unlink it
    delete c;
}
ncclResult_t ncclCommFinalize(ncclComm_t) { return ncclSuccess; }
ncclResult_t ncclCommDestroy(ncclComm_t c) { release(c); return ncclSuccess; }
ncclResult_t ncclCommAbort(ncclComm_t c) { release(c); return ncclSuccess; }
ncclResult_t ncclGroupStart(void) { return ncclSuccess; }
ncclResult_t ncclGroupEnd(void) { return ncclSuccess; }

// Waits until every rank's mark reaches m.
static ncclResult_t wait_all(emu_nccl *c, unsigned long long m)
{
    static double limit = getenv("EMU_NCCL_TIMEOUT") ? atof(getenv("EMU_NCCL_TIMEOUT")) : 120;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long spin = 0;; spin++) {
        int all = 1;
        for (int r = 0; r < c->nranks; r++) {
            if (c->shm->mark[r].load() >= m) continue;
            all = 0;
            if (spin % 64 == 0 && gone(c->shm->pid[r])) {
                char what[64];
                snprintf(what, sizeof what, "rank %d (process %d) is gone", r, c->shm->pid[r].load());
                return fail(c, ncclRemoteError, what);
            }
        }
        if (all) return ncclSuccess;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec + (now.tv_nsec - t0.tv_nsec) * 1e-9 > limit)
            return fail(c, ncclSystemError, "a peer did not arrive within EMU_NCCL_TIMEOUT");
        usleep(spin < 100 ? 10 : 500);
    }
}

static size_t type_size(ncclDataType_t t)
{
    return t == ncclFloat ? 4 : t == ncclUint8 ? 1 : t == ncclFloat64 || t == ncclInt64 || t == ncclUint64 ? 8
                                                                                                        : t == ncclFloat16 ? 2 : 4;
}

// One collective in chunks: this rank contributes `send` (NULL: nothing), combine(chunk offset,
// chunk bytes) reads the slots once all ranks have written theirs.
template <class F> static ncclResult_t exchange(emu_nccl *c, const void *send, size_t bytes, F combine)
{
    if (!c->ready) return fail(c, ncclInvalidUsage, "collective before the communicator is ready");
    if (c->async != ncclSuccess) return c->async;
    size_t off = 0;
    do {
        size_t len = bytes - off < (size_t)EMU_SLOT ? bytes - off : (size_t)EMU_SLOT;
        if (send && len) memcpy(c->shm->slot[c->rank], (const char *)send + off, len);
        c->seq++;
        c->shm->mark[c->rank] = 2 * c->seq - 1;
        ncclResult_t r = wait_all(c, 2 * c->seq - 1);
        if (r) return r;
        combine(off, len);
        c->shm->mark[c->rank] = 2 * c->seq;
        if ((r = wait_all(c, 2 * c->seq))) return r;
        off += len;
    } while (off < bytes);
    return ncclSuccess;
}

// Reduces float chunk [off, off + len) of every rank's slot in rank order into out.
static void reduce_floats(emu_nccl *c, float *out, size_t len, ncclRedOp_t op)
{
    size_t n = len / sizeof(float);
    for (size_t i = 0; i < n; i++) {
        float a;
        memcpy(&a, c->shm->slot[0] + i * 4, 4);
        for (int r = 1; r < c->nranks; r++) {
            float b;
            memcpy(&b, c->shm->slot[r] + i * 4, 4);
            a = op == ncclMax ? (b > a ? b : a) : op == ncclMin ? (b < a ? b : a) : op == ncclProd ? a * b : a + b;
        }
        if (op == ncclAvg) a /= (float)c->nranks;
        memcpy(out + i, &a, 4);
    }
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op, ncclComm_t c,
                           cudaStream_t)
{
    if (t != ncclFloat) return fail(c, ncclInvalidArgument, "the emulation reduces floats only");
    return exchange(c, send, count * 4, [&](size_t off, size_t len) {
        reduce_floats(c, (float *)((char *)recv + off), len, op);
    });
}

ncclResult_t ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op, int root,
                        ncclComm_t c, cudaStream_t)
{
    if (t != ncclFloat) return fail(c, ncclInvalidArgument, "the emulation reduces floats only");
    if (root < 0 || root >= c->nranks) return fail(c, ncclInvalidArgument, "root out of range");
    return exchange(c, send, count * 4, [&](size_t off, size_t len) {
        if (c->rank == root) reduce_floats(c, (float *)((char *)recv + off), len, op);
    });
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t t, int root, ncclComm_t c,
                           cudaStream_t)
{
    if (root < 0 || root >= c->nranks) return fail(c, ncclInvalidArgument, "root out of range");
    return exchange(c, c->rank == root ? send : nullptr, count * type_size(t), [&](size_t off, size_t len) {
        if (c->rank != root || recv != send) memcpy((char *)recv + off, c->shm->slot[root], len);
    });
}

// In place as NCCL defines it: send is the whole buffer, recv = send + rank * recvcount.
ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recvcount, ncclDataType_t t, ncclRedOp_t op,
                               ncclComm_t c, cudaStream_t s)
{
    for (int r = 0; r < c->nranks; r++) {
        const char *src = (const char *)send + (size_t)r * recvcount * type_size(t);
        ncclResult_t e = ncclReduce(src, r == c->rank ? recv : (void *)src, recvcount, t, op, r, c, s);
        if (e) return e;
    }
    return ncclSuccess;
}

// In place: send = recv + rank * sendcount.
ncclResult_t ncclAllGather(const void *send, void *recv, size_t sendcount, ncclDataType_t t, ncclComm_t c,
                           cudaStream_t s)
{
    size_t b = sendcount * type_size(t);
    for (int r = 0; r < c->nranks; r++) {
        ncclResult_t e = ncclBroadcast(r == c->rank ? send : (char *)recv + r * b, (char *)recv + r * b, sendcount, t,
                                       r, c, s);
        if (e) return e;
    }
    return ncclSuccess;
}
