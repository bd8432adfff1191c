#include "core/dist/dist_launch.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/base/progress.h"

/* Seconds the ranks get after SIGTERM before SIGKILL: after a rank failed (the others stop), and
 * after a signal to the launcher, which the ranks answer with a checkpoint (SLURM's --signal
 * leaves about 120 s before the time limit). */
#define STOP_GRACE_S 10.0
#define SIGNAL_GRACE_S 110.0

typedef struct rank_proc {
    pid_t pid;
    int err_fd;          /* read end of its stderr */
    char line[2048];     /* partial line */
    size_t line_n;
    char last_error[2048];
    int status, done;
} rank_proc;

static volatile sig_atomic_t got_signal, signals_seen;
static void on_signal(int sig)
{
    got_signal = sig;
    signals_seen++;
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    int port = 29500;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &al) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

/* Forwards complete lines of a rank's stderr and remembers its last error line. */
static void pump(rank_proc *p, int final)
{
    for (;;) {
        ssize_t k = read(p->err_fd, p->line + p->line_n, sizeof p->line - 1 - p->line_n);
        if (k < 0 && errno == EINTR) continue;
        if (k > 0) p->line_n += (size_t)k;
        size_t start = 0;
        for (size_t i = 0; i < p->line_n; i++) {
            if (p->line[i] != '\n' && !(i == sizeof p->line - 2)) continue;
            size_t len = i + 1 - start;
            fwrite(p->line + start, 1, len, stderr);
            if (!strncmp(p->line + start, "espnet3: error: ", 16)) {
                size_t m = len - 17 < sizeof p->last_error - 1 ? len - 17 : sizeof p->last_error - 1;
                memcpy(p->last_error, p->line + start + 16, m);
                p->last_error[m] = '\0';
            }
            start = i + 1;
        }
        memmove(p->line, p->line + start, p->line_n - start);
        p->line_n -= start;
        if (k <= 0) break;
    }
    if (final && p->line_n) {
        fwrite(p->line, 1, p->line_n, stderr);
        fputc('\n', stderr);
        p->line_n = 0;
    }
    fflush(stderr);
}

static pid_t start_rank(const launch_opts *o, int local, int world, int port, const char *run_id, int *err_fd,
                        esp_err *err)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) != 0) return esp_fail(err, "launch: pipe: %s", strerror(errno));
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        close(pfd[0]), close(pfd[1]);
        return esp_fail(err, "launch: fork: %s", strerror(errno));
    }
    if (pid == 0) {
        /* The rank dies with the launcher, even when the launcher is SIGKILLed. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(1);
        dup2(pfd[1], 2);
        char v[64];
        int rank = o->node_rank * o->nproc + local;
        snprintf(v, sizeof v, "%d", rank), setenv("RANK", v, 1);
        snprintf(v, sizeof v, "%d", world), setenv("WORLD_SIZE", v, 1);
        snprintf(v, sizeof v, "%d", local), setenv("LOCAL_RANK", v, 1);
        snprintf(v, sizeof v, "%d", o->nproc), setenv("LOCAL_WORLD_SIZE", v, 1);
        snprintf(v, sizeof v, "%d", o->node_rank), setenv("GROUP_RANK", v, 1);
        snprintf(v, sizeof v, "%d", port), setenv("MASTER_PORT", v, 1);
        setenv("MASTER_ADDR", o->master_addr ? o->master_addr : "127.0.0.1", 1);
        if (run_id) setenv("ESPNET3_RUN_ID", run_id, 1);
        setenv("ESPNET3_LAUNCHED_RANK", "1", 1); /* a rank of ours: it runs its stage here */
        unsetenv("TORCHELASTIC_RUN_ID");
        /* The node's cores are shared by its ranks (torchrun sets 1; we split them). */
        if (!getenv("OMP_NUM_THREADS")) {
            long cpus = sysconf(_SC_NPROCESSORS_ONLN);
            snprintf(v, sizeof v, "%ld", cpus / o->nproc > 1 ? cpus / o->nproc : 1);
            setenv("OMP_NUM_THREADS", v, 1);
        }
        execv("/proc/self/exe", o->argv);
        fprintf(stderr, "espnet3: error: launch: cannot run /proc/self/exe: %s\n", strerror(errno));
        _exit(127);
    }
    close(pfd[1]);
    fcntl(pfd[0], F_SETFL, fcntl(pfd[0], F_GETFL) | O_NONBLOCK);
    *err_fd = pfd[0];
    return pid;
}

static void describe(char *out, size_t n, const rank_proc *p, int rank)
{
    char how[64];
    if (WIFSIGNALED(p->status)) snprintf(how, sizeof how, "was killed by signal %d (%s)", WTERMSIG(p->status), strsignal(WTERMSIG(p->status)));
    else snprintf(how, sizeof how, "exited with status %d", WEXITSTATUS(p->status));
    snprintf(out, n, "rank %d (pid %d) %s%s%s", rank, (int)p->pid, how, p->last_error[0] ? ": " : "", p->last_error);
}

