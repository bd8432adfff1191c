/* The RIFF chunk checks made before libsndfile parses a WAV or RF64 header: a LIST chunk whose
 * subchunk claims 2 GiB or more sends libsndfile's list parser (wavlike_subchunk_parse, 1.2.0 and
 * upstream as of 2026-07) into an endless loop, its 32-bit byte count wrapping around; a second
 * 'fmt ' or 'data' chunk is read differently from a file (libsndfile parses on past the data and
 * takes the last) and from a pipe (which ends at the data: audio_stream_open_fd). The check walks
 * the chunks as those parsers do and refuses such a file in one line naming it; every other file
 * (not RIFF, or a sane one) passes untouched. After opening, the truncation check of a WAV's data
 * chunk (audio_riff_data_truncated). */
#ifndef ESPNET3_AUDIO_RIFF_H
#define ESPNET3_AUDIO_RIFF_H

#include <stdint.h>
#include <stdio.h>

#include "core/base/log.h"

/* Up to n bytes of the input at byte offset off into buf: the count, fewer at its end or where
 * the bytes are not (yet) there. */
typedef long (*riff_read_fn)(void *src, long off, void *buf, long n);

/* 0, or -1 with err "<name>: ..." when a LIST chunk holds a subchunk of 2 GiB or more or a chunk
 * 'fmt ' or 'data' comes twice. The walk stops where the bytes end (a partial input is checked as
 * far as it goes). */
int audio_riff_check(riff_read_fn read, void *src, const char *name, esp_err *err);

/* audio_riff_check over an open file (any position; left where it was not guaranteed). */
int audio_riff_check_file(FILE *fp, const char *name, esp_err *err);

/* libsndfile quietly shortens a WAV whose data chunk runs past the end of the file to what is
 * there: 1 when fp (a WAV, at any position) declares more data bytes than it holds after the data
 * chunk's start (*declared and *present say how many), else 0. The sizes streaming writers leave
 * (0, 0xffffffff) mean "to the end of the file" and always fit. */
int audio_riff_data_truncated(FILE *fp, uint32_t *declared, long *present);

#endif
