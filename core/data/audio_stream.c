/* Audio read in blocks, resampled on the way when asked: see audio_stream.h. */
#include "core/data/audio_stream.h"

#include <errno.h>
#include <math.h>
#include <samplerate.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/fsio.h"
#include "core/data/audio_open.h"
#include "core/data/audio_riff.h"

/* Samples read from the file per call when resampling (the converter's input block). */
#define IN_BLOCK 8192
/* Bytes of a sequential input kept for libsndfile's header parsers to seek back into. */
#define PIPE_HEAD 65536
/* A header length of this many frames or more on a sequential input is a streaming writer's
 * placeholder (a WAV data size of 0xffffffff is 2^31 16-bit frames, 2^30 32-bit): read to the end. */
#define PIPE_PLACEHOLDER ((sf_count_t)1 << 29)
/* Calls since a read last delivered bytes while libsndfile parses the header (reads at the end,
 * tells, seeks), past which the parse is looping on its stale header buffer (its chunk loops stop
 * at the file's length, which a pipe does not have). */
#define PIPE_OPEN_IDLE_CALLS 4096

/* libsndfile's virtual I/O over a file descriptor read once, front to back (a pipe): seeks land
 * in the first PIPE_HEAD bytes, which are kept, or forward within them; others fail and leave the
 * reader nowhere: reads give nothing until a seek lands (the parsers take that as the end, so a
 * WAV's chunks after its data are not looked for, and no chunk is parsed from the wrong bytes). */
typedef struct pipe_io {
    int fd;
    unsigned char head[PIPE_HEAD]; /* the first bytes read, head_len of them */
    sf_count_t head_len, consumed, pos; /* bytes taken from fd; the reader's position */
    int error;                          /* errno of a failed read */
    int lost;                           /* a seek failed: no position until one lands */
    int opening;                        /* libsndfile is parsing the header */
    int open_idle_calls;                /* calls since a read last delivered bytes, while opening */
    const char *name;                   /* the input in messages */
    int hostile;                        /* the head failed audio_riff_check: no bytes from here on */
    esp_err hostile_err;                /* why */
    /* While opening: where the last 4-byte read of the marker "data" ended, and the first data
     * chunk's samples (after its size), once seen; 0: not yet. A pipe's parse goes no further. */
    sf_count_t data_marker_end, data_start;
} pipe_io;

struct audio_stream {
    char *path;             /* the file, or the samples' name in messages */
    SNDFILE *sf;            /* NULL: samples in memory */
    const float *mem;       /* the samples (audio_stream_from_samples), not owned */
    int fs;                 /* the file's rate */
    sf_count_t header;      /* samples the header promises (SF_COUNT_MAX: it does not say) */
    sf_count_t pos, stop;   /* the next sample to read and the span's end, at the file's rate */
    SRC_STATE *src;         /* NULL: no resampling */
    double ratio;
    float *in;              /* the converter's input block: in[in_pos .. in_len) not yet used */
    long in_pos, in_len;
    int eof;                /* the file's span is all read (the converter may still hold output) */
    pipe_io *pipe;          /* a sequential input's virtual I/O (audio_stream_open_fd) */
    int out_fs;             /* the rate reads deliver */
    float *back;            /* samples at out_fs put back (audio_stream_unread): back[back_pos .. back_n) */
    size_t back_n, back_pos;
};

/* Up to n bytes from fd (fewer only at its end or on an error). */
static sf_count_t fd_read(pipe_io *p, void *buf, sf_count_t n)
{
    sf_count_t got = 0;
    while (got < n) {
        ssize_t r = read(p->fd, (unsigned char *)buf + got, (size_t)(n - got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r < 0) p->error = errno;
            break;
        }
        got += r;
    }
    p->consumed += got;
    return got;
}

/* The kept head's bytes at off (riff_read_fn). */
static long head_read(void *src, long off, void *buf, long n)
{
    pipe_io *p = src;
    long k = off < p->head_len ? (long)(p->head_len - off) : 0;
    if (k > n) k = n;
    if (k > 0) memcpy(buf, p->head + off, (size_t)k);
    return k;
}

