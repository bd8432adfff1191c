/* Stage 1 pieces: the RNG, manifests, the builder registry and the espeak_fortunes builder
 * (determinism across nj, output format, split disjointness, the built stamp, errors). */
#include <criterion/criterion.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "recipes/registry.h"
#include "test/unit/recipes/espeak_args.h"
#include "core/base/fsio.h"
#include "core/formats/manifest.h"
#include "core/base/rng.h"
#include "stages/stages.h"
#include "test/unit/test_util.h"

static char tmpdir[64];

static void setup(void)
{
    test_tmpdir_make(tmpdir, sizeof tmpdir, "ds");
    log_set_quiet(1);
}

static void teardown(void) { test_tmpdir_remove(tmpdir); }

static char *tmp_path(const char *name)
{
    return path_join(tmpdir, name);
}

/* A small fortune file: 14 usable short sentences plus lines each filter must drop. */
static const char fortune_text[] =
    "The cat sat on the mat.  A dog ran far away!\n"
    "Why is the sky so blue?\n"
    "%\n"
    "Birds sing in the early morning.\n"
    "\t\t-- Some Author\n"
    "%\n"
    "I have 3 apples here.  Salt & pepper on top.  Ask Mr. Smith about it.\n"
    "%\n"
    "Rain falls on the green hills. Snow covers the tall mountains.\n"
    "The river runs to the sea. Stars shine bright at night.\n"
    "%\n"
    "Books are full of old stories. Music fills the quiet room.\n"
    "Children play in the park. The old man walks slowly home.\n"
    "%\n"
    "Bread smells good in the kitchen. Fish swim in the deep lake.\n"
    "The cat sat on the mat.\n"
    "Yes.\n";

/* Builder arguments for a tiny dataset from fortune_text. */
static char *train_voices[] = {"en-us", "en-gb"};
static char *test_voices[] = {"en-gb-scotland"};
static char *train_variants[] = {"m3", "f2"};
static int64_t speed[] = {170, 190};
static int64_t pitch[] = {40, 60};

static tiny_args tiny_cfg(const char *text_source, const char *dataset_dir, int nj)
{
    tiny_args c = {0};
    c.cd.func = "espeak_fortunes";
    c.k.text_source = (char *)text_source;
    c.cd.dataset_dir = (char *)dataset_dir;
    c.k.synthesizer = "espeak-ng";
    c.k.seed = 7;
    c.k.num_train = 6, c.k.num_valid = 2, c.k.num_test = 2;
    c.k.train_voices = train_voices, c.k.n_train_voices = 2;
    c.k.test_voices = test_voices, c.k.n_test_voices = 1;
    c.k.train_variants = train_variants, c.k.n_train_variants = 2;
    c.k.speed_range = speed, c.k.n_speed_range = 2;
    c.k.pitch_range = pitch, c.k.n_pitch_range = 2;
    c.k.min_words = 3, c.k.max_words = 8;
    c.k.fs = 16000;
    c.k.nj = nj;
    return c;
}

static char *fortune_file(void)
{
    char *p = tmp_path("fortunes");
    test_write_text(p, fortune_text);
    return p;
}

static const char *const splits[] = {"train", "valid", "test"};

static manifest read_split(const char *data_dir, const char *split)
{
    char *name = xasprintf("manifest/%s.tsv", split);
    char *path = path_join(data_dir, name);
    manifest m;
    esp_err err;
    cr_assert_eq(manifest_read_tsv(path, &m, &err), 0, "%s", err.msg);
    free(name);
    free(path);
    return m;
}

static void expect_same_file(const char *a, const char *b)
{
    cr_expect(test_same_file(a, b), "%s and %s differ (or cannot be read)", a, b);
}

/* ---- rng ---------------------------------------------------------------------------------- */

Test(rng, counter_based_values_are_stable_and_distinct)
{
    cr_expect_eq(rng_derive(1, 2, 3), rng_derive(1, 2, 3));
    cr_expect_neq(rng_derive(1, 2, 3), rng_derive(1, 2, 4));
    cr_expect_neq(rng_derive(1, 2, 3), rng_derive(1, 3, 3));
    cr_expect_neq(rng_derive(1, 2, 3), rng_derive(2, 2, 3));
    uint64_t s = 0;
    cr_expect_eq(splitmix64_next(&s), 0xe220a8397b1dcdafULL); /* reference splitmix64 from seed 0 */
}

