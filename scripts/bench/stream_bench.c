/* Streaming decoding's cost and lag (core/decode/speech2text_stream.h, as `espnet3 transcribe
 * --stream` runs it): a WAV pushed in pieces of PUSH seconds, each push timed; one thread. Built by
 * the Makefile's BENCH_BINS, run by scripts/bench/stream.
 *   stream_bench MODEL WAV PUSH_S BEAM CTC_WEIGHT REPETITION_CHECK (1: ESPnet's default, 0: disabled)
 * Prints one Markdown row: audio s, pushes, CPU s, CPU RTF (CPU / audio), mean and max push ms, the
 * lag of the partial results (audio pushed minus audio the search reached, after each push once
 * the search has started: mean and max), the encoder's block plus look-ahead in seconds (the
 * goal's bound), and the final text's words. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/compute/blas_core.h"
#include "core/data/audio.h"
#include "core/decode/speech2text_stream.h"
#include "core/nn/model.h"
#include "include/espnet3.h"
#include "lib/espnet3_cli.h"

static double cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: stream_bench MODEL WAV PUSH_S BEAM CTC_WEIGHT REPETITION_CHECK\n");
        return 2;
    }
    blas_core_select(argv); /* OpenBLAS' kernels as espnet3 runs them (core/compute/blas_core.h) */
    espnet3_options *o = espnet3_options_new();
    espnet3_options_set(o, "threads", "1");
    espnet3_options_set(o, "beam", argv[4]);
    espnet3_options_set(o, "ctc_weight", argv[5]);
    espnet3_model *m = espnet3_open(argv[1], o);
    espnet3_options_free(o);
    if (!m) {
        fprintf(stderr, "stream_bench: %s\n", espnet3_last_error());
        return 1;
    }
    speech2text *s2t = lib_model_speech2text(m);
    esp_err err;
    float *x;
    size_t n;
    int fs = speech2text_fs(s2t);
    if (audio_read(argv[2], fs, "fs", &x, &n, &err) != 0) {
        fprintf(stderr, "stream_bench: %s\n", err.msg);
        return 1;
    }
    s2t_stream *st = s2t_stream_open(s2t, &err);
    if (!st) {
        fprintf(stderr, "stream_bench: %s\n", err.msg);
        return 1;
    }
    s2t_stream_set_repetition_check(st, atoi(argv[6]));
    const model_dims *d = &speech2text_model(s2t)->dims;
    const frontend_opts *fo = speech2text_frontend(s2t);
    int sub = d->input_layer == IN_CONV2D6 ? 6 : d->input_layer == IN_CONV2D8 ? 8 : d->input_layer == IN_LINEAR ? 1 : 4;
    double bound = (double)(d->block_size + d->look_ahead) * sub * fo->hop_length / fs;
    size_t piece = (size_t)(atof(argv[3]) * fs + 0.5);
    double total = 0, worst = 0, lag_sum = 0, lag_max = 0;
    int pushes = 0, lags = 0, words = 0;
    s2t_partial p = {0};
    const char *texts_path = getenv("STREAM_BENCH_TEXTS");
    FILE *texts = texts_path ? fopen(texts_path, "w") : NULL;
    if (texts_path && !texts) {
        fprintf(stderr, "stream_bench: cannot write %s\n", texts_path);
        return 1;
    }
    for (size_t at = 0; at < n; at += piece) {
        int final = at + piece >= n;
        double a = cpu_s();
        if (s2t_stream_push(st, x + at, final ? n - at : piece, final, &p, &err) < 0) {
            fprintf(stderr, "stream_bench: %s\n", err.msg);
            return 1;
        }
        double c = cpu_s() - a;
        total += c, worst = c > worst ? c : worst, pushes++;
        if (texts) fprintf(texts, "%d %s\t%s\t%d\n", pushes, final ? "final" : "partial", p.text, p.frames),
                   fprintf(texts, "%d running\t%s\n", pushes, p.running);
        if (!final && p.frames > 0) {
            double lag = p.audio_s - p.decoded_s;
            lag_sum += lag, lags++, lag_max = lag > lag_max ? lag : lag_max;
        }
    }
    for (const char *q = p.text; *q; q++) words += (q == p.text || q[-1] == ' ') && *q != ' ';
    double audio = (double)n / fs;
    char lag_mean[32] = "-", lag_worst[32] = "-"; /* no partial before the final push */
    if (lags) snprintf(lag_mean, sizeof lag_mean, "%.2f", lag_sum / lags), snprintf(lag_worst, sizeof lag_worst, "%.2f", lag_max);
    printf("| %.1f | %d | %.2f | %.4f | %.1f | %.1f | %s | %s | %.2f | %d |\n", audio, pushes, total, total / audio,
           1e3 * total / pushes, 1e3 * worst, lag_mean, lag_worst, bound, words);
    if (texts) fclose(texts);
    s2t_stream_close(st);
    espnet3_close(m);
    free(x);
    return 0;
}
