/* The decoder step's key/value slots (core/nn/decoder_kv.h): a first child writes into its
 * parent's slot, a second child or a prefix scored again gets a copy, rows once written never
 * change, slots come back when no kept call names them, and growing the positions keeps every
 * live slot's rows. */
#include <criterion/criterion.h>

#include "core/compute/backend.h"
#include "core/nn/decoder_kv.h"

enum { NL = 2, D = 3 };

/* Writes row `pos` of every layer of a slot: keys (tag, l, pos), values their negation. */
static void put(dec_kv *kv, int slot, int pos, float tag)
{
    for (int l = 0; l < NL; l++)
        for (int j = 0; j < D; j++) {
            dec_kv_k(kv, slot, l)[(size_t)pos * D + j] = tag + 10.0f * l + 0.1f * pos;
            dec_kv_v(kv, slot, l)[(size_t)pos * D + j] = -(tag + 10.0f * l + 0.1f * pos);
        }
}

/* Whether row pos of every layer of a slot holds what put wrote with tag. */
static int holds(const dec_kv *kv, int slot, int pos, float tag)
{
    for (int l = 0; l < NL; l++)
        for (int j = 0; j < D; j++)
            if (dec_kv_k(kv, slot, l)[(size_t)pos * D + j] != tag + 10.0f * l + 0.1f * pos ||
                dec_kv_v(kv, slot, l)[(size_t)pos * D + j] != -(tag + 10.0f * l + 0.1f * pos))
                return 0;
    return 1;
}

/* One decoder call: records for the prefixes (n of them), new rows written with tag. */
static void call(backend *be, dec_kv *kv, int (*p)[8], const int *len, int n, float tag, int *slot)
{
    dec_kv_begin(kv);
    int parent[8];
    for (int i = 0; i < n; i++) parent[i] = dec_kv_find_parent(kv, p[i], len[i], 0);
    dec_kv_reserve(be, kv, n, 8, 0);
    for (int i = 0; i < n; i++) {
        slot[i] = dec_kv_add(be, kv, p[i], len[i], 0, parent[i]);
        for (int pos = parent[i] < 0 ? 0 : len[i] - 1; pos < len[i]; pos++) put(kv, slot[i], pos, tag);
    }
    dec_kv_end(kv);
}

/* Each test's CPU backend and slots. */
static backend *be;
static dec_kv kv;

static void setup(void)
{
    esp_err err;
    be = backend_open(BACKEND_CPU, 0, 1, &err);
    cr_assert(be, "%s", err.msg);
    dec_kv_init(&kv, NL, D);
}

static void teardown(void)
{
    dec_kv_free(be, &kv);
    backend_close(be);
}

TestSuite(decoder_kv, .init = setup, .fini = teardown);

