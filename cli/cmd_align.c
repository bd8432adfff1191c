/* `espnet3 align MODEL AUDIO TEXT`: where each line of a transcript lies in a recording, as
 * ESPnet2's espnet2/bin/asr_align.py (CTCSegmentation, text_converter "tokenize", time_stamps
 * "auto") computes it: core/decode/align.h on the model's CTC log-probabilities, the recording
 * encoded in windows so any length fits in memory. Writes ESPnet's segments lines
 * (`utt_id name start end score text`, name the audio file's stem); a line scoring below
 * --min_score is named in a warning and written commented out (`;; ` before it), so no tool takes
 * its stretched times for an alignment. With --ctm, the words of every line, timed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "core/base/fsio.h"
#include "core/compute/backend.h"
#include "core/data/audio.h"
#include "core/decode/align.h"
#include "core/formats/align_text.h"
#include "core/nn/model_files.h"
#include "lib/model_source.h"

typedef struct al_args {
    const char *kaldi_style_text, *print_utt_text, *print_utt_score, *gratis_blank; /* true / false */
    long min_window_size, max_window_size, scoring_length, set_blank, threads;
    const char *min_score, *window, *output, *ctm, *device;
    int quiet, help;
} al_args;

#define AF(f) offsetof(al_args, f)
static const cli_option al_options[] = {
    {'o', "output", NULL, OPT_STRING, AF(output), "FILE", "standard output", "the segments"},
    {0, "ctm", NULL, OPT_STRING, AF(ctm), "FILE", NULL,
     "also every line's words, timed (NIST CTM: <name> 1 <start> <dur> <word> <conf>)"},
    {0, "kaldi_style_text", NULL, OPT_STRING, AF(kaldi_style_text), "BOOL", "true",
     "TEXT lines start with the utterance id; false: named <name>_0000, ..."},
    {0, "min_score", NULL, OPT_STRING, AF(min_score), "S", "-1.2",
     "a line scoring below (ESPnet's score: the lowest mean log-posterior over scoring_length frames) is "
     "reported and written commented out"},
    {0, "min_window_size", NULL, OPT_INT, AF(min_window_size), "N", "8000", "frames of the trellis' first window"},
    {0, "max_window_size", NULL, OPT_INT, AF(max_window_size), "N", "100000", "the window doubles up to it"},
    {0, "scoring_length", NULL, OPT_INT, AF(scoring_length), "N", "30", "frames per block of the score"},
    {0, "set_blank", NULL, OPT_INT, AF(set_blank), "N", "0", "the blank's id in the token list"},
    {0, "gratis_blank", NULL, OPT_STRING, AF(gratis_blank), "BOOL", "false",
     "staying on a blank costs nothing (long unrelated stretches between lines)"},
    {0, "print_utt_text", NULL, OPT_STRING, AF(print_utt_text), "BOOL", "true", "the text ends each line"},
    {0, "print_utt_score", NULL, OPT_STRING, AF(print_utt_score), "BOOL", "true", "the score before the text"},
    {0, "window", NULL, OPT_STRING, AF(window), "SECONDS", "15",
     "audio per encoder pass (memory grows with its square; frames keep a quarter of context)"},
    {0, "device", NULL, OPT_STRING, AF(device), "DEV", "cpu", "cpu, cuda or cuda:N"},
    {0, "threads", NULL, OPT_INT, AF(threads), "N", "OMP_NUM_THREADS, else 1", "CPU threads"},
    {'q', "quiet", NULL, OPT_FLAG, AF(quiet), NULL, NULL, "no progress or warnings, only errors"},
    {'h', "help", NULL, OPT_FLAG, AF(help), NULL, NULL, "show this help"},
};
static const cli_table al_table = {al_options, sizeof al_options / sizeof *al_options, "espnet3 align",
                                   "MODEL AUDIO TEXT"};

static void help(void)
{
    cli_table_usage(&al_table, stdout);
    printf("\nAligns a transcript to a recording as ESPnet2's asr_align.py does (CTC segmentation): MODEL a\n"
           "pack folder or zip (stage 8), an ESPnet2 packed zip or an experiment folder with a CTC branch;\n"
           "AUDIO any length (resampled to the model's rate); TEXT one utterance per line, in spoken order.\n"
           "Writes `utt_id name start end score text` lines (name: AUDIO's stem).\n\nOptions:\n");
    cli_table_options(&al_table, stdout);
}

