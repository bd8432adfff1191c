/* The beam-search step's self-attention keys and values (core/nn/decoder_score.c; not for use
 * elsewhere): slots of `stride` positions, each holding one lineage of prefixes, and the records of
 * the last three decoder calls (which prefix, of which utterance, in which slot).
 *
 * A slot's rows [0, filled) are written once and never change: a record of length len reads rows
 * [0, len). A hypothesis scored next (its parent's record plus one token) takes its parent's slot
 * when the parent's next row is still unwritten, so that its one new row goes where it lies (no
 * copy: the first child of every parent in a beam, and the whole lineage of a long stream's best
 * hypotheses); a second child, or a prefix scored again (the online search's rewind), gets a free
 * slot with its parent's rows copied (those it does not hold already: rows written by the same
 * computations, the same bits). A slot is free when no record of the kept calls names it. */
#ifndef ESPNET3_NN_DECODER_KV_H
#define ESPNET3_NN_DECODER_KV_H

#include "core/compute/backend.h"

/* One call's records. */
typedef struct kv_gen {
    int n, cap, tok_stride;
    int *slot, *lens, *utt; /* host, n */
    int *tokens;            /* host, n x tok_stride: each record's prefix */
} kv_gen;

typedef struct dec_kv {
    int nl, d;
    float *k, *v;            /* device: nslots x nl x stride x d each */
    int nslots, stride;
    int *filled, *refs;      /* host, per slot: rows written; records naming it */
    int *free_slots, n_free;
    /* Which computation wrote each row (host, nslots x stride; a copy keeps the id), and the rows
     * a free slot still holds: a copy into a free slot skips the rows it already holds of the same
     * computations (a cousin's lineage freed a call ago shares most of a stream's prefix). */
    unsigned *row_id, next_id;
    int *kept;
    kv_gen gen[3];           /* the calls before the previous, the previous one's and this one's */
    int prev;                /* the previous call's generation; this call writes (prev + 1) % 3 */
} dec_kv;

/* nl layers of width d; nothing allocated yet. */
void dec_kv_init(dec_kv *kv, int nl, int d);
void dec_kv_free(backend *be, dec_kv *kv);
/* Every record dropped (a new utterance). */
void dec_kv_clear(dec_kv *kv);
/* Room for at least `free` free slots now and prefixes of `len` positions; slots and positions
 * grow by half at least (positions up to limit: no prefix is longer; 0: none), so a stream's
 * growing hypotheses move their slots a logarithmic number of times. Live slots keep their rows. */
void dec_kv_reserve(backend *be, dec_kv *kv, int free, int len, int limit);
/* This call's generation, emptied (the records of three calls ago dropped, their slots freed when
 * no other record names them). */
kv_gen *dec_kv_begin(dec_kv *kv);
/* The slot of a record of the previous call (else of the one before) holding the first len - 1
 * positions of prefix p in utterance u; -1 when none does (or len < 2). */
int dec_kv_find_parent(const dec_kv *kv, const int *p, int len, int u);
/* Records prefix p (len positions, utterance u) in this call's generation and returns its slot:
 * parent's (a slot from dec_kv_find_parent) when its row len - 1 is unwritten, else a free one
 * with the parent's first len - 1 rows copied; parent -1: a free slot whose len rows the caller
 * writes. Needs a free slot (dec_kv_reserve) and len within the stride. */
int dec_kv_add(backend *be, dec_kv *kv, const int *p, int len, int u, int parent);
/* This call's generation becomes the previous call's. */
void dec_kv_end(dec_kv *kv);
/* Layer l's keys / values of a slot (stride rows of d). */
float *dec_kv_k(const dec_kv *kv, int slot, int l);
float *dec_kv_v(const dec_kv *kv, int slot, int l);

#endif
