/* Text-to-speech through an installed synthesizer program (espeak-ng, flite, Festival's
 * text2wave): runs it without a shell (argv; Festival reads the text from a file), takes its WAV
 * output in memory, resamples it with libsamplerate and writes 16-bit PCM mono WAV. */
#ifndef ESPNET3_SYNTH_H
#define ESPNET3_SYNTH_H

#include "core/base/log.h"

typedef enum synth_engine {
    SYNTH_ESPEAK_NG,
    SYNTH_FLITE,
    SYNTH_FESTIVAL, /* text2wave with a Festival voice: kal_diphone, ked_diphone, cmu_us_slt_arctic_hts */
    SYNTH_ENGINE_COUNT
} synth_engine;

typedef struct synth_params {
    const char *voice; /* espeak-ng: "en-us" or "en-us+f2" (voice+variant); flite: kal, slt, rms...;
                        * festival: a voice directory name (kal_diphone) */
    int speed_wpm;     /* words per minute (espeak-ng -s; flite and festival get a duration stretch) */
    int pitch;         /* 0..99 (espeak-ng -p; flite gets a mean F0 in Hz; festival keeps its voice's) */
    const char *text;
} synth_params;

/* "espeak-ng", "flite" or "festival"; an unknown name is an error listing them. */
int synth_engine_parse(const char *name, synth_engine *out, esp_err *err);
const char *synth_engine_name(synth_engine engine);
/* Whether the engine has the voice (flite: `flite -lv`; festival: a voices/<lang>/<voice>
 * directory; espeak-ng: not checked here, it fails loudly itself). Both programs would otherwise
 * fall back to another voice (flite) or write nothing with exit status 0 (text2wave). */
int synth_check_voice(synth_engine engine, const char *voice, esp_err *err);
/* Fails with the Debian package to install when the program is not on PATH. */
int synth_check_installed(synth_engine engine, esp_err *err);

/* Synthesizes p->text and writes it to out_path as mono 16-bit PCM WAV at fs Hz (temp file +
 * rename). Errors carry the program's exit status and stderr. */
int synth_to_wav(synth_engine engine, const synth_params *p, int fs, const char *out_path,
                 esp_err *err);

#endif
