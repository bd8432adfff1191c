/* The beam-search step's self-attention key/value slots and the records naming them; see
 * core/nn/decoder_kv.h. */
#include "core/nn/decoder_kv.h"

#include <stdlib.h>
#include <string.h>

#include "core/base/log.h"

void dec_kv_init(dec_kv *kv, int nl, int d)
{
    memset(kv, 0, sizeof *kv);
    kv->nl = nl, kv->d = d;
}

void dec_kv_free(backend *be, dec_kv *kv)
{
    be->free(be, kv->k), be->free(be, kv->v);
    free(kv->filled), free(kv->refs), free(kv->free_slots), free(kv->row_id), free(kv->kept);
    for (int g = 0; g < 3; g++) {
        kv_gen *e = &kv->gen[g];
        free(e->slot), free(e->lens), free(e->utt), free(e->tokens);
    }
    dec_kv_init(kv, kv->nl, kv->d);
}

static size_t slot_floats(const dec_kv *kv, int stride) { return (size_t)kv->nl * stride * kv->d; }

float *dec_kv_k(const dec_kv *kv, int slot, int l)
{
    return kv->k + (size_t)slot * slot_floats(kv, kv->stride) + (size_t)l * kv->stride * kv->d;
}

float *dec_kv_v(const dec_kv *kv, int slot, int l)
{
    return kv->v + (size_t)slot * slot_floats(kv, kv->stride) + (size_t)l * kv->stride * kv->d;
}

/* The free list from the reference counts (a slot freed now keeps its rows as kept ones). */
static void collect_free(dec_kv *kv)
{
    kv->n_free = 0;
    for (int s = kv->nslots - 1; s >= 0; s--)
        if (kv->refs[s] == 0) {
            if (kv->filled[s] > 0) kv->kept[s] = kv->filled[s];
            kv->free_slots[kv->n_free++] = s, kv->filled[s] = 0;
        }
}

void dec_kv_clear(dec_kv *kv)
{
    for (int g = 0; g < 3; g++) kv->gen[g].n = 0;
    if (kv->nslots) memset(kv->refs, 0, (size_t)kv->nslots * sizeof *kv->refs);
    collect_free(kv);
    if (kv->nslots) memset(kv->kept, 0, (size_t)kv->nslots * sizeof *kv->kept); /* another utterance's rows */
}

/* Room for n records of prefixes up to stride tokens in generation e, its records kept. */
static void gen_reserve(kv_gen *e, int n, int stride)
{
    if (n <= e->cap && stride <= e->tok_stride) return;
    int cap = n > e->cap ? n : e->cap, ts = stride > e->tok_stride ? stride : e->tok_stride;
    int *tok = xmalloc((size_t)cap * ts * sizeof *tok);
    for (int r = 0; r < e->n; r++) memcpy(tok + (size_t)r * ts, e->tokens + (size_t)r * e->tok_stride, (size_t)e->lens[r] * sizeof *tok);
    free(e->tokens);
    e->tokens = tok, e->tok_stride = ts;
    e->slot = xrealloc(e->slot, (size_t)cap * sizeof *e->slot);
    e->lens = xrealloc(e->lens, (size_t)cap * sizeof *e->lens);
    e->utt = xrealloc(e->utt, (size_t)cap * sizeof *e->utt);
    e->cap = cap;
}

void dec_kv_reserve(backend *be, dec_kv *kv, int free_needed, int len, int limit)
{
    int stride = kv->stride, nslots = kv->nslots;
    if (len > stride) {
        int grown = stride + stride / 2;
        if (limit > 0 && grown > limit) grown = limit;
        stride = (len > grown ? len : grown) + 8;
    }
    if (kv->n_free < free_needed) { /* by half at least: a beam that fills up moves the slots a few times */
        int more = free_needed - kv->n_free;
        nslots += more > nslots / 2 ? more : nslots / 2;
    }
    if (stride == kv->stride && nslots == kv->nslots) return;
    /* A new layout: the live slots' written rows move into it. */
    size_t per = slot_floats(kv, stride), bytes = (size_t)nslots * per * sizeof(float) + 64;
    float *k = be->alloc(be, bytes), *v = be->alloc(be, bytes);
    size_t row = (size_t)kv->d * sizeof(float);
    for (int s = 0; s < kv->nslots; s++)
        for (int l = 0; l < kv->nl && kv->filled[s] > 0; l++) {
            size_t at = (size_t)s * per + (size_t)l * stride * kv->d;
            be->copy(be, k + at, dec_kv_k(kv, s, l), (size_t)kv->filled[s] * row, BACKEND_DEVICE_TO_DEVICE);
            be->copy(be, v + at, dec_kv_v(kv, s, l), (size_t)kv->filled[s] * row, BACKEND_DEVICE_TO_DEVICE);
        }
    be->free(be, kv->k), be->free(be, kv->v);
    kv->k = k, kv->v = v;
    unsigned *ids = xcalloc((size_t)nslots * stride, sizeof *ids);
    for (int s = 0; s < kv->nslots; s++)
        memcpy(ids + (size_t)s * stride, kv->row_id + (size_t)s * kv->stride, (size_t)kv->filled[s] * sizeof *ids);
    free(kv->row_id);
    kv->row_id = ids;
    kv->filled = xrealloc(kv->filled, (size_t)nslots * sizeof *kv->filled);
    kv->refs = xrealloc(kv->refs, (size_t)nslots * sizeof *kv->refs);
    kv->kept = xrealloc(kv->kept, (size_t)nslots * sizeof *kv->kept);
    kv->free_slots = xrealloc(kv->free_slots, (size_t)nslots * sizeof *kv->free_slots);
    for (int s = kv->nslots; s < nslots; s++) kv->filled[s] = kv->refs[s] = 0;
    for (int s = 0; s < nslots; s++) kv->kept[s] = 0; /* a free slot's rows did not move */
    kv->nslots = nslots, kv->stride = stride;
    for (int g = 0; g < 3; g++) gen_reserve(&kv->gen[g], kv->gen[g].n, stride);
    collect_free(kv);
}