Test(rng, uniform_int_covers_inclusive_range)
{
    rng r;
    rng_init(&r, 42);
    int seen[5] = {0};
    for (int i = 0; i < 1000; i++) {
        int64_t v = rng_uniform_int(&r, -2, 2);
        cr_assert(v >= -2 && v <= 2);
        seen[v + 2] = 1;
    }
    for (int i = 0; i < 5; i++) cr_expect(seen[i], "value %d never drawn", i - 2);
    cr_expect_eq(rng_uniform_int(&r, 9, 9), 9);
}

Test(rng, shuffle_is_a_permutation)
{
    int v[50];
    for (int i = 0; i < 50; i++) v[i] = i;
    rng r;
    rng_init(&r, 3);
    rng_shuffle(&r, v, 50, sizeof v[0]);
    int seen[50] = {0}, moved = 0;
    for (int i = 0; i < 50; i++) {
        seen[v[i]]++;
        moved += v[i] != i;
    }
    for (int i = 0; i < 50; i++) cr_expect_eq(seen[i], 1);
    cr_expect_gt(moved, 0);
}

/* ---- manifests ---------------------------------------------------------------------------- */

Test(manifest, tsv_and_kaldi_round_trip, .init = setup, .fini = teardown)
{
    manifest m = {0};
    manifest_add(&m, "spk_b-x-000001", "/w/b1.wav", "HELLO THERE", "spk_b");
    manifest_add(&m, "spk_a-x-000000", "/w/a0.wav", "", "spk_a");
    esp_err err;
    char *tsv = tmp_path("m.tsv"), *dir = tmp_path("kaldi");
    cr_assert_eq(manifest_write_tsv(tsv, &m, &err), 0, "%s", err.msg);
    cr_assert_eq(manifest_write_kaldi_dir(dir, &m, &err), 0, "%s", err.msg);

    manifest back;
    cr_assert_eq(manifest_read_tsv(tsv, &back, &err), 0, "%s", err.msg);
    cr_assert_eq(back.n, 2);
    cr_expect_str_eq(back.items[0].utt, "spk_b-x-000001"); /* order as written */
    cr_expect_str_eq(back.items[1].text, "");
    cr_expect_null(back.items[0].spk);
    manifest_free(&back);

    cr_assert_eq(manifest_read_kaldi_dir(dir, &back, &err), 0, "%s", err.msg);
    cr_assert_eq(back.n, 2);
    cr_expect_str_eq(back.items[0].utt, "spk_a-x-000000"); /* Kaldi files are sorted */
    cr_expect_str_eq(back.items[0].spk, "spk_a");
    cr_expect_str_eq(back.items[1].wav, "/w/b1.wav");
    cr_expect_str_eq(back.items[1].text, "HELLO THERE");
    manifest_free(&back);
    manifest_free(&m);
    free(tsv);
    free(dir);
}

Test(manifest, read_errors_name_file_and_line, .init = setup, .fini = teardown)
{
    char *tsv = tmp_path("bad.tsv");
    manifest m;
    esp_err err;
    test_write_text(tsv, "u1\t/a.wav\tA\nu2\t/b.wav\n");
    cr_assert_neq(manifest_read_tsv(tsv, &m, &err), 0);
    cr_expect(strstr(err.msg, "bad.tsv:2: expected 3 tab-separated fields"), "%s", err.msg);
    test_write_text(tsv, "u1\t/a.wav\tA\nu1\t/b.wav\tB\n");
    cr_assert_neq(manifest_read_tsv(tsv, &m, &err), 0);
    cr_expect(strstr(err.msg, "bad.tsv:2: utterance id u1 appears again (first on line 1)"), "%s", err.msg);
    free(tsv);
}

/* ---- registry and stage ------------------------------------------------------------------- */

Test(dataset_builders, finds_full_and_short_names)
{
    const dataset_builder *full = dataset_builder_find("espnet3.recipes.espeak_fortunes.create_dataset");
    cr_assert_not_null(full);
    cr_expect_eq(dataset_builder_find("espeak_fortunes"), full);
    cr_expect_null(dataset_builder_find("librispeech"));
    char *names = dataset_builder_names();
    cr_expect(strstr(names, "espnet3.recipes.espeak_fortunes.create_dataset"), "%s", names);
    free(names);
}

