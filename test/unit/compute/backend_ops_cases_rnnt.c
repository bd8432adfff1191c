/* test_backend_ops cases of the RNN-T loss (backend_ops_test.h): the lattice's log-probs a frame
 * at a time (rnnt_logprobs), the loss from whole and chunked logits (rnnt_loss_forward) and the
 * logits gradient per chunk (rnnt_loss_backward): padded and concatenated labels, a repeated
 * label, blank 0 and blank V - 1, FastEmit, clamp on and off, an utterance with no labels and one of a
 * single frame, padding frames and prefixes past each utterance, the gradient in place over the
 * logits, and a vocabulary wide enough that the rows split over threads. */
#include <string.h>

#include "test/unit/compute/backend_ops_test.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

enum { RN_MAXB = 3, RN_MAXL = 8 };

static const struct {
    int B, T, U1, V, blank, stride, tc, in_place;
    float fastemit, clamp, dloss;
    int hlens[RN_MAXB], ylens[RN_MAXB], labels[RN_MAXB][RN_MAXL];
} RN_S[] = {
    /* padded labels (stride 5), a repeat (2 2), frames and prefixes past the utterances */
    {3, 7, 5, 6, 0, 5, 7, 0, 0.0f, 0.0f, 1.0f, {7, 5, 1}, {4, 2, 0}, {{1, 2, 2, 5}, {3, 4}, {0}}},
    /* concatenated labels, blank V - 1 (torchaudio's default), clamp, chunks of 4 frames, in place */
    {2, 9, 4, 11, 10, 0, 4, 1, 0.0f, 0.05f, 0.5f, {9, 6}, {3, 1}, {{0, 3, 9}, {7}}},
    /* U = 0 and T = 1: one node, the blank ends the path */
    {1, 1, 1, 5, 0, 1, 1, 0, 0.0f, 0.0f, 1.0f, {1}, {0}, {{0}}},
    /* FastEmit (lambda 0.5): padded labels, a repeat, chunks of 3 frames, in place */
    {3, 7, 5, 6, 0, 5, 3, 1, 0.5f, 0.0f, 1.0f, {7, 5, 1}, {4, 2, 0}, {{1, 2, 2, 5}, {3, 4}, {0}}},
    /* a wide vocabulary (the rows split over threads), chunks of 7 frames */
    {2, 20, 9, 700, 0, 8, 7, 0, 0.0f, 0.0f, 2.0f, {20, 13}, {8, 5}, {{5, 9, 9, 699, 1, 1, 7, 20}, {3, 1, 4, 1, 5}}},
};

typedef struct rn_in {
    float *logits; /* host (B, T, U1, V) */
    int *labels;   /* host: padded rows of `stride`, or concatenated */
} rn_in;

static size_t rn_row(int s)
{
    return (size_t)RN_S[s].U1 * RN_S[s].V;
}

static rn_in rn_inputs(tb_run *r, int s)
{
    int B = RN_S[s].B, stride = RN_S[s].stride;
    tb_shape(r, "B %d T %d U1 %d V %d blank %d stride %d chunk %d fastemit %g clamp %g", B, RN_S[s].T, RN_S[s].U1,
             RN_S[s].V, RN_S[s].blank, stride, RN_S[s].tc, (double)RN_S[s].fastemit, (double)RN_S[s].clamp);
    rn_in in;
    in.logits = tb_host_rand(r, (size_t)B * RN_S[s].T * rn_row(s), -4, 4);
    int total = 0;
    for (int b = 0; b < B; b++) total += RN_S[s].ylens[b];
    in.labels = tb_host(r, (size_t)(stride ? B * stride : total + 1) * sizeof(int));
    for (int b = 0, k = 0; b < B; b++)
        for (int i = 0; i < (stride ? stride : RN_S[s].ylens[b]); i++)
            in.labels[k++] = i < RN_S[s].ylens[b] ? RN_S[s].labels[b][i] : -1; /* padding: never read */
    return in;
}

