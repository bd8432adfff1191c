/* The espeak_fortunes dataset: English sentences from the Debian `fortunes` package spoken by
 * espeak-ng voices (and voice variants) at random speed and pitch, as 16 kHz mono WAV.
 *
 * Splits: train and valid use train_voices x train_variants; test uses test_voices x
 * test_variants, which must not overlap train_voices. Every split gets its own sentences.
 * Everything is drawn from the seed with a counter-based RNG, so the files are identical for
 * any number of worker processes. A stamp of the arguments makes a second run a no-op. */
#include "recipes/registry.h"
#include "core/base/fsio.h"
#include "core/base/hash.h"
#include "core/formats/manifest.h"
#include "core/base/progress.h"
#include "core/base/rng.h"
#include "recipes/espeak_fortunes/synth.h"
#include "recipes/espeak_fortunes/text_norm.h"
#include "core/config/yamltree.h" /* intern: settings keep the absolute dataset_dir */

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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

/* Defaults for fields the config leaves 0 / NULL. */
#define DEFAULT_SYNTHESIZER "espeak-ng"
#define DEFAULT_TEXT_SOURCE "/usr/share/games/fortunes" /* Debian package fortunes */
#define DEFAULT_NUM_TRAIN 1000
#define DEFAULT_NUM_VALID 100
#define DEFAULT_NUM_TEST 100
#define DEFAULT_SPEED_LO 130 /* words per minute; espeak-ng's normal rate is 175 */
#define DEFAULT_SPEED_HI 200
#define DEFAULT_PITCH_LO 30  /* espeak-ng pitch 0..99; 50 is normal */
#define DEFAULT_PITCH_HI 70
#define DEFAULT_MIN_WORDS 3
#define DEFAULT_MAX_WORDS 15
#define DEFAULT_FS 16000
/* nj 0: one worker per online CPU. dataset_dir NULL: data_dir. seed 0 is used as given.
 * Empty variant lists mean the plain voices. */
static const char *const default_train_voices[] = {"en-us", "en-gb", "en-gb-x-rp", "en-029"};
static const char *const default_test_voices[] = {"en-gb-scotland", "en-us-nyc"};

enum split_id { SPLIT_TRAIN, SPLIT_VALID, SPLIT_TEST, SPLIT_COUNT };
static const char *const split_names[SPLIT_COUNT] = {"train", "valid", "test"};

/* RNG streams: the sentence shuffle, and one per split for per-utterance draws. */
enum { STREAM_SENTENCES = 1, STREAM_UTTERANCE_BASE = 16 };

/* The config with defaults applied and checked. */
typedef struct settings {
    synth_engine engine;
    const char *synthesizer, *text_source, *dataset_dir;
    uint64_t seed;
    size_t num[SPLIT_COUNT];
    const char *const *voices[2]; /* [0] train/valid, [1] test */
    size_t n_voices[2];
    const char *const *variants[2];
    size_t n_variants[2];
    int speed[2], pitch[2];
    int min_words, max_words;
    int fs, nj;
} settings;

typedef struct utterance {
    char *utt, *spk, *voice, *wav, *text, *spoken;
    int speed, pitch;
    enum split_id split;
} utterance;

typedef struct str_list {
    char **v;
    size_t n, cap;
} str_list;

static void str_list_push(str_list *l, char *s)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 256;
        l->v = xrealloc(l->v, l->cap * sizeof *l->v);
    }
    l->v[l->n++] = s;
}