Test(create_dataset_stage, names_missing_keys_and_unknown_func)
{
    training_cfg t = {0};
    create_dataset_cfg cd = {0};
    esp_config cfg = {.kind = CONFIG_TRAINING, .path = "train.yaml", .typed = &t};
    esp_configs configs = {.training = &cfg};
    stage_ctx ctx = {.configs = &configs};
    esp_err err;
    cr_assert_neq(stage_create_dataset(&ctx, &err), 0);
    cr_expect(strstr(err.msg, "train.yaml: create_dataset: missing"), "%s", err.msg);
    t.create_dataset = &cd;
    cr_assert_neq(stage_create_dataset(&ctx, &err), 0);
    cr_expect(strstr(err.msg, "train.yaml: data_dir: missing"), "%s", err.msg);
    t.data_dir = "data";
    cd.func = "librispeech";
    cr_assert_neq(stage_create_dataset(&ctx, &err), 0);
    cr_expect(strstr(err.msg, "create_dataset.func: unknown builder librispeech (supported: "
                              "espnet3.recipes.espeak_fortunes.create_dataset"),
              "%s", err.msg);
}

/* ---- the espeak_fortunes builder ---------------------------------------------------------- */

/* Builds in <tmp>/<sub> with relative paths, so two builds can be compared byte for byte. */
static void build_in(const char *sub, const char *fortunes, int nj)
{
    char *dir = tmp_path(sub);
    esp_err err;
    cr_assert_eq(mkdir_p(dir, &err), 0, "%s", err.msg);
    cr_assert_eq(chdir(dir), 0);
    tiny_args c = tiny_cfg(fortunes, "ds", nj);
    cr_assert_eq(build_tiny(&c, "data", &err), 0, "%s", err.msg);
    free(dir);
}

Test(espeak_fortunes, identical_output_for_any_nj, .init = setup, .fini = teardown)
{
    char *fortunes = fortune_file();
    /* Manifests hold absolute paths, so both builds use the same folder: nj=1 first, kept aside. */
    build_in("one", fortunes, 1);
    char *one_dir = tmp_path("one"), *saved_dir = tmp_path("saved");
    cr_assert_eq(rename(one_dir, saved_dir), 0);
    build_in("one", fortunes, 2);
    const char *files[] = {"data/manifest/train.tsv", "data/manifest/valid.tsv", "data/manifest/test.tsv",
                           "data/manifest/.built",    "data/train/wav.scp",      "data/train/text",
                           "data/train/utt2spk",      "data/test/utt2spk",       "data/valid/text"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char *a = xasprintf("%s/saved/%s", tmpdir, files[i]), *b = xasprintf("%s/one/%s", tmpdir, files[i]);
        expect_same_file(a, b);
        free(a);
        free(b);
    }
    char *one = tmp_path("one/data");
    for (int s = 0; s < 3; s++) {
        manifest m = read_split(one, splits[s]);
        cr_expect_eq(m.n, s == 0 ? 6u : 2u);
        for (size_t i = 0; i < m.n; i++) {
            const char *wav = m.items[i].wav;
            cr_assert_eq(strncmp(wav, one_dir, strlen(one_dir)), 0, "%s is not under %s", wav, one_dir);
            char *a = xasprintf("%s%s", saved_dir, wav + strlen(one_dir));
            expect_same_file(a, wav);
            free(a);
        }
        manifest_free(&m);
    }
    free(one);
    free(one_dir);
    free(saved_dir);
    free(fortunes);
}

