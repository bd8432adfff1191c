/* `espnet3 transcribe MODEL FILE...`: audio files (or "-", standard input) to text with a trained
 * model, through the C library (include/espnet3.h): the options go to espnet3_options_set by name,
 * the files through espnet3_transcribe_files, batch_size at a time, and cli/transcribe_output.h
 * writes each result. A file that fails is one error line and the others go on (exit 1 at the end).
 * With --stream, one stream decoded as it arrives (cli/transcribe_stream.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/transcribe_output.h"
#include "cli/transcribe_stream.h"
#include "core/base/fsio.h"
#include "core/base/progress.h"
#include "include/espnet3.h"

typedef struct tr_args {
    const char *device, *beam, *ctc_weight, *penalty, *lm, *lm_weight, *nbest, *threads, *batch_size; /* library settings */
    const char *lf_window, *lf_overlap, *lf_threshold;
    const char *output, *output_dir, *stream_push;
    int quiet, help, stream, stream_latency, stream_no_rep;
} tr_args;

#define TF(f) offsetof(tr_args, f)
static const cli_option tr_options[] = {
    {0, "device", NULL, OPT_STRING, TF(device), "DEV", "cpu", "cpu, cuda or cuda:N"},
    {0, "beam", "beam_size", OPT_STRING, TF(beam), "N", "the pack's inference.yaml, else 20",
     "beam size (1 with ctc_weight 1: greedy CTC)"},
    {0, "ctc_weight", NULL, OPT_STRING, TF(ctc_weight), "W", "the pack's, else 0.5 (1 CTC-only models)",
     "1: CTC search; below: joint CTC/attention search"},
    {0, "penalty", NULL, OPT_STRING, TF(penalty), "P", "0", "length bonus per token"},
    {0, "lm", NULL, OPT_STRING, TF(lm), "DIR", NULL, "language model: its experiment folder or a pack holding one"},
    {0, "lm_weight", NULL, OPT_STRING, TF(lm_weight), "W", "1.0 with --lm", "shallow fusion's weight"},
    {0, "nbest", NULL, OPT_STRING, TF(nbest), "N", "1", "hypotheses per file (json lists them)"},
    {0, "threads", NULL, OPT_STRING, TF(threads), "N", "OMP_NUM_THREADS, else 1", "CPU threads"},
    {0, "batch_size", NULL, OPT_STRING, TF(batch_size), "N", "the pack's inference.yaml, else 1",
     "files decoded at once (one padded encoder pass, one beam search over all)"},
    {0, "longform_threshold", NULL, OPT_STRING, TF(lf_threshold), "SEC", "the pack's longform:, else 30",
     "audio longer than this is decoded in overlapping windows (inf: never)"},
    {0, "longform_window", NULL, OPT_STRING, TF(lf_window), "SEC", "the pack's, else 10", "seconds per window"},
    {0, "longform_overlap", NULL, OPT_STRING, TF(lf_overlap), "SEC", "the pack's, else 2",
     "seconds neighbouring windows share (at most half the window)"},
    {'o', "output", NULL, OPT_STRING, TF(output), "FORMAT", "text", "text, json, ctm, srt or vtt"},
    {0, "output_dir", NULL, OPT_STRING, TF(output_dir), "DIR", "standard output",
     "write <DIR>/<file's stem>.<txt|json|ctm|srt|vtt> per file"},
    {0, "stream", NULL, OPT_FLAG, TF(stream), NULL, NULL,
     "decode one FILE ('-', a FIFO) of 16-bit PCM (raw at the model's rate, or a WAV) as it arrives: "
     "partial results as they change, then the final (a contextual block model, or an asr_transducer model "
     "chunk by chunk)"},
    {0, "stream_push", NULL, OPT_STRING, TF(stream_push), "SEC", "0.1", "--stream: audio per push"},
    {0, "stream_latency", NULL, OPT_FLAG, TF(stream_latency), NULL, NULL,
     "--stream: each line with its audio, decoded, wall and push times"},
    {0, "stream_no_repetition_check", NULL, OPT_FLAG, TF(stream_no_rep), NULL, NULL,
     "--stream: ESPnet's disable_repetition_detection (the search runs on within each block)"},
    {'q', "quiet", NULL, OPT_FLAG, TF(quiet), NULL, NULL, "no progress or warnings, only errors"},
    {'h', "help", NULL, OPT_FLAG, TF(help), NULL, NULL, "show this help"},
};
static const cli_table tr_table = {tr_options, sizeof tr_options / sizeof *tr_options, "espnet3 transcribe",
                                   "MODEL FILE..."};
