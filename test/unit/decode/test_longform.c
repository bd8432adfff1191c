/* Long-form decoding end to end on a real model: the synthesized-speech fixture
 * (test/fixtures/synth_model) on a recording made of its 16 utterances, decoded in windows of a few
 * seconds, against the same recording cut into the windows' pieces and decoded piece by piece.
 * The fixture is a weak recognizer whose words change with what else a window holds (valid WER
 * 75%), so the pieces are cut where the windows lie: each piece then hears exactly what its window
 * heard, and the merged words must be the pieces' words, each from one piece, none twice, none of a
 * piece's own stretch lost, and a word cut by a window's end taken from the next piece, which
 * heard it whole (found with espeak-ng's own word times, speech/word_times). The same recording
 * through `espnet3 transcribe` (a file read in blocks) gives the same words as a CTM on the
 * recording's clock, through a pipe to `espnet3 transcribe -` (read in blocks as the file is) the
 * same CTM, and through stage 6 as a long item of a manifest (hyp.scp, hyp.ctm). Peak memory does
 * not grow with the recording's length, from a file or a pipe (the goal: flat within 10%). */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/base/fsio.h"
#include "core/data/audio.h"
#include "include/espnet3.h"
#include "test/unit/test_util.h"

#define FS 16000
#define WINDOW 4.0
#define OVERLAP 1.5
#define GAP 0.35 /* seconds of silence between utterances: short, so words straddle window edges */

static char dir[64];
static void setup(void) { test_tmpdir_make(dir, sizeof dir, "longform"); }
static void teardown(void) { test_tmpdir_remove(dir); }
TestSuite(longform, .init = setup, .fini = teardown);

/* The recording: the fixture's utterances with GAP between them, padded with silence to a whole
 * number of hops after the first window (so every piece is a whole window); the utterances'
 * offsets in seconds. */
typedef struct recording {
    float *x;
    size_t n;
    double offset[64];
    char utt[64][64];
    int n_utt;
} recording;

static void make_recording(const char *fx, recording *r)
{
    char *list = xasprintf("%s/speech/wav.scp", fx);
    FILE *fp = fopen(list, "r");
    cr_assert_not_null(fp, "%s", list);
    size_t gap = (size_t)(GAP * FS), hop = (size_t)((WINDOW - OVERLAP) * FS), win = (size_t)(WINDOW * FS);
    char utt[64], file[256];
    *r = (recording){.x = xmalloc(1)};
    while (fscanf(fp, "%63s %255s", utt, file) == 2 && r->n_utt < 64) {
        char *path = xasprintf("%s/speech/%s", fx, file);
        float *s;
        size_t n;
        esp_err err;
        cr_assert_eq(audio_read(path, FS, "fs", &s, &n, &err), 0, "%s", err.msg);
        r->x = xrealloc(r->x, (r->n + n + gap) * sizeof *r->x);
        r->offset[r->n_utt] = (double)r->n / FS;
        snprintf(r->utt[r->n_utt++], sizeof r->utt[0], "%s", utt);
        memcpy(r->x + r->n, s, n * sizeof *s);
        memset(r->x + r->n + n, 0, gap * sizeof *s);
        r->n += n + gap;
        free(s), free(path);
    }
    fclose(fp);
    free(list);
    size_t total = win + (r->n > win ? (r->n - win + hop - 1) / hop * hop : 0);
    r->x = xrealloc(r->x, total * sizeof *r->x);
    memset(r->x + r->n, 0, (total - r->n) * sizeof *r->x);
    r->n = total;
}

/* The recording as 16-bit PCM: the fixture's FLACs are 16-bit, so the file reads back the same
 * samples. */
static char *write_recording(const recording *r, const char *name)
{
    char *path = xstrdup(test_path(dir, name));
    SF_INFO info = {.samplerate = FS, .channels = 1, .format = SF_FORMAT_WAV | SF_FORMAT_PCM_16};
    SNDFILE *sf = sf_open(path, SFM_WRITE, &info);
    cr_assert_not_null(sf);
    short *s = xmalloc(r->n * sizeof *s);
    for (size_t i = 0; i < r->n; i++) s[i] = (short)lrintf(r->x[i] * 32768.0f);
    cr_assert_eq(sf_write_short(sf, s, (sf_count_t)r->n), (sf_count_t)r->n);
    sf_close(sf);
    free(s);
    return path;
}

