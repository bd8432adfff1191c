/* `espnet3 transcribe --stream` (see transcribe_stream.h): read(2) returns what has arrived, the
 * PCM reader (core/data/pcm_stream.h) turns it into samples, and they go to the stream in pieces of
 * push_s seconds; at the end of the input the rest goes as the final push. Each line says what the
 * search holds after a push: "partial" (the best running hypothesis, when it changed) or "final".
 * Times per line: audio_s (audio read so far), decoded_s (audio the searched blocks reach),
 * wall_s (since the first byte arrived), push_s (the push's own compute time). */
#include "cli/transcribe_stream.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/data/pcm_stream.h"
#include "core/decode/speech2text_stream.h"
#include "lib/espnet3_cli.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

typedef struct line_times {
    double audio_s, decoded_s, wall_s, push_s;
} line_times;

static void print_line(const tr_stream_opts *o, const char *kind, const char *text, const line_times *t)
{
    if (o->json) {
        json_t *j = json_object();
        json_object_set_new(j, "type", json_string(kind));
        json_object_set_new(j, "text", json_string(text));
        json_object_set_new(j, "audio_s", json_real(t->audio_s));
        json_object_set_new(j, "decoded_s", json_real(t->decoded_s));
        json_object_set_new(j, "wall_s", json_real(t->wall_s));
        json_object_set_new(j, "push_s", json_real(t->push_s));
        char *s = json_dumps(j, JSON_COMPACT | JSON_REAL_PRECISION(6));
        printf("%s\n", s);
        free(s);
        json_decref(j);
    } else if (o->latency) {
        printf("%s\t%s\taudio %.3f s\tdecoded %.3f s\twall %.3f s\tpush %.3f s\n", kind, text, t->audio_s,
               t->decoded_s, t->wall_s, t->push_s);
    } else {
        printf("%s\t%s\n", kind, text);
    }
    fflush(stdout);
}

typedef struct run {
    const tr_stream_opts *o;
    s2t_stream *st;
    char *shown;       /* the last partial printed */
    double t0;
    int started;
} run;

/* One push; prints what changed. */
static int push(run *r, const float *x, size_t n, int is_final, esp_err *err)
{
    double a = now_s();
    s2t_partial p;
    if (s2t_stream_push(r->st, x, n, is_final, &p, err) < 0) return -1;
    double b = now_s();
    line_times t = {p.audio_s, p.decoded_s, b - r->t0, b - a};
    if (is_final) {
        print_line(r->o, "final", p.text, &t);
    } else if (strcmp(p.running, r->shown)) {
        free(r->shown);
        r->shown = strdup(p.running);
        print_line(r->o, "partial", p.running, &t);
    }
    return 0;
}

int tr_stream_run(espnet3_model *m, const tr_stream_opts *o)
{
    esp_err err = {{0}};
    speech2text *s2t = lib_model_speech2text(m);
    const char *name = strcmp(o->input, "-") ? o->input : "<stdin>";
    int fd = strcmp(o->input, "-") ? open(o->input, O_RDONLY) : STDIN_FILENO;
    if (fd < 0) {
        fprintf(stderr, "espnet3: error: %s: %s\n", o->input, strerror(errno));
        return 1;
    }
    s2t_stream *st = s2t_stream_open(s2t, &err);
    if (!st) {
        fprintf(stderr, "espnet3: error: --stream: %s\n", err.msg);
        if (fd != STDIN_FILENO) close(fd);
        return 1;
    }
    s2t_stream_set_repetition_check(st, !o->no_repetition_check);
    int fs = speech2text_fs(s2t), rc = 0;
    size_t chunk = (size_t)(o->push_s * fs + 0.5), n = 0, cap = chunk + 8192;
    if (chunk < 1) chunk = 1;
    pcm_stream ps;
    pcm_stream_init(&ps, fs, name);
    run r = {.o = o, .st = st, .shown = strdup("")};
    unsigned char buf[8192];
    float *x = malloc(cap * sizeof *x);
    for (;;) {
        ssize_t got = read(fd, buf, sizeof buf);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) {
            esp_fail(&err, "%s: %s", name, strerror(errno));
            rc = -1;
            break;
        }
        if (!r.started) r.started = 1, r.t0 = now_s();
        size_t k;
        if (n + (size_t)got / 2 + 2 > cap) {
            cap = 2 * (n + (size_t)got / 2 + 2);
            x = realloc(x, cap * sizeof *x);
        }
        rc = got ? pcm_stream_feed(&ps, buf, (size_t)got, x + n, &k, &err) : pcm_stream_end(&ps, x + n, &k, &err);
        if (rc != 0) break;
        n += k;
        if (pcm_stream_rate(&ps) != fs) {
            rc = esp_fail(&err, "%s: %d Hz audio, the model takes %d Hz (resample it first, e.g. sox -r %d)", name,
                          pcm_stream_rate(&ps), fs, fs);
            break;
        }
        if (!got) {
            rc = push(&r, x, n, 1, &err);
            break;
        }
        size_t at = 0; /* whole pieces of chunk samples: the pushes do not depend on how the bytes came */
        while (rc == 0 && n - at >= chunk) rc = push(&r, x + at, chunk, 0, &err), at += chunk;
        if (rc != 0) break;
        memmove(x, x + at, (n - at) * sizeof *x);
        n -= at;
    }
    if (rc != 0) fprintf(stderr, "espnet3: error: %s\n", err.msg);
    free(x), free(r.shown);
    s2t_stream_close(st);
    if (fd != STDIN_FILENO) close(fd);
    return rc != 0;
}
