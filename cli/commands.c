/* The subcommand table; see commands.h. */
#include "cli/commands.h"

#include <stddef.h>
#include <string.h>

static const cli_command commands[] = {
    {"transcribe", cmd_transcribe, "audio files to text with a trained model (text, json, ctm, srt, vtt)"},
    {"align", cmd_align, "where each line of a transcript lies in a recording (ESPnet's CTC segmentation)"},
    {NULL, NULL, NULL},
};

const cli_command *cli_command_find(const char *name)
{
    for (const cli_command *c = commands; c->name; c++)
        if (!strcmp(c->name, name)) return c;
    return NULL;
}

const cli_command *cli_command_list(void) { return commands; }
