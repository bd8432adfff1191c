/* A lock on an output folder, so two runs never write the same experiment: flock() on
 * <dir>/.espnet3.lock, which also holds the owner's pid, host and what it runs. The kernel drops
 * the lock when its process dies, so a crashed run never blocks the next one; a lock file left
 * with a dead owner's line is taken over with a warning naming it. */
#ifndef ESPNET3_BASE_DIRLOCK_H
#define ESPNET3_BASE_DIRLOCK_H

#include "core/base/log.h"

typedef struct dir_lock {
    int fd;     /* -1 when not held */
    char *path; /* the lock file */
} dir_lock;

/* Takes the lock of an existing folder for `what` (e.g. "stage train"). Another live holder: -1
 * with an error naming its pid, host and what it runs; nothing is changed. */
int dir_lock_take(dir_lock *l, const char *dir, const char *what, esp_err *err);
/* Releases it and removes the lock file (no-op when not held). */
void dir_lock_release(dir_lock *l);

#endif
