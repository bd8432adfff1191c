#include "core/base/progress.h"
#include "core/base/log.h"

#include <stdio.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double peak_rss_mib(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0; /* KiB on Linux */
}

static void format_eta(double s, char *buf, size_t n)
{
    if (s < 0 || s > 1e7) {
        snprintf(buf, n, "?");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(buf, n, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60) snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
    else snprintf(buf, n, "%lds", t);
}

static void print_line(progress *p, int final)
{
    double el = now_seconds() - p->start;
    double rate = el > 0 ? (double)p->done / el : 0;
    char eta[32];
    format_eta(rate > 0 ? (double)(p->total - p->done) / rate : -1, eta, sizeof eta);
    if (p->tty) {
        fprintf(stderr, "\r%s: %zu/%zu (%.0f%%) %.1f items/s ETA %s\033[K%s", p->label, p->done,
                p->total, p->total ? 100.0 * (double)p->done / (double)p->total : 100.0, rate, eta,
                final ? "\n" : "");
        fflush(stderr);
    } else {
        log_info("%s: %zu/%zu (%.0f%%) %.1f items/s ETA %s", p->label, p->done, p->total,
                 p->total ? 100.0 * (double)p->done / (double)p->total : 100.0, rate, eta);
    }
}

void progress_start(progress *p, const char *label, size_t total)
{
    p->label = label;
    p->total = total;
    p->done = 0;
    p->start = p->last_print = now_seconds();
    p->tty = isatty(STDERR_FILENO);
}

void progress_update(progress *p, size_t done)
{
    p->done = done;
    double t = now_seconds();
    double every = p->tty ? 0.2 : 5.0;
    if (t - p->last_print >= every) {
        p->last_print = t;
        print_line(p, 0);
    }
}

void progress_finish(progress *p)
{
    p->done = p->total;
    print_line(p, 1);
}
