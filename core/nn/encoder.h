/* The encoder block stacks behind asr_model (private to core/nn): model.c runs the embedding
 * (Conv2dSubsampling and the positional scaling) and the head (after_norm, CTC); an encoder runs
 * its blocks between them, with activations it owns (m->enc). One implementation per file:
 * core/nn/encoder_transformer.c, core/nn/encoder_conformer.c, core/nn/encoder_ebranchformer.c (with the
 * pieces the last two share in core/nn/encoder_blocks.c), core/nn/encoder_contextual.c,
 * core/nn/encoder_body.c (the asr_transducer task's blocks of different kinds, on their kinds' code); the
 * first and the last run the Transformer layer of core/nn/encoder_tblock.c (the latter over blocks
 * of frames), the Conformer and the last (contextual_block_conformer) the Conformer block. */
#ifndef ESPNET3_NN_ENCODER_H
#define ESPNET3_NN_ENCODER_H

#include <stdint.h>

#include "core/nn/model.h"

/* Dropout sites: each has its own stream so masks are independent and reproducible. A block has
 * ten streams (site 0..9); the transformer's numbers are the ones its checkpoints were made with. */
enum {
    STREAM_POS = 1, STREAM_CTC = 2, STREAM_POS_EMB = 3, STREAM_LAYER_DROP = 4, STREAM_EMBED = 5, STREAM_PRE = 6,
    STREAM_BLOCKDROP = 7, /* the asr_transducer Encoder's blockdrop draws (core/nn/encoder_body.c) */
    STREAM_CHUNK = 8,     /* its dynamic chunk size (body_chunk_size) */
    STREAM_INTERCTC0 = 10, /* + k: the CTC dropout of intermediate layer k (< MODEL_MAX_INTERCTC) */
    STREAM_BLOCK0 = 100
};
static inline uint64_t block_stream(int l, int site) { return STREAM_BLOCK0 + 10 * (uint64_t)l + (uint64_t)site; }

/* The dropout rates of the current forward (0 outside training). */
typedef struct enc_rates {
    float pd, pp, pa;  /* dropout_rate, positional_dropout_rate, attention_dropout_rate */
} enc_rates;

static inline enc_rates enc_rates_of(const asr_model *m)
{
    int t = m->train;
    return (enc_rates){t ? m->rates.dropout : 0, t ? m->rates.pos_dropout : 0, t ? m->rates.att_dropout : 0};
}

typedef struct enc_act_decl enc_act_decl;
typedef struct encoder_impl {
    const enc_act_decl *acts; /* its activations, for the lifecycle below */
    /* m->h0 (B, T2, d) through the blocks; returns the last block's output. */
    const float *(*forward)(asr_model *m);
    /* On entry m->dh holds the gradient of the forward's output; on return that of m->h0. */
    void (*backward)(asr_model *m);
} encoder_impl;

/* The activations' lifecycle, one for the four encoders (core/nn/encoder_acts.c). An encoder
 * declares its buffers (enc_act_decl); enc_acts_ensure makes m->enc and allocates them for B x T2
 * frames (kept while later batches fit, only ever enlarged; block 0's shared by every block when
 * decoding, backward work only for training); enc_acts_destroy frees them and m->enc. */
