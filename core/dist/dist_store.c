/* The rendezvous store. Wire format, both ways: u32 length (of what follows, little endian), then
 * a request  u8 op, u32 key length, key, u32 value length, value
 * or a reply u8 status (0 ok, 1 refused), value. A GET is answered when its key exists. */
#include "core/dist/dist_store.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/base/progress.h"
#include "core/base/sockio.h"

enum { OP_HELLO = 1, OP_SET, OP_GET, OP_ADD, OP_CHECK };
#define MAX_MSG (64u << 20)

typedef struct kv {
    char *key;
    char *val;
    size_t n;
} kv;

typedef struct client {
    int fd;
    char *in;
    size_t in_n, in_cap;
    int joined, rank;
    char *waiting; /* key of a pending GET */
} client;

struct dist_store {
    int fd; /* our connection to the server */
    char host[256], local_addr[64];
    int port, rank, world;
    double timeout;
    /* server side (rank 0) */
    int serving, listen_fd, wake[2];
    pthread_t thread;
    char *run_id;
    kv *kvs;
    size_t n_kvs, cap_kvs;
    client *clients;
    size_t n_clients;
    int *joined_ranks;
};

/* ---- framing ---------------------------------------------------------------------------------- */

static void put_u32(char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (char)(v >> (8 * i));
}

static uint32_t get_u32(const char *p)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) v |= (uint32_t)(unsigned char)p[i] << (8 * i);
    return v;
}

static int send_reply(int fd, int status, const void *val, size_t n)
{
    char hdr[5];
    put_u32(hdr, (uint32_t)(n + 1));
    hdr[4] = (char)status;
    return sock_send_all(fd, hdr, 5) || (n && sock_send_all(fd, val, n)) ? -1 : 0;
}

/* ---- server ----------------------------------------------------------------------------------- */

static kv *kv_find(dist_store *s, const char *key)
{
    for (size_t i = 0; i < s->n_kvs; i++)
        if (!strcmp(s->kvs[i].key, key)) return &s->kvs[i];
    return NULL;
}

static kv *kv_put(dist_store *s, const char *key, const char *val, size_t n)
{
    kv *e = kv_find(s, key);
    if (!e) {
        if (s->n_kvs == s->cap_kvs) {
            s->cap_kvs = s->cap_kvs ? 2 * s->cap_kvs : 64;
            s->kvs = xrealloc(s->kvs, s->cap_kvs * sizeof *s->kvs);
        }
        e = &s->kvs[s->n_kvs++];
        e->key = xstrdup(key);
        e->val = NULL;
    }
    free(e->val);
    e->val = xmalloc(n + 1);
    memcpy(e->val, val, n);
    e->val[n] = '\0';
    e->n = n;
    return e;
}

static void drop_client(client *c)
{
    close(c->fd);
    free(c->in);
    free(c->waiting);
    memset(c, 0, sizeof *c);
    c->fd = -1;
}

