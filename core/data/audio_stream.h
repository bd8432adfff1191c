/* Audio read in blocks: a span of a file of any length (a pipe, or samples already in memory) comes
 * through a fixed buffer, never whole (long-form decoding, core/decode/longform.h). The same file
 * checks as audio_read (mono, a truncated WAV, a header that promises more samples than the file
 * decodes) and the same span rules as audio_read_span; audio at another rate is resampled on the way (libsamplerate's best
 * sinc converter, run as a stream) when resample is on, else refused. */
#ifndef ESPNET3_AUDIO_STREAM_H
#define ESPNET3_AUDIO_STREAM_H

#include <stddef.h>

#include "core/base/log.h"

typedef struct audio_stream audio_stream;

/* Opens [start, end) seconds of path (end <= 0: to the end of the file; an end past the file as
 * audio_read_span: clipped within 0.1 s or at 1e300, else an error) for reading at expected_fs
 * (> 0; fs_key names its config key in messages). NULL with err naming the file on failure. */
audio_stream *audio_stream_open(const char *path, int expected_fs, const char *fs_key, int resample, double start,
                                double end, esp_err *err);
/* Audio libsndfile reads from the file descriptor fd (standard input: a pipe, or a file it is
 * redirected from), read once from front to back, never seeking (WAV, FLAC, Ogg, AU, NIST, ...;
 * libsndfile's header parsers may seek back within the first 64 KiB, which are kept), resampled to
 * expected_fs when its rate differs; name names it in messages. The header's length, when it
 * gives one below 2^29 frames (larger: a streaming writer's placeholder), is checked against what
 * arrives as a file's is; there is no span. NULL with err on failure. */
audio_stream *audio_stream_open_fd(int fd, const char *name, int expected_fs, esp_err *err);
/* Puts n samples at expected_fs (malloc'ed; the stream frees them) back in front of what the
 * stream delivers next: the first samples of a stream read to decide how to decode it. Only when
 * none put back earlier are left. */
void audio_stream_unread(audio_stream *st, float *samples, size_t n);
/* n samples at fs Hz in memory (not copied: they must outlive the stream) read the same way, resampled
 * to expected_fs when fs differs; name names them in messages. NULL with err for a bad rate. */
audio_stream *audio_stream_from_samples(const float *samples, size_t n, int fs, int expected_fs, const char *name,
                                        esp_err *err);
/* Seconds of audio the span holds, with samples put back (from the header, at the file's rate;
 * INFINITY when the header does not say and the span runs to the end). */
double audio_stream_seconds(const audio_stream *st);
/* Reads up to n samples at expected_fs into buf: the count read (fewer than n only at the end, 0
 * after it), or -1 with err naming the file (a corrupt or truncated file). */
long audio_stream_read(audio_stream *st, float *buf, size_t n, esp_err *err);
void audio_stream_close(audio_stream *st);

#endif
