/* The asr_transducer task's Encoder whose body_conf blocks differ in block_type or sizes
 * (model_dims.n_groups > 1; espnet2/asr_transducer/encoder/encoder.py's MultiBlocks over blocks
 * built one by one): each block runs on the code of its kind, the Conformer block (cblock_*) or the
 * E-Branchformer block (eblock_*, also the Branchformer's), with its own sizes and dropout rates.
 * The block code reads the model's dims and rates, so each block runs with m->dims and the
 * rates' dropout / att_dropout set to its own (model_block_dims, model_rates.group_*) and put
 * back after it. The relative encoding is computed once and shared, as MultiBlocks' pos_enc. */
#include <stddef.h>

#include "core/nn/encoder.h"

typedef struct body_block {
    cblock c; /* a Conformer block's buffers */
    eblock e; /* an (E-)Branchformer block's */
} body_block;

struct encoder_acts {
    enc_act_store store; /* first (core/nn/encoder_acts.c): the blocks (body_block), and the shape they fit */
    enc_rel_shared rel;  /* the relative encoding, and backward work the blocks share */
    cblock_work cw;
    eblock_work ew;
};

_Static_assert(offsetof(encoder_acts, store) == 0, "core/nn/encoder_acts.c finds the store first");
static body_block *blocks(const asr_model *m) { return m->enc->store.blocks; }

/* d: the block's own dims (enc_act_decl.per_block). */
static void block_kept(const model_dims *d, void *block, enc_act_list *kept, enc_act_shape s)
{
    body_block *b = block;
    if (d->encoder == ENC_CONFORMER) cblock_kept(d, &b->c, kept, s);
    else eblock_kept(d, &b->e, kept, s);
}

/* m->dims holds the groups' largest ff, heads and cgmlp_units: the shared work fits every block. */
static void shared(asr_model *m, enc_act_list *fwd, enc_act_list *work, enc_act_shape s)
{
    encoder_acts *e = m->enc;
    enc_rel_shared_decl(&m->dims, &e->rel, fwd, work, s);
    cblock_work_decl(&m->dims, &e->cw, work, s.rows);
    eblock_work_decl(&m->dims, &e->ew, work, s.rows);
}

static const enc_act_decl decl = {sizeof(encoder_acts), sizeof(body_block), 1, block_kept, shared, NULL, NULL, 1};

/* What block l changes in m while it runs, to be put back. */
typedef struct block_view {
    model_dims dims;
    float dropout, att_dropout;
} block_view;

static block_view enter(asr_model *m, int l)
{
    block_view saved = {m->dims, m->rates.dropout, m->rates.att_dropout};
    int g = model_block_group(&m->dims, l);
    m->dims = model_block_dims(&saved.dims, l);
    m->rates.dropout = m->rates.group_dropout[g], m->rates.att_dropout = m->rates.group_att_dropout[g];
    return saved;
}

static void leave(asr_model *m, const block_view *saved)
{
    m->dims = saved->dims;
    m->rates.dropout = saved->dropout, m->rates.att_dropout = saved->att_dropout;
}

static const struct model_group *group_of(const asr_model *m, int l)
{
    return &m->dims.group[model_block_group(&m->dims, l)];
}

static const float *block_output(const asr_model *m, int l)
{
    const struct model_group *g = group_of(m, l);
    return g->encoder != ENC_CONFORMER ? blocks(m)[l].e.h_out : g->use_cnn ? blocks(m)[l].c.h_out : blocks(m)[l].c.h_f;
}

static const float *block_input(const asr_model *m, int l) { return l == 0 ? m->h0 : block_output(m, l - 1); }

static const float *forward(asr_model *m)
{
    encoder_acts *e = m->enc;
    enc_rows r = enc_rows_of(m);
    enc_rel_pos_forward(m, &e->rel);
    for (int l = 0; l < m->dims.blocks; l++) {
        const float *x = block_input(m, l);
        int conformer = group_of(m, l)->encoder == ENC_CONFORMER;
        block_view saved = enter(m, l);
        if (conformer) cblock_forward(m, &r, l, &blocks(m)[l].c, e->rel.pos, x);
        else eblock_forward(m, &r, l, &blocks(m)[l].e, e->rel.pos, x);
        leave(m, &saved);
    }
    return block_output(m, m->dims.blocks - 1);
}

static void backward(asr_model *m)
{
    encoder_acts *e = m->enc;
    enc_rows r = enc_rows_of(m);
    for (int l = m->dims.blocks - 1; l >= 0; l--) {
        const float *x = block_input(m, l);
        int conformer = group_of(m, l)->encoder == ENC_CONFORMER;
        block_view saved = enter(m, l);
        if (conformer) cblock_backward(m, &r, l, &blocks(m)[l].c, &e->rel, &e->cw, x);
        else eblock_backward(m, &r, l, &blocks(m)[l].e, &e->rel, &e->ew, x);
        leave(m, &saved);
        asr_model_block_grads_final(m, l);
    }
}

const encoder_impl encoder_body = {
    .acts = &decl,
    .forward = forward,
    .backward = backward,
};