Test(espeak_fortunes, writes_16k_mono_pcm16_and_kaldi_dirs, .init = setup, .fini = teardown)
{
    char *fortunes = fortune_file();
    build_in("b", fortunes, 2);
    char *data = tmp_path("b/data");
    for (int s = 0; s < 3; s++) {
        manifest m = read_split(data, splits[s]);
        for (size_t i = 0; i < m.n; i++) {
            SF_INFO info = {0};
            SNDFILE *sf = sf_open(m.items[i].wav, SFM_READ, &info);
            cr_assert_not_null(sf, "%s: %s", m.items[i].wav, sf_strerror(NULL));
            cr_expect_eq(info.samplerate, 16000);
            cr_expect_eq(info.channels, 1);
            cr_expect_eq(info.format, SF_FORMAT_WAV | SF_FORMAT_PCM_16);
            cr_expect_gt(info.frames, 8000, "%s is too short", m.items[i].wav);
            sf_close(sf);
            char *want_prefix = xasprintf("%s/b/ds/wav/%s/", tmpdir, splits[s]);
            cr_expect_eq(strncmp(m.items[i].wav, want_prefix, strlen(want_prefix)), 0, "%s", m.items[i].wav);
            free(want_prefix);
            cr_expect_null(strpbrk(m.items[i].text, ".,!?abcdefghijklmnopqrstuvwxyz0123456789"), "%s",
                           m.items[i].text);
        }
        for (size_t i = 1; i < m.n; i++) cr_expect_lt(strcmp(m.items[i - 1].utt, m.items[i].utt), 0);
        /* The Kaldi dir says the same, with speakers as utterance-id prefixes. */
        char *dir = path_join(data, splits[s]);
        manifest k;
        esp_err err;
        cr_assert_eq(manifest_read_kaldi_dir(dir, &k, &err), 0, "%s", err.msg);
        cr_assert_eq(k.n, m.n);
        for (size_t i = 0; i < k.n; i++) {
            cr_expect_str_eq(k.items[i].utt, m.items[i].utt);
            cr_expect_str_eq(k.items[i].text, m.items[i].text);
            cr_expect_eq(strncmp(k.items[i].utt, k.items[i].spk, strlen(k.items[i].spk)), 0);
            cr_expect_eq(k.items[i].utt[strlen(k.items[i].spk)], '-');
        }
        manifest_free(&k);
        free(dir);
        manifest_free(&m);
    }
    free(data);
    free(fortunes);
}

Test(espeak_fortunes, test_split_has_unseen_voices_and_sentences, .init = setup, .fini = teardown)
{
    /* The real fortunes package, as the recipe uses it. */
    char *data = tmp_path("data"), *ds = tmp_path("ds");
    tiny_args c = tiny_cfg(NULL, ds, 2);
    static char *test_variants[] = {"f4"};
    c.k.test_variants = test_variants, c.k.n_test_variants = 1;
    c.k.num_train = 5, c.k.num_valid = 3, c.k.num_test = 3;
    esp_err err;
    cr_assert_eq(build_tiny(&c, data, &err), 0, "%s", err.msg);
    char *texts[11];
    size_t n_texts = 0;
    for (int s = 0; s < 3; s++) {
        char *dir = path_join(data, splits[s]);
        manifest k;
        cr_assert_eq(manifest_read_kaldi_dir(dir, &k, &err), 0, "%s", err.msg);
        for (size_t i = 0; i < k.n; i++) {
            const char *spk = k.items[i].spk;
            if (s == 2) cr_expect_str_eq(spk, "en_gb_scotland_f4");
            else cr_expect(strcmp(spk, "en_us_m3") == 0 || strcmp(spk, "en_us_f2") == 0 ||
                               strcmp(spk, "en_gb_m3") == 0 || strcmp(spk, "en_gb_f2") == 0,
                           "%s speaks in %s", spk, splits[s]);
            texts[n_texts++] = xstrdup(k.items[i].text);
        }
        manifest_free(&k);
        free(dir);
    }
    cr_assert_eq(n_texts, 11);
    for (size_t i = 0; i < n_texts; i++)
        for (size_t j = i + 1; j < n_texts; j++) cr_expect_neq(strcmp(texts[i], texts[j]), 0, "%s repeats", texts[i]);
    for (size_t i = 0; i < n_texts; i++) free(texts[i]);
    free(data);
    free(ds);
}

