/* What espnet3's own CLI reaches through an opened model beyond include/espnet3.h: its decoder,
 * for `espnet3 transcribe --stream` (core/decode/speech2text_stream.h). Streaming stays a
 * CLI-level use of core: the public header keeps its 20 functions (issue 42's limit). Not
 * exported from libespnet3.so (lib/espnet3.map exports espnet3_* only). */
#ifndef ESPNET3_LIB_ESPNET3_CLI_H
#define ESPNET3_LIB_ESPNET3_CLI_H

#include "core/decode/speech2text.h"
#include "include/espnet3.h"

/* The speech2text m decodes with (borrowed; m must stay open). */
speech2text *lib_model_speech2text(espnet3_model *m);

#endif
