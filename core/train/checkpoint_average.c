/* Averaging of model files: the element-wise mean of several safetensors files of the same
 * tensors (ESPnet's average_nbest_models), and the file names ESPnet gives the averages. The
 * checkpoint manager (core/train/checkpoint.c) picks which files to average. */
#include "core/train/checkpoint.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/fsio.h"
#include "core/nn/model_params.h"

char *ckpt_monitor_file_name(const char *monitor)
{
    char *s = xstrdup(monitor);
    for (char *c = s; *c; c++)
        if (*c == '/') *c = '.';
    return s;
}

/* A tensor by name, also under espnet3's older parameter name (checkpoints written before the rename
 * and after it average together; the output has the newest file's names). */
static const st_tensor *get_any(const st_file *f, const char *name)
{
    const st_tensor *t = st_get(f, name);
    char alt[128];
    if (!t && param_legacy_name(name, alt, sizeof alt)) t = st_get(f, alt);
    if (!t && param_current_name(name, alt, sizeof alt)) t = st_get(f, alt);
    return t;
}

static int same_shape(const st_tensor *a, const st_tensor *b)
{
    if (a->ndim != b->ndim || a->dtype != b->dtype) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return 0;
    return 1;
}

int ckpt_average_files(const char *out_path, const char *const *inputs, size_t n, size_t newest, esp_err *err)
{
    ESP_CHECK(n > 0 && newest < n);
    st_file *files = xcalloc(n, sizeof *files);
    st_tensor *out = NULL;
    void **bufs = NULL;
    size_t n_out = 0;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) rc = st_read(inputs[i], &files[i], err);
    if (rc != 0) goto done;
    /* The newest file, which this code wrote, gives the names: older files may spell them as espnet3
     * did before ESPnet's names (get_any finds them), and the model's names are not ours to guess
     * here (a conv2d8 or contextual encoder's embed.out has no Sequential index). */
    const st_file *ref = &files[newest];
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (files[i].n != ref->n) {
            rc = esp_fail(err, "%s: %zu tensors, but %s has %zu (checkpoints of different models?)", inputs[i],
                          files[i].n, inputs[newest], ref->n);
            break;
        }
        for (size_t t = 0; t < ref->n; t++) {
            const st_tensor *o = get_any(&files[i], ref->tensors[t].name);
            if (!o) {
                rc = esp_fail(err, "%s: no tensor '%s' (present in %s)", inputs[i], ref->tensors[t].name,
                              inputs[newest]);
                break;
            }
            if (!same_shape(o, &ref->tensors[t])) {
                rc = esp_fail(err, "%s: tensor '%s' differs in dtype or shape from %s", inputs[i], o->name,
                              inputs[newest]);
                break;
            }
        }
    }
    if (rc != 0) goto done;
    out = xcalloc(ref->n + 1, sizeof *out);
    bufs = xcalloc(ref->n + 1, sizeof *bufs);
    for (size_t t = 0; t < ref->n; t++) {
        const st_tensor *r = &ref->tensors[t];
        out[n_out] = *r;
        int64_t cnt = st_numel(r);
        if (r->dtype == ST_F32 || r->dtype == ST_F64) {
            double *acc = xcalloc((size_t)cnt + 1, sizeof *acc);
            for (size_t i = 0; i < n; i++) {
                const st_tensor *x = get_any(&files[i], r->name);
                for (int64_t e = 0; e < cnt; e++)
                    acc[e] += r->dtype == ST_F32 ? (double)((const float *)x->data)[e] : ((const double *)x->data)[e];
            }
            if (r->dtype == ST_F32) {
                float *o = xmalloc((size_t)cnt * sizeof *o + 1);
                for (int64_t e = 0; e < cnt; e++) o[e] = (float)(acc[e] / (double)n);
                free(acc);
                bufs[n_out] = o;
            } else {
                for (int64_t e = 0; e < cnt; e++) acc[e] /= (double)n;
                bufs[n_out] = acc;
            }
            out[n_out].data = bufs[n_out];
        } else if (r->dtype == ST_F16 || r->dtype == ST_BF16) {
            rc = esp_fail(err, "%s: tensor '%s' is %s; averaging supports F32 and F64 weights", inputs[newest], r->name,
                          st_dtype_name(r->dtype));
            goto done;
        } else {
            /* Integer buffers (counters such as num_batches_tracked) are not means: the newest one's. */
            out[n_out].data = r->data;
        }
        n_out++;
    }
    char count[32];
    snprintf(count, sizeof count, "%zu", n);
    const st_kv meta[] = {{"format", "pt"}, {"averaged_models", count}};
    rc = st_write(out_path, out, n_out, meta, 2, err);
done:
    for (size_t i = 0; i < n_out; i++) free(bufs[i]);
    free(bufs);
    free(out);
    for (size_t i = 0; i < n; i++) st_close(&files[i]);
    free(files);
    return rc;
}

