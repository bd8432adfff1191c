/* Distributed training through the binary on the tiny recipe, 2 ranks x 1 thread: ddp equals one
 * rank with the same global batch, fsdp equals ddp, resuming on another world size, the
 * torchrun-style manual launch (two commands, TCP between "nodes"), torchrun's agent variables
 * with its store on MASTER_PORT, and failures (a rank killed or stopped) that end every rank
 * with an error naming it and leave no process behind. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/formats/safetensors.h"
#include "test/unit/test_util.h"

static char dir[64];

/* The tiny recipe in 9 batches, in file order, 2 epochs; one thread per rank. */
static char *command(const char *exp, const char *extra)
{
    static char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && OMP_NUM_THREADS=1 timeout 120 '%s' -q --config recipes/espeak_fortunes/conf/training_tiny.yaml "
             "data_dir=%s/data dataset_dir=%s/dl stats_dir=%s/stats exp_dir=%s/%s "
             "dataloader.train.iter_factory.shuffle=false dataloader.train.iter_factory.batches.batch_bins=40000 "
             "trainer.max_epochs=2 %s",
             test_root_dir(), test_bin_path(), dir, dir, dir, dir, exp, extra);
    return cmd;
}

static int run(const char *exp, const char *extra) { return test_sh("%s >>%s/log 2>&1", command(exp, extra), dir); }

/* A file under the temporary folder; "" when missing (the assertion after it says so). */
static char *slurp(const char *rel) { return test_slurp_or_empty(test_path(dir, rel)); }

static void truncate_log(void)
{
    FILE *fp = fopen(test_path(dir, "log"), "w");
    if (fp) fclose(fp);
}

/* test_st_max_diff on two files under dir. */
static double max_diff_of(const char *rel_a, const char *rel_b, const char *only, const char *skip)
{
    return test_st_max_diff(test_path(dir, rel_a), test_path(dir, rel_b), only, skip);
}

/* The attention key bias has a zero gradient in exact arithmetic (softmax ignores a shift shared
 * by all keys), so its gradient is rounding noise that Adam scales into full steps: any change of
 * summation order moves it by up to lr per step. Every other weight must agree to fp32 rounding. */
static double max_diff(const char *rel_a, const char *rel_b)
{
    double k = max_diff_of(rel_a, rel_b, "linear_k.bias", NULL);
    cr_assert(k < 0.02, "linear_k.bias differs by %g, more than the learning rate allows", k);
    return max_diff_of(rel_a, rel_b, NULL, "linear_k.bias");
}

static int same_file(const char *a, const char *b) { return test_same_file(test_path(dir, a), test_path(dir, b)); }