Test(espeak_fortunes, skips_when_built_and_rebuilds_on_new_arguments, .init = setup, .fini = teardown)
{
    char *fortunes = fortune_file();
    build_in("b", fortunes, 2);
    manifest m = read_split("data", "train");
    char *first_wav = xstrdup(m.items[0].wav);
    manifest_free(&m);
    cr_assert_eq(unlink(first_wav), 0);

    /* Same arguments (nj does not count): nothing is redone, so the removed file stays away. */
    tiny_args c = tiny_cfg(fortunes, "ds", 1);
    esp_err err;
    cr_assert_eq(build_tiny(&c, "data", &err), 0, "%s", err.msg);
    cr_expect_not(path_exists(first_wav));

    /* A new seed is a new dataset. */
    char *old_stamp = test_slurp("data/manifest/.built");
    char *old_train = test_slurp("data/manifest/train.tsv");
    c.k.seed = 8;
    cr_assert_eq(build_tiny(&c, "data", &err), 0, "%s", err.msg);
    char *new_stamp = test_slurp("data/manifest/.built");
    char *new_train = test_slurp("data/manifest/train.tsv");
    cr_expect_str_neq(old_stamp, new_stamp);
    cr_expect_str_neq(old_train, new_train);
    cr_expect(strstr(new_stamp, "seed: 8\n"), "%s", new_stamp);
    m = read_split("data", "train");
    for (size_t i = 0; i < m.n; i++) cr_expect(path_exists(m.items[i].wav), "%s", m.items[i].wav);
    manifest_free(&m);
    free(old_stamp);
    free(old_train);
    free(new_stamp);
    free(new_train);
    free(first_wav);
    free(fortunes);
}

static void expect_build_error(tiny_args *c, const char *want)
{
    char *data = tmp_path("data");
    esp_err err;
    err.msg[0] = '\0';
    cr_assert_neq(build_tiny(c, data, &err), 0, "expected an error with: %s", want);
    cr_expect(strstr(err.msg, want), "error \"%s\" lacks \"%s\"", err.msg, want);
    free(data);
}

Test(espeak_fortunes, missing_synthesizer_names_the_debian_package, .init = setup, .fini = teardown)
{
    char *fortunes = fortune_file(), *empty = tmp_path("emptybin"), *ds = tmp_path("ds");
    esp_err err;
    cr_assert_eq(mkdir_p(empty, &err), 0);
    setenv("PATH", empty, 1);
    tiny_args c = tiny_cfg(fortunes, ds, 1);
    expect_build_error(&c, "espeak-ng not found on PATH (install the Debian package espeak-ng)");
    c.k.synthesizer = "flite";
    expect_build_error(&c, "flite not found on PATH (install the Debian package flite)");
    free(fortunes);
    free(empty);
    free(ds);
}

Test(espeak_fortunes, synthesis_failure_names_the_utterance, .init = setup, .fini = teardown)
{
    char *fortunes = fortune_file(), *ds = tmp_path("ds");
    tiny_args c = tiny_cfg(fortunes, ds, 2);
    static char *bad_voice[] = {"nosuchvoice"};
    c.k.test_voices = bad_voice;
    expect_build_error(&c, "create_dataset: utterance nosuchvoice-test-0000");
    expect_build_error(&c, "The specified espeak-ng voice does not exist");
    char *stamp = tmp_path("data/manifest/.built");
    cr_expect_not(path_exists(stamp));
    free(stamp);
    free(fortunes);
    free(ds);
}

Test(espeak_fortunes, bad_arguments_name_their_key, .init = setup, .fini = teardown)
{
    char *fortunes = fortune_file(), *ds = tmp_path("ds");
    tiny_args c;
    int64_t reversed[] = {200, 100}, three[] = {1, 2, 3}, loud[] = {0, 120};

    c = tiny_cfg(fortunes, ds, 1), c.k.speed_range = reversed;
    expect_build_error(&c, "create_dataset.speed_range: low 200 is above high 100");
    c = tiny_cfg(fortunes, ds, 1), c.k.pitch_range = three, c.k.n_pitch_range = 3;
    expect_build_error(&c, "create_dataset.pitch_range: expected [low, high] (got 3 values)");
    c = tiny_cfg(fortunes, ds, 1), c.k.pitch_range = loud;
    expect_build_error(&c, "create_dataset.pitch_range: [0, 120] is outside 0..99");
    c = tiny_cfg(fortunes, ds, 1), c.k.min_words = 9, c.k.max_words = 4;
    expect_build_error(&c, "create_dataset.min_words: 9 is above create_dataset.max_words 4");
    c = tiny_cfg(fortunes, ds, 1), c.k.num_valid = -1;
    expect_build_error(&c, "create_dataset.num_valid: must be >= 1");
    c = tiny_cfg(fortunes, ds, 1), c.k.test_voices = train_voices + 1;
    expect_build_error(&c, "create_dataset.test_voices: en-gb is also in create_dataset.train_voices");
    c = tiny_cfg(fortunes, ds, 1), c.k.synthesizer = "say";
    expect_build_error(&c, "create_dataset.synthesizer: say is not supported (use espeak-ng, flite or festival)");
    c = tiny_cfg("/nonexistent/fortunes", ds, 1);
    expect_build_error(&c, "create_dataset.text_source: /nonexistent/fortunes does not exist");
    /* fortune_text has 14 usable sentences of 3..8 words. */
    c = tiny_cfg(fortunes, ds, 1), c.k.num_train = 12;
    expect_build_error(&c, "16 distinct sentences needed (num_train 12 + num_valid 2 + num_test 2) but");
    expect_build_error(&c, "has only 14 with 3..8 words (lower create_dataset.num_train");
    free(fortunes);
    free(ds);
}

