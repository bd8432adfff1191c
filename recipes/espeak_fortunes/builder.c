/* The espeak_fortunes dataset: English sentences from the Debian `fortunes` package spoken by
 * espeak-ng voices (and voice variants) at random speed and pitch, as 16 kHz mono WAV.
 *
 * Splits: train and valid use train_voices x train_variants (of every engine in engines, one
 * drawn per utterance); test uses test_voices x
 * test_variants, which must not overlap train_voices. Every split gets its own sentences.
 * Everything is drawn from the seed with a counter-based RNG, so the files are identical for
 * any number of worker processes. A stamp of the arguments makes a second run a no-op.
 * Beside the manifests goes the text of a character LM (lm/train.txt, lm/valid.txt: lm_text.h),
 * with its own stamp, so a dataset built before it gets it without synthesizing again. */
#include "recipes/registry.h"
#include "recipes/espeak_fortunes/keys.h"
#include "core/base/fsio.h"
#include "core/base/hash.h"
#include "core/formats/manifest.h"
#include "core/base/progress.h"
#include "core/base/rng.h"
#include "core/data/audio.h"
#include "recipes/espeak_fortunes/fortunes.h"
#include "recipes/espeak_fortunes/str_list.h"
#include "recipes/espeak_fortunes/lm_text.h"
#include "recipes/espeak_fortunes/synth.h"
#include "recipes/espeak_fortunes/text_norm.h"
#include "core/config/yamltree.h" /* intern: settings keep the absolute dataset_dir */

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define BUILDER_NAME "espnet3.recipes.espeak_fortunes.create_dataset"
/* Bump when the output for the same arguments changes, so old builds are redone. */
#define BUILDER_FORMAT 1

/* Defaults of the keys that depend on engines (the others are declared in keys.c). */
#define DEFAULT_SYNTHESIZER "espeak-ng"
#define DEFAULT_TEXT_SOURCE "/usr/share/games/fortunes" /* Debian package fortunes */
/* nj 0: one worker per online CPU. dataset_dir NULL: data_dir. seed 0 is used as given.
 * Empty variant lists mean the plain voices. */
static const char *const default_train_voices[] = {"en-us", "en-gb", "en-gb-x-rp", "en-029"};
static const char *const default_test_voices[] = {"en-gb-scotland", "en-us-nyc"};

/* test_engine: speech from create_dataset.test_engine, an engine never used for train or valid. */
enum split_id { SPLIT_TRAIN, SPLIT_VALID, SPLIT_TEST, SPLIT_TEST_ENGINE, SPLIT_COUNT };
static const char *const split_names[SPLIT_COUNT] = {"train", "valid", "test", "test_engine"};
#define MAX_ENGINES 8

/* RNG streams: the sentence shuffle, and one per split for per-utterance draws. */
enum { STREAM_SENTENCES = 1, STREAM_UTTERANCE_BASE = 16 };

/* One synthesizer with its voices: [0] train/valid, [1] test. */
typedef struct engine_set {
    synth_engine engine;
    const char *const *voices[2];
    size_t n_voices[2];
    const char *const *variants[2];
    size_t n_variants[2];
} engine_set;

/* The config with defaults applied and checked. */
typedef struct settings {
    const char *synthesizer, *text_source, *dataset_dir;
    uint64_t seed;
    size_t num[SPLIT_COUNT];
    engine_set eng[MAX_ENGINES]; /* without create_dataset.engines: one, from synthesizer + *_voices */
    size_t n_eng;
    int multi;                   /* create_dataset.engines was given */
    engine_set test_eng;         /* create_dataset.test_engine (voices in [0]) when num[SPLIT_TEST_ENGINE] */
    int speed[2], pitch[2];
    int min_words, max_words;
    int fs, nj;
    size_t num_rirs, num_noises;
} settings;

typedef struct utterance {
    char *utt, *spk, *voice, *wav, *text, *spoken;
    synth_engine engine;
    int speed, pitch;
    enum split_id split;
} utterance;


/* ---- settings ---------------------------------------------------------------------------- */

static int resolve_count(int64_t v, const char *key, size_t *out, esp_err *err)
{
    if (v < 1) return esp_fail(err, "create_dataset.%s: must be >= 1 (got %lld)", key, (long long)v);
    *out = (size_t)v;
    return 0;
}

static int resolve_range(const int64_t *v, unsigned n, int min, int max, const char *key, const char *unit, int out[2],
                         esp_err *err)
{
    if (n != 2) return esp_fail(err, "create_dataset.%s: expected [low, high] (got %u values)", key, n);
    if (v[0] > v[1])
        return esp_fail(err, "create_dataset.%s: low %lld is above high %lld (write it as [low, high])", key,
                        (long long)v[0], (long long)v[1]);
    if (v[0] < min || v[1] > max)
        return esp_fail(err, "create_dataset.%s: [%lld, %lld] is outside %d..%d %s", key, (long long)v[0],
                        (long long)v[1], min, max, unit);
    out[0] = (int)v[0], out[1] = (int)v[1];
    return 0;
}