typedef struct enc_act_shape {
    /* The blocks' seqs sequences of t rows: rows = seqs x t; att = seqs x heads x t x t; prows =
     * 2 t - 1 relative positions (0: none). frames: the batch's B x T2. Without a layout the
     * sequences are the utterances (seqs = B, t = T2). */
    size_t rows, att, prows, frames, seqs;
} enc_act_shape;
enum { ENC_ACT_MAX = 64 };
/* Buffers: where each one's pointer lives and its size in floats. */
typedef struct enc_act_list {
    float **slot[ENC_ACT_MAX];
    size_t n[ENC_ACT_MAX];
    int k;
} enc_act_list;
void enc_act_add(enc_act_list *l, float **slot, size_t n);
struct enc_act_decl {
    size_t enc_size;   /* the encoder's struct encoder_acts, whose first member is its enc_act_store */
    size_t block_size; /* the encoder's per-block struct */
    int positions;     /* the blocks use the relative encoding (enc_act_shape.prows) */
    /* What block (one of the encoder's structs) keeps for the backward, at shape s. */
    void (*block)(const model_dims *d, void *block, enc_act_list *kept, enc_act_shape s);
    /* The forward's buffers the blocks share (fwd) and the backward's work, in m->enc. */
    void (*shared)(asr_model *m, enc_act_list *fwd, enc_act_list *work, enc_act_shape s);
    /* How the blocks lay out B x T2 frames: seqs sequences of t rows (NULL: the utterances). */
    void (*layout)(const model_dims *d, int B, int T2, int *seqs, int *t);
    /* Drops what else m->enc keeps for a shape (NULL: nothing): when m->enc is made and whenever
     * its activations are freed. */
    void (*reset)(asr_model *m);
    /* The blocks differ (core/nn/encoder_body.c): block gets each block's dims (model_block_dims)
     * and each block has its own buffers when decoding too. */
    int per_block;
};
/* An encoder's blocks (d->blocks structs of decl->block_size) and the shape they fit. */
typedef struct enc_act_store {
    void *blocks;
    enc_act_shape cap;
} enc_act_store;
void enc_acts_ensure(asr_model *m, const enc_act_decl *decl, int B, int T2);
/* What the blocks of the relative-position encoders (Conformer, E-Branchformer) share: the relative
 * encoding after dropout (2 t - 1, d), and the attention and feed-forward part of the backward's
 * work. enc_rel_shared_decl declares them, for an enc_act_decl's shared. */
typedef struct enc_rel_shared {
    float *pos;
    float *dq, *dk, *dv, *datt, *dff, *dln, *dp;
    float *dpos; /* NULL; where the attention adds the gradient of pos (encoder_body.c's conv1d blocks) */
} enc_rel_shared;
void enc_rel_shared_decl(const model_dims *d, enc_rel_shared *r, enc_act_list *fwd, enc_act_list *work,
                         enc_act_shape s);
/* The forward's relative encoding of m's T2 frames into r->pos, after its dropout (nothing without
 * relative positions). */
void enc_rel_pos_forward(asr_model *m, enc_rel_shared *r);
/* linear_pos' outputs per relative position: d, or one scalar per head with simplified_att. */
static inline int enc_pos_cols(const model_dims *d) { return d->simplified_att ? d->heads : d->d; }
void enc_acts_destroy(asr_model *m, const enc_act_decl *decl);

/* The rows the block pieces below run on: nb sequences of t rows, keys masked past lens[i]; tmp:
 * scratch for a branch's output, dh: the gradient flowing back (each nb x t x d). blocks: the
 * contextual block layout (core/nn/encoder_contextual.c), where row 0 of a sequence (the context
 * handed over) attends to nothing, as ESPnet's mask_online, and no row is padding. enc_rows_of: the
 * batch's utterances. */
typedef struct enc_rows {
    int nb, t;
    const int *lens;
    float *tmp, *dh;
    int blocks;
} enc_rows;
static inline enc_rows enc_rows_of(asr_model *m) { return (enc_rows){m->B, m->T2, m->hlens, m->dtmp, m->dh, 0}; }

/* Block pieces shared by the Conformer and E-Branchformer encoders (core/nn/encoder_blocks.c).
 * act: ACT_RELU or swish; the backward takes the activation's input x. */
void enc_act_forward(backend *be, int act, float *y, const float *x, size_t n);
void enc_act_backward(backend *be, int act, float *dx, const float *dy, const float *x, size_t n);
/* out = x + s * drop(w_2(drop(act(w_1(LN(x)))))) for block l's feed_forward_macaron with
 * norm_ff_macaron (macaron 1) or its feed_forward with norm_ff (macaron 0), s = 0.5 with
 * macaron_style, else 1; r->tmp is scratch. act: activation_type, but ReLU in the contextual block
 * Conformer, which builds its PositionwiseFeedForward without one (torch's ReLU default). */
void enc_ff_forward(asr_model *m, const enc_rows *r, int l, int macaron, float *ln, float *mean, float *rstd,
                    float *pre, float *post, const float *x, float *out, int site_in, int site_out);
/* The backward of enc_ff_forward: r->dh (the gradient of out) gains the branch's gradient of x;
 * dff (N, ff) and dln (N, d) are scratch. */
void enc_ff_backward(asr_model *m, const enc_rows *r, int l, int macaron, const float *ln, const float *mean,
                     const float *rstd, const float *pre, const float *post, const float *x, int site_in,
                     int site_out, float *dff, float *dln);
