/* Shape files, ESPnet2's batch samplers, the epoch shuffle and ESPnet3's rank striding / shard
 * rotation: hand-computed cases, plus fixtures from scripts/make_sampler_fixtures.py (a port of
 * ESPnet2's sampler code, with numpy's own shuffle). */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/data/sampler.h"
#include "core/formats/shapes.h"
#include "test/unit/test_util.h"

static shape_table parse_ok(const char *name, const char *text, int keys_only)
{
    shape_table t;
    esp_err err;
    int rc = shape_table_parse(&t, name, text, strlen(text), keys_only, &err);
    cr_assert_eq(rc, 0, "%s", err.msg);
    return t;
}

static void parse_fails(const char *text, int keys_only, const char *want)
{
    shape_table t;
    esp_err err = {{0}};
    cr_assert_eq(shape_table_parse(&t, "s.txt", text, strlen(text), keys_only, &err), -1, "parsed: %s", text);
    cr_assert_str_eq(err.msg, want);
}

/* Batches as "a b|c d" (uids of the first table). */
static char *batches_text(const batch_list *b, const shape_table *keys)
{
    size_t cap = 64;
    for (size_t i = 0; i < b->start[b->n]; i++) cap += strlen(keys->keys[b->utt[i]]) + 1;
    char *s = xcalloc(cap + b->n, 1);
    for (size_t k = 0; k < b->n; k++) {
        if (k) strcat(s, "|");
        for (size_t i = b->start[k]; i < b->start[k + 1]; i++) {
            if (i > b->start[k]) strcat(s, " ");
            strcat(s, keys->keys[b->utt[i]]);
        }
    }
    return s;
}

static void expect_batches(const sampler_opts *o, const shape_table *const *t, int n, const char *want)
{
    batch_list b;
    esp_err err;
    cr_assert_eq(sampler_build(&b, o, t, n, &err), 0, "%s", err.msg);
    char *got = batches_text(&b, t[0]);
    cr_expect_str_eq(got, want);
    free(got);
    batch_list_free(&b);
}

static void expect_build_error(const sampler_opts *o, const shape_table *const *t, int n, const char *want)
{
    batch_list b;
    esp_err err = {{0}};
    cr_assert_eq(sampler_build(&b, o, t, n, &err), -1);
    cr_expect_str_eq(err.msg, want);
}

/* ---- shape files ------------------------------------------------------------------------- */

Test(shapes, parses_espnet_shape_lines)
{
    shape_table t = parse_ok("feats_shape", "uttB 201,80\r\n  uttA\t100, 80 \nuttC 7\ruttD +3,2,1", 0);
    cr_assert_eq(t.n, 4);
    cr_assert_str_eq(t.keys[0], "uttB");
    cr_assert_str_eq(t.keys[1], "uttA");
    cr_assert_eq(shape_length(&t, 0), 201);
    cr_assert_eq(t.ndim[1], 2);
    cr_assert_eq(t.dims[t.off[1] + 1], 80);
    cr_assert_eq(t.ndim[2], 1);
    cr_assert_eq(shape_length(&t, 2), 7);
    cr_assert_eq(t.line[3], 4); /* a lone \r ends a line, as Python's universal newlines */
    cr_assert_eq(t.ndim[3], 3);
    cr_assert_eq(shape_table_find(&t, "uttA"), 1);
    cr_assert_eq(shape_table_find(&t, "uttD"), 3);
    cr_assert_eq(shape_table_find(&t, "uttZ"), -1);
    shape_table_free(&t);

    t = parse_ok("k", "b anything goes here\na x\n", 1);
    cr_assert_eq(t.n, 2);
    cr_assert_null(t.dims);
    cr_assert_str_eq(t.keys[1], "a");
    shape_table_free(&t);

}

/* An empty shape file (issue 16) is an error of the reader, not only of the samplers. */
Test(shapes, empty_file_is_an_error_naming_it)
{
    parse_fails("", 0, "s.txt: no utterances (an empty shape file; rerun collect_stats, stage 3)");
    parse_fails("", 1, "s.txt: no utterances (an empty shape file; rerun collect_stats, stage 3)");
}