static int usage_error(const char *msg)
{
    fprintf(stderr, "espnet3: error: %s\n", msg);
    cli_table_usage(&al_table, stderr);
    return 2;
}

/* ESPnet's str2bool: true / false (any case); NULL keeps def. */
static int to_bool(const char *opt, const char *v, int def, int *out)
{
    if (!v) return *out = def, 0;
    if (!strcasecmp(v, "true")) return *out = 1, 0;
    if (!strcasecmp(v, "false")) return *out = 0, 0;
    char msg[256];
    snprintf(msg, sizeof msg, "--%s '%s': use true or false", opt, v);
    return usage_error(msg);
}

static int to_double(const char *opt, const char *v, double def, double lo, double *out)
{
    char *end;
    if (!v) return *out = def, 0;
    *out = strtod(v, &end);
    if (*v && !*end && isfinite(*out) && *out >= lo) return 0;
    char msg[256];
    snprintf(msg, sizeof msg, "--%s '%s': use a number%s", opt, v, lo > -HUGE_VAL ? " above 0" : "");
    return usage_error(msg);
}

/* The options into align_opts and the output flags; 0, or the exit status of a usage error. */
static int settings(const al_args *a, align_opts *o, int *kaldi, int *print_text, int *print_score)
{
    *o = (align_opts){.seg = CTCSEG_OPTS_DEFAULT};
    int rc = to_bool("kaldi_style_text", a->kaldi_style_text, 1, kaldi);
    if (!rc) rc = to_bool("print_utt_text", a->print_utt_text, 1, print_text);
    if (!rc) rc = to_bool("print_utt_score", a->print_utt_score, 1, print_score);
    if (!rc) rc = to_bool("gratis_blank", a->gratis_blank, 0, &o->seg.gratis_blank);
    if (!rc) rc = to_double("min_score", a->min_score, -1.2, -HUGE_VAL, &o->min_score);
    if (!rc) rc = to_double("window", a->window, 15, 0.5, &o->window_s);
    if (rc) return rc;
    if (a->min_window_size) o->seg.min_window_size = (int)a->min_window_size;
    if (a->max_window_size) o->seg.max_window_size = (int)a->max_window_size;
    if (a->scoring_length) o->seg.scoring_length = (int)a->scoring_length;
    o->seg.blank = (int)a->set_blank;
    o->words = a->ctm != NULL;
    return 0;
}

/* "cpu", "cuda" or "cuda:N". */
static int parse_device(const char *v, backend_kind *kind, int *dev, esp_err *err)
{
    char name[16];
    size_t n = strcspn(v, ":");
    char *end = NULL;
    long d = v[n] ? strtol(v + n + 1, &end, 10) : 0;
    snprintf(name, sizeof name, "%.*s", (int)(n < 15 ? n : 15), v);
    if (n >= sizeof name || (v[n] && (!v[n + 1] || *end || d < 0 || d > 64)) || backend_kind_parse(name, kind, err) != 0)
        return esp_fail(err, "--device '%s': use cpu, cuda or cuda:N", v);
    *dev = (int)d;
    return 0;
}

/* AUDIO's stem (pathlib's Path.stem), as asr_align.py names the recording. */
static char *stem(const char *path)
{
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path, *dot = strrchr(base, '.');
    int n = dot && dot != base ? (int)(dot - base) : (int)strlen(base);
    return xasprintf("%.*s", n, base);
}

/* The segments (and the CTM) of an aligned transcript, each atomically (or to stdout). */
static int write_outputs(const al_args *a, const align_text *t, const align_result *r, const char *name,
                         const align_opts *o, int print_text, int print_score, esp_err *err)
{
    atomic_file af, cf;
    FILE *fp = stdout;
    if (a->output && strcmp(a->output, "-")) {
        if (atomic_open(&af, a->output, err) != 0) return -1;
        fp = af.fp;
    }
    for (size_t i = 0; i < t->n; i++) {
        char *line = ctcseg_line(t->ids[i], name, &r[i].seg, print_score, print_text ? t->texts[i] : NULL);
        if (r[i].low && !a->quiet)
            fprintf(stderr, "espnet3: warning: %s: line %ld (%s) scores %.4f, below --min_score %g: the text "
                    "likely does not match the audio there (written commented out)\n", a->output ? a->output : "align",
                    t->lines[i], t->ids[i], r[i].seg.score, o->min_score);
        fprintf(fp, "%s%s", r[i].low ? ";; " : "", line);
        free(line);
    }
    int rc = fp == stdout ? (fflush(stdout) ? esp_fail(err, "standard output: write failed") : 0) : atomic_commit(&af, err);
    if (rc != 0 || !a->ctm) return rc;
    if (atomic_open(&cf, a->ctm, err) != 0) return -1;
    for (size_t i = 0; i < t->n; i++)
        for (size_t k = 0; k < r[i].n_words; k++) {
            const s2t_word *w = &r[i].words[k];
            if (!isfinite(w->start)) continue;
            double conf = exp(w->score);
            fprintf(cf.fp, "%s 1 %.3f %.3f %s %.4f\n", name, w->start, w->end - w->start, w->text, conf > 1 ? 1 : conf);
        }
    return atomic_commit(&cf, err);
}

