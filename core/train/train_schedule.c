/* When a run saves inside an epoch and when it stops early: Lightning's ModelCheckpoint
 * every_n_train_steps / train_time_interval, trainer.max_time, and SIGTERM / SIGUSR1 (a SLURM job
 * at its time limit, `sbatch --signal`). A signal only sets a flag; the epoch loop asks here after
 * each micro-batch, the ranks agree (any rank's signal, rank 0's clock), and the step that follows
 * ends with a checkpoint the same command resumes from, at that step. */
#include <signal.h>
#include <string.h>

#include "core/base/progress.h"
#include "core/train/trainer_internal.h"

static volatile sig_atomic_t stop_signal;
static struct sigaction previous[2];
static const int stop_signals[2] = {SIGTERM, SIGUSR1};

static void on_stop_signal(int sig) { stop_signal = sig; }

void train_signals_install(void)
{
    stop_signal = 0;
    struct sigaction sa = {.sa_handler = on_stop_signal};
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 2; i++) sigaction(stop_signals[i], &sa, &previous[i]);
}

void train_signals_restore(void)
{
    for (int i = 0; i < 2; i++) sigaction(stop_signals[i], &previous[i], NULL);
}

int trainer_stop_signal(void) { return (int)stop_signal; }

void train_clock_start(trainer *t)
{
    t->run_start = now_seconds();
    t->last_ckpt_time = t->run_start;
}

double train_elapsed(const trainer *t) { return t->time_before + (now_seconds() - t->run_start); }

int train_wants_save(const trainer *t)
{
    /* rank 0's clock decides for everyone (as Lightning broadcasts rank 0's decision) */
    return t->rank == 0 && t->o->ckpt_every_s > 0 && now_seconds() - t->last_ckpt_time >= t->o->ckpt_every_s;
}

int train_wants_stop(trainer *t)
{
    if (stop_signal && !t->stop_reason) t->stop_reason = (int)stop_signal;
    if (!t->stop_reason && t->rank == 0 && t->o->max_time_s > 0 && train_elapsed(t) >= t->o->max_time_s)
        t->stop_reason = TRAIN_STOP_MAX_TIME;
    return t->stop_reason != 0;
}

const char *train_stop_cause(const trainer *t)
{
    switch (t->stop_reason) {
    case SIGTERM: return "SIGTERM";
    case SIGUSR1: return "SIGUSR1";
    case TRAIN_STOP_MAX_TIME: return "trainer.max_time";
    case TRAIN_STOP_PEER: return "another rank's stop request";
    default: return "a stop request";
    }
}
