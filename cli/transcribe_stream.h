/* `espnet3 transcribe --stream`: one audio stream (standard input, a file or a FIFO) of 16-bit PCM
 * (raw at the model's rate, or a WAV) decoded as it arrives by core/decode/speech2text_stream.h,
 * the best running hypothesis printed whenever it changes and the final result at the end. */
#ifndef ESPNET3_CLI_TRANSCRIBE_STREAM_H
#define ESPNET3_CLI_TRANSCRIBE_STREAM_H

#include "include/espnet3.h"

typedef struct tr_stream_opts {
    const char *input;   /* "-": standard input */
    int json;            /* JSON lines instead of text */
    int latency;         /* text: each line gains its times */
    double push_s;       /* audio gathered before each push, seconds */
    int no_repetition_check; /* ESPnet's disable_repetition_detection */
} tr_stream_opts;

/* Returns the exit status (0; 1 after an error line on stderr). */
int tr_stream_run(espnet3_model *m, const tr_stream_opts *o);

#endif
