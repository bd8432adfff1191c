/* Suite cuda_graph: the CUDA backend's graphs (be->graph_begin / graph_end / graph_launch), on a GPU
 * and on the emulated runtime (scripts/cuda_emu/run); without a CUDA device they skip. A small training step
 * (two linear layers with ReLU, the gradient of half the squared output, SGD over one flat parameter
 * buffer) captured once and replayed gives the parameters of the same step issued op by op, bit for
 * bit, over steps whose batches differ (the graph reads its input from device memory); a batch of
 * another shape (a new bucket) captures a graph of its own and leaves the first; and a step that
 * waits for the host (a reduction to a host value) cannot be captured. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/base/rng.h"
#include "core/compute/backend.h"

enum { IN = 8, HID = 16, OUT = 4, STEPS = 5 };
/* The flat parameters: w1, b1, w2, b2. */
enum { W1 = 0, B1 = W1 + HID * IN, W2 = B1 + HID, B2 = W2 + OUT * HID, NP = B2 + OUT };

typedef struct net {
    float *p, *g;            /* parameters, gradients */
    float *x, *y1, *h, *out; /* batch, activations (up to the batch size it was made for) */
    float *dh, *dy1;
} net;

static backend *open_cuda(void)
{
    if (backend_cuda_devices() <= 0) /* a skip, never a pass */
        cr_skip_test("no CUDA device (make CUDA=1 cuda-check runs it on the emulation; on a GPU, scripts/gpu/lease.sh)");
    esp_err err;
    backend *be = backend_open(BACKEND_CUDA, 0, 1, &err);
    cr_assert(be, "%s", err.msg);
    cr_assert(be->graph_begin && be->graph_end && be->graph_launch);
    return be;
}

static void fill_rand(float *h, size_t n, uint64_t seed)
{
    rng g;
    rng_init(&g, seed);
    for (size_t i = 0; i < n; i++) h[i] = (float)((double)(rng_next(&g) >> 11) * 0x1p-53 - 0.5);
}

static float *dev(backend *be, size_t n) { return be->alloc(be, n * sizeof(float)); }

static void net_make(backend *be, net *m, int nb)
{
    float init[NP];
    fill_rand(init, NP, 7);
    m->p = dev(be, NP), m->g = dev(be, NP);
    be->copy(be, m->p, init, sizeof init, BACKEND_HOST_TO_DEVICE);
    m->x = dev(be, (size_t)nb * IN), m->y1 = dev(be, (size_t)nb * HID), m->h = dev(be, (size_t)nb * HID);
    m->out = dev(be, (size_t)nb * OUT), m->dh = dev(be, (size_t)nb * HID), m->dy1 = dev(be, (size_t)nb * HID);
}

/* Batch k's inputs into the net's input buffer (outside any capture). */
static void load_batch(backend *be, net *m, int nb, int k)
{
    float *x = malloc((size_t)nb * IN * sizeof *x);
    fill_rand(x, (size_t)nb * IN, 100 + (uint64_t)k);
    be->copy(be, m->x, x, (size_t)nb * IN * sizeof *x, BACKEND_HOST_TO_DEVICE);
    free(x);
}

/* One step on nb rows: forward, the gradient of 0.5 * |out|^2 (out itself), backward, SGD. */
static void step(backend *be, net *m, int nb)
{
    float *p = m->p, *g = m->g;
    be->linear_forward(be, m->y1, m->x, p + W1, p + B1, nb, IN, HID);
    be->relu_forward(be, m->h, m->y1, (size_t)nb * HID);
    be->linear_forward(be, m->out, m->h, p + W2, p + B2, nb, HID, OUT);
    be->linear_backward(be, m->dh, g + W2, g + B2, m->out, m->h, p + W2, nb, HID, OUT, 0);
    be->relu_backward(be, m->dy1, m->dh, m->h, (size_t)nb * HID);
    be->linear_backward(be, NULL, g + W1, g + B1, m->dy1, m->x, p + W1, nb, IN, HID, 0);
    sgd_coefs c = {.one_minus_dampening = 1.0f, .neg_lr = -0.05f};
    be->sgd_update(be, p, NULL, g, NP, &c);
}

static void params_of(backend *be, const net *m, float *h)
{
    be->synchronize(be);
    be->copy(be, h, m->p, NP * sizeof(float), BACKEND_DEVICE_TO_HOST);
}

Test(cuda_graph, captured_step_gives_the_uncaptured_parameters_and_a_new_shape_a_new_graph)
{
    backend *be = open_cuda();
    enum { NB = 6, NB2 = 3 };
    net a, b;
    net_make(be, &a, NB);
    net_make(be, &b, NB);
    for (int k = 0; k < STEPS; k++) { /* op by op (this also grows the backend's scratch) */
        load_batch(be, &a, NB, k);
        step(be, &a, NB);
    }
    cr_assert_eq(be->graph_launch(be, NB), 0, "no graph was captured for this shape yet");
    be->graph_begin(be);
    step(be, &b, NB); /* recorded, not run */
    size_t launches = be->graph_end(be, NB);
    cr_assert_gt(launches, 6, "a step of 6 ops and their GEMMs in %zu launches?", launches);
    cr_log_info("cuda_graph: the step's graph holds %zu launches", launches);
    for (int k = 0; k < STEPS; k++) {
        load_batch(be, &b, NB, k);
        cr_assert_eq(be->graph_launch(be, NB), 1);
    }
    float pa[NP], pb[NP], init[NP];
    params_of(be, &a, pa);
    params_of(be, &b, pb);
    fill_rand(init, NP, 7);
    cr_assert(memcmp(pa, init, sizeof pa) != 0, "the steps changed no parameter");
    cr_assert(memcmp(pa, pb, sizeof pa) == 0, "the replayed steps' parameters differ from the op-by-op steps'");

    /* Another bucket: a batch of NB2 rows captures its own graph; the first stays. */
    net c;
    net_make(be, &c, NB2);
    load_batch(be, &c, NB2, 0);
    step(be, &c, NB2); /* op by op once, as the trainer's first batch of a bucket would */
    cr_assert_eq(be->graph_launch(be, NB2), 0);
    be->graph_begin(be);
    step(be, &c, NB2);
    cr_assert_eq(be->graph_end(be, NB2), launches, "the same ops on another shape, the same launches");
    cr_assert_eq(be->graph_launch(be, NB2), 1);
    cr_assert_eq(be->graph_launch(be, NB), 1);
    backend_close(be);
}

Test(cuda_graph, a_step_that_waits_for_the_host_is_not_captured)
{
    if (backend_cuda_devices() <= 0)
        cr_skip_test("no CUDA device (make CUDA=1 cuda-check runs it on the emulation; on a GPU, scripts/gpu/lease.sh)");
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) { /* CUDA is initialised only here, after the fork */
        esp_err err;
        backend *be = backend_open(BACKEND_CUDA, 0, 1, &err);
        if (!be) _exit(3);
        float *x = be->alloc(be, 1024 * sizeof(float));
        (void)be->sum_squares(be, x, 1024); /* once outside: its scratch is there before the capture */
        be->graph_begin(be);
        (void)be->sum_squares(be, x, 1024); /* its blocks' sums go to the host: refused in a capture */
        be->graph_end(be, 1);
        _exit(0);
    }
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) != 0 && WEXITSTATUS(st) != 3,
              "the capture of a step that reads a value on the host did not fail (status %d)", st);
}