/* Handles one complete request of client c; returns -1 to drop the client. */
static int serve_request(dist_store *s, client *c, const char *msg, size_t len)
{
    if (len < 9) return -1;
    int op = (unsigned char)msg[0];
    uint32_t kl = get_u32(msg + 1);
    if (kl > len - 9) return -1;
    uint32_t vl = get_u32(msg + 5 + kl);
    if (vl > len - 9 - kl) return -1;
    char *key = xstrndup(msg + 5, kl);
    const char *val = msg + 9 + kl;
    int rc = 0;
    if (op == OP_HELLO) {
        int rank = -1, world = -1;
        char *v = xstrndup(val, vl);
        sscanf(v, "%d %d", &rank, &world);
        free(v);
        char why[512] = "";
        if (strcmp(key, s->run_id))
            snprintf(why, sizeof why, "this store belongs to run '%s', not '%.200s' (a stale run on the port?)", s->run_id, key);
        else if (world != s->world)
            snprintf(why, sizeof why, "world size %d differs from rank 0's %d", world, s->world);
        else if (rank < 0 || rank >= s->world)
            snprintf(why, sizeof why, "rank %d is outside 0..%d", rank, s->world - 1);
        else if (s->joined_ranks[rank])
            snprintf(why, sizeof why, "rank %d already joined (two processes with the same rank?)", rank);
        if (*why) {
            send_reply(c->fd, 1, why, strlen(why));
            rc = -1;
        } else {
            s->joined_ranks[rank] = 1;
            c->joined = 1;
            c->rank = rank;
            rc = send_reply(c->fd, 0, NULL, 0);
        }
    } else if (!c->joined) {
        rc = -1;
    } else if (op == OP_SET) {
        kv_put(s, key, val, vl);
        rc = send_reply(c->fd, 0, NULL, 0);
        /* Answer the GETs waiting for this key. */
        for (size_t i = 0; i < s->n_clients; i++) {
            client *w = &s->clients[i];
            if (w->fd >= 0 && w->waiting && !strcmp(w->waiting, key)) {
                if (send_reply(w->fd, 0, val, vl) != 0) drop_client(w);
                else free(w->waiting), w->waiting = NULL;
            }
        }
    } else if (op == OP_GET) {
        kv *e = kv_find(s, key);
        if (e) rc = send_reply(c->fd, 0, e->val, e->n);
        else c->waiting = xstrdup(key);
    } else if (op == OP_CHECK) {
        rc = send_reply(c->fd, 0, kv_find(s, key) ? "1" : "0", 1);
    } else if (op == OP_ADD) {
        kv *e = kv_find(s, key);
        long long cur = e ? atoll(e->val) : 0;
        char *v = xstrndup(val, vl);
        cur += atoll(v);
        free(v);
        char buf[32];
        int n = snprintf(buf, sizeof buf, "%lld", cur);
        kv_put(s, key, buf, (size_t)n);
        rc = send_reply(c->fd, 0, buf, (size_t)n);
    } else {
        rc = -1;
    }
    free(key);
    return rc;
}

static void serve_readable(dist_store *s, client *c)
{
    if (c->in_cap - c->in_n < 65536) {
        c->in_cap = c->in_cap * 2 + 65536;
        c->in = xrealloc(c->in, c->in_cap);
    }
    ssize_t k = recv(c->fd, c->in + c->in_n, c->in_cap - c->in_n, 0);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) return;
    if (k <= 0) {
        /* Liveness: the first joined rank whose connection ends (died, or gave up after an error)
         * is recorded for store_dead_rank. Ranks close after the final barrier too; by then no
         * collective asks. */
        if (c->joined && !kv_find(s, "live/dead")) {
            char r[16];
            kv_put(s, "live/dead", r, (size_t)snprintf(r, sizeof r, "%d", c->rank));
        }
        drop_client(c);
        return;
    }
    c->in_n += (size_t)k;
    size_t off = 0;
    while (c->in_n - off >= 4) {
        uint32_t len = get_u32(c->in + off);
        if (len > MAX_MSG) {
            drop_client(c);
            return;
        }
        if (c->in_n - off - 4 < len) break;
        if (serve_request(s, c, c->in + off + 4, len) != 0) {
            drop_client(c);
            return;
        }
        off += 4 + len;
    }
    memmove(c->in, c->in + off, c->in_n - off);
    c->in_n -= off;
}

