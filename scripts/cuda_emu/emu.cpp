// The CPU emulation behind scripts/cuda_emu/cuda_runtime.h and cublas_v2.h: a fiber scheduler for
// kernel launches, the runtime calls on host memory, and a reference sgemm.
//
// A block's threads are fibers run in turn, each until it waits at a barrier or returns;
// when every live thread of a warp waits at __syncwarp (or a shuffle), or every live thread of
// the block at __syncthreads, they go on. Threads that returned count as arrived. A block whose
// threads wait at different barriers is a deadlock: the run aborts. EMU_REVERSE=1 runs the
// threads in descending order, so a missing barrier shows whichever thread reads first.
#include "cublas_v2.h"
#include <boost/context/fiber.hpp>
#include <cstdio>
#include <ctime>
#include <unistd.h>
#include <vector>

dim3 threadIdx, blockIdx, blockDim, gridDim;

// ---- fibers
// Boost.Context's fibers: a switch saves registers in user space, where ucontext's swapcontext made
// a sigprocmask system call and, under AddressSanitizer, cleared the shadow of the whole stack on
// every switch (most of the emulation's time). A thread's fiber lives as long as the process and
// runs the kernel body once per block it is given. Under AddressSanitizer every switch is announced
// (__sanitizer_start/finish_switch_fiber), so it knows which stack runs.
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
static void switch_start(const void *bottom, size_t size) { __sanitizer_start_switch_fiber(nullptr, bottom, size); }
static void switch_done(const void **bottom, size_t *size) { __sanitizer_finish_switch_fiber(nullptr, bottom, size); }
#else
static void switch_start(const void *, size_t) {}
static void switch_done(const void **, size_t *) {}
#endif
namespace bctx = boost::context;
enum { RUN = 0, AT_BLOCK = 1, AT_WARP = 2, DONE = 3 };
enum { FIBER_STACK = 1 << 16 };
struct fiber {
    bctx::fiber self;  // the thread, suspended (empty while it runs)
    bctx::fiber sched; // the scheduler, suspended while the thread runs
    const void *stack; // the thread's stack (its lowest address)
    dim3 tid;
    int state;
};
// Never destroyed: a suspended fiber's destructor would unwind its stack at exit.
static std::vector<fiber> &fibers = *new std::vector<fiber>();
static const void *sched_stack; // the scheduler's stack, as AddressSanitizer reports it
static size_t sched_stack_size;
static int cur;
static const std::function<void()> *body_fn;
static unsigned char shfl_slot[1024][8]; // one value per thread, up to 8 bytes
static int reverse_order = -1;

static int lin(const dim3 &t) { return (int)(t.x + t.y * blockDim.x + t.z * blockDim.x * blockDim.y); }

// A fiber's stack, kept for the process (fibers are never destroyed).
struct emu_stack {
    const void **base; // where the stack's lowest address goes
    bctx::stack_context allocate()
    {
        void *p = malloc(FIBER_STACK);
        if (!p) abort();
        *base = p;
        bctx::stack_context sc;
        sc.size = FIBER_STACK;
        sc.sp = (char *)p + FIBER_STACK;
        return sc;
    }
    void deallocate(bctx::stack_context &) {}
};

// Back to the scheduler; on return this thread runs again (the scheduler set cur and threadIdx).
static void yield_to_sched(int me)
{
    switch_start(sched_stack, sched_stack_size);
    fibers[me].sched = std::move(fibers[me].sched).resume();
    switch_done(nullptr, nullptr);
}

static void thread_fiber(int i)
{
    fibers[i].self = bctx::fiber(std::allocator_arg, emu_stack{&fibers[i].stack}, [i](bctx::fiber &&s) {
        switch_done(&sched_stack, &sched_stack_size);
        fibers[i].sched = std::move(s);
        for (;;) { // one block per turn
            (*body_fn)();
            fibers[i].state = DONE;
            yield_to_sched(i);
        }
        return std::move(fibers[i].sched); // not reached
    });
}

// The scheduler runs thread i until it waits or returns.
static void run_thread(int i)
{
    switch_start(fibers[i].stack, FIBER_STACK);
    fibers[i].self = std::move(fibers[i].self).resume();
    switch_done(nullptr, nullptr);
}