static int check_names(char *const *names, unsigned n, const char *key, esp_err *err)
{
    for (unsigned i = 0; i < n; i++) {
        const char *s = names[i];
        if (!s || !s[0]) return esp_fail(err, "create_dataset.%s: entry %u is empty", key, i);
        for (const char *p = s; *p; p++)
            if (!isalnum((unsigned char)*p) && !strchr("-_+.", *p))
                return esp_fail(err, "create_dataset.%s: '%s' is not a voice name (letters, digits, - _ + . only)",
                                key, s);
    }
    return 0;
}

static int check_engine_voices(const engine_set *e, const char *key, esp_err *err)
{
    for (size_t i = 0; i < e->n_voices[1]; i++)
        for (size_t j = 0; j < e->n_voices[0]; j++)
            if (strcmp(e->voices[1][i], e->voices[0][j]) == 0)
                return esp_fail(err,
                                "create_dataset.%s.test_voices: %s is also a training voice of %s (test voices must be "
                                "unseen in training; remove it from one list)",
                                key, e->voices[1][i], synth_engine_name(e->engine));
    return 0;
}

/* One entry of create_dataset.engines (or test_engine: test 0). */
static int resolve_engine(const synth_engine_cfg *c, const char *key, int test, engine_set *e, esp_err *err)
{
    memset(e, 0, sizeof *e);
    if (!c->name) return esp_fail(err, "create_dataset.%s.name: missing (espeak-ng, flite or festival)", key);
    if (synth_engine_parse(c->name, &e->engine, err) != 0)
        return esp_fail(err, "create_dataset.%s.name: %s is not supported (use espeak-ng, flite or festival)", key,
                        c->name);
    char k1[64], k2[64], k3[64], k4[64];
    snprintf(k1, sizeof k1, "%s.voices", key);
    snprintf(k2, sizeof k2, "%s.variants", key);
    snprintf(k3, sizeof k3, "%s.test_voices", key);
    snprintf(k4, sizeof k4, "%s.test_variants", key);
    if (check_names(c->voices, c->n_voices, k1, err) != 0 || check_names(c->variants, c->n_variants, k2, err) != 0 ||
        check_names(c->test_voices, c->n_test_voices, k3, err) != 0 ||
        check_names(c->test_variants, c->n_test_variants, k4, err) != 0)
        return -1;
    if (!c->n_voices) return esp_fail(err, "create_dataset.%s.voices: missing (the %s voices to use)", key, c->name);
    if ((c->n_variants || c->n_test_variants) && e->engine != SYNTH_ESPEAK_NG)
        return esp_fail(err, "create_dataset.%s: variants are espeak-ng's (remove them for %s)", key, c->name);
    if (test && (c->n_test_voices || c->n_test_variants))
        return esp_fail(err, "create_dataset.%s: write its voices under voices (test_voices is for engines[])", key);
    e->voices[0] = (const char *const *)c->voices;
    e->n_voices[0] = c->n_voices;
    e->variants[0] = (const char *const *)c->variants;
    e->n_variants[0] = c->n_variants;
    e->voices[1] = (const char *const *)c->test_voices;
    e->n_voices[1] = c->n_test_voices;
    e->variants[1] = (const char *const *)c->test_variants;
    e->n_variants[1] = c->n_test_variants;
    return check_engine_voices(e, key, err);
}

