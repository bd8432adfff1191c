/* The command line: one option table drives parsing, `--help` and the usage line, so help never
 * drifts from what the parser accepts (git's parse-options idea). */
#ifndef ESPNET3_CLI_OPTIONS_H
#define ESPNET3_CLI_OPTIONS_H

#include "core/base/log.h"

typedef struct cli_args {
    const char *training_config;
    const char *inference_config;
    const char *metrics_config;
    const char *publication_config;
    const char *demo_config;
    const char *template_dir;
    long stage;                /* -1: not given */
    long stop_stage;           /* -1: not given */
    const char **stages;       /* --stages names (NULL-terminated), NULL when not given */
    int n_stages;
    const char **overrides;    /* key.path=value */
    int n_overrides;
    long nproc_per_node;       /* -1: not given (the five launch flags) */
    long nnodes;
    long node_rank;
    const char *master_addr;
    long master_port;
    int dry_run;
    int show_config;           /* print the configs with every default, run nothing */
    int write_requirements;    /* ESPnet3's: requirements.txt beside each stage log */
    int quiet;
    int help;
    int version;
} cli_args;

/* Parses argv. On a usage error fills err and returns -1 (the caller prints the usage line and
 * exits 2). */
int cli_parse(int argc, char **argv, cli_args *out, esp_err *err);
void cli_args_free(cli_args *a);
/* The command line of one rank of a launch: argv without the stage selection and the launch
 * flags, plus `--stages <stage>`. NULL-terminated; free the array only. */
char **cli_rank_argv(int argc, char **argv, const char *stage);
void cli_print_help(void *fp /* FILE* */);
void cli_print_usage(void *fp /* FILE* */);

#endif
