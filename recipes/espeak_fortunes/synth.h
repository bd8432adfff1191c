/* Text-to-speech through an installed synthesizer program (espeak-ng, flite): runs it without a
 * shell, takes its WAV output in memory, resamples and writes 16-bit PCM mono WAV. */
#ifndef ESPNET3_SYNTH_H
#define ESPNET3_SYNTH_H

#include "core/base/log.h"

typedef enum synth_engine {
    SYNTH_ESPEAK_NG,
    SYNTH_FLITE,
} synth_engine;

typedef struct synth_params {
    const char *voice; /* espeak-ng: "en-us" or "en-us+f2" (voice+variant); flite: kal, slt, rms... */
    int speed_wpm;     /* words per minute (espeak-ng -s; flite gets a duration stretch) */
    int pitch;         /* 0..99 (espeak-ng -p; flite gets a mean F0 in Hz) */
    const char *text;
} synth_params;

/* "espeak-ng" or "flite"; an unknown name is an error listing both. */
int synth_engine_parse(const char *name, synth_engine *out, esp_err *err);
/* Fails with the Debian package to install when the program is not on PATH. */
int synth_check_installed(synth_engine engine, esp_err *err);

/* Synthesizes p->text and writes it to out_path as mono 16-bit PCM WAV at fs Hz (temp file +
 * rename). Errors carry the program's exit status and stderr. */
int synth_to_wav(synth_engine engine, const synth_params *p, int fs, const char *out_path,
                 esp_err *err);

#endif
