/* The typed view of dataset.preprocessor.data_aug_effects (ESPnet2's CommonPreprocessor effect
 * list), parsed once when a training config loads (config_load) and attached to
 * preprocessor_cfg.data_aug_effects: each entry's effect kind, its arguments with ESPnet's
 * defaults, and the rules between them. The list mixes numbers, names, mappings and nested lists,
 * which libcyaml cannot type; its numbers go through config_read_number, so their ranges are
 * config_values.c's num_rules (paths data_aug_effects[].weight and data_aug_effects[].<argument>).
 * What the effects do is core/data/augment.h's.
 *
 *   data_aug_effects:
 *     - [0.1, "contrast", {"enhancement_amount": 75.0}]
 *     - - 0.1                   # a group: one of its members is applied
 *       - - [0.3, "speed_perturb", {"factor": 0.9}]
 *         - [0.3, "speed_perturb", {"factor": 1.1}]
 */
#ifndef ESPNET3_CONFIG_AUG_H
#define ESPNET3_CONFIG_AUG_H

#include <stddef.h>

#include "core/base/log.h"
#include "core/config/config_values.h"
#include "core/config/yamltree.h"

#define AUG_MAX_ENTRIES CFG_MAX_AUG_ENTRIES /* entries of data_aug_effects, members of a group */

typedef enum aug_kind {
    AUG_LOWPASS,          /* lowpass_biquad(cutoff_freq = 1000, Q = 0.707) */
    AUG_HIGHPASS,         /* highpass_biquad(cutoff_freq = 3000, Q) */
    AUG_BANDPASS,         /* bandpass_biquad(center_freq = 3000, Q, const_skirt_gain = false) */
    AUG_BANDREJECT,       /* bandreject_biquad(center_freq = 3000, Q) */
    AUG_EQUALIZATION,     /* equalizer_biquad(center_freq = 1000, gain = 0 dB, Q) */
    AUG_CONTRAST,         /* contrast(enhancement_amount = 75) */
    AUG_SPEED_PERTURB,    /* resample(int(factor * fs) -> fs): changes length and pitch */
    AUG_PREEMPHASIS,      /* y[i] = x[i] - coeff x[i-1] (coeff = 0.97) */
    AUG_DEEMPHASIS,       /* lfilter([1, -coeff], [1, 0]): y[i] = x[i] + coeff y[i-1], clamped */
    AUG_CLIPPING,         /* clamp to the min_quantile (0) and max_quantile (0.9) quantiles */
    AUG_POLARITY_INVERSE, /* -x */
    AUG_REVERSE,          /* x backwards */
    /* Through an STFT (n_fft 0.032 s, hop_length 0.008 s, win_length = n_fft, Hann window): */
    AUG_TIME_STRETCH,     /* phase vocoder: length n / factor, pitch kept */
    AUG_PITCH_SHIFT,      /* torchaudio's pitch_shift(n_steps, bins_per_octave = 12): length kept */
    AUG_CORRUPT_PHASE,    /* Gaussian noise (scale 0.5) on the STFT phase */
    AUG_KIND_COUNT
} aug_kind;

/* One effect with its arguments (the ones its kind does not use stay 0). */
typedef struct aug_effect {
    aug_kind kind;
    double freq;          /* cutoff_freq or center_freq, Hz */
    double Q;
    double gain;          /* equalization, dB */
    int const_skirt_gain; /* bandpass */
    double amount;        /* contrast's enhancement_amount, [0, 100] */
    double factor;        /* speed_perturb */
    double coeff;         /* pre/deemphasis */
    double qmin, qmax;    /* clipping's quantiles */
    double n_fft_s, hop_s; /* STFT effects: seconds (hop_s 0: n_fft / 4) */
    double win_samples;   /* samples, as ESPnet's code uses win_length (its docstring says seconds); 0: n_fft */
    int window_none;      /* window: null (rectangular) instead of "hann" */
    double n_steps, bins_per_octave; /* pitch_shift */
    double scale;         /* corrupt_phase's noise */
    ymark mark;           /* where the config wrote it (errors) */
} aug_effect;

/* ESPnet's name of a kind ("lowpass", "speed_perturb", ...); AUG_KIND_COUNT when unknown. */
const char *aug_kind_name(aug_kind k);
aug_kind aug_kind_from_name(const char *name);
/* The kind's defaults (ESPnet's keyword defaults; speed_perturb's factor has none: 1). */
void aug_effect_default(aug_effect *e, aug_kind k);

/* An entry of data_aug_effects: one effect, or a group ([weight, [[w, name, args], ...]]) of
 * which exactly one is applied. */
typedef struct aug_entry {
    double weight;
    int group;             /* 1: choose one of effects by weights */
    size_t n;              /* effects (1 when !group) */
    double *weights;       /* the group members' weights */
    aug_effect *effects;
} aug_entry;

typedef struct aug_effects_cfg {
    size_t n;
    aug_entry *entries;
} aug_effects_cfg;

/* One data_aug_effects item [weight, name, {args}] (args may be left out when empty) at `path`
 * (for messages, e.g. "dataset.preprocessor.data_aug_effects[2]"). */
int config_aug_effect_parse(const ynode *item, const char *path, double *weight, aug_effect *e, esp_err *err);
/* The entries of data_aug_effects (eff: its node, NULL or null when left out: out->n = 0). */
int config_aug_effects_parse(const ynode *eff, aug_effects_cfg *out, esp_err *err);
/* The list of a validated training config's tree (*out NULL when it has none); errors at the
 * entry's line. config_aug_effects_free releases it. */
int config_aug_read(const ynode *root, aug_effects_cfg **out, esp_err *err);
void config_aug_effects_free(aug_effects_cfg *c);
void aug_entries_free(aug_entry *entries, size_t n);

#endif