int dist_launch_local(const launch_opts *o, esp_err *err)
{
    ESP_CHECK(o->nproc >= 1 && o->nnodes >= 1 && o->node_rank >= 0 && o->node_rank < o->nnodes);
    int world = o->nproc * o->nnodes;
    int port = o->master_port > 0 ? o->master_port : (o->nnodes == 1 ? free_port() : 29500);
    /* One node: this launcher knows every rank, so it names the run. Several nodes: the ranks
     * agree on an id derived from the config (dist_join's fallback). */
    char run_id[64];
    snprintf(run_id, sizeof run_id, "local-%d-%ld", (int)getpid(), (long)time(NULL));
    struct sigaction sa = {.sa_handler = on_signal}, old_int, old_term, old_usr1;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGUSR1, &sa, &old_usr1);
    got_signal = 0, signals_seen = 0;
    rank_proc *p = xcalloc((size_t)o->nproc, sizeof *p);
    int started = 0, rc = 0;
    log_info("launch: starting %d local rank(s) of %d (node %d of %d, master %s:%d)", o->nproc, world, o->node_rank,
             o->nnodes, o->master_addr ? o->master_addr : "127.0.0.1", port);
    for (; started < o->nproc; started++) {
        p[started].pid = start_rank(o, started, world, port, o->nnodes == 1 ? run_id : NULL, &p[started].err_fd, err);
        if (p[started].pid < 0) {
            rc = -1;
            break;
        }
    }
    int failed = -1, left = started, stopped = 0, any_bad = 0;
    double stop_at = 0, grace = STOP_GRACE_S; /* when SIGTERM went out */
    char why[2400] = "";
    if (rc != 0) stop_at = now_seconds();
    for (int i = 0; rc != 0 && i < started; i++) kill(p[i].pid, SIGTERM);
    while (left > 0) {
        struct pollfd *pf = xcalloc((size_t)started, sizeof *pf);
        for (int i = 0; i < started; i++) pf[i] = (struct pollfd){.fd = p[i].err_fd, .events = POLLIN};
        poll(pf, (nfds_t)started, 100);
        free(pf);
        for (int i = 0; i < started; i++)
            if (p[i].err_fd >= 0) pump(&p[i], 0);
        /* Reap; a rank killed by a signal is the cause more likely than one that then failed. */
        int newly = -1;
        for (int i = 0; i < started; i++) {
            if (p[i].done || waitpid(p[i].pid, &p[i].status, WNOHANG) != p[i].pid) continue;
            p[i].done = 1;
            left--;
            pump(&p[i], 1);
            close(p[i].err_fd); /* a closed pipe would wake poll at once from now on */
            p[i].err_fd = -1;
            /* 75: the rank stopped on request with a checkpoint (trainer.max_time, a signal) */
            int code = WIFEXITED(p[i].status) ? WEXITSTATUS(p[i].status) : -1;
            stopped |= code == ESP_EXIT_STOPPED;
            int bad = code != 0 && code != ESP_EXIT_STOPPED;
            any_bad |= bad;
            if (bad && failed < 0 && (newly < 0 || WIFSIGNALED(p[i].status))) newly = i;
        }
        if (newly >= 0 && failed < 0 && !stop_at) {
            failed = newly;
            describe(why, sizeof why, &p[failed], o->node_rank * o->nproc + failed);
            stop_at = now_seconds();
            for (int i = 0; i < started; i++)
                if (!p[i].done) kill(p[i].pid, SIGTERM), kill(p[i].pid, SIGCONT); /* a stopped rank too */
        }
        if (got_signal && !stop_at) {
            /* The ranks get the signal (SIGINT as SIGTERM) and stop after their step with a
             * checkpoint; a second signal does not wait. */
            stop_at = now_seconds(), grace = SIGNAL_GRACE_S;
            int fwd = got_signal == SIGUSR1 ? SIGUSR1 : SIGTERM;
            log_info("launch: %s: the ranks stop after their step with a checkpoint (%.0f s at most)",
                     strsignal(got_signal), grace);
            for (int i = 0; i < started; i++)
                if (!p[i].done) kill(p[i].pid, fwd);
        }
        if (signals_seen > 1) grace = 0;
        if (stop_at && now_seconds() - stop_at > grace)
            for (int i = 0; i < started; i++)
                if (!p[i].done) kill(p[i].pid, SIGKILL);
    }
    for (int i = 0; i < started; i++)
        if (p[i].err_fd >= 0) pump(&p[i], 1), close(p[i].err_fd);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGUSR1, &old_usr1, NULL);
    free(p);
    if (rc != 0) return -1;
    if (failed >= 0) return esp_fail(err, "launch: %s; stopped the other ranks", why);
    if (got_signal && any_bad)
        return esp_fail(err, "launch: stopped by signal %d (%s) before every rank saved its state", (int)got_signal,
                        strsignal(got_signal));
    return stopped ? DIST_LAUNCH_STOPPED : 0;
}
