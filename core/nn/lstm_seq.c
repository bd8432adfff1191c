/* One LSTM layer over a padded batch, forward and backward through time; see lstm_seq.h. */
#include "core/nn/lstm_seq.h"

void lstm_seq_forward(backend *be, const lstm_tensors *w, float *p, const lstm_seq_acts *a, int B, int L, int H)
{
    int G = 4 * H;
    be->fill(be, a->hbuf, 0, (size_t)B * H * sizeof(float)); /* the zero initial state */
    for (int t = 0; t < L; t++) {
        size_t s = (size_t)t * B;
        float *g = p + s * G;
        if (t) be->gemm(be, 0, 1, B, G, H, 1.0f, a->hbuf + s * H, H, w->weight_hh, H, 1.0f, g, G);
        be->lstm_cell_forward(be, a->hbuf + (s + B) * H, a->c + s * H, a->act + s * G, g, t ? a->c + (s - B) * H : NULL,
                              B, H);
    }
}

void lstm_seq_backward(backend *be, const lstm_tensors *w, const lstm_tensors *g, float *dgates, float *dh,
                       float *const dc[2], const lstm_seq_acts *a, int B, int L, int H)
{
    int G = 4 * H, cur = 0;
    for (int t = L - 1; t >= 0; t--) {
        size_t s = (size_t)t * B;
        /* dc[cur] holds the gradient of c_t from step t + 1 (none at the last step). */
        be->lstm_cell_backward(be, dgates + s * G, t ? dc[!cur] : NULL, dh + s * H, t < L - 1 ? dc[cur] : NULL,
                               a->act + s * G, t ? a->c + (s - B) * H : NULL, a->c + s * H, B, H);
        cur = !cur;
        if (t) /* dh_{t-1} += dgates_t W_hh */
            be->gemm(be, 0, 0, B, H, G, 1.0f, dgates + s * G, G, w->weight_hh, H, 1.0f, dh + (s - B) * H, H);
    }
    /* W_hh saw h_{t-1}: hbuf's rows 0 .. N - 1 (the zero state first). */
    be->linear_backward(be, NULL, g->weight_hh, g->bias_hh, dgates, a->hbuf, w->weight_hh, B * L, H, G, 0);
}

void lstm_seq_step(backend *be, const lstm_tensors *w, const float *x, int in, const float *hp, const float *cp,
                   float *hn, float *cn, float *g, float *g2, float *act, int k, int H)
{
    int G = 4 * H;
    be->linear_forward(be, g, x, w->weight_ih, w->bias_ih, k, in, G);
    if (hp) {
        be->linear_forward(be, g2, hp, w->weight_hh, w->bias_hh, k, H, G);
        be->add(be, g, g, g2, (size_t)k * G);
    } else { /* W_hh 0 = 0: the bias alone */
        for (int r = 0; r < k; r++) be->add(be, g + (size_t)r * G, g + (size_t)r * G, w->bias_hh, (size_t)G);
    }
    be->lstm_cell_forward(be, hn, cn, act, g, hp ? cp : NULL, k, H);
}