Test(decoder_kv, first_child_in_place_sibling_and_rescore_copied_rows_never_change)
{
    int s0[8], s1[8], s2[8], s3[8];
    int p0[1][8] = {{9}}, l0[] = {1};
    call(be, &kv, p0, l0, 1, 1.0f, s0); /* <sos>: computed whole */
    int p1[2][8] = {{9, 4}, {9, 5}}, l1[] = {2, 2};
    call(be, &kv, p1, l1, 2, 2.0f, s1);
    cr_expect_eq(s1[0], s0[0], "the first child takes its parent's slot");
    cr_expect_neq(s1[1], s0[0], "a sibling gets a slot of its own");
    cr_expect(holds(&kv, s1[1], 0, 1.0f) && holds(&kv, s1[1], 1, 2.0f), "the sibling: the parent's row copied, its own after");
    cr_expect(holds(&kv, s0[0], 0, 1.0f) && holds(&kv, s0[0], 1, 2.0f));
    /* The online search's rewind: {9, 4} scored again (its last row anew) and {9, 4, 7} */
    int p2[2][8] = {{9, 4}, {9, 5, 7}}, l2[] = {2, 3};
    call(be, &kv, p2, l2, 2, 3.0f, s2);
    cr_expect_neq(s2[0], s1[0], "a prefix scored again does not overwrite its rows");
    cr_expect(holds(&kv, s2[0], 0, 1.0f) && holds(&kv, s2[0], 1, 3.0f));
    cr_expect(holds(&kv, s1[0], 1, 2.0f), "the earlier record's row is unchanged");
    cr_expect_eq(s2[1], s1[1]);
    cr_expect(holds(&kv, s2[1], 2, 3.0f) && holds(&kv, s2[1], 1, 2.0f));
    /* Three more calls of one new prefix: the first calls' slots come back; the kept ones live. */
    int used_before = kv.nslots;
    for (int c = 0; c < 3; c++) {
        int p3[1][8] = {{9, 5, 7, 1, 1, 1}}, l3[] = {4 + c};
        call(be, &kv, p3, l3, 1, 4.0f + c, s3);
    }
    cr_expect_eq(kv.nslots, used_before, "freed slots are reused");
    cr_expect(holds(&kv, s3[0], 0, 1.0f) && holds(&kv, s3[0], 3, 4.0f) && holds(&kv, s3[0], 5, 6.0f));
    /* Growing the positions moves the live slot's rows. */
    dec_kv_reserve(be, &kv, 1, 64, 0);
    cr_expect_geq(kv.stride, 64);
    for (int pos = 0; pos < 6; pos++)
        cr_expect(holds(&kv, s3[0], pos, pos == 0 ? 1.0f : pos == 1 ? 2.0f : pos == 2 ? 3.0f : 1.0f + pos),
                  "row %d after the move", pos);
    dec_kv_clear(&kv);
    cr_expect_eq(kv.n_free, kv.nslots, "a new utterance frees every slot");
}

/* A copy into a free slot keeps the rows that slot already holds of the same computations and
 * copies the rest: a freed cousin's rows of a shared prefix are reused, but not rows of the same
 * tokens computed again (the rewind's), whose values may differ. */
Test(decoder_kv, a_copy_reuses_only_rows_of_the_same_computations)
{
    int s[8];
    int p1[1][8] = {{9}}, l1[] = {1};
    call(be, &kv, p1, l1, 1, 1.0f, s);
    int p2[2][8] = {{9, 4}, {9, 5}}, l2[] = {2, 2};
    call(be, &kv, p2, l2, 2, 2.0f, s);
    int p3[3][8] = {{9, 4, 1}, {9, 4, 2}, {9, 5, 1}}, l3[] = {3, 3, 3};
    call(be, &kv, p3, l3, 3, 3.0f, s); /* {9, 4} now in two slots: its first computation */
    for (int c = 0; c < 3; c++) { /* {9, 4}'s lineage ends: three calls later its slots are free */
        int p[1][8] = {{9, 5, 1, 1, 1, 1}}, l[] = {4 + c};
        call(be, &kv, p, l, 1, 4.0f + c, s);
    }
    /* {9, 4} scored again (row 0 found in {9, 5, 1, ...}'s slot, row 1 a new computation, tag 7),
     * into a free slot that holds row 0 already; then its two children: the second copies into
     * the other free slot, which holds {9, 4}'s first row 1 (tag 2): not the rescore's. */
    int p7[1][8] = {{9, 4}}, l7[] = {2};
    call(be, &kv, p7, l7, 1, 7.0f, s);
    cr_expect(holds(&kv, s[0], 0, 1.0f) && holds(&kv, s[0], 1, 7.0f), "the rescored prefix");
    int p8[2][8] = {{9, 4, 1}, {9, 4, 2}}, l8[] = {3, 3};
    call(be, &kv, p8, l8, 2, 8.0f, s);
    for (int k = 0; k < 2; k++)
        cr_expect(holds(&kv, s[k], 0, 1.0f) && holds(&kv, s[k], 1, 7.0f) && holds(&kv, s[k], 2, 8.0f),
                  "child %d: row 1 from the rescore", k);
}