/* The options espnet3_options_set takes, by the same names (each in tr_options). */
static const char *const lib_settings[] = {"device", "beam", "ctc_weight", "penalty", "lm", "lm_weight", "nbest",
                                           "threads", "longform_threshold", "longform_window", "longform_overlap",
                                           "batch_size"};

static void help(void)
{
    cli_table_usage(&tr_table, stdout);
    printf("\nTranscribes audio files (WAV, FLAC, anything libsndfile reads; '-' reads standard input) with a\n"
           "trained model: a pack folder or zip (stage 8), an ESPnet2 packed zip, or an experiment folder.\n"
           "Text: one line per file, the text alone for one file, '<file>\\t<text>' for several.\n\nOptions:\n");
    cli_table_options(&tr_table, stdout);
}

static int usage_error(const char *msg)
{
    fprintf(stderr, "espnet3: error: %s\n", msg);
    cli_table_usage(&tr_table, stderr);
    return 2;
}

/* Options into library settings; an error names the option as typed here. */
static espnet3_options *settings(const tr_args *a, int *bad)
{
    espnet3_options *o = espnet3_options_new();
    char msg[2200];
    const char *omp = getenv("OMP_NUM_THREADS");
    if (!a->threads && omp && *omp && espnet3_options_set(o, "threads", omp) != 0)
        fprintf(stderr, "espnet3: warning: OMP_NUM_THREADS=%s: ignored (%s)\n", omp, espnet3_last_error());
    if (!a->quiet) espnet3_options_set(o, "progress", "1"); /* a long file's windows */
    for (size_t k = 0; k < sizeof lib_settings / sizeof *lib_settings; k++) {
        size_t i = 0;
        while (strcmp(tr_options[i].long_name, lib_settings[k])) i++;
        const char *v = *(const char *const *)((const char *)a + tr_options[i].offset);
        if (!v || espnet3_options_set(o, lib_settings[k], v) == 0) continue;
        snprintf(msg, sizeof msg, "--%s", espnet3_last_error());
        *bad = usage_error(msg);
        espnet3_options_free(o);
        return NULL;
    }
    return o;
}

/* <dir>/<stem of name>.<ext>; "-" is "stdin". */
static char *out_path(const char *dir, const char *name, tr_format f)
{
    const char *base = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
    if (!strcmp(name, "-")) base = "stdin";
    const char *dot = strrchr(base, '.');
    int n = dot && dot != base ? (int)(dot - base) : (int)strlen(base);
    return xasprintf("%s/%.*s.%s", dir, n, base, tr_format_ext(f));
}

/* One file's result to stdout, or atomically to its file under --output_dir. */
static int emit(const tr_args *a, tr_format f, const char *name, const espnet3_result *r, int several)
{
    if (!a->output_dir) {
        tr_write(stdout, f, name, r, several);
        fflush(stdout);
        return 0;
    }
    esp_err err;
    atomic_file af;
    char *path = out_path(a->output_dir, name, f);
    int rc = atomic_open(&af, path, &err);
    if (rc == 0) tr_write(af.fp, f, name, r, 0), rc = atomic_commit(&af, &err);
    if (rc != 0) fprintf(stderr, "espnet3: error: %s\n", err.msg);
    free(path);
    return rc;
}

