/* PyTorch checkpoints (core/formats/torch_zip.h): files written by the venv's torch.save and a real
 * Lightning Trainer (scripts/make_torch_fixtures.py) read to the values torch holds, hostile files
 * refused with one line, and our writer's files read back bit for bit. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/formats/torch_pickle.h"
#include "core/formats/torch_zip.h"
#include "core/nn/model_files.h"
#include "test/unit/test_util.h"

static const char *fixture(const char *name)
{
    static char p[512];
    snprintf(p, sizeof p, "%s/test/fixtures/torch/%s", test_root_dir(), name);
    return p;
}

/* Every line of expect.txt for `file`: the tensor is there with that dtype, shape and values. */
static void check_expected(const char *file, const st_file *f)
{
    char *txt = test_slurp(fixture("expect.txt"));
    size_t checked = 0;
    for (char *line = strtok(txt, "\n"); line; line = strtok(NULL, "\n")) {
        char fname[64], name[128], dt[8], shape[64];
        int used = 0;
        if (sscanf(line, "%63s %127s %7s %63s %n", fname, name, dt, shape, &used) < 4 || strcmp(fname, file)) continue;
        const st_tensor *t = st_get(f, name);
        cr_assert_not_null(t, "%s: no tensor %s", file, name);
        cr_assert_eq(t->dtype, !strcmp(dt, "I64") ? ST_I64 : ST_F32, "%s %s", file, name);
        int nd = 0;
        int64_t sh[8];
        for (char *s = shape; *shape != '-' && s && *s; nd++) {
            sh[nd] = strtoll(s, &s, 10);
            if (*s == 'x') s++;
        }
        cr_assert_eq(t->ndim, nd, "%s %s ndim", file, name);
        for (int d = 0; d < nd; d++) cr_assert_eq(t->shape[d], sh[d], "%s %s dim %d", file, name, d);
        const char *v = line + used;
        for (int64_t k = 0; k < st_numel(t); k++) {
            char *end;
            if (t->dtype == ST_I64) {
                long long want = strtoll(v, &end, 10);
                cr_assert_eq(((const int64_t *)t->data)[k], want, "%s %s[%lld]", file, name, (long long)k);
            } else {
                uint32_t want = (uint32_t)strtoul(v, &end, 16), got;
                memcpy(&got, (const float *)t->data + k, 4);
                cr_assert_eq(got, want, "%s %s[%lld]: %08x vs %08x", file, name, (long long)k, got, want);
            }
            cr_assert_neq(end, v, "%s %s: expect.txt has fewer values", file, name);
            v = end;
        }
        checked++;
    }
    cr_assert_eq(checked, f->n, "%s: %zu tensors read, expect.txt lists %zu", file, f->n, checked);
    free(txt);
}

Test(torch_zip, reads_torch_save_files)
{
    /* lightning_hparams.ckpt: an OmegaConf DictConfig in its hyper-parameters (scripts/
     * make_trainer_checkpoint_fixtures.py), stepped over without running it */
    static const char *const files[] = {"plain.pth", "module.pth", "lightning.ckpt", "small.pth",
                                        "lightning_hparams.ckpt"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        st_file f;
        esp_err err = {{0}};
        cr_assert(pt_is_zip_file(fixture(files[i])));
        cr_assert_eq(pt_read(fixture(files[i]), &f, &err), 0, "%s", err.msg);
        check_expected(files[i], &f);
        st_close(&f);
    }
    /* shared storage, transposed and offset views: a.t is a.weight transposed */
    st_file f;
    esp_err err = {{0}};
    cr_assert_eq(pt_read(fixture("plain.pth"), &f, &err), 0, "%s", err.msg);
    const float *w = st_get(&f, "a.weight")->data, *t = st_get(&f, "a.t")->data;
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 4; c++) cr_assert_eq(w[r * 4 + c], t[c * 3 + r]);
    st_close(&f);
    cr_assert_not(pt_is_zip_file(fixture("expect.txt")));
}

static void expect_refused(const char *file, const char *want)
{
    st_file f;
    esp_err err = {{0}};
    cr_assert_neq(pt_read(fixture(file), &f, &err), 0, "%s was read", file);
    cr_assert(strstr(err.msg, fixture(file)), "the error names the file: %s", err.msg);
    cr_assert(strstr(err.msg, want), "%s: %s", file, err.msg);
    cr_assert_null(strchr(err.msg, '\n'), "one line: %s", err.msg);
}

