#include "core/formats/zip_unpack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

#include "core/base/fsio.h"

static zip_t *open_zip(const char *path, esp_err *err)
{
    int code = 0;
    zip_t *za = zip_open(path, ZIP_RDONLY | ZIP_CHECKCONS, &code);
    if (!za) {
        zip_error_t ze;
        zip_error_init_with_code(&ze, code);
        esp_fail(err, "%s: not a readable zip (%s)", path, zip_error_strerror(&ze));
        zip_error_fini(&ze);
    }
    return za;
}

int zip_has_entry(const char *zip_path, const char *name, esp_err *err)
{
    zip_t *za = open_zip(zip_path, err);
    if (!za) return -1;
    int has = zip_name_locate(za, name, 0) >= 0;
    zip_discard(za);
    return has;
}

/* A relative path of plain components: no leading '/', no "", "." or ".." component, no '\\'. */
static int safe_name(const char *n)
{
    if (!*n || *n == '/' || strchr(n, '\\')) return 0;
    for (const char *p = n; *p;) {
        const char *e = strchr(p, '/');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (!e && len == 0) break; /* a folder entry's trailing '/' */
        if (len == 0 || (len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.')) return 0;
        p += len + (e ? 1 : 0);
    }
    return 1;
}

int zip_unpack(const char *zip_path, const char *dest, uint64_t max_bytes, esp_err *err)
{
    zip_t *za = open_zip(zip_path, err);
    if (!za) return -1;
    int rc = 0;
    zip_int64_t n = zip_get_num_entries(za, 0);
    uint64_t total = 0;
    char shown[200];
    for (zip_int64_t i = 0; i < n && rc == 0; i++) {
        zip_stat_t st;
        zip_stat_init(&st);
        if (zip_stat_index(za, (zip_uint64_t)i, 0, &st) != 0 || !(st.valid & ZIP_STAT_NAME) ||
            !(st.valid & ZIP_STAT_SIZE))
            rc = esp_fail(err, "%s: entry %lld: unreadable", zip_path, (long long)i);
        else if (!safe_name(st.name))
            rc = esp_fail(err, "%s: entry '%s': not a plain relative path (refused)", zip_path,
                          esp_shown(st.name, shown, sizeof shown));
        else if ((total += st.size) > max_bytes || total < st.size)
            rc = esp_fail(err, "%s: entries larger than %llu bytes in all (refused)", zip_path,
                          (unsigned long long)max_bytes);
    }
    for (zip_int64_t i = 0; i < n && rc == 0; i++) {
        zip_stat_t st;
        zip_stat_init(&st);
        zip_stat_index(za, (zip_uint64_t)i, 0, &st);
        char *out = xasprintf("%s/%s", dest, st.name);
        size_t len = strlen(st.name);
        if (st.name[len - 1] == '/') {
            rc = mkdir_p(out, err);
            free(out);
            continue;
        }
        char *dir = path_dirname(out);
        rc = mkdir_p(dir, err);
        free(dir);
        unsigned char *buf = rc ? NULL : xmalloc(st.size + 1);
        zip_file_t *zf = rc ? NULL : zip_fopen_index(za, (zip_uint64_t)i, 0);
        zip_int64_t got = zf ? zip_fread(zf, buf, st.size) : -1;
        if (zf) zip_fclose(zf);
        if (rc == 0 && (got < 0 || (zip_uint64_t)got != st.size))
            rc = esp_fail(err, "%s: entry '%s': truncated or damaged", zip_path, esp_shown(st.name, shown, sizeof shown));
        if (rc == 0) rc = atomic_write_file(out, buf, st.size, err);
        free(buf);
        free(out);
    }
    zip_discard(za);
    return rc;
}