Test(shapes, errors_name_file_and_line)
{
    parse_fails("a 1,2\n\nb 3,4\n", 0, "s.txt:2: expected two columns '<uid> <d1>,<d2>,...' (got '')");
    parse_fails("a 1,2\nb\n", 0, "s.txt:2: expected two columns '<uid> <d1>,<d2>,...' (got 'b')");
    parse_fails("a\n", 1, "s.txt:1: expected two columns '<uid> <value>' (got 'a')");
    parse_fails("a 1,2\nb 3 4\n", 0,
                "s.txt:2: uid b: '3 4' is not a comma-separated list of non-negative integers "
                "(shape values look like 'T,80')");
    parse_fails("a 1,,2\n", 0,
                "s.txt:1: uid a: '1,,2' is not a comma-separated list of non-negative integers "
                "(shape values look like 'T,80')");
    parse_fails("a -1,2\n", 0,
                "s.txt:1: uid a: '-1,2' is not a comma-separated list of non-negative integers "
                "(shape values look like 'T,80')");
    parse_fails("a 99999999999999999999,2\n", 0,
                "s.txt:1: uid a: '99999999999999999999,2' is not a comma-separated list of non-negative "
                "integers (shape values look like 'T,80')");
    parse_fails("a 1\nb 2\nc 3\nb 4\na 5\n", 0, "s.txt:4: uid b is duplicated (first on line 2)");

    shape_table t;
    esp_err err;
    cr_assert_eq(shape_table_parse(&t, "s.txt", "a 1\nb 2\0\n", 9, 0, &err), -1);
    cr_assert_str_eq(err.msg, "s.txt:2: holds a NUL byte (a shape file is text)");
    cr_assert_eq(shape_table_read(&t, "/nonexistent/feats_shape", 0, &err), -1);
    cr_assert(strstr(err.msg, "/nonexistent/feats_shape"), "%s", err.msg);
}

Test(shapes, slice_follows_another_tables_keys)
{
    shape_table a = parse_ok("a", "x 1,2\ny 3,4\nz 5,6\n", 0);
    shape_table b = parse_ok("b", "z 50\nx 10\ny 30\n", 0);
    shape_table s;
    esp_err err;
    cr_assert_eq(shape_table_slice(&s, &b, &a, 1, 3, &err), 0, "%s", err.msg);
    cr_assert_eq(s.n, 2);
    cr_assert_str_eq(s.keys[0], "y");
    cr_assert_eq(shape_length(&s, 0), 30);
    cr_assert_str_eq(s.keys[1], "z");
    cr_assert_eq(shape_length(&s, 1), 50);
    cr_assert_eq(shape_table_find(&s, "z"), 1);
    shape_table_free(&s);
    shape_table c = parse_ok("c", "x 1\n", 0);
    cr_assert_eq(shape_table_slice(&s, &c, &a, 0, 2, &err), -1);
    cr_assert_str_eq(err.msg, "c: uid y (from a) is missing (shape files must list the same uids)");
    shape_table_free(&a);
    shape_table_free(&b);
    shape_table_free(&c);
}

/* ---- samplers on hand-computed cases ------------------------------------------------------- */

/* Lengths 10..90, dim 4; ascending order s1 s3 s6 s2 s4 s7 s5 (s2 and s4 tie: file order). */
static const char SMALL[] = "s1 10,4\ns2 50,4\ns3 20,4\ns4 50,4\ns5 90,4\ns6 30,4\ns7 70,4\n";

