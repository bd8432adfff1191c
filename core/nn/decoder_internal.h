/* The decoder's state shared by core/nn/decoder_transformer.c (parameters, training forward and
 * backward) and core/nn/decoder_score.c (the beam-search step). Not for use outside these two. */
#ifndef ESPNET3_NN_DECODER_INTERNAL_H
#define ESPNET3_NN_DECODER_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/nn/model.h"

/* One block's activations of a teacher-forced forward (N = B * L rows, M = B * T memory rows). */
typedef struct dec_layer {
    float *ln1, *mean1, *rstd1, *q1, *k1, *v1, *att1, *y1, *h1; /* self-attention */
    float *ln2, *mean2, *rstd2, *q2, *km, *vm, *att2, *y2, *h2; /* source attention */
    float *ln3, *mean3, *rstd3, *f1, *h_out;                    /* feed-forward */
} dec_layer;

typedef struct dec_score dec_score; /* decoder_score.c */

struct decoder_acts {
    int nl, d, heads, ff, vocab; /* the parameters: m->w.decoder, m->g.decoder */

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

    /* The LM form (m->dims.lm): ESPnet2's TransformerLM. No source attention (src_attn and norm2
     * unused; norm1 / norm3 are the block's norm1 / norm2); its input layer replaces the decoder's
     * embedding: lm.embed (vocab x E) -> lm.encoder.embed.0 Linear(E, d) -> embed.1 LayerNorm
     * (torch's eps 1e-5) -> dropout -> ReLU (-> x * sqrt(d) + pe, dropout, with pos_enc
     * sinusoidal). Inputs are padded with 0, as ESPnet's LM collate pads them. */
    int lm, lm_pe, E;
    float *e, *ea, *eln, *emean, *erstd, *er, *de; /* teacher-forced input layer and its gradient */
};

void dec_score_free(backend *be, dec_score *s);

#endif
