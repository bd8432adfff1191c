#include "core/base/dirlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* The owner line of a lock file ("" when empty or unreadable), without its newline. */
static void read_owner(int fd, char *buf, size_t n)
{
    ssize_t got = pread(fd, buf, n - 1, 0);
    buf[got > 0 ? got : 0] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
}

int dir_lock_take(dir_lock *l, const char *dir, const char *what, esp_err *err)
{
    l->fd = -1;
    l->path = xasprintf("%s/.espnet3.lock", dir);
    int fd = open(l->path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        esp_fail(err, "%s: cannot open the folder's lock file: %s", l->path, strerror(errno));
        free(l->path), l->path = NULL;
        return -1;
    }
    char owner[512];
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        read_owner(fd, owner, sizeof owner);
        close(fd);
        if (e == EWOULDBLOCK)
            esp_fail(err, "%s: in use by another espnet3 run (%s) (wait for it to finish or stop it; nothing was "
                          "changed)", dir, owner[0] ? owner : "owner unknown");
        else
            esp_fail(err, "%s: cannot lock: %s", l->path, strerror(e));
        free(l->path), l->path = NULL;
        return -1;
    }
    /* Held. A line left behind belongs to a run that died without releasing: say whose. */
    read_owner(fd, owner, sizeof owner);
    if (owner[0]) log_warn("%s: taking over the lock of a run that is no longer alive (%s)", dir, owner);
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    char line[512];
    int len = snprintf(line, sizeof line, "pid %ld on %s, %s\n", (long)getpid(), host, what);
    if (ftruncate(fd, 0) != 0 || pwrite(fd, line, (size_t)len, 0) != len)
        log_warn("%s: cannot record the lock's owner: %s", l->path, strerror(errno));
    l->fd = fd;
    return 0;
}

void dir_lock_release(dir_lock *l)
{
    if (l->fd >= 0) {
        /* Remove the file while still holding the lock, so a waiting run never sees our line. */
        unlink(l->path);
        close(l->fd);
    }
    l->fd = -1;
    free(l->path);
    l->path = NULL;
}