static int resolve_settings(const create_dataset_cfg *cd, const char *data_dir, settings *s, esp_err *err)
{
    const espeak_fortunes_cfg *c = cd->keys;
    ESP_CHECK(c);
    memset(s, 0, sizeof *s);
    s->synthesizer = c->synthesizer ? c->synthesizer : DEFAULT_SYNTHESIZER;
    s->text_source = c->text_source ? c->text_source : DEFAULT_TEXT_SOURCE;
    /* Manifests hold absolute wav paths so later stages work from any directory. */
    char *abs = path_absolute(cd->dataset_dir ? cd->dataset_dir : data_dir);
    s->dataset_dir = intern(abs);
    free(abs);
    s->seed = (uint64_t)c->seed;
    if (resolve_count(c->num_train, "num_train", &s->num[SPLIT_TRAIN], err) != 0 ||
        resolve_count(c->num_valid, "num_valid", &s->num[SPLIT_VALID], err) != 0 ||
        resolve_count(c->num_test, "num_test", &s->num[SPLIT_TEST], err) != 0)
        return -1;

    if (c->n_engines) {
        if (c->synthesizer || c->n_train_voices || c->n_test_voices || c->n_train_variants || c->n_test_variants)
            return esp_fail(err, "create_dataset.engines: replaces synthesizer, train_voices, test_voices, "
                            "train_variants and test_variants (remove those, or engines)");
        if (c->n_engines > MAX_ENGINES)
            return esp_fail(err, "create_dataset.engines: %u engines, at most %d", c->n_engines, MAX_ENGINES);
        s->multi = 1;
        s->n_eng = c->n_engines;
        int any_test = 0;
        for (unsigned i = 0; i < c->n_engines; i++) {
            char key[32];
            snprintf(key, sizeof key, "engines[%u]", i);
            if (resolve_engine(&c->engines[i], key, 0, &s->eng[i], err) != 0) return -1;
            for (unsigned j = 0; j < i; j++)
                if (s->eng[j].engine == s->eng[i].engine)
                    return esp_fail(err, "create_dataset.engines[%u]: %s is listed twice (merge its voices into "
                                    "one entry)", i, c->engines[i].name);
            any_test |= s->eng[i].n_voices[1] > 0;
        }
        if (!any_test)
            return esp_fail(err, "create_dataset.engines: no engine has test_voices (the test split needs "
                            "voices unseen in training)");
    } else {
        s->n_eng = 1;
        engine_set *e = &s->eng[0];
        if (synth_engine_parse(s->synthesizer, &e->engine, err) != 0)
            return esp_fail(err, "create_dataset.synthesizer: %s is not supported (use espeak-ng, flite or festival)",
                            s->synthesizer);
        if (check_names(c->train_voices, c->n_train_voices, "train_voices", err) != 0 ||
            check_names(c->test_voices, c->n_test_voices, "test_voices", err) != 0 ||
            check_names(c->train_variants, c->n_train_variants, "train_variants", err) != 0 ||
            check_names(c->test_variants, c->n_test_variants, "test_variants", err) != 0)
            return -1;
        e->voices[0] = c->n_train_voices ? (const char *const *)c->train_voices : default_train_voices;
        e->n_voices[0] = c->n_train_voices ? c->n_train_voices : sizeof default_train_voices / sizeof(char *);
        e->voices[1] = c->n_test_voices ? (const char *const *)c->test_voices : default_test_voices;
        e->n_voices[1] = c->n_test_voices ? c->n_test_voices : sizeof default_test_voices / sizeof(char *);
        e->variants[0] = (const char *const *)c->train_variants;
        e->n_variants[0] = c->n_train_variants;
        e->variants[1] = (const char *const *)c->test_variants;
        e->n_variants[1] = c->n_test_variants;
        for (size_t i = 0; i < e->n_voices[1]; i++)
            for (size_t j = 0; j < e->n_voices[0]; j++)
                if (strcmp(e->voices[1][i], e->voices[0][j]) == 0)
                    return esp_fail(err,
                                    "create_dataset.test_voices: %s is also in create_dataset.train_voices "
                                    "(test voices must be unseen in training; remove it from one list)",
                                    e->voices[1][i]);
    }
    if (c->test_engine) {
        if (resolve_engine(c->test_engine, "test_engine", 1, &s->test_eng, err) != 0) return -1;
        for (size_t i = 0; i < s->n_eng; i++)
            if (s->eng[i].engine == s->test_eng.engine)
                return esp_fail(err, "create_dataset.test_engine: %s is also a training engine (the test_engine "
                                "split is speech from an engine never heard in training)",
                                synth_engine_name(s->test_eng.engine));
        if (resolve_count(c->num_test_engine ? c->num_test_engine : (int64_t)s->num[SPLIT_TEST], "num_test_engine",
                          &s->num[SPLIT_TEST_ENGINE], err) != 0)
            return -1;
    } else if (c->num_test_engine) {
        return esp_fail(err, "create_dataset.num_test_engine: given without create_dataset.test_engine");
    }
    int any_espeak = 0;
    for (size_t i = 0; i < s->n_eng; i++) any_espeak |= s->eng[i].engine == SYNTH_ESPEAK_NG;
    any_espeak |= s->num[SPLIT_TEST_ENGINE] && s->test_eng.engine == SYNTH_ESPEAK_NG;

    /* espeak-ng clamps -s to 80..450 and -p to 0..99; refuse values it would silently change. */
    int speed_min = any_espeak ? 80 : 1, speed_max = any_espeak ? 450 : 1000;
    if (resolve_range(c->speed_range, c->n_speed_range, speed_min, speed_max, "speed_range", "words per minute",
                      s->speed, err) != 0 ||
        resolve_range(c->pitch_range, c->n_pitch_range, 0, 99, "pitch_range", "(espeak-ng pitch)", s->pitch, err) != 0)
        return -1;

    if (c->min_words < 1 || c->max_words < 1)
        return esp_fail(err, "create_dataset.%s: must be >= 1", c->min_words < 1 ? "min_words" : "max_words");
    s->min_words = (int)c->min_words;
    s->max_words = (int)c->max_words;
    if (s->min_words > s->max_words)
        return esp_fail(err, "create_dataset.min_words: %d is above create_dataset.max_words %d (lower min_words "
                        "or raise max_words)", s->min_words, s->max_words);
    if (c->fs < 1000 || c->fs > 192000)
        return esp_fail(err, "create_dataset.fs: %lld Hz is not a usable sample rate (use e.g. 16000)",
                        (long long)c->fs);
    s->fs = (int)c->fs;
    if (c->num_rirs < 0 || c->num_rirs > 1000 || c->num_noises < 0 || c->num_noises > 1000)
        return esp_fail(err, "create_dataset.%s: must be in 1..1000", c->num_rirs < 0 || c->num_rirs > 1000 ? "num_rirs" : "num_noises");
    s->num_rirs = (size_t)c->num_rirs;
    s->num_noises = (size_t)c->num_noises;
    if (c->nj < 0) return esp_fail(err, "create_dataset.nj: must be > 0 (got %lld)", (long long)c->nj);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    s->nj = c->nj ? (c->nj > 1024 ? 1024 : (int)c->nj) : (cpus > 0 ? (int)cpus : 1);
    return 0;
}

