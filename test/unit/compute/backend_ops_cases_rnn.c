/* test_backend_ops cases of the recurrent cells (backend_ops_test.h), the LSTM's and the GRU's: one
 * row and many, H odd and past one exp block of the CPU's loop (512), the first step (c_prev /
 * h_prev NULL), the LSTM's last step (dc NULL) and no dc_prev / dh_prev wanted. The backward's
 * inputs are a real forward's (act and c computed from random gates in double on the host), so the
 * gradients have the magnitudes a training step sees. */
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "test/unit/compute/backend_ops_test.h"

#define LEN(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const struct {
    int n, H;
    int c_prev, dc, dc_prev; /* 0: that buffer is NULL */
} LSTM_S[] = {
    {1, 1, 1, 1, 1}, {1, 7, 0, 0, 1}, {5, 13, 1, 0, 0}, {33, 21, 1, 1, 1}, {3, 600, 0, 1, 0}, {2, 517, 1, 1, 1},
};

static void lstm_shape(tb_run *r, int s)
{
    tb_shape(r, "n %d H %d c_prev %d dc %d dc_prev %d", LSTM_S[s].n, LSTM_S[s].H, LSTM_S[s].c_prev, LSTM_S[s].dc,
             LSTM_S[s].dc_prev);
}

static void lstm_cell_forward_run(tb_run *r, int s)
{
    int n = LSTM_S[s].n, H = LSTM_S[s].H;
    size_t nh = (size_t)n * H;
    lstm_shape(r, s);
    float *gates = tb_rand(r, 4 * nh, -5, 5), *c_prev = LSTM_S[s].c_prev ? tb_rand(r, nh, -2, 2) : NULL;
    /* outputs start as garbage: the op overwrites them */
    float *h = tb_rand(r, nh, -9, 9), *c = tb_rand(r, nh, -9, 9), *act = tb_rand(r, 4 * nh, -9, 9);
    tb_be(r)->lstm_cell_forward(tb_be(r), h, c, act, gates, c_prev, n, H);
    tb_out(r, "h", h, nh);
    tb_out(r, "c", c, nh);
    tb_out(r, "act", act, 4 * nh);
}

static double sigmoid(double x)
{
    return 1 / (1 + exp(-x));
}

static void lstm_cell_backward_run(tb_run *r, int s)
{
    int n = LSTM_S[s].n, H = LSTM_S[s].H;
    size_t nh = (size_t)n * H;
    lstm_shape(r, s);
    /* a forward in double on the host: act and c from random gates and c_prev */
    float *hg = tb_host_rand(r, 4 * nh, -4, 4), *hcp = LSTM_S[s].c_prev ? tb_host_rand(r, nh, -2, 2) : NULL;
    float *hact = tb_host(r, 4 * nh * sizeof(float)), *hc = tb_host(r, nh * sizeof(float));
    for (int row = 0; row < n; row++)
        for (int u = 0; u < H; u++) {
            size_t o = (size_t)row * H + u, g = 4 * (size_t)row * H + u;
            double si = sigmoid(hg[g]), sf = sigmoid(hg[g + H]), tg = tanh(hg[g + 2 * H]), so = sigmoid(hg[g + 3 * H]);
            hact[g] = (float)si, hact[g + H] = (float)sf, hact[g + 2 * H] = (float)tg, hact[g + 3 * H] = (float)so;
            hc[o] = (float)(sf * (hcp ? hcp[o] : 0) + si * tg);
        }
    float *act = tb_upload(r, hact, 4 * nh), *c = tb_upload(r, hc, nh), *c_prev = hcp ? tb_upload(r, hcp, nh) : NULL;
    float *dh = tb_rand(r, nh, -1, 1), *dc = LSTM_S[s].dc ? tb_rand(r, nh, -1, 1) : NULL;
    float *dgates = tb_rand(r, 4 * nh, -9, 9), *dc_prev = LSTM_S[s].dc_prev ? tb_rand(r, nh, -9, 9) : NULL;
    tb_be(r)->lstm_cell_backward(tb_be(r), dgates, dc_prev, dh, dc, act, c_prev, c, n, H);
    tb_out(r, "dgates", dgates, 4 * nh);
    if (dc_prev) tb_out(r, "dc_prev", dc_prev, nh);
}

