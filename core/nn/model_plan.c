#include "core/nn/model_plan.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The planning backend: alloc records the size and hands out a distinct address that is never
 * read or written; copies and fills do nothing; it has no compute entries. */
typedef struct recorder {
    arena_plan *p;
    size_t cap;
    arena_kind kind; /* of the allocations now */
    uintptr_t next;  /* the next fake address */
} recorder;

static void *plan_alloc(backend *be, size_t bytes)
{
    recorder *r = be->impl;
    arena_plan *p = r->p;
    if (p->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 64;
        p->regions = xrealloc(p->regions, r->cap * sizeof *p->regions);
    }
    p->regions[p->n++] = (arena_region){.kind = r->kind, .bytes = bytes};
    p->kind_bytes[r->kind] += bytes;
    void *addr = (void *)r->next;
    r->next += (bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN + ARENA_ALIGN;
    return addr;
}

static void plan_free(backend *be, void *q)
{
    (void)be, (void)q;
}

static void plan_copy(backend *be, void *dst, const void *src, size_t bytes, backend_copy_kind kind)
{
    (void)be, (void)dst, (void)src, (void)bytes, (void)kind;
}

static void plan_fill(backend *be, void *q, int byte, size_t bytes)
{
    (void)be, (void)q, (void)byte, (void)bytes;
}

static void plan_synchronize(backend *be)
{
    (void)be;
}

void model_arena_plan(arena_plan *p, const model_dims *d, const model_rates *rates, int B, int T, int Lmax,
                      size_t n_optim_buffers)
{
    memset(p, 0, sizeof *p);
    recorder r = {.p = p, .kind = ARENA_PARAMS, .next = (uintptr_t)1 << 40};
    backend be = {.name = "plan", .impl = &r, .alloc = plan_alloc, .free = plan_free, .copy = plan_copy,
                  .fill = plan_fill, .synchronize = plan_synchronize};
    asr_model m;
    asr_model_init(&m, &be, d, rates); /* params, then grads */
    ESP_CHECK(p->n == 2);
    p->regions[1].kind = ARENA_GRADS;
    p->kind_bytes[ARENA_PARAMS] -= p->regions[1].bytes;
    p->kind_bytes[ARENA_GRADS] += p->regions[1].bytes;
    /* The optimizer's state, as optim_state_init allocates it (n floats per buffer). */
    r.kind = ARENA_MOMENTS;
    for (size_t i = 0; i < n_optim_buffers; i++) plan_alloc(&be, m.table.total * sizeof(float));
    r.kind = ARENA_ACTS;
    asr_model_reserve(&m, B, T, Lmax);
    asr_model_free(&m);
    size_t off = 0;
    for (size_t i = 0; i < p->n; i++) {
        p->regions[i].offset = off;
        off += (p->regions[i].bytes + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
    }
    p->total = off;
    p->staging_bytes = (size_t)B * T * d->idim * sizeof(float) + (size_t)B * Lmax * sizeof(int) + 2 * (size_t)B * sizeof(int);
}

void arena_plan_free(arena_plan *p)
{
    free(p->regions);
    memset(p, 0, sizeof *p);
}

const char *arena_kind_name(arena_kind k)
{
    static const char *const names[] = {"params", "grads", "moments", "activations"};
    return (unsigned)k < ARENA_KINDS ? names[k] : "?";
}

size_t model_infer_act_bytes(const model_dims *d, int B, int T)
{
    arena_plan p = {0};
    recorder r = {.p = &p, .kind = ARENA_PARAMS, .next = (uintptr_t)1 << 40};
    backend be = {.name = "plan", .impl = &r, .alloc = plan_alloc, .free = plan_free, .copy = plan_copy,
                  .fill = plan_fill, .synchronize = plan_synchronize};
    asr_model m;
    asr_model_init_inference(&m, &be, d);
    r.kind = ARENA_ACTS;
    asr_model_reserve(&m, B, T, 0);
    asr_model_free(&m);
    size_t bytes = p.kind_bytes[ARENA_ACTS];
    arena_plan_free(&p);
    return bytes;
}
