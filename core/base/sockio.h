/* Blocking socket I/O shared by the rendezvous store and the CPU collectives (core/dist) and the
 * local runner's worker pipes (core/runner): whole-buffer send and receive, and a TCP connect by
 * host and port. Sends use MSG_NOSIGNAL, so a peer that is gone is an error, not SIGPIPE. */
#ifndef ESPNET3_SOCKIO_H
#define ESPNET3_SOCKIO_H

#include <stddef.h>

/* Sends all n bytes (short sends and EINTR retried): 0, or -1 when the peer is gone or on error. */
int sock_send_all(int fd, const void *buf, size_t n);

/* Receives exactly n bytes: 0, or -1 on end of file before n, an error, or a receive timeout
 * (SO_RCVTIMEO). */
int sock_recv_all(int fd, void *buf, size_t n);

/* A blocking IPv4 TCP connection to host:port (close-on-exec): the fd, -1 when the connection is
 * refused or fails (errno says why), -2 when host does not resolve. */
int sock_connect(const char *host, const char *port);

#endif