Test(sampler, numel_closes_when_bins_exceed)
{
    shape_table t = parse_ok("small", SMALL, 0);
    const shape_table *tp[] = {&t};
    /* bins = n * len * 4: 40, 160, 360, 800 > 600 -> close at 4; then 200, 560, 1080 -> close. */
    sampler_opts o = {.type = SAMPLER_NUMEL, .batch_bins = 600};
    expect_batches(&o, tp, 1, "s2 s6 s3 s1|s5 s7 s4");
    /* 800 is not > 800: the batch grows to 5 (1000); the tail (s7, s5) stays. */
    o.batch_bins = 800;
    expect_batches(&o, tp, 1, "s4 s2 s6 s3 s1|s5 s7");
    o.sort_in_batch_ascending = 1;
    o.sort_batch_descending = 1;
    expect_batches(&o, tp, 1, "s7 s5|s1 s3 s6 s2 s4");
    o = (sampler_opts){.type = SAMPLER_NUMEL, .batch_bins = 800, .drop_last = 1};
    expect_batches(&o, tp, 1, "s4 s2 s6 s3 s1");
    o.batch_bins = 1; /* every utterance exceeds on its own */
    o.drop_last = 0;
    expect_batches(&o, tp, 1, "s1|s3|s6|s2|s4|s7|s5");
    o.batch_bins = 1000000;
    expect_batches(&o, tp, 1, "s5 s7 s4 s2 s6 s3 s1");
    o.drop_last = 1; /* no batch closed: the tail is kept anyway */
    expect_batches(&o, tp, 1, "s5 s7 s4 s2 s6 s3 s1");
    shape_table_free(&t);
}

Test(sampler, numel_min_batch_size_spreads_the_tail)
{
    shape_table t = parse_ok("five", "a 10\nb 10\nc 10\nd 10\ne 10\n", 0);
    const shape_table *tp[] = {&t};
    /* 1-D shapes: dims product 1; bins 10, 20 > 15 -> [2, 2], tail [1] < 2 joins the last batch. */
    sampler_opts o = {.type = SAMPLER_NUMEL, .batch_bins = 15, .min_batch_size = 2};
    expect_batches(&o, tp, 1, "b a|e d c");
    /* bins 30 > 9 closes [3]; the tail [2] < 3 goes one by one into the last batch -> [5]. */
    o = (sampler_opts){.type = SAMPLER_NUMEL, .batch_bins = 9, .min_batch_size = 3};
    expect_batches(&o, tp, 1, "e d c b a");
    shape_table_free(&t);

    shape_table u = parse_ok("ten", "a 1\nb 1\nc 1\nd 1\ne 1\nf 1\ng 1\nh 1\ni 1\nj 1\n", 0);
    const shape_table *up[] = {&u};
    /* bins > 3 at n = 4 -> [4, 4] + tail [2] < 4: i=0 -> last batch, i=1 -> the one before. */
    o = (sampler_opts){.type = SAMPLER_NUMEL, .batch_bins = 3, .min_batch_size = 4};
    expect_batches(&o, up, 1, "e d c b a|j i h g f");
    shape_table_free(&u);
}

Test(sampler, numel_two_files_uses_the_newest_utterance)
{
    /* feats ascending a(10) b(20) c(30); text lengths 9, 1, 1 with dim 5. ESPnet2 multiplies by the
     * newest utterance's text length, not the batch maximum: after b, bins = 2*20*2 + 2*1*5 = 90. */
    shape_table f = parse_ok("feats", "c 30,2\na 10,2\nb 20,2\n", 0);
    shape_table x = parse_ok("text", "a 9,5\nb 1,5\nc 1,5\n", 0);
    const shape_table *tp[] = {&f, &x};
    sampler_opts o = {.type = SAMPLER_NUMEL, .batch_bins = 90};
    /* a: 20 + 45 = 65; b: 80 + 10 = 90 (not > 90); c: 180 + 15 > 90 -> one batch. */
    expect_batches(&o, tp, 2, "c b a");
    o.batch_bins = 89; /* b closes: 90 > 89 */
    expect_batches(&o, tp, 2, "b a|c");
    /* No padding: running sum of all dims' products: a 20+45, b 40+5 -> 110 > 100 */
    o = (sampler_opts){.type = SAMPLER_NUMEL, .batch_bins = 100, .no_padding = 1};
    expect_batches(&o, tp, 2, "b a|c");
    /* length: bins = n * (len_feats + len_text) of the newest: a 19, b 2*21 = 42 > 40 */
    o = (sampler_opts){.type = SAMPLER_LENGTH, .batch_bins = 40};
    expect_batches(&o, tp, 2, "b a|c");
    o.no_padding = 1; /* sum of lengths: a 19, b 40, c 71 > 40 */
    expect_batches(&o, tp, 2, "c b a");
    shape_table_free(&f);
    shape_table_free(&x);
}