/* The chunk of frames [t0, t0 + tc) of every utterance, (B, tc, U1, V), on the backend. */
static float *rn_chunk(tb_run *r, int s, const rn_in *in, int t0, int tc)
{
    size_t row = rn_row(s), n = (size_t)RN_S[s].B * tc * row;
    float *h = tb_host(r, n * sizeof(float));
    for (int b = 0; b < RN_S[s].B; b++)
        memcpy(h + (size_t)b * tc * row, in->logits + ((size_t)b * RN_S[s].T + t0) * row,
               (size_t)tc * row * sizeof(float));
    return tb_upload(r, h, n);
}

/* rnnt_logprobs over chunks of tc frames, then the forward. */
static double rn_forward(tb_run *r, int s, const rn_in *in, int tc, double *losses)
{
    backend *be = tb_be(r);
    for (int t0 = 0; t0 < RN_S[s].T; t0 += tc) {
        int n = RN_S[s].T - t0 < tc ? RN_S[s].T - t0 : tc;
        be->rnnt_logprobs(be, rn_chunk(r, s, in, t0, n), RN_S[s].hlens, in->labels, RN_S[s].ylens, RN_S[s].stride,
                          RN_S[s].B, RN_S[s].T, RN_S[s].U1, RN_S[s].V, RN_S[s].blank, t0, n);
    }
    return be->rnnt_loss_forward(be, losses, RN_S[s].hlens, RN_S[s].ylens, RN_S[s].B, RN_S[s].T, RN_S[s].U1);
}

static void rn_out_loss(tb_run *r, int s, int tc)
{
    rn_in in = rn_inputs(r, s);
    double losses[RN_MAXB];
    double loss = rn_forward(r, s, &in, tc, losses);
    tb_out_host(r, "loss", &loss, 1);
    tb_out_host(r, "losses", losses, (size_t)RN_S[s].B);
}

/* A frame at a time: every chunk boundary. */
static void rnnt_logprobs_run(tb_run *r, int s)
{
    rn_out_loss(r, s, 1);
}

static void rnnt_loss_forward_run(tb_run *r, int s)
{
    rn_out_loss(r, s, RN_S[s].tc);
}

/* The gradient chunk by chunk (the logits of each chunk uploaded again, as a joint recomputes
 * them), gathered into the (B, T, U1, V) layout on the host. */
static void rnnt_loss_backward_run(tb_run *r, int s)
{
    rn_in in = rn_inputs(r, s);
    int B = RN_S[s].B, T = RN_S[s].T, tc = RN_S[s].tc;
    size_t row = rn_row(s), n = (size_t)B * T * row;
    rn_forward(r, s, &in, tc, NULL);
    backend *be = tb_be(r);
    double *g = tb_host(r, n * sizeof(double));
    float *h = tb_host(r, (size_t)B * tc * row * sizeof(float));
    for (int t0 = 0; t0 < T; t0 += tc) {
        int k = T - t0 < tc ? T - t0 : tc;
        size_t nc = (size_t)B * k * row;
        float *x = rn_chunk(r, s, &in, t0, k);
        float *dx = RN_S[s].in_place ? x : tb_rand(r, nc, -9, 9); /* every element overwritten */
        be->rnnt_loss_backward(be, dx, x, RN_S[s].hlens, in.labels, RN_S[s].ylens, RN_S[s].stride, B, T, RN_S[s].U1,
                               RN_S[s].V, RN_S[s].blank, t0, k, RN_S[s].fastemit, RN_S[s].clamp, RN_S[s].dloss);
        be->synchronize(be);
        be->copy(be, h, dx, nc * sizeof(float), BACKEND_DEVICE_TO_HOST);
        for (int b = 0; b < B; b++)
            for (size_t i = 0; i < (size_t)k * row; i++)
                g[((size_t)b * T + t0) * row + i] = h[(size_t)b * k * row + i];
    }
    tb_out_host(r, "dlogits", g, n);
}

const tb_case tb_case_rnnt_logprobs = {LEN(RN_S), TOL_ELEM, rnnt_logprobs_run};
const tb_case tb_case_rnnt_loss_forward = {LEN(RN_S), TOL_ELEM, rnnt_loss_forward_run};
const tb_case tb_case_rnnt_loss_backward = {LEN(RN_S), TOL_ACC, rnnt_loss_backward_run};
