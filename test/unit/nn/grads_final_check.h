/* Checks asr_model.grads_final (the reports that let DDP buckets start during the backward): arm
 * before asr_model_backward, verify after. Each report snapshots the range's gradients; after the
 * backward every reported float must still hold its snapshot bit for bit (nothing wrote it after
 * it was reported final), no float may be reported twice, and every trained parameter outside
 * the encoder's embedding (which the caller takes after the backward) must have been reported. */
#ifndef ESPNET3_TEST_GRADS_FINAL_CHECK_H
#define ESPNET3_TEST_GRADS_FINAL_CHECK_H

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "core/nn/model.h"

typedef struct gf_check {
    asr_model *m;
    float *snap;
    unsigned char *seen;
    int ranges;
} gf_check;

static void gf_hook(void *ctx, size_t lo, size_t hi)
{
    gf_check *g = ctx;
    cr_assert(lo < hi && hi <= g->m->table.total, "range [%zu, %zu) of %zu", lo, hi, g->m->table.total);
    for (size_t i = lo; i < hi; i++) {
        cr_assert(!g->seen[i], "float %zu reported final twice", i);
        g->seen[i] = 1;
    }
    backend *be = g->m->be;
    be->copy(be, g->snap + lo, g->m->grads + lo, (hi - lo) * sizeof(float), BACKEND_DEVICE_TO_HOST);
    g->ranges++;
}

static void gf_arm(gf_check *g, asr_model *m)
{
    g->m = m;
    g->snap = calloc(m->table.total, sizeof *g->snap);
    g->seen = calloc(m->table.total, 1);
    g->ranges = 0;
    m->grads_final = gf_hook;
    m->grads_final_ctx = g;
}

static void gf_verify(gf_check *g)
{
    asr_model *m = g->m;
    size_t n = m->table.total;
    float *fin = malloc(n * sizeof *fin);
    m->be->copy(m->be, fin, m->grads, n * sizeof *fin, BACKEND_DEVICE_TO_HOST);
    for (size_t i = 0; i < n; i++)
        if (g->seen[i]) cr_assert(!memcmp(&fin[i], &g->snap[i], sizeof(float)), "float %zu changed after it was "
                                                                                  "reported final", i);
    for (size_t k = 0; k < m->table.n; k++) {
        const param_info *p = &m->table.items[k];
        if (p->kind != PARAM_TRAINED || !strncmp(p->name, "encoder.embed.", 14)) continue;
        for (size_t i = 0; i < p->count; i++) cr_assert(g->seen[p->offset + i], "%s was never reported final", p->name);
    }
    cr_assert_geq(g->ranges, m->dims.blocks + 1, "one report per block and one for the heads at least");
    m->grads_final = NULL;
    free(fin), free(g->snap), free(g->seen);
}

#endif
