/* The parsing of dataset.preprocessor.data_aug_effects into its typed view (core/config/config_aug.h):
 * the effects' names, ESPnet's defaults of their arguments, the shape of the list and the rules
 * between arguments. */
#include "core/config/config_aug.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config/config_schema.h"
#include "core/config/config_values_internal.h"

static const char *const kind_names[AUG_KIND_COUNT] = {
    [AUG_LOWPASS] = "lowpass",
    [AUG_HIGHPASS] = "highpass",
    [AUG_BANDPASS] = "bandpass",
    [AUG_BANDREJECT] = "bandreject",
    [AUG_EQUALIZATION] = "equalization",
    [AUG_CONTRAST] = "contrast",
    [AUG_SPEED_PERTURB] = "speed_perturb",
    [AUG_PREEMPHASIS] = "preemphasis",
    [AUG_DEEMPHASIS] = "deemphasis",
    [AUG_CLIPPING] = "clipping",
    [AUG_POLARITY_INVERSE] = "polarity_inverse",
    [AUG_REVERSE] = "reverse",
    [AUG_TIME_STRETCH] = "time_stretch",
    [AUG_PITCH_SHIFT] = "pitch_shift",
    [AUG_CORRUPT_PHASE] = "corrupt_phase",
};

const char *aug_kind_name(aug_kind k) { return k < AUG_KIND_COUNT ? kind_names[k] : "?"; }

aug_kind aug_kind_from_name(const char *name)
{
    for (int k = 0; k < AUG_KIND_COUNT; k++)
        if (!strcmp(kind_names[k], name)) return (aug_kind)k;
    return AUG_KIND_COUNT;
}

void aug_effect_default(aug_effect *e, aug_kind k)
{
    memset(e, 0, sizeof *e);
    e->kind = k;
    e->Q = 0.707;
    switch (k) {
    case AUG_LOWPASS: e->freq = 1000; break;
    case AUG_HIGHPASS: e->freq = 3000; break;
    case AUG_BANDPASS: e->freq = 3000; break;
    case AUG_BANDREJECT: e->freq = 3000; break;
    case AUG_EQUALIZATION: e->freq = 1000; break;
    case AUG_CONTRAST: e->amount = 75.0; break;
    case AUG_SPEED_PERTURB: e->factor = 1.0; break;
    case AUG_PREEMPHASIS:
    case AUG_DEEMPHASIS: e->coeff = 0.97; break;
    case AUG_CLIPPING: e->qmin = 0.0, e->qmax = 0.9; break;
    case AUG_TIME_STRETCH: e->factor = 1.0; break;
    case AUG_PITCH_SHIFT: e->bins_per_octave = 12; break;
    case AUG_CORRUPT_PHASE: e->scale = 0.5; break;
    default: break;
    }
    e->n_fft_s = 0.032, e->hop_s = 0.008; /* ESPnet's STFT defaults (used by the STFT effects) */
}

static const char *fail_hint_kinds(void)
{
    return "lowpass, highpass, bandpass, bandreject, equalization, contrast, speed_perturb, preemphasis, "
           "deemphasis, clipping, polarity_inverse, reverse, time_stretch, pitch_shift, corrupt_phase";
}

/* Schema paths of the range rules (core/config/config_values.c). */
#define PRE "dataset.preprocessor"
#define EFFECTS PRE ".data_aug_effects[]"

/* The numbers of one data_aug_effects entry (its weight aside), by key, and the effects taking each. */
typedef struct arg_rule {
    const char *key;
    int kinds;            /* bit per aug_kind */
    int is_bool;
    size_t offset;        /* into aug_effect */
} arg_rule;

#define K(k) (1 << (k))
#define STFTS (K(AUG_TIME_STRETCH) | K(AUG_PITCH_SHIFT) | K(AUG_CORRUPT_PHASE))
#define FILTERS (K(AUG_LOWPASS) | K(AUG_HIGHPASS) | K(AUG_BANDPASS) | K(AUG_BANDREJECT) | K(AUG_EQUALIZATION))
static const arg_rule arg_rules[] = {
    {"cutoff_freq", K(AUG_LOWPASS) | K(AUG_HIGHPASS), 0, offsetof(aug_effect, freq)},
    {"center_freq", K(AUG_BANDPASS) | K(AUG_BANDREJECT) | K(AUG_EQUALIZATION), 0, offsetof(aug_effect, freq)},
    {"Q", FILTERS, 0, offsetof(aug_effect, Q)},
    {"gain", K(AUG_EQUALIZATION), 0, offsetof(aug_effect, gain)},
    {"const_skirt_gain", K(AUG_BANDPASS), 1, offsetof(aug_effect, const_skirt_gain)},
    {"enhancement_amount", K(AUG_CONTRAST), 0, offsetof(aug_effect, amount)},
    {"factor", K(AUG_SPEED_PERTURB) | K(AUG_TIME_STRETCH), 0, offsetof(aug_effect, factor)},
    {"n_fft", STFTS, 0, offsetof(aug_effect, n_fft_s)},
    {"win_length", STFTS, 0, offsetof(aug_effect, win_samples)},
    {"hop_length", STFTS, 0, offsetof(aug_effect, hop_s)},
    {"n_steps", K(AUG_PITCH_SHIFT), 0, offsetof(aug_effect, n_steps)},
    {"bins_per_octave", K(AUG_PITCH_SHIFT), 0, offsetof(aug_effect, bins_per_octave)},
    {"scale", K(AUG_CORRUPT_PHASE), 0, offsetof(aug_effect, scale)},
    {"coeff", K(AUG_PREEMPHASIS) | K(AUG_DEEMPHASIS), 0, offsetof(aug_effect, coeff)},
    {"min_quantile", K(AUG_CLIPPING), 0, offsetof(aug_effect, qmin)},
    {"max_quantile", K(AUG_CLIPPING), 0, offsetof(aug_effect, qmax)},
};