Test(sampler, sorted_and_unsorted_split_evenly)
{
    shape_table t = parse_ok("small", SMALL, 0);
    const shape_table *tp[] = {&t};
    /* Descending: s5 s7 s2 s4 s6 s3 s1 (ties in file order); N = 7 // 3 = 2: [0:3], [3:7]; reversed. */
    sampler_opts o = {.type = SAMPLER_SORTED, .batch_size = 3};
    expect_batches(&o, tp, 1, "s4 s6 s3 s1|s5 s7 s2");
    o.drop_last = 1; /* keys[0:3], keys[3:6] */
    expect_batches(&o, tp, 1, "s4 s6 s3|s5 s7 s2");
    o = (sampler_opts){.type = SAMPLER_SORTED, .batch_size = 3, .sort_in_batch_ascending = 1};
    expect_batches(&o, tp, 1, "s1 s3 s6|s2 s4 s7 s5");
    o = (sampler_opts){.type = SAMPLER_UNSORTED, .batch_size = 3};
    expect_batches(&o, tp, 1, "s1 s2 s3|s4 s5 s6 s7");
    o.batch_size = 100; /* N = max(0, 1) */
    expect_batches(&o, tp, 1, "s1 s2 s3 s4 s5 s6 s7");
    o.drop_last = 1;
    expect_batches(&o, tp, 1, "s1 s2 s3 s4 s5 s6 s7");
    shape_table_free(&t);

    shape_table k = parse_ok("keys", "z whatever\ny 1 2 3\nx -\n", 1); /* unsorted: key-only file */
    const shape_table *kp[] = {&k};
    o = (sampler_opts){.type = SAMPLER_UNSORTED, .batch_size = 1};
    expect_batches(&o, kp, 1, "z|y|x");
    shape_table_free(&k);
}

Test(sampler, build_errors)
{
    shape_table a = parse_ok("a", "x 1,2\ny 3,2\n", 0);
    shape_table b = parse_ok("b", "x 1\nz 3\n", 0);
    shape_table c = parse_ok("c", "y 1\nx 2\nw 3\n", 0);
    shape_table d = parse_ok("d", "x 1,2\ny 3,3\n", 0);
    shape_table e; /* no rows: a file cannot be empty, an empty slice of one can */
    esp_err serr;
    cr_assert_eq(shape_table_slice(&e, &d, &d, 0, 0, &serr), 0, "%s", serr.msg);
    sampler_opts o = {.type = SAMPLER_NUMEL, .batch_bins = 10};
    const shape_table *ab[] = {&a, &b}, *ac[] = {&a, &c}, *dp[] = {&d}, *ep[] = {&e};
    expect_build_error(&o, ab, 2,
                       "b: uid y of a:2 is missing (keys are mismatched; every shape file must list the same "
                       "utterances)");
    expect_build_error(&o, ac, 2,
                       "c:3: uid w is missing from a (keys are mismatched; every shape file must list the same "
                       "utterances)");
    expect_build_error(&o, dp, 1,
                       "d:2: uid y has shape 3,3 but uid x has 1,2 (with padding the feature dimension must be "
                       "unified)");
    expect_build_error(&o, ep, 1, "d: 0 lines found (no utterances to batch)");
    o.no_padding = 1; /* no dim check without padding: 1*2 + 3*3 = 11 > 10 */
    expect_batches(&o, dp, 1, "y x");
    o.batch_bins = 1;
    expect_batches(&o, dp, 1, "x|y");
    o = (sampler_opts){.type = SAMPLER_LENGTH, .batch_bins = 10}; /* length ignores dims */
    expect_batches(&o, dp, 1, "y x");
    o = (sampler_opts){.type = SAMPLER_SORTED, .batch_size = 2};
    expect_build_error(&o, ep, 1, "d: 0 lines found (no utterances to batch)");
    o.type = SAMPLER_UNSORTED;
    expect_build_error(&o, ep, 1, "d: 0 lines found (no utterances to batch)");
    shape_table_free(&a);
    shape_table_free(&b);
    shape_table_free(&c);
    shape_table_free(&d);
    shape_table_free(&e);
}

