/* Peak memory and time of the RNN-T loss' forward and backward on the CPU backend (one
 * utterance of T frames and U labels over V tokens), the logits given whole (TC = T: the
 * (1, T, U+1, V) tensor held, its gradient written over it) or a chunk of TC frames at a time (a
 * caller-supplied joint computes each chunk's logits for rnnt_logprobs, then again for the
 * backward, whose gradient it consumes at once). The joint here is additive, logits(t, u) =
 * enc(t) + dec(u) (k2's "simple" joint), cheap enough that the loss' own memory and time show;
 * its backward sums the gradient into enc and dec, so both forms must print the same checksums.
 *   usage: rnnt_memory T U V TC THREADS      (e.g. 500 100 5000 500 2, then 500 100 5000 25 2) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/base/progress.h"
#include "core/compute/backend.h"

static unsigned lcg(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

typedef struct joint {
    const float *enc, *dec; /* (T, V), (U1, V) */
    float *denc, *ddec;
    int U1, V;
} joint;

/* Frames [t0, t0 + tc) of the logits, (1, tc, U1, V). */
static void joint_forward(const joint *j, float *out, int t0, int tc)
{
    for (int t = 0; t < tc; t++)
        for (int u = 0; u < j->U1; u++) {
            float *o = out + ((size_t)t * j->U1 + u) * j->V;
            const float *e = j->enc + (size_t)(t0 + t) * j->V, *d = j->dec + (size_t)u * j->V;
            for (int v = 0; v < j->V; v++) o[v] = e[v] + d[v];
        }
}

static void joint_backward(const joint *j, const float *g, int t0, int tc)
{
    for (int t = 0; t < tc; t++)
        for (int u = 0; u < j->U1; u++) {
            const float *gr = g + ((size_t)t * j->U1 + u) * j->V;
            float *de = j->denc + (size_t)(t0 + t) * j->V, *dd = j->ddec + (size_t)u * j->V;
            for (int v = 0; v < j->V; v++) de[v] += gr[v], dd[v] += gr[v];
        }
}

int main(int argc, char **argv)
{
    if (argc != 6) {
        fprintf(stderr, "usage: rnnt_memory T U V TC THREADS\n");
        return 2;
    }
    int T = atoi(argv[1]), U = atoi(argv[2]), V = atoi(argv[3]), tc = atoi(argv[4]), threads = atoi(argv[5]);
    if (T < 1 || U < 0 || V < 2 || tc < 1 || tc > T || threads < 1) {
        fprintf(stderr, "rnnt_memory: need T >= 1, U >= 0, V >= 2, 1 <= TC <= T, THREADS >= 1\n");
        return 2;
    }
    esp_err err;
    backend *be = backend_open(BACKEND_CPU, 0, threads, &err);
    if (!be) {
        fprintf(stderr, "rnnt_memory: %s\n", err.msg);
        return 1;
    }
    int U1 = U + 1, hlens[1] = {T}, ylens[1] = {U};
    int *labels = malloc(((size_t)U + 1) * sizeof *labels);
    float *enc = malloc((size_t)T * V * sizeof *enc), *dec = malloc((size_t)U1 * V * sizeof *dec);
    float *denc = calloc((size_t)T * V, sizeof *denc), *ddec = calloc((size_t)U1 * V, sizeof *ddec);
    unsigned s = 1; /* a fixed LCG: enc and dec in [-2, 2), labels in [1, V) */
    for (size_t i = 0; i < (size_t)T * V; i++) enc[i] = (float)(lcg(&s) % 4000) / 1000 - 2;
    for (size_t i = 0; i < (size_t)U1 * V; i++) dec[i] = (float)(lcg(&s) % 4000) / 1000 - 2;
    for (int u = 0; u < U; u++) labels[u] = 1 + (int)(lcg(&s) % (unsigned)(V - 1));
    joint j = {enc, dec, denc, ddec, U1, V};
    double base = peak_rss_mib();

    size_t chunk = (size_t)tc * U1 * V;
    float *x = be->alloc(be, chunk * sizeof *x);
    double t_start = now_seconds();
    for (int t0 = 0; t0 < T; t0 += tc) {
        int k = T - t0 < tc ? T - t0 : tc;
        joint_forward(&j, x, t0, k);
        be->rnnt_logprobs(be, x, hlens, labels, ylens, U, 1, T, U1, V, 0, t0, k);
    }
    double loss = be->rnnt_loss_forward(be, NULL, hlens, ylens, 1, T, U1);
    double t_fwd = now_seconds();
    for (int t0 = 0; t0 < T; t0 += tc) {
        int k = T - t0 < tc ? T - t0 : tc;
        if (tc < T || t0 > 0) joint_forward(&j, x, t0, k); /* whole: the forward's logits are still there */
        be->rnnt_loss_backward(be, x, x, hlens, labels, ylens, U, 1, T, U1, V, 0, t0, k, 0.0f, 0.0f, 1.0f);
        joint_backward(&j, x, t0, k);
    }
    double t_bwd = now_seconds();
    double ce = 0, cd = 0;
    for (size_t i = 0; i < (size_t)T * V; i++) ce += denc[i];
    for (size_t i = 0; i < (size_t)U1 * V; i++) cd += (double)ddec[i] * (double)(i % 7);
    printf("T %d U %d V %d chunk %d threads %d: loss %.6f  logits buffer %.1f MiB  peak RSS %.1f MiB "
           "(%.1f before the loss)  forward %.2f s  backward %.2f s  checksums %.9g %.9g\n",
           T, U, V, tc, threads, loss, (double)chunk * sizeof(float) / 1048576.0, peak_rss_mib(), base,
           t_fwd - t_start, t_bwd - t_fwd, ce, cd);
    be->free(be, x);
    backend_close(be);
    free(labels), free(enc), free(dec), free(denc), free(ddec);
    return 0;
}
