#include "core/base/fsio.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int atomic_open(atomic_file *af, const char *path, esp_err *err)
{
    af->path = xstrdup(path);
    af->tmp_path = xasprintf("%s.tmp.%ld", path, (long)getpid());
    af->fp = fopen(af->tmp_path, "wb");
    if (!af->fp) {
        int e = errno;
        free(af->path);
        free(af->tmp_path);
        af->path = af->tmp_path = NULL;
        return esp_fail(err, "%s: cannot write: %s (check the directory exists and is writable)", path,
                        strerror(e));
    }
    return 0;
}

static void fsync_dir_of(const char *path)
{
    char *dir = path_dirname(path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
    free(dir);
}

int atomic_commit(atomic_file *af, esp_err *err)
{
    ESP_CHECK(af->fp != NULL);
    int failed = fflush(af->fp) != 0 || fsync(fileno(af->fp)) != 0;
    int e = errno;
    if (fclose(af->fp) != 0 && !failed) {
        failed = 1;
        e = errno;
    }
    af->fp = NULL;
    if (failed) {
        unlink(af->tmp_path);
        esp_fail(err, "%s: write failed: %s (check free disk space)", af->path, strerror(e));
    } else if (rename(af->tmp_path, af->path) != 0) { /* written, but the name is taken */
        failed = 1;
        e = errno;
        unlink(af->tmp_path);
        esp_fail(err, "%s: cannot put the file in place: %s (%s)", af->path, strerror(e),
                 e == EISDIR || e == ENOTEMPTY || e == EEXIST ? "a folder has that name; move it away"
                                                              : "check the folder's permissions");
    } else {
        fsync_dir_of(af->path);
    }
    free(af->path);
    free(af->tmp_path);
    af->path = af->tmp_path = NULL;
    return failed ? -1 : 0;
}

void atomic_abort(atomic_file *af)
{
    if (af->fp) fclose(af->fp);
    if (af->tmp_path) unlink(af->tmp_path);
    free(af->path);
    free(af->tmp_path);
    af->fp = NULL;
    af->path = af->tmp_path = NULL;
}

int atomic_write_file(const char *path, const void *data, size_t len, esp_err *err)
{
    atomic_file af;
    if (atomic_open(&af, path, err) != 0) return -1;
    if (len && fwrite(data, 1, len, af.fp) != len) {
        int e = errno;
        atomic_abort(&af);
        return esp_fail(err, "%s: write failed: %s", path, strerror(e));
    }
    return atomic_commit(&af, err);
}

int mkdir_p(const char *path, esp_err *err)
{
    char *buf = xstrdup(path);
    size_t n = strlen(buf);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        char saved = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST) {
            int e = errno;
            esp_fail(err, "%s: cannot create directory: %s", buf, strerror(e));
            free(buf);
            return -1;
        }
        buf[i] = saved;
    }
    int ok = is_dir(path);
    free(buf);
    if (!ok) return esp_fail(err, "%s: exists and is not a directory", path);
    return 0;
}

/* The most a whole-file read of each kind takes: far above what a real file holds, far below what
 * a file sent by someone else could make espnet3 allocate. */
static const struct {
    const char *what;
    unsigned long long max;
} read_limits[] = {
    [READ_SMALL] = {"a config, template or state file", 64ULL << 20},
    [READ_LIST] = {"a list, manifest, text or audio file", 16ULL << 30},
    [READ_MODEL] = {"a model or array file", 1ULL << 40},
};

