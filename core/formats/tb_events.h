/* TensorBoard event files, written without TensorFlow: each record is
 *   u64 length | masked CRC32C(length bytes) | tensorflow.Event protobuf | masked CRC32C(data)
 * with the protobuf hand-encoded (only the fields scalars need). The first record carries
 * file_version "brain.Event:2"; each later one an Event{wall_time, step, summary{value{tag,
 * simple_value}}}. Every record goes out in one write(2), so a killed process leaves whole records
 * (TensorBoard stops cleanly at a torn last record after a power loss). */
#ifndef ESPNET3_TB_EVENTS_H
#define ESPNET3_TB_EVENTS_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/log.h"

typedef struct tb_writer {
    int fd;
    char *path;   /* <logdir>/events.out.tfevents.<unix time>.<hostname>.<pid>.<n> */
} tb_writer;

/* Creates logdir (mkdir -p) and a new event file in it, named as torch's SummaryWriter names them.
 * The file starts with file_version and a SessionLog START at purge_step (0 when purge_step < 0):
 * when a resumed run opens a new file with purge_step = the checkpoint's step, TensorBoard drops the
 * events the killed run logged at steps >= purge_step. A fresh run passes -1. */
int tb_open(tb_writer *w, const char *logdir, int64_t purge_step, esp_err *err);

/* One Event at `step` holding n scalars; wall_time < 0 means now. */
int tb_add_scalars(tb_writer *w, int64_t step, double wall_time, const char *const *tags, const float *values,
                   size_t n, esp_err *err);
int tb_add_scalar(tb_writer *w, const char *tag, float value, int64_t step, esp_err *err);

void tb_close(tb_writer *w);

/* Seconds since the epoch with microseconds, the Event wall_time. */
double tb_wall_time(void);

/* Frames one record around an already serialized Event (exposed for tests); caller frees. */
unsigned char *tb_frame_record(const unsigned char *event, size_t len, size_t *out_len);

#endif