/* ---- the built stamp --------------------------------------------------------------------- */

static void append_list(char **text, const char *key, const char *const *v, size_t n)
{
    char *line = xasprintf("%s:", key);
    for (size_t i = 0; i < n; i++) {
        char *next = xasprintf("%s%s%s", line, i ? "," : " ", v[i]);
        free(line);
        line = next;
    }
    char *next = xasprintf("%s%s\n", *text, line);
    free(line);
    free(*text);
    *text = next;
}


/* Everything that decides the output (not nj, which only changes speed), plus its hash. */
static char *stamp_text(const settings *s)
{
    char *t = xasprintf("builder: %s\nformat: %d\nsynthesizer: %s\ntext_source: %s\ndataset_dir: %s\n"
                        "seed: %llu\nnum_train: %zu\nnum_valid: %zu\nnum_test: %zu\n"
                        "speed_range: %d,%d\npitch_range: %d,%d\nmin_words: %d\nmax_words: %d\nfs: %d\n",
                        BUILDER_NAME, BUILDER_FORMAT, s->synthesizer, s->text_source, s->dataset_dir,
                        (unsigned long long)s->seed, s->num[SPLIT_TRAIN], s->num[SPLIT_VALID],
                        s->num[SPLIT_TEST], s->speed[0], s->speed[1], s->pitch[0], s->pitch[1], s->min_words,
                        s->max_words, s->fs);
    for (size_t i = 0; i < s->n_eng + (s->num[SPLIT_TEST_ENGINE] > 0); i++) {
        const engine_set *e = i < s->n_eng ? &s->eng[i] : &s->test_eng;
        if (s->multi || i > 0) { /* the single-engine stamp stays as it was */
            char *next = xasprintf("%s%s: %s\n", t, i < s->n_eng ? "engine" : "test_engine", synth_engine_name(e->engine));
            free(t);
            t = next;
        }
        append_list(&t, "train_voices", e->voices[0], e->n_voices[0]);
        append_list(&t, "test_voices", e->voices[1], e->n_voices[1]);
        append_list(&t, "train_variants", e->variants[0], e->n_variants[0]);
        append_list(&t, "test_variants", e->variants[1], e->n_variants[1]);
    }
    if (s->num[SPLIT_TEST_ENGINE]) {
        char *next = xasprintf("%snum_test_engine: %zu\n", t, s->num[SPLIT_TEST_ENGINE]);
        free(t);
        t = next;
    }
    if (s->num_rirs || s->num_noises) {
        char *next = xasprintf("%snum_rirs: %zu\nnum_noises: %zu\n", t, s->num_rirs, s->num_noises);
        free(t);
        t = next;
    }
    char *with_hash = xasprintf("%shash: %016llx\n", t, (unsigned long long)fnv1a64_str(t));
    free(t);
    return with_hash;
}

/* 1 when the stamp matches and every manifest is there. */
static int is_built(const settings *s, const char *manifest_dir, const char *stamp_path, const char *expected)
{
    esp_err ignored;
    char *have = path_exists(stamp_path) ? read_file(stamp_path, READ_SMALL, NULL, &ignored) : NULL;
    int same = have && strcmp(have, expected) == 0;
    if (have && !same) log_info("create_dataset: arguments changed since %s was written; rebuilding", stamp_path);
    free(have);
    for (int k = 0; same && k < SPLIT_COUNT; k++) {
        if (k == SPLIT_TEST_ENGINE && !s->num[k]) continue;
        char *name = xasprintf("%s.tsv", split_names[k]);
        char *p = path_join(manifest_dir, name);
        same = path_exists(p);
        free(p);
        free(name);
    }
    for (int k = 0; same && k < 2; k++) {
        if (!(k ? s->num_noises : s->num_rirs)) continue;
        char *p = path_join(s->dataset_dir, k ? "noise.scp" : "rir.scp");
        same = path_exists(p);
        free(p);
    }
    return same;
}

/* ---- sentences --------------------------------------------------------------------------- */

/* A sentence the synthesizers read as its transcript (plain prose, no abbreviation) with
 * min_words..max_words words. */
