#include "core/base/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static FILE *log_fp;
static int log_quiet;

void log_set_file(void *fp) { log_fp = fp; }
void log_set_quiet(int quiet) { log_quiet = quiet; }

/* The length of s[0..n) without a UTF-8 character cut off at its end. */
static size_t utf8_whole(const char *s, size_t n)
{
    size_t lead = n;
    while (lead > 0 && n - lead < 4 && ((unsigned char)s[lead - 1] & 0xc0) == 0x80) lead--;
    if (lead == 0) return n;
    unsigned char c = (unsigned char)s[lead - 1];
    size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    return len > 1 && n - (lead - 1) < len ? lead - 1 : n;
}

static size_t shown_width(unsigned char c) { return c < 0x20 || c == 0x7f ? 4 : 1; }

const char *esp_shown(const char *s, char *buf, size_t cap)
{
    if (!cap) return buf;
    size_t need = 0;
    for (const char *p = s; p && *p; p++) need += shown_width((unsigned char)*p);
    /* a name that does not fit keeps room for "..." */
    size_t room = need < cap ? cap - 1 : cap > 4 ? cap - 4 : 0, o = 0;
    const char *p = s;
    for (; p && *p && o + shown_width((unsigned char)*p) <= room; p++) {
        unsigned char c = (unsigned char)*p;
        if (shown_width(c) == 4)
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
        else
            buf[o++] = (char)c;
    }
    if (p && *p && cap > 4) {
        o = utf8_whole(buf, o);
        memcpy(buf + o, "...", 3), o += 3;
    }
    buf[o] = '\0';
    return buf;
}

/* fmt's text into dst (cap bytes). Too long a text is shortened in the middle, not at its end, so
 * the end of a message (its hint, the file it names last) survives a long path or nested error. */
static void format_fitted(char *dst, size_t cap, const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(dst, cap, fmt, ap);
    if (n < 0 || (size_t)n < cap) {
        va_end(again);
        return;
    }
    char *full = malloc((size_t)n + 1);
    if (!full) {
        va_end(again);
        return; /* the cut at the end stays */
    }
    vsnprintf(full, (size_t)n + 1, fmt, again);
    va_end(again);
    static const char mark[] = " [...] ";
    size_t tail = cap / 3, head = utf8_whole(full, cap - 1 - tail - (sizeof mark - 1));
    size_t from = (size_t)n - tail;
    while (from < (size_t)n && ((unsigned char)full[from] & 0xc0) == 0x80) from++;
    memcpy(dst, full, head);
    memcpy(dst + head, mark, sizeof mark - 1);
    memcpy(dst + head + sizeof mark - 1, full + from, (size_t)n - from + 1);
    free(full);
}

int esp_fail(esp_err *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    format_fitted(err->msg, sizeof err->msg, fmt, ap);
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
    format_fitted(buf, sizeof buf, fmt, ap);
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
    format_fitted(msg, sizeof msg, fmt, ap);
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
