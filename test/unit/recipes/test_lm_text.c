/* Stage 1's LM text of the espeak_fortunes recipe (recipes/espeak_fortunes/lm_text.h): lm/train.txt
 * holds every sentence of the fortunes except those of fortunes that hold a valid, test or
 * test_engine transcript; lm/valid.txt the valid transcripts; both in ESPnet3's "<id> <text>"
 * lines, written also for a dataset built before them, without new audio. */
#include <criterion/criterion.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "recipes/registry.h"
#include "test/unit/recipes/espeak_args.h"
#include "core/base/fsio.h"
#include "core/formats/manifest.h"
#include "recipes/espeak_fortunes/text_norm.h"
#include "test/unit/test_util.h"

static char tmpdir[64];

static void setup(void)
{
    test_tmpdir_make(tmpdir, sizeof tmpdir, "lmtext");
    log_set_quiet(1);
    cr_assert_eq(chdir(tmpdir), 0);
}

static void teardown(void) { test_tmpdir_remove(tmpdir); }

/* The fortunes: exactly 10 sentences the dataset can use (plain prose, 3..8 words), so every one
 * is an utterance (4 train, 2 valid, 2 test, 2 test_engine), each with the sentences the LM text
 * gets from its fortune. */
typedef struct fortune {
    const char *text;
    const char *sentences[4];
} fortune;

static const fortune base[] = {
    {"The cat sat on the mat.  A dog ran far away!\nWhy is the sky so blue?\n",
     {"THE CAT SAT ON THE MAT", "A DOG RAN FAR AWAY", "WHY IS THE SKY SO BLUE"}},
    {"Birds sing in the early morning.\n\t\t-- Some Author\n", {"BIRDS SING IN THE EARLY MORNING"}},
    /* no utterance (a digit, a symbol, an abbreviation), all LM text */
    {"I have 3 apples here.  Salt & pepper on top.  Ask Mr. Smith about it.\n",
     {"I HAVE APPLES HERE", "SALT PEPPER ON TOP", "ASK MR SMITH ABOUT IT"}},
    {"Rain falls on the green hills. Snow covers the tall mountains.\n",
     {"RAIN FALLS ON THE GREEN HILLS", "SNOW COVERS THE TALL MOUNTAINS"}},
    {"Books are full of old stories.\nMusic fills the quiet room. Yes.\n",
     {"BOOKS ARE FULL OF OLD STORIES", "MUSIC FILLS THE QUIET ROOM", "YES"}},
    {"Children play in the park. The old man walks slowly home.\n",
     {"CHILDREN PLAY IN THE PARK", "THE OLD MAN WALKS SLOWLY HOME"}},
    /* too long for an utterance; the second sentence repeats the first fortune's */
    {"Bread smells good in the kitchen on every single day of the long week. The cat sat on the mat.\n",
     {"BREAD SMELLS GOOD IN THE KITCHEN ON EVERY SINGLE DAY OF THE LONG WEEK", "THE CAT SAT ON THE MAT"}},
};

/* The 10 usable sentences without their final mark: each also appears inside a long sentence of
 * its own fortune (which must go when it is held out), and with an "s" glued to its last word
 * (not the same words: that fortune stays). */
static const char *const usable[] = {"The cat sat on the mat",        "A dog ran far away",
                                     "Why is the sky so blue",        "Birds sing in the early morning",
                                     "Rain falls on the green hills", "Snow covers the tall mountains",
                                     "Books are full of old stories", "Music fills the quiet room",
                                     "Children play in the park",     "The old man walks slowly home"};
#define N_USABLE (sizeof usable / sizeof usable[0])
#define N_BASE (sizeof base / sizeof base[0])
#define N_FORTUNES (N_BASE + 2 * N_USABLE)

typedef struct text_set {
    char *v[64];
    size_t n;
} text_set;

static void set_add(text_set *s, const char *t)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i], t) == 0) return;
    cr_assert_lt(s->n, sizeof s->v / sizeof s->v[0]);
    s->v[s->n++] = xstrdup(t);
}

static void set_free(text_set *s)
{
    for (size_t i = 0; i < s->n; i++) free(s->v[i]);
    s->n = 0;
}

