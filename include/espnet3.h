/* libespnet3: speech to text from a trained espnet3 or ESPnet2 model, in C.
 *
 *   espnet3_options *o = espnet3_options_new();
 *   espnet3_options_set(o, "beam", "10");                  (every setting has a default)
 *   espnet3_model *m = espnet3_open("exp/model_pack", o);  (NULL: espnet3_last_error() says why)
 *   espnet3_result *r = espnet3_transcribe(m, samples, n, 16000);
 *   puts(espnet3_result_text(r, 0));
 *   espnet3_result_free(r); espnet3_close(m); espnet3_options_free(o);
 *
 * A model is one of: a pack folder (stage 8 pack_model's model_pack/), a zip of one, an ESPnet2
 * packed model zip (meta.yaml at its root), or an experiment folder (config.yaml and the weights
 * training wrote: valid.loss.ave, else valid.acc.ave, else last). The decoding options default to a
 * pack's conf/inference.yaml, else to ESPnet's Speech2Text defaults (docs/library.md).
 *
 * Errors: a function that fails returns NULL or -1 and leaves a one-line message, for the calling
 * thread, in espnet3_last_error() ("<file>: <what> (<hint>)"). Samples at another rate than the
 * model's are resampled (libsamplerate's best sinc converter). A model is used by one thread at a
 * time; separate models may run in separate threads. Strings returned are owned by the object they
 * came from and live as long as it. Version 1 of this interface; the shared library's symbols carry
 * the version node ESPNET3_1. */
#ifndef ESPNET3_H
#define ESPNET3_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The interface version this header describes; espnet3_api_version() is the library's. */
#define ESPNET3_API_VERSION 1

typedef struct espnet3_options espnet3_options; /* settings for espnet3_open */
typedef struct espnet3_model espnet3_model;     /* an opened model */
typedef struct espnet3_result espnet3_result;   /* the hypotheses of one utterance, best first */

/* One token or word of a hypothesis. Times are seconds from the start of the audio and score the
 * mean frame log-posterior along a CTC forced alignment of the hypothesis (a word's: the mean of its
 * tokens'); all three are -1 where there is none (a model without a CTC branch, a hypothesis no CTC
 * path emits), and such a hypothesis has no words. id is the token's index in the model's token
 * list (-1 for a word). */
typedef struct espnet3_item {
    const char *text;
    int id;
    double start, end, score;
} espnet3_item;

int espnet3_api_version(void);     /* ESPNET3_API_VERSION of the library that is linked */
const char *espnet3_version(void); /* the espnet3 release, e.g. "0.1.0" */
const char *espnet3_last_error(void); /* this thread's last error message ("" when none) */

/* Settings by name, values as text (as on the command line):
 *   device      cpu (default), cuda, cuda:N
 *   threads     CPU threads (default 1)
 *   beam        beam size (1 with ctc_weight 1: greedy CTC)
 *   ctc_weight  1: CTC only; below 1: joint CTC/attention search (needs an attention decoder)
 *   penalty     length bonus per token
 *   nbest       hypotheses to return (default 1)
 *   lm          a language model: an LM experiment folder or a pack that holds one
 *   lm_weight   shallow fusion's weight (default 1.0 with lm, as ESPnet's Speech2Text)
 *   longform_threshold  audio longer than this many seconds is decoded in overlapping windows and
 *                       read in blocks, memory bounded by the window (inf: never); the best
 *                       hypothesis only. Default: a pack's longform: block, else 30
 *   longform_window     seconds per window (default the pack's, else 10)
 *   longform_overlap    seconds neighbouring windows share, at most half the window (default the
 *                       pack's, else 2)
 *   progress    1: a progress line on stderr over a long recording's windows (default 0)
 *   batch_size  files espnet3_transcribe_files decodes at once (default: a pack's inference.yaml
 *               batch_size, else 1)
 * -1 for an unknown name or a value that does not parse. */
espnet3_options *espnet3_options_new(void);
int espnet3_options_set(espnet3_options *o, const char *name, const char *value);
void espnet3_options_free(espnet3_options *o);

/* Loads the model (options may be NULL: the defaults). */
espnet3_model *espnet3_open(const char *model, const espnet3_options *o);
void espnet3_close(espnet3_model *m);
int espnet3_sample_rate(const espnet3_model *m); /* the rate the model was trained at */
int espnet3_batch_size(const espnet3_model *m);  /* espnet3_transcribe_files' files per batch */

/* Transcribes n mono samples in [-1, 1] at sample_rate Hz (long ones in windows, see above). */
espnet3_result *espnet3_transcribe(espnet3_model *m, const float *samples, size_t n, int sample_rate);
/* The same for an audio file libsndfile reads (WAV, FLAC, ...; mono), "-" for standard input. */
espnet3_result *espnet3_transcribe_file(espnet3_model *m, const char *path);
/* Transcribes n files as espnet3_transcribe_file would, batch_size at a time: the files of a batch
 * that are decoded whole go through the encoder padded together and one beam search over all their
 * hypotheses (the same hypotheses as one at a time). out[i] gets file i's result, also when it failed
 * (then espnet3_result_error says why). Returns how many failed. */
size_t espnet3_transcribe_files(espnet3_model *m, const char *const *paths, size_t n, espnet3_result **out);
/* NULL, or the error of a file espnet3_transcribe_files could not transcribe (no hypotheses). */
const char *espnet3_result_error(const espnet3_result *r);
void espnet3_result_free(espnet3_result *r);

size_t espnet3_result_count(const espnet3_result *r);            /* hypotheses: 0 .. nbest */
double espnet3_result_duration(const espnet3_result *r);         /* seconds of audio decoded */
const char *espnet3_result_text(const espnet3_result *r, size_t k); /* hypothesis k's text ("" past the end) */
double espnet3_result_score(const espnet3_result *r, size_t k);  /* its search score (log domain) */
size_t espnet3_result_tokens(const espnet3_result *r, size_t k); /* its token count */
size_t espnet3_result_words(const espnet3_result *r, size_t k);  /* its word count */
/* Token / word i of hypothesis k into *out; -1 when out of range. */
int espnet3_result_token(const espnet3_result *r, size_t k, size_t i, espnet3_item *out);
int espnet3_result_word(const espnet3_result *r, size_t k, size_t i, espnet3_item *out);

#ifdef __cplusplus
}
#endif

#endif
