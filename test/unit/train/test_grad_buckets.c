/* DDP gradient buckets (core/train/grad_buckets.c) against a recording comm: a bucket starts once
 * all its floats are final, in the fixed order last bucket first (a ready bucket waits for the
 * ones above it), finish starts the rest and waits once, and a start that fails inside the
 * backward is reported by finish. */
#include <criterion/criterion.h>
#include <string.h>

#include "core/train/grad_buckets.h"

typedef struct rec_comm {
    comm base;
    float *g;
    size_t off[16], len[16];
    int starts, waits, fail_at;
} rec_comm;

static int rec_start(comm *c, float *buf, size_t n, comm_op op, esp_err *err)
{
    rec_comm *r = (rec_comm *)c;
    cr_assert_eq(op, COMM_AVG);
    if (r->starts == r->fail_at) return esp_fail(err, "comm: rank 1 died");
    r->off[r->starts] = (size_t)(buf - r->g), r->len[r->starts] = n;
    r->starts++;
    return 0;
}
static int rec_wait(comm *c, esp_err *err)
{
    (void)err;
    ((rec_comm *)c)->waits++;
    return 0;
}
static const comm_vtbl rec_vtbl = {.all_reduce_start = rec_start, .wait = rec_wait};

static rec_comm *rec(float *g)
{
    static rec_comm r;
    memset(&r, 0, sizeof r);
    r.base.v = &rec_vtbl, r.base.world = 2, r.g = g, r.fail_at = -1;
    return &r;
}

Test(grad_buckets, a_bucket_starts_when_final_in_the_fixed_order)
{
    float g[10];
    rec_comm *r = rec(g);
    grad_buckets b;
    grad_buckets_init(&b, 10, 4); /* [0,4) [4,8) [8,10) */
    cr_assert_eq(b.nb, 3);
    grad_buckets_arm(&b, &r->base, g);
    grad_buckets_final(&b, 8, 10);
    cr_assert_eq(r->starts, 1);
    cr_assert(r->off[0] == 8 && r->len[0] == 2);
    grad_buckets_final(&b, 0, 4); /* bucket 0 is ready but bucket 1 is not: it waits */
    cr_assert_eq(r->starts, 1);
    grad_buckets_final(&b, 4, 6);
    cr_assert_eq(r->starts, 1);
    grad_buckets_final(&b, 6, 8);
    cr_assert_eq(r->starts, 3);
    cr_assert(r->off[1] == 4 && r->len[1] == 4 && r->off[2] == 0 && r->len[2] == 4);
    esp_err err;
    cr_assert_eq(grad_buckets_finish(&b, &err), 0);
    cr_assert_eq(r->starts, 3);
    cr_assert_eq(r->waits, 1);
    cr_assert(!b.armed);
    grad_buckets_final(&b, 0, 10); /* not armed: a backward without a step reports nothing */
    cr_assert_eq(r->starts, 3);
    grad_buckets_free(&b);
}

Test(grad_buckets, ranges_across_buckets_and_finish_without_reports)
{
    float g[10];
    rec_comm *r = rec(g);
    grad_buckets b;
    grad_buckets_init(&b, 10, 4);
    grad_buckets_arm(&b, &r->base, g);
    grad_buckets_final(&b, 3, 10); /* completes bucket 2 and bucket 1, part of bucket 0 */
    cr_assert_eq(r->starts, 2);
    esp_err err;
    cr_assert_eq(grad_buckets_finish(&b, &err), 0);
    cr_assert(r->starts == 3 && r->off[2] == 0);
    /* The next step: re-armed, nothing reported (a rank whose loss was invalid): finish starts all
     * in the same order as every other rank. */
    r = rec(g);
    grad_buckets_arm(&b, &r->base, g);
    cr_assert_eq(grad_buckets_finish(&b, &err), 0);
    cr_assert(r->starts == 3 && r->off[0] == 8 && r->off[1] == 4 && r->off[2] == 0 && r->waits == 1);
    grad_buckets_free(&b);
}

Test(grad_buckets, a_failed_start_inside_the_backward_fails_finish)
{
    float g[10];
    rec_comm *r = rec(g);
    r->fail_at = 1;
    grad_buckets b;
    grad_buckets_init(&b, 10, 4);
    grad_buckets_arm(&b, &r->base, g);
    grad_buckets_final(&b, 0, 10);
    cr_assert_eq(r->starts, 1);
    esp_err err;
    cr_assert_eq(grad_buckets_finish(&b, &err), -1);
    cr_assert_str_eq(err.msg, "comm: rank 1 died");
    cr_assert_eq(r->waits, 0);
    grad_buckets_free(&b);
}

Test(grad_buckets, bucket_size_is_an_eighth_between_4ki_and_4mi)
{
    cr_assert_eq(grad_bucket_floats(1000), (size_t)1 << 12);
    cr_assert_eq(grad_bucket_floats(80000), 10000);
    cr_assert_eq(grad_bucket_floats((size_t)8 << 20), (size_t)1 << 20);
    cr_assert_eq(grad_bucket_floats((size_t)1 << 30), (size_t)4 << 20);
}
