/* parallel.env: local — n_workers forked worker processes, load balanced by the parent.
 *
 * Each worker holds one end of a socketpair (a pipe both ways; send(MSG_NOSIGNAL) so a dead peer
 * is an error, not SIGPIPE). Worker -> parent messages are a 16-byte header {type, len, arg} and
 * len payload bytes:
 *   REQ            give me a shard (the parent answers a u64 shard number, or STOP)
 *   ITEM idx       about to call forward(idx): a crash from now on is blamed on idx
 *   DONE k         shard k is committed (renamed into place)
 *   ERR  message   provide() or forward() failed: the run fails with this message
 * The parent polls all sockets and reaps with waitpid(WNOHANG) every turn, so no wait depends on
 * a worker behaving: a worker that dies has its shard requeued first (and a fresh worker forked);
 * RUNNER_MAX_CRASHES deaths on one item fail the run naming it. On failure the others get
 * SIGTERM (SIGKILL after KILL_AFTER_S) and are reaped before runner_run returns. */
#include "core/runner/runner_env.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/base/progress.h"
#include "core/base/sockio.h"
#include "core/runner/runner_shard.h"

enum { MSG_REQ = 1, MSG_ITEM, MSG_DONE, MSG_ERR };
enum { MAX_MSG = 8192 };
static const uint64_t REPLY_STOP = UINT64_MAX;
static const double KILL_AFTER_S = 5.0;
static const int POLL_MS = 50;

typedef struct msg_hdr {
    uint32_t type, len;
    uint64_t arg;
} msg_hdr;

/* ---- worker ------------------------------------------------------------------------------- */

static void worker_send(int fd, uint32_t type, uint64_t arg, const char *text)
{
    msg_hdr h = {type, text ? (uint32_t)strnlen(text, MAX_MSG) : 0, arg};
    if (sock_send_all(fd, &h, sizeof h) != 0 || (h.len && sock_send_all(fd, text, h.len) != 0))
        _exit(4); /* the parent is gone: nobody wants our results */
}

static void report_item(size_t idx, void *ctx)
{
    worker_send(*(int *)ctx, MSG_ITEM, idx, NULL);
}

static _Noreturn void worker_main(const runner_plan *plan, int fd)
{
    const runner_job *job = plan->job;
    esp_err e;
    void *env = job->arg;
    if (job->provide) {
        strcpy(e.msg, "provide failed");
        env = job->provide(job->arg, &e);
        if (!env) {
            char *msg = xasprintf("building the worker environment: %s", e.msg);
            worker_send(fd, MSG_ERR, 0, msg);
            _exit(3);
        }
    }
    for (;;) {
        worker_send(fd, MSG_REQ, 0, NULL);
        uint64_t k;
        if (sock_recv_all(fd, &k, sizeof k) != 0) _exit(4);
        if (k == REPLY_STOP) break;
        if (runner_write_shard(plan, (size_t)k, env, report_item, &fd, &e) != 0) {
            worker_send(fd, MSG_ERR, k, e.msg);
            _exit(3);
        }
        worker_send(fd, MSG_DONE, k, NULL);
    }
    if (job->release) job->release(env);
    _exit(0);
}

/* ---- parent ------------------------------------------------------------------------------- */

typedef struct wslot {
    pid_t pid; /* 0: free slot */
    int fd;    /* -1 after end of file */
    int id;    /* worker number, counting re-forks, for messages */
    int asked; /* sent at least one REQ (provide() is done) */
    int stopped; /* was told STOP */
    int64_t shard, item; /* current shard and item, -1 when none */
    double term_at;      /* when SIGTERM was sent, 0 when not */
    unsigned char *rbuf;
    size_t rlen, rcap;
} wslot;

typedef struct local_run {
    const runner_plan *plan;
    const char *name;
    wslot *w;
    int n_slots, n_forked, provide_crashes;
    size_t *queue, qhead;        /* plan->pending, taken in order */
    size_t *redo, n_redo;        /* shards of dead workers: taken before the queue */
    size_t shards_left, items_done;
    int64_t *crash_item;         /* per shard: item of the last crash */
    unsigned *crash_count, *deaths;
    int failed;
    esp_err *err;
    progress prog;
} local_run;