static pid_t start_bg(const char *exp, const char *extra, const char *logname)
{
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        setpgid(0, 0);
        char cmd[4800];
        snprintf(cmd, sizeof cmd, "%s >%s/%s 2>&1", command(exp, extra), dir, logname);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static int wait_status(pid_t pid)
{
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int exists(const char *rel) { return test_exists(test_path(dir, rel)); }

/* Pids of espnet3 processes whose environment says RANK=<rank> and whose exp_dir is ours. */
static int find_rank(int rank, pid_t *out)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    int n = 0;
    char want[32];
    snprintf(want, sizeof want, "RANK=%d", rank);
    while (d && (e = readdir(d))) {
        char p[300], buf[65536];
        snprintf(p, sizeof p, "/proc/%s/cmdline", e->d_name);
        FILE *fp = fopen(p, "rb");
        if (!fp) continue;
        size_t k = fread(buf, 1, sizeof buf - 1, fp);
        fclose(fp);
        int ours = 0;
        for (size_t i = 0; i < k; i += strlen(buf + i) + 1)
            if (strstr(buf + i, dir) && strstr(buf + i, "exp_dir=")) ours = 1;
        if (!ours) continue;
        snprintf(p, sizeof p, "/proc/%s/environ", e->d_name);
        fp = fopen(p, "rb");
        if (!fp) continue;
        k = fread(buf, 1, sizeof buf - 1, fp);
        fclose(fp);
        for (size_t i = 0; i < k; i += strlen(buf + i) + 1)
            if (!strcmp(buf + i, want)) out[n++] = (pid_t)atoi(e->d_name);
    }
    if (d) closedir(d);
    return n;
}

/* Waits (1 ms naps, 30000 at most) until the "kill" run has its first checkpoint and a rank-1
 * process can be found; returns how many were found (their pids in victim), 0 on time-out. */
static int wait_for_rank_1(pid_t *victim)
{
    int found = 0;
    for (int i = 0; i < 30000 && !found; i++) {
        if (exists("kill/checkpoints/epoch=1-step=4/model.safetensors")) found = find_rank(1, victim);
        struct timespec nap = {0, 1000000};
        nanosleep(&nap, NULL);
    }
    return found;
}

/* No process of this test's runs is left. */
static int leftovers(void)
{
    pid_t p[8];
    return find_rank(0, p) + find_rank(1, p);
}

static void setup(void)
{
    test_tmpdir_make(dir, sizeof dir, "dist");
    /* The same in every test: once per run of the tests (test_sh_once). */
    cr_assert_eq(test_sh_once(dir, "%s >>%s/log 2>&1", command("exp0", "--stage 1 --stop_stage 3"), dir), 0,
                 "stages 1-3 failed:\n%s", slurp("log"));
}

static void teardown(void) { test_tmpdir_remove(dir); }

TestSuite(dist_train, .init = setup, .fini = teardown);

#define FINAL "checkpoints/epoch=2-step=8/model.safetensors"

Test(dist_train, ddp_two_ranks_equal_one_rank_and_fsdp_equals_ddp_and_resume_changes_world_size)
{
    /* One rank accumulating 2 batches per step = 2 ranks with one batch each (8 of 9 batches). */
    cr_assert_eq(run("one", "--stages train trainer.accumulate_grad_batches=2 trainer.limit_train_batches=8"), 0, "%s",
                 slurp("log"));
    cr_assert_eq(run("ddp", "--stages train trainer.devices=2"), 0, "%s", slurp("log"));
    char *log = slurp("log");
    cr_assert(strstr(log, "9 batches do not split evenly over 2 ranks: the last 1 are dropped"), "%s", log);
    free(log);
    char *train_log = slurp("ddp/train.log");
    cr_assert(strstr(train_log, "train: epoch 2: parameters identical on all 2 ranks"), "%s", train_log);
    cr_assert(strstr(train_log, "rank 0 of 2 (local 0 of 2, node 0) via torchrun-style environment, strategy ddp"),
              "%s", train_log);
    free(train_log);
    double d = max_diff("ddp/" FINAL, "one/" FINAL);
    cr_assert(d < 1e-6, "ddp differs from one rank by %g", d);
    /* The same losses, epoch by epoch (valid/loss is the last column of the validation rows). */
    char *a = slurp("one/metrics.csv"), *b = slurp("ddp/metrics.csv");
    cr_assert(strlen(a) > 100 && strlen(b) > 100);
    double va[2], vb[2];
    int na = 0, nb = 0;
    for (char *line = strtok(a, "\r\n"); line; line = strtok(NULL, "\r\n"))
        if (line[strlen(line) - 1] != ',' && !strstr(line, "valid/loss") && na < 2) va[na++] = atof(strrchr(line, ',') + 1);
    for (char *line = strtok(b, "\r\n"); line; line = strtok(NULL, "\r\n"))
        if (line[strlen(line) - 1] != ',' && !strstr(line, "valid/loss") && nb < 2) vb[nb++] = atof(strrchr(line, ',') + 1);
    free(a), free(b);
    cr_assert(na == 2 && nb == 2);
    for (int i = 0; i < 2; i++) cr_assert(fabs(va[i] - vb[i]) < 1e-3 * va[i], "valid/loss %g vs %g", va[i], vb[i]);

    /* fsdp: sharded gradients and Adam state, the same weights within fp32 rounding. */
    cr_assert_eq(run("fsdp", "--stages train trainer.devices=2 trainer.strategy=fsdp"), 0, "%s", slurp("log"));
    d = max_diff("fsdp/" FINAL, "ddp/" FINAL);
    cr_assert(d < 1e-6, "fsdp differs from ddp by %g", d);
    d = max_diff_of("fsdp/checkpoints/epoch=2-step=8/trainer_state.safetensors", "ddp/checkpoints/epoch=2-step=8/trainer_state.safetensors", NULL, NULL);
    cr_assert(d < 1e-5, "fsdp's gathered Adam moments differ from ddp's by %g", d);

    /* ddp on 2 ranks for one epoch, then resumed on one rank (same global batch): as one rank throughout. */
    cr_assert_eq(run("mixed", "--stages train trainer.devices=2 trainer.max_epochs=1"), 0, "%s", slurp("log"));
    cr_assert_eq(run("mixed", "--stages train trainer.accumulate_grad_batches=2 trainer.limit_train_batches=8"), 0,
                 "%s", slurp("log"));
    d = max_diff("mixed/" FINAL, "one/" FINAL);
    cr_assert(d < 1e-6, "2 ranks then 1 rank differs from 1 rank by %g", d);
}

Test(dist_train, manual_multi_node_launch_two_commands_over_tcp_and_a_killed_node)
{
    cr_assert_eq(run("ddp", "--stages train trainer.devices=2"), 0, "%s", slurp("log"));
    int port = test_free_port();
    char n0[256], n1[256];
    const char *common = "--stages train trainer.num_nodes=2 --nproc_per_node 1 --nnodes 2 --master_addr 127.0.0.1";
    snprintf(n0, sizeof n0, "%s --node_rank 0 --master_port %d", common, port);
    snprintf(n1, sizeof n1, "%s --node_rank 1 --master_port %d", common, port);
    pid_t a = start_bg("nodes", n0, "node0.log"), b = start_bg("nodes", n1, "node1.log");
    int sa = wait_status(a), sb = wait_status(b);
    cr_assert(sa == 0 && sb == 0, "node 0: %d\n%s\nnode 1: %d\n%s", sa, slurp("node0.log"), sb, slurp("node1.log"));
    /* Different node ranks talk TCP; the ring is the same, so the bits are ddp's. */
    cr_assert(same_file("nodes/" FINAL, "ddp/" FINAL), "TCP run differs from the shared-memory run");

    /* Node 1's rank killed mid-run: node 0 stops with an error naming rank 1; nothing is left. */
    port = test_free_port();
    snprintf(n0, sizeof n0, "%s --node_rank 0 --master_port %d trainer.max_epochs=200", common, port);
    snprintf(n1, sizeof n1, "%s --node_rank 1 --master_port %d trainer.max_epochs=200", common, port);
    a = start_bg("kill", n0, "node0.log"), b = start_bg("kill", n1, "node1.log");
    pid_t victim[4];
    int found = wait_for_rank_1(victim);
    cr_assert_eq(found, 1, "rank 1 not found running\n%s", slurp("node1.log"));
    kill(victim[0], SIGKILL);
    int s0 = wait_status(a), s1 = wait_status(b);
    char *l0 = slurp("node0.log"), *l1 = slurp("node1.log");
    cr_assert(s0 != 0 && s1 != 0, "exit statuses %d %d", s0, s1);
    cr_assert(strstr(l1, "rank 1 (pid") && strstr(l1, "was killed by signal 9"), "%s", l1);
    cr_assert(strstr(l0, "rank 1"), "node 0 does not name rank 1:\n%s", l0);
    free(l0), free(l1);
    cr_assert_eq(leftovers(), 0, "processes left behind");
}

Test(dist_train, killed_or_stopped_local_rank_fails_the_run_naming_it)
{
    pid_t run_pid = start_bg("kill", "--stages train trainer.devices=2 trainer.max_epochs=200", "kill.log");
    pid_t victim[4];
    int found = wait_for_rank_1(victim);
    cr_assert_eq(found, 1, "rank 1 not found running\n%s", slurp("kill.log"));
    kill(victim[0], SIGKILL);
    cr_assert_neq(wait_status(run_pid), 0);
    char *log = slurp("kill.log");
    cr_assert(strstr(log, "espnet3: error: launch: rank 1 (pid") && strstr(log, "was killed by signal 9"), "%s", log);
    free(log);
    cr_assert_eq(leftovers(), 0, "processes left behind");

    /* A rank that hangs (stopped): the other gives up after trainer.dist_timeout, naming it. */
    run_pid = start_bg("hang", "--stages train trainer.devices=2 trainer.max_epochs=200 trainer.dist_timeout=2", "hang.log");
    found = 0;
    for (int i = 0; i < 30000 && !found; i++) {
        if (exists("hang/checkpoints/epoch=1-step=4/model.safetensors")) found = find_rank(1, victim);
        struct timespec nap = {0, 1000000};
        nanosleep(&nap, NULL);
    }
    cr_assert_eq(found, 1);
    kill(victim[0], SIGSTOP);
    cr_assert_neq(wait_status(run_pid), 0);
    log = slurp("hang.log");
    cr_assert(strstr(log, "rank 1 sent nothing for 2 s"), "%s", log);
    free(log);
    cr_assert_eq(leftovers(), 0, "processes left behind");
}

Test(dist_train, torchrun_agent_variables_and_its_store_on_master_port)
{
    /* What `torchrun --no-python --nproc_per_node 2 espnet3 ...` gives each rank, with its agent's
     * store holding MASTER_PORT: our store must take another port (the next one). */
    int port = test_free_port_pair();
    int agent = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr.s_addr = htonl(INADDR_ANY)};
    cr_assert_eq(bind(agent, (struct sockaddr *)&sa, sizeof sa), 0);
    cr_assert_eq(listen(agent, 4), 0);
    pid_t pids[2];
    for (int r = 0; r < 2; r++) {
        char logname[32];
        snprintf(logname, sizeof logname, "rank%d.log", r);
        pids[r] = fork();
        cr_assert(pids[r] >= 0);
        if (pids[r] == 0) {
            char v[16];
            snprintf(v, sizeof v, "%d", r);
            setenv("RANK", v, 1), setenv("LOCAL_RANK", v, 1), setenv("ROLE_RANK", v, 1);
            setenv("GROUP_RANK", "0", 1), setenv("WORLD_SIZE", "2", 1), setenv("LOCAL_WORLD_SIZE", "2", 1);
            setenv("MASTER_ADDR", "127.0.0.1", 1), setenv("TORCHELASTIC_RUN_ID", "none", 1);
            setenv("TORCHELASTIC_RESTART_COUNT", "0", 1);
            snprintf(v, sizeof v, "%d", port);
            setenv("MASTER_PORT", v, 1);
            char cmd[4800];
            snprintf(cmd, sizeof cmd, "%s >%s/%s 2>&1", command("torchrun", "--stages train trainer.devices=2"),
                     dir, logname);
            execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
            _exit(127);
        }
    }
    int s0 = wait_status(pids[0]), s1 = wait_status(pids[1]);
    close(agent);
    cr_assert(s0 == 0 && s1 == 0, "rank 0: %d\n%s\nrank 1: %d\n%s", s0, slurp("rank0.log"), s1, slurp("rank1.log"));
    cr_assert(exists("torchrun/" FINAL));

    /* Launch flags inside a launched rank, and a world size that does not fit the config. */
    truncate_log();
    cr_assert_eq(run("bad", "--stages train --nproc_per_node 2"), 1);
    char *log = slurp("log");
    cr_assert(strstr(log, "trainer.devices 1 x trainer.num_nodes 1 = 1 ranks, but the launch (torchrun-style "
                          "environment) has world size 2"), "%s", log);
    free(log);
    truncate_log();
    cr_assert_eq(run("bad", "--stages train trainer.num_nodes=2"), 1);
    log = slurp("log");
    cr_assert(strstr(log, "trainer.num_nodes 2: a plain command starts the ranks of its own node only"), "%s", log);
    free(log);
}

