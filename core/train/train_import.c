/* fit.ckpt_path: the checkpoint a run starts from, as Lightning's trainer.fit(ckpt_path=...) that
 * ESPnet3's train stage calls with the training config's `fit:` block. Rank 0 calls resume_named in
 * place of resume (core/train/train_state.c); the path is:
 *
 *   - a checkpoint directory of ours (checkpoints/epoch=E-step=S of any exp_dir, or its `last`):
 *     the run goes on from it bit for bit, as from `last`;
 *   - a .ckpt we wrote under ESPnet3's names (last.ckpt, epoch<E>_step<S>_<monitor>.ckpt) while the
 *     checkpoint directory of that step is still beside it: that directory;
 *   - a Lightning .ckpt (what ESPnet3's ModelCheckpoint saves, its last.ckpt -> step<S>.ckpt): the
 *     weights, the optimizer's state (Adam's moments and step, SGD's momentum buffer, Adadelta's
 *     averages) by torch's names, the scheduler's step, and the epoch, step and batch counters
 *     of Lightning's loops, read with the strict pickle reader (nothing in the file runs). The
 *     optimizer and scheduler settings the file holds must be the config's: Lightning would go on
 *     with the file's, so a difference is an error, never a silent change. A weights-only .ckpt
 *     (ESPnet3's best-k files) cannot resume training, as in Lightning: init_param takes weights.
 *
 * Every checkpoint the run writes then records the named file's id (train.started_from), so a
 * rerun of the same command (a requeued SLURM job) goes on from `last` instead of going back to
 * the named checkpoint and losing what was trained since. */
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/base/hash.h"
#include "core/formats/torch_zip.h"
#include "core/nn/model_files.h"
#include "core/train/trainer_internal.h"

/* The named checkpoint's id: a hash of its canonical path (never 0, which means "none"). */
static int64_t fit_ckpt_id(const char *path)
{
    char *real = realpath(path, NULL);
    uint64_t h = fnv1a64_str(real ? real : path);
    free(real);
    return (int64_t)((h & (uint64_t)INT64_MAX) | 1);
}

/* ---- a Lightning checkpoint ------------------------------------------------------------------ */

static const pt_scalar *scalar(const pt_scalars *sc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const pt_scalar *scalar(const pt_scalars *sc, const char *fmt, ...)
{
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    return pt_scalar_get(sc, name);
}

/* The optimizer setting `key` of the file against the config's value (Lightning would train on with
 * the file's). */
static int same_setting(const char *path, const pt_scalars *sc, const char *key, double want, esp_err *err)
{
    const pt_scalar *s = pt_scalar_get(sc, key);
    if (!s) return 0; /* an older torch left it out */
    if (s->f == want) return 0;
    return esp_fail(err, "%s: the checkpoint's %s is %.9g, the config's %.9g (Lightning would go on with the "
                         "checkpoint's: set the config to match it)", path, key, s->f, want);
}

/* ReduceLROnPlateau's state beyond last_epoch, from torch's state_dict: the lr in force, the best
 * value and the two counts (scheduler_state names ours). */
static int take_plateau_state(trainer *t, const char *path, const pt_scalars *sc, esp_err *err)
{
    const char *names[SCHED_STATE_MAX];
    int64_t v[SCHED_STATE_MAX];
    size_t n = scheduler_state(&t->sched, names, v);
    static const struct {
        const char *ours, *torch;
        int is_double;
    } map[] = {{"scheduler.plateau.lr_bits", "_last_lr.0", 1},
               {"scheduler.plateau.best_bits", "best", 1},
               {"scheduler.plateau.num_bad_epochs", "num_bad_epochs", 0},
               {"scheduler.plateau.cooldown_counter", "cooldown_counter", 0}};
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < sizeof map / sizeof *map; j++) {
            if (strcmp(names[i], map[j].ours)) continue;
            const pt_scalar *x = scalar(sc, "lr_schedulers.0.%s", map[j].torch);
            if (!x) return esp_fail(err, "%s: lr_schedulers.0.%s: missing (not ReduceLROnPlateau's state)", path, map[j].torch);
            if (map[j].is_double) memcpy(&v[i], &x->f, sizeof v[i]);
            else v[i] = x->i;
        }
    if (n) scheduler_set_state(&t->sched, v);
    return 0;
}