static void fail_and_stop(local_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void terminate_all(local_run *r)
{
    double t = now_seconds();
    for (int i = 0; i < r->n_slots; i++)
        if (r->w[i].pid > 0 && r->w[i].term_at == 0) {
            kill(r->w[i].pid, SIGTERM);
            r->w[i].term_at = t;
        }
}

static void fail_and_stop(local_run *r, const char *fmt, ...)
{
    if (!r->failed) { /* the first failure is the one the user sees */
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->err->msg, sizeof r->err->msg, fmt, ap);
        va_end(ap);
        r->failed = 1;
    }
    terminate_all(r);
}

static void describe_status(int status, char *buf, size_t n)
{
    if (WIFSIGNALED(status))
        snprintf(buf, n, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else if (WIFEXITED(status))
        snprintf(buf, n, "exit status %d", WEXITSTATUS(status));
    else
        snprintf(buf, n, "wait status %d", status);
}

static void spawn(local_run *r, int slot)
{
    wslot *w = &r->w[slot];
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        fail_and_stop(r, "%s: cannot start a worker: socketpair: %s", r->name, strerror(errno));
        return;
    }
    pid_t parent = getpid();
    fflush(NULL); /* the child must not flush the parent's buffered output again */
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(sv[0]);
        close(sv[1]);
        fail_and_stop(r, "%s: cannot start a worker: fork: %s (lower parallel.n_workers)", r->name, strerror(e));
        return;
    }
    if (pid == 0) {
        /* Die with the parent, so an interrupted run leaves no orphans computing for nobody; by
         * SIGTERM, which lets the worker remove its temporary folders (core/base/tmpdir.h). */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) _exit(4);
        signal(SIGTERM, SIG_DFL);
        /* local_gpu: slot i owns GPU i, also when a dead worker is replaced. */
        if (r->plan->gpu_ids) setenv("CUDA_VISIBLE_DEVICES", r->plan->gpu_ids[slot], 1);
        close(sv[0]);
        for (int i = 0; i < r->n_slots; i++)
            if (r->w[i].pid > 0 && r->w[i].fd >= 0) close(r->w[i].fd);
        worker_main(r->plan, sv[1]);
    }
    close(sv[1]);
    fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
    *w = (wslot){.pid = pid, .fd = sv[0], .id = r->n_forked++, .shard = -1, .item = -1, .rbuf = w->rbuf,
                 .rcap = w->rcap};
}

/* 8 bytes into a socket the worker has emptied never block; a failed send means the worker is
 * dead, which waitpid reports. */
