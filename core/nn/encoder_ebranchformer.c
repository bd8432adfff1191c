/* ESPnet2's EBranchformerEncoder blocks (espnet2/asr/encoder/e_branchformer_encoder.py with the
 * cgMLP of espnet2/asr/layers/cgmlp.py), forward and backward on the backend:
 *   macaron_ffn:  x += 0.5 * drop(FF_mac(LN(x)))
 *   branch 1:     x1 = drop(MHA(LN_mha(x)))            rel-pos MHA (pos_bias_u/v, linear_pos) or plain
 *   branch 2:     x2 = drop(cgMLP(LN_mlp(x)))          channel_proj1 -> GELU -> CSGU -> channel_proj2
 *   merge:        c = [x1, x2]; x += drop(merge_proj(c + depthwise_conv_fusion(c)))
 *   use_ffn:      x += s * drop(FF(LN(x)))             s = 0.5 with macaron_ffn, else 1
 *                 x = LN_final(x)
 * CSGU(z): z_r, z_g = halves of z; z_g = act(linear?(dwconv(LN(z_g)))); drop(z_r * z_g). FF(x) =
 * w_2(drop(act(w_1(x)))), act swish or relu (ffn_activation_type); the gate's act is identity,
 * swish or relu (gate_activation).
 * channel_proj1's two output halves are two linears on the rows of its weight (contiguous), so the
 * gating unit never copies z apart. As ESPnet's, the cgMLP and the merge convolution see every
 * frame of the padded batch (no mask; an inference model zeroes the padding first: enc_zero_padding).
 * The asr_transducer task's EBranchformer block (dims.body; espnet2/asr_transducer/encoder/blocks/
 * ebranchformer.py) is this block with macaron_ffn and use_ffn, an identity gate, no linear after
 * the convolution, and two differences: its convolutions' masked_fill_ zeroes the padded frames of
 * their inputs (the gating unit's normed half and c, which the merge then reads as zeroed) in
 * training too, so their gradients there are zero; and x += merge_proj(...) has no dropout. Its
 * Branchformer block (blocks/branchformer.py) is that block without feed-forwards (use_ffn 0) or
 * merge convolution (merge_kernel 0): x += drop(merge_proj(c)), c as it is. The relative encoding is computed once per forward, shared
 * by the blocks. layer_drop_rate: in training, block l is skipped (its output is its input) when
 * a uniform draw from rng_derive(seed, STREAM_LAYER_DROP, l) is below the rate: the seed is the
 * batch's, so any number of ranks drops the same blocks for the same batch, as dropout masks. */
#include <stddef.h>
#include <string.h>

#include "core/nn/encoder.h"
#include "core/nn/norm_spec.h"

enum {
    SITE_ATT = 0, SITE_BRANCH = 1, SITE_FF_IN = 2, SITE_FF_OUT = 3, SITE_FFM_IN = 4, SITE_FFM_OUT = 5,
    SITE_CSGU = 6, SITE_MERGE = 7,
};


struct encoder_acts {
    enc_act_store store;          /* first (core/nn/encoder_acts.c): the blocks (eblock), and the shape they fit */
    enc_rel_shared rel;           /* the relative encoding, and backward work the blocks share */
    eblock_work ew;               /* backward work of the merge and the cgMLP branch */
};

_Static_assert(offsetof(encoder_acts, store) == 0, "core/nn/encoder_acts.c finds the store first");
static eblock *blocks(const asr_model *m) { return m->enc->store.blocks; }

void eblock_kept(const model_dims *d, eblock *b, enc_act_list *kept, enc_act_shape s)
{
    size_t rows = s.rows, att = s.att, prows = s.prows;
    size_t D = (size_t)d->d, FF = (size_t)d->ff, H = (size_t)d->cgmlp_units / 2;
#define BUF(field, count) enc_act_add(kept, &b->field, (count))
    BUF(ln_a, rows * D), BUF(mean_a, rows), BUF(rstd_a, rows), BUF(q, rows * D), BUF(k, rows * D);
    BUF(v, rows * D), BUF(att, att), BUF(atty, rows * D);
    if (d->rel_pos) BUF(pl, prows * D);
    BUF(ln_g, rows * D), BUF(mean_g, rows), BUF(rstd_g, rows), BUF(pr, rows * H), BUF(pg, rows * H);
    BUF(r, rows * H), BUF(gg, rows * H), BUF(gn, rows * H), BUF(mean_n, rows), BUF(rstd_n, rows);
    BUF(gc, rows * H), BUF(gm, rows * H);
    if (d->linear_after_conv) BUF(gl, rows * H);
    if (d->gate_act != ACT_IDENTITY) BUF(ga, rows * H);
    BUF(br, rows * 2 * D), BUF(cat, rows * 2 * D), BUF(h_mg, rows * D);
    if (d->merge_kernel) BUF(fus, rows * 2 * D);
    if (d->use_ffn) {
        BUF(ln_f, rows * D), BUF(mean_f, rows), BUF(rstd_f, rows), BUF(f_pre, rows * FF), BUF(f_act, rows * FF);
        BUF(h_f, rows * D);
        if (d->macaron) {
            BUF(ln_m, rows * D), BUF(mean_m, rows), BUF(rstd_m, rows), BUF(fm_pre, rows * FF);
            BUF(fm_act, rows * FF), BUF(h_m, rows * D);
        }
    }
    BUF(mean_o, rows), BUF(rstd_o, rows), BUF(h_out, rows * D);
#undef BUF
}