static void *serve_loop(void *arg)
{
    dist_store *s = arg;
    for (;;) {
        struct pollfd *p = xmalloc((s->n_clients + 2) * sizeof *p);
        size_t np = 0;
        p[np++] = (struct pollfd){.fd = s->wake[0], .events = POLLIN};
        p[np++] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
        for (size_t i = 0; i < s->n_clients; i++) p[np++] = (struct pollfd){.fd = s->clients[i].fd, .events = POLLIN};
        int r = poll(p, np, -1);
        if (r < 0 && errno != EINTR) {
            free(p);
            break;
        }
        if (p[0].revents) {
            free(p);
            break;
        }
        for (size_t i = 2; i < np; i++)
            if (p[i].revents && s->clients[i - 2].fd >= 0) serve_readable(s, &s->clients[i - 2]);
        if (p[1].revents & POLLIN) {
            int fd = accept(s->listen_fd, NULL, NULL);
            if (fd >= 0) {
                int one = 1;
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                s->clients = xrealloc(s->clients, (s->n_clients + 1) * sizeof *s->clients);
                s->clients[s->n_clients++] = (client){.fd = fd};
            }
        }
        /* Forget dropped clients. */
        size_t k = 0;
        for (size_t i = 0; i < s->n_clients; i++)
            if (s->clients[i].fd >= 0) s->clients[k++] = s->clients[i];
        s->n_clients = k;
        free(p);
    }
    return NULL;
}

static int start_server(dist_store *s, esp_err *err)
{
    s->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s->listen_fd < 0) return esp_fail(err, "store: socket: %s", strerror(errno));
    int one = 1;
    setsockopt(s->listen_fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)s->port), .sin_addr.s_addr = htonl(INADDR_ANY)};
    if (bind(s->listen_fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(s->listen_fd, 256) != 0) {
        int e = errno;
        close(s->listen_fd);
        s->listen_fd = -1;
        return esp_fail(err, "store: rank 0 cannot listen on port %d: %s (another run on this port? pick another "
                             "--master_port / MASTER_PORT)", s->port, strerror(e));
    }
    if (pipe2(s->wake, O_CLOEXEC) != 0) return esp_fail(err, "store: pipe: %s", strerror(errno));
    s->joined_ranks = xcalloc((size_t)s->world, sizeof *s->joined_ranks);
    s->serving = 1;
    if (pthread_create(&s->thread, NULL, serve_loop, s) != 0) {
        s->serving = 0;
        return esp_fail(err, "store: cannot start the server thread");
    }
    return 0;
}

/* ---- client ----------------------------------------------------------------------------------- */

/* Reads one reply before the deadline: 0 ok, 1 refused, -1 connection lost, -2 timed out. */
static int read_reply(dist_store *s, char **val, size_t *n, double deadline)
{
    char hdr[4];
    size_t got = 0, len = 0;
    char *buf = NULL;
    for (;;) {
        size_t want = buf ? len : 4;
        char *dst = buf ? buf : hdr;
        if (got == want) {
            if (buf) break;
            len = get_u32(hdr);
            if (len < 1 || len > MAX_MSG) return -1;
            buf = xmalloc(len + 1);
            got = 0;
            continue;
        }
        double left = deadline - now_seconds();
        if (left <= 0) {
            free(buf);
            return -2;
        }
        struct pollfd p = {.fd = s->fd, .events = POLLIN};
        int r = poll(&p, 1, (int)(left * 1000) + 1);
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) continue;
        ssize_t k = recv(s->fd, dst + got, want - got, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            free(buf);
            return -1;
        }
        got += (size_t)k;
    }
    int status = (unsigned char)buf[0];
    if (val) {
        *val = xmalloc(len);
        memcpy(*val, buf + 1, len - 1);
        (*val)[len - 1] = '\0';
    }
    if (n) *n = len - 1;
    free(buf);
    return status;
}

static int request(dist_store *s, int op, const char *key, const void *val, size_t vn)
{
    size_t kl = strlen(key), len = 9 + kl + vn;
    char *msg = xmalloc(4 + len);
    put_u32(msg, (uint32_t)len);
    msg[4] = (char)op;
    put_u32(msg + 5, (uint32_t)kl);
    memcpy(msg + 9, key, kl);
    put_u32(msg + 9 + kl, (uint32_t)vn);
    if (vn) memcpy(msg + 13 + kl, val, vn);
    int rc = sock_send_all(s->fd, msg, 4 + len);
    free(msg);
    return rc;
}

static int lost(dist_store *s, esp_err *err)
{
    return esp_fail(err, "store: lost the connection to rank 0's store at %s:%d (did rank 0 exit?)", s->host, s->port);
}