Test(dist_train, sharded_dataset_rotates_shards_and_ranks_agree_on_epoch_end)
{
    /* 4 shards over 2 ranks: rank 0 trains shard 0, then shard 2; shards hold unequal batch
     * counts, so the ranks stop together only through the end-of-epoch agreement. */
    const char *shards = "--stages train trainer.devices=2 +dataloader.train.total_shards=4 "
                         "+dataloader.train.dist_world_size=2 trainer.per_rank_logs=true";
    cr_assert_eq(run("sharded", shards), 0, "%s", slurp("log"));
    char *log = slurp("sharded/train.log");
    cr_assert(strstr(log, "epoch 1: rank 0 trains shard 0 of 4"), "%s", log);
    cr_assert(strstr(log, "epoch 2: rank 0 trains shard 2 of 4"), "%s", log);
    cr_assert(strstr(log, "epoch 2: parameters identical on all 2 ranks"), "%s", log);
    free(log);
    /* Rank 1's own log (trainer.per_rank_logs): shards 1 and 3. */
    log = slurp("sharded/train.rank1.log");
    cr_assert(strstr(log, "epoch 1: rank 1 trains shard 1 of 4") && strstr(log, "epoch 2: rank 1 trains shard 3 of 4"),
              "%s", log);
    free(log);
    /* ESPnet3's check of dist_world_size against the launch. */
    truncate_log();
    cr_assert_eq(run("badshard", "--stages train trainer.devices=2 +dataloader.train.total_shards=4 "
                                 "+dataloader.train.dist_world_size=1"),
                 1);
    log = slurp("log");
    cr_assert(strstr(log, "dataloader.train: dist_world_size must match the distributed world_size (configured 1, got 2)."),
              "%s", log);
    free(log);
}