static void keep_sentence(const fortune_sentence *sentence, const settings *s, str_list *out)
{
    if (sentence->has_abbrev) return;
    char *raw = xstrndup(sentence->text, sentence->len);
    if (text_is_plain_prose(raw)) {
        char *norm = text_normalize(raw);
        size_t words = text_word_count(norm);
        if (words >= (size_t)s->min_words && words <= (size_t)s->max_words) {
            str_list_push(out, norm);
            norm = NULL;
        }
        free(norm);
    }
    free(raw);
}

typedef struct sentence_sink {
    const settings *s;
    str_list *out;
} sentence_sink;

static void keep_fortune_sentences(void *ctx, const char *joined, const fortune_sentence *sentences, size_t n)
{
    (void)joined;
    sentence_sink *sink = ctx;
    for (size_t i = 0; i < n; i++) keep_sentence(&sentences[i], sink->s, sink->out);
}

/* Distinct normalized sentences with min_words..max_words words, sorted. */
static int collect_sentences(const settings *s, str_list *out, esp_err *err)
{
    sentence_sink sink = {s, out};
    if (fortunes_for_each(s->text_source, keep_fortune_sentences, &sink, err) != 0) return -1;
    if (out->n) qsort(out->v, out->n, sizeof *out->v, str_list_cmp);
    size_t u = 0;
    for (size_t i = 0; i < out->n; i++) {
        if (u > 0 && strcmp(out->v[u - 1], out->v[i]) == 0) free(out->v[i]);
        else out->v[u++] = out->v[i];
    }
    out->n = u;
    return 0;
}

/* ---- the plan ---------------------------------------------------------------------------- */

/* Speaker id from voice and variant, lower-case [a-z0-9_] only: utterance ids are
 * "<spk>-<split>-<index>", and with '-' sorting below every speaker-id character, sorting by
 * utterance id also sorts by speaker as Kaldi requires. */
static char *speaker_id(const char *prefix, const char *voice, const char *variant)
{
    char *id = variant ? xasprintf("%s_%s", voice, variant) : prefix ? xasprintf("%s_%s", prefix, voice) : xstrdup(voice);
    for (char *p = id; *p; p++) *p = isalnum((unsigned char)*p) ? (char)tolower((unsigned char)*p) : '_';
    return id;
}

static void plan_utterance(const settings *s, enum split_id split, size_t index, const char *text,
                           utterance *u)
{
    int side = split == SPLIT_TEST;
    rng r;
    rng_init(&r, rng_derive(s->seed, STREAM_UTTERANCE_BASE + (uint64_t)split, index));
    const engine_set *e = &s->eng[0];
    if (split == SPLIT_TEST_ENGINE) {
        e = &s->test_eng;
        side = 0;
    } else if (s->multi) { /* an engine with voices for this side; one engine draws nothing (as before) */
        const engine_set *cand[MAX_ENGINES];
        size_t nc = 0;
        for (size_t i = 0; i < s->n_eng; i++)
            if (s->eng[i].n_voices[side]) cand[nc++] = &s->eng[i];
        if (nc > 1) e = cand[rng_uniform_int(&r, 0, (int64_t)nc - 1)];
        else e = cand[0];
    }
    const char *voice = e->voices[side][rng_uniform_int(&r, 0, (int64_t)e->n_voices[side] - 1)];
    const char *variant =
        e->n_variants[side] ? e->variants[side][rng_uniform_int(&r, 0, (int64_t)e->n_variants[side] - 1)] : NULL;
    u->engine = e->engine;
    /* Other engines' voice names could equal espeak-ng's: their speakers carry the engine's name. */
    int prefix = e->engine != SYNTH_ESPEAK_NG && (s->multi || split == SPLIT_TEST_ENGINE);
    u->split = split;
    u->speed = (int)rng_uniform_int(&r, s->speed[0], s->speed[1]);
    u->pitch = (int)rng_uniform_int(&r, s->pitch[0], s->pitch[1]);
    u->voice = variant ? xasprintf("%s+%s", voice, variant) : xstrdup(voice);
    u->spk = speaker_id(prefix ? synth_engine_name(e->engine) : NULL, voice, variant);
    u->utt = xasprintf("%s-%s-%06zu", u->spk, split_names[split], index);
    u->wav = xasprintf("%s/wav/%s/%s.wav", s->dataset_dir, split_names[split], u->utt);
    u->text = xstrdup(text);
    /* Spoken in lower case so all-caps words are read as words, not spelled; the final period
     * only gives a sentence-final intonation. */
    u->spoken = xasprintf("%s.", text);
    for (char *p = u->spoken; *p; p++) *p = (char)tolower((unsigned char)*p);
}

static void free_utterances(utterance *u, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(u[i].utt);
        free(u[i].spk);
        free(u[i].voice);
        free(u[i].wav);
        free(u[i].text);
        free(u[i].spoken);
    }
    free(u);
}

/* ---- parallel synthesis ------------------------------------------------------------------ */

/* Workers report on one pipe: 'D' per finished utterance, or 'E' + message + NUL on failure.
 * Each report is a single write of at most PIPE_BUF bytes, so reports never interleave. */
