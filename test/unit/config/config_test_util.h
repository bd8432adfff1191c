/* Helpers of the config tests in test_config_limits.c and test_config_values.c: loading a config
 * written into a folder, and running the binary under test (ESPNET3_BIN) on one, with its exit
 * status, stderr, time and peak memory. */
#ifndef ESPNET3_CONFIG_TEST_UTIL_H
#define ESPNET3_CONFIG_TEST_UTIL_H

#include "core/config/config.h"

typedef struct bin_run {
    int status;      /* exit status; -1 when killed or timed out */
    double seconds;  /* wall time */
    long maxrss_kb;  /* the child's peak resident memory */
    char out[1 << 16];
    char err[1 << 16];
} bin_run;

/* Runs the binary with args (NULL-terminated) in dir, 60 s at most (static result). */
const bin_run *cfg_run_bin(const char *dir, const char *const *args);
#define CFG_RUN(dir, ...) cfg_run_bin((dir), (const char *const[]){__VA_ARGS__, NULL})

/* Loads path as a config of kind, with the repository's conf/ template when with_template. */
int cfg_load(config_kind kind, const char *path, int with_template, const char **ov, int n_ov, esp_config **cfg,
             esp_err *err);

/* Lines in text (a last line without '\n' counts). */
int cfg_count_lines(const char *text);

/* Seconds on the monotonic clock. */
double cfg_now(void);

/* This process' CPU seconds: the measure of in-process work's limits, which other work sharing
 * the machine does not inflate as it does the wall clock. */
double cfg_cpu_now(void);

#endif
