/* Logging, user errors and invariant checks shared by every part of espnet3.
 *
 * User errors are one line on stderr: "espnet3: error: <where>: <what> (<hint>)"
 * followed by a non-zero exit. Broken invariants abort with file:line. */
#ifndef ESPNET3_LOG_H
#define ESPNET3_LOG_H

#include <stdarg.h>
#include <stddef.h>

/* Exit statuses: 1 for a failed run (bad config, missing input), 2 for bad usage, 75 (sysexits'
 * EX_TEMPFAIL) for a run that stopped early on request with a checkpoint to resume from (stage 5
 * on SIGTERM / SIGUSR1 or trainer.max_time): a SLURM job script requeues on it. */
enum { ESP_EXIT_FAIL = 1, ESP_EXIT_USAGE = 2, ESP_EXIT_STOPPED = 75 };

/* An error value that functions fill instead of exiting, so tests can assert on it. */
typedef struct esp_err {
    char msg[2048];
} esp_err;

/* Fills err->msg with printf-style text and returns -1 (so callers can `return esp_fail(...)`).
 * A text longer than msg is shortened in the middle (" [...] "), so its end, the hint, stays. */
int esp_fail(esp_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* s for a one-line message, in buf (cap bytes; a name cut to fit ends in "..."): control bytes written as \xNN, so a
 * newline in a name or field read from a hostile file cannot split the line. Returns buf. */
const char *esp_shown(const char *s, char *buf, size_t cap);

/* Prints "espnet3: error: <msg>" and exits with ESP_EXIT_FAIL. */
_Noreturn void esp_die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
_Noreturn void esp_die_err(const esp_err *err);

/* Log lines: "YYYY-mm-dd HH:MM:SS | LEVEL | message" on stderr and, when set, the stage log. */
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_vwrite(const char *level, const char *fmt, va_list ap);

/* Mirror log lines into this file (NULL stops mirroring). */
void log_set_file(void *fp /* FILE* */);
/* Silence info lines on stderr (warnings and errors still show); used by --quiet and tests. */
void log_set_quiet(int quiet);

/* Aborts with file:line when an invariant does not hold; active in every build. */
#define ESP_CHECK(cond)                                                                  \
    do {                                                                                 \
        if (!(cond)) esp_abort_at(__FILE__, __LINE__, #cond);                            \
    } while (0)
_Noreturn void esp_abort_at(const char *file, int line, const char *what);

/* Allocation that aborts on failure: running out of memory is not a user error we can explain. */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
