/* The augmentation keys of core/data/augment_conf.h from the typed view: data_aug_effects as the
 * config load parsed it (core/config/config_aug.c), data_aug_num and data_aug_prob; and what
 * depends on the sample rate. */
#include "core/data/augment_conf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config/config_schema.h"

void augment_conf_read(const esp_config *training, augment_conf *out)
{
    memset(out, 0, sizeof *out);
    const training_cfg *t = training->typed;
    const preprocessor_cfg *pc = t->dataset ? t->dataset->preprocessor : NULL;
    const aug_effects_cfg *eff = pc ? pc->data_aug_effects : NULL;
    if (!eff || !eff->n) return;
    /* Parsed when the config loaded; each reader holds its own copy (workers copy it again). */
    augment_conf_copy(out, &(augment_conf){.n = eff->n, .entries = eff->entries});
    /* Declared defaults, ranged and checked against the entries when the config loaded. */
    ESP_CHECK(pc->n_data_aug_num == 2);
    out->num[0] = (int)pc->data_aug_num[0], out->num[1] = (int)pc->data_aug_num[1];
    out->prob = pc->data_aug_prob;
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