/* The real torchrun (the test venv's, torch 2.11) starts two ranks of espnet3 with its agent's
 * variables and store. Its own suite: a skip (no venv) leaves nothing behind. */
Test(dist_torchrun, real_torchrun_starts_two_ranks)
{
    const char *torchrun = test_venv_tool("torchrun");
    setup();
    char extra[512];
    snprintf(extra, sizeof extra, "--stages train trainer.devices=2");
    char cmd[5000];
    /* command() starts with `cd ROOT && OMP_NUM_THREADS=1 timeout 120 BIN ...`: put torchrun before BIN. */
    snprintf(cmd, sizeof cmd, "%s", command("torchrun", extra));
    char *bin = strstr(cmd, "timeout 120 ");
    cr_assert_not_null(bin);
    char rest[5000];
    snprintf(rest, sizeof rest, "%s", bin + strlen("timeout 120 "));
    snprintf(bin, sizeof cmd - (size_t)(bin - cmd), "timeout 120 '%s' --no-python --nproc-per-node 2 --master-port %d %s >>%s/log 2>&1",
             torchrun, test_free_port_pair(), rest, dir);
    cr_assert_eq(system(cmd), 0, "%s", slurp("log"));
    cr_assert(exists("torchrun/" FINAL));
    char *log = slurp("torchrun/train.log");
    cr_assert(strstr(log, "rank 0 of 2 (local 0 of 2, node 0) via torchrun-style environment"), "%s", log);
    free(log);
    teardown();
}

