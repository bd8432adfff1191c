/* The manual's examples run: every fenced block marked `sh run` in README.md and the docs/ pages is run
 * with bash (-e -o pipefail) in a scratch copy of the repository's recipes/ and conf/, with the
 * binary under test as ./espnet3 and on PATH as espnet3; each must exit 0. So a renamed option, key
 * or file in the code cannot leave the manual behind. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test/unit/test_util.h"

/* Runs the `sh run` blocks of one markdown file; returns how many ran. */
static int run_blocks(const char *md, const char *scratch)
{
    char *text = test_slurp(md);
    int n = 0, line = 0;
    char *block = NULL;
    size_t blen = 0;
    FILE *acc = NULL;
    int start = 0;
    for (char *p = text, *nl; *p; p = nl + 1) {
        nl = strchr(p, '\n');
        if (!nl) nl = p + strlen(p) - 1;
        line++;
        size_t len = (size_t)(nl - p) + (*nl == '\n' ? 0 : 1);
        if (!acc && len == 9 && !strncmp(p, "```sh run", 9)) {
            acc = open_memstream(&block, &blen);
            start = line;
        } else if (acc && len == 3 && !strncmp(p, "```", 3)) {
            fclose(acc);
            acc = NULL;
            char script[512];
            snprintf(script, sizeof script, "%s/block.sh", scratch);
            FILE *fp = fopen(script, "w");
            cr_assert_not_null(fp);
            fputs(block, fp);
            fclose(fp);
            int rc = test_sh("cd '%s' && PATH='%s':\"$PATH\" bash -e -o pipefail block.sh >block.log 2>&1", scratch,
                             scratch);
            char *log = rc ? test_slurp(test_path(scratch, "block.log")) : NULL;
            cr_expect_eq(rc, 0, "%s:%d: the example exits %d:\n%s\n--\n%s", md, start, rc, block, log ? log : "");
            free(log);
            free(block);
            block = NULL;
            n++;
        } else if (acc) {
            fwrite(p, 1, len, acc);
            fputc('\n', acc);
        }
        if (*nl != '\n') break;
    }
    cr_assert_null(acc, "%s:%d: an unclosed `sh run` block", md, start);
    free(text);
    return n;
}

Test(docs, examples_marked_sh_run_run)
{
    char scratch[64];
    test_tmpdir_make(scratch, sizeof scratch, "docs");
    cr_assert_eq(test_sh("cp -r '%s/recipes' '%s/conf' '%s/' && ln -s '%s' '%s/espnet3'", test_root_dir(), test_root_dir(),
                         scratch, test_bin_path(), scratch),
                 0);
    char path[512];
    snprintf(path, sizeof path, "%s/README.md", test_root_dir());
    int n = run_blocks(path, scratch);
    snprintf(path, sizeof path, "%s/docs", test_root_dir());
    DIR *d = opendir(path);
    cr_assert_not_null(d, "no docs/ folder");
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l < 4 || strcmp(e->d_name + l - 3, ".md")) continue;
        char md[768];
        snprintf(md, sizeof md, "%s/%s", path, e->d_name);
        n += run_blocks(md, scratch);
    }
    closedir(d);
    cr_assert_geq(n, 2, "only %d runnable examples found", n);
    test_tmpdir_remove(scratch);
}