const tb_case tb_case_lstm_cell_forward = {LEN(LSTM_S), TOL_ELEM, lstm_cell_forward_run};
const tb_case tb_case_lstm_cell_backward = {LEN(LSTM_S), TOL_ELEM, lstm_cell_backward_run};

/* ---- the GRU cell */

static const struct {
    int n, H;
    int h_prev, dh_prev; /* 0: that buffer is NULL */
} GRU_S[] = {
    {1, 1, 1, 1}, {1, 7, 0, 1}, {5, 13, 1, 0}, {33, 21, 1, 1}, {3, 600, 0, 0}, {2, 517, 1, 1},
};

static void gru_shape(tb_run *r, int s)
{
    tb_shape(r, "n %d H %d h_prev %d dh_prev %d", GRU_S[s].n, GRU_S[s].H, GRU_S[s].h_prev, GRU_S[s].dh_prev);
}

static void gru_cell_forward_run(tb_run *r, int s)
{
    int n = GRU_S[s].n, H = GRU_S[s].H;
    size_t nh = (size_t)n * H;
    gru_shape(r, s);
    float *gi = tb_rand(r, 3 * nh, -5, 5), *gh = tb_rand(r, 3 * nh, -5, 5);
    float *h_prev = GRU_S[s].h_prev ? tb_rand(r, nh, -1, 1) : NULL;
    /* outputs start as garbage: the op overwrites them */
    float *h = tb_rand(r, nh, -9, 9), *act = tb_rand(r, 4 * nh, -9, 9);
    tb_be(r)->gru_cell_forward(tb_be(r), h, act, gi, gh, h_prev, n, H);
    tb_out(r, "h", h, nh);
    tb_out(r, "act", act, 4 * nh);
}

static void gru_cell_backward_run(tb_run *r, int s)
{
    int n = GRU_S[s].n, H = GRU_S[s].H;
    size_t nh = (size_t)n * H;
    gru_shape(r, s);
    /* a forward in double on the host: act from random gates */
    float *hi = tb_host_rand(r, 3 * nh, -4, 4), *hh = tb_host_rand(r, 3 * nh, -4, 4);
    float *hact = tb_host(r, 4 * nh * sizeof(float));
    for (int row = 0; row < n; row++)
        for (int u = 0; u < H; u++) {
            size_t g = 3 * (size_t)row * H + u, a = 4 * (size_t)row * H + u;
            double rg = sigmoid((double)hi[g] + hh[g]), zg = sigmoid((double)hi[g + H] + hh[g + H]);
            hact[a] = (float)rg, hact[a + H] = (float)zg;
            hact[a + 2 * H] = (float)tanh(hi[g + 2 * H] + rg * hh[g + 2 * H]), hact[a + 3 * H] = hh[g + 2 * H];
        }
    float *act = tb_upload(r, hact, 4 * nh), *h_prev = GRU_S[s].h_prev ? tb_rand(r, nh, -1, 1) : NULL;
    float *dh = tb_rand(r, nh, -1, 1);
    float *dgi = tb_rand(r, 3 * nh, -9, 9), *dgh = tb_rand(r, 3 * nh, -9, 9);
    float *dh_prev = GRU_S[s].dh_prev ? tb_rand(r, nh, -9, 9) : NULL;
    tb_be(r)->gru_cell_backward(tb_be(r), dgi, dgh, dh_prev, dh, act, h_prev, n, H);
    tb_out(r, "dgi", dgi, 3 * nh);
    tb_out(r, "dgh", dgh, 3 * nh);
    if (dh_prev) tb_out(r, "dh_prev", dh_prev, nh);
}

const tb_case tb_case_gru_cell_forward = {LEN(GRU_S), TOL_ELEM, gru_cell_forward_run};
const tb_case tb_case_gru_cell_backward = {LEN(GRU_S), TOL_ELEM, gru_cell_backward_run};
