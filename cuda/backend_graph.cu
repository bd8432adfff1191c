// The CUDA backend's graphs (be->graph_begin / graph_end / graph_launch, core/compute/backend.h):
// the ops issued between begin and end are captured on the backend's stream, instantiated once
// under a key (a shape bucket's), and replayed by one cudaGraphLaunch each time that key comes
// again, instead of one launch per kernel.
#include <stdlib.h>

#include "cuda/cuda_common.cuh"

static void cu_graph_begin(backend *be)
{
    // Global mode: a call anywhere that could wait for the device during the capture (a copy to
    // the host, a cudaMalloc) is an error, so a graph never holds a step that needed the host.
    CUDA_CHECK(cudaStreamBeginCapture(cu_stream(be), cudaStreamCaptureModeGlobal));
}

static cu_graph *graph_of(cu_impl *c, uint64_t key)
{
    for (size_t i = 0; i < c->n_graphs; i++)
        if (c->graphs[i].key == key) return &c->graphs[i];
    return NULL;
}

static size_t cu_graph_end(backend *be, uint64_t key)
{
    cu_impl *c = cu_of(be);
    cudaGraph_t g = NULL;
    CUDA_CHECK(cudaStreamEndCapture(c->stream, &g));
    size_t nodes = 0;
    CUDA_CHECK(cudaGraphGetNodes(g, NULL, &nodes));
    cudaGraphExec_t exec = NULL;
    CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
    CUDA_CHECK(cudaGraphDestroy(g));
    cu_graph *old = graph_of(c, key);
    if (old) {
        CUDA_CHECK(cudaGraphExecDestroy(old->exec));
        old->exec = exec, old->nodes = nodes;
        return nodes;
    }
    c->graphs = (cu_graph *)xrealloc(c->graphs, (c->n_graphs + 1) * sizeof *c->graphs);
    c->graphs[c->n_graphs++] = (cu_graph){key, exec, nodes};
    return nodes;
}

static int cu_graph_launch(backend *be, uint64_t key)
{
    cu_graph *g = graph_of(cu_of(be), key);
    if (!g) return 0;
    CUDA_CHECK(cudaGraphLaunch(g->exec, cu_stream(be)));
    return 1;
}

void cu_graph_init(backend *be)
{
    be->graph_begin = cu_graph_begin;
    be->graph_end = cu_graph_end;
    be->graph_launch = cu_graph_launch;
}

void cu_graph_destroy(backend *be)
{
    cu_impl *c = cu_of(be);
    for (size_t i = 0; i < c->n_graphs; i++) CUDA_CHECK(cudaGraphExecDestroy(c->graphs[i].exec));
    free(c->graphs);
    c->graphs = NULL, c->n_graphs = 0;
}
