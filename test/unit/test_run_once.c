/* test_sh_once: a fixture command that many tests run alike (the tiny recipe's stages 1-3 in the
 * setup of every training suite, ~1.6 s of espeak-ng each) runs once per run of the test binary
 * in a folder the runner shares (made by PRE_ALL, removed by POST_ALL), and each test gets a copy
 * of what it wrote: the bytes the command would have written in the test's own folder. */
#include "test/unit/test_util.h"

#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "core/base/fsio.h"
#include "core/base/hash.h"

#define RUN_CACHE_ENV "ESPNET3_TEST_RUN_CACHE"

/* In the runner, before any test's process starts: the tests inherit the folder's name. */
ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
    (void)set;
    static char cache[64] = "/tmp/espnet3_runcache_XXXXXX";
    if (mkdtemp(cache)) setenv(RUN_CACHE_ENV, cache, 1);
}

ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
    (void)stats;
    const char *cache = getenv(RUN_CACHE_ENV);
    if (cache && *cache) remove_tree(cache);
}

/* s with every `from` replaced by `to` into out (cap bytes); fails the test when it does not fit. */
static void replace_all(char *out, size_t cap, const char *s, const char *from, const char *to)
{
    size_t n = 0, lf = strlen(from), lt = strlen(to);
    for (const char *at; (at = strstr(s, from)); s = at + lf) {
        cr_assert((size_t)(at - s) + lt + n < cap, "command too long: %.200s...", s);
        memcpy(out + n, s, (size_t)(at - s)), n += (size_t)(at - s);
        memcpy(out + n, to, lt), n += lt;
    }
    cr_assert(strlen(s) + n < cap, "command too long: %.200s...", s);
    strcpy(out + n, s);
}

int test_sh_once(const char *dir, const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    test_vformat_command(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    const char *cache = getenv(RUN_CACHE_ENV);
    if (!cache || !*cache) return test_sh("%s", cmd);

    /* The command's key is its text with the test's folder left out. */
    char shared[256], key_cmd[8192], run_cmd[8192];
    replace_all(key_cmd, sizeof key_cmd, cmd, dir, "\x01");
    snprintf(shared, sizeof shared, "%s/%016llx", cache,
             (unsigned long long)fnv1a64_bytes(FNV1A64_INIT, key_cmd, strlen(key_cmd)));
    replace_all(run_cmd, sizeof run_cmd, cmd, dir, shared);

    /* One test runs it while the others that need it wait; a failed run is not kept. */
    char lock_path[300], done_path[300];
    snprintf(lock_path, sizeof lock_path, "%s.lock", shared);
    snprintf(done_path, sizeof done_path, "%s.done", shared);
    int fd = open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    cr_assert(fd >= 0 && flock(fd, LOCK_EX) == 0, "cannot lock %s", lock_path);
    int rc = 0;
    if (!test_exists(done_path)) {
        test_sh("rm -rf '%s' && mkdir -p '%s'", shared, shared);
        rc = test_sh("%s", run_cmd);
    }
    /* The copy, with the shared folder's name in the text files written as the test's. */
    int copied = test_sh("cp -a '%s/.' '%s/' && { grep -rlIF -e '%s' '%s' | xargs -r sed -i 's|%s|%s|g'; }", shared,
                         dir, shared, dir, shared, dir);
    if (rc == 0) test_write_text(done_path, "");
    flock(fd, LOCK_UN);
    close(fd);
    cr_assert_eq(copied, 0, "could not copy %s into %s", shared, dir);
    return rc;
}