typedef struct word {
    char text[64];
    double start, end;
} word;

typedef struct words {
    word w[512];
    int n;
} words;

/* The best hypothesis's words of r, shifted by t0 seconds. */
static void get_words(const espnet3_result *r, double t0, words *out)
{
    out->n = 0;
    cr_assert_not_null(r, "%s", espnet3_last_error());
    for (size_t i = 0; i < espnet3_result_words(r, 0) && out->n < 512; i++) {
        espnet3_item it;
        cr_assert_eq(espnet3_result_word(r, 0, i, &it), 0);
        word *w = &out->w[out->n++];
        snprintf(w->text, sizeof w->text, "%s", it.text);
        w->start = t0 + it.start, w->end = t0 + it.end;
    }
}

static int same_word(const word *a, const word *b)
{
    return !strcmp(a->text, b->text) && fabs(a->start - b->start) < 1e-6 && fabs(a->end - b->end) < 1e-6;
}

static int find_word(const words *ws, const word *w)
{
    for (int i = 0; i < ws->n; i++)
        if (same_word(&ws->w[i], w)) return i;
    return -1;
}

static int overlaps(const word *w, double s, double e) { return w->start < e && w->end > s; }

static espnet3_model *open_model(const char *fx)
{
    espnet3_options *o = espnet3_options_new();
    char v[32];
    snprintf(v, sizeof v, "%g", WINDOW), espnet3_options_set(o, "longform_window", v);
    snprintf(v, sizeof v, "%g", OVERLAP), espnet3_options_set(o, "longform_overlap", v);
    /* above a window: the pieces decode whole, the recording in windows */
    cr_assert_eq(espnet3_options_set(o, "longform_threshold", "5"), 0);
    espnet3_model *m = espnet3_open(fx, o);
    espnet3_options_free(o);
    cr_assert_not_null(m, "%s", espnet3_last_error());
    return m;
}

/* espeak-ng's words on the recording's clock (speech/word_times: utt index start end WORD). */
static void truth_words(const char *fx, const recording *r, words *out)
{
    char *p = xasprintf("%s/speech/word_times", fx);
    FILE *fp = fopen(p, "r");
    cr_assert_not_null(fp, "%s", p);
    char utt[64], text[64];
    int idx;
    double s, e;
    out->n = 0;
    while (fscanf(fp, "%63s %d %lf %lf %63s", utt, &idx, &s, &e, text) == 5 && out->n < 512) {
        int u = 0;
        while (u < r->n_utt && strcmp(r->utt[u], utt)) u++;
        cr_assert_lt(u, r->n_utt, "%s", utt);
        out->w[out->n++] = (word){.start = r->offset[u] + s, .end = r->offset[u] + e};
        snprintf(out->w[out->n - 1].text, sizeof out->w[0].text, "%s", text);
    }
    fclose(fp);
    free(p);
}

/* The words the merge must keep and the ones it must take from a later piece, checked against the
 * pieces; returns the number of window ends inside a word that were checked. */
static int check_against_pieces(const words *lf, const words *pieces, int n_pieces, const words *truth)
{
    double hop = WINDOW - OVERLAP;
    /* each merged word is a piece's word, in time order, none overlapping the next */
    for (int i = 0; i < lf->n; i++) {
        int found = 0;
        for (int k = 0; k < n_pieces && !found; k++) found = find_word(&pieces[k], &lf->w[i]) >= 0;
        cr_expect(found, "merged word %d '%s' [%.3f, %.3f] is no piece's", i, lf->w[i].text, lf->w[i].start,
                  lf->w[i].end);
        if (i > 0)
            cr_expect(lf->w[i].start >= lf->w[i - 1].end - 1e-9, "words %d '%s' and %d '%s' overlap: one heard twice",
                      i - 1, lf->w[i - 1].text, i, lf->w[i].text);
    }
    for (int k = 0; k < n_pieces; k++) {
        double t0 = k * hop, t1 = t0 + WINDOW;
        double own0 = k > 0 ? t0 + OVERLAP : 0, own1 = k < n_pieces - 1 ? t1 - OVERLAP : t1;
        for (int j = 0; j < pieces[k].n; j++) {
            const word *w = &pieces[k].w[j];
            if (w->start >= own0 && w->end <= own1) /* only this piece heard it: it must be kept */
                cr_expect(find_word(lf, w) >= 0, "piece %d's word '%s' [%.3f, %.3f] is lost", k, w->text, w->start,
                          w->end);
        }
    }
    /* A word that a window's end cuts (by espeak-ng's times): the merged words there are the next
     * piece's, which heard it whole. */
    int checked = 0;
    for (int k = 0; k + 1 < n_pieces; k++) {
        double edge = k * hop + WINDOW;
        for (int t = 0; t < truth->n; t++) {
            const word *tw = &truth->w[t];
            if (!(tw->start + 0.05 < edge && edge < tw->end - 0.05)) continue;
            int heard = 0;
            for (int j = 0; j < pieces[k + 1].n; j++) heard |= overlaps(&pieces[k + 1].w[j], tw->start, tw->end);
            if (!heard) continue;
            checked++;
            for (int i = 0; i < lf->n; i++) {
                if (!overlaps(&lf->w[i], edge - 1e-3, edge + 1e-3)) continue;
                cr_expect(find_word(&pieces[k + 1], &lf->w[i]) >= 0,
                          "'%s' straddles the end of window %d at %.2f s: merged '%s' [%.3f, %.3f] is not the next "
                          "window's", tw->text, k, edge, lf->w[i].text, lf->w[i].start, lf->w[i].end);
            }
        }
    }
    return checked;
}

