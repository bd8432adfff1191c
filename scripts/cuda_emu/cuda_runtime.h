// The CUDA runtime as scripts/cuda_emu/run compiles cuda/*.cu on the CPU (g++, no GPU): the subset
// of the runtime API the backend calls, dim3 and the thread indices, and kernel launches, which
// the run script rewrites from `k<<<grid, block, smem, stream>>>(args)` to
// `emu_launch(emu_cfg(grid, block, smem, stream), k, args)`. Blocks run one after another; the
// threads of a block run as fibers (emu.cpp) that meet at __syncthreads, __syncwarp and
// __shfl_xor_sync. It checks what kernels compute (indices, masks, barriers, reductions), not how
// fast, and it models no concurrency between blocks.
#ifndef ESPNET3_CUDA_EMU_RUNTIME_H
#define ESPNET3_CUDA_EMU_RUNTIME_H
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <algorithm>
using std::max;
using std::min;

#define __global__
#define __device__
#define __host__
#define __shared__ static
#define __launch_bounds__(...)

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
extern dim3 threadIdx, blockIdx, blockDim, gridDim;

typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorMemoryAllocation = 2, cudaErrorInvalidValue = 1, cudaErrorInitializationError = 3,
       cudaErrorInvalidResourceHandle = 400, cudaErrorNotReady = 600 };
typedef struct emu_stream *cudaStream_t;
enum { cudaStreamNonBlocking = 1 };
// Events: every emulated call is synchronous, so an event is complete once recorded, and its time
// is the host's clock then (cudaEventElapsedTime: the milliseconds between two, as CUDA's).
typedef struct emu_event *cudaEvent_t;
enum { cudaEventDefault = 0, cudaEventDisableTiming = 2 };
typedef enum cudaMemcpyKind { cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2, cudaMemcpyDeviceToDevice = 3 } cudaMemcpyKind;
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount = 16 };

cudaError_t cudaMalloc(void **p, size_t n);
cudaError_t cudaFree(void *p);
enum { cudaHostAllocDefault = 0 };
cudaError_t cudaHostAlloc(void **p, size_t n, unsigned flags);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind k, cudaStream_t st);
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t st);
cudaError_t cudaMemset2DAsync(void *p, size_t pitch, int v, size_t w, size_t h, cudaStream_t st);
cudaError_t cudaStreamSynchronize(cudaStream_t);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *, unsigned);
cudaError_t cudaStreamDestroy(cudaStream_t);
cudaError_t cudaSetDevice(int);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaMemset(void *p, int v, size_t n);
cudaError_t cudaEventCreate(cudaEvent_t *);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *, unsigned);
cudaError_t cudaEventSynchronize(cudaEvent_t);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);
cudaError_t cudaEventDestroy(cudaEvent_t);
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t);
cudaError_t cudaEventQuery(cudaEvent_t);
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned);
cudaError_t cudaGetDeviceCount(int *);
cudaError_t cudaDeviceGetAttribute(int *, cudaDeviceAttr, int);
cudaError_t cudaGetLastError(void);
cudaError_t cudaMemGetInfo(size_t *, size_t *);
cudaError_t cudaRuntimeGetVersion(int *);
cudaError_t cudaDriverGetVersion(int *);
const char *cudaGetErrorName(cudaError_t);
const char *cudaGetErrorString(cudaError_t);

void __syncthreads(void);
void __syncwarp(unsigned mask = 0xffffffffu);
float __shfl_xor_sync(unsigned mask, float v, int lane_mask);
double __shfl_xor_sync(unsigned mask, double v, int lane_mask);
int __shfl_xor_sync(unsigned mask, int v, int lane_mask);
static inline double __dadd_rn(double a, double b) { return a + b; }
static inline double __dmul_rn(double a, double b) { return a * b; }

struct emu_cfg {
    dim3 grid, block;
    cudaStream_t stream;
    emu_cfg(dim3 g, dim3 b, size_t = 0, cudaStream_t s = nullptr) : grid(g), block(b), stream(s) {}
};
void emu_run(const emu_cfg &c, const std::function<void()> &body);

// Stream capture and graphs (graph_emu.cpp): while a stream captures, the work issued to it
// (kernels, copies, memsets, cuBLAS calls on a handle bound to it) is recorded, not run, and
// cudaGraphLaunch runs the recording in order, with the arguments it was issued with (pointers are
// read when it runs, as a graph's nodes read device memory). A call that waits for a capturing
// stream, or a cudaMalloc during a capture, fails as CUDA's do and invalidates the capture.
// emu_record: 1 when s captures (fn recorded), 0 when the caller runs the work now.
int emu_record(cudaStream_t s, const std::function<void()> &fn);
int emu_capturing(cudaStream_t s);  // s captures; nullptr: any stream does
cudaError_t emu_capture_violation(cudaStream_t s); // invalidates the capture(s); the error to return
enum { cudaErrorStreamCaptureUnsupported = 900, cudaErrorStreamCaptureInvalidated = 901 };
enum cudaStreamCaptureMode { cudaStreamCaptureModeGlobal = 0, cudaStreamCaptureModeThreadLocal = 1,
                             cudaStreamCaptureModeRelaxed = 2 };
typedef struct emu_graph *cudaGraph_t;
typedef struct emu_graph_exec *cudaGraphExec_t;
typedef struct emu_graph_node *cudaGraphNode_t;
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g);
cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *n);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s);
cudaError_t cudaGraphDestroy(cudaGraph_t g);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e);
#include <type_traits>
template <class T, class U> T emu_conv(U u)
{
    if constexpr (std::is_pointer<T>::value && std::is_integral<U>::value) return nullptr; // NULL
    else return u;
}
template <class... P, class... A>
void emu_launch(const emu_cfg &c, void (*k)(P...), A... a)
{
    if (emu_record(c.stream, [=]() { emu_run(c, [&]() { k(emu_conv<P>(a)...); }); })) return;
    emu_run(c, [&]() { k(emu_conv<P>(a)...); });
}

#endif