static void wait_at(int st)
{
    int me = cur;
    fibers[me].state = st;
    yield_to_sched(me);
    threadIdx = fibers[me].tid;
}

void __syncthreads(void) { wait_at(AT_BLOCK); }
void __syncwarp(unsigned) { wait_at(AT_WARP); }
// Every lane posts its value, the warp meets, each reads its partner's, the warp meets again.
template <class T> static T shfl_xor(T v, int o)
{
    static_assert(sizeof(T) <= sizeof shfl_slot[0], "shuffle of a value wider than 8 bytes");
    int l = lin(threadIdx);
    memcpy(shfl_slot[l], &v, sizeof v);
    wait_at(AT_WARP);
    T r;
    memcpy(&r, shfl_slot[(l & ~31) | ((l & 31) ^ o)], sizeof r);
    wait_at(AT_WARP);
    return r;
}
float __shfl_xor_sync(unsigned, float v, int o) { return shfl_xor(v, o); }
double __shfl_xor_sync(unsigned, double v, int o) { return shfl_xor(v, o); }
int __shfl_xor_sync(unsigned, int v, int o) { return shfl_xor(v, o); }

// ---- launch counts: with EMU_LAUNCHES set, the process prints at exit how many kernels, cuBLAS
// calls (a batched GEMM is one), memsets and copies it issued (scripts/cuda_emu/run launches).
static struct {
    long kernels, gemms, memsets, copies;
} counts;
static void print_counts(void)
{
    fprintf(stderr, "emu launches: %ld kernels, %ld cuBLAS calls, %ld memsets, %ld copies\n", counts.kernels,
            counts.gemms, counts.memsets, counts.copies);
}
static int count_init(void)
{
    if (getenv("EMU_LAUNCHES")) atexit(print_counts);
    return 0;
}
[[maybe_unused]] static int count_init_done = count_init();

void emu_run(const emu_cfg &c, const std::function<void()> &body)
{
    counts.kernels++;
    if (reverse_order < 0) reverse_order = getenv("EMU_REVERSE") && atoi(getenv("EMU_REVERSE")) != 0;
    int nt = (int)(c.block.x * c.block.y * c.block.z);
    if (nt <= 0 || nt > 1024 || c.grid.x == 0 || c.grid.y == 0 || c.grid.z == 0) {
        fprintf(stderr, "emu: bad launch grid %u,%u,%u block %u,%u,%u\n", c.grid.x, c.grid.y, c.grid.z, c.block.x,
                c.block.y, c.block.z);
        abort();
    }
    gridDim = c.grid, blockDim = c.block;
    body_fn = &body;
    while ((int)fibers.size() < nt) {
        fibers.emplace_back();
        thread_fiber((int)fibers.size() - 1);
    }
    for (unsigned bz = 0; bz < c.grid.z; bz++)
        for (unsigned by = 0; by < c.grid.y; by++)
            for (unsigned bx = 0; bx < c.grid.x; bx++) {
                blockIdx = dim3(bx, by, bz);
                for (int i = 0; i < nt; i++) {
                    fibers[i].tid = dim3(i % c.block.x, i / c.block.x % c.block.y, i / (c.block.x * c.block.y));
                    fibers[i].state = RUN;
                }
                for (;;) {
                    for (int k = 0; k < nt; k++) {
                        int i = reverse_order ? nt - 1 - k : k;
                        if (fibers[i].state == RUN) {
                            cur = i;
                            threadIdx = fibers[i].tid;
                            run_thread(i);
                        }
                    }
                    int live = 0, at_block = 0, released = 0;
                    for (int i = 0; i < nt; i++) live += fibers[i].state != DONE, at_block += fibers[i].state == AT_BLOCK;
                    if (!live) break;
                    for (int w = 0; w * 32 < nt; w++) { // a warp barrier: every live lane of the warp there
                        int lw = 0, aw = 0;
                        for (int i = w * 32; i < nt && i < w * 32 + 32; i++)
                            lw += fibers[i].state != DONE, aw += fibers[i].state == AT_WARP;
                        if (aw && aw == lw) {
                            for (int i = w * 32; i < nt && i < w * 32 + 32; i++) fibers[i].state = RUN;
                            released = 1;
                        }
                    }
                    if (!released && at_block == live) {
                        for (int i = 0; i < nt; i++)
                            if (fibers[i].state == AT_BLOCK) fibers[i].state = RUN;
                        released = 1;
                    }
                    if (!released) {
                        fprintf(stderr, "emu: deadlock in block %u,%u: %d live, %d at __syncthreads\n", bx, by, live,
                                at_block);
                        abort();
                    }
                }
            }
}