Test(longform, windows_give_their_pieces_words_once, .timeout = 300)
{
    char *fx = path_join(test_root_dir(), "test/fixtures/synth_model");
    recording r;
    make_recording(fx, &r);
    double hop = WINDOW - OVERLAP;
    int n_pieces = (int)llround(((double)r.n / FS - WINDOW) / hop) + 1;
    cr_assert_gt(n_pieces, 10, "a recording of %d windows", n_pieces);
    espnet3_model *m = open_model(fx);
    words *lf = xcalloc(1, sizeof *lf), *pieces = xcalloc((size_t)n_pieces, sizeof *pieces),
          *truth = xcalloc(1, sizeof *truth);
    espnet3_result *res = espnet3_transcribe(m, r.x, r.n, FS);
    get_words(res, 0, lf);
    cr_expect_eq(espnet3_result_count(res), 1, "long-form finds the best hypothesis only");
    cr_expect_float_eq(espnet3_result_duration(res), (double)r.n / FS, 1e-9);
    espnet3_result_free(res);
    for (int k = 0; k < n_pieces; k++) {
        size_t a = (size_t)llround(k * hop * FS), len = (size_t)llround(WINDOW * FS);
        espnet3_result *p = espnet3_transcribe(m, r.x + a, len, FS);
        get_words(p, k * hop, &pieces[k]);
        espnet3_result_free(p);
    }
    truth_words(fx, &r, truth);
    cr_assert_gt(lf->n, 50, "%d words merged", lf->n);
    int straddling = check_against_pieces(lf, pieces, n_pieces, truth);
    cr_expect_geq(straddling, 3, "only %d words straddle a window's end", straddling);

    /* espnet3 transcribe on the recording as a file: its CTM is the merged words, on its clock */
    char *wav = write_recording(&r, "long.wav"), *ctm_path = xstrdup(test_path(dir, "long.ctm"));
    cr_assert_eq(test_sh("%s transcribe -q -o ctm --longform_threshold 5 --longform_window %g --longform_overlap %g "
                         "%s %s >%s", test_bin_path(), WINDOW, OVERLAP, fx, wav, ctm_path), 0);
    char *ctm = test_slurp(ctm_path);
    int i = 0;
    for (char *line = strtok(ctm, "\n"); line; line = strtok(NULL, "\n"), i++) {
        char rec[64], text[64];
        int ch;
        double st, du, conf;
        cr_assert_eq(sscanf(line, "%63s %d %lf %lf %63s %lf", rec, &ch, &st, &du, text, &conf), 6, "%s", line);
        cr_assert_lt(i, lf->n, "more CTM lines than merged words: %s", line);
        cr_expect_str_eq(rec, "long");
        cr_expect_str_eq(text, lf->w[i].text, "CTM line %d", i);
        cr_expect(fabs(st - lf->w[i].start) < 6e-4, "CTM line %d starts at %.3f, the word at %.4f", i, st,
                  lf->w[i].start);
    }
    cr_expect_eq(i, lf->n, "%d CTM lines, %d merged words", i, lf->n);
    free(ctm), free(ctm_path), free(wav);
    espnet3_close(m);
    free(lf), free(pieces), free(truth), free(r.x), free(fx);
}

