#include "recipes/espeak_fortunes/synth.h"
#include "core/base/fsio.h"
#include "core/base/proc.h"
#include "core/data/audio.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <samplerate.h>
#include <sndfile.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>


static const struct {
    const char *program;
    const char *debian_package;
} engines[] = {
    [SYNTH_ESPEAK_NG] = {"espeak-ng", "espeak-ng"},
    [SYNTH_FLITE] = {"flite", "flite"},
    [SYNTH_FESTIVAL] = {"text2wave", "festival"},
};
static const char *const engine_names[] = {"espeak-ng", "flite", "festival"};

const char *synth_engine_name(synth_engine engine) { return engine_names[engine]; }

int synth_engine_parse(const char *name, synth_engine *out, esp_err *err)
{
    for (size_t i = 0; i < sizeof engines / sizeof engines[0]; i++) {
        if (strcmp(name, engine_names[i]) == 0) {
            *out = (synth_engine)i;
            return 0;
        }
    }
    return esp_fail(err, "synthesizer %s is not supported (use espeak-ng, flite or festival)", name);
}

int synth_check_installed(synth_engine engine, esp_err *err)
{
    if (which(engines[engine].program)) return 0;
    return esp_fail(err, "%s not found on PATH (install the Debian package %s)", engines[engine].program,
                    engines[engine].debian_package);
}

#define FESTIVAL_VOICES "/usr/share/festival/voices"

int synth_check_voice(synth_engine engine, const char *voice, esp_err *err)
{
    if (engine == SYNTH_FESTIVAL) {
        static const char *const langs[] = {"english", "us", "british"};
        for (size_t i = 0; i < sizeof langs / sizeof langs[0]; i++) {
            char *dir = xasprintf("%s/%s/%s", FESTIVAL_VOICES, langs[i], voice);
            int found = is_dir(dir);
            free(dir);
            if (found) return 0;
        }
        return esp_fail(err, "festival has no voice %s in %s/{english,us,british} (install its festvox-* "
                        "Debian package, e.g. festvox-kallpc16k for kal_diphone)", voice, FESTIVAL_VOICES);
    }
    if (engine != SYNTH_FLITE) return 0;
    char *argv[] = {"flite", "-lv", NULL};
    proc_buf out = {0};
    int status = 0;
    int rc = proc_run_capture(argv, &out, NULL, 4096, &status, err);
    if (rc > 0) rc = esp_fail(err, "flite not found on PATH (install the Debian package flite)");
    int found = 0;
    if (rc == 0 && out.data) {
        const char *list = strchr((const char *)out.data, ':');
        char *names = xstrdup(list ? list + 1 : ""), *save = NULL;
        for (char *t = strtok_r(names, " \n", &save); t; t = strtok_r(NULL, " \n", &save))
            if (strcmp(t, voice) == 0) found = 1;
        free(names);
    }
    free(out.data);
    if (rc != 0) return -1;
    if (!found) return esp_fail(err, "flite has no voice %s (`flite -lv` lists them)", voice);
    return 0;
}

/* stderr text as one line: newlines become " | ", trailing whitespace dropped. */
static char *one_line(const proc_buf *b)
{
    char *s = xstrdup(b->len ? (const char *)b->data : "");
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ')) s[--n] = '\0';
    proc_buf out = {0};
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\n') proc_buf_append(&out, " | ", 3);
        else if (s[i] != '\r') proc_buf_append(&out, &s[i], 1);
    }
    free(s);
    if (!out.data) return xstrdup("(no output on stderr)");
    return (char *)out.data;
}

/* libsndfile virtual I/O over a memory buffer, so the WAV never touches the disk. */
typedef struct mem_reader {
    const unsigned char *data;
    sf_count_t len, pos;
} mem_reader;

static sf_count_t mem_len(void *u)
{
    return ((mem_reader *)u)->len;
}

static sf_count_t mem_seek(sf_count_t off, int whence, void *u)
{
    mem_reader *m = u;
    sf_count_t base = whence == SEEK_CUR ? m->pos : whence == SEEK_END ? m->len : 0;
    sf_count_t p = base + off;
    if (p < 0) p = 0;
    if (p > m->len) p = m->len;
    m->pos = p;
    return p;
}