Test(torch_zip, refuses_hostile_files)
{
    expect_refused("evil_global.pth", "state-dict entry 'x' is a posix.system object, not a tensor (nothing in the file is run)");
    expect_refused("evil_reduce.pth", "REDUCE of torch.FloatStorage is not allowed");
    expect_refused("evil_past.pth", "reaches past its storage");
    expect_refused("evil_huge.pth", "more elements than its storage or the file holds");
    expect_refused("evil_truncated.pth", "not a readable zip");
    /* fuzz_torch's find (2026-11-28): a byteorder record "lit\nle" split the message in two lines */
    expect_refused("evil_byteorder.pth", "byteorder 'lit\\x0ale' (only little-endian");
}

/* Views as a hostile file uses them (test/fixtures/torch/make_test_pth.py, standard library only):
 * 20,000 keys of one 4 MiB storage are refused by the copy budget instead of taking 80 GB, a
 * repeated key is refused, two keys of one storage (tied weights) are read. */
static void make_test_pth(char *d, size_t n)
{
    test_tmpdir_make(d, n, "torch_views");
    cr_assert_eq(test_sh("cd '%s' && /usr/bin/python3 '%s'", d, fixture("make_test_pth.py")), 0);
}

Test(torch_zip, refuses_shared_storage_bombs_and_repeated_keys)
{
    char d[64];
    make_test_pth(d, sizeof d);
    st_file f;
    esp_err err = {{0}};
    cr_assert_neq(pt_read(test_path(d, "shared.pth"), &f, &err), 0);
    cr_expect(strstr(err.msg, "shared.pth: its tensors would take more than ") &&
                  strstr(err.msg, "many keys viewing the same storage: refused"), "%s", err.msg);
    cr_assert_neq(pt_read(test_path(d, "dup.pth"), &f, &err), 0);
    cr_expect(strstr(err.msg, "dup.pth: state-dict key 'a' appears more than once"), "%s", err.msg);
    cr_assert_eq(pt_read(test_path(d, "tied.pth"), &f, &err), 0, "%s", err.msg);
    cr_expect_eq(f.n, 2);
    cr_expect(f.n == 2 && f.tensors[1].shape[0] == 1024 && ((const float *)f.tensors[1].data)[1048575] == 0.0f);
    st_close(&f);
    test_tmpdir_remove(d);
}

/* What ESPnet2's trainer and Lightning write beside the weights (numpy scalars and bytes in the
 * reporter, optimizer tensors, an OmegaConf DictConfig, a timedelta) is stepped over without
 * running anything: the `model` / `state_dict` part is read. */
Test(torch_zip, reads_the_weights_beside_numpy_omegaconf_and_optimizer_parts)
{
    char d[64];
    make_test_pth(d, sizeof d);
    static const char *const files[] = {"espnet2_checkpoint.pth", "lightning_omegaconf.ckpt"};
    static const char *const names[] = {"encoder.w", "model.encoder.w"};
    for (int i = 0; i < 2; i++) {
        st_file f;
        esp_err err = {{0}};
        cr_assert_eq(pt_read(test_path(d, files[i]), &f, &err), 0, "%s", err.msg);
        cr_assert_eq(f.n, 1, "%s: %zu tensors", files[i], f.n);
        cr_expect_str_eq(f.tensors[0].name, names[i]);
        cr_expect(f.tensors[0].ndim == 2 && f.tensors[0].shape[0] == 2 && f.tensors[0].shape[1] == 3);
        const float *w = f.tensors[0].data;
        for (int k = 0; k < 6; k++) cr_expect_eq(w[k], (float)(k + 1), "%s[%d] = %g", files[i], k, w[k]);
        st_close(&f);
    }
    test_tmpdir_remove(d);
}