/* Model, audio and transcript in, outputs out; errors are one line naming their file. */
static int run(const al_args *a, const char *model, const char *audio, const char *text_path, esp_err *err)
{
    align_opts o;
    int kaldi, print_text, print_score, urc = settings(a, &o, &kaldi, &print_text, &print_score);
    if (urc) return urc;
    model_source ms;
    model_files mf = {0};
    backend *be = NULL;
    speech2text *s = NULL;
    align_text t = {0};
    align_result *r = NULL;
    float *wav = NULL;
    size_t n = 0;
    char *name = stem(audio);
    int rc = -1, have_ms = 0, have_mf = 0;
    if (align_text_read(text_path, kaldi, name, &t, err) != 0) goto out;
    if (model_source_open(&ms, model, err) != 0) goto out;
    have_ms = 1;
    if (model_files_locate(&mf, ms.icfg, ms.name, err) != 0) goto out;
    have_mf = 1;
    backend_kind kind;
    int dev = 0;
    if (parse_device(a->device ? a->device : "cpu", &kind, &dev, err) != 0) goto out;
    const char *omp = getenv("OMP_NUM_THREADS");
    int threads = a->threads > 0 ? (int)a->threads : omp && atoi(omp) > 0 ? atoi(omp) : 1;
    if (!(be = backend_open(kind, dev, threads, err))) goto out;
    s2t_opts so = S2T_OPTS_DEFAULT;
    if (!(s = speech2text_open(be, &mf, &so, err))) goto out;
    if (audio_read_resampled(audio, speech2text_fs(s), "the model's rate", 1, &wav, &n, err) != 0) goto out;
    r = xcalloc(t.n, sizeof *r);
    if (align_recording(s, wav, n, (const char *const *)t.texts, (int)t.n, &o, r, err) != 0) {
        char was[sizeof err->msg];
        memcpy(was, err->msg, sizeof was);
        esp_fail(err, "%s: %s", text_path, was);
        goto out;
    }
    for (size_t i = 0; i < t.n && !a->quiet; i++)
        if (r[i].n_unk)
            fprintf(stderr, "espnet3: warning: %s:%ld: %zu characters or pieces the model has no token for (left "
                    "out, as ESPnet's aligner leaves <unk> out)\n", text_path, t.lines[i], r[i].n_unk);
    rc = write_outputs(a, &t, r, name, &o, print_text, print_score, err);
    align_results_free(r, (int)t.n);
out:
    free(r), free(wav), free(name);
    speech2text_close(s);
    if (be) backend_close(be);
    if (have_mf) model_files_free(&mf);
    if (have_ms) model_source_free(&ms);
    align_text_free(&t);
    return rc;
}

int cmd_align(int argc, char **argv)
{
    al_args a = {0};
    esp_err err;
    const char **pos = calloc((size_t)argc + 1, sizeof *pos);
    int n_pos, rc = 0;
    if (cli_parse_table(&al_table, argc, argv, &a, pos, &n_pos, &err) != 0) rc = usage_error(err.msg);
    else if (a.help) help();
    else if (n_pos != 3) rc = usage_error("give a MODEL, an AUDIO file and its TEXT");
    else {
        log_set_quiet(a.quiet);
        rc = run(&a, pos[0], pos[1], pos[2], &err);
        if (rc < 0) {
            fprintf(stderr, "espnet3: error: %s\n", err.msg);
            rc = 1;
        }
    }
    free(pos);
    return rc;
}
