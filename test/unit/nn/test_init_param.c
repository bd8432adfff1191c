/* ESPnet's init_param (path:src_key:dst_key:exclude) into a model state: core/nn/model_files.h. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/formats/torch_zip.h"
#include "core/nn/model_files.h"
#include "test/unit/test_util.h"

static char dir[64];
static param_table t;
static float *vals;

/* Every table entry under "model." (a Lightning .ckpt's names) with value 1000 + its index, plus
 * ESPnet's frontend buffer, as a .pth; `extra` adds one more tensor of that name. */
static const char *write_ckpt(const char *name, const char *extra, int bad_shape)
{
    st_tensor *ts = calloc(t.n + 2, sizeof *ts);
    char **names = calloc(t.n + 2, sizeof *names);
    int64_t *cnt = calloc(t.n, sizeof *cnt);
    size_t n = 0;
    for (size_t i = 0; i < t.n; i++) {
        const param_info *p = &t.items[i];
        names[n] = malloc(160);
        snprintf(names[n], 160, "model.%s", p->name);
        for (size_t k = 0; k < p->count; k++) vals[p->offset + k] = (float)(1000 + i);
        ts[n] = (st_tensor){.name = names[n], .dtype = ST_F32, .ndim = p->ndim, .data = vals + p->offset};
        for (int d = 0; d < p->ndim; d++) ts[n].shape[d] = p->shape[d];
        if (p->kind == PARAM_COUNTER) cnt[i] = 7, ts[n].dtype = ST_I64, ts[n].data = &cnt[i];
        if (bad_shape && !strcmp(p->name, "ctc.ctc_lo.bias")) ts[n].shape[0] = 3, ts[n].ndim = 1;
        n++;
    }
    static float mel[6];
    ts[n++] = (st_tensor){.name = "model.frontend.logmel.melmat", .dtype = ST_F32, .ndim = 2, .shape = {3, 2}, .data = mel};
    if (extra) ts[n++] = (st_tensor){.name = extra, .dtype = ST_F32, .ndim = 1, .shape = {1}, .data = mel};
    const char *path = test_path(dir, name);
    esp_err err = {{0}};
    cr_assert_eq(pt_write(path, ts, n, &err), 0, "%s", err.msg);
    for (size_t i = 0; i < t.n; i++) free(names[i]);
    free(names), free(ts), free(cnt);
    return path;
}

static void setup(void)
{
    test_tmpdir_make(dir, sizeof dir, "init_param");
    model_dims d = {.idim = 20, .d = 8, .heads = 2, .ff = 16, .blocks = 1, .vocab = 5,
                    .dec_blocks = 1, .dec_heads = 2, .dec_ff = 16};
    d.f2 = ((d.idim - 1) / 2 - 1) / 2;
    param_table_build(&t, &d);
    vals = calloc(t.state_total, sizeof *vals);
}

static void teardown(void)
{
    free(vals);
    param_table_free(&t);
    test_tmpdir_remove(dir);
}

TestSuite(init_param, .init = setup, .fini = teardown);

static size_t count_prefix(const char *prefix)
{
    size_t n = 0;
    for (size_t i = 0; i < t.n; i++) n += !strncmp(t.items[i].name, prefix, strlen(prefix));
    return n;
}

static size_t load(const char *spec, int ignore, float *state, int want_rc, const char *want_msg)
{
    esp_err err = {{0}};
    size_t n = 0;
    int rc = model_init_param(&t, state, spec, ignore, &n, &err);
    cr_assert_eq(rc, want_rc, "%s: %s", spec, err.msg);
    if (want_msg) cr_assert(strstr(err.msg, want_msg), "%s", err.msg);
    return n;
}

Test(init_param, selects_renames_and_excludes_as_espnet)
{
    const char *ck = write_ckpt("m.ckpt", NULL, 0);
    float *s = calloc(t.state_total, sizeof *s);
    char spec[600];
    /* the whole state dict ("model." as ESPnet3's LightningModule names it; ESPnet's buffers skipped) */
    cr_assert_eq(load(ck, 0, s, 0, NULL), t.n);
    for (size_t i = 0; i < t.n; i++) cr_assert_eq(s[t.items[i].offset], (float)(1000 + i), "%s", t.items[i].name);
    /* src_key model.encoder -> dst_key encoder: the encoder only */
    memset(s, 0, t.state_total * sizeof *s);
    snprintf(spec, sizeof spec, "%s:model.encoder:encoder", ck);
    cr_assert_eq(load(spec, 0, s, 0, NULL), count_prefix("encoder."));
    cr_assert_eq(s[param_find(&t, "decoder.after_norm.bias")->offset], 0.0f);
    cr_assert_eq(s[param_find(&t, "encoder.after_norm.bias")->offset], (float)(param_find(&t, "encoder.after_norm.bias") - t.items + 1000));
    /* src_key model, excluding the decoder and the CTC layer */
    snprintf(spec, sizeof spec, "%s:model::model.decoder,model.ctc", ck);
    cr_assert_eq(load(spec, 0, s, 0, NULL), t.n - count_prefix("decoder.") - count_prefix("ctc."));
    /* a tensor that is not the model's is an error naming it; exclude drops it */
    const char *extra = write_ckpt("x.pth", "model.lm.weight", 0);
    load(extra, 0, s, -1, "tensor model.lm.weight is not a parameter of this model");
    snprintf(spec, sizeof spec, "%s:::model.lm", extra);
    cr_assert_eq(load(spec, 0, s, 0, NULL), t.n);
    /* another shape: an error, or skipped with ignore_init_mismatch */
    const char *bad = write_ckpt("bad.pth", NULL, 1);
    load(bad, 0, s, -1, "model.ctc.ctc_lo.bias is F32 [3], the model's ctc.ctc_lo.bias is [5]");
    cr_assert_eq(load(bad, 1, s, 0, NULL), t.n - 1);
    /* a missing file: the message names the init_param entry and the file */
    load(test_path(dir, "none.pth"), 0, s, -1, "none.pth");
    snprintf(spec, sizeof spec, "%s:model.encoder:encoder", test_path(dir, "none.pth"));
    load(spec, 0, s, -1, "init_param ");
    /* five fields (issue 44: it said "a: cannot read"), as ESPnet2 refuses them */
    load("a:b:c:d:e", 0, s, -1, "init_param a:b:c:d:e: more than 4 fields (<file>:<src_key>:<dst_key>:<exclude_keys>)");
    free(s);
}
