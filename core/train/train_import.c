/* fit.ckpt_path: the checkpoint a run starts from, as Lightning's trainer.fit(ckpt_path=...) that
 * ESPnet3's train stage calls with the training config's `fit:` block. Rank 0 calls resume_named in
 * place of resume (core/train/train_state.c); the path is:
 *
 *   - a checkpoint directory of ours (checkpoints/epoch=E-step=S of any exp_dir, or its `last`):
 *     the run goes on from it bit for bit, as from `last`;
 *   - a .ckpt we wrote under ESPnet3's names (last.ckpt, epoch<E>_step<S>_<monitor>.ckpt) while the
 *     checkpoint directory of that step is still beside it: that directory;
 *   - a Lightning .ckpt (what ESPnet3's ModelCheckpoint saves, its last.ckpt -> step<S>.ckpt): the
 *     weights, Adam's moments and step, the scheduler's step, and the epoch, step and batch counters
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
    if (t->oo.kind != OPTIM_ADAM && t->oo.kind != OPTIM_ADAMW)
        return esp_fail(err, "%s: taking a Lightning checkpoint's optimizer state is built for Adam and AdamW, the "
                             "config's optimizer is torch.optim.%s (go on from a checkpoint of ours, or start from "
                             "the file's weights with init_param)", path, optim_kind_name(t->oo.kind));
    if (scalar(sc, "optimizer_states.1.param_groups.0.params.0") || scalar(sc, "optimizer_states.0.param_groups.1.params.0"))
        return esp_fail(err, "%s: the checkpoint has more than one optimizer or parameter group (ESPnet3 trains "
                             "one Adam over every parameter)", path);
    if (!scalar(sc, "%s.betas.0", g))
        return esp_fail(err, "%s: the checkpoint's optimizer is not Adam or AdamW (no betas in its param_groups)",
                        path);
    const pt_scalar *decoupled = scalar(sc, "%s.decoupled_weight_decay", g);
    int adamw = t->oo.kind == OPTIM_ADAMW;
    if (decoupled && (decoupled->i != 0) != adamw)
        return esp_fail(err, "%s: the checkpoint's optimizer is torch.optim.%s, the config's %s", path,
                        decoupled->i ? "AdamW" : "Adam", adamw ? "torch.optim.AdamW" : "torch.optim.Adam");
    char k[6][96];
    const double want[6] = {t->oo.beta1, t->oo.beta2, t->oo.eps, t->oo.weight_decay, t->oo.amsgrad, t->oo.maximize};
    const char *const keys[6] = {"betas.0", "betas.1", "eps", "weight_decay", "amsgrad", "maximize"};
    for (int i = 0; i < 6; i++) {
        snprintf(k[i], sizeof k[i], "%s.%s", g, keys[i]);
        if (same_setting(path, sc, k[i], want[i], err) != 0) return -1;
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

/* Adam's moments of parameter p (optimizer index k) into m1/m2; its step into *step. A parameter
 * that never had a gradient has no state: zero moments, as torch starts them. */
static int take_moments(const char *path, const st_file *f, const pt_scalars *sc, const param_info *p, size_t k,
                        float *m1, float *m2, int64_t *step, esp_err *err)
{
    const pt_scalar *id = scalar(sc, "optimizer_states.0.param_groups.0.params.%zu", k);
    if (!id || !id->is_int) return esp_fail(err, "%s: optimizer_states.0.param_groups.0.params.%zu: missing", path, k);
    char name[2][128];
    snprintf(name[0], sizeof name[0], "optimizer_states.0.state.%" PRId64 ".exp_avg", id->i);
    snprintf(name[1], sizeof name[1], "optimizer_states.0.state.%" PRId64 ".exp_avg_sq", id->i);
    if (!st_get(f, name[0])) return 0;
    const float *a, *b;
    if (st_get_f32(f, name[0], p->ndim, p->shape, &a, err) != 0 ||
        st_get_f32(f, name[1], p->ndim, p->shape, &b, err) != 0) {
        char detail[sizeof err->msg];
        snprintf(detail, sizeof detail, "%s", err->msg);
        return esp_fail(err, "%s (the optimizer's parameter %zu is %s here)", detail, k, p->name);
    }
    memcpy(m1, a, p->count * sizeof *m1);
    memcpy(m2, b, p->count * sizeof *m2);
    char sname[128];
    snprintf(sname, sizeof sname, "optimizer_states.0.state.%" PRId64 ".step", id->i);
    const st_tensor *s = st_get(f, sname);
    int64_t v = -1;
    if (s && s->ndim == 0 && s->dtype == ST_F32) v = (int64_t)*(const float *)s->data;
    else if (s && s->ndim == 0 && s->dtype == ST_I64) v = *(const int64_t *)s->data;
    if (v < 0) return esp_fail(err, "%s: %s: missing or not a scalar", path, sname);
    if (*step >= 0 && *step != v)
        return esp_fail(err, "%s: Adam's step differs between parameters (%" PRId64 " and %" PRId64 ")", path, *step, v);
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
    float *m1 = xcalloc(pt->total + 1, sizeof *m1), *m2 = xcalloc(pt->total + 1, sizeof *m2);
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
        rc = take_moments(path, f, sc, p, k++, m1 + p->offset, m2 + p->offset, &step, err);
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
        t->opt.step = step < 0 ? 0 : step;
        asr_model_state_from_host(&t->model, state);
        t->be->copy(t->be, optim_state_buffer(&t->opt, "exp_avg"), m1, pt->total * sizeof(float),
                    BACKEND_HOST_TO_DEVICE);
        t->be->copy(t->be, optim_state_buffer(&t->opt, "exp_avg_sq"), m2, pt->total * sizeof(float),
                    BACKEND_HOST_TO_DEVICE);
        log_info("train: starting from %s (Lightning checkpoint: epoch %" PRId64 ", step %" PRId64
                 "; %" PRId64 " epochs done)", path, epoch->i, global_step->i, t->epoch);
    }
    free(order), free(state), free(m1), free(m2);
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
