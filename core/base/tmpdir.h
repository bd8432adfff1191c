/* Temporary folders that vanish on every way out: $TMPDIR/espnet3_<tag>_XXXXXX, removed by their
 * maker on success and on error (tmpdir_remove), and by a handler of SIGINT, SIGTERM and SIGHUP
 * when one of those ends the process (Ctrl-C, scancel, a parent's death: stage-6 workers get
 * SIGTERM then). Only SIGKILL can leave one behind. A forked child never removes its parent's. */
#ifndef ESPNET3_TMPDIR_H
#define ESPNET3_TMPDIR_H

#include "core/base/log.h"

/* Makes and remembers the folder; NULL with err when it cannot be made. Caller frees via tmpdir_remove. */
char *tmpdir_make(const char *tag, esp_err *err);
/* Removes the folder and all in it, forgets it and frees `dir` (NULL: nothing). */
void tmpdir_remove(char *dir);

#endif
