/* Collectives on CPUs: a ring (Patarasuk & Yuan's bandwidth-optimal all_reduce: reduce_scatter
 * then all_gather, each rank sending 2 (W-1)/W of the buffer). Rank r sends only to r + 1 and
 * receives only from r - 1. A peer_link is
 *   - shared memory when both ranks are on one node: one segment per node holds, for each local
 *     rank, its inbound byte ring (from its predecessor) and a futex doorbell that producer and
 *     consumer ring after each step, so a waiting rank sleeps instead of spinning;
 *   - a TCP socket otherwise (non-blocking, polled).
 * Sending and receiving progress together in one loop, so rings smaller than a chunk never
 * deadlock; received floats are reduced straight from the shared ring. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/dist/comm.h"
#include "core/dist/dist_store.h"
#include "core/base/hash.h"
#include "core/base/progress.h"
#include "core/base/sockio.h"

#define RING_BYTES ((size_t)4 << 20)
#define TCP_STAGE ((size_t)1 << 20)

/* One local rank's part of the node segment (cache-line separated counters). */
typedef struct shm_slot {
    _Atomic uint32_t bell; /* bumped when this rank may make progress */
    _Atomic uint32_t sleeping; /* set while this rank waits on bell: only then is a wake-up needed */
    char pad0[56];
    _Atomic uint64_t head; /* bytes written into ring, ever */
    char pad1[56];
    _Atomic uint64_t tail; /* bytes read from ring, ever */
    char pad2[56];
    int32_t pid;
    char pad3[60];
    unsigned char ring[RING_BYTES];
} shm_slot;

typedef struct peer_link {
    int peer;         /* rank at the other end; -1: none */
    int tcp;          /* 0: shared memory */
    int fd;
    shm_slot *slot;   /* the ring (the receiver's slot) */
    shm_slot *other;  /* the slot whose bell to ring (the other end's) */
    unsigned char *stage; /* TCP receive staging for reductions */
    size_t stage_n;
} peer_link;

typedef struct comm_cpu {
    comm base;
    double timeout;
    shm_slot *slots;
    size_t map_bytes;
    int n_local, my_local;
    peer_link out, in; /* to rank + 1, from rank - 1 */
    char shm_name[96]; /* set while this rank must still unlink the segment's name */
} comm_cpu;

/* ---- waiting ---------------------------------------------------------------------------------- */

static void futex_wait(_Atomic uint32_t *addr, uint32_t val, long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT, val, &ts, NULL, 0);
}

static void ring_bell(shm_slot *s)
{
    atomic_fetch_add(&s->bell, 1);
    if (atomic_load(&s->sleeping)) syscall(SYS_futex, (uint32_t *)&s->bell, FUTEX_WAKE, 1, NULL, NULL, 0);
}