// ---- runtime: device memory is host memory; every call is synchronous
struct emu_stream { int x; };
// cudaMalloc calls so far (tests read it through emu_malloc_calls: the arena's steady state makes none).
static long malloc_calls;
extern "C" long emu_malloc_calls(void) { return malloc_calls; }
cudaError_t cudaMalloc(void **p, size_t n)
{
    if (emu_capturing(nullptr)) return emu_capture_violation(nullptr); // it may synchronize: refused in a capture
    malloc_calls++;
    // The exact size (malloc's alignment is enough here), so AddressSanitizer sees overruns.
    *p = malloc(n ? n : 1);
    if (*p) memset(*p, 0xA5, n); // not zeros: device memory starts as garbage
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void *p) { free(p); return cudaSuccess; }
cudaError_t cudaHostAlloc(void **p, size_t n, unsigned) { *p = malloc(n ? n : 1); return *p ? cudaSuccess : cudaErrorMemoryAllocation; }
cudaError_t cudaFreeHost(void *p) { free(p); return cudaSuccess; }
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind, cudaStream_t st)
{
    if (emu_record(st, [=]() { memmove(d, s, n); })) return cudaSuccess;
    counts.copies++;
    memmove(d, s, n);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t st)
{
    if (emu_record(st, [=]() { memset(p, v, n); })) return cudaSuccess;
    counts.memsets++;
    memset(p, v, n);
    return cudaSuccess;
}
cudaError_t cudaMemset2DAsync(void *p, size_t pitch, int v, size_t w, size_t h, cudaStream_t st)
{
    if (pitch < w) return cudaErrorInvalidValue;
    if (emu_record(st, [=]() { cudaMemset2DAsync(p, pitch, v, w, h, nullptr); })) return cudaSuccess;
    counts.memsets++;
    for (size_t r = 0; r < h; r++) memset((char *)p + r * pitch, v, w);
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) { return emu_capturing(s) ? emu_capture_violation(s) : cudaSuccess; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) { *s = new emu_stream(); return cudaSuccess; }
cudaError_t cudaStreamDestroy(cudaStream_t s) { delete s; return cudaSuccess; }
cudaError_t cudaDeviceSynchronize(void) { return emu_capturing(nullptr) ? emu_capture_violation(nullptr) : cudaSuccess; }
cudaError_t cudaMemset(void *p, int v, size_t n) { memset(p, v, n); return cudaSuccess; }
struct emu_event {
    int recorded, timing;
    double at; // CLOCK_MONOTONIC seconds when recorded
};
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
    *e = new emu_event{0, !(flags & cudaEventDisableTiming), 0};
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }
cudaError_t cudaEventDestroy(cudaEvent_t e) { delete e; return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    auto record = [e]() {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        e->recorded = 1;
        e->at = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    };
    if (!emu_record(s, record)) record();
    return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) { return e->recorded ? cudaSuccess : cudaErrorNotReady; }
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
// As CUDA: either event made without timing is an invalid handle here; one never recorded is not ready.
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    if (!a->timing || !b->timing) return cudaErrorInvalidResourceHandle;
    if (!a->recorded || !b->recorded) return cudaErrorNotReady;
    *ms = (float)(1e3 * (b->at - a->at));
    return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned) { return cudaSuccess; }
