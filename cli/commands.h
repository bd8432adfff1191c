/* Subcommands, git style: `espnet3 <command> ...` runs a command of this table instead of the
 * stage runner (cli/main.c dispatches when argv[1] names one; `espnet3 --help` lists them). Each
 * lives in its own file (cli/cmd_<name>.c) with its own option table (cli/options.h). */
#ifndef ESPNET3_CLI_COMMANDS_H
#define ESPNET3_CLI_COMMANDS_H

typedef struct cli_command {
    const char *name;
    int (*run)(int argc, char **argv); /* argv[0] is the command's name; returns the exit status */
    const char *summary;
} cli_command;

/* The command called name, NULL when there is none. */
const cli_command *cli_command_find(const char *name);
/* The table, ended by an entry whose name is NULL. */
const cli_command *cli_command_list(void);

/* The commands (one file each). */
int cmd_transcribe(int argc, char **argv);
int cmd_align(int argc, char **argv);

#endif
