/* ESPnet3's checkpoint names beside ours in ${exp_dir}, so that inference configs and init_param
 * written for ESPnet3 find them and PyTorch loads them (torch.load, Lightning's layout):
 *
 *   last.ckpt                          the newest model: {"epoch", "global_step", "state_dict"},
 *                                      names prefixed "model." as ESPnet3's LightningModule holds them;
 *                                      with EMAWeightAveraging the average, as Lightning's full
 *                                      checkpoint's state_dict (its current_model_state is not written)
 *   epoch<E>_step<S>_<monitor>.ckpt    each checkpoint of a best-k table (ESPnet3's ModelCheckpoint
 *                                      filename "epoch{epoch}_step{step}_" + monitor; E counts from 0
 *                                      as Lightning's current_epoch, S is the global step): the model,
 *                                      also with EMAWeightAveraging (ESPnet3 saves these weights-only,
 *                                      and Lightning calls no callback's on_save_checkpoint then)
 *   <monitor>.ave_<n>best.pth          the average of a table, a plain state dict
 *
 * Each is written atomically from our safetensors files; a best-k .ckpt whose checkpoint left its
 * table is removed. The checkpoint manager's files (core/train/checkpoint.h) stay the source. */
#include "core/train/checkpoint.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/fsio.h"
#include "core/formats/torch_zip.h"

/* Our model file as a Lightning .ckpt (lightning) or a plain .pth state dict. */
static int convert(const char *from, const char *to, int lightning, int64_t epoch, int64_t step, esp_err *err)
{
    st_file f;
    if (st_read(from, &f, err) != 0) return -1;
    int rc = lightning ? pt_write_lightning(to, f.tensors, f.n, epoch, step, err) : pt_write(to, f.tensors, f.n, err);
    st_close(&f);
    return rc;
}

/* Lightning's current_epoch of a checkpoint: the epoch it was saved in (an epoch's end counts the
 * epoch it ends, one less than the epochs completed). */
static int64_t lightning_epoch(const ckpt_entry *e)
{
    return e->in_epoch ? e->epoch : e->epoch > 0 ? e->epoch - 1 : 0;
}

static char *entry_ckpt_name(const ckpt_entry *e, const char *monitor_file)
{
    return xasprintf("epoch%" PRId64 "_step%" PRId64 "_%s.ckpt", lightning_epoch(e), e->step, monitor_file);
}

/* Removes epoch*_step*_<monitor>.ckpt files of exp_dir that no entry of t names. */
static void prune(const ckpt_manager *m, const ckpt_table *t, const char *monitor_file)
{
    DIR *d = opendir(m->exp_dir);
    if (!d) return;
    char *suffix = xasprintf("_%s.ckpt", monitor_file);
    size_t sl = strlen(suffix);
    for (struct dirent *de; (de = readdir(d));) {
        size_t l = strlen(de->d_name);
        long long e, s;
        int used = 0;
        if (l <= sl || strcmp(de->d_name + l - sl, suffix) || sscanf(de->d_name, "epoch%lld_step%lld_%n", &e, &s, &used) != 2 ||
            (size_t)used != l - sl + 1)
            continue;
        int kept = 0;
        for (size_t i = 0; i < t->n && !kept; i++) {
            char *name = entry_ckpt_name(&t->entries[i], monitor_file);
            kept = !strcmp(name, de->d_name);
            free(name);
        }
        if (!kept) {
            char *p = path_join(m->exp_dir, de->d_name);
            unlink(p);
            free(p);
        }
    }
    closedir(d);
    free(suffix);
}

/* last.ckpt: the model, or with Lightning's EMAWeightAveraging its average (the trainer's "ema.*"
 * state tensors), which Lightning's full checkpoint (ESPnet3's last) holds as its state_dict. */
static int write_last(const ckpt_manager *m, esp_err *err)
{
    long long e = 0, s = 0;
    sscanf(m->last, "epoch=%lld-step=%lld", &e, &s);
    int64_t epoch = e > 0 ? e - 1 : 0;
    char *dir = path_join(m->ckpt_dir, m->last), *to = path_join(m->exp_dir, "last.ckpt");
    char *state = path_join(dir, "trainer_state.safetensors"), *from = path_join(dir, "model.safetensors");
    st_file f;
    int rc = st_read(state, &f, err);
    if (rc == 0) {
        st_tensor *avg = xcalloc(f.n ? f.n : 1, sizeof *avg);
        size_t n = 0;
        for (size_t i = 0; i < f.n; i++)
            if (!strncmp(f.tensors[i].name, "ema.", 4)) avg[n] = f.tensors[i], avg[n++].name = f.tensors[i].name + 4;
        rc = n ? pt_write_lightning(to, avg, n, epoch, s, err) : convert(from, to, 1, epoch, s, err);
        free(avg);
        st_close(&f);
    }
    free(dir), free(to), free(state), free(from);
    return rc;
}

int ckpt_write_espnet3_names(const ckpt_manager *m, esp_err *err)
{
    int rc = m->last ? write_last(m, err) : 0;
    for (size_t ti = 0; ti < m->n_tables && rc == 0; ti++) {
        const ckpt_table *t = &m->tables[ti];
        char *mon = ckpt_monitor_file_name(t->monitor);
        for (size_t i = 0; i < t->n && rc == 0; i++) {
            char *name = entry_ckpt_name(&t->entries[i], mon);
            char *to = path_join(m->exp_dir, name);
            if (!path_exists(to)) { /* a checkpoint's weights never change once written */
                char *from = xasprintf("%s/%s/model.safetensors", m->ckpt_dir, t->entries[i].dir);
                rc = convert(from, to, 1, lightning_epoch(&t->entries[i]), t->entries[i].step, err);
                free(from);
            }
            free(to), free(name);
        }
        if (rc == 0) prune(m, t, mon);
        if (rc == 0 && t->n) {
            char *from = xasprintf("%s/%s.ave_%zubest.safetensors", m->exp_dir, mon, t->n);
            char *to = xasprintf("%s/%s.ave_%zubest.pth", m->exp_dir, mon, t->n);
            if (path_exists(from)) rc = convert(from, to, 0, 0, 0, err);
            free(from), free(to);
        }
        free(mon);
    }
    return rc;
}