/* Stage 6 with the recording as one item of a manifest (a long recording with no segments): its
 * line of hyp.scp is the merged words, and write_ctm's hyp.ctm times them on its clock. */
Test(longform, stage6_decodes_a_long_item_in_windows, .timeout = 300)
{
    char *fx = path_join(test_root_dir(), "test/fixtures/synth_model");
    recording r;
    make_recording(fx, &r);
    char *wav = write_recording(&r, "long.wav");
    espnet3_model *m = open_model(fx);
    words *lf = xcalloc(1, sizeof *lf);
    espnet3_result *res = espnet3_transcribe(m, r.x, r.n, FS);
    get_words(res, 0, lf);
    espnet3_result_free(res);
    espnet3_close(m);
    char *tsv = xasprintf("long\t%s\tANY TEXT\n", wav);
    test_write_text_mkdirs(test_path(dir, "data/manifest/long.tsv"), tsv);
    cr_assert_eq(test_sh("cd %s && %s -q --inference_config %s/conf/inference.yaml data_dir=%s/data inference_dir=%s/inf "
                         "'test_sets=[long]' longform.window=%g longform.overlap=%g longform.threshold=5 "
                         "write_ctm=true --stages infer", dir, test_bin_path(), fx, dir, dir, WINDOW, OVERLAP),
                 0);
    char *want = xstrdup("long");
    for (int i = 0; i < lf->n; i++) {
        char *t = xasprintf("%s %s", want, lf->w[i].text);
        free(want);
        want = t;
    }
    char *scp = test_slurp(test_path(dir, "inf/long/hyp.scp"));
    scp[strcspn(scp, "\n")] = 0;
    cr_expect_str_eq(scp, want);
    char *ctm = test_slurp(test_path(dir, "inf/long/hyp.ctm"));
    int i = 0;
    for (char *line = strtok(ctm, "\n"); line; line = strtok(NULL, "\n"), i++) {
        char rec[64], text[64];
        int ch;
        double st, du, conf;
        cr_assert_eq(sscanf(line, "%63s %d %lf %lf %63s %lf", rec, &ch, &st, &du, text, &conf), 6, "%s", line);
        cr_assert_lt(i, lf->n, "more CTM lines than merged words: %s", line);
        cr_expect_str_eq(text, lf->w[i].text, "CTM line %d", i);
        cr_expect(fabs(st - lf->w[i].start) < 6e-4, "CTM line %d starts at %.3f, the word at %.4f", i, st,
                  lf->w[i].start);
    }
    cr_expect_eq(i, lf->n, "%d CTM lines, %d merged words", i, lf->n);
    free(ctm), free(scp), free(want), free(tsv), free(wav), free(lf), free(r.x), free(fx);
}

/* Peak RSS (KB) of `espnet3 transcribe -o ctm` on wav in windows of 2 s (the process's own, from
 * wait4), its CTM in out (NULL: none). piped: wav goes to its standard input through a pipe, as
 * `cat wav | espnet3 transcribe MODEL -` sends it, written here as the process reads it. */
static long transcribe_rss(const char *model, const char *wav, int piped, const char *out)
{
    int p[2] = {-1, -1};
    cr_assert(!piped || pipe(p) == 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int fd = open(out ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 1);
        if (piped) dup2(p[0], 0), close(p[0]), close(p[1]);
        execl(test_bin_path(), test_bin_path(), "transcribe", "-q", "-o", "ctm", "--longform_threshold", "0",
              "--longform_window", "2", "--longform_overlap", "0.5", model, piped ? "-" : wav, (char *)NULL);
        _exit(127);
    }
    if (piped) {
        close(p[0]);
        signal(SIGPIPE, SIG_IGN); /* a reader that stops early is its exit status's to report */
        FILE *fp = fopen(wav, "rb");
        cr_assert_not_null(fp, "%s", wav);
        char buf[1 << 16];
        size_t k;
        while ((k = fread(buf, 1, sizeof buf, fp)) > 0)
            if (write(p[1], buf, k) != (ssize_t)k) break;
        fclose(fp);
        close(p[1]);
    }
    int status;
    struct rusage ru;
    cr_assert_eq(wait4(pid, &status, 0, &ru), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "transcribe %s%s: status %d", piped ? "- <" : "", wav,
              status);
    return ru.ru_maxrss;
}