static sf_count_t mem_read(void *ptr, sf_count_t count, void *u)
{
    mem_reader *m = u;
    sf_count_t n = m->len - m->pos < count ? m->len - m->pos : count;
    if (n > 0) memcpy(ptr, m->data + m->pos, (size_t)n);
    m->pos += n > 0 ? n : 0;
    return n > 0 ? n : 0;
}

static sf_count_t mem_write(const void *ptr, sf_count_t count, void *u)
{
    (void)ptr, (void)count, (void)u;
    return 0;
}

static sf_count_t mem_tell(void *u)
{
    return ((mem_reader *)u)->pos;
}

/* Decodes a WAV held in memory to mono float samples (channels averaged). */
static int decode_wav(const proc_buf *wav, float **samples, size_t *n, int *rate, esp_err *err)
{
    SF_VIRTUAL_IO vio = {mem_len, mem_seek, mem_read, mem_write, mem_tell};
    mem_reader m = {wav->data, (sf_count_t)wav->len, 0};
    SF_INFO info = {0};
    SNDFILE *sf = sf_open_virtual(&vio, SFM_READ, &info, &m);
    if (!sf) return esp_fail(err, "cannot decode the synthesizer's WAV output: %s", sf_strerror(NULL));
    int ch = info.channels;
    /* Streamed WAV headers carry a placeholder length, so read until the data runs out. */
    float *interleaved = NULL;
    size_t frames = 0, cap = 0;
    for (;;) {
        if (frames + 4096 > cap) {
            cap = cap ? 2 * cap : 65536;
            interleaved = xrealloc(interleaved, cap * (size_t)ch * sizeof(float));
        }
        sf_count_t got = sf_readf_float(sf, interleaved + frames * (size_t)ch, 4096);
        if (got <= 0) break;
        frames += (size_t)got;
    }
    sf_close(sf);
    float *mono = xmalloc((frames ? frames : 1) * sizeof(float));
    for (size_t i = 0; i < frames; i++) {
        float sum = 0;
        for (int c = 0; c < ch; c++) sum += interleaved[i * (size_t)ch + (size_t)c];
        mono[i] = sum / (float)ch;
    }
    free(interleaved);
    *samples = mono;
    *n = frames;
    *rate = info.samplerate;
    return 0;
}

/* Resamples with libsamplerate's sinc converter (deterministic for the same input). */
static int resample(float **samples, size_t *n, int from, int to, esp_err *err)
{
    if (from == to) return 0;
    double ratio = (double)to / (double)from;
    size_t out_cap = (size_t)ceil((double)*n * ratio) + 64;
    float *out = xmalloc(out_cap * sizeof(float));
    SRC_DATA d = {
        .data_in = *samples,
        .data_out = out,
        .input_frames = (long)*n,
        .output_frames = (long)out_cap,
        .src_ratio = ratio,
    };
    int rc = src_simple(&d, SRC_SINC_MEDIUM_QUALITY, 1);
    if (rc != 0) {
        free(out);
        return esp_fail(err, "resampling %d -> %d Hz failed: %s", from, to, src_strerror(rc));
    }
    free(*samples);
    *samples = out;
    *n = (size_t)d.output_frames_gen;
    return 0;
}