/* A local peer is gone when its pid no longer exists or is a zombie. */
static int pid_gone(pid_t pid)
{
    if (pid <= 0) return 0;
    if (kill(pid, 0) != 0 && errno == ESRCH) return 1;
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *fp = fopen(path, "r");
    if (!fp) return 1;
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

/* ---- one transfer: send sn bytes to out while receiving rn bytes from in --------------------- */

typedef struct xfer {
    const unsigned char *sbuf;
    size_t sn, sdone;
    int limit_by_recv; /* broadcast relay: send only what has arrived */
    unsigned char *rbuf;
    size_t rn, rdone;
    int reduce;        /* 0 copy; else 1 + comm_op of floats */
} xfer;

static void reduce_into(float *dst, const unsigned char *src, size_t bytes, int op)
{
    size_t n = bytes / sizeof(float);
    float tmp[1024];
    for (size_t i = 0; i < n;) {
        size_t k = n - i < 1024 ? n - i : 1024;
        memcpy(tmp, src + i * sizeof(float), k * sizeof(float));
        float *d = dst + i;
        switch (op) {
        case COMM_MIN:
            for (size_t j = 0; j < k; j++) d[j] = tmp[j] < d[j] ? tmp[j] : d[j];
            break;
        case COMM_MAX:
            for (size_t j = 0; j < k; j++) d[j] = tmp[j] > d[j] ? tmp[j] : d[j];
            break;
        default:
            for (size_t j = 0; j < k; j++) d[j] += tmp[j];
        }
        i += k;
    }
}

static size_t pad4(size_t n) { return (4 - (n & 3)) & 3; }

/* Progress on the send side; returns bytes moved, -1 on a dead TCP peer. */
static ssize_t send_some(comm_cpu *c, xfer *x)
{
    peer_link *l = &c->out;
    size_t limit = x->limit_by_recv ? x->rdone : x->sn;
    if (x->sdone >= limit) return 0;
    size_t want = limit - x->sdone;
    if (l->tcp) {
        ssize_t k = send(l->fd, x->sbuf + x->sdone, want, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
        x->sdone += (size_t)k;
        return k;
    }
    uint64_t head = atomic_load_explicit(&l->slot->head, memory_order_relaxed);
    uint64_t tail = atomic_load_explicit(&l->slot->tail, memory_order_acquire);
    size_t space = RING_BYTES - (size_t)(head - tail), pos = (size_t)(head % RING_BYTES);
    size_t k = want < space ? want : space;
    if (k > RING_BYTES - pos) k = RING_BYTES - pos;
    if (!k) return 0;
    memcpy(l->slot->ring + pos, x->sbuf + x->sdone, k);
    x->sdone += k;
    /* Pad every message to 4 bytes so floats in the ring stay aligned for the next one. */
    size_t adv = k + (x->sdone == x->sn ? pad4(x->sn) : 0);
    atomic_store_explicit(&l->slot->head, head + adv, memory_order_release);
    ring_bell(l->other);
    return (ssize_t)k;
}

static ssize_t recv_some(comm_cpu *c, xfer *x)
{
    peer_link *l = &c->in;
    if (x->rdone >= x->rn) return 0;
    size_t want = x->rn - x->rdone;
    if (l->tcp) {
        if (!x->reduce) {
            ssize_t k = recv(l->fd, x->rbuf + x->rdone, want, MSG_DONTWAIT);
            if (k == 0) return -1;
            if (k < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
            x->rdone += (size_t)k;
            return k;
        }
        /* Reductions go through a staging buffer; whole floats are reduced as they arrive. */
        size_t room = TCP_STAGE - l->stage_n;
        if (room > want - l->stage_n) room = want - l->stage_n;
        ssize_t k = recv(l->fd, l->stage + l->stage_n, room, MSG_DONTWAIT);
        if (k == 0) return -1;
        if (k < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
        l->stage_n += (size_t)k;
        size_t whole = l->stage_n & ~(size_t)3;
        reduce_into((float *)(x->rbuf + x->rdone), l->stage, whole, x->reduce - 1);
        memmove(l->stage, l->stage + whole, l->stage_n - whole);
        l->stage_n -= whole;
        x->rdone += whole;
        return k;
    }
    uint64_t tail = atomic_load_explicit(&l->slot->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&l->slot->head, memory_order_acquire);
    size_t avail = (size_t)(head - tail), pos = (size_t)(tail % RING_BYTES);
    size_t k = want < avail ? want : avail;
    if (k > RING_BYTES - pos) k = RING_BYTES - pos;
    if (!k) return 0;
    if (x->reduce) reduce_into((float *)(x->rbuf + x->rdone), l->slot->ring + pos, k, x->reduce - 1);
    else memcpy(x->rbuf + x->rdone, l->slot->ring + pos, k);
    x->rdone += k;
    size_t adv = k + (x->rdone == x->rn ? pad4(x->rn) : 0);
    atomic_store_explicit(&l->slot->tail, tail + adv, memory_order_release);
    ring_bell(l->other);
    return (ssize_t)k;
}

static int run_xfer(comm_cpu *c, xfer *x, esp_err *err)
{
    double last = now_seconds(), checked = last;
    int idle = 0;
    _Atomic uint32_t *bell = c->slots ? &c->slots[c->my_local].bell : NULL;
    while (x->sdone < x->sn || x->rdone < x->rn) {
        uint32_t seen = bell ? atomic_load_explicit(bell, memory_order_acquire) : 0;
        ssize_t a = x->sdone < x->sn ? send_some(c, x) : 0;
        ssize_t b = x->rdone < x->rn ? recv_some(c, x) : 0;
        if (a < 0) return esp_fail(err, "comm: rank %d closed its connection (it died or failed; see its message)", c->out.peer);
        if (b < 0) return esp_fail(err, "comm: rank %d closed its connection (it died or failed; see its message)", c->in.peer);
        double now = now_seconds();
        if (a > 0 || b > 0) {
            last = now;
            idle = 0;
            continue;
        }
        /* Who holds us up: the sender when data is missing, else the receiver (ring full). */
        int recv_pending = x->rdone < x->rn && !(x->limit_by_recv && x->sdone < x->rdone);
        peer_link *blame = recv_pending ? &c->in : &c->out;
        if (now - last > c->timeout)
            return esp_fail(err, "comm: rank %d sent nothing for %.0f s (hung or stopped? trainer.dist_timeout sets the "
                                 "limit)", blame->peer, c->timeout);
        if (now - checked > 0.2) {
            checked = now;
            if (!c->in.tcp && c->in.peer >= 0 && pid_gone(c->in.other->pid))
                return esp_fail(err, "comm: rank %d died (process %d is gone)", c->in.peer, (int)c->in.other->pid);
            if (!c->out.tcp && c->out.peer >= 0 && pid_gone(c->out.slot->pid))
                return esp_fail(err, "comm: rank %d died (process %d is gone)", c->out.peer, (int)c->out.slot->pid);
        }
        int tcp_wait = (c->in.tcp && x->rdone < x->rn) || (c->out.tcp && x->sdone < x->sn);
        if (tcp_wait) {
            struct pollfd p[2];
            int np = 0;
            if (c->in.tcp && x->rdone < x->rn) p[np++] = (struct pollfd){.fd = c->in.fd, .events = POLLIN};
            if (c->out.tcp && x->sdone < x->sn) p[np++] = (struct pollfd){.fd = c->out.fd, .events = POLLOUT};
            int shm_too = (!c->in.tcp && c->in.peer >= 0) || (!c->out.tcp && c->out.peer >= 0);
            poll(p, (nfds_t)np, shm_too ? 1 : 100);
        } else if (bell) {
            /* Spin briefly (the peer is usually mid-copy), then sleep until it rings. */
            if (++idle < 200) {
#if defined(__x86_64__) || defined(__i386__)
                __builtin_ia32_pause();
#endif
                continue;
            }
            shm_slot *me = &c->slots[c->my_local];
            atomic_store(&me->sleeping, 1);
            if (atomic_load(bell) == seen) futex_wait(bell, seen, 100);
            atomic_store(&me->sleeping, 0);
        }
    }
    return 0;
}

/* ---- collectives ------------------------------------------------------------------------------ */

static int mod(int a, int w) { return ((a % w) + w) % w; }

static int exchange(comm_cpu *c, const void *sbuf, size_t sn, void *rbuf, size_t rn, int reduce, esp_err *err)
{
    xfer x = {.sbuf = sbuf, .sn = sn, .rbuf = rbuf, .rn = rn, .reduce = reduce};
    return run_xfer(c, &x, err);
}

static int cpu_reduce_scatter(comm *cb, float *buf, size_t n, comm_op op, esp_err *err)
{
    comm_cpu *c = (comm_cpu *)cb;
    int W = cb->world, r = cb->rank;
    int red = 1 + (op == COMM_AVG ? COMM_SUM : op);
    for (int s = 0; s < W - 1; s++) {
        size_t sb, se, rb, re;
        comm_chunk(n, W, mod(r - s - 1, W), &sb, &se);
        comm_chunk(n, W, mod(r - s - 2, W), &rb, &re);
        if (exchange(c, buf + sb, (se - sb) * sizeof(float), buf + rb, (re - rb) * sizeof(float), red, err) != 0) return -1;
    }
    if (op == COMM_AVG) {
        size_t b, e;
        comm_chunk(n, W, r, &b, &e);
        float inv = 1.0f / (float)W;
        /* (a + b) * 0.5 is what the one-rank mean of two gradients gives too. */
        for (size_t i = b; i < e; i++) buf[i] *= inv;
    }
    return 0;
}

static int cpu_all_gather(comm *cb, float *buf, size_t n, esp_err *err)
{
    comm_cpu *c = (comm_cpu *)cb;
    int W = cb->world, r = cb->rank;
    for (int s = 0; s < W - 1; s++) {
        size_t sb, se, rb, re;
        comm_chunk(n, W, mod(r - s, W), &sb, &se);
        comm_chunk(n, W, mod(r - s - 1, W), &rb, &re);
        if (exchange(c, buf + sb, (se - sb) * sizeof(float), buf + rb, (re - rb) * sizeof(float), 0, err) != 0) return -1;
    }
    return 0;
}

static int cpu_all_reduce(comm *cb, float *buf, size_t n, comm_op op, esp_err *err)
{
    if (cb->world == 1) return 0;
    if (cpu_reduce_scatter(cb, buf, n, op, err) != 0) return -1;
    return cpu_all_gather(cb, buf, n, err);
}

static int cpu_broadcast(comm *cb, void *buf, size_t bytes, int root, esp_err *err)
{
    comm_cpu *c = (comm_cpu *)cb;
    int W = cb->world, d = mod(cb->rank - root, W);
    if (W == 1) return 0;
    xfer x = {0};
    if (d == 0) x.sbuf = buf, x.sn = bytes;
    else {
        x.rbuf = buf, x.rn = bytes;
        if (d < W - 1) x.sbuf = buf, x.sn = bytes, x.limit_by_recv = 1;
    }
    return run_xfer(c, &x, err);
}

static int cpu_barrier(comm *cb, esp_err *err)
{
    float tiny[16] = {0};
    return cpu_all_reduce(cb, tiny, (size_t)(cb->world < 16 ? cb->world : 16), COMM_SUM, err);
}

static void cpu_destroy(comm *cb)
{
    comm_cpu *c = (comm_cpu *)cb;
    if (c->slots) munmap(c->slots, c->map_bytes);
    peer_link *ls[2] = {&c->in, &c->out};
    for (int i = 0; i < 2; i++) {
        if (ls[i]->tcp && ls[i]->fd >= 0) close(ls[i]->fd);
        free(ls[i]->stage);
    }
    if (c->shm_name[0]) shm_unlink(c->shm_name);
    free(c);
}

/* No asynchronous path: comm_all_reduce_start reduces at once (host buffers, one thread). */
static const comm_vtbl cpu_vtbl = {.all_reduce = cpu_all_reduce,
                                   .reduce_scatter = cpu_reduce_scatter,
                                   .all_gather = cpu_all_gather,
                                   .broadcast = cpu_broadcast,
                                   .barrier = cpu_barrier,
                                   .destroy = cpu_destroy};

/* ---- setup ------------------------------------------------------------------------------------ */

static int tcp_listen(int *fd_out, int *port_out, esp_err *err)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t al = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 8) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &al) != 0) {
        if (fd >= 0) close(fd);
        return esp_fail(err, "comm: cannot listen for peers: %s", strerror(errno));
    }
    *fd_out = fd;
    *port_out = ntohs(a.sin_port);
    return 0;
}

