/* 16-bit PCM as it arrives, raw or after a WAV header (see pcm_stream.h): a byte-driven state
 * machine over the header's parts, then the samples. */
#include "core/data/pcm_stream.h"

#include <limits.h>
#include <string.h>

enum { DETECT, RIFF, CHUNK, FMT, SKIP, DATA, RAW, DONE };

static unsigned le16(const unsigned char *b) { return (unsigned)b[0] | (unsigned)b[1] << 8; }
static float s16(unsigned lo, unsigned hi)
{
    int v = (int)(lo | hi << 8);
    return (float)(v >= 32768 ? v - 65536 : v) / 32768.0f;
}

static unsigned long le32(const unsigned char *b) { return (unsigned long)le16(b) | (unsigned long)le16(b + 2) << 16; }

void pcm_stream_init(pcm_stream *p, int raw_fs, const char *name)
{
    memset(p, 0, sizeof *p);
    p->state = DETECT, p->want = 4, p->fs = raw_fs, p->name = name;
}

int pcm_stream_rate(const pcm_stream *p) { return p->fs; }

static int bad(const pcm_stream *p, esp_err *err, const char *what)
{
    return esp_fail(err, "%s: %s (give 16-bit mono PCM: a WAV, or raw samples)", p->name, what);
}

/* A chunk body of size bytes (odd sizes padded by one) skipped, or the data chunk's samples. */
static int chunk_header(pcm_stream *p, esp_err *err)
{
    unsigned long size = le32(p->hdr + 4);
    if (!memcmp(p->hdr, "data", 4)) {
        if (!p->is_wav) return bad(p, err, "WAV data before its fmt chunk");
        p->data_left = size == 0 || size == 0xFFFFFFFFul ? ULLONG_MAX : size;
        p->state = DATA;
    } else if (!memcmp(p->hdr, "fmt ", 4)) {
        if (size < 16) return bad(p, err, "WAV fmt chunk shorter than 16 bytes");
        p->want = size < sizeof p->hdr ? size : sizeof p->hdr;
        p->skip = size - p->want + (size & 1);
        p->state = FMT;
    } else {
        p->skip = size + (size & 1);
        p->state = SKIP;
    }
    p->nh = 0;
    return 0;
}

static int fmt_chunk(pcm_stream *p, esp_err *err)
{
    unsigned tag = le16(p->hdr), channels = le16(p->hdr + 2), bits = le16(p->hdr + 14);
    unsigned long fs = le32(p->hdr + 4);
    if (tag != 1 && tag != 0xFFFE) return bad(p, err, "WAV format is not PCM");
    if (channels != 1) return bad(p, err, "WAV has more than one channel");
    if (bits != 16) return bad(p, err, "WAV samples are not 16-bit");
    if (fs == 0 || fs > 1000000) return bad(p, err, "WAV sample rate out of range");
    p->fs = (int)fs, p->is_wav = 1;
    p->state = p->skip ? SKIP : CHUNK, p->want = 8, p->nh = 0;
    return 0;
}

/* Header bytes into hdr until want are there; returns the bytes used. */
static size_t gather(pcm_stream *p, const unsigned char *buf, size_t n)
{
    size_t take = p->want - p->nh < n ? p->want - p->nh : n;
    memcpy(p->hdr + p->nh, buf, take);
    p->nh += take;
    return take;
}

int pcm_stream_feed(pcm_stream *p, const unsigned char *buf, size_t n, float *out, size_t *n_out, esp_err *err)
{
    *n_out = 0;
    while (n > 0) {
        size_t used = 0;
        switch (p->state) {
        case DETECT:
            /* Raw samples may begin with anything but "RIFF": compare what has come so far. */
            used = gather(p, buf, n);
            if (memcmp(p->hdr, "RIFF", p->nh)) {
                p->state = RAW;
                size_t have = p->nh;
                p->nh = 0;
                buf += used, n -= used;
                /* The gathered bytes are samples: feed them first. */
                size_t k;
                if (pcm_stream_feed(p, p->hdr, have, out + *n_out, &k, err) != 0) return -1;
                *n_out += k;
                continue;
            }
            if (p->nh == 4) p->state = RIFF, p->want = 12;
            break;
        case RIFF:
            used = gather(p, buf, n);
            if (p->nh == 12) {
                if (memcmp(p->hdr + 8, "WAVE", 4)) return bad(p, err, "RIFF file that is not a WAVE");
                p->state = CHUNK, p->want = 8, p->nh = 0;
            }
            break;
        case CHUNK:
            used = gather(p, buf, n);
            if (p->nh == 8 && chunk_header(p, err) != 0) return -1;
            break;
        case FMT:
            used = gather(p, buf, n);
            if (p->nh == p->want && fmt_chunk(p, err) != 0) return -1;
            break;
        case SKIP:
            used = p->skip < n ? p->skip : n;
            p->skip -= used;
            if (!p->skip) p->state = CHUNK, p->want = 8, p->nh = 0;
            break;
        case DATA:
        case RAW: {
            size_t avail = n;
            if (p->state == DATA && p->data_left < avail) avail = (size_t)p->data_left;
            size_t i = 0;
            if (p->has_carry && avail > 0) {
                out[(*n_out)++] = s16(p->carry, buf[0]);
                p->has_carry = 0, i = 1;
            }
            for (; i + 1 < avail; i += 2) out[(*n_out)++] = s16(buf[i], buf[i + 1]);
            if (i < avail) p->carry = buf[i], p->has_carry = 1, i++;
            used = avail;
            if (p->state == DATA && p->data_left != ULLONG_MAX && (p->data_left -= avail) == 0) p->state = DONE;
            break;
        }
        default: /* after the data chunk: trailing chunks are not samples */
            used = n;
        }
        buf += used, n -= used;
    }
    return 0;
}

int pcm_stream_end(pcm_stream *p, float *out, size_t *n_out, esp_err *err)
{
    *n_out = 0;
    if (p->state == DETECT) { /* fewer than 4 bytes, all a prefix of "RIFF": raw samples */
        size_t have = p->nh;
        p->state = RAW, p->nh = 0;
        return pcm_stream_feed(p, p->hdr, have, out, n_out, err);
    }
    if (p->state == RIFF || p->state == CHUNK || p->state == FMT || p->state == SKIP)
        return bad(p, err, "the input ended inside its WAV header");
    return 0;
}
