/* ESPnet2's TransformerEncoder: num_blocks of the pre-LN Transformer layer (core/nn/
 * encoder_tblock.c) on the (B, T2) frames, keys masked past each utterance's length, with the
 * activations' lifecycle of core/nn/encoder_acts.c. */
#include <stddef.h>

#include "core/nn/encoder.h"

struct encoder_acts {
    enc_act_store store; /* first (core/nn/encoder_acts.c): the blocks (tblock_acts), and the shape they fit */
    tblock_work w;       /* the backward's work; w.tmp is m->dtmp */
};

_Static_assert(offsetof(encoder_acts, store) == 0, "core/nn/encoder_acts.c finds the store first");
static tblock_acts *blocks(const asr_model *m) { return m->enc->store.blocks; }

static void block_kept(const model_dims *d, void *block, enc_act_list *kept, enc_act_shape s)
{
    tblock_kept(d, block, kept, s.rows, s.att);
}

static void shared(asr_model *m, enc_act_list *fwd, enc_act_list *work, enc_act_shape s)
{
    (void)fwd; /* the blocks share nothing in the forward */
    tblock_work_decl(&m->dims, &m->enc->w, work, s.rows);
}

static const enc_act_decl decl = {sizeof(encoder_acts), sizeof(tblock_acts), 0, block_kept, shared, NULL, NULL, 0};

static const float *block_input(const asr_model *m, int l) { return l == 0 ? m->h0 : blocks(m)[l - 1].h_out; }

static const float *forward(asr_model *m)
{
    for (int l = 0; l < m->dims.blocks; l++) {
        tblock_acts *b = &blocks(m)[l];
        tblock_forward(m, l, b, block_input(m, l), m->dtmp, m->B, m->T2, m->hlens);
        interctc_after_block(m, l, b->h_out);
    }
    return block_input(m, m->dims.blocks);
}

static void backward(asr_model *m)
{
    encoder_acts *e = m->enc;
    e->w.tmp = m->dtmp;
    for (int l = m->dims.blocks - 1; l >= 0; l--) {
        interctc_before_block_backward(m, l);
        tblock_backward(m, l, &blocks(m)[l], &e->w, block_input(m, l), m->dh, m->B, m->T2, m->hlens);
        asr_model_block_grads_final(m, l);
    }
}

const encoder_impl encoder_transformer = {
    .acts = &decl,
    .forward = forward,
    .backward = backward,
};
