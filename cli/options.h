/* The command line: an option table drives parsing, `--help` and the usage line, so help never
 * drifts from what the parser accepts (git's parse-options idea). The main command line (the stage
 * runner) has one; each subcommand (cli/commands.h) has its own. */
#ifndef ESPNET3_CLI_OPTIONS_H
#define ESPNET3_CLI_OPTIONS_H

#include <stddef.h>

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
    int write_requirements;    /* ESPnet3's: requirements.txt beside each stage log */
    int quiet;
    int help;
    int version;
} cli_args;

/* One option of a table: the table drives parsing, the usage line and --help. */
typedef enum opt_type {
    OPT_FLAG,   /* int, set to 1 */
    OPT_INT,    /* long, non-negative */
    OPT_STAGE,  /* long, a stage number */
    OPT_STRING, /* const char *, the argument itself */
    OPT_NAMES,  /* const char ** (NULL-terminated): the words up to the next option */
} opt_type;

typedef struct cli_option {
    char short_name;         /* 0: none */
    const char *long_name;
    const char *alias;       /* another long name, NULL if none */
    opt_type type;
    size_t offset;           /* its field in the table's struct */
    const char *arg_name;
    const char *default_text;
    const char *help;
} cli_option;

typedef struct cli_table {
    const cli_option *options;
    size_t n;
    const char *prog;        /* "espnet3", "espnet3 transcribe" */
    const char *operands;    /* the usage line's tail: "[key.path=value ...]", "MODEL FILE..." */
} cli_table;

/* Parses argv[1..argc) by the table into out (its fields zeroed or defaulted by the caller);
 * arguments that are not options (after "--": all) go to pos[0..*n_pos), pos having room for argc.
 * On a usage error fills err and returns -1. */
int cli_parse_table(const cli_table *t, int argc, char **argv, void *out, const char **pos, int *n_pos, esp_err *err);
void cli_table_usage(const cli_table *t, void *fp /* FILE* */);
/* The options' lines of --help: label, help, default. */
void cli_table_options(const cli_table *t, void *fp /* FILE* */);

/* The main command line (stages): parses argv. On a usage error fills err and returns -1 (the caller prints the usage line and
 * exits 2). */
int cli_parse(int argc, char **argv, cli_args *out, esp_err *err);
void cli_args_free(cli_args *a);
/* The command line of one rank of a launch: argv without the stage selection and the launch
 * flags, plus `--stages <stage>`. NULL-terminated; free the array only. */
char **cli_rank_argv(int argc, char **argv, const char *stage);
void cli_print_help(void *fp /* FILE* */);
void cli_print_usage(void *fp /* FILE* */);

#endif