static int check_optimizer(trainer *t, const char *path, const pt_scalars *sc, esp_err *err)
{
    const char *g = "optimizer_states.0.param_groups.0";
    if (scalar(sc, "optimizer_states.1.param_groups.0.params.0") || scalar(sc, "optimizer_states.0.param_groups.1.params.0"))
        return esp_fail(err, "%s: the checkpoint has more than one optimizer or parameter group (ESPnet3 trains "
                             "one optimizer over every parameter)", path);
    /* The class by the settings torch keeps in param_groups: betas (Adam, AdamW: decoupled_weight_decay
     * tells them apart), nesterov (SGD), rho (Adadelta). */
    const pt_scalar *decoupled = scalar(sc, "%s.decoupled_weight_decay", g);
    optim_kind theirs = scalar(sc, "%s.betas.0", g)   ? (decoupled && decoupled->i ? OPTIM_ADAMW : OPTIM_ADAM)
                        : scalar(sc, "%s.nesterov", g) ? OPTIM_SGD
                        : scalar(sc, "%s.rho", g)      ? OPTIM_ADADELTA
                                                       : (optim_kind)-1;
    if ((int)theirs < 0)
        return esp_fail(err, "%s: the checkpoint's optimizer is none of Adam, AdamW, SGD, Adadelta (its param_groups "
                             "have no betas, nesterov or rho)", path);
    /* an Adam of a torch before decoupled_weight_decay: the config's Adam or AdamW */
    if (!decoupled && (theirs == OPTIM_ADAM) && t->oo.kind == OPTIM_ADAMW) theirs = OPTIM_ADAMW;
    if (theirs != t->oo.kind)
        return esp_fail(err, "%s: the checkpoint's optimizer is torch.optim.%s, the config's torch.optim.%s", path,
                        optim_kind_name(theirs), optim_kind_name(t->oo.kind));
    static const struct {
        const char *key;
        size_t at; /* offsetof the double (or int, is_int) in optim_opts */
        int is_int, kinds; /* a bit per optim_kind */
    } settings[] = {
        {"betas.0", offsetof(optim_opts, beta1), 0, 1 << OPTIM_ADAM | 1 << OPTIM_ADAMW},
        {"betas.1", offsetof(optim_opts, beta2), 0, 1 << OPTIM_ADAM | 1 << OPTIM_ADAMW},
        {"eps", offsetof(optim_opts, eps), 0, 1 << OPTIM_ADAM | 1 << OPTIM_ADAMW | 1 << OPTIM_ADADELTA},
        {"weight_decay", offsetof(optim_opts, weight_decay), 0, 15},
        {"amsgrad", offsetof(optim_opts, amsgrad), 1, 1 << OPTIM_ADAM | 1 << OPTIM_ADAMW},
        {"maximize", offsetof(optim_opts, maximize), 1, 15},
        {"momentum", offsetof(optim_opts, momentum), 0, 1 << OPTIM_SGD},
        {"dampening", offsetof(optim_opts, dampening), 0, 1 << OPTIM_SGD},
        {"nesterov", offsetof(optim_opts, nesterov), 1, 1 << OPTIM_SGD},
        {"rho", offsetof(optim_opts, rho), 0, 1 << OPTIM_ADADELTA},
    };
    for (size_t i = 0; i < sizeof settings / sizeof *settings; i++) {
        if (!(settings[i].kinds & 1 << t->oo.kind)) continue;
        const char *base = (const char *)&t->oo + settings[i].at;
        double want = settings[i].is_int ? (double)*(const int *)base : *(const double *)base;
        char key[96];
        snprintf(key, sizeof key, "%s.%s", g, settings[i].key);
        if (same_setting(path, sc, key, want, err) != 0) return -1;
    }
    char lr[96];
    snprintf(lr, sizeof lr, "%s.initial_lr", g); /* the lr the scheduler started from: optimizer.lr */
    if (same_setting(path, sc, lr, t->oo.lr, err) != 0) return -1;
    const pt_scalar *last = scalar(sc, "lr_schedulers.0.last_epoch");
    int ours = t->sched.kind != SCHED_CONSTANT;
    if (!last != !ours)
        return esp_fail(err, "%s: the checkpoint %s a learning-rate scheduler, the config %s", path,
                        last ? "has" : "has no", ours ? "has one" : "has none");
    if (last) {
        if (last->i < 0) return esp_fail(err, "%s: lr_schedulers.0.last_epoch is negative", path);
        if (same_setting(path, sc, "lr_schedulers.0.base_lrs.0", t->oo.lr, err) != 0) return -1;
        if (t->sched.kind == SCHED_WARMUP_LR &&
            same_setting(path, sc, "lr_schedulers.0.warmup_steps", (double)t->sched.warmup_steps, err) != 0)
            return -1;
        t->sched.last_epoch = last->i;
        if (take_plateau_state(t, path, sc, err) != 0) return -1;
    }
    return 0;
}

/* The optimizer's state of parameter p (optimizer index k) by torch's names (exp_avg, exp_avg_sq,
 * max_exp_avg_sq; momentum_buffer; square_avg, acc_delta) into host[b] + p->offset, and its step
 * into *step (SGD keeps none: -1 stays). A parameter torch made no state for yet (no gradient so
 * far) keeps zeros, as torch starts them. */