/* Pickles built by hand: each opcode outside the subset, and malformed use of allowed ones. */
Test(torch_zip, refuses_hostile_pickles)
{
#define C(p, w) {p, sizeof p - 1, w}
    static const struct { const char *pkl; size_t len; const char *want; } cases[] = {
        C("\x80\x02" "cbuiltins\neval\n)R.", "the pickle holds a builtins.eval object, not a state dict"),
        C("\x80\x02" "(X\x01\x00\x00\x00" "a" "\x92.", "opcode 0x92 is not allowed"),      /* NEWOBJ_EX */
        C("\x80\x02" "K\x01)\x81.", "NEWOBJ of a int is not allowed"),
        C("\x80\x02" "C\xff" "ab", "truncated bytes"),
        C("\x80\x02" "}(X\x01\x00\x00\x00" "aK\x01u" "}b.", "state-dict entry 'a' is a int, not a tensor"),
        C("\x80\x02" "}X\xff\xff\xff\x7f" "ab", "truncated string"),
        C("\x80\x02" "}h\x05.", "memo entry not defined"),
        C("\x80\x02" "]]b.", "BUILD of a list is not allowed"),
        C("\x80\x02" "K\x01)R.", "REDUCE of a int is not allowed"),
        C("\x80\x02" "}", "truncated (no STOP)"),
        C("\x80\x02" "ccollections\nOrderedDict\nK\x01\x85R.", "OrderedDict with arguments"),
        /* a key with a newline (the fuzzer's): the message stays one line */
        C("\x80\x02" "}(X\x03\x00\x00\x00" "a\nb" "K\x01u.", "state-dict entry 'a\\x0ab' is a int"),
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        size_t len = cases[i].len;
        pt_views v;
        esp_err err = {{0}};
        cr_assert_neq(pt_pickle_state_dict((const unsigned char *)cases[i].pkl, len, "x.pth", &v, &err), 0,
                      "case %zu accepted", i);
        cr_assert(strstr(err.msg, cases[i].want), "case %zu: %s", i, err.msg);
        cr_assert_null(strchr(err.msg, '\n'), "case %zu: %s", i, err.msg);
    }
}

static char dir[64];
static void setup(void) { test_tmpdir_make(dir, sizeof dir, "torch_zip"); }
static void teardown(void) { test_tmpdir_remove(dir); }

Test(torch_zip, write_read_round_trip_is_bit_identical, .init = setup, .fini = teardown)
{
    float w[6] = {1.5f, -0.0f, 3.25e-8f, 1e30f, -7.0f, 0.1f}, s = 2.0f;
    int64_t cnt = 123456789012LL;
    st_tensor t[] = {
        {.name = "encoder.embed.out.0.weight", .dtype = ST_F32, .ndim = 2, .shape = {2, 3}, .data = w},
        {.name = "scalar", .dtype = ST_F32, .ndim = 0, .data = &s},
        {.name = "bn.num_batches_tracked", .dtype = ST_I64, .ndim = 0, .data = &cnt},
        {.name = "empty", .dtype = ST_F32, .ndim = 1, .shape = {0}, .data = w},
    };
    const char *path = test_path(dir, "m.pth");
    esp_err err = {{0}};
    cr_assert_eq(pt_write(path, t, 4, &err), 0, "%s", err.msg);
    st_file f;
    cr_assert_eq(pt_read(path, &f, &err), 0, "%s", err.msg);
    cr_assert_eq(f.n, 4);
    for (size_t i = 0; i < 4; i++) {
        cr_assert_str_eq(f.tensors[i].name, t[i].name);
        cr_assert_eq(f.tensors[i].dtype, t[i].dtype);
        cr_assert_eq(f.tensors[i].ndim, t[i].ndim);
        cr_assert_eq(st_nbytes(&f.tensors[i]), st_nbytes(&t[i]));
        cr_assert_eq(memcmp(f.tensors[i].data, t[i].data, st_nbytes(&t[i])), 0, "%s", t[i].name);
    }
    st_close(&f);
    /* the same tensors give the same bytes */
    const char *again = test_path(dir, "again.pth");
    cr_assert_eq(pt_write(again, t, 4, &err), 0, "%s", err.msg);
    cr_assert(test_same_file(path, again));
}

/* torch.save's legacy format (a pickle stream, then raw storages) is named, not guessed at as
 * safetensors. */