static void str_list_free(str_list *l)
{
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* ---- settings ---------------------------------------------------------------------------- */

static int resolve_count(int64_t v, int64_t dflt, const char *key, size_t *out, esp_err *err)
{
    if (v < 0) return esp_fail(err, "create_dataset.%s: must be > 0 (got %lld)", key, (long long)v);
    *out = (size_t)(v ? v : dflt);
    return 0;
}

static int resolve_range(const int64_t *v, unsigned n, int dlo, int dhi, int min, int max, const char *key,
                         const char *unit, int out[2], esp_err *err)
{
    if (n == 0) {
        out[0] = dlo, out[1] = dhi;
        return 0;
    }
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

static int resolve_settings(const create_dataset_cfg *c, const char *data_dir, settings *s, esp_err *err)
{
    memset(s, 0, sizeof *s);
    s->synthesizer = c->synthesizer ? c->synthesizer : DEFAULT_SYNTHESIZER;
    if (synth_engine_parse(s->synthesizer, &s->engine, err) != 0)
        return esp_fail(err, "create_dataset.synthesizer: %s is not supported (use espeak-ng or flite)",
                        s->synthesizer);
    s->text_source = c->text_source ? c->text_source : DEFAULT_TEXT_SOURCE;
    /* Manifests hold absolute wav paths so later stages work from any directory. */
    char *abs = path_absolute(c->dataset_dir ? c->dataset_dir : data_dir);
    s->dataset_dir = intern(abs);
    free(abs);
    s->seed = (uint64_t)c->seed;
    if (resolve_count(c->num_train, DEFAULT_NUM_TRAIN, "num_train", &s->num[SPLIT_TRAIN], err) != 0 ||
        resolve_count(c->num_valid, DEFAULT_NUM_VALID, "num_valid", &s->num[SPLIT_VALID], err) != 0 ||
        resolve_count(c->num_test, DEFAULT_NUM_TEST, "num_test", &s->num[SPLIT_TEST], err) != 0)
        return -1;

    if (check_names(c->train_voices, c->n_train_voices, "train_voices", err) != 0 ||
        check_names(c->test_voices, c->n_test_voices, "test_voices", err) != 0 ||
        check_names(c->train_variants, c->n_train_variants, "train_variants", err) != 0 ||
        check_names(c->test_variants, c->n_test_variants, "test_variants", err) != 0)
        return -1;
    s->voices[0] = c->n_train_voices ? (const char *const *)c->train_voices : default_train_voices;
    s->n_voices[0] = c->n_train_voices ? c->n_train_voices : sizeof default_train_voices / sizeof(char *);
    s->voices[1] = c->n_test_voices ? (const char *const *)c->test_voices : default_test_voices;
    s->n_voices[1] = c->n_test_voices ? c->n_test_voices : sizeof default_test_voices / sizeof(char *);
    s->variants[0] = (const char *const *)c->train_variants;
    s->n_variants[0] = c->n_train_variants;
    s->variants[1] = (const char *const *)c->test_variants;
    s->n_variants[1] = c->n_test_variants;
    for (size_t i = 0; i < s->n_voices[1]; i++)
        for (size_t j = 0; j < s->n_voices[0]; j++)
            if (strcmp(s->voices[1][i], s->voices[0][j]) == 0)
                return esp_fail(err,
                                "create_dataset.test_voices: %s is also in create_dataset.train_voices "
                                "(test voices must be unseen in training; remove it from one list)",
                                s->voices[1][i]);

    /* espeak-ng clamps -s to 80..450 and -p to 0..99; refuse values it would silently change. */
    int speed_min = s->engine == SYNTH_ESPEAK_NG ? 80 : 1, speed_max = s->engine == SYNTH_ESPEAK_NG ? 450 : 1000;
    if (resolve_range(c->speed_range, c->n_speed_range, DEFAULT_SPEED_LO, DEFAULT_SPEED_HI, speed_min, speed_max,
                      "speed_range", "words per minute", s->speed, err) != 0 ||
        resolve_range(c->pitch_range, c->n_pitch_range, DEFAULT_PITCH_LO, DEFAULT_PITCH_HI, 0, 99, "pitch_range",
                      "(espeak-ng pitch)", s->pitch, err) != 0)
        return -1;

    if (c->min_words < 0 || c->max_words < 0)
        return esp_fail(err, "create_dataset.%s: must be > 0", c->min_words < 0 ? "min_words" : "max_words");
    s->min_words = c->min_words ? (int)c->min_words : DEFAULT_MIN_WORDS;
    s->max_words = c->max_words ? (int)c->max_words : DEFAULT_MAX_WORDS;
    if (s->min_words > s->max_words)
        return esp_fail(err, "create_dataset.min_words: %d is above create_dataset.max_words %d (lower min_words "
                        "or raise max_words)", s->min_words, s->max_words);
    if (c->fs < 0 || (c->fs && (c->fs < 1000 || c->fs > 192000)))
        return esp_fail(err, "create_dataset.fs: %lld Hz is not a usable sample rate (use e.g. 16000)",
                        (long long)c->fs);
    s->fs = c->fs ? (int)c->fs : DEFAULT_FS;
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
    append_list(&t, "train_voices", s->voices[0], s->n_voices[0]);
    append_list(&t, "test_voices", s->voices[1], s->n_voices[1]);
    append_list(&t, "train_variants", s->variants[0], s->n_variants[0]);
    append_list(&t, "test_variants", s->variants[1], s->n_variants[1]);
    char *with_hash = xasprintf("%shash: %016llx\n", t, (unsigned long long)fnv1a64_str(t));
    free(t);
    return with_hash;
}

/* 1 when the stamp matches and every manifest is there. */
static int is_built(const char *manifest_dir, const char *stamp_path, const char *expected)
{
    esp_err ignored;
    char *have = path_exists(stamp_path) ? read_file(stamp_path, NULL, &ignored) : NULL;
    int same = have && strcmp(have, expected) == 0;
    if (have && !same) log_info("create_dataset: arguments changed since %s was written; rebuilding", stamp_path);
    free(have);
    for (int k = 0; same && k < SPLIT_COUNT; k++) {
        char *name = xasprintf("%s.tsv", split_names[k]);
        char *p = path_join(manifest_dir, name);
        same = path_exists(p);
        free(p);
        free(name);
    }
    return same;
}

/* ---- sentences --------------------------------------------------------------------------- */

/* Words ending in '.' that do not end a sentence; sentences holding them are dropped, since a
 * synthesizer expands them ("Dr." -> doctor) and the transcript would not match. */
static int is_abbreviation(const char *word, size_t len)
{
    static const char *const abbrev[] = {"mr", "mrs", "ms", "dr", "st", "jr", "sr", "vs", "etc", "prof",
                                         "gen", "col", "lt", "sgt", "capt", "mt", "inc", "ltd", "co",
                                         "rev", "gov", "sen", "rep", "ave", "dept", "univ", "approx",
                                         "fig", "vol", "ed", "esp", "corp", "jan", "feb", "mar", "apr",
                                         "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec"};
    if (len == 1) return 1; /* initials: "J. R. R. Tolkien", "e.g." */
    for (size_t i = 0; i < sizeof abbrev / sizeof abbrev[0]; i++)
        if (strlen(abbrev[i]) == len && strncasecmp(word, abbrev[i], len) == 0) return 1;
    return 0;
}

static void keep_sentence(const char *start, size_t len, int has_abbrev, const settings *s, str_list *out)
{
    if (has_abbrev) return;
    char *raw = xstrndup(start, len);
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

/* Splits one fortune (lines joined by spaces, attribution lines "-- Author" dropped) into
 * sentences ending in . ! or ? (closing quotes and brackets included). */
static void split_fortune(const char *fortune, size_t len, const settings *s, str_list *out)
{
    char *joined = xmalloc(len + 2);
    size_t j = 0;
    for (size_t i = 0; i < len;) {
        size_t eol = i;
        while (eol < len && fortune[eol] != '\n') eol++;
        size_t k = i;
        while (k < eol && isspace((unsigned char)fortune[k])) k++;
        int attribution = eol - k >= 2 && fortune[k] == '-' && fortune[k + 1] == '-';
        if (!attribution) {
            memcpy(joined + j, fortune + i, eol - i);
            j += eol - i;
            joined[j++] = ' ';
        }
        i = eol + 1;
    }
    joined[j] = '\0';

    size_t start = 0;
    int has_abbrev = 0;
    for (size_t i = 0; i < j; i++) {
        char c = joined[i];
        if (c != '.' && c != '!' && c != '?') continue;
        size_t end = i + 1;
        while (end < j && strchr("\"')]", joined[end])) end++;
        if (end < j && !isspace((unsigned char)joined[end])) continue;
        if (c == '.') {
            size_t w = i;
            while (w > start && isalpha((unsigned char)joined[w - 1])) w--;
            if (i > w && is_abbreviation(joined + w, i - w)) {
                has_abbrev = 1;
                continue;
            }
        }
        keep_sentence(joined + start, end - start, has_abbrev, s, out);
        start = end;
        has_abbrev = 0;
        i = end > i ? end - 1 : i;
    }
    if (start < j) keep_sentence(joined + start, j - start, has_abbrev, s, out);
    free(joined);
}

/* A fortune file: fortunes separated by lines holding a single '%'. */
static void split_fortune_file(const char *text, const settings *s, str_list *out)
{
    const char *fortune = text;
    for (const char *p = text;; p++) {
        int at_line_start = p == text || p[-1] == '\n';
        int separator = at_line_start && p[0] == '%' && (p[1] == '\n' || p[1] == '\0');
        if (separator || *p == '\0') {
            split_fortune(fortune, (size_t)(p - fortune), s, out);
            if (*p == '\0' || p[1] == '\0') break;
            fortune = p + 2;
            p++;
        }
    }
}

/* Fortune files of a directory (sorted; *.dat / *.u8 indexes, hidden files and subdirectories
 * such as the offensive `off/` skipped), or the one file given. */
static int list_text_files(const char *source, str_list *files, esp_err *err)
{
    if (!is_dir(source)) {
        if (path_exists(source)) {
            str_list_push(files, xstrdup(source));
            return 0;
        }
        return esp_fail(err, "create_dataset.text_source: %s does not exist (install the Debian package "
                        "fortunes, or point text_source at a directory of fortune files)", source);
    }
    DIR *d = opendir(source);
    if (!d) return esp_fail(err, "create_dataset.text_source: %s: %s", source, strerror(errno));
    for (struct dirent *e; (e = readdir(d));) {
        const char *name = e->d_name;
        size_t n = strlen(name);
        if (name[0] == '.' || (n > 4 && strcmp(name + n - 4, ".dat") == 0) ||
            (n > 3 && strcmp(name + n - 3, ".u8") == 0))
            continue;
        char *path = path_join(source, name);
        struct stat st;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) str_list_push(files, path);
        else free(path);
    }
    closedir(d);
    if (files->n == 0)
        return esp_fail(err, "create_dataset.text_source: %s holds no fortune files (install the Debian "
                        "package fortunes)", source);
    qsort(files->v, files->n, sizeof *files->v, cmp_str);
    return 0;
}

/* Distinct normalized sentences with min_words..max_words words, sorted. */
static int collect_sentences(const settings *s, str_list *out, esp_err *err)
{
    str_list files = {0};
    if (list_text_files(s->text_source, &files, err) != 0) {
        str_list_free(&files);
        return -1;
    }
    for (size_t i = 0; i < files.n; i++) {
        char *text = read_file(files.v[i], NULL, err);
        if (!text) {
            str_list_free(&files);
            return -1;
        }
        split_fortune_file(text, s, out);
        free(text);
    }
    str_list_free(&files);
    if (out->n) qsort(out->v, out->n, sizeof *out->v, cmp_str);
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
static char *speaker_id(const char *voice, const char *variant)
{
    char *id = variant ? xasprintf("%s_%s", voice, variant) : xstrdup(voice);
    for (char *p = id; *p; p++) *p = isalnum((unsigned char)*p) ? (char)tolower((unsigned char)*p) : '_';
    return id;
}

static void plan_utterance(const settings *s, enum split_id split, size_t index, const char *text,
                           utterance *u)
{
    int side = split == SPLIT_TEST;
    rng r;
    rng_init(&r, rng_derive(s->seed, STREAM_UTTERANCE_BASE + (uint64_t)split, index));
    const char *voice = s->voices[side][rng_uniform_int(&r, 0, (int64_t)s->n_voices[side] - 1)];
    const char *variant =
        s->n_variants[side] ? s->variants[side][rng_uniform_int(&r, 0, (int64_t)s->n_variants[side] - 1)] : NULL;
    u->split = split;
    u->speed = (int)rng_uniform_int(&r, s->speed[0], s->speed[1]);
    u->pitch = (int)rng_uniform_int(&r, s->pitch[0], s->pitch[1]);
    u->voice = variant ? xasprintf("%s+%s", voice, variant) : xstrdup(voice);
    u->spk = speaker_id(voice, variant);
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
        if (synth_to_wav(s->engine, &p, s->fs, u[i].wav, &e) != 0) {
            char msg[PIPE_BUF];
            int len = snprintf(msg, sizeof msg, "%ccreate_dataset: utterance %s: %s", REPORT_ERROR, u[i].utt, e.msg);
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
    if (synth_check_installed(s->engine, err) != 0) return -1;
    str_list sentences = {0};
    if (collect_sentences(s, &sentences, err) != 0) {
        str_list_free(&sentences);
        return -1;
    }
    size_t need = s->num[SPLIT_TRAIN] + s->num[SPLIT_VALID] + s->num[SPLIT_TEST];
    if (sentences.n < need) {
        int rc = esp_fail(err, "create_dataset: %zu distinct sentences needed (num_train %zu + num_valid %zu + "
                          "num_test %zu) but %s has only %zu with %d..%d words (lower create_dataset.num_train, "
                          "num_valid or num_test, or widen create_dataset.min_words/max_words)",
                          need, s->num[SPLIT_TRAIN], s->num[SPLIT_VALID], s->num[SPLIT_TEST], s->text_source,
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
        char *dir = xasprintf("%s/wav/%s", s->dataset_dir, split_names[split]);
        rc = mkdir_p(dir, err);
        free(dir);
    }
    if (rc == 0) {
        log_info("create_dataset: synthesizing %zu utterances (train %zu, valid %zu, test %zu) with %s, nj=%d",
                 need, s->num[SPLIT_TRAIN], s->num[SPLIT_VALID], s->num[SPLIT_TEST], s->synthesizer, s->nj);
        rc = synthesize_all(s, u, need, err);
    }
    for (int split = 0; split < SPLIT_COUNT && rc == 0; split++)
        rc = write_split(data_dir, manifest_dir, u, need, (enum split_id)split, err);
    if (rc == 0) rc = atomic_write_file(stamp_path, stamp, strlen(stamp), err);
    if (rc == 0)
        log_info("create_dataset: wrote %s/{train,valid,test}.tsv and Kaldi dirs under %s", manifest_dir, data_dir);
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
    if (is_built(manifest_dir, stamp_path, stamp)) {
        log_info("create_dataset: %s is already built with these arguments (%s); skipping", data_dir, stamp_path);
    } else {
        rc = mkdir_p(manifest_dir, err);
        if (rc == 0) rc = build(&s, data_dir, manifest_dir, stamp_path, stamp, err);
    }
    free(stamp);
    free(stamp_path);
    free(manifest_dir);
    return rc;
}