static int call(dist_store *s, int op, const char *key, const void *val, size_t vn, char **out, size_t *on,
                const char *who, esp_err *err)
{
    if (request(s, op, key, val, vn) != 0) return lost(s, err);
    int rc = read_reply(s, out, on, now_seconds() + s->timeout);
    if (rc == -1) return lost(s, err);
    if (rc == -2)
        return esp_fail(err, "store: timed out after %.0f s waiting for %s (key '%s' at %s:%d; is it running? "
                             "trainer.dist_timeout sets the limit)", s->timeout, who ? who : "rank 0's store", key,
                        s->host, s->port);
    return 0;
}

dist_store *store_open(const char *host, int port, int serve, const char *run_id, int rank, int world_size,
                       double timeout_s, esp_err *err)
{
    dist_store *s = xcalloc(1, sizeof *s);
    s->fd = s->listen_fd = -1;
    s->wake[0] = s->wake[1] = -1;
    snprintf(s->host, sizeof s->host, "%s", host);
    s->port = port, s->rank = rank, s->world = world_size, s->timeout = timeout_s;
    s->run_id = xstrdup(run_id);
    if (serve && start_server(s, err) != 0) {
        store_close(s);
        return NULL;
    }
    double deadline = now_seconds() + timeout_s;
    char port_str[16];
    snprintf(port_str, sizeof port_str, "%d", port);
    while ((s->fd = sock_connect(host, port_str)) < 0) {
        if (s->fd == -2) {
            esp_fail(err, "store: cannot resolve the master address '%s' (set MASTER_ADDR / --master_addr to an address of rank 0's host)", host);
            store_close(s);
            return NULL;
        }
        if (now_seconds() > deadline) {
            esp_fail(err, "store: rank %d could not reach rank 0's store at %s:%d within %.0f s (is rank 0 running? "
                          "check MASTER_ADDR / --master_addr)", rank, host, port, timeout_s);
            store_close(s);
            return NULL;
        }
        struct timespec nap = {0, 50 * 1000000L};
        nanosleep(&nap, NULL);
    }
    int one = 1;
    setsockopt(s->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in me;
    socklen_t ml = sizeof me;
    if (getsockname(s->fd, (struct sockaddr *)&me, &ml) == 0) inet_ntop(AF_INET, &me.sin_addr, s->local_addr, sizeof s->local_addr);
    char hello[64], *why = NULL;
    int hn = snprintf(hello, sizeof hello, "%d %d", rank, world_size);
    if (request(s, OP_HELLO, run_id, hello, (size_t)hn) != 0) {
        lost(s, err);
        store_close(s);
        return NULL;
    }
    int rc = read_reply(s, &why, NULL, now_seconds() + timeout_s);
    if (rc != 0) {
        if (rc == 1) esp_fail(err, "store: rank 0's store at %s:%d refused rank %d: %s", host, port, rank, why);
        else if (rc == -2) esp_fail(err, "store: no answer from %s:%d within %.0f s (is it an espnet3 store?)", host, port, timeout_s);
        else esp_fail(err, "store: %s:%d closed the connection on hello (is it an espnet3 store of this run?)", host, port);
        free(why);
        store_close(s);
        return NULL;
    }
    free(why);
    return s;
}

void store_close(dist_store *s)
{
    if (!s) return;
    if (s->fd >= 0) close(s->fd);
    if (s->serving) {
        ssize_t k = write(s->wake[1], "x", 1);
        (void)k;
        pthread_join(s->thread, NULL);
    }
    for (size_t i = 0; i < s->n_clients; i++) drop_client(&s->clients[i]);
    free(s->clients);
    for (size_t i = 0; i < s->n_kvs; i++) free(s->kvs[i].key), free(s->kvs[i].val);
    free(s->kvs);
    if (s->listen_fd >= 0) close(s->listen_fd);
    if (s->wake[0] >= 0) close(s->wake[0]), close(s->wake[1]);
    free(s->joined_ranks);
    free(s->run_id);
    free(s);
}

int store_set(dist_store *s, const char *key, const void *val, size_t n, esp_err *err)
{
    return call(s, OP_SET, key, val, n, NULL, NULL, NULL, err);
}

int store_get(dist_store *s, const char *key, const char *who, char **val, size_t *n, esp_err *err)
{
    return call(s, OP_GET, key, NULL, 0, val, n, who, err);
}

int store_add(dist_store *s, const char *key, int64_t delta, int64_t *out, esp_err *err)
{
    char buf[32], *v = NULL;
    int n = snprintf(buf, sizeof buf, "%lld", (long long)delta);
    if (call(s, OP_ADD, key, buf, (size_t)n, &v, NULL, NULL, err) != 0) return -1;
    *out = atoll(v);
    free(v);
    return 0;
}

static int store_check(dist_store *s, const char *key, int *exists, esp_err *err)
{
    char *v = NULL;
    if (call(s, OP_CHECK, key, NULL, 0, &v, NULL, NULL, err) != 0) return -1;
    *exists = v[0] == '1';
    free(v);
    return 0;
}

int store_barrier(dist_store *s, const char *key, esp_err *err)
{
    char *k = xasprintf("%s/%d", key, s->rank), *done = xasprintf("%s/done", key);
    int64_t arrived;
    int rc = store_set(s, k, "1", 1, err);
    if (rc == 0) rc = store_add(s, key, 1, &arrived, err);
    if (rc == 0 && arrived == s->world) rc = store_set(s, done, "1", 1, err);
    /* Polls (barriers are rare: start and end of a run) so a timeout can name who is missing. */
    double deadline = now_seconds() + s->timeout;
    long nap_ms = 1;
    for (int ok = 0; rc == 0 && !(rc = store_check(s, done, &ok, err)) && !ok;) {
        if (now_seconds() > deadline) {
            char missing[512] = "";
            size_t used = 0;
            for (int r = 0; r < s->world && rc == 0 && used + 16 < sizeof missing; r++) {
                char *rk = xasprintf("%s/%d", key, r);
                int there = 0;
                rc = store_check(s, rk, &there, err);
                if (rc == 0 && !there) used += (size_t)snprintf(missing + used, sizeof missing - used, "%s%d", used ? ", " : "", r);
                free(rk);
            }
            if (rc == 0)
                rc = esp_fail(err, "store: timed out after %.0f s at '%s' waiting for rank %s (did it start? did it "
                                   "fail? trainer.dist_timeout sets the limit)", s->timeout, key, missing);
            break;
        }
        struct timespec ts = {0, nap_ms * 1000000L};
        nanosleep(&ts, NULL);
        if (nap_ms < 50) nap_ms *= 2;
    }
    free(k);
    free(done);
    return rc;
}

int store_dead_rank(dist_store *s, int *rank, esp_err *err)
{
    int there = 0;
    *rank = -1;
    if (store_check(s, "live/dead", &there, err) != 0) return -1;
    if (!there) return 0;
    char *v = NULL;
    if (store_get(s, "live/dead", "the dead rank", &v, NULL, err) != 0) return -1;
    *rank = atoi(v);
    free(v);
    return 0;
}

int store_share_blob(dist_store *s, const char *key, int make_it,
                     int (*make)(void *blob, size_t n, void *ctx, esp_err *err), void *ctx, void *blob, size_t n,
                     const char *who, esp_err *err)
{
    if (make_it) {
        if (make(blob, n, ctx, err) != 0) return -1;
        return store_set(s, key, blob, n, err);
    }
    char *v = NULL;
    size_t got = 0;
    if (store_get(s, key, who, &v, &got, err) != 0) return -1;
    int rc = 0;
    if (got != n) rc = esp_fail(err, "store: %s has %zu bytes, expected %zu (ranks of different builds?)", who, got, n);
    else memcpy(blob, v, n);
    free(v);
    return rc;
}

const char *store_local_addr(const dist_store *s) { return s->local_addr; }
const char *store_host(const dist_store *s) { return s->host; }
