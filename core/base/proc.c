#include "core/base/proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

void proc_buf_append(proc_buf *b, const void *src, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        while (b->len + n + 1 > b->cap) b->cap = b->cap ? 2 * b->cap : 65536;
        b->data = xrealloc(b->data, b->cap);
    }
    memcpy(b->data + b->len, src, n);
    b->len += n;
    b->data[b->len] = 0;
}

int proc_run_capture(char *const argv[], proc_buf *out, proc_buf *err_text, size_t err_cap, int *status,
                     esp_err *err)
{
    int out_pipe[2], err_pipe[2] = {-1, -1};
    if (pipe2(out_pipe, O_CLOEXEC) != 0) return esp_fail(err, "pipe: %s", strerror(errno));
    if (err_text && pipe2(err_pipe, O_CLOEXEC) != 0) {
        close(out_pipe[0]);
        close(out_pipe[1]);
        return esp_fail(err, "pipe: %s", strerror(errno));
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, out_pipe[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, err_text ? err_pipe[1] : out_pipe[1], STDERR_FILENO);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(out_pipe[1]);
    if (err_text) close(err_pipe[1]);
    if (rc != 0) {
        close(out_pipe[0]);
        if (err_text) close(err_pipe[0]);
        return rc;
    }
    /* Both pipes are drained together, so a child filling one never blocks on the other. */
    struct pollfd fds[2] = {{.fd = out_pipe[0], .events = POLLIN}, {.fd = err_pipe[0], .events = POLLIN}};
    int open_fds = err_text ? 2 : 1;
    unsigned char buf[65536];
    /* stderr past its first err_cap bytes: the last err_cap of them, in a ring */
    unsigned char *ring = err_text && err_cap ? xmalloc(err_cap) : NULL;
    size_t past = 0;
    while (open_fds > 0) {
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            ssize_t got = read(fds[i].fd, buf, sizeof buf);
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0) {
                close(fds[i].fd);
                fds[i].fd = -1;
                open_fds--;
            } else if (i == 0) {
                proc_buf_append(out, buf, (size_t)got);
            } else {
                size_t room = err_text->len < err_cap ? err_cap - err_text->len : 0;
                size_t keep = (size_t)got < room ? (size_t)got : room;
                if (keep) proc_buf_append(err_text, buf, keep);
                for (size_t k = keep; ring && k < (size_t)got; k++) ring[past++ % err_cap] = buf[k];
            }
        }
    }
    if (past && past <= err_cap) {
        proc_buf_append(err_text, ring, past);
    } else if (past) {
        size_t start = past % err_cap; /* the oldest byte kept */
        proc_buf_append(err_text, "\n[...]\n", 7);
        proc_buf_append(err_text, ring + start, err_cap - start);
        proc_buf_append(err_text, ring, start);
    }
    free(ring);
    for (int i = 0; i < 2; i++)
        if (fds[i].fd >= 0) close(fds[i].fd);
    while (waitpid(pid, status, 0) < 0)
        if (errno != EINTR) return esp_fail(err, "%s: waitpid: %s", argv[0], strerror(errno));
    return 0;
}