enum { REPORT_DONE = 'D', REPORT_ERROR = 'E' };

static _Noreturn void run_worker(const settings *s, const utterance *u, size_t n, int w, int fd)
{
    for (size_t i = (size_t)w; i < n; i += (size_t)s->nj) {
        synth_params p = {u[i].voice, u[i].speed, u[i].pitch, u[i].spoken};
        esp_err e;
        if (synth_to_wav(u[i].engine, &p, s->fs, u[i].wav, &e) != 0) {
            char msg[PIPE_BUF];
            int len = snprintf(msg, sizeof msg, "%ccreate_dataset: utterance %s (%s): %s", REPORT_ERROR, u[i].utt,
                               synth_engine_name(u[i].engine), e.msg);
            size_t n_bytes = len < 0 ? 1 : (size_t)len >= sizeof msg ? sizeof msg - 1 : (size_t)len;
            msg[n_bytes] = '\0';
            if (write(fd, msg, n_bytes + 1) < 0) _exit(2);
            _exit(1);
        }
        char done = REPORT_DONE;
        if (write(fd, &done, 1) < 0) _exit(2);
    }
    _exit(0);
}

static int synthesize_all(const settings *s, const utterance *u, size_t n, esp_err *err)
{
    int nj = s->nj < (int)n ? s->nj : (int)n;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return esp_fail(err, "create_dataset: pipe: %s", strerror(errno));
    fflush(NULL); /* children must not flush the parent's buffered output again */
    pid_t *pids = xcalloc((size_t)nj, sizeof *pids);
    int started = 0, rc = 0;
    for (; started < nj; started++) {
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            settings mine = *s;
            mine.nj = nj;
            run_worker(&mine, u, n, started, fds[1]);
        }
        if (pid < 0) {
            rc = esp_fail(err, "create_dataset: cannot start worker %d: %s (lower create_dataset.nj)", started,
                          strerror(errno));
            for (int k = 0; k < started; k++) kill(pids[k], SIGTERM);
            break;
        }
        pids[started] = pid;
    }
    close(fds[1]);

    progress prog;
    progress_start(&prog, "create_dataset: synthesize", n);
    size_t done = 0;
    char msg[PIPE_BUF + 1];
    size_t msg_len = 0;
    int in_error = 0, have_error = rc != 0;
    char buf[4096];
    for (;;) {
        ssize_t got = read(fds[0], buf, sizeof buf);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        for (ssize_t i = 0; i < got; i++) {
            char c = buf[i];
            if (in_error) {
                if (c == '\0' || msg_len == PIPE_BUF) {
                    in_error = 0;
                    msg[msg_len] = '\0';
                    if (!have_error) {
                        have_error = 1;
                        rc = esp_fail(err, "%s", msg);
                        for (int k = 0; k < started; k++) kill(pids[k], SIGTERM); /* stop the rest */
                    }
                    msg_len = 0;
                } else {
                    msg[msg_len++] = c;
                }
            } else if (c == REPORT_ERROR) {
                in_error = 1;
            } else if (c == REPORT_DONE) {
                progress_update(&prog, ++done);
            }
        }
    }
    close(fds[0]);
    for (int k = 0; k < started; k++) {
        int status = 0;
        while (waitpid(pids[k], &status, 0) < 0 && errno == EINTR) {
        }
        if (!have_error && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
            have_error = 1;
            rc = WIFSIGNALED(status)
                     ? esp_fail(err, "create_dataset: synthesis worker %d was killed by signal %d", k,
                                WTERMSIG(status))
                     : esp_fail(err, "create_dataset: synthesis worker %d failed (exit status %d)", k,
                                WEXITSTATUS(status));
        }
    }
    free(pids);
    if (rc == 0) progress_finish(&prog);
    return rc;
}

/* ---- room impulse responses and noises -------------------------------------------------- */

enum { STREAM_RIR = 3, STREAM_NOISE = 4 };
#define NOISE_SECONDS 8

static double uniform01(rng *r) { return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

static double gaussian(rng *r) /* Box-Muller */
{
    double u = uniform01(r), v = uniform01(r);
    return sqrt(-2.0 * log(1.0 - u)) * cos(2 * M_PI * v);
}

static void peak_normalize(float *x, size_t n, double to)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
    if (m > 0)
        for (size_t i = 0; i < n; i++) x[i] = (float)(x[i] * to / m);
}

/* RIR i: a direct path, a few early reflections (2..25 ms) and a Gaussian tail decaying by 60 dB
 * in an RT60 of 0.15..0.7 s (a room's reverberation, without the geometry). */