/* A block's self-attention activations (pl only with rel_pos) and the backward's work. */
typedef struct enc_attn_bufs {
    float *ln, *mean, *rstd, *q, *k, *v, *pl, *att, *atty;
} enc_attn_bufs;
typedef struct enc_attn_work {
    const float *pos; /* the relative encoding the forward used (2 t - 1, d) */
    float *dq, *dk, *dv, *datt, *dp, *dln;
    float *dpos;      /* NULL, or gains the gradient of pos (linear_pos^T of the position scores') */
} enc_attn_work;
/* out (N, d) = linear_out(MHA(LN_norm_mha(x))) for block l's self-attention (self_attn / attn),
 * relative (pos) or absolute positions, attention dropout on stream site; no output dropout. */
void enc_attn_forward(asr_model *m, const enc_rows *r, int l, const enc_attn_bufs *b, const float *pos,
                      const float *x, float *out, int site);
/* enc_attn_forward while m->stream_chunk is set (core/nn/encoder_chunk.c): block l's self-attention of the
 * chunk's t rows x over the keys of the left context before them and theirs; out gets t rows. */
void enc_attn_chunk_forward(asr_model *m, int l, const float *x, float *out, int t);
/* enc_dwconv_forward of a causal convolution while m->stream_chunk is set: the chunk's t rows x of c
 * channels after the last k - 1 inputs of block l's convolution `conv` (zeros at the start of the
 * stream), which then keeps the last k - 1 of those inputs and x's (core/nn/encoder_chunk.c). */
void enc_dwconv_chunk_forward(asr_model *m, int l, int conv, float *y, const float *x, const float *w,
                              const float *b, int t, int c, int k);
/* dy: the gradient of enc_attn_forward's out (changed: the rows that attend to nothing); r->dh gains
 * the branch's gradient of x. */
void enc_attn_backward(asr_model *m, const enc_rows *r, int l, const enc_attn_bufs *b, const enc_attn_work *w,
                       const float *x, float *dy, int site);

/* The Conformer block (core/nn/encoder_conformer.c; ConformerEncoder's EncoderLayer, and the
 * contextual block Conformer's ContextualBlockEncoderLayer over blocks of frames): what its forward
 * keeps, the backward's work of its convolution module, and the two passes on rows r (pos: the
 * relative encoding with rel_pos). cblock_forward returns the block's output; cblock_backward takes
 * in r->dh the gradient of that output and leaves there that of x (rel: the attention and
 * feed-forward work, enc_rel_shared). */
typedef struct cblock {
    float *ln_m, *mean_m, *rstd_m, *fm_pre, *fm_act, *h_m;                  /* macaron feed-forward */
    float *ln_a, *mean_a, *rstd_a, *q, *k, *v, *pl, *att, *atty, *h_a;      /* self-attention */
    float *ln_c, *mean_c, *rstd_c, *pw1, *glu, *dwo, *bn_mean, *bn_rstd, *bn, *cact, *h_c; /* conv */
    float *ln_f, *mean_f, *rstd_f, *f_pre, *f_act, *h_f;                    /* feed-forward */
    float *mean_o, *rstd_o, *h_out;                                          /* norm_final */
} cblock;
typedef struct cblock_work {
    float *d2, *dc, *dc2;
} cblock_work;
void cblock_kept(const model_dims *d, cblock *b, enc_act_list *kept, enc_act_shape s);
void cblock_work_decl(const model_dims *d, cblock_work *w, enc_act_list *work, size_t rows);
float *cblock_forward(asr_model *m, const enc_rows *r, int l, cblock *b, const float *pos, const float *x);
void cblock_backward(asr_model *m, const enc_rows *r, int l, const cblock *b, const enc_rel_shared *rel,
                     const cblock_work *w, const float *x);

/* The E-Branchformer block (core/nn/encoder_ebranchformer.c; also the asr_transducer task's
 * EBranchformer and Branchformer blocks) on the batch's utterances (r: enc_rows_of): what its
 * forward keeps, the backward's work of its merge and cgMLP branch, and the two passes, as the
 * Conformer block's above (eblock_forward returns h_out; out and dropped are the encoder's). */