/* ---- several engines ---------------------------------------------------------------------- */

static char *espeak_voices[] = {"en-us"}, *espeak_test[] = {"en-gb-scotland"};
static char *festival_voices[] = {"kal_diphone", "ked_diphone"}, *flite_voices[] = {"rms", "awb"};

/* espeak-ng and festival for train/valid (espeak-ng's unseen voice for test), flite held out. */
static void engines_cfg(tiny_args *c, synth_engine_cfg e[2], synth_engine_cfg *te)
{
    memset(e, 0, 2 * sizeof *e);
    memset(te, 0, sizeof *te);
    e[0].name = "espeak-ng", e[0].voices = espeak_voices, e[0].n_voices = 1;
    e[0].test_voices = espeak_test, e[0].n_test_voices = 1;
    e[1].name = "festival", e[1].voices = festival_voices, e[1].n_voices = 2;
    te->name = "flite", te->voices = flite_voices, te->n_voices = 2;
    c->k.synthesizer = NULL;
    c->k.train_voices = c->k.test_voices = c->k.train_variants = c->k.test_variants = NULL;
    c->k.n_train_voices = c->k.n_test_voices = c->k.n_train_variants = c->k.n_test_variants = 0;
    c->k.engines = e, c->k.n_engines = 2;
    c->k.test_engine = te;
    c->k.num_train = 6, c->k.num_valid = 1, c->k.num_test = 1, c->k.num_test_engine = 2;
    c->k.num_rirs = 2, c->k.num_noises = 2;
    c->k.seed = 3; /* train then has both engines */
}

static void build_engines_in(const char *sub, const char *fortunes, int nj)
{
    char *dir = tmp_path(sub);
    esp_err err;
    cr_assert_eq(mkdir_p(dir, &err), 0, "%s", err.msg);
    cr_assert_eq(chdir(dir), 0);
    tiny_args c = tiny_cfg(fortunes, "ds", nj);
    synth_engine_cfg e[2], te;
    engines_cfg(&c, e, &te);
    cr_assert_eq(build_tiny(&c, "data", &err), 0, "%s", err.msg);
    free(dir);
}

Test(espeak_fortunes, engines_and_test_engine_identical_for_any_nj, .init = setup, .fini = teardown)
{
    char *fortunes = fortune_file();
    build_engines_in("one", fortunes, 1);
    char *one_dir = tmp_path("one"), *saved_dir = tmp_path("saved");
    cr_assert_eq(rename(one_dir, saved_dir), 0);
    build_engines_in("one", fortunes, 2);
    const char *files[] = {"data/manifest/train.tsv", "data/manifest/test_engine.tsv", "data/manifest/.built",
                           "data/test_engine/utt2spk", "ds/rir.scp", "ds/noise.scp"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char *a = xasprintf("%s/saved/%s", tmpdir, files[i]), *b = xasprintf("%s/one/%s", tmpdir, files[i]);
        expect_same_file(a, b);
        free(a);
        free(b);
    }
    char *one = tmp_path("one/data");
    const char *all[] = {"train", "valid", "test", "test_engine"};
    int festival = 0, espeak = 0;
    for (int k = 0; k < 4; k++) {
        manifest m = read_split(one, all[k]);
        cr_expect_eq(m.n, k == 0 ? 6u : k == 3 ? 2u : 1u);
        for (size_t i = 0; i < m.n; i++) {
            const char *spk = m.items[i].utt; /* "<spk>-<split>-<index>" */
            if (k == 3) cr_expect(!strncmp(spk, "flite_", 6), "test_engine speaker %s", spk);
            else if (k == 2) cr_expect(!strncmp(spk, "en_gb_scotland-", 15), "test speaker %s", spk);
            else {
                cr_expect(!strncmp(spk, "en_us-", 6) || !strncmp(spk, "festival_", 9), "train speaker %s", spk);
                festival += !strncmp(spk, "festival_", 9), espeak += !strncmp(spk, "en_us-", 6);
            }
            const char *wav = m.items[i].wav;
            char *a = xasprintf("%s%s", saved_dir, wav + strlen(one_dir));
            expect_same_file(a, wav);
            free(a);
            SF_INFO info = {0};
            SNDFILE *sf = sf_open(wav, SFM_READ, &info);
            cr_assert_not_null(sf, "%s", wav);
            cr_expect_eq(info.samplerate, 16000);
            cr_expect(info.frames > 8000, "%s: %lld samples", wav, (long long)info.frames);
            sf_close(sf);
        }
        manifest_free(&m);
    }
    cr_expect(festival > 0 && espeak > 0, "train has festival %d, espeak-ng %d utterances", festival, espeak);
    for (int k = 0; k < 4; k++) { /* the generated RIRs and noises are deterministic too */
        char *rel = xasprintf("ds/%s_%03d.wav", k < 2 ? "rir/rir" : "noise/noise", k % 2);
        char *a = xasprintf("%s/%s", saved_dir, rel), *b = xasprintf("%s/%s", one_dir, rel);
        cr_expect(path_exists(b), "%s", b);
        expect_same_file(a, b);
        free(rel), free(a), free(b);
    }
    free(one);
    free(one_dir);
    free(saved_dir);
    free(fortunes);
}