static int take_state(const char *path, const st_file *f, const pt_scalars *sc, const optim_state *os,
                      const param_info *p, size_t k, float **host, int64_t *step, esp_err *err)
{
    const pt_scalar *id = scalar(sc, "optimizer_states.0.param_groups.0.params.%zu", k);
    if (!id || !id->is_int) return esp_fail(err, "%s: optimizer_states.0.param_groups.0.params.%zu: missing", path, k);
    for (size_t b = 0; b < os->n_buffers; b++) {
        char name[160];
        snprintf(name, sizeof name, "optimizer_states.0.state.%" PRId64 ".%s", id->i, os->buffer_names[b]);
        if (!st_get(f, name)) {
            if (b == 0) return 0; /* no state for this parameter */
            return esp_fail(err, "%s: %s: missing (the optimizer's other state of parameter %zu, %s, is there)", path,
                            name, k, p->name);
        }
        const float *v;
        if (st_get_f32(f, name, p->ndim, p->shape, &v, err) != 0) {
            char detail[sizeof err->msg];
            snprintf(detail, sizeof detail, "%s", err->msg);
            return esp_fail(err, "%s (the optimizer's parameter %zu is %s here)", detail, k, p->name);
        }
        memcpy(host[b] + p->offset, v, p->count * sizeof *v);
    }
    char sname[128];
    snprintf(sname, sizeof sname, "optimizer_states.0.state.%" PRId64 ".step", id->i);
    const st_tensor *s = st_get(f, sname);
    if (!s) return 0;
    int64_t v = -1;
    if (s->ndim == 0 && s->dtype == ST_F32) v = (int64_t)*(const float *)s->data;
    else if (s->ndim == 0 && s->dtype == ST_I64) v = *(const int64_t *)s->data;
    if (v < 0) return esp_fail(err, "%s: %s: not a scalar step", path, sname);
    if (*step >= 0 && *step != v)
        return esp_fail(err, "%s: the optimizer's step differs between parameters (%" PRId64 " and %" PRId64 ")", path,
                        *step, v);
    *step = v;
    return 0;
}

static int import_lightning(trainer *t, const char *path, st_file *f, const pt_scalars *sc, esp_err *err)
{
    const param_table *pt = &t->model.table;
    if (!scalar(sc, "optimizer_states.0.param_groups.0.params.0"))
        return esp_fail(err, "%s: holds only the model (a weights-only checkpoint, e.g. ESPnet3's best-k "
                             "epoch..._<monitor>.ckpt): training cannot resume from it, as in Lightning (use its "
                             "last.ckpt, or init_param to start from these weights)", path);
    const pt_scalar *epoch = pt_scalar_get(sc, "epoch"), *global_step = pt_scalar_get(sc, "global_step");
    if (!epoch || !global_step || epoch->i < 0 || global_step->i < 0)
        return esp_fail(err, "%s: no epoch and global_step (not a Lightning checkpoint)", path);
    if (check_optimizer(t, path, sc, err) != 0) return -1;
    /* The model's tensors under their ESPnet2 names ("state_dict.model.encoder..." -> "encoder..."),
     * in the file's order: torch numbers the optimizer's parameters in that order. */
    size_t *order = xcalloc(f->n + 1, sizeof *order), n_order = 0;
    for (size_t i = 0; i < f->n; i++) {
        const char *nm = f->tensors[i].name, *pre = "state_dict.model.";
        if (strncmp(nm, pre, strlen(pre)) != 0) continue;
        char *bare = xstrdup(nm + strlen(pre));
        free((void *)f->tensors[i].name); /* the file's own copy (st_close frees names) */
        f->tensors[i].name = bare;
        order[n_order++] = i;
    }
    float *state = xcalloc(pt->state_total + 1, sizeof *state);
    float *host[OPTIM_MAX_BUFFERS];
    for (size_t b = 0; b < t->opt.n_buffers; b++) host[b] = xcalloc(pt->total + 1, sizeof(float));
    int rc = 0;
    for (size_t i = 0; i < pt->n && rc == 0; i++)
        rc = model_tensor_get(f, pt->items[i].name, &pt->items[i], state + pt->items[i].offset, err);
    /* The file's trained parameters are ours plus its buffers (the mel matrix, normalize's
     * statistics); a parameter of a part our model lacks would shift the numbering: counted. */
    size_t n_trained = 0, n_opt = 0, k = 0;
    for (size_t i = 0; i < pt->n; i++) n_trained += pt->items[i].kind == PARAM_TRAINED;
    while (scalar(sc, "optimizer_states.0.param_groups.0.params.%zu", n_opt)) n_opt++;
    if (rc == 0 && n_opt != n_trained)
        rc = esp_fail(err, "%s: the checkpoint's optimizer holds %zu parameters, the model the config describes %zu "
                           "(a different model: compare model: with the run that wrote it)", path, n_opt, n_trained);
    int64_t step = -1;
    for (size_t j = 0; j < n_order && rc == 0; j++) {
        const param_info *p = param_find(pt, f->tensors[order[j]].name);
        if (!p || p->kind != PARAM_TRAINED) continue;
        rc = take_state(path, f, sc, &t->opt, p, k++, host, &step, err);
    }
    if (rc == 0) {
        const pt_scalar *done = pt_scalar_get(sc, "loops.fit_loop.epoch_progress.current.processed");
        const pt_scalar *batch = pt_scalar_get(sc, "loops.fit_loop.epoch_loop.batch_progress.current.completed");
        /* Saved at an epoch's end (its training loop processed): the next epoch starts; else the
         * epoch goes on after the batches it completed. */
        int64_t epochs_done = done ? done->i : epoch->i + 1;
        t->epoch = epochs_done > epoch->i ? epochs_done : epoch->i;
        t->resume_batch = epochs_done > epoch->i || !batch ? 0 : batch->i;
        t->step = global_step->i;
        /* SGD keeps no step: its updates are Lightning's optimizer steps */
        t->opt.step = step >= 0 ? step : global_step->i;
        asr_model_state_from_host(&t->model, state);
        for (size_t b = 0; b < t->opt.n_buffers; b++)
            t->be->copy(t->be, t->opt.buffers[b], host[b], pt->total * sizeof(float), BACKEND_HOST_TO_DEVICE);
        log_info("train: starting from %s (Lightning checkpoint: epoch %" PRId64 ", step %" PRId64
                 "; %" PRId64 " epochs done)", path, epoch->i, global_step->i, t->epoch);
    }
    free(order), free(state);
    for (size_t b = 0; b < t->opt.n_buffers; b++) free(host[b]);
    return rc;
}