Test(sampler, opts_from_cfg)
{
    char *files[] = {"f"};
    batches_cfg c = {.type = "length", .shape_files = files, .n_shape_files = 1, .batch_bins = 5};
    sampler_opts o;
    esp_err err;
    cr_assert_eq(sampler_opts_from_cfg(&o, &c, "dataloader.train.iter_factory.batches", &err), 0, "%s", err.msg);
    cr_assert_eq(o.type, SAMPLER_LENGTH);
    cr_assert_eq(o.batch_bins, 5);
    c.batch_bins = 0;
    cr_assert_eq(sampler_opts_from_cfg(&o, &c, "dataloader.train.iter_factory.batches", &err), -1);
    cr_assert_str_eq(err.msg, "dataloader.train.iter_factory.batches.batch_bins: must be > 0 for type length (got 0)");
    c.type = "sorted";
    c.batch_size = -2;
    cr_assert_eq(sampler_opts_from_cfg(&o, &c, "x", &err), -1);
    cr_assert_str_eq(err.msg, "x.batch_size: must be > 0 for type sorted (got -2)");
    c.type = "folded";
    cr_assert_eq(sampler_opts_from_cfg(&o, &c, "x", &err), -1);
    cr_assert_str_eq(err.msg, "x.type: not supported: folded (numel | length | sorted | unsorted)");
    c.type = "unsorted";
    c.n_shape_files = 0;
    cr_assert_eq(sampler_opts_from_cfg(&o, &c, "x", &err), -1);
    cr_assert_str_eq(err.msg, "x.shape_files: no shape file is given (list e.g. ${stats_dir}/train/feats_shape)");
}

/* ---- fixtures from the ESPnet2 port ------------------------------------------------------------ */

static char *fixture_dir(void)
{
    return path_join(test_root_dir(), "test/fixtures/sampler");
}

static char *slurp(const char *dir, const char *name)
{
    char *p = path_join(dir, name);
    char *s = test_slurp(p);
    free(p);
    return s;
}

/* The .batches file as "a b|c d". */
static char *expected_batches(const char *dir, const char *name)
{
    char *fn = xasprintf("%s.batches", name);
    char *s = slurp(dir, fn);
    free(fn);
    size_t n = strlen(s);
    while (n && s[n - 1] == '\n') s[--n] = '\0';
    for (char *p = s; *p; p++)
        if (*p == '\n') *p = '|';
    return s;
}

