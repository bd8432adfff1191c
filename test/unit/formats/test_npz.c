/* .npz round trips, and agreement with numpy in both directions (Debian's python3-numpy). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "core/formats/npz.h"
#include "test/unit/test_util.h"

static char dir[64];

static void setup(void) { test_tmpdir_make(dir, sizeof dir, "npz"); }
static void teardown(void) { test_tmpdir_remove(dir); }
TestSuite(npz, .init = setup, .fini = teardown);

static int run_python(const char *code) { return test_run_python(dir, code); }

Test(npz, numpy_reads_what_we_write)
{
    int64_t count = 3;
    float sum[3] = {1.5f, -2.0f, 1e-3f};
    double sq[2][2] = {{1, 2}, {3, 4}};
    npy_array arrays[] = {
        {.name = "count", .dtype = NPY_I64, .ndim = 0, .count = 1, .data = &count},
        {.name = "sum", .dtype = NPY_F32, .ndim = 1, .shape = {3}, .count = 3, .data = sum},
        {.name = "sum_square", .dtype = NPY_F64, .ndim = 2, .shape = {2, 2}, .count = 4, .data = sq},
    };
    char path[256];
    snprintf(path, sizeof path, "%s/stats.npz", dir);
    esp_err err;
    cr_assert_eq(npz_write(path, arrays, 3, &err), 0, "%s", err.msg);
    int rc = run_python("import numpy as np\n"
                        "d = np.load('stats.npz')\n"
                        "assert sorted(d.files) == ['count', 'sum', 'sum_square'], d.files\n"
                        "assert d['count'].dtype == np.int64 and d['count'].shape == () and int(d['count']) == 3\n"
                        "assert d['sum'].dtype == np.float32 and d['sum'].tolist() == [1.5, -2.0, np.float32(1e-3)]\n"
                        "assert d['sum_square'].dtype == np.float64 and d['sum_square'].tolist() == [[1, 2], [3, 4]]\n");
    cr_assert_eq(rc, 0, "numpy did not read our npz as written");

    npz_file f;
    cr_assert_eq(npz_read(path, &f, &err), 0, "%s", err.msg);
    const npy_array *s = npz_get(&f, "sum");
    cr_assert(s && s->dtype == NPY_F32 && s->count == 3 && ((float *)s->data)[1] == -2.0f);
    double *v;
    size_t n;
    cr_assert_eq(npz_get_doubles(&f, path, "sum_square", &v, &n, &err), 0);
    cr_assert(n == 4 && v[3] == 4.0);
    free(v);
    cr_assert_neq(npz_get_doubles(&f, path, "mean", &v, &n, &err), 0);
    cr_assert(strstr(err.msg, "no array 'mean'"), "%s", err.msg);
    npz_free(&f);
}

Test(npz, we_read_what_numpy_writes_stored_and_compressed)
{
    int rc = run_python("import numpy as np\n"
                        "np.savez('a.npz', count=np.int64(7), sum=np.arange(5, dtype=np.float32))\n"
                        "np.savez_compressed('b.npz', sum=np.linspace(0, 1, 100))\n");
    cr_assert_eq(rc, 0, "python3-numpy missing? (scripts/install_deps.sh installs it)");
    esp_err err;
    npz_file f;
    char path[256];
    snprintf(path, sizeof path, "%s/a.npz", dir);
    cr_assert_eq(npz_read(path, &f, &err), 0, "%s", err.msg);
    cr_assert_eq(*(int64_t *)npz_get(&f, "count")->data, 7);
    cr_assert_eq(((float *)npz_get(&f, "sum")->data)[4], 4.0f);
    npz_free(&f);
    snprintf(path, sizeof path, "%s/b.npz", dir);
    cr_assert_eq(npz_read(path, &f, &err), 0, "%s", err.msg);
    const npy_array *s = npz_get(&f, "sum");
    cr_assert(s->dtype == NPY_F64 && s->count == 100 && ((double *)s->data)[99] == 1.0);
    npz_free(&f);
}

Test(npz, garbage_is_an_error_naming_the_file)
{
    char path[256];
    snprintf(path, sizeof path, "%s/bad.npz", dir);
    FILE *fp = fopen(path, "w");
    fputs("not a zip", fp);
    fclose(fp);
    npz_file f;
    esp_err err;
    cr_assert_neq(npz_read(path, &f, &err), 0);
    cr_assert(strstr(err.msg, path) && strstr(err.msg, "not an .npz"), "%s", err.msg);
}
