/* The decoder's state shared by core/nn/decoder_transformer.c (parameters, training forward and
 * backward) and core/nn/decoder_score.c (the beam-search step). Not for use outside these two. */
#ifndef ESPNET3_NN_DECODER_INTERNAL_H
#define ESPNET3_NN_DECODER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/nn/model.h"

/* One block's parameters, in the order of their name suffixes (dec_param_names). */
enum dec_param {
    DP_SA_Q_W, DP_SA_Q_B, DP_SA_K_W, DP_SA_K_B, DP_SA_V_W, DP_SA_V_B, DP_SA_O_W, DP_SA_O_B,
    DP_SRC_Q_W, DP_SRC_Q_B, DP_SRC_K_W, DP_SRC_K_B, DP_SRC_V_W, DP_SRC_V_B, DP_SRC_O_W, DP_SRC_O_B,
    DP_FF1_W, DP_FF1_B, DP_FF2_W, DP_FF2_B,
    DP_N1_W, DP_N1_B, DP_N2_W, DP_N2_B, DP_N3_W, DP_N3_B,
    DP_COUNT
};

/* The offset of a parameter the block does not have (the LM's source attention). */
#define DEC_NO_PARAM ((size_t)-1)

/* One block's activations of a teacher-forced forward (N = B * L rows, M = B * T memory rows). */
typedef struct dec_layer {
    float *ln1, *mean1, *rstd1, *q1, *k1, *v1, *att1, *y1, *h1; /* self-attention */
    float *ln2, *mean2, *rstd2, *q2, *km, *vm, *att2, *y2, *h2; /* source attention */
    float *ln3, *mean3, *rstd3, *f1, *h_out;                    /* feed-forward */
} dec_layer;

typedef struct dec_score dec_score; /* decoder_score.c */

struct decoder_acts {
    int nl, d, heads, ff, vocab;
    size_t embed, after_w, after_b, out_w, out_b; /* offsets into params / grads */
    size_t (*lay)[DP_COUNT];

    /* The last teacher-forced batch: ys_in / ys_out (host, B x L), target lengths L_b + 1. */
    int B, L, T, train;
    uint64_t seed;
    int *ids_in, *ys_out, *lens_in;
    const int *hlens;
    const float *mem;
    double denom; /* batch size, or the token count with length_normalized_loss */
    size_t cap_rows, cap_mem, cap_self, cap_src;
    float *x, *h0, *lnf, *meanf, *rstdf, *logp;
    dec_layer *layers;
    float *dh, *dtmp, *dq, *dk, *dv, *datt, *dff, *dln, *dlogits, *dkm, *dvm;

    dec_score *score; /* the beam-search step's workspace and caches, or NULL */

    /* The LM form (m->dims.lm): ESPnet2's TransformerLM. No source attention (DP_SRC_* and DP_N2_*
     * unused; DP_N1 / DP_N3 are the block's norm1 / norm2); its input layer replaces the decoder's
     * embedding: lm.embed (vocab x E) -> lm.encoder.embed.0 Linear(E, d) -> embed.1 LayerNorm
     * (torch's eps 1e-5) -> dropout -> ReLU (-> x * sqrt(d) + pe, dropout, with pos_enc
     * sinusoidal). Inputs are padded with 0, as ESPnet's LM collate pads them. */
    int lm, lm_pe, E;
    size_t in_w, in_b, in_ln_w, in_ln_b;
    float *e, *ea, *eln, *emean, *erstd, *er, *de; /* teacher-forced input layer and its gradient */
};

/* Parameter pointers of block l (params or grads as base). */
static inline float *dec_p(float *base, const decoder_acts *a, int l, enum dec_param p)
{
    ESP_CHECK(a->lay[l][p] != DEC_NO_PARAM);
    return base + a->lay[l][p];
}

void dec_score_free(backend *be, dec_score *s);

#endif