void eblock_work_decl(const model_dims *d, eblock_work *w, enc_act_list *work, size_t rows)
{
    size_t D = (size_t)d->d, H = (size_t)d->cgmlp_units / 2;
    enc_act_add(work, &w->d2a, rows * 2 * D);
    enc_act_add(work, &w->d2b, rows * 2 * D);
    enc_act_add(work, &w->e1, rows * H);
    enc_act_add(work, &w->e2, rows * H);
    enc_act_add(work, &w->e3, rows * H);
}

static void block_kept(const model_dims *d, void *block, enc_act_list *kept, enc_act_shape s)
{
    eblock_kept(d, block, kept, s);
}

/* The relative encoding the blocks share, and the backward's work. */
static void shared(asr_model *m, enc_act_list *fwd, enc_act_list *work, enc_act_shape s)
{
    encoder_acts *e = m->enc;
    enc_rel_shared_decl(&m->dims, &e->rel, fwd, work, s);
    eblock_work_decl(&m->dims, &e->ew, work, s.rows);
}

static const enc_act_decl decl = {sizeof(encoder_acts), sizeof(eblock), 1, block_kept, shared, NULL, NULL, 0};

/* ---- pieces ------------------------------------------------------------------------------- */

static enc_attn_bufs attn_bufs(const eblock *b)
{
    return (enc_attn_bufs){b->ln_a, b->mean_a, b->rstd_a, b->q, b->k, b->v, b->pl, b->att, b->atty};
}

/* out (N, D) = linear_out(MHA(LN_mha(x))), relative or absolute positions (no dropout yet). */
static void attn_forward(asr_model *m, int l, eblock *b, const float *pos, const float *x, float *out)
{
    enc_attn_bufs ab = attn_bufs(b);
    enc_rows r = enc_rows_of(m);
    enc_attn_forward(m, &r, l, &ab, pos, x, out, SITE_ATT);
}

/* dy: the gradient of attn_forward's out; m->dh gains the branch's gradient of x. */
static void attn_backward(asr_model *m, int l, const eblock *b, const enc_rel_shared *rel, const float *x, float *dy)
{
    enc_attn_bufs ab = attn_bufs(b);
    enc_attn_work w = {rel->pos, rel->dq, rel->dk, rel->dv, rel->datt, rel->dp, rel->dln, rel->dpos};
    enc_rows r = enc_rows_of(m);
    enc_attn_backward(m, &r, l, &ab, &w, x, dy, SITE_ATT);
}

/* The gate's input after the optional linear (gc or gl) and its output (the same without an act). */
static const float *gate_in(const model_dims *d, const eblock *b) { return d->linear_after_conv ? b->gl : b->gc; }
static const float *gate_out(const model_dims *d, const eblock *b)
{
    return d->gate_act != ACT_IDENTITY ? b->ga : gate_in(d, b);
}