/* ESPnet's effects that are not here: a clear refusal rather than an unknown name. */
static const char *const unsupported[] = {"bandwidth_limitation", "codecs", NULL};

static int parse_args(const ynode *args, const char *path, aug_effect *e, esp_err *err)
{
    int have_factor = 0;
    for (size_t i = 0; args && i < args->n; i++) {
        const char *key = args->keys[i];
        const ynode *v = args->items[i];
        char *p = xasprintf("%s.%s", path, key);
        int rc = 0;
        if (!strcmp(key, "sample_rate")) { /* ESPnet drops it: the preprocessor's fs is used */
            free(p);
            continue;
        }
        if (!strcmp(key, "window") && (K(e->kind) & STFTS)) { /* torch.<window>_window, or none */
            if (yt_is_null(v)) e->window_none = 1;
            else if (v->kind != YN_SCALAR || strcmp(v->str, "hann"))
                rc = config_fail_node(err, v, p, "only \"hann\" or null is supported, got '%s'",
                                      v->kind == YN_SCALAR ? v->str : "...");
            free(p);
            if (rc != 0) return -1;
            continue;
        }
        if ((!strcmp(key, "win_length") || !strcmp(key, "hop_length")) && (K(e->kind) & STFTS) && yt_is_null(v)) {
            if (!strcmp(key, "hop_length")) e->hop_s = 0; /* None: n_fft / 4; win_length None: n_fft */
            free(p);
            continue;
        }
        const arg_rule *r = NULL;
        for (size_t k = 0; k < sizeof arg_rules / sizeof *arg_rules; k++)
            if (!strcmp(arg_rules[k].key, key) && (arg_rules[k].kinds & K(e->kind))) r = &arg_rules[k];
        if (!r) {
            rc = config_fail_node(err, v, p, "%s takes no argument '%s' (see ESPnet's espnet2/layers/augmentation.py)",
                                  aug_kind_name(e->kind), key);
        } else if (r->is_bool) {
            int b;
            if (v->kind != YN_SCALAR || !yt_as_bool(v, &b))
                rc = config_fail_node(err, v, p, "expected true or false, got %s", yt_kind_name(v));
            else *(int *)((char *)e + r->offset) = b;
        } else {
            char *sp = xasprintf(EFFECTS ".%s", key);
            rc = config_read_number(v, sp, p, (double *)((char *)e + r->offset), err);
            free(sp);
            if (!strcmp(key, "factor") || !strcmp(key, "n_steps")) have_factor = 1;
        }
        free(p);
        if (rc != 0) return -1;
    }
    if ((e->kind == AUG_SPEED_PERTURB || e->kind == AUG_TIME_STRETCH) && !have_factor)
        return config_fail_node(err, args, path, "%s needs a factor (e.g. {\"factor\": 0.9})", aug_kind_name(e->kind));
    if (e->kind == AUG_PITCH_SHIFT && !have_factor)
        return config_fail_node(err, args, path, "pitch_shift needs n_steps (e.g. {\"n_steps\": 2})");
    if (e->kind == AUG_PITCH_SHIFT && fabs(e->n_steps / e->bins_per_octave) > 2)
        return config_fail_node(err, args, path, "n_steps %g / bins_per_octave %g is more than two octaves",
                                e->n_steps, e->bins_per_octave);
    if (e->kind == AUG_CLIPPING && e->qmin > e->qmax)
        return config_fail_node(err, args, path, "min_quantile %g is above max_quantile %g", e->qmin, e->qmax);
    return 0;
}