static int cmp_text(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Writes the fortune file; sentences[f] gets fortune f's LM sentences (caller frees with set_free). */
static char *write_fortunes(text_set sentences[N_FORTUNES])
{
    char *text = xstrdup("");
    for (size_t f = 0; f < N_FORTUNES; f++) {
        sentences[f].n = 0;
        char *one;
        if (f < N_BASE) {
            one = xstrdup(base[f].text);
            for (size_t k = 0; k < 4 && base[f].sentences[k]; k++) set_add(&sentences[f], base[f].sentences[k]);
        } else {
            size_t u = (f - N_BASE) / 2;
            int glued = (f - N_BASE) % 2;
            one = xasprintf("Long ago %s%s were never seen by anyone here.\n", usable[u], glued ? "s" : "");
            char *norm = text_normalize(one);
            set_add(&sentences[f], norm);
            free(norm);
        }
        char *next = xasprintf("%s%s%s", text, f ? "%\n" : "", one);
        free(text), free(one);
        text = next;
    }
    char *path = path_join(tmpdir, "fortunes");
    test_write_text(path, text);
    free(text);
    return path;
}

static char *train_voices[] = {"en-us", "en-gb"}, *test_voices[] = {"en-gb-scotland"};
static char *flite_voices[] = {"rms", "awb"};
static int64_t speed[] = {170, 190}, pitch[] = {40, 60};
static synth_engine_cfg flite = {.name = "flite", .voices = flite_voices, .n_voices = 2};

static tiny_args lm_cfg(const char *text_source)
{
    tiny_args c = {0};
    c.cd.func = "espeak_fortunes";
    c.k.text_source = (char *)text_source;
    c.cd.dataset_dir = "ds";
    c.k.synthesizer = "espeak-ng";
    c.k.seed = 11;
    c.k.num_train = 4, c.k.num_valid = 2, c.k.num_test = 2, c.k.num_test_engine = 2;
    c.k.test_engine = &flite;
    c.k.train_voices = train_voices, c.k.n_train_voices = 2;
    c.k.test_voices = test_voices, c.k.n_test_voices = 1;
    c.k.speed_range = speed, c.k.n_speed_range = 2;
    c.k.pitch_range = pitch, c.k.n_pitch_range = 2;
    c.k.min_words = 3, c.k.max_words = 8;
    c.k.fs = 16000;
    c.k.nj = 2;
    return c;
}

static void build(const char *fortunes)
{
    tiny_args c = lm_cfg(fortunes);
    esp_err err;
    cr_assert_eq(build_tiny(&c, "data", &err), 0, "%s", err.msg);
}

static manifest read_split(const char *split)
{
    char *path = xasprintf("data/manifest/%s.tsv", split);
    manifest m;
    esp_err err;
    cr_assert_eq(manifest_read_tsv(path, &m, &err), 0, "%s", err.msg);
    free(path);
    return m;
}

/* 1 when needle occurs in hay as whole words (both normalized). */
static int has_words(const char *hay, const char *needle)
{
    char *h = xasprintf(" %s ", hay), *n = xasprintf(" %s ", needle);
    int found = strstr(h, n) != NULL;
    free(h), free(n);
    return found;
}

Test(espeak_fortunes_lm, train_txt_leaves_out_held_out_fortunes, .init = setup, .fini = teardown)
{
    text_set sentences[N_FORTUNES];
    char *fortunes = write_fortunes(sentences);
    build(fortunes);

    /* Every usable sentence became an utterance; 6 of them are held out. */
    static const char *const held_splits[] = {"valid", "test", "test_engine"};
    text_set held = {0}, train = {0};
    for (int k = 0; k < 3; k++) {
        manifest m = read_split(held_splits[k]);
        cr_assert_eq(m.n, 2u, "%s", held_splits[k]);
        for (size_t i = 0; i < m.n; i++) set_add(&held, m.items[i].text);
        manifest_free(&m);
    }
    manifest m = read_split("train");
    for (size_t i = 0; i < m.n; i++) set_add(&train, m.items[i].text);
    manifest_free(&m);
    cr_assert_eq(held.n, 6u);
    cr_assert_eq(train.n, 4u);

    /* What train.txt must hold: the sentences of every fortune without a held-out transcript. */
    text_set want = {0};
    size_t dropped = 0, dropped_contexts = 0, kept_glued = 0;
    for (size_t f = 0; f < N_FORTUNES; f++) {
        char *whole = xstrdup("");
        for (size_t k = 0; k < sentences[f].n; k++) {
            char *next = xasprintf("%s%s%s", whole, k ? " " : "", sentences[f].v[k]);
            free(whole);
            whole = next;
        }
        int drop = 0;
        for (size_t h = 0; h < held.n; h++) drop |= has_words(whole, held.v[h]);
        dropped += drop;
        if (f >= N_BASE && (f - N_BASE) % 2 == 0) dropped_contexts += drop;
        if (f >= N_BASE && (f - N_BASE) % 2 == 1) kept_glued += !drop;
        if (!drop)
            for (size_t k = 0; k < sentences[f].n; k++) set_add(&want, sentences[f].v[k]);
        free(whole);
    }
    cr_expect_eq(dropped_contexts, 6u, "each held-out sentence's long context goes");
    cr_expect_eq(kept_glued, N_USABLE, "a held-out sentence with a letter glued on is other words");
    cr_expect_geq(dropped, 6u + 2u);
    qsort(want.v, want.n, sizeof *want.v, cmp_text);

    char *got = test_slurp("data/lm/train.txt");
    char *expected = xstrdup("");
    for (size_t i = 0; i < want.n; i++) {
        char *next = xasprintf("%slm_%06zu %s\n", expected, i + 1, want.v[i]);
        free(expected);
        expected = next;
    }
    cr_expect_str_eq(got, expected);

    /* The format, and what the rules say, checked on the file itself. */
    regex_t line_re;
    cr_assert_eq(regcomp(&line_re, "^lm_[0-9]{6} [A-Z']+( [A-Z']+)*$", REG_EXTENDED | REG_NOSUB), 0);
    size_t lines = 0;
    char *prev = NULL;
    for (char *save, *line = strtok_r(got, "\n", &save); line; line = strtok_r(NULL, "\n", &save), lines++) {
        cr_expect_eq(regexec(&line_re, line, 0, NULL, 0), 0, "bad line: %s", line);
        char *id = xasprintf("lm_%06zu ", lines + 1);
        cr_expect_eq(strncmp(line, id, strlen(id)), 0, "line %zu: %s", lines + 1, line);
        free(id);
        const char *text = strchr(line, ' ') + 1;
        if (prev) cr_expect_lt(strcmp(prev, text), 0, "not sorted and distinct: %s, %s", prev, text);
        prev = (char *)text;
        for (size_t h = 0; h < held.n; h++)
            cr_expect_not(has_words(text, held.v[h]), "held-out \"%s\" in \"%s\"", held.v[h], text);
        cr_expect_str_neq(text, "SOME AUTHOR");
    }
    regfree(&line_re);
    cr_expect_eq(lines, want.n);
    cr_expect_gt(want.n, 0u);
    /* What the dataset cannot use is still LM text. */
    for (size_t k = 0; k < 3; k++) {
        int found = 0;
        for (size_t i = 0; i < want.n; i++) found |= strcmp(want.v[i], base[2].sentences[k]) == 0;
        cr_expect(found, "%s missing", base[2].sentences[k]);
    }

    /* valid.txt: the valid manifest's transcripts, one line per utterance. */
    m = read_split("valid");
    char *valid_want = xstrdup("");
    for (size_t i = 0; i < m.n; i++) {
        char *next = xasprintf("%s%s %s\n", valid_want, m.items[i].utt, m.items[i].text);
        free(valid_want);
        valid_want = next;
    }
    manifest_free(&m);
    char *valid_got = test_slurp("data/lm/valid.txt");
    cr_expect_str_eq(valid_got, valid_want);

    free(valid_got), free(valid_want), free(got), free(expected);
    set_free(&want), set_free(&held), set_free(&train);
    for (size_t f = 0; f < N_FORTUNES; f++) set_free(&sentences[f]);
    free(fortunes);
}

Test(espeak_fortunes_lm, written_for_a_dataset_built_without_it, .init = setup, .fini = teardown)
{
    text_set sentences[N_FORTUNES];
    char *fortunes = write_fortunes(sentences);
    build(fortunes);
    char *train_txt = test_slurp("data/lm/train.txt"), *valid_txt = test_slurp("data/lm/valid.txt");
    char *stamp = test_slurp("data/manifest/.built"), *manifest_tsv = test_slurp("data/manifest/train.tsv");
    char *lm_stamp = test_slurp("data/lm/.built");
    cr_expect(strstr(lm_stamp, stamp), "lm/.built holds the dataset's stamp: %s", lm_stamp);

    /* A dataset from before the LM text: no lm/. Stage 1 adds it and synthesizes nothing (the
     * removed wav stays away). */
    remove_tree("data/lm");
    manifest m = read_split("train");
    char *wav = xstrdup(m.items[0].wav);
    manifest_free(&m);
    cr_assert_eq(unlink(wav), 0);
    build(fortunes);
    cr_expect_not(path_exists(wav), "audio was synthesized again");
    char *again = test_slurp("data/lm/train.txt"), *valid_again = test_slurp("data/lm/valid.txt");
    cr_expect_str_eq(again, train_txt, "same bytes every run");
    cr_expect_str_eq(valid_again, valid_txt);
    char *stamp_again = test_slurp("data/manifest/.built"), *manifest_again = test_slurp("data/manifest/train.tsv");
    cr_expect_str_eq(stamp_again, stamp);
    cr_expect_str_eq(manifest_again, manifest_tsv);
    free(again), free(valid_again), free(stamp_again), free(manifest_again);

    /* While lm/.built matches, the files are left alone; a stale stamp has them rewritten. */
    test_write_text("data/lm/train.txt", "stale\n");
    build(fortunes);
    again = test_slurp("data/lm/train.txt");
    cr_expect_str_eq(again, "stale\n");
    free(again);
    test_write_text("data/lm/.built", "lm_format: 0\n");
    build(fortunes);
    again = test_slurp("data/lm/train.txt");
    cr_expect_str_eq(again, train_txt);
    free(again);
    /* and one of the files missing is the same */
    cr_assert_eq(unlink("data/lm/valid.txt"), 0);
    build(fortunes);
    again = test_slurp("data/lm/valid.txt");
    cr_expect_str_eq(again, valid_txt);
    free(again);
    cr_expect_not(path_exists(wav));

    free(wav), free(train_txt), free(valid_txt), free(stamp), free(manifest_tsv), free(lm_stamp);
    for (size_t f = 0; f < N_FORTUNES; f++) set_free(&sentences[f]);
    free(fortunes);
}