/* ---- the named path ---------------------------------------------------------------------------- */

/* A .ckpt of ours names the step of a checkpoint directory beside it (in its exp_dir/checkpoints). */
static char *our_directory_of(const char *path, const pt_scalars *sc)
{
    const pt_scalar *step = pt_scalar_get(sc, "global_step");
    if (!step || scalar(sc, "optimizer_states.0.param_groups.0.params.0")) return NULL;
    char *copy = xstrdup(path), *slash = strrchr(copy, '/');
    const char *exp = slash ? (*slash = 0, copy) : ".";
    char *ckdir = path_join(exp, "checkpoints"), *found = NULL;
    const pt_scalar *epoch = pt_scalar_get(sc, "epoch");
    /* Lightning's epoch counts from 0; our directory names count the epochs done. */
    for (int64_t e = epoch ? epoch->i : 0; e <= (epoch ? epoch->i + 1 : 0) && !found; e++) {
        char name[96];
        snprintf(name, sizeof name, "epoch=%" PRId64 "-step=%" PRId64, e, step->i);
        char *dir = path_join(ckdir, name);
        if (is_dir(dir)) found = dir;
        else free(dir);
    }
    free(ckdir), free(copy);
    return found;
}

static int resume_dir(trainer *t, const char *dir, esp_err *err)
{
    ckpt_loaded c;
    int rc = ckpt_load_dir(dir, &c, err);
    if (rc == 0) rc = resume_loaded(t, &c, err);
    ckpt_loaded_free(&c);
    return rc;
}

int resume_named(trainer *t, const char *path, esp_err *err)
{
    int64_t id = fit_ckpt_id(path);
    ckpt_loaded c;
    int rc = ckpt_load_last(&t->ckpt, &c, err);
    if (rc < 0) return -1;
    if (rc == 0 && ckpt_counter_get(&c, "train.started_from", 0) == id) {
        log_info("train: fit.ckpt_path %s: this run started from it; going on from its newest checkpoint", path);
        rc = resume_loaded(t, &c, err);
        ckpt_loaded_free(&c);
        return rc;
    }
    if (rc == 0) ckpt_loaded_free(&c);
    if (!path_exists(path))
        return esp_fail(err, "fit.ckpt_path: %s does not exist (a checkpoint directory, or a .ckpt)", path);
    if (is_dir(path)) {
        if (resume_dir(t, path, err) != 0) return -1;
        t->started_from = id;
        return 0;
    }
    st_file f;
    pt_scalars sc;
    if (pt_read_tree(path, &f, &sc, err) != 0) return -1;
    char *ours = our_directory_of(path, &sc);
    if (ours) {
        log_info("train: fit.ckpt_path %s is checkpoint %s of its run", path, ours);
        rc = resume_dir(t, ours, err);
        free(ours);
    } else {
        rc = import_lightning(t, path, &f, &sc, err);
        t->imported = rc == 0;
    }
    if (rc == 0) t->started_from = id;
    st_close(&f);
    pt_scalars_free(&sc);
    return rc;
}
