/* One GRU layer over a padded batch, forward and backward through time; see gru_seq.h. */
#include "core/nn/gru_seq.h"

void gru_seq_forward(backend *be, const lstm_tensors *w, const float *p, const lstm_seq_acts *a, float *gh, int B,
                     int L, int H)
{
    int G = 3 * H;
    be->fill(be, a->hbuf, 0, (size_t)B * H * sizeof(float)); /* the zero initial state */
    for (int t = 0; t < L; t++) {
        size_t s = (size_t)t * B;
        const float *hp = a->hbuf + s * H;
        be->linear_forward(be, gh, hp, w->weight_hh, w->bias_hh, B, H, G); /* at t 0: b_hh alone */
        be->gru_cell_forward(be, a->hbuf + (s + B) * H, a->act + s * 4 * H, p + s * G, gh, t ? hp : NULL, B, H);
    }
}

void gru_seq_backward(backend *be, const lstm_tensors *w, const lstm_tensors *g, float *dgi, float *dgh, float *dh,
                      float *dhp, const lstm_seq_acts *a, int B, int L, int H)
{
    int G = 3 * H;
    for (int t = L - 1; t >= 0; t--) {
        size_t s = (size_t)t * B;
        be->gru_cell_backward(be, dgi + s * G, dgh + s * G, t ? dhp : NULL, dh + s * H, a->act + s * 4 * H,
                              t ? a->hbuf + s * H : NULL, B, H);
        if (t) { /* dh_{t-1} += dh_t z_t + dgh_t W_hh */
            float *dprev = dh + (s - B) * H;
            be->add(be, dprev, dprev, dhp, (size_t)B * H);
            be->gemm(be, 0, 0, B, H, G, 1.0f, dgh + s * G, G, w->weight_hh, H, 1.0f, dprev, H);
        }
    }
    /* W_hh saw h_{t-1}: hbuf's rows 0 .. N - 1 (the zero state first). */
    be->linear_backward(be, NULL, g->weight_hh, g->bias_hh, dgh, a->hbuf, w->weight_hh, B * L, H, G, 0);
}

void gru_seq_step(backend *be, const lstm_tensors *w, const float *x, int in, const float *hp, float *hn, float *gi,
                  float *gh, float *act, int k, int H)
{
    int G = 3 * H;
    be->linear_forward(be, gi, x, w->weight_ih, w->bias_ih, k, in, G);
    if (hp) {
        be->linear_forward(be, gh, hp, w->weight_hh, w->bias_hh, k, H, G);
    } else { /* W_hh 0 = 0: the bias alone */
        be->fill(be, gh, 0, (size_t)k * G * sizeof(float));
        for (int r = 0; r < k; r++) be->add(be, gh + (size_t)r * G, gh + (size_t)r * G, w->bias_hh, (size_t)G);
    }
    be->gru_cell_forward(be, hn, act, gi, gh, hp, k, H);
}
