/* The command line: one option table drives parsing, `--help` and the usage line, so help never
 * drifts from what the parser accepts (git's parse-options idea). */
#ifndef ESPNET3_CLI_OPTIONS_H
#define ESPNET3_CLI_OPTIONS_H

#include "../core/log.h"

typedef struct cli_args {
    const char *training_config;
    const char *inference_config;
    const char *metrics_config;
    const char *template_dir;
    long stage;                /* -1: not given */
    long stop_stage;           /* -1: not given */
    const char **stages;       /* --stages names (NULL-terminated), NULL when not given */
    int n_stages;
    const char **overrides;    /* key.path=value */
    int n_overrides;
    int dry_run;
    int quiet;
    int help;
    int version;
} cli_args;

/* Parses argv. On a usage error fills err and returns -1 (the caller prints the usage line and
 * exits 2). */
int cli_parse(int argc, char **argv, cli_args *out, esp_err *err);
void cli_args_free(cli_args *a);
void cli_print_help(void *fp /* FILE* */);
void cli_print_usage(void *fp /* FILE* */);

#endif
