/* safetensors files as training writes and reads them: the header byte for byte against the
 * Python library, round trips and errors, numpy and the Python safetensors package (the test venv's)
 * reading what we write, and a foreign unaligned layout. Helpers: train_files_test_util.{h,c}. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/base/fsio.h"
#include "core/formats/safetensors.h"
#include "test/unit/test_util.h"
#include "test/unit/train/train_files_test_util.h"

/* ---- safetensors ----------------------------------------------------------------------- */

TestSuite(safetensors, .init = train_files_setup, .fini = train_files_teardown);

static const float F32_B[6] = {1.5f, -2.25f, 3.0f, 0.1f, 1e-8f, -0.0f};
static const double F64_C = 3.141592653589793;
static const int64_t I64_D[2] = {-5, 1LL << 40};
static const int8_t I8_A[3] = {-1, 0, 7};

static void write_sample(const char *path)
{
    st_tensor t[] = {
        {.name = "b", .dtype = ST_F32, .ndim = 2, .shape = {2, 3}, .data = F32_B},
        {.name = "a", .dtype = ST_I8, .ndim = 1, .shape = {3}, .data = I8_A},
        {.name = "c", .dtype = ST_F64, .ndim = 0, .data = &F64_C},
        {.name = "d", .dtype = ST_I64, .ndim = 1, .shape = {2}, .data = I64_D},
    };
    st_kv meta[] = {{"format", "pt"}};
    esp_err err;
    cr_assert_eq(st_write(path, t, 4, meta, 1, &err), 0, "%s", err.msg);
}

Test(safetensors, header_is_byte_identical_to_the_python_library)
{
    char *path = in_dir("s.safetensors");
    write_sample(path);
    size_t len;
    esp_err err;
    char *bytes = read_file(path, READ_LIST, &len, &err);
    cr_assert_not_null(bytes);
    /* safetensors 0.8.0's save() of the same dict (numpy), header bytes verbatim. */
    const char *expect = "{\"__metadata__\":{\"format\":\"pt\"},"
                         "\"d\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[0,16]},"
                         "\"c\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[16,24]},"
                         "\"b\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[24,48]},"
                         "\"a\":{\"dtype\":\"I8\",\"shape\":[3],\"data_offsets\":[48,51]}}     ";
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)(unsigned char)bytes[i] << (8 * i);
    cr_assert_eq(hlen, 256);
    cr_assert_eq(hlen, strlen(expect));
    cr_assert(memcmp(bytes + 8, expect, hlen) == 0, "%.*s", (int)hlen, bytes + 8);
    cr_assert_eq(len, 8 + 256 + 51);
    free(bytes);
    free(path);
}

Test(safetensors, round_trip_aligned_and_errors_name_file_and_tensor)
{
    char *path = in_dir("s.safetensors");
    write_sample(path);
    st_file f;
    esp_err err;
    cr_assert_eq(st_read(path, &f, &err), 0, "%s", err.msg);
    cr_assert_eq(f.n, 4);
    cr_assert_str_eq(f.tensors[0].name, "d"); /* file order */
    cr_assert_str_eq(st_meta_get(&f, "format"), "pt");
    cr_assert_null(st_meta_get(&f, "nope"));
    for (size_t i = 0; i < f.n; i++)
        cr_assert_eq((uintptr_t)f.tensors[i].data % st_dtype_size(f.tensors[i].dtype), 0);
    const float *b;
    int64_t shape[2] = {2, 3};
    cr_assert_eq(st_get_f32(&f, "b", 2, shape, &b, &err), 0, "%s", err.msg);
    cr_assert(memcmp(b, F32_B, sizeof F32_B) == 0);
    cr_assert_eq(*(const double *)st_get(&f, "c")->data, F64_C);
    cr_assert_eq(st_get(&f, "c")->ndim, 0);
    cr_assert_eq(((const int64_t *)st_get(&f, "d")->data)[1], 1LL << 40);
    cr_assert_eq(((const int8_t *)st_get(&f, "a")->data)[0], -1);

    int64_t wrong[2] = {3, 2};
    cr_assert_neq(st_get_f32(&f, "b", 2, wrong, &b, &err), 0);
    cr_assert(strstr(err.msg, path) && strstr(err.msg, "'b'") && strstr(err.msg, "[2, 3]") &&
                  strstr(err.msg, "[3, 2]"),
              "%s", err.msg);
    cr_assert_neq(st_get_f32(&f, "d", 1, shape, &b, &err), 0);
    cr_assert(strstr(err.msg, "'d' is I64"), "%s", err.msg);
    cr_assert_neq(st_get_f32(&f, "encoder.x", 1, shape, &b, &err), 0);
    cr_assert(strstr(err.msg, "no tensor 'encoder.x'"), "%s", err.msg);
    st_close(&f);

    /* A truncated file is refused with the file named. */
    cr_assert_eq(truncate(path, 8 + 256 + 40), 0);
    cr_assert_neq(st_read(path, &f, &err), 0);
    cr_assert(strstr(err.msg, path) && strstr(err.msg, "truncated"), "%s", err.msg);
    cr_assert_eq(truncate(path, 5), 0);
    cr_assert_neq(st_read(path, &f, &err), 0);
    cr_assert(strstr(err.msg, "too short"), "%s", err.msg);

    st_tensor dup[] = {{.name = "x", .dtype = ST_F32, .ndim = 1, .shape = {1}, .data = F32_B},
                       {.name = "x", .dtype = ST_F32, .ndim = 1, .shape = {1}, .data = F32_B}};
    cr_assert_neq(st_write(path, dup, 2, NULL, 0, &err), 0);
    cr_assert(strstr(err.msg, "'x' given twice"), "%s", err.msg);
    free(path);
}

