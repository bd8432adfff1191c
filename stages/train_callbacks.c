/* Lightning's callbacks and max_time for stage 5; see train_callbacks.h. Each class's arguments
 * are checked on the tree (its keys keep their lines); the values come from the typed config. */
#include "stages/train_callbacks.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config/config_schema.h"

/* The classes espnet3 carries out, by the last part of _target_, and the keys each takes. */
static const struct {
    const char *cls;
    const char *keys;    /* space-separated, besides _target_ */
} classes[] = {
    {"ModelCheckpoint", "every_n_train_steps train_time_interval save_last verbose"},
    {"EarlyStopping", "monitor mode patience min_delta strict check_finite stopping_threshold divergence_threshold "
                      "verbose"},
    {"EMAWeightAveraging", "decay update_every_n_steps update_starting_at_step update_starting_at_epoch use_buffers "
                           "device"},
    {"LearningRateMonitor", "logging_interval"},
    {"TQDMProgressBar", "refresh_rate"},
};

static int takes(const char *keys, const char *key)
{
    size_t n = strlen(key);
    for (const char *p = keys; (p = strstr(p, key)) != NULL; p += n)
        if ((p == keys || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return 1;
    return 0;
}

/* Seconds of a timedelta; -1 with err at its line when a part is negative or the whole is 0. */
static double timedelta_seconds(const timedelta_cfg *td, const ynode *n, const char *path, esp_err *err)
{
    double s = td->days * 86400 + td->hours * 3600 + td->minutes * 60 + td->seconds;
    if (td->days < 0 || td->hours < 0 || td->minutes < 0 || td->seconds < 0 || !(s > 0))
        return config_fail_node(err, n, path, "a positive interval (days, hours, minutes, seconds >= 0, not all 0)");
    return s;
}

/* Lightning's max_time string: "DD:HH:MM:SS", whole numbers, read as days, hours, minutes, seconds
 * from the left (as Lightning's Timer zips them; "00:12:00:00" is twelve hours). */
static int max_time_seconds(const char *s, double *out)
{
    static const double unit[4] = {86400, 3600, 60, 1};
    double total = 0;
    int parts = 0;
    for (const char *p = s; parts < 4; parts++) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0) return -1;
        total += (double)v * unit[parts];
        if (*end == '\0') {
            *out = total;
            return total > 0 ? 0 : -1;
        }
        if (*end != ':') return -1;
        p = end + 1;
    }
    return -1;
}

/* EarlyStopping's arguments (Lightning's defaults for the left-out ones are declared:
 * core/config/config_values.c's callback_defaults). */
static int early_stopping_opts(const callback_cfg *c, const ynode *n, const char *path, trainer_opts *o, esp_err *err)
{
    char p[160];
    if (o->early_stop.monitor)
        return config_fail_node(err, n, path, "one EarlyStopping per run here (this is the second)");
    if (!c->monitor) return config_fail_node(err, n, path, "EarlyStopping needs monitor (e.g. valid/loss)");
    if (c->mode && strcmp(c->mode, "min") != 0 && strcmp(c->mode, "max") != 0) {
        snprintf(p, sizeof p, "%s.mode", path);
        return config_fail_node(err, yt_map_get(n, "mode"), p, "min or max (Lightning's modes)");
    }
    if (c->patience < 0) { /* the default is 3: a negative one was written */
        snprintf(p, sizeof p, "%s.patience", path);
        return config_fail_node(err, yt_map_get(n, "patience"), p,
                                ">= 0 (validations without improvement before the run stops)");
    }
    early_stopping_init(&o->early_stop, c->monitor, c->mode && !strcmp(c->mode, "max"), c->min_delta, c->patience,
                        c->check_finite, yt_map_get(n, "stopping_threshold") ? &c->stopping_threshold : NULL,
                        yt_map_get(n, "divergence_threshold") ? &c->divergence_threshold : NULL);
    o->early_stop_strict = c->strict;
    return 0;
}

/* EMAWeightAveraging's arguments (Lightning's defaults decay 0.999, update_every_n_steps 1 and
 * use_buffers true are declared: core/config/config_values.c's callback_defaults; the starting step
 * and epoch default to None, no start, read from the key's absence). Its other keyword arguments go
 * to AveragedModel, where avg_fn is the callback's own and multi_avg_fn with it raises. */
