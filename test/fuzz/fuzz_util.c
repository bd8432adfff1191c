/* Scratch files of the reader fuzz targets; see fuzz_util.h. */
#include "test/fuzz/fuzz_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/base/fsio.h"
#include "core/base/log.h"

static char scratch[512];

static void remove_scratch(void)
{
    if (scratch[0]) remove_tree(scratch);
}

const char *fuzz_scratch(const char *tag)
{
    if (scratch[0]) return scratch;
    const char *bases[] = {getenv("FUZZ_TMPDIR"), "/dev/shm", getenv("TMPDIR"), "/tmp"};
    for (size_t i = 0; i < sizeof bases / sizeof *bases && !scratch[0]; i++) {
        struct stat st;
        if (!bases[i] || !bases[i][0] || stat(bases[i], &st) != 0 || !S_ISDIR(st.st_mode) ||
            access(bases[i], W_OK) != 0)
            continue;
        snprintf(scratch, sizeof scratch, "%s/espnet3_fuzz_%s_XXXXXX", bases[i], tag);
        if (!mkdtemp(scratch)) scratch[0] = '\0';
    }
    if (!scratch[0]) {
        fprintf(stderr, "fuzz: cannot create a scratch folder\n");
        abort();
    }
    atexit(remove_scratch);
    log_set_quiet(1); /* warnings still go to stderr: fuzz.mk runs with -close_fd_mask=2 */
    return scratch;
}

const char *fuzz_path(const char *rel)
{
    static char bufs[8][1024];
    static unsigned next;
    char *b = bufs[next++ % 8];
    snprintf(b, sizeof bufs[0], "%s/%s", scratch, rel);
    return b;
}

const char *fuzz_write(const char *rel, const void *data, size_t size)
{
    const char *path = fuzz_path(rel);
    FILE *fp = fopen(path, "wb");
    if (!fp || (size && fwrite(data, 1, size, fp) != size) || fclose(fp) != 0) {
        fprintf(stderr, "fuzz: cannot write %s\n", path);
        abort();
    }
    return path;
}

const uint8_t *fuzz_next_part(const uint8_t **p, const uint8_t *end, size_t *len)
{
    if (!*p) return NULL;
    const uint8_t *start = *p;
    const uint8_t *sep = memchr(start, FUZZ_SEP, (size_t)(end - start));
    *len = (size_t)((sep ? sep : end) - start);
    *p = sep ? sep + 1 : NULL;
    return start;
}

void fuzz_clear(void)
{
    remove_tree(scratch);
    if (mkdir(scratch, 0700) != 0) {
        fprintf(stderr, "fuzz: cannot recreate %s\n", scratch);
        abort();
    }
}
