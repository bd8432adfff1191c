/* runner_buf: the growable buffer forward() appends an item's result to (see runner.h). */
#include "core/runner/runner.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void buf_reserve(runner_buf *b, size_t need)
{
    if (need <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) cap *= 2;
    b->data = xrealloc(b->data, cap);
    b->cap = cap;
}

void runner_buf_append(runner_buf *b, const void *data, size_t len)
{
    buf_reserve(b, b->len + len);
    if (len) memcpy(b->data + b->len, data, len);
    b->len += len;
}

void runner_buf_printf(runner_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    ESP_CHECK(n >= 0);
    buf_reserve(b, b->len + (size_t)n + 1); /* vsnprintf's NUL is written but not kept */
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void runner_buf_free(runner_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
