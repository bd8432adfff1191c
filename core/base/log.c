#include "core/base/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static FILE *log_fp;
static int log_quiet;

void log_set_file(void *fp) { log_fp = fp; }
void log_set_quiet(int quiet) { log_quiet = quiet; }

const char *esp_shown(const char *s, char *buf, size_t cap)
{
    size_t o = 0;
    for (; s && *s && o + 5 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7f)
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
        else
            buf[o++] = (char)c;
    }
    if (cap) buf[o] = '\0';
    return buf;
}

int esp_fail(esp_err *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return -1;
}

static void write_error_line(const char *msg)
{
    fprintf(stderr, "espnet3: error: %s\n", msg);
    if (log_fp) {
        fprintf(log_fp, "espnet3: error: %s\n", msg);
        fflush(log_fp);
    }
}

void esp_die(const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    write_error_line(buf);
    exit(ESP_EXIT_FAIL);
}

void esp_die_err(const esp_err *err)
{
    write_error_line(err->msg);
    exit(ESP_EXIT_FAIL);
}

void log_vwrite(const char *level, const char *fmt, va_list ap)
{
    char stamp[32], msg[4096];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm);
    vsnprintf(msg, sizeof msg, fmt, ap);
    int is_info = strcmp(level, "INFO") == 0;
    if (!(is_info && log_quiet)) fprintf(stderr, "%s | %s | %s\n", stamp, level, msg);
    if (log_fp) {
        fprintf(log_fp, "%s | %s | %s\n", stamp, level, msg);
        fflush(log_fp);
    }
}

void log_info(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vwrite("INFO", fmt, ap);
    va_end(ap);
}

void log_warn(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vwrite("WARNING", fmt, ap);
    va_end(ap);
}

void esp_abort_at(const char *file, int line, const char *what)
{
    fprintf(stderr, "espnet3: internal error: %s:%d: invariant failed: %s\n", file, line, what);
    abort();
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) esp_abort_at(__FILE__, __LINE__, "out of memory");
    return p;
}

void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) esp_abort_at(__FILE__, __LINE__, "out of memory");
    return p;
}

void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p) esp_abort_at(__FILE__, __LINE__, "out of memory");
    return p;
}

char *xstrdup(const char *s) { return xstrndup(s, strlen(s)); }

char *xstrndup(const char *s, size_t n)
{
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *out = NULL;
    int n = vasprintf(&out, fmt, ap);
    va_end(ap);
    if (n < 0) esp_abort_at(__FILE__, __LINE__, "out of memory");
    return out;
}
