/* Rendezvous: a small TCP key-value store that rank 0 serves (torch's TCPStore idea, our own wire
 * format). Every rank, rank 0 included, is a client: set, get (waits until the key exists), add.
 *
 * A client says hello with its run id, rank and world size; the server refuses a hello whose run
 * id or world size differs from its own (a rank of another run, or a stale server still holding
 * the port) and a rank that already joined. Every wait ends after `timeout_s` with an error that
 * says what was awaited (callers name the rank: "rank 3's address"). */
#ifndef ESPNET3_DIST_STORE_H
#define ESPNET3_DIST_STORE_H

#include <stddef.h>
#include <stdint.h>
#include "core/base/log.h"

typedef struct dist_store dist_store;

/* Rank 0 (serve = 1) binds host:port and serves from a thread; every rank then connects, retrying
 * until timeout_s while the server is not up yet. */
dist_store *store_open(const char *host, int port, int serve, const char *run_id, int rank, int world_size,
                       double timeout_s, esp_err *err);
/* Closes the connection; on rank 0 also stops the server (call after a final barrier). */
void store_close(dist_store *s);

int store_set(dist_store *s, const char *key, const void *val, size_t n, esp_err *err);
/* Waits for key (up to the timeout); *val is malloc'ed and NUL-terminated. `who` names what the
 * wait is for in the timeout error ("rank 1's address"). */
int store_get(dist_store *s, const char *key, const char *who, char **val, size_t *n, esp_err *err);
/* Atomically adds delta to the integer at key (absent = 0); *out gets the new value. */
int store_add(dist_store *s, const char *key, int64_t delta, int64_t *out, esp_err *err);

/* Every rank adds itself to key and waits until all world_size have; a timeout names the ranks
 * that did not arrive (each rank also sets "<key>/<rank>"). */
int store_barrier(dist_store *s, const char *key, esp_err *err);

/* Liveness: the first rank whose connection to the store ended (a process that died or closed
 * its store after an error), -1 while every rank is connected. A device comm, whose collectives
 * cannot see a dead peer themselves, polls it while it waits. */
int store_dead_rank(dist_store *s, int *rank, esp_err *err);

/* An opaque blob that one rank makes and every rank needs (NCCL's 128-byte unique id): the rank
 * with make_it set calls make(blob, n, ctx) and publishes the bytes at key; the others wait for
 * key (up to the timeout; `who` names it in the error) and get exactly n bytes. */
int store_share_blob(dist_store *s, const char *key, int make_it,
                     int (*make)(void *blob, size_t n, void *ctx, esp_err *err), void *ctx, void *blob, size_t n,
                     const char *who, esp_err *err);

/* The local address of the connection to the server: the interface other hosts reach us on. */
const char *store_local_addr(const dist_store *s);
/* The master address this store was opened with. */
const char *store_host(const dist_store *s);

#endif
