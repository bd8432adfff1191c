/* The tiling of the Winograd form of the encoder's 3x3 / stride-2 convolution (the second conv of
 * Conv2dSubsampling; the arithmetic is in core/compute/ops_winograd_impl.h). Type-independent: the plan and
 * the scratch sizes, so core/compute/ops.h can size scratch buffers without the implementation.
 *
 * Along one dimension the strided correlation y[i] = w0 x[2i] + w1 x[2i+1] + w2 x[2i+2] splits into
 * the even samples, a 2-tap correlation that Winograd's F(m, 2) computes with m + 1 products for m
 * outputs, and the odd samples times the middle tap (m products): 2m + 1 products for m outputs
 * instead of 3m. A tile of mh x mw outputs thus costs (2mh + 1)(2mw + 1) channel-matrix products
 * instead of 9 mh mw: 81 against 144 for 4 x 4 tiles, 121 against 225 for 5 x 5. Each product is
 * a GEMM over the channels, batched over every tile of a chunk of batch items. */
#ifndef ESPNET3_CONV_WINOGRAD_H
#define ESPNET3_CONV_WINOGRAD_H

#include <stddef.h>

enum {
    WINO_MAX_M = 5,          /* F(2, 2) .. F(5, 2): larger m needs worse-conditioned points */
    WINO_MAX_A = 2 * WINO_MAX_M + 1,
    WINO_MAX_CLASSES = (WINO_MAX_M + 2) * (WINO_MAX_M + 2),
    /* Tiles per chunk the plan aims at: GEMMs of a few hundred rows run near sgemm's best rate,
     * and a chunk's transformed tiles stay within a few tens of MB. */
    WINO_CHUNK_TILES = 384,
};

typedef struct wino_plan {
    int mh, mw;   /* outputs per tile along h and w */
    int ah, aw;   /* points per tile along h and w: 2m + 1 */
    int th, tw;   /* tiles per batch item along h and w (the last ones may overhang) */
    int items;    /* batch items per chunk */
    int classes;  /* distinct transformed kernels: (mh + 2)(mw + 2) */
} wino_plan;

/* The tile size for `out` outputs along a dimension: fewest points in all, ceil(out / m) (2m + 1),
 * ties to the smaller m (better conditioned). */
static inline int wino_pick_m(int out)
{
    int best = 2;
    long best_cost = (long)((out + 1) / 2) * 5;
    for (int m = 3; m <= WINO_MAX_M; m++) {
        long cost = (long)((out + m - 1) / m) * (2 * m + 1);
        if (cost < best_cost) best = m, best_cost = cost;
    }
    return best;
}

/* The plan for outputs of oh x ow (both > 0) per item. */
static inline wino_plan wino_plan_make(int oh, int ow)
{
    wino_plan p;
    p.mh = wino_pick_m(oh), p.mw = wino_pick_m(ow);
    p.ah = 2 * p.mh + 1, p.aw = 2 * p.mw + 1;
    p.th = (oh + p.mh - 1) / p.mh, p.tw = (ow + p.mw - 1) / p.mw;
    int per_item = p.th * p.tw;
    p.items = per_item >= WINO_CHUNK_TILES ? 1 : (WINO_CHUNK_TILES + per_item - 1) / per_item;
    p.classes = (p.mh + 2) * (p.mw + 2);
    return p;
}

/* Scratch parts are rounded to 16 elements so each stays 64-byte aligned. */
static inline size_t wino_round(size_t n)
{
    return (n + 15) & ~(size_t)15;
}

/* Elements of one band's sums and the like (the tile transforms' own scratch), c channels: the
 * h-transform of a band of tiles, ah x (2 mw tw + 1) x c, or an output-gradient tile and its
 * w-transform, mh x (mw + aw) x c; then one vector of c. */
static inline size_t wino_tile_scratch(const wino_plan *p, size_t c)
{
    size_t band = wino_round((size_t)p->ah * (2 * p->mw * p->tw + 1) * c);
    size_t grad = wino_round((size_t)p->mh * p->mw * c) + wino_round((size_t)p->mh * p->aw * c);
    return (band > grad ? band : grad) + wino_round(c);
}

/* Where a pass's parts lie in its scratch (element offsets): transformed kernels (classes x ic x oc),
 * their gradients (backward only), the taps reordered (9 x ic x oc), a chunk's transformed inputs
 * (ah aw x tiles x ic) and products (ah aw x tiles x oc), the bias gradient's sum per band of a
 * chunk (backward only: items x th x oc), and the tile transforms' own, one per thread (`parts` of
 * them, tile_n each); `total` is the size. The implementation carves its buffers from this, so the
 * size cannot drift from them. */
typedef struct wino_layout {
    size_t u, du, wt, v, m, dbb, tile, tile_n, total;
} wino_layout;

static inline wino_layout wino_layout_make(const wino_plan *p, int ic, int oc, int backward, int parts)
{
    size_t ker = wino_round((size_t)p->classes * ic * oc), pts = (size_t)p->ah * p->aw;
    size_t tiles = (size_t)p->items * p->th * p->tw;
    wino_layout l;
    l.u = 0;
    l.du = l.u + ker;
    l.wt = l.du + (backward ? ker : 0);
    l.v = l.wt + wino_round((size_t)9 * ic * oc);
    l.m = l.v + wino_round(pts * tiles * ic);
    l.dbb = l.m + wino_round(pts * tiles * oc);
    l.tile = l.dbb + (backward ? wino_round((size_t)p->items * p->th * oc) : 0);
    l.tile_n = wino_tile_scratch(p, (size_t)(ic > oc ? ic : oc));
    l.total = l.tile + (size_t)(parts < 1 ? 1 : parts) * l.tile_n;
    return l;
}

/* Elements of the transformed input tiles of nb items (pts x tiles x ic per chunk, chunks in item
 * order): what a forward can keep for the backward's weight gradient (ops_conv2d_saved_floats);
 * with nb the chunk's first item, where that chunk's tiles start. */
static inline size_t wino_plan_saved(const wino_plan *p, int nb, int ic)
{
    return (size_t)p->ah * p->aw * p->th * p->tw * (size_t)nb * ic;
}

static inline size_t wino_saved_floats(int nb, int ic, int oh, int ow)
{
    wino_plan p = wino_plan_make(oh, ow);
    return wino_plan_saved(&p, nb, ic);
}

/* Elements of scratch for a forward (backward = 0) or backward pass on `threads` threads. */
static inline size_t wino_scratch_threads(int ic, int oc, int oh, int ow, int backward, int threads)
{
    wino_plan p = wino_plan_make(oh, ow);
    return wino_layout_make(&p, ic, oc, backward, threads).total;
}

/* The same on one thread. */
static inline size_t wino_scratch(int ic, int oc, int oh, int ow, int backward)
{
    return wino_scratch_threads(ic, oc, oh, ow, backward, 1);
}

#endif