// CUDA's rule for fork: a child forked after its parent initialised CUDA cannot use it
// (cudaErrorInitializationError), so the code must initialise CUDA only in the processes that
// compute on it. The first device query or cudaSetDevice of a process initialises it here.
static pid_t init_pid;
static cudaError_t emu_init(void)
{
    if (init_pid && init_pid != getpid()) return cudaErrorInitializationError;
    init_pid = getpid();
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int) { return emu_init(); }
// EMU_DEVICES (default 1): how many devices the emulation shows (the run script shows 2, so the
// 2-rank NCCL check runs); they all share host memory.
cudaError_t cudaGetDeviceCount(int *n)
{
    *n = 0;
    if (cudaError_t e = emu_init()) return e;
    *n = getenv("EMU_DEVICES") ? atoi(getenv("EMU_DEVICES")) : 1;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int *v, cudaDeviceAttr, int) { *v = 2; return cudaSuccess; }
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
// The host's memory stands for the device's (the batched decoder plans against the free part).
cudaError_t cudaMemGetInfo(size_t *f, size_t *t)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    *f = (size_t)sysconf(_SC_AVPHYS_PAGES) * page;
    *t = (size_t)sysconf(_SC_PHYS_PAGES) * page;
    return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int *v) { *v = 0; return cudaSuccess; }
cudaError_t cudaDriverGetVersion(int *v) { *v = 0; return cudaSuccess; }
const char *cudaGetErrorName(cudaError_t) { return "emu"; }
const char *cudaGetErrorString(cudaError_t) { return "emu error"; }