static int ema_opts_from(const callback_cfg *c, const ynode *n, const char *path, int warn, trainer_opts *o,
                         esp_err *err)
{
    char p[160];
    if (o->ema.on) return config_fail_node(err, n, path, "one EMAWeightAveraging per run here (this is the second)");
    const ynode *ss = yt_map_get(n, "update_starting_at_step"), *se = yt_map_get(n, "update_starting_at_epoch");
    if (!(c->decay >= 0 && c->decay <= 1)) { /* the default 0.999 is: this one was written */
        snprintf(p, sizeof p, "%s.decay", path);
        return config_fail_node(err, yt_map_get(n, "decay"), p, "in [0, 1] (torch's get_ema_avg_fn raises otherwise)");
    }
    /* A negative start is met by every index, as it is in Python: the step's is then no start at
     * all (-1), the epoch's one from epoch 0. */
    o->ema = (ema_opts){.on = 1, .decay = c->decay, .every_n_steps = c->update_every_n_steps,
                        .start_step = ss && c->update_starting_at_step > 0 ? c->update_starting_at_step : -1,
                        .start_epoch = !se ? -1 : c->update_starting_at_epoch > 0 ? c->update_starting_at_epoch : 0,
                        .use_buffers = c->use_buffers};
    if (warn && o->ema.every_n_steps <= 0 && o->ema.start_epoch < 0)
        log_warn("%s.update_every_n_steps: %" PRId64 " and no update_starting_at_epoch: the average is never updated "
                 "(Lightning's should_update; validation and last.ckpt keep the first weights)", path,
                 o->ema.every_n_steps);
    if (warn && c->device)
        log_warn("%s.device: '%s': where torch would keep the average; espnet3 keeps it in the backend's memory beside "
                 "the model (the same bits either way): ignored", path, c->device);
    return 0;
}

static int check_callback(const callback_cfg *c, const ynode *n, const char *path, int warn, trainer_opts *o,
                          esp_err *err)
{
    const char *dot = c->target ? strrchr(c->target, '.') : NULL, *cls = dot ? dot + 1 : c->target;
    size_t k = 0;
    while (k < sizeof classes / sizeof *classes && (!cls || strcmp(cls, classes[k].cls) != 0)) k++;
    if (k == sizeof classes / sizeof *classes) /* the schema's target check names the supported ones */
        return config_fail_node(err, n, path, "_target_: missing or not a callback espnet3 carries out");
    for (size_t i = 0; n->kind == YN_MAP && i < n->n; i++) {
        if (!strcmp(n->keys[i], "_target_") || takes(classes[k].keys, n->keys[i])) continue;
        char p[160];
        snprintf(p, sizeof p, "%s.%s", path, n->keys[i]);
        return config_fail_node(err, n->items[i], p, "not an argument of %s here (it takes %s)", classes[k].cls,
                                classes[k].keys);
    }
    if (!strcmp(classes[k].cls, "EarlyStopping")) return early_stopping_opts(c, n, path, o, err);
    if (!strcmp(classes[k].cls, "EMAWeightAveraging")) return ema_opts_from(c, n, path, warn, o, err);
    if (strcmp(classes[k].cls, "ModelCheckpoint") != 0) return 0;
    char p[160];
    if (c->every_n_train_steps < 0) {
        snprintf(p, sizeof p, "%s.every_n_train_steps", path);
        return config_fail_node(err, yt_map_get(n, "every_n_train_steps"), p, ">= 1 (0 or left out: none)");
    }
    if (c->every_n_train_steps > 0 && c->train_time_interval) /* Lightning raises the same */
        return config_fail_node(err, n, path, "every_n_train_steps and train_time_interval: one of them per "
                                "ModelCheckpoint (Lightning's rule; give two callbacks for both)");
    if (c->save_last && strcmp(c->save_last, "true") != 0 && strcmp(c->save_last, "link") != 0) {
        snprintf(p, sizeof p, "%s.save_last", path);
        return config_fail_node(err, yt_map_get(n, "save_last"), p, "true or link: espnet3 always keeps `last`, the "
                                "checkpoint a rerun resumes from");
    }
    if (c->every_n_train_steps > 0 && (!o->ckpt_every_steps || c->every_n_train_steps < o->ckpt_every_steps))
        o->ckpt_every_steps = c->every_n_train_steps;
    if (c->train_time_interval) {
        snprintf(p, sizeof p, "%s.train_time_interval", path);
        double s = timedelta_seconds(c->train_time_interval, yt_map_get(n, "train_time_interval"), p, err);
        if (s < 0) return -1;
        if (!o->ckpt_every_s || s < o->ckpt_every_s) o->ckpt_every_s = s;
    }
    return 0;
}

int train_callbacks_to_opts(const trainer_cfg *tc, const ynode *tree, int warn, trainer_opts *o, esp_err *err)
{
    o->ckpt_every_steps = 0, o->ckpt_every_s = 0, o->max_time_s = 0;
    o->early_stop = (early_stopping){0}, o->early_stop_strict = 0;
    o->ema = (ema_opts){0};
    if (!tc) return 0;
    const ynode *seq = yt_get_path(tree, "trainer.callbacks");
    for (unsigned i = 0; i < tc->n_callbacks; i++) {
        char path[64];
        snprintf(path, sizeof path, "trainer.callbacks[%u]", i);
        const ynode *n = seq && seq->kind == YN_SEQ && i < seq->n ? seq->items[i] : NULL;
        ESP_CHECK(n != NULL); /* the typed list was loaded from this tree */
        if (check_callback(&tc->callbacks[i], n, path, warn, o, err) != 0) return -1;
    }
    if (tc->max_time && max_time_seconds(tc->max_time, &o->max_time_s) != 0)
        return config_fail_node(err, yt_get_path(tree, "trainer.max_time"), "trainer.max_time",
                                "'%s' is not a duration \"DD:HH:MM:SS\" of whole numbers (e.g. 00:12:00:00 for twelve "
                                "hours)", tc->max_time);
    return 0;
}