static int transcribe_all(const tr_args *a, tr_format f, espnet3_model *m, const char **files, int n)
{
    int failed = 0, bs = espnet3_batch_size(m);
    progress p;
    espnet3_result **r = calloc((size_t)bs, sizeof *r);
    if (n > 1 && !a->quiet) progress_start(&p, "transcribe", (size_t)n);
    for (int i0 = 0; i0 < n; i0 += bs) {
        int k = n - i0 < bs ? n - i0 : bs;
        espnet3_transcribe_files(m, files + i0, (size_t)k, r);
        for (int j = 0, i = i0; j < k; j++, i++) {
            if (espnet3_result_error(r[j])) {
                fprintf(stderr, "espnet3: error: %s\n", espnet3_result_error(r[j]));
                failed = 1;
            } else {
                if (!*espnet3_result_text(r[j], 0) && !a->quiet)
                    fprintf(stderr, "espnet3: warning: %s: empty transcript (silence, or nothing the model "
                            "recognizes)\n", strcmp(files[i], "-") ? files[i] : "<stdin>");
                failed |= emit(a, f, files[i], r[j], n > 1) != 0;
            }
            espnet3_result_free(r[j]);
        }
        if (n > 1 && !a->quiet) progress_update(&p, (size_t)(i0 + k));
    }
    free(r);
    if (n > 1 && !a->quiet) progress_finish(&p);
    return failed;
}

int cmd_transcribe(int argc, char **argv)
{
    tr_args a = {0};
    esp_err err;
    const char **pos = calloc((size_t)argc + 1, sizeof *pos);
    int n_pos, rc = 0;
    if (cli_parse_table(&tr_table, argc, argv, &a, pos, &n_pos, &err) != 0) rc = usage_error(err.msg);
    else if (a.help) help();
    tr_format f = TR_TEXT;
    if (!rc && !a.help && a.output && tr_format_parse(a.output, &f) != 0) {
        snprintf(err.msg, sizeof err.msg, "--output '%s': use text, json, ctm, srt or vtt", a.output);
        rc = usage_error(err.msg);
    }
    if (!rc && !a.help && n_pos < 2) rc = usage_error("give a MODEL and at least one audio FILE ('-': standard input)");
    if (!rc && !a.help && n_pos > 2 && (f == TR_SRT || f == TR_VTT) && !a.output_dir)
        rc = usage_error("--output srt/vtt holds one file's subtitles: give one FILE, or --output_dir DIR");
    if (!rc && !a.help && a.stream && (n_pos != 2 || a.output_dir || (f != TR_TEXT && f != TR_JSON)))
        rc = usage_error("--stream decodes one FILE to standard output as text or json");
    double push_s = 0.1;
    if (!rc && !a.help && a.stream_push) {
        char *end;
        push_s = strtod(a.stream_push, &end);
        if (*end || end == a.stream_push || !(push_s >= 0.01 && push_s <= 60)) {
            snprintf(err.msg, sizeof err.msg, "--stream_push '%s': give seconds in [0.01, 60]", a.stream_push);
            rc = usage_error(err.msg);
        }
    }
    if (!rc && !a.help && a.output_dir && !is_dir(a.output_dir)) {
        snprintf(err.msg, sizeof err.msg, "--output_dir %s: no such folder", a.output_dir);
        rc = usage_error(err.msg);
    }
    espnet3_options *o = !rc && !a.help ? settings(&a, &rc) : NULL;
    if (o) {
        if (a.quiet) log_set_quiet(1);
        espnet3_model *m = espnet3_open(pos[0], o);
        espnet3_options_free(o);
        if (!m) {
            fprintf(stderr, "espnet3: error: %s\n", espnet3_last_error());
            rc = 1;
        } else {
            tr_stream_opts so = {.input = pos[1], .json = f == TR_JSON, .latency = a.stream_latency, .push_s = push_s,
                                  .no_repetition_check = a.stream_no_rep};
            rc = a.stream ? tr_stream_run(m, &so) : transcribe_all(&a, f, m, pos + 1, n_pos - 1);
            espnet3_close(m);
        }
    }
    free(pos);
    return rc;
}
