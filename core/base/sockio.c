/* Blocking socket I/O (see sockio.h). */
#include "core/base/sockio.h"

#include <errno.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

int sock_send_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k, n -= (size_t)k;
    }
    return 0;
}

int sock_recv_all(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n) {
        ssize_t k = recv(fd, p, n, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k, n -= (size_t)k;
    }
    return 0;
}

int sock_connect(const char *host, const char *port)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(host, port, &hints, &res) != 0 || !res) return -2;
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int e = errno;
    if (fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
        e = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    errno = e; /* why socket or connect failed, not what close or freeaddrinfo left */
    return fd;
}