// ---- cuBLAS: column-major as documented; invalid arguments are reported as cuBLAS reports them
struct emu_blas { cudaStream_t stream; }; // cublasSetStream's
cublasStatus_t cublasCreate(cublasHandle_t *h) { *h = new emu_blas(); return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasDestroy(cublasHandle_t h) { delete h; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s) { h->stream = s; return CUBLAS_STATUS_SUCCESS; }
// A call on a capturing stream is recorded with its scalars' values (host pointer mode reads them
// when the call is issued, so a graph keeps them) and checked when the graph runs.
#define EMU_BLAS_RECORD(h, call)                                            \
    do {                                                                    \
        if (emu_record((h)->stream, [=]() { (void)(call); })) return CUBLAS_STATUS_SUCCESS; \
    } while (0)
cublasStatus_t cublasSetMathMode(cublasHandle_t, cublasMath_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetPointerMode(cublasHandle_t, cublasPointerMode_t) { return CUBLAS_STATUS_SUCCESS; }
const char *cublasGetStatusName(cublasStatus_t) { return "CUBLAS_STATUS_INVALID_VALUE"; }
const char *cublasGetStatusString(cublasStatus_t) { return "invalid value"; }

cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float *alpha, const float *a, int lda, const float *b, int ldb, const float *beta,
                           float *c, int ldc)
{
    const float al = *alpha, bt = *beta;
    EMU_BLAS_RECORD(h, cublasSgemm(h, ta, tb, m, n, k, &al, a, lda, b, ldb, &bt, c, ldc));
    counts.gemms++;
    if (m < 0 || n < 0 || k < 0 || lda < std::max(1, ta == CUBLAS_OP_N ? m : k) ||
        ldb < std::max(1, tb == CUBLAS_OP_N ? k : n) || ldc < std::max(1, m)) {
        fprintf(stderr, "emu cublasSgemm: invalid m %d n %d k %d lda %d ldb %d ldc %d ta %d tb %d\n", m, n, k, lda, ldb,
                ldc, ta, tb);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double s = 0;
            for (int l = 0; l < k; l++) {
                float av = ta == CUBLAS_OP_N ? a[i + (size_t)l * lda] : a[l + (size_t)i * lda];
                float bv = tb == CUBLAS_OP_N ? b[l + (size_t)j * ldb] : b[j + (size_t)l * ldb];
                s += (double)av * bv;
            }
            float *cp = c + i + (size_t)j * ldc;
            *cp = (float)(*alpha * s + (*beta == 0 ? 0.0 : (double)*beta * *cp));
        }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                         int k, const float *alpha, const float *a, int lda, long long sa,
                                         const float *b, int ldb, long long sb, const float *beta, float *c, int ldc,
                                         long long sc, int count)
{
    const float al = *alpha, bt = *beta;
    EMU_BLAS_RECORD(h, cublasSgemmStridedBatched(h, ta, tb, m, n, k, &al, a, lda, sa, b, ldb, sb, &bt, c, ldc, sc,
                                                 count));
    long calls = counts.gemms + 1; // one launch, not one per matrix
    for (int i = 0; i < count; i++) {
        cublasStatus_t s = cublasSgemm(h, ta, tb, m, n, k, alpha, a + i * sa, lda, b + i * sb, ldb, beta, c + i * sc, ldc);
        if (s) return s;
    }
    counts.gemms = calls;
    return CUBLAS_STATUS_SUCCESS;
}

// ---- cublasGemmEx: the 16-bit inputs decoded here from their definitions (not with the
// backend's own conversion functions), then the same reference sum as sgemm
static float emu_decode(const void *p, cudaDataType_t t, size_t i)
{
    uint16_t h = ((const uint16_t *)p)[i];
    if (t == CUDA_R_16BF) {
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 31 ? (m ? NAN : INFINITY) : e ? std::ldexp(1024 + m, e - 25) : std::ldexp(m, -24);
    return (float)((h & 0x8000) ? -v : v);
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *a, cudaDataType_t at, int lda, const void *b,
                            cudaDataType_t bt, int ldb, const void *beta, void *c, cudaDataType_t ct, int ldc,
                            cublasComputeType_t compute, cublasGemmAlgo_t algo)
{
    const float al32 = *(const float *)alpha, be32 = *(const float *)beta;
    EMU_BLAS_RECORD(h, cublasGemmEx(h, ta, tb, m, n, k, &al32, a, at, lda, b, bt, ldb, &be32, c, ct, ldc, compute, algo));
    counts.gemms++;
    if (m < 0 || n < 0 || k < 0 || lda < std::max(1, ta == CUBLAS_OP_N ? m : k) ||
        ldb < std::max(1, tb == CUBLAS_OP_N ? k : n) || ldc < std::max(1, m) || at != bt ||
        (at != CUDA_R_16BF && at != CUDA_R_16F) || ct != CUDA_R_32F || compute != CUBLAS_COMPUTE_32F) {
        fprintf(stderr, "emu cublasGemmEx: invalid m %d n %d k %d lda %d ldb %d ldc %d types %d %d %d compute %d\n", m,
                n, k, lda, ldb, ldc, at, bt, ct, compute);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    float al = *(const float *)alpha, be = *(const float *)beta, *cf = (float *)c;
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            double s = 0;
            for (int l = 0; l < k; l++) {
                float av = emu_decode(a, at, ta == CUBLAS_OP_N ? i + (size_t)l * lda : l + (size_t)i * lda);
                float bv = emu_decode(b, bt, tb == CUBLAS_OP_N ? l + (size_t)j * ldb : j + (size_t)l * ldb);
                s += (double)av * bv;
            }
            float *cp = cf + i + (size_t)j * ldc;
            *cp = (float)(al * s + (be == 0 ? 0.0 : (double)be * *cp));
        }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                                          int k, const void *alpha, const void *a, cudaDataType_t at, int lda,
                                          long long sa, const void *b, cudaDataType_t bt, int ldb, long long sb,
                                          const void *beta, void *c, cudaDataType_t ct, int ldc, long long sc,
                                          int count, cublasComputeType_t compute, cublasGemmAlgo_t algo)
{
    const float al32 = *(const float *)alpha, be32 = *(const float *)beta;
    EMU_BLAS_RECORD(h, cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, &al32, a, at, lda, sa, b, bt, ldb, sb, &be32, c,
                                                  ct, ldc, sc, count, compute, algo));
    long calls = counts.gemms + 1;
    for (int i = 0; i < count; i++) {
        cublasStatus_t s = cublasGemmEx(h, ta, tb, m, n, k, alpha, (const uint16_t *)a + i * sa, at, lda, (const uint16_t *)b + i * sb,
                                        bt, ldb, beta, (float *)c + i * sc, ct, ldc, compute, algo);
        if (s) return s;
    }
    counts.gemms = calls;
    return CUBLAS_STATUS_SUCCESS;
}