typedef struct eblock {
    float *ln_m, *mean_m, *rstd_m, *fm_pre, *fm_act, *h_m;                  /* macaron feed-forward */
    float *ln_a, *mean_a, *rstd_a, *q, *k, *v, *pl, *att, *atty;            /* attention branch */
    float *ln_g, *mean_g, *rstd_g, *pr, *pg, *r, *gg, *gn, *mean_n, *rstd_n; /* cgMLP branch */
    float *gc, *gl, *ga, *gm;
    float *br, *cat, *fus, *h_mg;                                            /* merge */
    float *ln_f, *mean_f, *rstd_f, *f_pre, *f_act, *h_f;                    /* feed-forward */
    float *mean_o, *rstd_o, *h_out;                                          /* norm_final */
    const float *out; /* the block's output of the last forward (its input when dropped) */
    int dropped;      /* layer drop of the last forward */
} eblock;
typedef struct eblock_work {
    float *d2a, *d2b, *e1, *e2, *e3;
} eblock_work;
void eblock_kept(const model_dims *d, eblock *b, enc_act_list *kept, enc_act_shape s);
void eblock_work_decl(const model_dims *d, eblock_work *w, enc_act_list *work, size_t rows);
float *eblock_forward(asr_model *m, const enc_rows *r, int l, eblock *b, const float *pos, const float *x);
void eblock_backward(asr_model *m, const enc_rows *r, int l, const eblock *b, const enc_rel_shared *rel,
                     const eblock_work *w, const float *x0);

/* The Transformer encoder layer on nb sequences of t rows with key lengths lens (core/nn/
 * encoder_tblock.c; the Transformer and contextual block encoders run their layers through it): its activations (each N = nb x t rows; att nb x heads x t x t) and the
 * backward's work (tmp also the forward's scratch, N x d; dff N x ff; the others N x d). The
 * backward takes in dh the gradient of h_out and leaves there that of x. */
typedef struct tblock_acts {
    float *ln1, *mean1, *rstd1, *q, *k, *v, *att, *atty, *h1, *ln2, *mean2, *rstd2, *f1, *h_out;
} tblock_acts;
typedef struct tblock_work {
    float *tmp, *dq, *dk, *dv, *datt, *dff, *dln;
} tblock_work;
void tblock_forward(asr_model *m, int l, const tblock_acts *b, const float *x, float *tmp, int nb, int t,
                    const int *lens);
void tblock_backward(asr_model *m, int l, const tblock_acts *b, const tblock_work *w, const float *x, float *dh,
                     int nb, int t, const int *lens);
/* The encoders' declarations (enc_act_decl) of a layer's kept buffers at rows rows and att
 * attention weights, and of the backward's work but tmp (the encoder's scratch). */
void tblock_kept(const model_dims *d, tblock_acts *b, enc_act_list *kept, size_t rows, size_t att);
void tblock_work_decl(const model_dims *d, tblock_work *w, enc_act_list *work, size_t rows);

/* A contextual block encoder's layer (core/nn/encoder_contextual.c): the Transformer layer, or
 * the Conformer block with dims.ctx_conformer, on nb sequences of t rows (keys masked past lens;
 * blocks: the block layout, enc_rows.blocks; tmp: scratch, nb x t x d). ctx_layer_kept declares
 * its buffers at shape s; ctx_layer_forward returns its output. core/nn/encoder_stream.c runs it too. */
typedef struct ctx_layer_acts {
    tblock_acts t;
    cblock c;
} ctx_layer_acts;
void ctx_layer_kept(const model_dims *d, ctx_layer_acts *b, enc_act_list *kept, enc_act_shape s);
const float *ctx_layer_forward(asr_model *m, int l, ctx_layer_acts *b, const float *x, float *tmp, int nb, int t,
                               const int *lens, int blocks);

/* The input layer (core/nn/model_embed.c): sizes for B x T input frames into m (T2, nconv, tk,
 * fk) and the per-utterance lengths m->hlens; buffers grown with model.c's; m->x -> m->h0 and
 * back (m->dh holds the gradient of h0). */
void embed_sizes(asr_model *m, int B, int T, const int *feat_lens);
void embed_alloc(asr_model *m, int B, int T);
/* Floats the forward of conv i keeps for its backward at B x T input frames (0: none). */
size_t embed_saved_floats(const asr_model *m, int i, int B, int T);
void embed_free(asr_model *m);
void embed_forward(asr_model *m);
void embed_backward(asr_model *m);