kv_gen *dec_kv_begin(dec_kv *kv)
{
    kv_gen *e = &kv->gen[(kv->prev + 1) % 3];
    int freed = 0;
    for (int r = 0; r < e->n; r++) freed |= --kv->refs[e->slot[r]] == 0;
    e->n = 0;
    if (freed) collect_free(kv);
    return e;
}

/* A record of generation e holding the first len - 1 positions of p in utterance u, or -1. */
static int find_in(const kv_gen *e, const int *p, int len, int u)
{
    for (int r = 0; r < e->n; r++)
        if (e->utt[r] == u && e->lens[r] >= len - 1 &&
            !memcmp(e->tokens + (size_t)r * e->tok_stride, p, (size_t)(len - 1) * sizeof *p))
            return r;
    return -1;
}

int dec_kv_find_parent(const dec_kv *kv, const int *p, int len, int u)
{
    if (len < 2) return -1;
    for (int back = 0; back < 2; back++) { /* the previous call first */
        const kv_gen *e = &kv->gen[(kv->prev + 3 - back) % 3];
        int r = find_in(e, p, len, u);
        if (r >= 0) return e->slot[r];
    }
    return -1;
}

/* Rows [0, n) of slot s that hold the computations of those of slot t. */
static int same_rows(const dec_kv *kv, int s, int t, int n)
{
    const unsigned *a = kv->row_id + (size_t)s * kv->stride, *b = kv->row_id + (size_t)t * kv->stride;
    int m = 0;
    while (m < n && a[m] == b[m]) m++;
    return m;
}

/* Takes a free slot for a copy of rows [0, n) of parent (-1: none): the one already holding most
 * of them (the last freed on ties); returns it and the rows it holds in *held. */
static int take_free(dec_kv *kv, int parent, int n, int *held)
{
    ESP_CHECK(kv->n_free > 0);
    int best = kv->n_free - 1, most = 0;
    for (int f = kv->n_free - 1; f >= 0 && parent >= 0 && most < n; f--) {
        int s = kv->free_slots[f], lim = kv->kept[s] < n ? kv->kept[s] : n;
        int m = lim > most ? same_rows(kv, s, parent, lim) : 0;
        if (m > most) best = f, most = m;
    }
    int s = kv->free_slots[best];
    kv->free_slots[best] = kv->free_slots[--kv->n_free];
    kv->kept[s] = 0;
    *held = most;
    return s;
}

int dec_kv_add(backend *be, dec_kv *kv, const int *p, int len, int u, int parent)
{
    ESP_CHECK(len >= 1 && len <= kv->stride);
    kv_gen *e = &kv->gen[(kv->prev + 1) % 3];
    gen_reserve(e, e->n + 1, kv->stride);
    int s = parent, held = 0;
    unsigned *ids;
    if (parent < 0 || kv->filled[parent] != len - 1) {
        s = take_free(kv, parent, parent >= 0 ? len - 1 : 0, &held);
        ids = kv->row_id + (size_t)s * kv->stride;
        if (parent >= 0) {
            ESP_CHECK(kv->filled[parent] >= len - 1);
            size_t at = (size_t)held * kv->d, bytes = (size_t)(len - 1 - held) * kv->d * sizeof(float);
            for (int l = 0; l < kv->nl && bytes; l++) {
                be->copy(be, dec_kv_k(kv, s, l) + at, dec_kv_k(kv, parent, l) + at, bytes, BACKEND_DEVICE_TO_DEVICE);
                be->copy(be, dec_kv_v(kv, s, l) + at, dec_kv_v(kv, parent, l) + at, bytes, BACKEND_DEVICE_TO_DEVICE);
            }
            memcpy(ids + held, kv->row_id + (size_t)parent * kv->stride + held, (size_t)(len - 1 - held) * sizeof *ids);
        } else {
            for (int r = 0; r < len - 1; r++) ids[r] = ++kv->next_id; /* all len rows the caller's */
        }
    }
    kv->row_id[(size_t)s * kv->stride + len - 1] = ++kv->next_id;
    kv->filled[s] = len; /* row len - 1 (or all len: a new slot without parent) is the caller's to write now */
    kv->refs[s]++;
    int r = e->n++;
    e->slot[r] = s, e->lens[r] = len, e->utt[r] = u;
    memcpy(e->tokens + (size_t)r * e->tok_stride, p, (size_t)len * sizeof *p);
    return s;
}

void dec_kv_end(dec_kv *kv) { kv->prev = (kv->prev + 1) % 3; }
