#include "core/base/dirlock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* The owner line of a lock file ("" when empty or unreadable), without its newline. Only a line in
 * the form espnet3 writes ("pid N on host, what") is shown: a file that someone else wrote is not
 * echoed into messages. */
static void read_owner(int fd, char *buf, size_t n)
{
    char raw[512];
    ssize_t got = pread(fd, raw, sizeof raw - 1, 0);
    raw[got > 0 ? got : 0] = '\0';
    raw[strcspn(raw, "\n")] = '\0';
    long pid;
    if (!raw[0]) buf[0] = '\0';
    else if (sscanf(raw, "pid %ld on ", &pid) == 1 && pid > 0) esp_shown(raw, buf, n);
    else snprintf(buf, n, "a line espnet3 did not write");
}

/* The lock file is ours only as a regular file of this user: a symlink (opened with O_NOFOLLOW),
 * a FIFO or device, or another user's file is refused, never written through. */
static int check_lock_file(int fd, const char *path, esp_err *err)
{
    struct stat st;
    if (fstat(fd, &st) != 0) return esp_fail(err, "%s: cannot stat the lock file: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return esp_fail(err, "%s: not a regular file (espnet3 keeps its lock there; remove it and rerun)", path);
    if (st.st_uid != geteuid())
        return esp_fail(err, "%s: owned by another user (uid %ld; espnet3 writes its lock only into its own file)",
                        path, (long)st.st_uid);
    return 0;
}

int dir_lock_take(dir_lock *l, const char *dir, const char *what, esp_err *err)
{
    l->fd = -1;
    l->path = xasprintf("%s/.espnet3.lock", dir);
    /* O_NOFOLLOW: a symlink named .espnet3.lock is refused, not followed to a file it would clobber;
     * O_NONBLOCK: a FIFO there does not hang the open. */
    int fd = open(l->path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    if (fd < 0) {
        if (errno == ELOOP)
            esp_fail(err, "%s: a symbolic link (espnet3 keeps its lock there and does not follow links; remove it "
                          "and rerun)", l->path);
        else esp_fail(err, "%s: cannot open the folder's lock file: %s", l->path, strerror(errno));
        free(l->path), l->path = NULL;
        return -1;
    }
    if (check_lock_file(fd, l->path, err) != 0) {
        close(fd);
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