/* An inference model's padded frames of x (the utterances' rows r, C per row; from lens[b] on) set
 * to zero before a depthwise convolution reads them: the zeros an utterance decoded alone has past
 * its end, so a padded batch decodes as its utterances alone (core/decode/speech2text.h). Training
 * and validation keep ESPnet's ConvolutionModule, which reads the padded frames, and so do the
 * contextual blocks (r->blocks: nothing there is padding); the asr_transducer task's
 * ConformerConvolution zeroes them always (dims.body: its masked_fill_ of the GLU output, whose
 * backward zeroes the same frames of the gradient). (core/nn/encoder_blocks.c) */
void enc_zero_padding(const asr_model *m, const enc_rows *r, float *x, int C);

/* be->dwconv1d_forward / dwconv1d_backward of nb sequences of t rows of c channels, kernel k; with
 * dims.causal the asr_transducer task's causal convolution (k - 1 zeros before each sequence, none
 * after): the symmetric op on each sequence with (k - 1) / 2 zeros put before it, its first t
 * outputs (m->cpad). The forward's l and conv (DWCONV_*) name the convolution: a causal one of a
 * chunk (m->stream_chunk) reads the cache of its last inputs instead of the zeros
 * (enc_dwconv_chunk_forward). */
enum { DWCONV_MODULE, DWCONV_MERGE }; /* the conformer's convolution module or the gating unit's; the merge's */
void enc_dwconv_forward(asr_model *m, int l, int conv, float *y, const float *x, const float *w, const float *b,
                        int nb, int t, int c, int k);
void enc_dwconv_backward(asr_model *m, float *dx, float *dw, float *db, const float *dy, const float *x,
                         const float *w, int nb, int t, int c, int k);
/* The floats each of m->cpad needs for B sequences of T2 rows (0 without dims.causal). */
size_t enc_dwconv_pad_floats(const model_dims *d, int B, int T2);
/* The asr_transducer Encoder's dynamic chunk size (rates.chunk_training) for a batch of T2 frames:
 * torch.randint(1, T2)'s draw from rng_derive(seed, STREAM_CHUNK, 0) (1 when T2 is 1), T2 past
 * T2 * threshold, else draw % short + 1. */
int body_chunk_size(uint64_t seed, int T2, double threshold, int short_size);

/* BatchNorm1d in training mode with statistics over every rank's rows (m->sync set; core/nn/
 * encoder_syncbn.c): the arguments of be->batchnorm_forward / batchnorm_backward. */
void syncbn_forward(asr_model *m, float *y, float *mean, float *rstd, const float *x, const float *w, const float *b,
                    float *run_mean, float *run_var, float *run_count, int n, int c, double eps, double momentum);
void syncbn_backward(asr_model *m, float *dx, float *dw, float *db, const float *dy, const float *x, const float *w,
                     const float *mean, const float *rstd, int n, int c);

/* Intermediate CTC (core/nn/interctc.c). The encoders call interctc_after_block with each block's
 * output x (which the conditioning changes in place) and interctc_before_block_backward when m->dh
 * holds the gradient of block l's output (it adds the branch's); both do nothing for a block that
 * is not listed. model.c sizes the activations (interctc_ensure, rows = B x T2), takes the losses
 * before the final CTC's (interctc_loss: their mean; interctc_has_loss: whether the forward made
 * them) and gives the backward the CTC branch's scale first (interctc_backward_begin). */
void interctc_ensure(asr_model *m, size_t rows);
void interctc_free(asr_model *m);
void interctc_after_block(asr_model *m, int l, float *x);
int interctc_has_loss(const asr_model *m);
double interctc_loss(asr_model *m);
void interctc_backward_begin(asr_model *m, float dloss_ctc);
/* The k-th listed layer's CTC log-probabilities of the last interctc_loss (device, B x T2 x vocab,
 * as m->logp): validation's cer_interctc_layer<N>. */
const float *interctc_logp(const asr_model *m, int k);
void interctc_before_block_backward(asr_model *m, int l);

extern const encoder_impl encoder_transformer;
extern const encoder_impl encoder_conformer;
extern const encoder_impl encoder_ebranchformer;
extern const encoder_impl encoder_contextual;
extern const encoder_impl encoder_body;
/* Whether encoder_body skips block l of n in a training forward with seed and blockdrop_rate rate
 * (ESPnet2's MultiBlocks: block l runs when a uniform draw, 1 for the last block, is at least
 * rate * l / n); the draw is rng_derive(seed, STREAM_BLOCKDROP, l), so a batch's seed (the
 * trainer's seed, epoch and batch index) makes it again on resume. */
int body_block_dropped(uint64_t seed, double rate, int l, int n);

#endif