Test(sampler, matches_espnet2_fixtures)
{
    char *dir = fixture_dir();
    char *cases = slurp(dir, "cases.txt");
    int n_cases = 0;
    char *save = NULL;
    for (char *line = strtok_r(cases, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char name[64], type[16], sib[16], sb[16], files[256];
        long long bs, bins, minbs;
        int drop, pad;
        cr_assert_eq(sscanf(line, "%63s %15s %lld %lld %lld %15s %15s %d %d %255s", name, type, &bs, &bins, &minbs,
                            sib, sb, &drop, &pad, files),
                     10, "%s", line);
        char *shape_files[4];
        unsigned nf = 0;
        char *fsave = NULL;
        for (char *f = strtok_r(files, ",", &fsave); f && nf < 4; f = strtok_r(NULL, ",", &fsave))
            shape_files[nf++] = path_join(dir, f);
        batches_cfg cfg = {.type = type, .shape_files = shape_files, .n_shape_files = nf, .batch_size = bs,
                           .batch_bins = bins};
        /* sampler_build_files reads the files; the extra options go through sampler_build. */
        sampler_opts o;
        esp_err err;
        cr_assert_eq(sampler_opts_from_cfg(&o, &cfg, name, &err), 0, "%s", err.msg);
        o.min_batch_size = minbs;
        o.sort_in_batch_ascending = strcmp(sib, "ascending") == 0;
        o.sort_batch_descending = strcmp(sb, "descending") == 0;
        o.drop_last = drop;
        o.no_padding = !pad;
        shape_table t[4];
        const shape_table *tp[4];
        for (unsigned f = 0; f < nf; f++) {
            cr_assert_eq(shape_table_read(&t[f], shape_files[f], o.type == SAMPLER_UNSORTED, &err), 0, "%s",
                         err.msg);
            tp[f] = &t[f];
        }
        batch_list b;
        cr_assert_eq(sampler_build(&b, &o, tp, (int)nf, &err), 0, "%s: %s", name, err.msg);
        char *got = batches_text(&b, &t[0]), *want = expected_batches(dir, name);
        cr_expect_str_eq(got, want, "case %s", name);
        free(got);
        free(want);
        batch_list_free(&b);
        /* The config path (defaults only) agrees with the explicit one when no option is set. */
        if (minbs == 1 && !drop && pad && strcmp(sib, "descending") == 0 && strcmp(sb, "ascending") == 0) {
            shape_table keys;
            cr_assert_eq(sampler_build_files(&b, &keys, &cfg, name, &err), 0, "%s", err.msg);
            got = batches_text(&b, &keys);
            want = expected_batches(dir, name);
            cr_expect_str_eq(got, want, "case %s via sampler_build_files", name);
            free(got);
            free(want);
            batch_list_free(&b);
            shape_table_free(&keys);
        }
        for (unsigned f = 0; f < nf; f++) {
            shape_table_free(&t[f]);
            free(shape_files[f]);
        }
        n_cases++;
    }
    cr_assert_geq(n_cases, 20);
    free(cases);
    free(dir);
}

/* ---- epoch order ------------------------------------------------------------------------------ */

Test(sampler, epoch_order_is_numpys_shuffle)
{
    char *dir = fixture_dir();
    char *text = slurp(dir, "shuffle.txt");
    int lines = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *p = line, *end;
        size_t n = strtoull(p, &end, 10);
        int64_t seed = strtoll(end, &p, 10);
        size_t *order = xmalloc((n ? n : 1) * sizeof *order);
        esp_err err;
        /* numpy's seed is seed + epoch0 + 1; pass epoch0 = 0 and seed - 1. */
        cr_assert_eq(sampler_epoch_order(order, n, seed - 1, 0, &err), 0, "%s", err.msg);
        for (size_t i = 0; i < n; i++) {
            size_t want = strtoull(p, &end, 10);
            cr_assert_neq(p, end, "short line for n=%zu", n);
            p = end;
            cr_assert_eq(order[i], want, "n=%zu seed=%" PRId64 " slot %zu: %zu != %zu", n, seed, i, order[i], want);
        }
        free(order);
        lines++;
    }
    cr_assert_geq(lines, 8);
    free(text);
    free(dir);
}

Test(sampler, epoch_order_deterministic_and_differs_by_epoch)
{
    size_t a[50], b[50], c[50];
    esp_err err;
    cr_assert_eq(sampler_epoch_order(a, 50, 7, 3, &err), 0);
    cr_assert_eq(sampler_epoch_order(b, 50, 7, 3, &err), 0);
    cr_assert_eq(sampler_epoch_order(c, 50, 7, 4, &err), 0);
    cr_assert_eq(memcmp(a, b, sizeof a), 0);
    cr_assert_neq(memcmp(a, c, sizeof a), 0);
    /* seed + epoch is what counts (ESPnet2 seeds RandomState(epoch + seed)). */
    cr_assert_eq(sampler_epoch_order(c, 50, 8, 2, &err), 0);
    cr_assert_eq(memcmp(a, c, sizeof a), 0);
    int seen[50] = {0};
    for (int i = 0; i < 50; i++) seen[a[i]]++;
    for (int i = 0; i < 50; i++) cr_assert_eq(seen[i], 1);
    cr_assert_eq(sampler_epoch_order(a, 50, -2, 0, &err), -1);
    cr_assert_str_eq(err.msg,
                     "seed: -2 + epoch 1 is outside numpy's seed range (Seed must be between 0 and 2**32 - 1)");
    cr_assert_eq(sampler_epoch_order(a, 50, 4294967295LL, 0, &err), -1);
    cr_assert_eq(sampler_epoch_order(a, 0, 0, 0, &err), 0);
}

