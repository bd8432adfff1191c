#include "core/formats/torch_zip.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

#include "core/base/fsio.h"
#include "core/base/hash.h"
#include "core/formats/torch_pickle.h"

enum { PKL_MAX = 32 << 20 }; /* a state dict's pickle is ~100 bytes per tensor (ESPnet models: < 1 MB) */

int pt_is_zip_file(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) return 0;
    unsigned char m[4] = {0};
    size_t got = fread(m, 1, 4, fp);
    fclose(fp);
    return got == 4 && (!memcmp(m, "PK\3\4", 4) || !memcmp(m, "PK\5\6", 4)); /* an entry, or an empty zip */
}

int pt_is_legacy_file(const char *path)
{
    /* pickle PROTO 2, then LONG1 of torch's magic number 0x1950a86a20f9469cfc6c */
    static const unsigned char magic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46,
                                          0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
    FILE *fp = fopen(path, "rb");
    if (!fp) return 0;
    unsigned char m[sizeof magic] = {0};
    size_t got = fread(m, 1, sizeof m, fp);
    fclose(fp);
    return got == sizeof m && !memcmp(m, magic, sizeof m);
}

typedef struct zreader {
    zip_t *za;
    const char *what;
    char prefix[256]; /* "archive/" */
} zreader;

static int zfail(const zreader *z, esp_err *err, const char *entry, const char *what)
{
    return esp_fail(err, "%s: %s%s%s (not a PyTorch checkpoint, or a damaged one)", z->what, entry ? entry : "",
                    entry ? ": " : "", what);
}

/* Reads a whole entry (stored, size checked against limit); NULL with err when absent (if
 * `need`) or broken. *len gets its size. */