static float *make_rir(const settings *s, size_t i, size_t *n)
{
    rng r;
    rng_init(&r, rng_derive(s->seed, STREAM_RIR, i));
    double rt60 = 0.15 + 0.55 * uniform01(&r);
    size_t len = (size_t)(rt60 * s->fs);
    float *h = xcalloc(len, sizeof *h);
    h[0] = 1.0f;
    int early = 3 + (int)rng_uniform_int(&r, 0, 4);
    for (int k = 0; k < early; k++) {
        size_t at = (size_t)((0.002 + 0.023 * uniform01(&r)) * s->fs);
        if (at < len) h[at] += (float)((uniform01(&r) < 0.5 ? -1 : 1) * (0.2 + 0.5 * uniform01(&r)));
    }
    double tail = 0.1 + 0.3 * uniform01(&r);
    for (size_t t = 1; t < len; t++) h[t] += (float)(tail * gaussian(&r) * exp(-6.9078 * (double)t / (rt60 * s->fs)));
    peak_normalize(h, len, 0.9);
    *n = len;
    return h;
}

/* Noise i: NOISE_SECONDS of Gaussian noise through a one-pole low-pass (white, then darker as the
 * pole nears 1: i % 3 picks white, pink-ish or brown-ish), mean removed, peak 0.5. */
static float *make_noise(const settings *s, size_t i, size_t *n)
{
    rng r;
    rng_init(&r, rng_derive(s->seed, STREAM_NOISE, i));
    double pole = i % 3 == 0 ? 0.0 : i % 3 == 1 ? 0.5 + 0.4 * uniform01(&r) : 0.97 + 0.025 * uniform01(&r);
    size_t len = (size_t)NOISE_SECONDS * (size_t)s->fs;
    float *x = xmalloc(len * sizeof *x);
    double y = 0, mean = 0;
    for (size_t t = 0; t < len; t++) {
        y = pole * y + (1 - pole) * gaussian(&r);
        x[t] = (float)y;
        mean += y;
    }
    mean /= (double)len;
    for (size_t t = 0; t < len; t++) x[t] = (float)(x[t] - mean);
    peak_normalize(x, len, 0.5);
    *n = len;
    return x;
}

/* <dataset_dir>/{rir,noise}/<id>.wav and <dataset_dir>/{rir,noise}.scp ("<id> <path>"). */
static int write_rirs_noises(const settings *s, esp_err *err)
{
    for (int k = 0; k < 2; k++) {
        size_t count = k ? s->num_noises : s->num_rirs;
        if (!count) continue;
        const char *kind = k ? "noise" : "rir";
        char *dir = path_join(s->dataset_dir, kind);
        int rc = mkdir_p(dir, err);
        char *scp = xstrdup("");
        for (size_t i = 0; i < count && rc == 0; i++) {
            size_t n;
            float *x = k ? make_noise(s, i, &n) : make_rir(s, i, &n);
            char *path = xasprintf("%s/%s_%03zu.wav", dir, kind, i);
            rc = audio_write_wav16(path, x, n, s->fs, AUDIO_PCM16_LIBSNDFILE, err);
            char *next = xasprintf("%s%s_%03zu %s\n", scp, kind, i, path);
            free(scp);
            scp = next;
            free(path);
            free(x);
        }
        char *scp_name = xasprintf("%s.scp", kind);
        char *scp_path = path_join(s->dataset_dir, scp_name);
        if (rc == 0) rc = atomic_write_file(scp_path, scp, strlen(scp), err);
        if (rc == 0) log_info("create_dataset: wrote %zu generated %ss listed in %s", count, kind, scp_path);
        free(scp_name), free(scp_path), free(scp), free(dir);
        if (rc != 0) return -1;
    }
    return 0;
}

/* ---- outputs ----------------------------------------------------------------------------- */

static int write_split(const char *data_dir, const char *manifest_dir, const utterance *u, size_t n,
                       enum split_id split, esp_err *err)
{
    manifest m = {0};
    for (size_t i = 0; i < n; i++)
        if (u[i].split == split) manifest_add(&m, u[i].utt, u[i].wav, u[i].text, u[i].spk);
    manifest_sort(&m);
    char *name = xasprintf("%s.tsv", split_names[split]);
    char *tsv = path_join(manifest_dir, name);
    char *kaldi = path_join(data_dir, split_names[split]);
    int rc = manifest_write_tsv(tsv, &m, err);
    if (rc == 0) rc = manifest_write_kaldi_dir(kaldi, &m, err);
    free(name);
    free(tsv);
    free(kaldi);
    manifest_free(&m);
    return rc;
}

