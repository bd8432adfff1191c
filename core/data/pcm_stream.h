/* 16-bit PCM read as it arrives (a pipe, a FIFO, a socket): raw signed 16-bit little-endian mono
 * samples, or a WAV header and then its samples. Bytes go in as they come, in pieces of any size;
 * the samples they complete come out as floats in [-1, 1) (x / 32768, as soundfile reads them).
 *
 * The stream is a WAV when it starts with "RIFF": then "WAVE", chunks until "data" (their bodies
 * skipped; "fmt " read: PCM (tag 1, or 0xFFFE extensible), one channel, 16 bits, its rate), and the
 * data chunk's samples: as many as its size says, or up to the end when the size is 0 or
 * 0xFFFFFFFF (what a writer that cannot seek leaves). Else every byte is raw samples at the rate the
 * caller assumes. (libsndfile reads a pipe only in whole blocks of its own; a streaming decoder
 * wants each sample as soon as it comes.) */
#ifndef ESPNET3_DATA_PCM_STREAM_H
#define ESPNET3_DATA_PCM_STREAM_H

#include <stddef.h>

#include "core/base/log.h"

typedef struct pcm_stream {
    int state;
    unsigned char hdr[40]; /* the header bytes being gathered */
    size_t nh, want;       /* gathered; needed for the current header part */
    size_t skip;           /* bytes of a chunk body still to skip */
    unsigned long long data_left; /* a WAV data chunk's bytes still to come (ULLONG_MAX: to the end) */
    int fs, is_wav;
    unsigned char carry;   /* the first byte of a sample split across pieces */
    int has_carry;
    const char *name;      /* the input in messages */
} pcm_stream;

/* raw_fs: the rate of a raw stream (a WAV says its own). name: the input in messages. */
void pcm_stream_init(pcm_stream *p, int raw_fs, const char *name);
/* Feeds n bytes; the samples they complete go to out (room for n / 2 + 1 floats), their count to
 * *n_out. -1 with err (naming the input) for a WAV header that is malformed or not 16-bit mono PCM. */
int pcm_stream_feed(pcm_stream *p, const unsigned char *buf, size_t n, float *out, size_t *n_out, esp_err *err);
/* At the end of the input: the samples of bytes held back (a raw stream's first bytes while they
 * could still begin "RIFF") into out (room for 2), their count to *n_out; -1 with err when the
 * input ended inside a WAV header. */
int pcm_stream_end(pcm_stream *p, float *out, size_t *n_out, esp_err *err);
/* The samples' rate: the WAV's once its fmt chunk was read, else raw_fs. */
int pcm_stream_rate(const pcm_stream *p);

#endif