/* Up to n bytes at the reader's position: from the kept head, then from fd. */
static sf_count_t read_bytes(pipe_io *p, void *buf, sf_count_t n)
{
    sf_count_t got = 0;
    if (p->lost || p->hostile) return 0;
    if (p->pos < p->head_len) { /* the kept head */
        got = p->head_len - p->pos < n ? p->head_len - p->pos : n;
        memcpy(buf, p->head + p->pos, (size_t)got);
        p->pos += got;
    }
    if (got == n || p->pos != p->consumed) return got; /* a gap between the head and the rest: lost */
    if (p->consumed < PIPE_HEAD) { /* still filling the head */
        sf_count_t want = n - got < PIPE_HEAD - p->consumed ? n - got : PIPE_HEAD - p->consumed;
        sf_count_t r = fd_read(p, p->head + p->head_len, want);
        /* the new bytes reach libsndfile's parsers only if the head so far passes the RIFF checks */
        sf_count_t at = p->head_len;
        p->head_len += r;
        if (r > 0 && audio_riff_check(head_read, p, p->name, &p->hostile_err) != 0) {
            p->hostile = 1;
            return got;
        }
        memcpy((unsigned char *)buf + got, p->head + at, (size_t)r);
        p->pos += r, got += r;
        if (r < want) return got;
    }
    sf_count_t r = got < n ? fd_read(p, (unsigned char *)buf + got, n - got) : 0;
    p->pos += r;
    return got + r;
}

/* read_bytes, counting the calls that deliver nothing while opening (see pipe_tell). */
static sf_count_t pipe_read(void *buf, sf_count_t n, void *u)
{
    pipe_io *p = u;
    sf_count_t at = p->pos, got = read_bytes(p, buf, n);
    if (p->opening) {
        p->open_idle_calls = got > 0 ? 0 : p->open_idle_calls + 1;
        /* the marker "data", then its size: the samples start here */
        if (got == 4 && p->data_marker_end && at == p->data_marker_end && !p->data_start) p->data_start = at + 4;
        p->data_marker_end = got == 4 && !memcmp(buf, "data", 4) ? at + 4 : 0;
    }
    return got;
}

/* The position `to`, or -1 where the pipe cannot go (past the head, or its end). */
static sf_count_t seek_to(pipe_io *p, sf_count_t to)
{
    if (to == p->pos) return to;
    if (to >= 0 && to <= p->head_len) return p->pos = to;
    if (to < 0 || to > PIPE_HEAD || p->consumed != p->head_len) return -1; /* past the head: not kept */
    unsigned char skip[4096];
    p->pos = p->head_len;
    while (p->pos < to) { /* forward within the head: read it in */
        sf_count_t k = to - p->pos < (sf_count_t)sizeof skip ? to - p->pos : (sf_count_t)sizeof skip;
        if (read_bytes(p, skip, k) != k) return -1;
    }
    return p->pos;
}

/* While opening, a seek past the first data chunk's start fails: the header parse of a pipe never
 * looks behind the samples for more chunks, whether the input is short enough to be kept or not
 * (a file's parse stops where a chunk claims more than the file holds; a pipe's length is unknown,
 * so it could read on into a later "data" chunk and take other samples than the file's). */
static sf_count_t pipe_seek(sf_count_t off, int whence, void *u)
{
    pipe_io *p = u;
    sf_count_t to = whence == SEEK_SET ? off : whence == SEEK_CUR ? p->pos + off : -1;
    if (p->opening && p->data_start && to > p->data_start) {
        p->open_idle_calls++;
        p->lost = 1;
        return -1;
    }
    if (p->opening) p->open_idle_calls++;
    p->lost = 0; /* seek_to may read forward */
    p->lost = seek_to(p, to) < 0;
    return p->lost ? -1 : p->pos;
}

static sf_count_t pipe_length(void *u) { (void)u; return SF_COUNT_MAX; } /* unknown until read */
/* A header parse that has taken no byte for PIPE_OPEN_IDLE_CALLS calls is told it stands at the
 * end of the longest file, which ends its chunk loop (a header claiming chunks the input does not
 * hold would otherwise be parsed from stale bytes until memory runs out). */
static sf_count_t pipe_tell(void *u)
{
    pipe_io *p = u;
    if (!p->opening) return p->pos;
    return ++p->open_idle_calls > PIPE_OPEN_IDLE_CALLS ? SF_COUNT_MAX : p->pos;
}
static sf_count_t pipe_write(const void *buf, sf_count_t n, void *u) { (void)buf, (void)n, (void)u; return 0; }

static int span_error(esp_err *err, const char *path, double start, double end, double dur, const char *what)
{
    return esp_fail(err, "%s: segment %.3f-%.3f s %s (the audio is %.3f s)", path, start, end == 1e300 ? dur : end,
                    what, dur);
}