/* out (N, D) = channel_proj2(CSGU(GELU(channel_proj1(LN_mlp(x))))) (no branch dropout yet). */
static void cgmlp_forward(asr_model *m, int l, eblock *b, const float *x, float *out)
{
    const model_dims *d = &m->dims;
    backend *be = m->be;
    int N = m->B * m->T2, D = d->d, H = d->cgmlp_units / 2;
    size_t nh = (size_t)N * H;
    const enc_block_tensors *p = &m->w.blocks[l];
    const float *w1 = p->cgmlp.channel_proj1.weight, *b1 = p->cgmlp.channel_proj1.bias;
    norm_spec_forward(be, &d->norm, &p->norm_mlp, b->ln_g, b->mean_g, b->rstd_g, x, N, D);
    be->linear_forward(be, b->pr, b->ln_g, w1, b1, N, D, H);                              /* z_r: rows 0..H-1 */
    be->linear_forward(be, b->pg, b->ln_g, w1 + (size_t)H * D, b1 + H, N, D, H);         /* z_g: rows H..2H-1 */
    be->gelu_forward(be, b->r, b->pr, nh);
    be->gelu_forward(be, b->gg, b->pg, nh);
    norm_spec_forward(be, &d->csgu_norm, &p->cgmlp.csgu.norm, b->gn, b->mean_n, b->rstd_n, b->gg, N, H);
    enc_rows u = enc_rows_of(m);
    enc_zero_padding(m, &u, b->gn, H);
    enc_dwconv_forward(m, l, DWCONV_MODULE, b->gc, b->gn, p->cgmlp.csgu.conv.weight, p->cgmlp.csgu.conv.bias, m->B,
                       m->T2, H, d->cgmlp_kernel);
    if (d->linear_after_conv)
        be->linear_forward(be, b->gl, b->gc, p->cgmlp.csgu.linear.weight, p->cgmlp.csgu.linear.bias, N, H, H);
    if (d->gate_act != ACT_IDENTITY) enc_act_forward(be, d->gate_act, b->ga, gate_in(d, b), nh);
    be->mul_forward(be, b->gm, b->r, gate_out(d, b), nh);
    be->dropout_forward(be, b->gm, b->gm, nh, enc_rates_of(m).pd, m->seed, block_stream(l, SITE_CSGU));
    be->linear_forward(be, out, b->gm, p->cgmlp.channel_proj2.weight, p->cgmlp.channel_proj2.bias, N, H, D);
}

/* dy: the gradient of cgmlp_forward's out; m->dh gains the branch's gradient of x. */
static void cgmlp_backward(asr_model *m, int l, const eblock *b, const enc_rel_shared *rel, const eblock_work *e,
                           const float *x, const float *dy)
{
    const model_dims *d = &m->dims;
    backend *be = m->be;
    int N = m->B * m->T2, D = d->d, H = d->cgmlp_units / 2;
    size_t nh = (size_t)N * H;
    const enc_block_tensors *p = &m->w.blocks[l], *g = &m->g.blocks[l];
    const float *w1 = p->cgmlp.channel_proj1.weight;
    float *gw1 = g->cgmlp.channel_proj1.weight, *gb1 = g->cgmlp.channel_proj1.bias;
    be->linear_backward(be, e->e1, g->cgmlp.channel_proj2.weight, g->cgmlp.channel_proj2.bias, dy, b->gm,
                        p->cgmlp.channel_proj2.weight, N, H, D, 0);
    be->dropout_backward(be, e->e1, e->e1, nh, enc_rates_of(m).pd, m->seed, block_stream(l, SITE_CSGU));
    be->mul_backward(be, e->e2, e->e3, e->e1, b->r, gate_out(d, b), nh); /* e2: d r, e3: d gate */
    if (d->gate_act != ACT_IDENTITY) enc_act_backward(be, d->gate_act, e->e3, e->e3, gate_in(d, b), nh);
    float *dgc = e->e3, *spare = e->e1;
    if (d->linear_after_conv) {
        be->linear_backward(be, e->e1, g->cgmlp.csgu.linear.weight, g->cgmlp.csgu.linear.bias, e->e3, b->gc,
                            p->cgmlp.csgu.linear.weight, N, H, H, 0);
        dgc = e->e1, spare = e->e3;
    }
    enc_dwconv_backward(m, spare, g->cgmlp.csgu.conv.weight, g->cgmlp.csgu.conv.bias, dgc, b->gn,
                          p->cgmlp.csgu.conv.weight, m->B, m->T2, H, d->cgmlp_kernel);
    enc_rows u = enc_rows_of(m);
    enc_zero_padding(m, &u, spare, H); /* the forward's zeroed frames pass no gradient */
    norm_spec_backward(be, &d->csgu_norm, &p->cgmlp.csgu.norm, &g->cgmlp.csgu.norm, dgc, spare, b->gg, b->mean_n,
                       b->rstd_n, N, H, 0);
    be->gelu_backward(be, dgc, dgc, b->pg, nh);
    be->gelu_backward(be, e->e2, e->e2, b->pr, nh);
    be->linear_backward(be, rel->dln, gw1, gb1, e->e2, b->ln_g, w1, N, D, H, 0);
    be->linear_backward(be, rel->dln, gw1 + (size_t)H * D, gb1 + H, dgc, b->ln_g, w1 + (size_t)H * D, N, D, H, 1);
    norm_spec_backward(be, &d->norm, &p->norm_mlp, &g->norm_mlp, m->dh, rel->dln, x, b->mean_g, b->rstd_g, N, D, 1);
}

