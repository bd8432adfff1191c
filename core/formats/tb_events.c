#include "core/formats/tb_events.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "core/base/crc32c.h"
#include "core/base/fsio.h"

/* ---- protobuf wire format (only what Event needs) ------------------------------------- */

typedef struct pbuf {
    unsigned char *p;
    size_t len, cap;
} pbuf;

static void pb_bytes(pbuf *b, const void *src, size_t n)
{
    if (n == 0) return;
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 64;
        b->p = xrealloc(b->p, b->cap);
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void pb_varint(pbuf *b, uint64_t v)
{
    unsigned char tmp[10];
    size_t n = 0;
    do {
        tmp[n++] = (unsigned char)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
        v >>= 7;
    } while (v);
    pb_bytes(b, tmp, n);
}

enum { WT_VARINT = 0, WT_FIXED64 = 1, WT_LEN = 2, WT_FIXED32 = 5 };

static void pb_key(pbuf *b, unsigned field, unsigned wire) { pb_varint(b, (uint64_t)field << 3 | wire); }

static void pb_le(pbuf *b, uint64_t v, int nbytes)
{
    unsigned char tmp[8];
    for (int i = 0; i < nbytes; i++) tmp[i] = (unsigned char)(v >> (8 * i));
    pb_bytes(b, tmp, (size_t)nbytes);
}

static void pb_double(pbuf *b, unsigned field, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    pb_key(b, field, WT_FIXED64);
    pb_le(b, u, 8);
}

static void pb_float(pbuf *b, unsigned field, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    pb_key(b, field, WT_FIXED32);
    pb_le(b, u, 4);
}

static void pb_lenfield(pbuf *b, unsigned field, const void *data, size_t n)
{
    pb_key(b, field, WT_LEN);
    pb_varint(b, n);
    pb_bytes(b, data, n);
}

/* tensorflow/core/util/event.proto and summary.proto field numbers. */
enum {
    EVENT_WALL_TIME = 1, EVENT_STEP = 2, EVENT_FILE_VERSION = 3, EVENT_SUMMARY = 5,
    EVENT_SESSION_LOG = 7, /* 6 is the deprecated log_message */
    SUMMARY_VALUE = 1, VALUE_TAG = 1, VALUE_SIMPLE_VALUE = 2,
    SESSION_LOG_STATUS = 1, SESSION_LOG_START = 1,
};

/* Event header fields; proto3 omits a zero step, as TensorFlow's writer does. */
static void event_head(pbuf *b, double wall_time, int64_t step)
{
    pb_double(b, EVENT_WALL_TIME, wall_time);
    if (step != 0) {
        pb_key(b, EVENT_STEP, WT_VARINT);
        pb_varint(b, (uint64_t)step); /* int64: negative values take ten bytes, two's complement */
    }
}

/* ---- records -------------------------------------------------------------------------- */

unsigned char *tb_frame_record(const unsigned char *event, size_t len, size_t *out_len)
{
    unsigned char *r = xmalloc(len + 16);
    for (int i = 0; i < 8; i++) r[i] = (unsigned char)((uint64_t)len >> (8 * i));
    uint32_t c = crc32c_mask(crc32c(r, 8));
    for (int i = 0; i < 4; i++) r[8 + i] = (unsigned char)(c >> (8 * i));
    memcpy(r + 12, event, len);
    c = crc32c_mask(crc32c(event, len));
    for (int i = 0; i < 4; i++) r[12 + len + i] = (unsigned char)(c >> (8 * i));
    *out_len = len + 16;
    return r;
}

static int write_event(tb_writer *w, pbuf *ev, esp_err *err)
{
    size_t n;
    unsigned char *rec = tb_frame_record(ev->p, ev->len, &n);
    free(ev->p);
    *ev = (pbuf){0};
    size_t done = 0;
    while (done < n) {
        ssize_t k = write(w->fd, rec + done, n - done);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            int e = errno;
            free(rec);
            return esp_fail(err, "%s: write failed: %s (check free disk space)", w->path, strerror(e));
        }
        done += (size_t)k;
    }
    free(rec);
    return 0;
}

double tb_wall_time(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + (double)tv.tv_usec * 1e-6;
}

/* Several writers in one process get distinct names, like tensorboard's _global_uid. */
static atomic_uint file_counter;

int tb_open(tb_writer *w, const char *logdir, int64_t purge_step, esp_err *err)
{
    w->fd = -1;
    w->path = NULL;
    if (mkdir_p(logdir, err) != 0) return -1;
    char host[256] = "localhost";
    if (gethostname(host, sizeof host) != 0) strcpy(host, "localhost");
    host[sizeof host - 1] = '\0';
    double now = tb_wall_time();
    unsigned uid = atomic_fetch_add(&file_counter, 1);
    char *name = xasprintf("events.out.tfevents.%010lld.%s.%ld.%u", (long long)now, host, (long)getpid(), uid);
    w->path = path_join(logdir, name);
    free(name);
    w->fd = open(w->path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0666);
    if (w->fd < 0) {
        int e = errno;
        esp_fail(err, "%s: cannot create event file: %s", w->path, strerror(e));
        tb_close(w);
        return -1;
    }
    pbuf ev = {0};
    event_head(&ev, now, 0);
    static const char version[] = "brain.Event:2";
    pb_lenfield(&ev, EVENT_FILE_VERSION, version, sizeof version - 1);
    if (write_event(w, &ev, err) != 0) goto fail;
    /* SessionLog START on every open: TensorBoard's server ignores the first START of a run and
     * on each later one drops the events already seen at steps >= its step (a resumed run's restart). */
    pbuf sl = {0};
    pb_key(&sl, SESSION_LOG_STATUS, WT_VARINT);
    pb_varint(&sl, SESSION_LOG_START);
    event_head(&ev, now, purge_step > 0 ? purge_step : 0);
    pb_lenfield(&ev, EVENT_SESSION_LOG, sl.p, sl.len);
    free(sl.p);
    if (write_event(w, &ev, err) != 0) goto fail;
    return 0;
fail:
    tb_close(w);
    return -1;
}

int tb_add_scalars(tb_writer *w, int64_t step, double wall_time, const char *const *tags, const float *values,
                   size_t n, esp_err *err)
{
    ESP_CHECK(w->fd >= 0);
    pbuf summary = {0}, value = {0}, ev = {0};
    for (size_t i = 0; i < n; i++) {
        value.len = 0;
        pb_lenfield(&value, VALUE_TAG, tags[i], strlen(tags[i]));
        pb_float(&value, VALUE_SIMPLE_VALUE, values[i]);
        pb_lenfield(&summary, SUMMARY_VALUE, value.p, value.len);
    }
    event_head(&ev, wall_time < 0 ? tb_wall_time() : wall_time, step);
    pb_lenfield(&ev, EVENT_SUMMARY, summary.p, summary.len);
    free(summary.p);
    free(value.p);
    return write_event(w, &ev, err);
}

int tb_add_scalar(tb_writer *w, const char *tag, float value, int64_t step, esp_err *err)
{
    return tb_add_scalars(w, step, -1, &tag, &value, 1, err);
}

void tb_close(tb_writer *w)
{
    if (w->fd >= 0) close(w->fd);
    free(w->path);
    w->fd = -1;
    w->path = NULL;
}