/* The span [start, end) seconds as samples, with audio_read_span's rules. */
static int set_span(audio_stream *st, double start, double end, esp_err *err)
{
    double dur = st->header == SF_COUNT_MAX ? INFINITY : (double)st->header / st->fs;
    if (end <= 0) {
        st->pos = 0, st->stop = st->header;
        return 0;
    }
    if (!(start >= 0 && start < end && start * st->fs < 9e18))
        return span_error(err, st->path, start, end, dur, "holds no samples");
    if (end > dur && end != 1e300 && end - dur > 0.1)
        return span_error(err, st->path, start, end, dur, "runs past the end of the audio");
    sf_count_t a = (sf_count_t)llround(start * st->fs);
    sf_count_t b = end >= dur || end * st->fs >= 9e18 ? st->header : (sf_count_t)llround(end * st->fs);
    if (a >= b || a >= st->header) return span_error(err, st->path, start, end, dur, "holds no samples");
    if (a > 0 && sf_seek(st->sf, a, SEEK_SET) != a)
        return esp_fail(err, "%s: cannot seek to %.3f s: %s", st->path, start, sf_strerror(st->sf));
    st->pos = a, st->stop = b;
    return 0;
}

/* The converter from the stream's rate to expected_fs, when they differ; closes st on failure. */
static audio_stream *with_resampler(audio_stream *st, int expected_fs, esp_err *err)
{
    st->out_fs = expected_fs;
    if (st->fs == expected_fs) return st;
    int e;
    st->ratio = (double)expected_fs / st->fs;
    if (!src_is_valid_ratio(st->ratio) || !(st->src = src_new(SRC_SINC_BEST_QUALITY, 1, &e))) {
        esp_fail(err, "%s: cannot resample %d Hz to %d Hz", st->path, st->fs, expected_fs);
        audio_stream_close(st);
        return NULL;
    }
    st->in = xmalloc(IN_BLOCK * sizeof *st->in);
    return st;
}

audio_stream *audio_stream_open(const char *path, int expected_fs, const char *fs_key, int resample, double start,
                                double end, esp_err *err)
{
    SF_INFO info;
    SNDFILE *sf = audio_open_checked(path, resample ? 0 : expected_fs, fs_key, &info, err);
    if (!sf) return NULL;
    audio_stream *st = xcalloc(1, sizeof *st);
    st->path = xstrdup(path);
    st->sf = sf;
    st->fs = info.samplerate;
    /* As audio_read: a header without a length (0, or a streamed file's maximum) is read to the end. */
    st->header = info.frames > 0 ? info.frames : SF_COUNT_MAX;
    if (set_span(st, start, end, err) != 0) {
        audio_stream_close(st);
        return NULL;
    }
    return with_resampler(st, expected_fs, err);
}

audio_stream *audio_stream_open_fd(int fd, const char *name, int expected_fs, esp_err *err)
{
    pipe_io *p = xcalloc(1, sizeof *p);
    p->fd = fd;
    SF_VIRTUAL_IO vio = {pipe_length, pipe_seek, pipe_read, pipe_write, pipe_tell};
    SF_INFO info = {0};
    p->name = name;
    p->opening = 1;
    SNDFILE *sf = sf_open_virtual(&vio, SFM_READ, &info, p);
    p->opening = 0;
    if (sf && p->hostile) sf_close(sf), sf = NULL;
    if (!sf) {
        if (p->hostile) *err = p->hostile_err;
        else if (p->error) esp_fail(err, "%s: read error: %s", name, strerror(p->error));
        else if (p->consumed == 0) esp_fail(err, "%s: no audio (0 bytes)", name);
        else esp_fail(err, "%s: cannot read audio: %s (read front to back, libsndfile must find the format "
                      "in the first 64 KiB: WAV, FLAC, Ogg, AIFF, CAF, AU, NIST, ...; give other files by path)",
                      name, sf_strerror(NULL));
        free(p);
        return NULL;
    }
    /* No truncation check of a WAV's data chunk against the bytes (they are not there yet): a
     * short stream is found by read_span, against the header's length. */
    if (audio_check_opened(sf, &info, NULL, name, 0, NULL, err) != 0) {
        sf_close(sf);
        free(p);
        return NULL;
    }
    audio_stream *st = xcalloc(1, sizeof *st);
    st->path = xstrdup(name);
    st->sf = sf;
    st->pipe = p;
    st->fs = info.samplerate;
    st->header = info.frames > 0 && info.frames < PIPE_PLACEHOLDER ? info.frames : SF_COUNT_MAX;
    st->stop = st->header;
    return with_resampler(st, expected_fs, err);
}