static void tune_socket(int fd)
{
    int one = 1, big = 4 << 20;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

/* The hello on a peer connection: run hash and the sender's rank. */
typedef struct peer_hello {
    uint64_t run;
    int32_t rank;
} peer_hello;

static int tcp_connect_next(comm_cpu *c, dist_store *st, uint64_t run, esp_err *err)
{
    char key[64], who[64], *addr = NULL;
    snprintf(key, sizeof key, "comm/tcp/%d", c->out.peer);
    snprintf(who, sizeof who, "rank %d's address", c->out.peer);
    if (store_get(st, key, who, &addr, NULL, err) != 0) return -1;
    char *colon = strrchr(addr, ':');
    ESP_CHECK(colon);
    *colon = '\0';
    int fd = sock_connect(addr, colon + 1);
    if (fd < 0) {
        esp_fail(err, "comm: cannot connect to rank %d at %s:%s: %s", c->out.peer, addr, colon + 1, strerror(errno));
        free(addr);
        return -1;
    }
    free(addr);
    peer_hello h = {.run = run, .rank = c->base.rank};
    if (sock_send_all(fd, &h, sizeof h) != 0) {
        close(fd);
        return esp_fail(err, "comm: rank %d dropped the connection", c->out.peer);
    }
    tune_socket(fd);
    c->out.fd = fd;
    return 0;
}

static int tcp_accept_prev(comm_cpu *c, int lfd, uint64_t run, esp_err *err)
{
    double deadline = now_seconds() + c->timeout;
    for (;;) {
        struct pollfd p = {.fd = lfd, .events = POLLIN};
        int left = (int)((deadline - now_seconds()) * 1000);
        if (left <= 0 || poll(&p, 1, left) == 0)
            return esp_fail(err, "comm: rank %d did not connect within %.0f s (trainer.dist_timeout)", c->in.peer, c->timeout);
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) continue;
        peer_hello h;
        struct timeval tv = {5, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        if (sock_recv_all(fd, &h, sizeof h) == 0 && h.run == run && h.rank == c->in.peer) {
            tv.tv_sec = 0;
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
            tune_socket(fd);
            c->in.fd = fd;
            return 0;
        }
        close(fd); /* not our predecessor of this run: keep waiting */
    }
}

static int map_node_segment(comm_cpu *c, dist_store *st, int leader, uint64_t run, esp_err *err)
{
    c->map_bytes = (size_t)c->n_local * sizeof(shm_slot);
    char name[96], key[64];
    snprintf(key, sizeof key, "comm/shm/%d", leader);
    int fd;
    if (c->base.rank == leader) {
        snprintf(name, sizeof name, "/espnet3-%016llx-%d", (unsigned long long)run, (int)getpid());
        fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
        if (fd < 0 || ftruncate(fd, (off_t)c->map_bytes) != 0) {
            if (fd >= 0) close(fd), shm_unlink(name);
            return esp_fail(err, "comm: cannot create shared memory %s (%zu bytes): %s", name, c->map_bytes, strerror(errno));
        }
        snprintf(c->shm_name, sizeof c->shm_name, "%s", name);
        if (store_set(st, key, name, strlen(name), err) != 0) {
            close(fd);
            return -1;
        }
    } else {
        char *v = NULL, who[64];
        snprintf(who, sizeof who, "rank %d's shared memory", leader);
        if (store_get(st, key, who, &v, NULL, err) != 0) return -1;
        snprintf(name, sizeof name, "%s", v);
        free(v);
        fd = shm_open(name, O_RDWR, 0600);
        if (fd < 0) return esp_fail(err, "comm: cannot open shared memory %s: %s", name, strerror(errno));
    }
    void *p = mmap(NULL, c->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return esp_fail(err, "comm: cannot map shared memory %s: %s", name, strerror(errno));
    c->slots = p;
    c->slots[c->my_local].pid = (int32_t)getpid();
    return 0;
}

comm *comm_cpu_create(dist_store *st, int rank, int world, const char *node_key, const char *run_id, double timeout_s,
                      esp_err *err)
{
    comm_cpu *c = xcalloc(1, sizeof *c);
    c->base = (comm){.v = &cpu_vtbl, .rank = rank, .world = world, .name = "cpu"};
    c->timeout = timeout_s;
    c->in = (peer_link){.peer = -1, .fd = -1};
    c->out = c->in;
    if (world == 1) return &c->base;
    uint64_t run = fnv1a64_str(run_id);
    char key[64], who[64];
    /* Which ranks share this node (and the segment): same node key. */
    snprintf(key, sizeof key, "comm/node/%d", rank);
    if (store_set(st, key, node_key, strlen(node_key), err) != 0) goto fail;
    int *local_idx = xmalloc((size_t)world * sizeof *local_idx), leader = -1, n_local = 0;
    for (int r = 0; r < world; r++) {
        char *v = NULL;
        snprintf(key, sizeof key, "comm/node/%d", r);
        snprintf(who, sizeof who, "rank %d", r);
        if (store_get(st, key, who, &v, NULL, err) != 0) {
            free(local_idx);
            goto fail;
        }
        local_idx[r] = -1;
        if (!strcmp(v, node_key)) {
            if (leader < 0) leader = r;
            local_idx[r] = n_local++;
        }
        free(v);
    }
    c->n_local = n_local, c->my_local = local_idx[rank];
    int next = (rank + 1) % world, prev = (rank + world - 1) % world;
    c->out.peer = next, c->in.peer = prev;
    c->out.tcp = local_idx[next] < 0, c->in.tcp = local_idx[prev] < 0;
    int rc = 0;
    if (n_local > 1) rc = map_node_segment(c, st, leader, run, err);
    if (rc == 0 && n_local > 1) {
        if (!c->out.tcp) c->out.slot = &c->slots[local_idx[next]], c->out.other = c->out.slot;
        if (!c->in.tcp) c->in.slot = &c->slots[c->my_local], c->in.other = &c->slots[local_idx[prev]];
    }
    free(local_idx);
    int lfd = -1, port = 0;
    if (rc == 0 && c->in.tcp) {
        rc = tcp_listen(&lfd, &port, err);
        if (rc == 0) {
            char addr[128];
            /* The interface that reaches rank 0; on rank 0 itself that may be loopback (Debian maps
             * the host name to 127.0.1.1), so rank 0 gives the master address the others used. */
            const char *host = store_local_addr(st);
            if (rank == 0 && !strncmp(host, "127.", 4)) host = store_host(st);
            int n = snprintf(addr, sizeof addr, "%s:%d", host, port);
            snprintf(key, sizeof key, "comm/tcp/%d", rank);
            rc = store_set(st, key, addr, (size_t)n, err);
        }
    }
    if (rc == 0 && c->out.tcp) rc = tcp_connect_next(c, st, run, err);
    if (rc == 0 && c->in.tcp) {
        rc = tcp_accept_prev(c, lfd, run, err);
        c->in.stage = xmalloc(TCP_STAGE);
    }
    if (lfd >= 0) close(lfd);
    /* Everyone has mapped the segment: its name can go (nothing is left in /dev/shm on a crash). */
    if (rc == 0) rc = store_barrier(st, "comm/ready", err);
    if (rc == 0 && c->shm_name[0]) {
        shm_unlink(c->shm_name);
        c->shm_name[0] = '\0';
    }
    if (rc != 0) goto fail;
    return &c->base;
fail:
    cpu_destroy(&c->base);
    return NULL;
}