int config_aug_effect_parse(const ynode *item, const char *path, double *weight, aug_effect *e, esp_err *err)
{
    if (item->kind != YN_SEQ || item->n < 2 || item->n > 3)
        return config_fail_node(err, item, path, "expected [weight, \"effect\", {arguments}], got %s",
                                yt_kind_name(item));
    char *wp = xasprintf("%s[0]", path);
    int rc = config_read_number(item->items[0], EFFECTS ".weight", wp, weight, err);
    free(wp);
    if (rc != 0) return -1;
    const ynode *name = item->items[1];
    char *np = xasprintf("%s[1]", path);
    if (name->kind != YN_SCALAR) {
        rc = config_fail_node(err, name, np, "expected an effect name, got %s", yt_kind_name(name));
        free(np);
        return rc;
    }
    aug_kind k = aug_kind_from_name(name->str);
    if (k == AUG_KIND_COUNT) {
        int known = 0;
        for (const char *const *u = unsupported; *u; u++) known |= !strcmp(*u, name->str);
        rc = config_fail_node(err, name, np, known ? "'%s' is not implemented by espnet3 (supported: %s)"
                                                   : "unknown effect '%s' (supported: %s)",
                              name->str, fail_hint_kinds());
        free(np);
        return rc;
    }
    free(np);
    aug_effect_default(e, k);
    e->mark = name->mark;
    const ynode *args = item->n == 3 ? item->items[2] : NULL;
    char *ap = xasprintf("%s[2]", path);
    if (args && yt_is_null(args)) args = NULL;
    if (args && args->kind != YN_MAP) rc = config_fail_node(err, args, ap, "expected a mapping of arguments, got %s",
                                                            yt_kind_name(args));
    else if (!args && (k == AUG_SPEED_PERTURB || k == AUG_TIME_STRETCH || k == AUG_PITCH_SHIFT))
        rc = config_fail_node(err, item, path, "%s needs arguments (e.g. {\"%s\": %s})", aug_kind_name(k),
                              k == AUG_PITCH_SHIFT ? "n_steps" : "factor", k == AUG_PITCH_SHIFT ? "2" : "0.9");
    else rc = parse_args(args, ap, e, err);
    free(ap);
    return rc;
}

/* A group entry [weight, [[w, name, args], ...]]. */
static int parse_group(const ynode *item, const char *path, aug_entry *en, esp_err *err)
{
    const ynode *list = item->items[1];
    char *lp = xasprintf("%s[1]", path);
    int rc = 0;
    if (list->n == 0 || list->n > AUG_MAX_ENTRIES)
        rc = config_fail_node(err, list, lp, "a group needs 1 to %d effects, got %zu", AUG_MAX_ENTRIES, list->n);
    en->group = 1;
    en->n = list->n;
    en->weights = xcalloc(list->n ? list->n : 1, sizeof *en->weights);
    en->effects = xcalloc(list->n ? list->n : 1, sizeof *en->effects);
    for (size_t j = 0; rc == 0 && j < list->n; j++) {
        char *ip = xasprintf("%s[%zu]", lp, j);
        if (list->items[j]->kind == YN_SEQ && list->items[j]->n >= 2 && list->items[j]->items[1]->kind == YN_SEQ)
            rc = config_fail_node(err, list->items[j], ip, "groups do not nest (ESPnet allows one level)");
        else rc = config_aug_effect_parse(list->items[j], ip, &en->weights[j], &en->effects[j], err);
        free(ip);
    }
    free(lp);
    return rc;
}

int config_aug_effects_parse(const ynode *eff, aug_effects_cfg *out, esp_err *err)
{
    memset(out, 0, sizeof *out);
    if (!eff || yt_is_null(eff)) return 0;
    char *ep = xasprintf(PRE ".data_aug_effects");
    int rc = 0;
    if (eff->kind != YN_SEQ || eff->n == 0 || eff->n > AUG_MAX_ENTRIES)
        rc = config_fail_node(err, eff, ep, "expected a list of 1 to %d effects, got %s", AUG_MAX_ENTRIES,
                              yt_kind_name(eff));
    if (rc == 0) {
        out->n = eff->n;
        out->entries = xcalloc(eff->n, sizeof *out->entries);
    }
    for (size_t i = 0; rc == 0 && i < eff->n; i++) {
        const ynode *it = eff->items[i];
        aug_entry *en = &out->entries[i];
        char *ip = xasprintf("%s[%zu]", ep, i);
        if (it->kind == YN_SEQ && it->n == 2 && it->items[1]->kind == YN_SEQ) {
            char *wp = xasprintf("%s[0]", ip);
            rc = config_read_number(it->items[0], EFFECTS ".weight", wp, &en->weight, err);
            free(wp);
            if (rc == 0) rc = parse_group(it, ip, en, err);
        } else {
            en->n = 1;
            en->weights = xcalloc(1, sizeof *en->weights);
            en->effects = xcalloc(1, sizeof *en->effects);
            rc = config_aug_effect_parse(it, ip, &en->weight, &en->effects[0], err);
            en->weights[0] = en->weight;
        }
        free(ip);
    }
    free(ep);
    if (rc != 0) aug_entries_free(out->entries, out->n), memset(out, 0, sizeof *out);
    return rc;
}

int config_aug_read(const ynode *root, aug_effects_cfg **out, esp_err *err)
{
    *out = NULL;
    const ynode *eff = config_set_at(root, PRE ".data_aug_effects");
    if (!eff) return 0;
    aug_effects_cfg *c = xcalloc(1, sizeof *c);
    if (config_aug_effects_parse(eff, c, err) != 0) {
        free(c);
        return -1;
    }
    *out = c;
    return 0;
}

void aug_entries_free(aug_entry *entries, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(entries[i].weights);
        free(entries[i].effects);
    }
    free(entries);
}

void config_aug_effects_free(aug_effects_cfg *c)
{
    if (!c) return;
    aug_entries_free(c->entries, c->n);
    free(c);
}
