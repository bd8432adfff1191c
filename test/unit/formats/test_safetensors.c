/* Hostile safetensors files (issue 16; test/fuzz/fuzz_safetensors.c fuzzes the reader): every one
 * is an error naming the file, decided before anything is allocated for a size the file claims. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/formats/safetensors.h"
#include "test/unit/test_util.h"

static char dir[64];

static void setup(void) { test_tmpdir_make(dir, sizeof dir, "st_hostile"); }
static void teardown(void) { test_tmpdir_remove(dir); }
TestSuite(safetensors_hostile, .init = setup, .fini = teardown);

/* u64 header length (hlen_claim, or the header's own length when 0), the header, the data. */
static const char *write_st(const char *name, uint64_t hlen_claim, const char *header, size_t data_len)
{
    const char *path = test_path(dir, name);
    FILE *fp = fopen(path, "wb");
    cr_assert_not_null(fp);
    uint64_t hl = hlen_claim ? hlen_claim : strlen(header);
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)(hl >> (8 * i));
    fwrite(len8, 1, 8, fp);
    fputs(header, fp);
    for (size_t i = 0; i < data_len; i++) fputc((int)(i * 7), fp);
    fclose(fp);
    return path;
}

static void expect_st_error(const char *path, const char *want)
{
    st_file f;
    esp_err err = {{0}};
    cr_assert_neq(st_read(path, &f, &err), 0, "read %s", path);
    cr_assert(strstr(err.msg, path), "the error names the file: %s", err.msg);
    cr_assert(strstr(err.msg, want), "%s", err.msg);
    cr_assert_null(strchr(err.msg, '\n'), "one line: %s", err.msg);
}

/* Two tensors sharing bytes [0, 4) and a gap [4, 8): the sizes add up to the data and the last
 * one ends at its end, which was all that was checked. The Python loader refuses it. */
Test(safetensors_hostile, overlapping_offsets_with_a_gap_are_an_error)
{
    const char *h = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                    "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                    "\"c\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}";
    expect_st_error(write_st("overlap.safetensors", 0, h, 16), "overlapping or gapped data_offsets");
    h = "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
        "\"b\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[2,2]}}";
    expect_st_error(write_st("inside.safetensors", 0, h, 4), "tensor 'b' starts at byte 2");
}

/* Header and data sizes a file claims are checked against its length, never allocated. */
Test(safetensors_hostile, sizes_beyond_the_file_are_errors)
{
    expect_st_error(write_st("hlen.safetensors", UINT64_MAX, "{}", 0), "header length 18446744073709551615");
    expect_st_error(write_st("hlen2.safetensors", 1ull << 40, "{}", 0), "does not fit the file");
    const char *h = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1073741824,4],"
                    "\"data_offsets\":[0,17179869184]}}";
    expect_st_error(write_st("big.safetensors", 0, h, 8), "data ends at byte 17179869184 of 8");
    h = "{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,0]}}";
    expect_st_error(write_st("wrap.safetensors", 0, h, 0), "shape too large");
    h = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    expect_st_error(write_st("short.safetensors", 0, h, 4), "file truncated?");
    h = "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}";
    expect_st_error(write_st("neg.safetensors", 0, h, 8), "non-negative");
}
