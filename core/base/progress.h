/* Progress of long work: items done, rate and ETA. On a terminal one line redrawn in place;
 * otherwise a plain log line every few seconds (and at the end), so batch logs stay readable. */
#ifndef ESPNET3_PROGRESS_H
#define ESPNET3_PROGRESS_H

#include <stddef.h>

typedef struct progress {
    const char *label;
    size_t total, done;
    double start, last_print;
    int tty;
} progress;

void progress_start(progress *p, const char *label, size_t total);
void progress_update(progress *p, size_t done);
void progress_finish(progress *p);
/* Seconds since an arbitrary point, monotonic. */
double now_seconds(void);
/* This process's peak resident memory so far, in MiB (getrusage's ru_maxrss). */
double peak_rss_mib(void);

#endif