/* 16-mixed on 2 ranks: ddp ranks see the same averaged gradients, fsdp ranks each unscale their
 * chunk and agree on inf/NaN (an all-reduce of the flag), so both skip the same steps (the tiny
 * model overflows float16 at the initial scale) and end with the same weights. */
Test(dist_train, fp16_mixed_skips_the_same_steps_on_ddp_and_fsdp_ranks)
{
    cr_assert_eq(run("ddp16", "--stages train trainer.devices=2 trainer.precision=16-mixed"), 0, "%s", slurp("log"));
    cr_assert_eq(run("fsdp16", "--stages train trainer.devices=2 trainer.strategy=fsdp trainer.precision=16-mixed"), 0,
                 "%s", slurp("log"));
    const char *exps[] = {"ddp16/train.log", "fsdp16/train.log"};
    for (int i = 0; i < 2; i++) {
        char *tl = slurp(exps[i]);
        cr_assert(strstr(tl, "train: step 1: inf/NaN gradients at loss scale 65536: optimizer step skipped"), "%s: %s",
                  exps[i], tl);
        cr_assert(strstr(tl, "parameters identical on all 2 ranks"), "%s", tl);
        free(tl);
    }
    double d = max_diff("fsdp16/" FINAL, "ddp16/" FINAL);
    cr_assert(d < 1e-6, "16-mixed: fsdp differs from ddp by %g", d);
}