void audio_stream_unread(audio_stream *st, float *samples, size_t n)
{
    ESP_CHECK(st->back_pos == st->back_n);
    free(st->back);
    st->back = samples, st->back_n = n, st->back_pos = 0;
}

audio_stream *audio_stream_from_samples(const float *samples, size_t n, int fs, int expected_fs, const char *name,
                                        esp_err *err)
{
    if (fs <= 0) {
        esp_fail(err, "%s: sample rate %d Hz (give the rate of the samples)", name, fs);
        return NULL;
    }
    audio_stream *st = xcalloc(1, sizeof *st);
    st->path = xstrdup(name);
    st->mem = samples;
    st->fs = fs;
    st->header = st->stop = (sf_count_t)n;
    return with_resampler(st, expected_fs, err);
}

double audio_stream_seconds(const audio_stream *st)
{
    double back = (double)(st->back_n - st->back_pos) / st->out_fs;
    return st->stop == SF_COUNT_MAX ? INFINITY : (double)(st->stop - st->pos) / st->fs + back;
}

/* Up to n samples of the span at the file's rate: the count, 0 at its end, -1 on a decoding error
 * or a file shorter than its header. */
static long read_span(audio_stream *st, float *buf, size_t n, esp_err *err)
{
    sf_count_t want = st->stop - st->pos < (sf_count_t)n ? st->stop - st->pos : (sf_count_t)n, got = 0;
    if (st->mem) {
        memcpy(buf, st->mem + st->pos, (size_t)want * sizeof *buf);
        st->pos += want;
        return (long)want;
    }
    while (got < want) { /* libsndfile may return short counts before the end */
        sf_count_t r = sf_readf_float(st->sf, buf + got, want - got);
        if (r <= 0) break;
        got += r;
    }
    /* A decoder may note an error it recovered from (FLAC's lost sync): only a short read fails. */
    int e = sf_error(st->sf);
    if (got < want && e != SF_ERR_NO_ERROR)
        return esp_fail(err, "%s: cannot decode audio: %s", st->path, sf_error_number(e));
    if (got < want && st->stop == SF_COUNT_MAX) st->stop = st->pos + got; /* its end, now known */
    else if (got < want)
        return esp_fail(err, "%s: truncated or corrupt audio: the header promises %lld samples, %lld could be decoded",
                        st->path, (long long)st->header, (long long)(st->pos + got));
    st->pos += got;
    return (long)got;
}

/* The converter's output: feeds it input blocks until n samples are out or it is drained. */
static long read_resampled(audio_stream *st, float *buf, size_t n, esp_err *err)
{
    size_t got = 0;
    while (got < n) {
        if (st->in_pos == st->in_len && !st->eof) {
            long r = read_span(st, st->in, IN_BLOCK, err);
            if (r < 0) return -1;
            st->in_pos = 0, st->in_len = r;
            st->eof = r == 0;
        }
        SRC_DATA d = {.data_in = st->in + st->in_pos, .input_frames = st->in_len - st->in_pos, .data_out = buf + got,
                      .output_frames = (long)(n - got), .end_of_input = st->eof, .src_ratio = st->ratio};
        int e = src_process(st->src, &d);
        if (e != 0) return esp_fail(err, "%s: cannot resample: %s", st->path, src_strerror(e));
        st->in_pos += d.input_frames_used;
        got += (size_t)d.output_frames_gen;
        if (st->eof && d.output_frames_gen == 0) break;
    }
    return (long)got;
}

long audio_stream_read(audio_stream *st, float *buf, size_t n, esp_err *err)
{
    size_t k = st->back_n - st->back_pos < n ? st->back_n - st->back_pos : n;
    if (k) { /* the samples put back first */
        memcpy(buf, st->back + st->back_pos, k * sizeof *buf);
        st->back_pos += k;
        if (st->back_pos == st->back_n) free(st->back), st->back = NULL, st->back_n = st->back_pos = 0;
        if (k == n) return (long)k;
    }
    long r = st->src ? read_resampled(st, buf + k, n - k, err) : read_span(st, buf + k, n - k, err);
    return r < 0 ? -1 : (long)k + r;
}

void audio_stream_close(audio_stream *st)
{
    if (!st) return;
    if (st->sf) sf_close(st->sf);
    if (st->src) src_delete(st->src);
    free(st->pipe);
    free(st->back);
    free(st->in);
    free(st->path);
    free(st);
}
