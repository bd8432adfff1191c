// Stream capture and CUDA graphs on the CPU emulation (declared in cuda_runtime.h): a capturing
// stream's work is a list of closures, a graph is that list, and launching it runs them in order.
// Enough to check that a captured run of ops computes what the ops computed when issued one by
// one, and that nothing in it waits for the host (which CUDA refuses during a capture).
#include "cuda_runtime.h"
#include <map>
#include <vector>

struct emu_graph {
    std::vector<std::function<void()>> nodes;
};
struct emu_graph_exec {
    std::vector<std::function<void()>> nodes;
};
struct capture {
    cudaStreamCaptureMode mode;
    int invalid;
    emu_graph *g;
};
static std::map<cudaStream_t, capture> captures;

int emu_capturing(cudaStream_t s)
{
    if (!s) return !captures.empty();
    return captures.count(s) != 0;
}

int emu_record(cudaStream_t s, const std::function<void()> &fn)
{
    auto it = captures.find(s);
    if (it == captures.end()) return 0;
    it->second.g->nodes.push_back(fn);
    return 1;
}

cudaError_t emu_capture_violation(cudaStream_t s)
{
    for (auto &c : captures)
        if (!s || c.first == s) c.second.invalid = 1;
    return cudaErrorStreamCaptureUnsupported;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode)
{
    if (!s || captures.count(s)) return cudaErrorInvalidValue; // the legacy stream cannot capture
    captures[s] = capture{mode, 0, new emu_graph()};
    return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g)
{
    auto it = captures.find(s);
    *g = nullptr;
    if (it == captures.end()) return cudaErrorInvalidValue;
    capture c = it->second;
    captures.erase(it);
    if (c.invalid) {
        delete c.g;
        return cudaErrorStreamCaptureInvalidated;
    }
    *g = c.g;
    return cudaSuccess;
}

cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *n)
{
    if (!g || nodes) return cudaErrorInvalidValue; // only the count is asked for here
    *n = g->nodes.size();
    return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long)
{
    if (!g) return cudaErrorInvalidValue;
    *e = new emu_graph_exec{g->nodes};
    return cudaSuccess;
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s)
{
    if (!e) return cudaErrorInvalidValue;
    if (emu_record(s, [e]() {
            for (auto &f : e->nodes) f();
        }))
        return cudaSuccess;
    for (auto &f : e->nodes) f();
    return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
    delete g;
    return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e)
{
    delete e;
    return cudaSuccess;
}