/* The merge's dropout rate: the asr_transducer task's EBranchformer has none there (its
 * Branchformer has). */
static float merge_dropout(const asr_model *m)
{
    return m->dims.body && m->dims.merge_kernel ? 0.0f : enc_rates_of(m).pd;
}

/* What merge_proj reads: c + dwconv(c), or c without a merge convolution. */
static const float *merge_in(const model_dims *d, const eblock *b) { return d->merge_kernel ? b->fus : b->cat; }

/* The two branches and their merge: h_mg = x + drop(merge_proj(c + dwconv(c))), c = [x1, x2]. */
static void branches_forward(asr_model *m, int l, eblock *b, const float *pos, const float *x)
{
    const model_dims *d = &m->dims;
    backend *be = m->be;
    int N = m->B * m->T2, D = d->d;
    size_t nd = (size_t)N * D;
    enc_rates r = enc_rates_of(m);
    const enc_block_tensors *p = &m->w.blocks[l];
    attn_forward(m, l, b, pos, x, b->br);       /* br (2, N, D): x1 then x2 */
    cgmlp_forward(m, l, b, x, b->br + nd);
    be->dropout_forward(be, b->br, b->br, 2 * nd, r.pd, m->seed, block_stream(l, SITE_BRANCH));
    be->swap12(be, b->cat, b->br, 1, 2, N, D); /* torch.cat([x1, x2], dim=-1): (N, 2D) */
    if (d->merge_kernel) {
        enc_rows u = enc_rows_of(m);
        enc_zero_padding(m, &u, b->cat, 2 * D);
        enc_dwconv_forward(m, l, DWCONV_MERGE, b->fus, b->cat, p->depthwise_conv_fusion.weight,
                           p->depthwise_conv_fusion.bias, m->B, m->T2, 2 * D, d->merge_kernel);
        be->add(be, b->fus, b->fus, b->cat, 2 * nd);
    }
    be->linear_forward(be, m->dtmp, merge_in(d, b), p->merge_proj.weight, p->merge_proj.bias, N, 2 * D, D);
    be->dropout_add(be, b->h_mg, x, m->dtmp, nd, 1.0, merge_dropout(m), m->seed, block_stream(l, SITE_MERGE));
}

static void branches_backward(asr_model *m, int l, const eblock *b, const enc_rel_shared *rel, const eblock_work *e,
                              const float *x)
{
    const model_dims *d = &m->dims;
    backend *be = m->be;
    int N = m->B * m->T2, D = d->d;
    size_t nd = (size_t)N * D;
    enc_rates r = enc_rates_of(m);
    const enc_block_tensors *p = &m->w.blocks[l], *g = &m->g.blocks[l];
    be->dropout_backward(be, m->dtmp, m->dh, nd, merge_dropout(m), m->seed, block_stream(l, SITE_MERGE));
    /* the gradient of c into d2b (through d2a with a merge convolution) */
    be->linear_backward(be, d->merge_kernel ? e->d2a : e->d2b, g->merge_proj.weight, g->merge_proj.bias, m->dtmp,
                        merge_in(d, b), p->merge_proj.weight, N, 2 * D, D, 0);
    if (d->merge_kernel) {
        enc_dwconv_backward(m, e->d2b, g->depthwise_conv_fusion.weight, g->depthwise_conv_fusion.bias, e->d2a,
                              b->cat, p->depthwise_conv_fusion.weight, m->B, m->T2, 2 * D, d->merge_kernel);
        be->add(be, e->d2b, e->d2b, e->d2a, 2 * nd);
        enc_rows u = enc_rows_of(m);
        enc_zero_padding(m, &u, e->d2b, 2 * D); /* zeroed in the forward: no gradient there */
    }
    be->swap12(be, e->d2a, e->d2b, 1, N, 2, D);       /* back to (2, N, D) */
    be->dropout_backward(be, e->d2a, e->d2a, 2 * nd, r.pd, m->seed, block_stream(l, SITE_BRANCH));
    attn_backward(m, l, b, rel, x, e->d2a);
    cgmlp_backward(m, l, b, rel, e, x, e->d2a + nd);
}

/* ---- blocks ------------------------------------------------------------------------------- */

