/* .npz round trips, and agreement with numpy in both directions (Debian's python3-numpy). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <zlib.h>

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

/* ---- hostile files (test/fuzz/fuzz_npz.c; issue 16) ------------------------------------- */

static void le16(unsigned char *p, unsigned v) { p[0] = (unsigned char)v, p[1] = (unsigned char)(v >> 8); }
static void le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* A one-entry zip holding `payload` (stored, or as given when method is 8), with the central
 * directory's uncompressed size set to usize_claim. Returns the path. */
static const char *write_zip(const char *file, const char *name, const void *payload, size_t len, unsigned method,
                             uint32_t usize_claim)
{
    size_t nl = strlen(name);
    unsigned char local[30] = {0}, central[46] = {0}, end[22] = {0};
    uint32_t crc = (uint32_t)crc32(0L, payload, (uInt)len);
    le32(local, 0x04034b50);
    le16(local + 4, 20);
    le16(local + 8, method);
    le32(local + 14, crc);
    le32(local + 18, (uint32_t)len);
    le32(local + 22, usize_claim);
    le16(local + 26, (unsigned)nl);
    le32(central, 0x02014b50);
    le16(central + 4, 20);
    le16(central + 6, 20);
    le16(central + 10, method);
    le32(central + 16, crc);
    le32(central + 20, (uint32_t)len);
    le32(central + 24, usize_claim);
    le16(central + 28, (unsigned)nl);
    le32(end, 0x06054b50);
    le16(end + 8, 1);
    le16(end + 10, 1);
    le32(end + 12, (uint32_t)(46 + nl));
    le32(end + 16, (uint32_t)(30 + nl + len));
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    FILE *fp = fopen(path, "wb");
    cr_assert_not_null(fp);
    fwrite(local, 1, 30, fp);
    fwrite(name, 1, nl, fp);
    fwrite(payload, 1, len, fp);
    fwrite(central, 1, 46, fp);
    fwrite(name, 1, nl, fp);
    fwrite(end, 1, 22, fp);
    fclose(fp);
    return path;
}

/* An .npy of `header` (a dict literal) and len data bytes; returns its size. */
static size_t npy_bytes(unsigned char *out, const char *header, const void *data, size_t len)
{
    size_t hl = strlen(header);
    memcpy(out, "\x93NUMPY\x01\x00", 8);
    le16(out + 8, (unsigned)hl);
    memcpy(out + 10, header, hl);
    if (len) memcpy(out + 10 + hl, data, len);
    return 10 + hl + len;
}

static void expect_npz_error(const char *path, const char *want)
{
    npz_file f;
    esp_err err = {{0}};
    cr_assert_neq(npz_read(path, &f, &err), 0, "read %s", path);
    cr_assert(strstr(err.msg, path), "the error names the file: %s", err.msg);
    cr_assert(strstr(err.msg, want), "%s", err.msg);
}

/* shape (2^61,) of <f8 needs 2^64 bytes, which wrapped to 0 and matched an empty payload: the
 * array then claimed 2^61 elements over none, and npz_get_doubles wrote past a 1-byte buffer. */
Test(npz, a_shape_whose_byte_count_overflows_is_an_error)
{
    unsigned char npy[256];
    size_t n = npy_bytes(npy, "{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952,), }\n",
                         NULL, 0);
    expect_npz_error(write_zip("wrap.npz", "sum.npy", npy, n, 0, (uint32_t)n), "sum.npy: 0 bytes of data do not match");
    double x = 1;
    n = npy_bytes(npy, "{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387905, 4), }\n", &x, 8);
    expect_npz_error(write_zip("wrap2.npz", "sum.npy", npy, n, 0, (uint32_t)n), "do not match the shape");
    n = npy_bytes(npy, "{'descr': '<f8', 'fortran_order': False, 'shape': (-1,), }\n", &x, 8);
    expect_npz_error(write_zip("neg.npz", "sum.npy", npy, n, 0, (uint32_t)n), "not a tuple of non-negative");
}