/* The recording and the same twice over, in windows of 2 s: the second's peak RSS within 10% of
 * the first's (decoded whole, the second would take about 3 times the memory: its attention). */
Test(longform, peak_memory_does_not_grow_with_the_length, .timeout = 300)
{
    test_skip_under_sanitizer("peak RSS under ASan counts its shadow memory and quarantine of freed blocks, not the "
                              "decoder's; the windows' code runs under ASan in longform/"
                              "windows_give_their_pieces_words_once");
    char *fx = path_join(test_root_dir(), "test/fixtures/synth_model");
    recording r;
    make_recording(fx, &r);
    char *one = write_recording(&r, "x1.wav");
    r.x = xrealloc(r.x, 2 * r.n * sizeof *r.x);
    memcpy(r.x + r.n, r.x, r.n * sizeof *r.x);
    r.n *= 2;
    char *two = write_recording(&r, "x2.wav");
    long rss1 = transcribe_rss(fx, one, 0, NULL), rss2 = transcribe_rss(fx, two, 0, NULL);
    cr_log_info("longform: peak RSS %ld KB for %.0f s, %ld KB for %.0f s", rss1, (double)r.n / 2 / FS, rss2,
                (double)r.n / FS);
    cr_expect_leq(rss2, rss1 * 11 / 10, "peak RSS %ld KB at twice the length, %ld KB at once", rss2, rss1);
    free(one), free(two), free(r.x), free(fx);
}

/* A CTM's lines without their recording name (the file's stem, or "stdin"). */
static char *ctm_words(const char *path)
{
    char *ctm = test_slurp(path), *out = xmalloc(strlen(ctm) + 1), *o = out, *save = NULL;
    for (char *line = strtok_r(ctm, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
        o += sprintf(o, "%s\n", strchr(line, ' ') ? strchr(line, ' ') : line);
    free(ctm);
    return out;
}

/* The recording through a pipe (`cat x.wav | espnet3 transcribe MODEL -`) is read in blocks as
 * the file is: the same words at the same times; and its peak RSS at twice the length is within 10%
 * of the file's and of its own at once (read whole first, the pipe held the recording twice over:
 * its bytes and its samples). */
Test(longform, stdin_is_read_in_blocks_as_a_file_is, .timeout = 300)
{
    char *fx = path_join(test_root_dir(), "test/fixtures/synth_model");
    recording r;
    make_recording(fx, &r);
    char *one = write_recording(&r, "x1.wav"), *file_ctm = xstrdup(test_path(dir, "file.ctm")),
         *pipe_ctm = xstrdup(test_path(dir, "pipe.ctm"));
    long file1 = transcribe_rss(fx, one, 0, file_ctm), pipe1 = transcribe_rss(fx, one, 1, pipe_ctm);
    char *want = ctm_words(file_ctm), *got = ctm_words(pipe_ctm);
    cr_expect(strlen(want) > 100, "the file's CTM:\n%s", want);
    cr_expect_str_eq(got, want, "the pipe's CTM against the file's");
    if (!test_sanitized()) { /* ASan's shadow and quarantine are not the decoder's memory */
        r.x = xrealloc(r.x, 2 * r.n * sizeof *r.x);
        memcpy(r.x + r.n, r.x, r.n * sizeof *r.x);
        r.n *= 2;
        char *two = write_recording(&r, "x2.wav");
        long file2 = transcribe_rss(fx, two, 0, NULL), pipe2 = transcribe_rss(fx, two, 1, NULL);
        cr_log_info("longform: peak RSS piped %ld KB for %.0f s, %ld KB for %.0f s (the file: %ld, %ld KB)", pipe1,
                    (double)r.n / 2 / FS, pipe2, (double)r.n / FS, file1, file2);
        cr_expect_leq(pipe2, pipe1 * 11 / 10, "piped: peak RSS %ld KB at twice the length, %ld KB at once", pipe2,
                      pipe1);
        cr_expect_leq(pipe2, file2 * 11 / 10, "peak RSS %ld KB piped, %ld KB from the file", pipe2, file2);
        free(two);
    }
    free(want), free(got), free(one), free(file_ctm), free(pipe_ctm), free(r.x), free(fx);
}
