/* Running a helper program (espeak-ng, sbatch, squeue, ...) and collecting what it prints. */
#ifndef ESPNET3_PROC_H
#define ESPNET3_PROC_H

#include <stddef.h>

#include "core/base/log.h"

/* A growable byte buffer, always NUL-terminated once something was appended. */
typedef struct proc_buf {
    unsigned char *data;
    size_t len, cap;
} proc_buf;

void proc_buf_append(proc_buf *b, const void *src, size_t n);

/* Runs argv[0] from PATH with stdin from /dev/null. stdout goes to *out; stderr to *err_text,
 * keeping its first err_cap bytes and its last err_cap bytes (a tool's usage error is at the start,
 * a Python traceback's exception at the end; "\n[...]\n" between them when some were dropped), or
 * into *out as well when err_text is NULL. Returns 0 with the wait status in *status, -1 with err filled (pipe, waitpid),
 * or posix_spawn's error number (> 0, e.g. ENOENT) when the program could not start. */
int proc_run_capture(char *const argv[], proc_buf *out, proc_buf *err_text, size_t err_cap, int *status,
                     esp_err *err);

#endif