static const float *block_input(const asr_model *m, int l) { return l == 0 ? m->h0 : blocks(m)[l - 1].out; }

/* Stochastic depth: ESPnet draws torch.empty(1).uniform_() per block in training. */
static int layer_dropped(const asr_model *m, int l)
{
    /* ESPnet2 runs the blocks one by one for intermediate CTC, past MultiSequential's layer drop. */
    if (!m->train || m->rates.layer_drop <= 0 || m->dims.n_interctc) return 0;
    double u = (double)(rng_derive(m->seed, STREAM_LAYER_DROP, (uint64_t)l) >> 11) * (1.0 / 9007199254740992.0);
    return u < m->rates.layer_drop;
}

float *eblock_forward(asr_model *m, const enc_rows *r, int l, eblock *b, const float *pos, const float *x)
{
    const model_dims *d = &m->dims;
    backend *be = m->be;
    if (d->use_ffn && d->macaron) {
        enc_ff_forward(m, r, l, 1, b->ln_m, b->mean_m, b->rstd_m, b->fm_pre, b->fm_act, x, b->h_m, SITE_FFM_IN,
                       SITE_FFM_OUT);
        x = b->h_m;
    }
    branches_forward(m, l, b, pos, x);
    x = b->h_mg;
    if (d->use_ffn) {
        enc_ff_forward(m, r, l, 0, b->ln_f, b->mean_f, b->rstd_f, b->f_pre, b->f_act, x, b->h_f, SITE_FF_IN,
                       SITE_FF_OUT);
        x = b->h_f;
    }
    const nn_norm *nf = &m->w.blocks[l].norm_final;
    norm_spec_forward(be, &d->norm, nf, b->h_out, b->mean_o, b->rstd_o, x, r->nb * r->t, d->d);
    return b->h_out;
}

void eblock_backward(asr_model *m, const enc_rows *r, int l, const eblock *b, const enc_rel_shared *rel,
                     const eblock_work *w, const float *x0)
{
    const model_dims *d = &m->dims;
    backend *be = m->be;
    int N = r->nb * r->t, D = d->d;
    const float *xb = d->use_ffn && d->macaron ? b->h_m : x0;
    const nn_norm *nf = &m->w.blocks[l].norm_final, *gnf = &m->g.blocks[l].norm_final;
    norm_spec_backward(be, &d->norm, nf, gnf, rel->dln, r->dh, d->use_ffn ? b->h_f : b->h_mg, b->mean_o, b->rstd_o, N,
                       D, 0);
    be->copy(be, r->dh, rel->dln, (size_t)N * D * sizeof(float), BACKEND_DEVICE_TO_DEVICE);
    if (d->use_ffn)
        enc_ff_backward(m, r, l, 0, b->ln_f, b->mean_f, b->rstd_f, b->f_pre, b->f_act, b->h_mg, SITE_FF_IN,
                        SITE_FF_OUT, rel->dff, rel->dln);
    branches_backward(m, l, b, rel, w, xb);
    if (d->use_ffn && d->macaron)
        enc_ff_backward(m, r, l, 1, b->ln_m, b->mean_m, b->rstd_m, b->fm_pre, b->fm_act, x0, SITE_FFM_IN,
                        SITE_FFM_OUT, rel->dff, rel->dln);
}

static const float *forward(asr_model *m)
{
    encoder_acts *e = m->enc;
    enc_rows r = enc_rows_of(m);
    enc_rel_pos_forward(m, &e->rel);
    for (int l = 0; l < m->dims.blocks; l++) {
        eblock *b = &blocks(m)[l];
        const float *x = block_input(m, l);
        b->dropped = layer_dropped(m, l);
        b->out = b->dropped ? x : eblock_forward(m, &r, l, b, e->rel.pos, x);
        if (!b->dropped) interctc_after_block(m, l, b->h_out);
    }
    return blocks(m)[m->dims.blocks - 1].out;
}

static void backward(asr_model *m)
{
    encoder_acts *e = m->enc;
    enc_rows r = enc_rows_of(m);
    for (int l = m->dims.blocks - 1; l >= 0; l--) {
        const eblock *b = &blocks(m)[l];
        if (!b->dropped) { /* dropped: the identity, m->dh passes through, the block's gradients stay */
            interctc_before_block_backward(m, l);
            eblock_backward(m, &r, l, b, &e->rel, &e->ew, block_input(m, l));
        }
        asr_model_block_grads_final(m, l);
    }
}

const encoder_impl encoder_ebranchformer = {
    .acts = &decl,
    .forward = forward,
    .backward = backward,
};