/* A stored entry whose directory claims more bytes than it has was copied with the claimed size
 * (a heap read past the file's buffer). */
Test(npz, a_stored_entry_claiming_more_bytes_than_it_has_is_an_error)
{
    unsigned char npy[256];
    float x[2] = {1, 2};
    size_t n = npy_bytes(npy, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n", x, 8);
    expect_npz_error(write_zip("stored.npz", "sum.npy", npy, n, 0, (uint32_t)n + 4096),
                     "stored zip entry of 76 bytes claims 4172 uncompressed");
}

/* A deflated entry claiming 4 GiB was given a 4 GiB buffer before inflating a byte. */
Test(npz, a_deflated_entry_claiming_gigabytes_allocates_nothing_for_it)
{
    unsigned char packed[16] = {0x03, 0x00}; /* an empty final fixed-Huffman block */
    expect_npz_error(write_zip("bomb.npz", "sum.npy", packed, 2, 8, 0xffffffffu),
                     "zip entry claims 4294967295 bytes from 2 compressed");
}

/* NUL inside an entry name cut the name short (a file of "\0\0\0\0grid.npy" gave an array ""). */
Test(npz, an_entry_name_with_a_nul_byte_is_an_error)
{
    unsigned char npy[256];
    double x = 1;
    size_t n = npy_bytes(npy, "{'descr': '<f8', 'fortran_order': False, 'shape': (), }\n", &x, 8);
    const char *p = write_zip("nul.npz", "xxxxgrid.npy", npy, n, 0, (uint32_t)n);
    FILE *fp = fopen(p, "r+b");
    fseek(fp, 30, SEEK_SET);
    fwrite("\0\0\0\0", 1, 4, fp);
    fseek(fp, (long)(30 + 12 + n + 46), SEEK_SET);
    fwrite("\0\0\0\0", 1, 4, fp);
    fclose(fp);
    expect_npz_error(p, "NUL byte in its name");
    /* An entry named ".npy" is the array "" (numpy strips the suffix the same way). */
    p = write_zip("empty_name.npz", ".npy", npy, n, 0, (uint32_t)n);
    npz_file f;
    esp_err err;
    cr_assert_eq(npz_read(p, &f, &err), 0, "%s", err.msg);
    cr_assert_str_eq(f.arrays[0].name, "");
    npz_free(&f);
}

/* An end record claiming 65535 entries in a 22-byte file got a table of 65535 arrays first. */
Test(npz, a_directory_claiming_more_entries_than_fit_is_an_error)
{
    unsigned char end[22] = {0};
    le32(end, 0x06054b50);
    le16(end + 8, 0xffff);
    le16(end + 10, 0xffff);
    char path[256];
    snprintf(path, sizeof path, "%s/claims.npz", dir);
    FILE *fp = fopen(path, "wb");
    fwrite(end, 1, 22, fp);
    fclose(fp);
    expect_npz_error(path, "zip directory claims 65535 entries in 0 bytes");
}

/* Two entries with one name (found by the fuzzer): a lookup by name would see only the first, so
 * the reader refuses the file. */
Test(npz, two_arrays_with_one_name_are_an_error)
{
    int64_t count = 3;
    float sum[2] = {1, 2};
    npy_array arrays[] = {
        {.name = "count", .dtype = NPY_I64, .ndim = 0, .count = 1, .data = &count},
        {.name = "count", .dtype = NPY_F32, .ndim = 1, .shape = {2}, .count = 2, .data = sum},
    };
    char path[256];
    snprintf(path, sizeof path, "%s/dup.npz", dir);
    esp_err err;
    cr_assert_eq(npz_write(path, arrays, 2, &err), 0, "%s", err.msg);
    npz_file f;
    cr_assert_neq(npz_read(path, &f, &err), 0);
    cr_assert(strstr(err.msg, path) && strstr(err.msg, "a second array named 'count'"), "%s", err.msg);
}