static unsigned char *read_entry(const zreader *z, const char *leaf, zip_uint64_t limit, int need, size_t *len,
                                 esp_err *err)
{
    char name[512];
    snprintf(name, sizeof name, "%s%s", z->prefix, leaf);
    zip_int64_t idx = zip_name_locate(z->za, name, 0);
    if (idx < 0) {
        if (need) zfail(z, err, name, "entry missing");
        return NULL;
    }
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(z->za, (zip_uint64_t)idx, 0, &st) != 0 || !(st.valid & ZIP_STAT_SIZE) ||
        !(st.valid & ZIP_STAT_COMP_METHOD)) {
        zfail(z, err, name, "unreadable entry");
        return NULL;
    }
    if (st.comp_method != ZIP_CM_STORE) {
        zfail(z, err, name, "compressed entry (torch.save stores entries uncompressed)");
        return NULL;
    }
    if (st.size > limit) {
        zfail(z, err, name, "entry larger than expected");
        return NULL;
    }
    unsigned char *buf = xmalloc(st.size + 1);
    zip_file_t *zf = zip_fopen_index(z->za, (zip_uint64_t)idx, 0);
    zip_int64_t got = zf ? zip_fread(zf, buf, st.size) : -1;
    if (zf) zip_fclose(zf);
    if (got < 0 || (zip_uint64_t)got != st.size) {
        free(buf);
        zfail(z, err, name, "truncated entry");
        return NULL;
    }
    buf[st.size] = 0;
    *len = (size_t)st.size;
    return buf;
}

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 31, m = h & 1023, bits;
    if (e == 31) bits = sign | 0x7f800000u | (m << 13);
    else if (e) bits = sign | ((e + 112) << 23) | (m << 13);
    else if (!m) bits = sign;
    else { /* subnormal: normalize */
        e = 113;
        while (!(m & 1024)) m <<= 1, e--;
        bits = sign | (e << 23) | ((m & 1023) << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* Element k of the storage as float (floating dtypes) or int64 (integer dtypes). */
static void element(const unsigned char *s, pt_dtype dt, int64_t k, float *f, int64_t *i)
{
    const unsigned char *p = s + (size_t)k * pt_dtype_size(dt);
    uint64_t u = 0;
    for (int b = (int)pt_dtype_size(dt) - 1; b >= 0; b--) u = u << 8 | p[b];
    switch (dt) {
    case PT_F32: { uint32_t w = (uint32_t)u; memcpy(f, &w, 4); break; }
    case PT_F16: *f = half_to_float((uint16_t)u); break;
    case PT_BF16: { uint32_t w = (uint32_t)u << 16; memcpy(f, &w, 4); break; }
    case PT_F64: { double d; memcpy(&d, &u, 8); *f = (float)d; break; }
    case PT_I64: *i = (int64_t)u; break;
    case PT_I32: *i = (int32_t)(uint32_t)u; break;
    }
}

/* Copies view v of storage s (validated) into a contiguous buffer of t's dtype. */
static void *gather(const pt_view *v, const unsigned char *s, int64_t numel, int is_int)
{
    void *out = xmalloc((size_t)numel * (is_int ? 8 : 4) + 1);
    int64_t idx[PT_MAX_DIMS] = {0};
    for (int64_t k = 0; k < numel; k++) {
        int64_t at = v->offset;
        for (int d = 0; d < v->ndim; d++) at += idx[d] * v->stride[d];
        float f = 0;
        int64_t i = 0;
        element(s, v->dtype, at, &f, &i);
        if (is_int) ((int64_t *)out)[k] = i;
        else ((float *)out)[k] = f;
        for (int d = v->ndim - 1; d >= 0; d--) {
            if (++idx[d] < v->shape[d]) break;
            idx[d] = 0;
        }
    }
    return out;
}

typedef struct storage_buf {
    char *key;
    unsigned char *data;
    size_t len;
} storage_buf;

/* An open-addressing table of strings (slot: index into the caller's array, -1 empty), so that a
 * state dict of 100,000 keys is checked and its storages found in linear time. */
typedef struct str_table {
    long *slot;
    size_t mask;
} str_table;

static void str_table_init(str_table *t, size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n + 2) cap *= 2;
    t->slot = xmalloc(cap * sizeof *t->slot);
    t->mask = cap - 1;
    for (size_t j = 0; j < cap; j++) t->slot[j] = -1;
}

/* The index stored for key (keys[index] equals it), or -1 after storing `index` for it. */
static long str_table_get_or_put(str_table *t, char *const *keys, size_t stride, const char *key, long index)
{
    size_t j = fnv1a64_str(key) & t->mask;
    for (; t->slot[j] >= 0; j = (j + 1) & t->mask)
        if (!strcmp(*(char *const *)((const char *)keys + (size_t)t->slot[j] * stride), key)) return t->slot[j];
    t->slot[j] = index;
    return -1;
}

/* Tensors are copied out of their storages (dtype converted, strides applied); views of one
 * storage stay cheap only while few keys share it, so the copies together may take at most this
 * many times the file (f16 to f32 doubles, tied weights add one more) plus 64 MiB: a file of
 * 20,000 keys viewing one 4 MiB storage is refused, not copied 20,000 times. */
enum { PT_COPY_RATIO = 4 };
#define PT_COPY_FREE_BYTES ((uint64_t)64 << 20)

static int load_views(zreader *z, const pt_views *vw, size_t file_len, st_file *out, esp_err *err)
{
    storage_buf *sb = xcalloc(vw->n + 1, sizeof *sb);
    size_t nsb = 0;
    int rc = 0;
    char shown[200];
    str_table names, storages;
    str_table_init(&names, vw->n);
    str_table_init(&storages, vw->n);
    uint64_t copied = 0, budget = (uint64_t)file_len * PT_COPY_RATIO + PT_COPY_FREE_BYTES;
    out->tensors = xcalloc(vw->n + 1, sizeof *out->tensors);
    out->owned = xcalloc(vw->n + 1, sizeof *out->owned);
    for (size_t i = 0; i < vw->n && rc == 0; i++) {
        const pt_view *v = &vw->v[i];
        if (str_table_get_or_put(&names, &vw->v[0].name, sizeof *vw->v, v->name, (long)i) >= 0) {
            rc = esp_fail(err, "%s: state-dict key '%s' appears more than once (a damaged or hand-made checkpoint)",
                          z->what, esp_shown(v->name, shown, sizeof shown));
            break;
        }
        int64_t numel = 1;
        int overflow = 0;
        for (int d = 0; d < v->ndim; d++) overflow |= __builtin_mul_overflow(numel, v->shape[d], &numel);
        if (overflow || numel > (v->storage_numel > 0 ? v->storage_numel : 1) ||
            (uint64_t)v->storage_numel > (uint64_t)file_len / pt_dtype_size(v->dtype)) {
            rc = esp_fail(err, "%s: tensor '%s' has more elements than its storage or the file holds", z->what,
                          v->name);
            break;
        }
        int is_int = v->dtype == PT_I64 || v->dtype == PT_I32;
        if ((copied += (uint64_t)numel * (is_int ? 8 : 4)) > budget) {
            rc = esp_fail(err, "%s: its tensors would take more than %llu bytes, %dx the file's %zu (many keys viewing "
                          "the same storage: refused)", z->what, (unsigned long long)budget, PT_COPY_RATIO, file_len);
            break;
        }
        long k = str_table_get_or_put(&storages, &sb[0].key, sizeof *sb, v->storage, (long)nsb);
        if (k < 0) {
            k = (long)nsb;
            char leaf[300];
            snprintf(leaf, sizeof leaf, "data/%s", v->storage);
            sb[k].key = v->storage;
            nsb++;
            sb[k].data = read_entry(z, leaf, file_len, 1, &sb[k].len, err);
            if (!sb[k].data) {
                rc = -1;
                break;
            }
        }
        if (sb[k].len < (size_t)v->storage_numel * pt_dtype_size(v->dtype)) {
            rc = esp_fail(err, "%s: storage data/%s holds %zu bytes, tensor '%s' needs %lld %s elements", z->what,
                          v->storage, sb[k].len, v->name, (long long)v->storage_numel, pt_dtype_name(v->dtype));
            break;
        }
        st_tensor *t = &out->tensors[out->n++];
        t->name = xstrdup(v->name);
        t->dtype = is_int ? ST_I64 : ST_F32;
        t->ndim = v->ndim;
        for (int d = 0; d < v->ndim; d++) t->shape[d] = v->shape[d];
        out->owned[out->n_owned++] = (void *)(t->data = gather(v, sb[k].data, numel, is_int));
    }
    for (size_t k = 0; k < nsb; k++) free(sb[k].data);
    free(sb);
    free(names.slot);
    free(storages.slot);
    return rc;
}

/* The state dict (scalars NULL) or the whole tree (pt_pickle_tree) of a checkpoint in memory. */
static int read_mem(const void *buf, size_t len, const char *what, st_file *out, pt_scalars *scalars, esp_err *err)
{
    memset(out, 0, sizeof *out);
    out->path = xstrdup(what);
    zip_error_t ze;
    zip_error_init(&ze);
    zip_source_t *src = zip_source_buffer_create(buf, len, 0, &ze);
    zreader z = {.what = what};
    if (src) z.za = zip_open_from_source(src, ZIP_RDONLY | ZIP_CHECKCONS, &ze);
    if (!z.za) {
        int rc = esp_fail(err, "%s: not a readable zip (%s): a truncated or damaged file, or not a PyTorch checkpoint",
                          what, zip_error_strerror(&ze));
        if (src) zip_source_free(src);
        zip_error_fini(&ze);
        st_close(out);
        return rc;
    }
    zip_error_fini(&ze);
    int rc = 0;
    /* torch.save puts every entry in one folder: <archive>/data.pkl */
    zip_int64_t n = zip_get_num_entries(z.za, 0);
    for (zip_int64_t i = 0; i < n && !z.prefix[0]; i++) {
        const char *nm = zip_get_name(z.za, (zip_uint64_t)i, 0);
        const char *sl = nm ? strchr(nm, '/') : NULL;
        if (sl && !strcmp(sl, "/data.pkl") && (size_t)(sl - nm) + 1 < sizeof z.prefix)
            snprintf(z.prefix, sizeof z.prefix, "%.*s", (int)(sl - nm) + 1, nm);
    }
    if (!z.prefix[0]) rc = esp_fail(err, "%s: no <archive>/data.pkl in the zip (not a PyTorch checkpoint)", what);
    size_t bl = 0;
    unsigned char *bo = rc ? NULL : read_entry(&z, "byteorder", 64, 0, &bl, err);
    char shown[40];
    if (bo && strcmp((char *)bo, "little"))
        rc = esp_fail(err, "%s: byteorder '%s' (only little-endian checkpoints are read)", what,
                      esp_shown((char *)bo, shown, sizeof shown));
    free(bo);
    size_t pl = 0;
    unsigned char *pkl = rc ? NULL : read_entry(&z, "data.pkl", PKL_MAX, 1, &pl, err);
    if (!rc && !pkl) rc = -1;
    pt_views vw = {0};
    if (rc == 0)
        rc = scalars ? pt_pickle_tree(pkl, pl, what, &vw, scalars, err) : pt_pickle_state_dict(pkl, pl, what, &vw, err);
    free(pkl);
    if (rc == 0) rc = load_views(&z, &vw, len, out, err);
    pt_views_free(&vw);
    zip_discard(z.za);
    if (rc != 0) {
        st_close(out);
        if (scalars) pt_scalars_free(scalars);
    }
    return rc;
}

int pt_read_mem(const void *buf, size_t len, const char *what, st_file *out, esp_err *err)
{
    return read_mem(buf, len, what, out, NULL, err);
}

int pt_read_tree_mem(const void *buf, size_t len, const char *what, st_file *tensors, pt_scalars *scalars,
                     esp_err *err)
{
    memset(scalars, 0, sizeof *scalars);
    return read_mem(buf, len, what, tensors, scalars, err);
}

static int read_path(const char *path, st_file *out, pt_scalars *scalars, esp_err *err)
{
    size_t len = 0;
    if (scalars) memset(scalars, 0, sizeof *scalars);
    char *buf = read_file(path, READ_MODEL, &len, err);
    if (!buf) return -1;
    int rc = read_mem(buf, len, path, out, scalars, err);
    free(buf);
    return rc;
}

int pt_read(const char *path, st_file *out, esp_err *err)
{
    return read_path(path, out, NULL, err);
}

int pt_read_tree(const char *path, st_file *tensors, pt_scalars *scalars, esp_err *err)
{
    return read_path(path, tensors, scalars, err);
}

/* ---- writing ------------------------------------------------------------------------------- */

static int add_entry(zip_t *za, const char *name, const void *data, size_t len)
{
    zip_source_t *s = zip_source_buffer(za, data, len, 0);
    zip_int64_t idx = s ? zip_file_add(za, name, s, ZIP_FL_ENC_UTF_8) : -1;
    if (idx < 0) {
        if (s) zip_source_free(s);
        return -1;
    }
    /* stored, and a fixed time (1980-01-01) so the same tensors give the same bytes */
    if (zip_set_file_compression(za, (zip_uint64_t)idx, ZIP_CM_STORE, 0) != 0 ||
        zip_file_set_dostime(za, (zip_uint64_t)idx, 0, (0 << 9) | (1 << 5) | 1, 0) != 0)
        return -1;
    return 0;
}

/* A state dict (Lightning's checkpoint dict around it when lightning is set, its names prefixed with
 * "model."), written as torch.save does. */
static int write_pt(const char *path, const st_tensor *tensors, size_t n, int lightning, int64_t epoch,
                    int64_t global_step, esp_err *err)
{
    const char **names = xcalloc(n + 1, sizeof *names);
    pt_dtype *dt = xcalloc(n + 1, sizeof *dt);
    int *nd = xcalloc(n + 1, sizeof *nd);
    int64_t(*shapes)[PT_MAX_DIMS] = xcalloc(n + 1, sizeof *shapes);
    for (size_t i = 0; i < n; i++) {
        const st_tensor *t = &tensors[i];
        ESP_CHECK((t->dtype == ST_F32 || t->dtype == ST_F64 || t->dtype == ST_I64) && t->ndim <= PT_MAX_DIMS);
        names[i] = lightning ? xasprintf("model.%s", t->name) : t->name, nd[i] = t->ndim;
        dt[i] = t->dtype == ST_I64 ? PT_I64 : t->dtype == ST_F64 ? PT_F64 : PT_F32;
        for (int d = 0; d < t->ndim; d++) shapes[i][d] = t->shape[d];
    }
    size_t pl;
    unsigned char *pkl = lightning ? pt_pickle_write_lightning(names, dt, nd, (const int64_t(*)[PT_MAX_DIMS])shapes, n,
                                                               epoch, global_step, &pl)
                                   : pt_pickle_write(names, dt, nd, (const int64_t(*)[PT_MAX_DIMS])shapes, n, &pl);
    zip_error_t ze;
    zip_error_init(&ze);
    zip_source_t *src = zip_source_buffer_create(NULL, 0, 0, &ze);
    zip_t *za = NULL;
    int rc = 0;
    if (src) {
        zip_source_keep(src);
        za = zip_open_from_source(src, ZIP_TRUNCATE, &ze);
    }
    if (!za) rc = esp_fail(err, "%s: cannot start a zip in memory (%s)", path, zip_error_strerror(&ze));
    static const char little[] = "little", version[] = "3\n", fmt[] = "1", align[] = "64";
    int zrc = rc ? 0
                 : add_entry(za, "archive/data.pkl", pkl, pl) | add_entry(za, "archive/.format_version", fmt, 1) |
                       add_entry(za, "archive/.storage_alignment", align, 2) |
                       add_entry(za, "archive/byteorder", little, sizeof little - 1);
    for (size_t i = 0; i < n && rc == 0 && zrc == 0; i++) {
        char name[64];
        snprintf(name, sizeof name, "archive/data/%zu", i);
        zrc = add_entry(za, name, tensors[i].data, st_nbytes(&tensors[i]));
    }
    if (rc == 0 && zrc == 0) zrc = add_entry(za, "archive/version", version, sizeof version - 1);
    if (rc == 0 && zrc == 0 && zip_close(za) != 0) zrc = -1;
    if (rc == 0 && zrc != 0) {
        rc = esp_fail(err, "%s: writing the zip failed (%s)", path, zip_strerror(za));
        zip_discard(za);
    }
    zip_int64_t size = -1;
    unsigned char *bytes = NULL;
    if (rc == 0 && zip_source_open(src) == 0) {
        if (zip_source_seek(src, 0, SEEK_END) == 0) size = zip_source_tell(src);
        if (size >= 0 && zip_source_seek(src, 0, SEEK_SET) == 0) {
            bytes = xmalloc((size_t)size + 1);
            if (zip_source_read(src, bytes, (zip_uint64_t)size) != size) size = -1;
        }
        zip_source_close(src);
    }
    if (rc == 0 && size < 0) rc = esp_fail(err, "%s: reading back the zip written in memory failed", path);
    if (rc == 0) rc = atomic_write_file(path, bytes, (size_t)size, err);
    if (src) zip_source_free(src);
    zip_error_fini(&ze);
    if (lightning)
        for (size_t i = 0; i < n; i++) free((char *)names[i]);
    free(bytes), free(pkl), free(names), free(dt), free(nd), free(shapes);
    return rc;
}

int pt_write(const char *path, const st_tensor *tensors, size_t n, esp_err *err)
{
    return write_pt(path, tensors, n, 0, 0, 0, err);
}

int pt_write_lightning(const char *path, const st_tensor *tensors, size_t n, int64_t epoch, int64_t global_step,
                       esp_err *err)
{
    return write_pt(path, tensors, n, 1, epoch, global_step, err);
}
