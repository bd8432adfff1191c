/* The opening checks every audio reader makes (core/data/audio.c and audio_stream.c share them):
 * libsndfile opens the file, which must be mono at a valid rate (expected_fs > 0: that rate), and a
 * WAV's data chunk must fit the file (libsndfile would quietly shorten it). Float reads are set to
 * soundfile's scaling. */
#ifndef ESPNET3_AUDIO_OPEN_H
#define ESPNET3_AUDIO_OPEN_H

#include <sndfile.h>
#include <stdio.h>

#include "core/base/log.h"

/* NULL with err naming the file on failure; fs_key names the config key of expected_fs. */
SNDFILE *audio_open_checked(const char *path, int expected_fs, const char *fs_key, SF_INFO *info, esp_err *err);

/* The opening checks of a file libsndfile opened some other way (virtual I/O), named `name` in
 * messages; raw reads the same bytes (NULL: no truncation check). 0, with float reads set to
 * soundfile's scaling, or -1 (sf stays open). */
int audio_check_opened(SNDFILE *sf, const SF_INFO *info, FILE *raw, const char *name, int expected_fs,
                       const char *fs_key, esp_err *err);

#endif
