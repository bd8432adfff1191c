/* Reading the augmentation keys of core/data/augment_conf.h: data_aug_effects from the config tree
 * (its shape, the effects' names and arguments and the rules between them), data_aug_num and
 * data_aug_prob from the typed view; numbers, their ranges and the defaults are
 * core/config/config_values.c's. */
#include "core/data/augment_conf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config/config_schema.h"
#include "core/config/config_values.h"

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

int augment_effect_parse(const ynode *item, const char *path, double *weight, aug_effect *e, esp_err *err)
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
        else rc = augment_effect_parse(list->items[j], ip, &en->weights[j], &en->effects[j], err);
        free(ip);
    }
    free(lp);
    return rc;
}

int augment_effects_parse(const ynode *eff, augment_conf *out, esp_err *err)
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
            rc = augment_effect_parse(it, ip, &en->weight, &en->effects[0], err);
            en->weights[0] = en->weight;
        }
        free(ip);
    }
    free(ep);
    if (rc != 0) augment_conf_free(out);
    return rc;
}

int augment_conf_read(const esp_config *training, augment_conf *out, esp_err *err)
{
    const training_cfg *t = training->typed;
    const preprocessor_cfg *pc = t->dataset ? t->dataset->preprocessor : NULL;
    if (augment_effects_parse(pc ? yt_get_path(training->tree, PRE ".data_aug_effects") : NULL, out, err) != 0)
        return -1;
    if (!out->n) return 0;
    /* Declared defaults, ranged and checked against the entries when the config loaded. */
    ESP_CHECK(pc->n_data_aug_num == 2);
    out->num[0] = (int)pc->data_aug_num[0], out->num[1] = (int)pc->data_aug_num[1];
    out->prob = pc->data_aug_prob;
    return 0;
}

int augment_conf_check_fs(const augment_conf *c, int fs, const char *fs_key, esp_err *err)
{
    char where[512];
    for (size_t i = 0; i < c->n; i++) {
        for (size_t j = 0; j < c->entries[i].n; j++) {
            const aug_effect *e = &c->entries[i].effects[j];
            int is_filter = e->kind <= AUG_EQUALIZATION;
            if (is_filter && e->freq >= fs / 2.0)
                return esp_fail(err, "%s: %s: frequency %g Hz is not below the Nyquist frequency %g Hz of %s %d "
                                     "(lower it)", ymark_str(e->mark, where, sizeof where), aug_kind_name(e->kind), e->freq,
                                fs / 2.0, fs_key, fs);
            if (e->kind == AUG_SPEED_PERTURB && aug_speed_rates(e->factor, fs, NULL, NULL) != 0)
                return esp_fail(err, "%s: speed_perturb: factor %g gives no sample rate at %s %d",
                                ymark_str(e->mark, where, sizeof where), e->factor, fs_key, fs);
            if (e->kind >= AUG_TIME_STRETCH) {
                int n_fft = (int)(fs * e->n_fft_s), hop = e->hop_s > 0 ? (int)(fs * e->hop_s) : n_fft / 4;
                int win = e->win_samples > 0 ? (int)e->win_samples : n_fft;
                if (n_fft < 2 || hop < 1 || win < 1 || win > n_fft || hop > win)
                    return esp_fail(err, "%s: %s: at %s %d the STFT has n_fft %d, win_length %d, hop_length %d "
                                         "samples (make them at least 2, 1, 1 with hop_length <= win_length <= n_fft)",
                                    ymark_str(e->mark, where, sizeof where), aug_kind_name(e->kind), fs_key, fs, n_fft,
                                    win, hop);
            }
        }
    }
    return 0;
}