static void reply(wslot *w, uint64_t v)
{
    if (send(w->fd, &v, sizeof v, MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof v) return;
}

static void handle_msg(local_run *r, wslot *w, const msg_hdr *h, const char *payload)
{
    const runner_plan *plan = r->plan;
    size_t first, count;
    switch (h->type) {
    case MSG_REQ:
        w->asked = 1;
        if (r->failed || (r->n_redo == 0 && r->qhead == plan->n_pending)) {
            w->stopped = 1;
            reply(w, REPLY_STOP);
            return;
        }
        w->shard = (int64_t)(r->n_redo ? r->redo[--r->n_redo] : r->queue[r->qhead++]);
        w->item = -1;
        reply(w, (uint64_t)w->shard);
        return;
    case MSG_ITEM:
        if (w->shard < 0) break;
        runner_shard_range(r->plan, (size_t)w->shard, &first, &count);
        if (h->arg < first || h->arg >= first + count) break;
        w->item = (int64_t)h->arg;
        return;
    case MSG_DONE:
        if (w->shard < 0 || h->arg != (uint64_t)w->shard) break;
        runner_shard_range(r->plan, (size_t)w->shard, &first, &count);
        r->items_done += count;
        r->shards_left--;
        w->shard = w->item = -1;
        return;
    case MSG_ERR:
        fail_and_stop(r, "%s: %.*s", r->name, (int)h->len, payload);
        w->shard = w->item = -1;
        return;
    }
    fail_and_stop(r, "%s: worker %d sent a message out of turn (type %u, arg %llu)", r->name, w->id,
                  (unsigned)h->type, (unsigned long long)h->arg);
}

/* Reads what is there without blocking and handles every complete message. */
static void drain(local_run *r, wslot *w)
{
    while (w->fd >= 0) {
        if (w->rcap - w->rlen < 4096) {
            w->rcap = w->rcap ? 2 * w->rcap : 2 * MAX_MSG;
            w->rbuf = xrealloc(w->rbuf, w->rcap);
        }
        ssize_t n = recv(w->fd, w->rbuf + w->rlen, w->rcap - w->rlen, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (n <= 0) { /* end of file (or a reset): the worker is exiting */
            close(w->fd);
            w->fd = -1;
            break;
        }
        w->rlen += (size_t)n;
        size_t off = 0;
        while (w->rlen - off >= sizeof(msg_hdr)) {
            msg_hdr h;
            memcpy(&h, w->rbuf + off, sizeof h);
            if (h.len > MAX_MSG) {
                fail_and_stop(r, "%s: worker %d sent a malformed message", r->name, w->id);
                w->rlen = off = 0;
                break;
            }
            if (w->rlen - off < sizeof h + h.len) break;
            handle_msg(r, w, &h, (const char *)w->rbuf + off + sizeof h);
            off += sizeof h + h.len;
        }
        memmove(w->rbuf, w->rbuf + off, w->rlen - off);
        w->rlen -= off;
    }
}

/* A worker exited: decide whether that was the plan, a crash to retry, or the end of the run. */
static void reaped(local_run *r, wslot *w, int status)
{
    char how[128];
    describe_status(status, how, sizeof how);
    int clean = WIFEXITED(status) && WEXITSTATUS(status) == 0 && w->stopped && w->shard < 0;
    if (w->fd >= 0) close(w->fd);
    w->fd = -1;
    int64_t shard = w->shard, item = w->item;
    int asked = w->asked, stopped = w->stopped, id = w->id;
    pid_t pid = w->pid;
    w->pid = 0;
    if (shard >= 0) { /* its half-written shard */
        char *tmp = xasprintf("%s/shard.%lld.tmp.%d", r->plan->job->work_dir, (long long)shard, (int)pid);
        unlink(tmp);
        free(tmp);
    }
    if (clean || r->failed) return;
    if (shard < 0) {
        if (asked) {
            log_warn("%s: worker %d (pid %d) died %s (%s)", r->name, id, (int)pid,
                     stopped ? "after its last shard" : "between shards", how);
        } else if (++r->provide_crashes >= RUNNER_MAX_CRASHES) {
            fail_and_stop(r, "%s: workers died %d times while building their environment (last: %s)", r->name,
                          r->provide_crashes, how);
        } else {
            log_warn("%s: worker %d (pid %d) died while building its environment (%s); starting another", r->name,
                     id, (int)pid, how);
        }
        return;
    }
    size_t k = (size_t)shard, first, count;
    runner_shard_range(r->plan, k, &first, &count);
    r->deaths[k]++;
    if (item >= 0) {
        if (r->crash_item[k] == item) r->crash_count[k]++;
        else r->crash_item[k] = item, r->crash_count[k] = 1;
    }
    const char *at = item >= 0 ? runner_item_name(r->plan->job, (size_t)item) : "before its first item";
    if (item >= 0 && r->crash_count[k] >= RUNNER_MAX_CRASHES) {
        fail_and_stop(r, "%s: %s (index %lld) crashed its worker %u times (last: %s); giving up", r->name, at,
                      (long long)item, r->crash_count[k], how);
    } else if (r->deaths[k] >= 2 * RUNNER_MAX_CRASHES) {
        fail_and_stop(r, "%s: shard %zu (items %zu-%zu) lost its worker %u times (last: %s, at %s); giving up",
                      r->name, k, first, first + count - 1, r->deaths[k], how, at);
    } else {
        log_warn("%s: worker %d (pid %d) died (%s) in shard %zu (items %zu-%zu) at %s; redoing the shard", r->name,
                 id, (int)pid, how, k, first, first + count - 1, at);
        r->redo[r->n_redo++] = k;
    }
}

static int live_workers(const local_run *r)
{
    int n = 0;
    for (int i = 0; i < r->n_slots; i++) n += r->w[i].pid > 0;
    return n;
}

int runner_local_run(const runner_plan *plan, esp_err *err)
{
    local_run r = {0};
    r.plan = plan;
    r.name = plan->job->name ? plan->job->name : "runner";
    r.err = err;
    r.n_slots = plan->n_workers < (int)plan->n_pending ? plan->n_workers
                                                        : (int)plan->n_pending; /* no idle workers */
    r.w = xcalloc((size_t)r.n_slots, sizeof *r.w);
    r.queue = plan->pending;
    r.redo = xcalloc(plan->n_pending, sizeof *r.redo);
    r.shards_left = plan->n_pending;
    r.crash_item = xcalloc(plan->n_shards, sizeof *r.crash_item);
    r.crash_count = xcalloc(plan->n_shards, sizeof *r.crash_count);
    r.deaths = xcalloc(plan->n_shards, sizeof *r.deaths);
    for (size_t k = 0; k < plan->n_shards; k++) r.crash_item[k] = -1;

    size_t total = 0;
    for (size_t i = 0; i < plan->n_pending; i++) {
        size_t first, count;
        runner_shard_range(plan, plan->pending[i], &first, &count);
        total += count;
    }
    log_info("%s: %zu items in %zu shards of up to %zu, %d local worker%s", r.name, total, plan->n_pending,
             plan->chunk_size, r.n_slots, r.n_slots == 1 ? "" : "s");
    progress_start(&r.prog, r.name, total);

    struct pollfd *pfd = xcalloc((size_t)r.n_slots, sizeof *pfd);
    int *pslot = xcalloc((size_t)r.n_slots, sizeof *pslot);
    for (int i = 0; i < r.n_slots && !r.failed; i++) spawn(&r, i);
    while (live_workers(&r) > 0) {
        int np = 0;
        for (int i = 0; i < r.n_slots; i++)
            if (r.w[i].pid > 0 && r.w[i].fd >= 0) {
                pfd[np] = (struct pollfd){.fd = r.w[i].fd, .events = POLLIN};
                pslot[np++] = i;
            }
        /* Bounded: also wakes up to reap workers and to escalate SIGTERM to SIGKILL. */
        if (poll(pfd, (nfds_t)np, POLL_MS) < 0 && errno != EINTR)
            fail_and_stop(&r, "%s: poll: %s", r.name, strerror(errno));
        for (int j = 0; j < np; j++)
            if (pfd[j].revents) drain(&r, &r.w[pslot[j]]);
        double t = now_seconds();
        for (int i = 0; i < r.n_slots; i++) {
            wslot *w = &r.w[i];
            if (w->pid <= 0) continue;
            int status;
            pid_t got = waitpid(w->pid, &status, WNOHANG);
            if (got == w->pid) {
                drain(&r, w); /* what it said before dying (its DONE or ERR) counts */
                reaped(&r, w, status);
            } else if (got < 0 && errno != EINTR) {
                fail_and_stop(&r, "%s: waitpid: %s", r.name, strerror(errno));
                w->pid = 0; /* not our child any more (someone else reaped it): nothing to wait for */
            } else if (w->term_at > 0 && t - w->term_at > KILL_AFTER_S) {
                kill(w->pid, SIGKILL);
            }
        }
        /* Keep n_workers busy while shards wait that no idle worker is about to take (re-forks). */
        size_t waiting = r.n_redo + (plan->n_pending - r.qhead);
        for (int i = 0; i < r.n_slots && !r.failed; i++) {
            int active = 0, idle = 0;
            for (int j = 0; j < r.n_slots; j++)
                if (r.w[j].pid > 0 && !r.w[j].stopped && !r.w[j].term_at) active++, idle += r.w[j].shard < 0;
            if (r.w[i].pid == 0 && active < r.n_slots && waiting > (size_t)idle) spawn(&r, i);
        }
        size_t partial = 0;
        for (int i = 0; i < r.n_slots; i++)
            if (r.w[i].pid > 0 && r.w[i].shard >= 0 && r.w[i].item >= 0)
                partial += (size_t)r.w[i].item - (size_t)r.w[i].shard * plan->chunk_size;
        progress_update(&r.prog, r.items_done + partial);
    }
    if (!r.failed && r.shards_left > 0)
        fail_and_stop(&r, "%s: %zu shards were left undone (internal error)", r.name, r.shards_left);
    if (!r.failed) progress_finish(&r.prog);

    for (int i = 0; i < r.n_slots; i++) free(r.w[i].rbuf);
    free(r.w);
    free(pfd);
    free(pslot);
    free(r.redo);
    free(r.crash_item);
    free(r.crash_count);
    free(r.deaths);
    return r.failed ? -1 : 0;
}