Test(safetensors, numpy_reads_what_we_write)
{
    char *path = in_dir("s.safetensors");
    write_sample(path);
    free(path);
    /* A reader of the format from its spec with numpy alone, so this check never depends on the package. */
    int rc = run_python("import json, struct, numpy as np\n"
                        "b = open('s.safetensors', 'rb').read()\n"
                        "n = struct.unpack('<Q', b[:8])[0]\n"
                        "assert n % 8 == 0\n"
                        "h = json.loads(b[8:8 + n])\n"
                        "assert h.pop('__metadata__') == {'format': 'pt'}\n"
                        "dt = {'F32': '<f4', 'F64': '<f8', 'I64': '<i8', 'I8': 'i1'}\n"
                        "def get(k):\n"
                        "    e = h[k]; s, t = e['data_offsets']\n"
                        "    return np.frombuffer(b[8 + n + s:8 + n + t], dtype=dt[e['dtype']]).reshape(e['shape'])\n"
                        "assert sorted(h) == ['a', 'b', 'c', 'd']\n"
                        "assert get('b').tolist() == np.array([[1.5, -2.25, 3.0], [0.1, 1e-8, -0.0]], "
                        "np.float32).tolist()\n"
                        "assert get('c').shape == () and float(get('c')) == 3.141592653589793\n"
                        "assert get('d').tolist() == [-5, 1 << 40] and get('a').tolist() == [-1, 0, 7]\n"
                        "assert 8 + n + max(e['data_offsets'][1] for e in h.values()) == len(b)\n");
    cr_assert_eq(rc, 0, "numpy did not read our safetensors file as written");
}

Test(safetensors, python_safetensors_package_reads_and_writes)
{
    const char *python = test_venv_tool("python");
    char *path = in_dir("s.safetensors");
    write_sample(path);
    free(path);
    int rc = test_run_python_with(python, train_files_dir, "import numpy as np\n"
                        "from safetensors import safe_open\n"
                        "from safetensors.numpy import load_file, save_file\n"
                        "d = load_file('s.safetensors')\n"
                        "assert d['b'].dtype == np.float32 and d['b'].shape == (2, 3) and d['b'][0, 1] == -2.25\n"
                        "assert d['d'].tolist() == [-5, 1 << 40] and d['a'].dtype == np.int8\n"
                        "with safe_open('s.safetensors', 'np') as f: assert f.metadata() == {'format': 'pt'}\n"
                        "save_file({'w': np.arange(6, dtype=np.float32).reshape(2, 3), 'n': np.array(9)}, "
                        "'p.safetensors', metadata={'k': 'v'})\n");
    cr_assert_eq(rc, 0, "the safetensors package did not read our file");
    char *p = in_dir("p.safetensors");
    st_file f;
    esp_err err;
    cr_assert_eq(st_read(p, &f, &err), 0, "%s", err.msg);
    const float *w;
    int64_t shape[2] = {2, 3};
    cr_assert_eq(st_get_f32(&f, "w", 2, shape, &w, &err), 0, "%s", err.msg);
    cr_assert_eq(w[5], 5.0f);
    cr_assert_eq(*(const int64_t *)st_get(&f, "n")->data, 9);
    cr_assert_str_eq(st_meta_get(&f, "k"), "v");
    st_close(&f);
    free(p);
}

Test(safetensors, reads_a_foreign_unaligned_layout)
{
    /* Written by hand with an I8 tensor first, so the F32 one starts at an odd offset. */
    int rc = run_python("import json, struct, numpy as np\n"
                        "a = np.array([1, 2, 3], np.int8).tobytes(); w = np.array([0.5, -1.0], '<f4').tobytes()\n"
                        "h = json.dumps({'a': {'dtype': 'I8', 'shape': [3], 'data_offsets': [0, 3]},\n"
                        "                'w': {'dtype': 'F32', 'shape': [2], 'data_offsets': [3, 11]}}).encode()\n"
                        "open('u.safetensors', 'wb').write(struct.pack('<Q', len(h)) + h + a + w)\n");
    cr_assert_eq(rc, 0);
    char *p = in_dir("u.safetensors");
    st_file f;
    esp_err err;
    cr_assert_eq(st_read(p, &f, &err), 0, "%s", err.msg);
    const float *w;
    int64_t shape[1] = {2};
    cr_assert_eq(st_get_f32(&f, "w", 1, shape, &w, &err), 0, "%s", err.msg);
    cr_assert_eq((uintptr_t)w % 4, 0);
    cr_assert(w[0] == 0.5f && w[1] == -1.0f);
    st_close(&f);
    free(p);
}