Test(espeak_fortunes, engine_errors_name_the_engine, .init = setup, .fini = teardown)
{
    char *fortunes = fortune_file(), *ds = tmp_path("ds");
    tiny_args c = tiny_cfg(fortunes, ds, 1);
    synth_engine_cfg e[2], te;

    engines_cfg(&c, e, &te), e[1].name = "say";
    expect_build_error(&c, "create_dataset.engines[1].name: say is not supported (use espeak-ng, flite or festival)");
    engines_cfg(&c, e, &te), te.name = "festival";
    expect_build_error(&c, "create_dataset.test_engine: festival is also a training engine");
    engines_cfg(&c, e, &te), c.k.synthesizer = "espeak-ng";
    expect_build_error(&c, "create_dataset.engines: replaces synthesizer");
    engines_cfg(&c, e, &te), e[0].n_test_voices = 0;
    expect_build_error(&c, "create_dataset.engines: no engine has test_voices");
    engines_cfg(&c, e, &te), e[1].variants = espeak_voices, e[1].n_variants = 1;
    expect_build_error(&c, "create_dataset.engines[1]: variants are espeak-ng's");
    engines_cfg(&c, e, &te), e[0].test_voices = espeak_voices;
    expect_build_error(&c, "create_dataset.engines[0].test_voices: en-us is also a training voice of espeak-ng");
    static char *no_voice[] = {"nosuch_diphone"}, *shell[] = {"kal;rm"};
    engines_cfg(&c, e, &te), e[1].voices = no_voice, e[1].n_voices = 1;
    expect_build_error(&c, "festival has no voice nosuch_diphone");
    engines_cfg(&c, e, &te), te.voices = no_voice, te.n_voices = 1;
    expect_build_error(&c, "flite has no voice nosuch_diphone");
    engines_cfg(&c, e, &te), e[1].voices = shell, e[1].n_voices = 1;
    expect_build_error(&c, "'kal;rm' is not a voice name");
    char *stamp = tmp_path("data/manifest/.built");
    cr_expect_not(path_exists(stamp));
    free(stamp);

    /* a missing program names its Debian package */
    char *empty = tmp_path("emptybin");
    esp_err err;
    cr_assert_eq(mkdir_p(empty, &err), 0);
    char *old_path = xstrdup(getenv("PATH"));
    char *espeak = xstrdup("/usr/bin/espeak-ng");
    cr_assert(path_exists(espeak));
    char *link = path_join(empty, "espeak-ng");
    cr_assert_eq(symlink(espeak, link), 0);
    setenv("PATH", empty, 1);
    engines_cfg(&c, e, &te);
    expect_build_error(&c, "text2wave not found on PATH (install the Debian package festival)");
    setenv("PATH", old_path, 1);
    free(old_path), free(espeak), free(link), free(empty);
    free(fortunes);
    free(ds);
}