Test(sampler, epoch_plan_matches_espnet3)
{
    char *dir = fixture_dir();
    char *text = slurp(dir, "plans.txt");
    char *feats = path_join(dir, "feats.shape");
    char *files[] = {feats};
    batches_cfg cfg = {.type = "numel", .shape_files = files, .n_shape_files = 1, .batch_bins = 100000};
    batch_list b;
    shape_table keys;
    esp_err err;
    cr_assert_eq(sampler_build_files(&b, &keys, &cfg, "x", &err), 0, "%s", err.msg);
    int lines = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char name[64];
        int w, r, used;
        long long seed, e;
        cr_assert_eq(sscanf(line, "%63s %d %d %lld %lld%n", name, &w, &r, &seed, &e, &used), 5);
        size_t n;
        size_t *plan = sampler_epoch_plan(&n, &b, w, r, 1, seed, e, &err);
        cr_assert_not_null(plan, "%s", err.msg);
        char *p = line + used, *end;
        for (size_t k = 0; k < n; k++, p = end) {
            size_t want = strtoull(p, &end, 10);
            cr_assert_neq(p, end, "%s: plan longer than numpy's", line);
            cr_expect_eq(plan[k], want, "%s: slot %zu", line, k);
        }
        strtoull(p, &end, 10);
        cr_expect_eq(p, end, "%s: plan shorter than numpy's", line);
        free(plan);
        lines++;
    }
    cr_assert_geq(lines, 5);
    /* Without shuffle: the strided list as is. */
    size_t n, *plan = sampler_epoch_plan(&n, &b, 3, 1, 0, 0, 0, &err);
    cr_assert_eq(n, b.n / 3);
    for (size_t k = 0; k < n; k++) cr_assert_eq(plan[k], 1 + 3 * k);
    free(plan);
    batch_list_free(&b);
    shape_table_free(&keys);
    free(feats);
    free(text);
    free(dir);
}

/* ---- ranks and shards ----------------------------------------------------------------------------- */

Test(shard, batches_for_rank_strides_whole_batches)
{
    size_t out[16];
    /* 10 batches on 3 ranks: batch 9 is dropped, every rank gets 3. */
    cr_assert_eq(batches_for_rank(out, 10, 3, 0), 3);
    cr_assert(out[0] == 0 && out[1] == 3 && out[2] == 6);
    cr_assert_eq(batches_for_rank(out, 10, 3, 1), 3);
    cr_assert(out[0] == 1 && out[1] == 4 && out[2] == 7);
    cr_assert_eq(batches_for_rank(out, 10, 3, 2), 3);
    cr_assert(out[0] == 2 && out[1] == 5 && out[2] == 8);
    cr_assert_eq(batches_for_rank(out, 10, 1, 0), 10);
    cr_assert_eq(out[9], 9);
    cr_assert_eq(batches_for_rank(out, 2, 4, 3), 0); /* fewer batches than ranks: none anywhere */
    cr_assert_eq(batches_for_rank(out, 8, 4, 3), 2);
    cr_assert(out[0] == 3 && out[1] == 7);
}