static int build(const settings *s, const char *data_dir, const char *manifest_dir, const char *stamp_path,
                 const char *stamp, esp_err *err)
{
    for (size_t i = 0; i < s->n_eng + (s->num[SPLIT_TEST_ENGINE] > 0); i++) {
        const engine_set *e = i < s->n_eng ? &s->eng[i] : &s->test_eng;
        if (synth_check_installed(e->engine, err) != 0) return -1;
        for (int side = 0; side < 2; side++)
            for (size_t v = 0; v < e->n_voices[side]; v++)
                if (synth_check_voice(e->engine, e->voices[side][v], err) != 0) {
                    char msg[sizeof err->msg];
                    snprintf(msg, sizeof msg, "%s", err->msg);
                    return esp_fail(err, "create_dataset: %s", msg);
                }
    }
    str_list sentences = {0};
    if (collect_sentences(s, &sentences, err) != 0) {
        str_list_free(&sentences);
        return -1;
    }
    size_t need = s->num[SPLIT_TRAIN] + s->num[SPLIT_VALID] + s->num[SPLIT_TEST] + s->num[SPLIT_TEST_ENGINE];
    if (sentences.n < need) {
        char te[64] = "";
        if (s->num[SPLIT_TEST_ENGINE]) snprintf(te, sizeof te, " + num_test_engine %zu", s->num[SPLIT_TEST_ENGINE]);
        int rc = esp_fail(err, "create_dataset: %zu distinct sentences needed (num_train %zu + num_valid %zu + "
                          "num_test %zu%s) but %s has only %zu with %d..%d words (lower create_dataset.num_train, "
                          "num_valid or num_test, or widen create_dataset.min_words/max_words)",
                          need, s->num[SPLIT_TRAIN], s->num[SPLIT_VALID], s->num[SPLIT_TEST], te, s->text_source,
                          sentences.n, s->min_words, s->max_words);
        str_list_free(&sentences);
        return rc;
    }
    rng r;
    rng_init(&r, rng_derive(s->seed, STREAM_SENTENCES, 0));
    rng_shuffle(&r, sentences.v, sentences.n, sizeof *sentences.v);

    /* Consecutive slices of the shuffled sentences, so the splits never share a sentence. */
    utterance *u = xcalloc(need, sizeof *u);
    size_t k = 0;
    for (int split = 0; split < SPLIT_COUNT; split++)
        for (size_t i = 0; i < s->num[split]; i++, k++)
            plan_utterance(s, (enum split_id)split, i, sentences.v[k], &u[k]);
    str_list_free(&sentences);

    int rc = 0;
    unlink(stamp_path); /* an interrupted rebuild must not look built */
    for (int split = 0; split < SPLIT_COUNT && rc == 0; split++) {
        if (!s->num[split]) continue;
        char *dir = xasprintf("%s/wav/%s", s->dataset_dir, split_names[split]);
        rc = mkdir_p(dir, err);
        free(dir);
    }
    if (rc == 0) {
        char *names = xstrdup("");
        for (size_t i = 0; i < s->n_eng; i++) {
            char *next = xasprintf("%s%s%s", names, i ? ", " : "", synth_engine_name(s->eng[i].engine));
            free(names);
            names = next;
        }
        log_info("create_dataset: synthesizing %zu utterances (train %zu, valid %zu, test %zu, test_engine %zu) "
                 "with %s, nj=%d", need, s->num[SPLIT_TRAIN], s->num[SPLIT_VALID], s->num[SPLIT_TEST],
                 s->num[SPLIT_TEST_ENGINE], names, s->nj);
        free(names);
        rc = synthesize_all(s, u, need, err);
    }
    for (int split = 0; split < SPLIT_COUNT && rc == 0; split++)
        if (s->num[split]) rc = write_split(data_dir, manifest_dir, u, need, (enum split_id)split, err);
    if (rc == 0) rc = write_rirs_noises(s, err);
    if (rc == 0) rc = atomic_write_file(stamp_path, stamp, strlen(stamp), err);
    if (rc == 0)
        log_info("create_dataset: wrote %s/{train,valid,test%s}.tsv and Kaldi dirs under %s", manifest_dir,
                 s->num[SPLIT_TEST_ENGINE] ? ",test_engine" : "", data_dir);
    free_utterances(u, need);
    return rc;
}

int espeak_fortunes_create_dataset(const create_dataset_cfg *cfg, const char *data_dir, esp_err *err)
{
    settings s;
    if (resolve_settings(cfg, data_dir, &s, err) != 0) return -1;
    char *manifest_dir = path_join(data_dir, "manifest");
    char *stamp_path = path_join(manifest_dir, ".built");
    char *stamp = stamp_text(&s);
    int rc = 0;
    if (is_built(&s, manifest_dir, stamp_path, stamp)) {
        log_info("create_dataset: %s is already built with these arguments (%s); skipping", data_dir, stamp_path);
    } else {
        rc = mkdir_p(manifest_dir, err);
        if (rc == 0) rc = build(&s, data_dir, manifest_dir, stamp_path, stamp, err);
    }
    /* The LM text has its own stamp, so a dataset built before it gets it without new audio. */
    if (rc == 0 && !lm_text_is_built(data_dir, stamp)) {
        const char *held_out[SPLIT_COUNT];
        size_t n_held_out = 0;
        for (int k = SPLIT_VALID; k < SPLIT_COUNT; k++)
            if (s.num[k]) held_out[n_held_out++] = split_names[k];
        lm_text_args a = {s.text_source, data_dir, manifest_dir, held_out, n_held_out, stamp};
        rc = lm_text_write(&a, err);
    }
    free(stamp);
    free(stamp_path);
    free(manifest_dir);
    return rc;
}
