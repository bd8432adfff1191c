/* The one activation lifecycle of the encoders: each declares the buffers its blocks keep for the
 * backward and the ones its blocks share (core/nn/encoder.h's enc_act_decl), and how its blocks lay
 * out the frames; this file makes m->enc, allocates them for a batch shape, reuses them while later
 * batches fit, aliases every block to block 0's when decoding (no backward keeps them; not the
 * blocks of an encoder whose blocks differ, enc_act_decl.per_block), and frees
 * them. */
#include <stdlib.h>
#include <string.h>

#include "core/nn/encoder.h"

void enc_act_add(enc_act_list *l, float **slot, size_t n)
{
    ESP_CHECK(l->k < ENC_ACT_MAX);
    l->slot[l->k] = slot;
    l->n[l->k++] = n;
}

void enc_rel_shared_decl(const model_dims *d, enc_rel_shared *r, enc_act_list *fwd, enc_act_list *work,
                         enc_act_shape s)
{
    size_t D = (size_t)d->d, FF = (size_t)d->ff;
    enc_act_add(fwd, &r->pos, s.prows * D);
    enc_act_add(work, &r->dq, s.rows * D);
    enc_act_add(work, &r->dk, s.rows * D);
    enc_act_add(work, &r->dv, s.rows * D);
    enc_act_add(work, &r->datt, s.rows * D);
    enc_act_add(work, &r->dff, s.rows * FF);
    enc_act_add(work, &r->dln, s.rows * D);
    enc_act_add(work, &r->dp, s.prows * D);
}

void enc_rel_pos_forward(asr_model *m, enc_rel_shared *r)
{
    size_t D = (size_t)model_embed_dim(&m->dims); /* the input layer's width (ESPnet2's build_positional_encoding) */
    if (!m->dims.rel_pos || m->T2 <= 0) return;
    m->be->relpos_encoding(m->be, r->pos, m->T2, (int)D);
    m->be->dropout_forward(m->be, r->pos, r->pos, (size_t)(2 * m->T2 - 1) * D, enc_rates_of(m).pp, m->seed,
                           STREAM_POS_EMB);
}

static void *block_at(const enc_act_decl *decl, const enc_act_store *st, int l)
{
    return (char *)st->blocks + (size_t)l * decl->block_size;
}

static void alloc_list(backend *be, const enc_act_list *l)
{
    for (int i = 0; i < l->k; i++) *l->slot[i] = be->alloc(be, l->n[i] * sizeof(float) + 64);
}

static void free_list(backend *be, const enc_act_list *l)
{
    for (int i = 0; i < l->k; i++) {
        be->free(be, *l->slot[i]);
        *l->slot[i] = NULL;
    }
}

/* m->enc's store: the first member of every encoder's struct encoder_acts. */
static enc_act_store *store_of(const asr_model *m) { return (enc_act_store *)(void *)m->enc; }

/* Whether block l shares block 0's buffers: when decoding, but blocks of different kinds or sizes. */
static int aliased(const asr_model *m, const enc_act_decl *decl, int l)
{
    return m->inference && l > 0 && !decl->per_block;
}

static model_dims block_dims(const asr_model *m, const enc_act_decl *decl, int l)
{
    return decl->per_block ? model_block_dims(&m->dims, l) : m->dims;
}

/* Frees the activations (m->enc stays). */
static void enc_acts_release(asr_model *m, const enc_act_decl *decl)
{
    if (!m->enc) return;
    enc_act_store *st = store_of(m);
    enc_act_shape none = {0};
    enc_act_list fwd = {0}, work = {0};
    decl->shared(m, &fwd, &work, none);
    free_list(m->be, &fwd);
    free_list(m->be, &work);
    for (int l = 0; l < m->dims.blocks; l++) {
        void *b = block_at(decl, st, l);
        if (!aliased(m, decl, l)) {
            model_dims bd = block_dims(m, decl, l);
            enc_act_list kept = {0};
            decl->block(&bd, b, &kept, none);
            free_list(m->be, &kept);
        }
        memset(b, 0, decl->block_size);
    }
    st->cap = none;
    if (decl->reset) decl->reset(m);
}

void enc_acts_destroy(asr_model *m, const enc_act_decl *decl)
{
    enc_acts_release(m, decl);
    if (m->enc) free(store_of(m)->blocks);
    free(m->enc);
    m->enc = NULL;
}

void enc_acts_ensure(asr_model *m, const enc_act_decl *decl, int B, int T2)
{
    const model_dims *d = &m->dims;
    if (!m->enc) {
        m->enc = xcalloc(1, decl->enc_size);
        store_of(m)->blocks = xcalloc((size_t)d->blocks, decl->block_size);
        if (decl->reset) decl->reset(m);
    }
    enc_act_store *st = store_of(m);
    int seqs = B, t = T2;
    if (decl->layout) decl->layout(d, B, T2, &seqs, &t);
    enc_act_shape s = {(size_t)seqs * (size_t)t, (size_t)seqs * d->heads * (size_t)t * t,
                       decl->positions && t > 0 ? 2 * (size_t)t - 1 : 0, (size_t)B * (size_t)T2, (size_t)seqs};
    const enc_act_shape c = st->cap;
    if (s.rows <= c.rows && s.att <= c.att && s.prows <= c.prows && s.frames <= c.frames && s.seqs <= c.seqs) return;
    /* Each size only ever grows, so batches that alternate between shapes settle. */
#define GROW(f) s.f = s.f > c.f ? s.f : c.f
    GROW(rows), GROW(att), GROW(prows), GROW(frames), GROW(seqs);
#undef GROW
    enc_acts_release(m, decl);
    for (int l = 0; l < d->blocks; l++) {
        void *b = block_at(decl, st, l);
        if (aliased(m, decl, l)) {
            memcpy(b, st->blocks, decl->block_size);
            continue;
        }
        model_dims bd = block_dims(m, decl, l);
        enc_act_list kept = {0};
        decl->block(&bd, b, &kept, s);
        alloc_list(m->be, &kept);
    }
    enc_act_list fwd = {0}, work = {0};
    decl->shared(m, &fwd, &work, s);
    alloc_list(m->be, &fwd);
    st->cap = s;
    if (!m->inference) alloc_list(m->be, &work);
}