/* Builds the program's argv; *file_out is set when the program writes to a file, not stdout. */
static char **synth_argv(synth_engine engine, const synth_params *p, const char *out_path,
                         char **file_out, const char *text_file)
{
    char **argv = xcalloc(16, sizeof *argv);
    int a = 0;
    *file_out = NULL;
    double stretch = 175.0 / (p->speed_wpm > 0 ? p->speed_wpm : 175);
    if (engine == SYNTH_ESPEAK_NG) {
        argv[a++] = xstrdup("espeak-ng");
        argv[a++] = xstrdup("--stdout");
        argv[a++] = xstrdup("-v");
        argv[a++] = xstrdup(p->voice);
        argv[a++] = xstrdup("-s");
        argv[a++] = xasprintf("%d", p->speed_wpm);
        argv[a++] = xstrdup("-p");
        argv[a++] = xasprintf("%d", p->pitch);
        argv[a++] = xstrdup("--");
        argv[a++] = xstrdup(p->text);
    } else if (engine == SYNTH_FESTIVAL) {
        /* The voice name is checked (letters, digits, - _ + . only), so it cannot leave the
         * Scheme expression; the text comes from a file, never from the command line. */
        *file_out = xasprintf("%s.festival.%ld.wav", out_path, (long)getpid());
        argv[a++] = xstrdup("text2wave");
        argv[a++] = xstrdup("-eval");
        argv[a++] = xasprintf("(voice_%s)", p->voice);
        argv[a++] = xstrdup("-eval");
        argv[a++] = xasprintf("(Parameter.set 'Duration_Stretch %.4f)", stretch);
        argv[a++] = xstrdup("-o");
        argv[a++] = xstrdup(*file_out);
        argv[a++] = xstrdup(text_file);
    } else {
        /* flite has no words-per-minute or 0..99 pitch: map onto espeak-ng's scale, where 175 wpm
         * is the normal rate and pitch 50 the normal voice (about 110 Hz here). */
        *file_out = xasprintf("%s.flite.%ld.wav", out_path, (long)getpid());
        argv[a++] = xstrdup("flite");
        argv[a++] = xstrdup("-voice");
        argv[a++] = xstrdup(p->voice);
        argv[a++] = xstrdup("--setf");
        argv[a++] = xasprintf("duration_stretch=%.4f", stretch);
        argv[a++] = xstrdup("--setf");
        argv[a++] = xasprintf("int_f0_target_mean=%d", 60 + p->pitch);
        argv[a++] = xstrdup("-t");
        argv[a++] = xstrdup(p->text);
        argv[a++] = xstrdup("-o");
        argv[a++] = xstrdup(*file_out);
    }
    return argv;
}

static void free_argv(char **argv)
{
    for (char **p = argv; *p; p++) free(*p);
    free(argv);
}

int synth_to_wav(synth_engine engine, const synth_params *p, int fs, const char *out_path,
                 esp_err *err)
{
    const char *prog = engines[engine].program;
    char *file_out;
    char *text_file = NULL;
    if (engine == SYNTH_FESTIVAL) {
        text_file = xasprintf("%s.festival.%ld.txt", out_path, (long)getpid());
        if (atomic_write_file(text_file, p->text, strlen(p->text), err) != 0) {
            free(text_file);
            return -1;
        }
    }
    char **argv = synth_argv(engine, p, out_path, &file_out, text_file);
    proc_buf out = {0}, errtxt = {0};
    int status = 0;
    int rc = proc_run_capture(argv, &out, &errtxt, 4096, &status, err);
    free_argv(argv);
    if (rc == ENOENT) rc = esp_fail(err, "%s not found on PATH (install the Debian package %s)", prog,
                                    engines[engine].debian_package);
    else if (rc > 0) rc = esp_fail(err, "%s: cannot start: %s", prog, strerror(rc));
    if (rc == 0 && file_out) {
        free(out.data);
        memset(&out, 0, sizeof out);
        esp_err read_err;
        size_t len = 0;
        char *data = WIFEXITED(status) && WEXITSTATUS(status) == 0 ? read_file(file_out, READ_LIST, &len, &read_err) : NULL;
        if (data) {
            out.data = (unsigned char *)data;
            out.len = out.cap = len;
        }
    }
    if (file_out) {
        unlink(file_out);
        free(file_out);
    }
    if (text_file) {
        unlink(text_file);
        free(text_file);
    }
    if (rc == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
        char *msg = one_line(&errtxt);
        if (WIFSIGNALED(status))
            rc = esp_fail(err, "%s -v %s failed (killed by signal %d): %s", prog, p->voice, WTERMSIG(status), msg);
        else
            rc = esp_fail(err, "%s -v %s failed (exit status %d): %s", prog, p->voice, WEXITSTATUS(status), msg);
        free(msg);
    } else if (rc == 0 && out.len == 0) {
        char *msg = one_line(&errtxt);
        rc = esp_fail(err, "%s -v %s produced no audio: %s", prog, p->voice, msg);
        free(msg);
    }
    float *samples = NULL;
    size_t n = 0;
    int rate = 0;
    if (rc == 0) rc = decode_wav(&out, &samples, &n, &rate, err);
    if (rc == 0 && n == 0) rc = esp_fail(err, "%s -v %s produced an empty WAV for \"%s\"", prog, p->voice, p->text);
    if (rc == 0) rc = resample(&samples, &n, rate, fs, err);
    if (rc == 0) rc = audio_write_wav16(out_path, samples, n, fs, AUDIO_PCM16_LIBSNDFILE, err);
    free(samples);
    free(out.data);
    free(errtxt.data);
    return rc;
}
