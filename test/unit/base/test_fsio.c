/* Files on disk (core/base/fsio.h) as a careless user leaves them: a folder where a file is to be
 * written, a device or FIFO where one is to be read. Messages say what is wrong; nothing is left
 * half written. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/base/fsio.h"
#include "test/unit/test_util.h"

static char dir[256];

static void setup(void) { test_tmpdir_make(dir, sizeof dir, "fsio"); }
static void teardown(void) { test_tmpdir_remove(dir); }

TestSuite(fsio, .init = setup, .fini = teardown);

static int entries(const char *d)
{
    DIR *dp = opendir(d);
    cr_assert_not_null(dp);
    int n = 0;
    for (struct dirent *e; (e = readdir(dp));) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(dp);
    return n;
}

Test(fsio, a_folder_in_the_way_is_named_not_blamed_on_disk_space)
{
    char *target = path_join(dir, "hyp.scp");
    cr_assert_eq(mkdir(target, 0755), 0);
    char *inside = path_join(target, "keep.txt");
    test_write_text(inside, "mine\n");
    esp_err err;
    cr_assert_neq(atomic_write_file(target, "a 1\n", 4, &err), 0);
    cr_expect(strstr(err.msg, "hyp.scp: cannot put the file in place: ") &&
                  strstr(err.msg, "(a folder has that name; move it away)"), "%s", err.msg);
    cr_expect_null(strstr(err.msg, "disk space"), "%s", err.msg);
    cr_expect(test_exists(inside), "the folder's file was lost");
    cr_expect_eq(entries(dir), 1, "the temporary file was left beside it");
    free(target), free(inside);
}

Test(fsio, only_regular_files_are_read)
{
    esp_err err;
    size_t len;
    const char *const specials[] = {"/dev/zero", "/dev/null", dir};
    for (size_t i = 0; i < sizeof specials / sizeof *specials; i++) {
        cr_assert_null(read_file(specials[i], READ_LIST, &len, &err), "%s was read", specials[i]);
        cr_expect(strstr(err.msg, "not a regular file"), "%s: %s", specials[i], err.msg);
    }
    char *fifo = path_join(dir, "config.yaml");
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    cr_assert_null(read_file(fifo, READ_LIST, &len, &err), "a FIFO was read"); /* returns: no writer is waited for */
    cr_expect(strstr(err.msg, "config.yaml: not a regular file"), "%s", err.msg);
    free(fifo);
}

/* A file over its kind's size (a sparse one here: nothing is written or read) is refused before a
 * byte is read, naming its size and the kind's limit; the same file is fine as a larger kind; and
 * the binary says so for a config in one line. */
Test(fsio, a_file_over_its_kinds_size_is_not_read)
{
    char *big = path_join(dir, "config.yaml");
    FILE *fp = fopen(big, "w");
    cr_assert_not_null(fp);
    cr_assert_eq(ftruncate(fileno(fp), (off_t)(64 << 20) + 1), 0);
    fclose(fp);
    esp_err err;
    size_t len;
    cr_assert_null(read_file(big, READ_SMALL, &len, &err));
    cr_expect(strstr(err.msg, "config.yaml: 67108865 bytes, more than a config, template or state file may hold here "
                              "(64 MiB); not read"), "%s", err.msg);
    char *small = path_join(dir, "small.yaml");
    test_write_text(small, "a: 1\n");
    char *text = read_file(small, READ_SMALL, &len, &err);
    cr_assert_not_null(text, "%s", err.msg);
    cr_expect(len == 5 && !strcmp(text, "a: 1\n"));
    free(text);
    cr_assert_eq(test_sh("cd '%s' && '%s' --config config.yaml --dry_run >out 2>err", dir, test_bin_path()), 1);
    char *out = test_slurp(test_path(dir, "err"));
    cr_expect(strstr(out, "espnet3: error: ") && strstr(out, "config.yaml: 67108865 bytes, more than a config") &&
                  strchr(out, '\n') == out + strlen(out) - 1, "%s", out);
    free(out), free(big), free(small);
}