char *read_file(const char *path, read_kind kind, size_t *len_out, esp_err *err)
{
    /* Only a regular file is read: /dev/zero, /dev/urandom or a FIFO named where a file from
     * elsewhere is expected would be read until memory runs out (or hang: O_NONBLOCK). */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        esp_fail(err, "%s: cannot read: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        esp_fail(err, "%s: not a regular file (espnet3 reads files, not devices, FIFOs or folders)", path);
        return NULL;
    }
    ESP_CHECK((unsigned)kind < sizeof read_limits / sizeof *read_limits);
    unsigned long long max = read_limits[kind].max;
    if ((unsigned long long)st.st_size > max) {
        close(fd);
        esp_fail(err, "%s: %lld bytes, more than %s may hold here (%llu MiB); not read", path, (long long)st.st_size,
                 read_limits[kind].what, max >> 20);
        return NULL;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    FILE *fp = fdopen(fd, "rb");
    if (!fp) {
        close(fd);
        esp_fail(err, "%s: cannot read: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, len = 0;
    char *buf = xmalloc(cap);
    for (;;) {
        if (len + 1 >= cap) buf = xrealloc(buf, cap *= 2);
        size_t got = fread(buf + len, 1, cap - len - 1, fp);
        len += got;
        if (got == 0 || len > max) break; /* a file that grows while it is read stops at the limit */
    }
    int bad = ferror(fp);
    fclose(fp);
    if (bad || len > max) {
        free(buf);
        if (bad) esp_fail(err, "%s: read error", path);
        else esp_fail(err, "%s: grew past %llu MiB while it was read (%s); not read", path, max >> 20, read_limits[kind].what);
        return NULL;
    }
    buf[len] = '\0';
    if (len_out) *len_out = len;
    return buf;
}

int path_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

char *path_dirname(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return xstrdup(".");
    if (slash == path) return xstrdup("/");
    return xstrndup(path, (size_t)(slash - path));
}

char *path_stem(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    return dot && dot != base ? xstrndup(base, (size_t)(dot - base)) : xstrdup(base);
}

char *path_join(const char *a, const char *b)
{
    if (b[0] == '/' || a[0] == '\0') return xstrdup(b);
    size_t n = strlen(a);
    return xasprintf("%s%s%s", a, a[n - 1] == '/' ? "" : "/", b);
}

int which(const char *prog)
{
    const char *path = getenv("PATH");
    if (!path) return 0;
    char *copy = xstrdup(path), *save = NULL;
    int found = 0;
    for (char *dir = strtok_r(copy, ":", &save); dir && !found; dir = strtok_r(NULL, ":", &save)) {
        char *full = path_join(dir[0] ? dir : ".", prog);
        found = access(full, X_OK) == 0 && !is_dir(full);
        free(full);
    }
    free(copy);
    return found;
}

char *path_normalize(const char *path)
{
    /* Lexical clean-up: "a/./b" -> "a/b", "a/b/../c" -> "a/c"; leading ".." are kept. */
    int absolute = path[0] == '/';
    char *copy = xstrdup(path), *save = NULL;
    const char **parts = xcalloc(strlen(path) + 1, sizeof *parts);
    size_t n = 0;
    for (char *p = strtok_r(copy, "/", &save); p; p = strtok_r(NULL, "/", &save)) {
        if (!strcmp(p, ".")) continue;
        if (!strcmp(p, "..") && n > 0 && strcmp(parts[n - 1], "..")) {
            n--;
            continue;
        }
        if (!strcmp(p, "..") && absolute) continue;
        parts[n++] = p;
    }
    size_t cap = strlen(path) + 3, used = 0;
    char *out = xmalloc(cap);
    out[0] = '\0';
    if (absolute) out[used++] = '/', out[used] = '\0';
    for (size_t i = 0; i < n; i++) used += (size_t)snprintf(out + used, cap - used, "%s%s", i ? "/" : "", parts[i]);
    if (!used) snprintf(out, cap, ".");
    free(parts);
    free(copy);
    return out;
}

char *path_absolute(const char *path)
{
    if (path[0] == '/') return path_normalize(path);
    char cwd[4096];
    if (!getcwd(cwd, sizeof cwd)) return path_normalize(path);
    char *joined = path_join(cwd, path);
    char *out = path_normalize(joined);
    free(joined);
    return out;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

void remove_tree(const char *path) { nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS); }

int for_each_line(char *buf, line_fn fn, void *ctx, esp_err *err)
{
    size_t lineno = 0;
    for (char *line = buf; *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        lineno++;
        size_t len = strlen(line);
        if (len && line[len - 1] == '\r') line[len - 1] = '\0';
        int rc = fn(ctx, line, lineno, err);
        if (rc != 0) return rc;
        if (!nl) break;
        line = nl + 1;
    }
    return 0;
}