Test(shard, rotation_table)
{
    /* shard_idx = (epoch * world_size + rank) % total_shards */
    static const struct {
        int64_t epoch;
        int w, r;
        int64_t total;
        size_t want;
    } rows[] = {
        {0, 1, 0, 1, 0},  {5, 1, 0, 1, 0},  {0, 1, 0, 3, 0},  {1, 1, 0, 3, 1},  {4, 1, 0, 3, 1},
        {0, 2, 0, 4, 0},  {0, 2, 1, 4, 1},  {1, 2, 0, 4, 2},  {1, 2, 1, 4, 3},  {2, 2, 0, 4, 0},
        {2, 2, 1, 4, 1},  {3, 2, 1, 4, 3},  {0, 2, 1, 2, 1},  {7, 2, 0, 2, 0},  {1, 3, 0, 6, 3},
        {1, 3, 2, 6, 5},  {2, 3, 1, 6, 1},  {3, 4, 3, 16, 15}, {4, 4, 0, 16, 0},
        /* (2**62 * 4 + 1) % 7 in Python: 3 (no overflow) */
        {INT64_C(4611686018427387904), 4, 1, 7, 3},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        cr_expect_eq(shard_index(rows[i].epoch, rows[i].w, rows[i].r, rows[i].total), rows[i].want,
                     "epoch %" PRId64 " W %d rank %d S %" PRId64, rows[i].epoch, rows[i].w, rows[i].r, rows[i].total);
    /* Over total/world epochs every rank sees every shard once. */
    for (int e = 0; e < 3; e++) { /* and no two ranks share a shard in an epoch */
        int seen[12] = {0};
        for (int r = 0; r < 4; r++) seen[shard_index(e, 4, r, 12)]++;
        for (int s = 0; s < 12; s++) cr_assert_leq(seen[s], 1);
    }
    for (int r = 0; r < 4; r++) {
        int seen[12] = {0}, owned = 0;
        for (int e = 0; e < 3; e++) seen[shard_index(e, 4, r, 12)]++;
        for (int s = 0; s < 12; s++) owned += seen[s] == 1;
        cr_assert_eq(owned, 3);
    }
}

Test(shard, validate_uses_espnet3_texts)
{
    const char *w = "dataloader.train";
    esp_err err;
    loader_split_cfg c = {0};
    cr_assert_eq(shard_validate(&c, w, 4, &err), 0); /* unset: no sharding */
    c.dist_world_size = 3;                             /* ignored without total_shards, as ESPnet3 */
    cr_assert_eq(shard_validate(&c, w, 4, &err), 0);
    c = (loader_split_cfg){.total_shards = 8, .dist_world_size = 4};
    cr_assert_eq(shard_validate(&c, w, 4, &err), 1);
    c = (loader_split_cfg){.total_shards = 1, .dist_world_size = 1};
    cr_assert_eq(shard_validate(&c, w, 1, &err), 1);

    c = (loader_split_cfg){.total_shards = 8};
    cr_assert_eq(shard_validate(&c, w, 4, &err), -1);
    cr_assert_str_eq(err.msg, "dataloader.train: ShardedDataset requires dist_world_size to be set when used with "
                              "DataLoaderBuilder.");
    c.dist_world_size = -1;
    cr_assert_eq(shard_validate(&c, w, 4, &err), -1);
    cr_assert_str_eq(err.msg, "dataloader.train: dist_world_size must be an integer >= 1.");
    c.dist_world_size = 2;
    cr_assert_eq(shard_validate(&c, w, 4, &err), -1);
    cr_assert_str_eq(err.msg,
                     "dataloader.train: dist_world_size must match the distributed world_size (configured 2, got 4).");
    c = (loader_split_cfg){.total_shards = -3, .dist_world_size = 4};
    cr_assert_eq(shard_validate(&c, w, 4, &err), -1);
    cr_assert_str_eq(err.msg, "dataloader.train: total_shards must be an integer >= 1.");
    c.total_shards = 10;
    cr_assert_eq(shard_validate(&c, w, 4, &err), -1);
    cr_assert_str_eq(err.msg, "dataloader.train: total_shards must be divisible by world_size for sharded training.");
}

Test(shard, rows_split_evenly)
{
    size_t b, e, covered = 0;
    for (size_t s = 0; s < 4; s++) {
        shard_rows(10, 4, s, &b, &e);
        cr_assert_eq(b, covered);
        cr_assert(e - b == 2 || e - b == 3);
        covered = e;
    }
    cr_assert_eq(covered, 10);
    shard_rows(3, 5, 0, &b, &e);
    cr_assert_eq(e - b, 0);
    shard_rows(3, 5, 4, &b, &e);
    cr_assert(b == 2 && e == 3);
}