Test(torch_zip, a_legacy_torch_file_is_named, .init = setup, .fini = teardown)
{
    static const unsigned char legacy[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46, 0xf9,
                                           0x20, 0x6a, 0xa8, 0x50, 0x19, 0x2e, 0x80, 0x02, 0x4d, 0xe9, 0x03, 0x2e};
    const char *p = test_path(dir, "old.pth");
    FILE *fp = fopen(p, "wb");
    cr_assert_not_null(fp);
    fwrite(legacy, 1, sizeof legacy, fp);
    fclose(fp);
    cr_expect(pt_is_legacy_file(p));
    cr_expect_not(pt_is_legacy_file(fixture("plain.pth")));
    st_file f;
    esp_err err = {{0}};
    cr_assert_neq(model_weights_open(p, &f, &err), 0);
    cr_expect(strstr(err.msg, "old.pth: a PyTorch file in the legacy format (before PyTorch 1.6"), "%s", err.msg);
}

/* The real PyTorch (the test venv's torch 2.11, torch.load with weights_only=True as ESPnet3 and
 * torch >= 2.6 load) reads both writers' files to the same names, dtypes, shapes and bits: every
 * .pth and .ckpt espnet3 writes goes through pt_write or pt_write_lightning (the experiment's own
 * files: train/ckpt_files/espnet3_names_load_in_pytorch). */
Test(torch_zip, pytorch_loads_what_we_write, .init = setup, .fini = teardown)
{
    const char *python = test_venv_tool("python");
    float w[6] = {1.5f, -0.0f, 3.25e-8f, 1e30f, -7.0f, 0.1f}, s = 2.0f;
    double d[2] = {3.141592653589793, -1e-300};
    int64_t cnt = 123456789012LL, ids[3] = {-1, 0, 1LL << 40};
    st_tensor t[] = {
        {.name = "encoder.embed.out.0.weight", .dtype = ST_F32, .ndim = 2, .shape = {2, 3}, .data = w},
        {.name = "scalar", .dtype = ST_F32, .ndim = 0, .data = &s},
        {.name = "bn.num_batches_tracked", .dtype = ST_I64, .ndim = 0, .data = &cnt},
        {.name = "empty", .dtype = ST_F32, .ndim = 1, .shape = {0}, .data = w},
        {.name = "f64", .dtype = ST_F64, .ndim = 1, .shape = {2}, .data = d},
        {.name = "ids", .dtype = ST_I64, .ndim = 3, .shape = {1, 3, 1}, .data = ids},
    };
    esp_err err = {{0}};
    cr_assert_eq(pt_write(test_path(dir, "m.pth"), t, 6, &err), 0, "%s", err.msg);
    cr_assert_eq(pt_write_lightning(test_path(dir, "m.ckpt"), t, 6, 3, 1234, &err), 0, "%s", err.msg);
    int rc = test_run_python_with(
        python, dir,
        "import math, struct, torch\n"
        "want = {'encoder.embed.out.0.weight': (torch.float32, (2, 3), [1.5, -0.0, 3.25e-8, 1e30, -7.0, 0.1]),\n"
        "        'scalar': (torch.float32, (), [2.0]), 'bn.num_batches_tracked': (torch.int64, (), [123456789012]),\n"
        "        'empty': (torch.float32, (0,), []), 'f64': (torch.float64, (2,), [3.141592653589793, -1e-300]),\n"
        "        'ids': (torch.int64, (1, 3, 1), [-1, 0, 1 << 40])}\n"
        "def same(sd, prefix):\n"
        "    assert list(sd) == [prefix + k for k in want], list(sd)\n"
        "    for k, (dt, shape, vals) in want.items():\n"
        "        v = sd[prefix + k]\n"
        "        assert v.dtype == dt and tuple(v.shape) == shape, (k, v.dtype, v.shape)\n"
        "        ref = torch.tensor(vals, dtype=dt).reshape(shape)\n"
        "        # bit for bit: -0.0 and the float32 roundings included\n"
        "        assert v.numpy().tobytes() == ref.numpy().tobytes(), (k, v, ref)\n"
        "sd = torch.load('m.pth', map_location='cpu', weights_only=True)\n"
        "assert type(sd).__name__ == 'OrderedDict', type(sd)\n"
        "same(sd, '')\n"
        "ck = torch.load('m.ckpt', map_location='cpu', weights_only=True)\n"
        "assert ck['epoch'] == 3 and ck['global_step'] == 1234 and 'pytorch-lightning_version' in ck, list(ck)\n"
        "same(ck['state_dict'], 'model.')\n"
        "print('torch', torch.__version__, 'read both files')\n");
    cr_assert_eq(rc, 0, "PyTorch did not load our .pth / .ckpt as written");
}
