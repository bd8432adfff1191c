/* Temporary folders removed on every exit path, signals included (see tmpdir.h). The signal
 * handler only does async-signal-safe things: it forks `rm -rf` for the folders this process
 * made, waits, then lets the signal end the process as it would have. */
#include "core/base/tmpdir.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/base/fsio.h"

/* A process holds a few at once (an unpacked model zip, its rewritten config, an LM's). */
enum { TMPDIR_SLOTS = 16 };

static struct {
    volatile pid_t owner; /* 0: free */
    char path[PATH_MAX];
} slots[TMPDIR_SLOTS];

static const int handled[] = {SIGINT, SIGTERM, SIGHUP};
static struct sigaction previous[sizeof handled / sizeof *handled];

static void on_signal(int sig)
{
    size_t k = 0;
    while (k < sizeof handled / sizeof *handled && handled[k] != sig) k++;
    /* Only when the signal would end the process: a handler before ours (the launcher's) or an
     * ignored signal keeps it running, with its folders. */
    int ends = previous[k].sa_handler == SIG_DFL;
    pid_t self = getpid();
    for (int i = 0; ends && i < TMPDIR_SLOTS; i++) {
        if (slots[i].owner != self) continue;
        pid_t pid = fork();
        if (pid == 0) {
            char *const argv[] = {"rm", "-rf", "--", slots[i].path, NULL};
            char *const envp[] = {NULL};
            execve("/bin/rm", argv, envp);
            _exit(127);
        }
        if (pid > 0) waitpid(pid, NULL, 0);
        slots[i].owner = 0;
    }
    sigaction(sig, &previous[k], NULL);
    if (previous[k].sa_handler == SIG_DFL) raise(sig);
    else if (previous[k].sa_handler != SIG_IGN) previous[k].sa_handler(sig);
}

/* Our handler for each signal, unless it is there already: a forked child inherits it with the
 * parent's `previous`, and saving it again would make it its own previous handler (a loop). */
static void install_once(void)
{
    struct sigaction sa = {.sa_handler = on_signal}, cur;
    sigemptyset(&sa.sa_mask);
    for (size_t k = 0; k < sizeof handled / sizeof *handled; k++)
        if (sigaction(handled[k], NULL, &cur) == 0 && cur.sa_handler != on_signal)
            sigaction(handled[k], &sa, &previous[k]);
}

char *tmpdir_make(const char *tag, esp_err *err)
{
    const char *td = getenv("TMPDIR");
    char *dir = xasprintf("%s/espnet3_%s_XXXXXX", td && *td ? td : "/tmp", tag);
    if (strlen(dir) >= PATH_MAX || !mkdtemp(dir)) {
        esp_fail(err, "%s: cannot make a temporary folder (check TMPDIR)", dir);
        free(dir);
        return NULL;
    }
    int i = 0;
    while (i < TMPDIR_SLOTS && slots[i].owner == getpid()) i++; /* a parent's slot is free here */
    ESP_CHECK(i < TMPDIR_SLOTS); /* more live temporary folders than any stage makes */
    install_once();
    snprintf(slots[i].path, sizeof slots[i].path, "%s", dir);
    slots[i].owner = getpid();
    return dir;
}

void tmpdir_remove(char *dir)
{
    if (!dir) return;
    remove_tree(dir); /* then forgotten: a signal meanwhile finds it still listed and finishes it */
    for (int i = 0; i < TMPDIR_SLOTS; i++)
        if (slots[i].owner == getpid() && !strcmp(slots[i].path, dir)) slots[i].owner = 0;
    free(dir);
}
