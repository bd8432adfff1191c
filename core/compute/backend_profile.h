/* The per-op profiler (trainer.profiler, or ESPNET3_PROFILE=1 for any stage): while it is on, every
 * op call of a backend is timed and its work counted (core/compute/op_cost.h), by op and by the
 * layer kind the model code has entered, and the memory entries (copies, fills) are timed too. The
 * report gives per op and per layer kind the calls, total milliseconds, share of the profiled wall
 * time, achieved GFLOP/s and GB/s, and each op's roofline time, max(flops / peak, bytes /
 * bandwidth), with the ratio of its time to it: the ops furthest from their limit come first in
 * that column. The peaks are measured on the backend itself when the profiler starts (its own
 * GEMM at the precision set then, on 512-square matrices on a CPU and 4096-square on a device, and
 * its device-to-device copy of 64 MiB), so the roofline is this machine's; ESPNET3_PROFILE_PEAK_GFLOPS
 * and ESPNET3_PROFILE_PEAK_GBPS set them instead (a datasheet's; both given: nothing is measured).
 *
 * Timing: the CPU backends run ops synchronously, so the clock around each call is the op's time.
 * A device backend (cuda) runs them asynchronously: the profiler records a mark (be->mark, a CUDA
 * event) on the stream before and after each op and reads the device's time between them later,
 * when the stream is idle anyway (a synchronize, a copy to the host: the step's end) or after
 * 8192 pending ops, so profiling adds no synchronization to a step. A span in which the device
 * waited for the host's next launch counts to the op (the report says so).
 *
 * Install with backend_profile_start (it swaps the backend's op entries, copy, fill and synchronize
 * for timing trampolines that call the saved ones, so the backend's impl and every caller stay as they are); backend_close
 * stops it. Scopes (backend_profile_enter/leave) cost one test when the profiler is off. */
#ifndef ESPNET3_COMPUTE_BACKEND_PROFILE_H
#define ESPNET3_COMPUTE_BACKEND_PROFILE_H

#include <stdio.h>

#include "core/compute/backend.h"

/* The layer kinds ops are charged to (X(ID, name)). */
#define PROF_LAYERS(X)                                   \
    X(OTHER, "other")                                    \
    X(PREENCODER, "preencoder")                          \
    X(INPUT_LAYER, "input layer")                        \
    X(TRANSFORMER_BLOCKS, "transformer blocks")          \
    X(CONFORMER_BLOCKS, "conformer blocks")              \
    X(EBRANCHFORMER_BLOCKS, "e_branchformer blocks")     \
    X(ENCODER_HEAD, "after_norm and ctc head")           \
    X(CTC_LOSS, "ctc loss")                              \
    X(DECODER, "attention decoder")                      \
    X(LM, "language model")                              \
    X(OPTIMIZER, "optimizer (reduce, clip, step)")

typedef enum prof_layer {
#define X(ID, name) PROF_LAYER_##ID,
    PROF_LAYERS(X)
#undef X
    PROF_LAYER_COUNT
} prof_layer;

/* 1 when ESPNET3_PROFILE is set to something other than "" or "0". */
int backend_profile_requested(void);

/* Starts profiling be (idempotent): measures its peaks, then times every op from here on. */
void backend_profile_start(backend *be);
/* Stops it: the op entries are be's own again and the counts are gone. No-op when not started. */
void backend_profile_stop(backend *be);

/* Charges the ops from here to layer; returns the kind in force before. */
prof_layer backend_profile_set_layer(backend *be, prof_layer layer);

/* The same, free when the profiler is off; pair each with backend_profile_leave(be, returned). */
static inline prof_layer backend_profile_enter(backend *be, prof_layer layer)
{
    return be->profile ? backend_profile_set_layer(be, layer) : PROF_LAYER_OTHER;
}
static inline void backend_profile_leave(backend *be, prof_layer previous)
{
    if (be->profile) backend_profile_set_layer(be, previous);
}

/* What was counted so far for op in layer (calls, seconds, FLOPs, bytes); zeros when the profiler
 * is off. */
typedef struct prof_counts {
    unsigned long long calls;
    double seconds, flops, bytes;
} prof_counts;
prof_counts backend_profile_counts(backend *be, backend_op op, prof_layer layer);

/* The roofline time of everything counted so far: the sum over op calls of max(FLOPs / peak,
 * bytes / bandwidth), copies included. 0 when the profiler is off. */
double backend_profile_roofline_seconds(const backend *be);

/* Writes the report of everything profiled since start to out (what: a title line, e.g. "train, 40
 * steps"). Nothing when the profiler is off. */
void backend_profile_report(backend *be, const char *what, FILE *out);

#endif
