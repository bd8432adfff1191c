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

/* Stat of entry i; 0 when its name and both sizes are known. */
static int entry_stat(zip_t *za, zip_int64_t i, zip_stat_t *st)
{
    zip_stat_init(st);
    return zip_stat_index(za, (zip_uint64_t)i, 0, st) == 0 && (st->valid & ZIP_STAT_NAME) &&
                   (st->valid & ZIP_STAT_SIZE) && (st->valid & ZIP_STAT_COMP_SIZE)
               ? 0
               : -1;
}

/* Copies entry i to out in chunks (never an allocation of the size it declares); libzip stops at
 * the declared size and checks the CRC at the end. */
static int copy_entry(zip_t *za, zip_int64_t i, const zip_stat_t *st, const char *zip_path, const char *out,
                      esp_err *err)
{
    char shown[200];
    atomic_file af;
    if (atomic_open(&af, out, err) != 0) return -1;
    zip_file_t *zf = zip_fopen_index(za, (zip_uint64_t)i, 0);
    enum { CHUNK = 1 << 20 };
    unsigned char *buf = xmalloc(CHUNK);
    uint64_t done = 0;
    int ok = zf != NULL;
    while (ok && done < st->size) {
        zip_int64_t got = zip_fread(zf, buf, CHUNK);
        if (got <= 0 || fwrite(buf, 1, (size_t)got, af.fp) != (size_t)got) ok = 0;
        else done += (uint64_t)got;
    }
    free(buf);
    if (zf) zip_fclose(zf);
    if (!ok || done != st->size) {
        atomic_abort(&af);
        return esp_fail(err, "%s: entry '%s': truncated or damaged", zip_path, esp_shown(st->name, shown, sizeof shown));
    }
    return atomic_commit(&af, err);
}

int zip_unpack(const char *zip_path, const char *dest, uint64_t max_bytes, esp_err *err)
{
    zip_t *za = open_zip(zip_path, err);
    if (!za) return -1;
    int rc = 0;
    zip_int64_t n = zip_get_num_entries(za, 0);
    uint64_t total = 0, packed = 0;
    char shown[200];
    if (n > ZIP_UNPACK_MAX_ENTRIES)
        rc = esp_fail(err, "%s: %lld entries, more than the %d a packed model may hold (refused)", zip_path,
                      (long long)n, ZIP_UNPACK_MAX_ENTRIES);
    /* Everything is checked from the central directory before a byte is written. */
    for (zip_int64_t i = 0; i < n && rc == 0; i++) {
        zip_stat_t st;
        if (entry_stat(za, i, &st) != 0)
            rc = esp_fail(err, "%s: entry %lld: unreadable", zip_path, (long long)i);
        else if (!safe_name(st.name))
            rc = esp_fail(err, "%s: entry '%s': not a plain relative path (refused)", zip_path,
                          esp_shown(st.name, shown, sizeof shown));
        else if (st.size > st.comp_size * ZIP_UNPACK_MAX_RATIO + 4096 || st.comp_size > ((uint64_t)1 << 62))
            rc = esp_fail(err, "%s: entry '%s' declares %llu bytes from %llu compressed (more than %dx: a zip bomb or a "
                          "damaged zip; refused)", zip_path, esp_shown(st.name, shown, sizeof shown),
                          (unsigned long long)st.size, (unsigned long long)st.comp_size, ZIP_UNPACK_MAX_RATIO);
        else if ((total += st.size) > max_bytes || total < st.size)
            rc = esp_fail(err, "%s: entries larger than %llu bytes in all (refused)", zip_path,
                          (unsigned long long)max_bytes);
        else
            packed += st.comp_size;
    }
    if (rc == 0 && total > ZIP_UNPACK_FREE_BYTES && total / ZIP_UNPACK_MAX_RATIO > packed)
        rc = esp_fail(err, "%s: entries unpack to %llu bytes from %llu compressed (more than %dx in all: a zip bomb; "
                      "refused)", zip_path, (unsigned long long)total, (unsigned long long)packed,
                      ZIP_UNPACK_MAX_RATIO);
    for (zip_int64_t i = 0; i < n && rc == 0; i++) {
        zip_stat_t st;
        entry_stat(za, i, &st);
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
        if (rc == 0) rc = copy_entry(za, i, &st, zip_path, out, err);
        free(out);
    }
    zip_discard(za);
    return rc;
}
