/* ESPnet2's TransformerEncoder: num_blocks of the pre-LN Transformer layer (core/nn/
 * encoder_tblock.c) on the (B, T2) frames, keys masked past each utterance's length, with the
 * activations' lifecycle of core/nn/encoder_acts.c. */
#include <stdlib.h>

#include "core/nn/encoder.h"

struct encoder_acts {
    tblock_acts *blocks;
    enc_act_store store; /* blocks, and the shape they fit */
    tblock_work w;       /* the backward's work; w.tmp is m->dtmp */
};

static void block_kept(const model_dims *d, void *block, enc_act_list *kept, enc_act_shape s)
{
    tblock_kept(d, block, kept, s.rows, s.att);
}

static void shared(asr_model *m, enc_act_list *fwd, enc_act_list *work, enc_act_shape s)
{
    (void)fwd; /* the blocks share nothing in the forward */
    tblock_work_decl(&m->dims, &m->enc->w, work, s.rows);
}

static const enc_act_decl decl = {sizeof(tblock_acts), 0, block_kept, shared, NULL};

static encoder_acts *acts(asr_model *m)
{
    if (!m->enc) {
        m->enc = xcalloc(1, sizeof *m->enc);
        m->enc->blocks = xcalloc((size_t)m->dims.blocks, sizeof *m->enc->blocks);
        m->enc->store.blocks = m->enc->blocks;
    }
    return m->enc;
}

static void release(asr_model *m)
{
    if (m->enc) enc_acts_release(m, &decl, &m->enc->store);
}

static void destroy(asr_model *m)
{
    release(m);
    if (m->enc) free(m->enc->blocks);
    free(m->enc);
    m->enc = NULL;
}

static void ensure(asr_model *m, int B, int T2) { enc_acts_ensure(m, &decl, &acts(m)->store, B, T2); }

static const float *block_input(const asr_model *m, int l) { return l == 0 ? m->h0 : m->enc->blocks[l - 1].h_out; }

static const float *forward(asr_model *m)
{
    for (int l = 0; l < m->dims.blocks; l++) {
        tblock_acts *b = &m->enc->blocks[l];
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
        tblock_backward(m, l, &e->blocks[l], &e->w, block_input(m, l), m->dh, m->B, m->T2, m->hlens);
        asr_model_block_grads_final(m, l);
    }
}

const encoder_impl encoder_transformer = {
    .ensure = ensure,
    .release = release,
    .destroy = destroy,
    .forward = forward,
    .backward = backward,
};
