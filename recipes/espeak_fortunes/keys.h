/* The espeak_fortunes recipe's keys of create_dataset (its table is recipes/espeak_fortunes/keys.c,
 * registered with core/config/config_recipe.h): what its builder (builder.c) reads. */
#ifndef ESPNET3_ESPEAK_FORTUNES_KEYS_H
#define ESPNET3_ESPEAK_FORTUNES_KEYS_H

#include <stdint.h>

#include "core/config/config_recipe.h"

/* create_dataset.engines[] / test_engine: a speech synthesizer and its voices. */
typedef struct synth_engine_cfg {
    char *name;          /* espeak-ng | festival | flite */
    char **voices; unsigned n_voices;           /* train and valid (test_engine: its only voices) */
    char **variants; unsigned n_variants;       /* espeak-ng voice variants (m1, f2, ...) */
    char **test_voices; unsigned n_test_voices; /* the test split's unseen voices of this engine */
    char **test_variants; unsigned n_test_variants;
} synth_engine_cfg;

typedef struct espeak_fortunes_cfg {
    char *synthesizer;   /* espeak-ng */
    char *text_source;   /* directory of fortune files */
    int64_t seed;
    int64_t num_train, num_valid, num_test;
    char **train_voices; unsigned n_train_voices;
    char **test_voices;  unsigned n_test_voices;
    char **train_variants; unsigned n_train_variants;
    char **test_variants;  unsigned n_test_variants;
    int64_t *speed_range; unsigned n_speed_range; /* words per minute [low, high] */
    int64_t *pitch_range; unsigned n_pitch_range; /* espeak pitch 0..99 [low, high] */
    int64_t min_words, max_words;
    int64_t fs;
    int64_t nj;          /* parallel synthesis processes */
    synth_engine_cfg *engines; unsigned n_engines; /* several synthesizers (instead of synthesizer + *_voices) */
    synth_engine_cfg *test_engine; /* a synthesizer never heard in training: the test_engine split */
    int64_t num_test_engine;
    int64_t num_rirs;    /* generated room impulse responses: <dataset_dir>/rir.scp (for rir_scp) */
    int64_t num_noises;  /* generated colored noises: <dataset_dir>/noise.scp (for noise_scp) */
} espeak_fortunes_cfg;

extern const config_recipe espeak_fortunes_recipe;

#endif
