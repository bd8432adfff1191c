#include "core/formats/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/base/fsio.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c writes host memory as little-endian data"
#endif

/* The Python library refuses headers over 100 MB; so do we, before allocating anything. */
#define ST_MAX_HEADER (100u * 1000 * 1000)

/* Indexed by st_dtype, which follows the Rust crate's Dtype order (its layout sorts by it). */
static const struct {
    const char *name;
    size_t size;
} dtypes[ST_NDTYPES] = {
    [ST_BOOL] = {"BOOL", 1}, [ST_U8] = {"U8", 1},     [ST_I8] = {"I8", 1},     [ST_I16] = {"I16", 2},
    [ST_U16] = {"U16", 2},   [ST_F16] = {"F16", 2},   [ST_BF16] = {"BF16", 2}, [ST_I32] = {"I32", 4},
    [ST_U32] = {"U32", 4},   [ST_F32] = {"F32", 4},   [ST_F64] = {"F64", 8},   [ST_I64] = {"I64", 8},
    [ST_U64] = {"U64", 8},
};

size_t st_dtype_size(st_dtype t)
{
    ESP_CHECK((unsigned)t < ST_NDTYPES);
    return dtypes[t].size;
}

const char *st_dtype_name(st_dtype t)
{
    ESP_CHECK((unsigned)t < ST_NDTYPES);
    return dtypes[t].name;
}

int64_t st_numel(const st_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

size_t st_nbytes(const st_tensor *t) { return (size_t)st_numel(t) * st_dtype_size(t->dtype); }

/* ---- writing ------------------------------------------------------------------------- */

/* The Python library's layout: widest dtype first (Dtype order, descending), then by name. */
static int layout_cmp(const void *a, const void *b, void *base)
{
    const st_tensor *t = base, *x = &t[*(const size_t *)a], *y = &t[*(const size_t *)b];
    if (x->dtype != y->dtype) return x->dtype > y->dtype ? -1 : 1;
    return strcmp(x->name, y->name);
}

static char *encode_header(const st_tensor *t, const size_t *order, size_t n, const st_kv *meta,
                           size_t n_meta, size_t *len_out)
{
    json_t *root = json_object();
    int bad = 0; /* jansson refuses strings that are not UTF-8 */
    if (n_meta) {
        json_t *m = json_object();
        for (size_t i = 0; i < n_meta; i++) bad |= json_object_set_new(m, meta[i].key, json_string(meta[i].value));
        json_object_set_new(root, "__metadata__", m);
    }
    size_t off = 0;
    for (size_t k = 0; k < n; k++) {
        const st_tensor *x = &t[order[k]];
        json_t *shape = json_array();
        for (int d = 0; d < x->ndim; d++) json_array_append_new(shape, json_integer(x->shape[d]));
        size_t end = off + st_nbytes(x);
        json_t *info = json_object();
        json_object_set_new(info, "dtype", json_string(st_dtype_name(x->dtype)));
        json_object_set_new(info, "shape", shape);
        json_object_set_new(info, "data_offsets", json_pack("[II]", (json_int_t)off, (json_int_t)end));
        bad |= json_object_set_new(root, x->name, info);
        off = end;
    }
    if (bad) {
        json_decref(root);
        return NULL;
    }
    /* Compact and in insertion order, byte for byte what the Rust serializer emits. */
    char *text = json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(root);
    ESP_CHECK(text != NULL);
    size_t len = strlen(text);
    size_t padded = (len + 7) / 8 * 8;
    char *buf = xmalloc(padded);
    memcpy(buf, text, len);
    memset(buf + len, ' ', padded - len);
    free(text);
    *len_out = padded;
    return buf;
}

int st_write(const char *path, const st_tensor *tensors, size_t n, const st_kv *meta, size_t n_meta,
             esp_err *err)
{
    for (size_t i = 0; i < n; i++) {
        const st_tensor *x = &tensors[i];
        ESP_CHECK((unsigned)x->dtype < ST_NDTYPES && x->ndim >= 0 && x->ndim <= ST_MAX_DIMS);
        ESP_CHECK(x->name && (x->data || st_nbytes(x) == 0));
        if (strcmp(x->name, "__metadata__") == 0)
            return esp_fail(err, "%s: '__metadata__' is reserved and cannot name a tensor", path);
        for (int d = 0; d < x->ndim; d++)
            if (x->shape[d] < 0) return esp_fail(err, "%s: tensor '%s' has a negative dimension", path, x->name);
    }
    size_t *order = xmalloc((n ? n : 1) * sizeof *order);
    for (size_t i = 0; i < n; i++) order[i] = i;
    qsort_r(order, n, sizeof *order, layout_cmp, (void *)tensors);
    for (size_t k = 1; k < n; k++)
        if (strcmp(tensors[order[k - 1]].name, tensors[order[k]].name) == 0) {
            const char *dup = tensors[order[k]].name;
            free(order);
            return esp_fail(err, "%s: tensor name '%s' given twice", path, dup);
        }
    for (size_t i = 0; i < n_meta; i++) ESP_CHECK(meta[i].key && meta[i].value);

    size_t hlen;
    char *header = encode_header(tensors, order, n, meta, n_meta, &hlen);
    if (!header) {
        free(order);
        return esp_fail(err, "%s: a tensor name or metadata string is not valid UTF-8", path);
    }
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)hlen >> (8 * i));

    atomic_file af;
    int rc = atomic_open(&af, path, err);
    if (rc == 0) {
        int ok = fwrite(len8, 1, 8, af.fp) == 8 && fwrite(header, 1, hlen, af.fp) == hlen;
        for (size_t k = 0; ok && k < n; k++) {
            size_t nb = st_nbytes(&tensors[order[k]]);
            ok = nb == 0 || fwrite(tensors[order[k]].data, 1, nb, af.fp) == nb;
        }
        if (!ok) {
            int e = errno;
            atomic_abort(&af);
            rc = esp_fail(err, "%s: write failed: %s (check free disk space)", path, strerror(e));
        } else {
            rc = atomic_commit(&af, err);
        }
    }
    free(header);
    free(order);
    return rc;
}

/* ---- reading ------------------------------------------------------------------------- */

static int parse_dtype(const char *s, st_dtype *out)
{
    for (int t = 0; t < ST_NDTYPES; t++)
        if (strcmp(s, dtypes[t].name) == 0) {
            *out = (st_dtype)t;
            return 0;
        }
    return -1;
}

void st_close(st_file *f)
{
    if (f->map && f->map != MAP_FAILED) munmap(f->map, f->map_len);
    for (size_t i = 0; i < f->n; i++) free((char *)f->tensors[i].name);
    for (size_t i = 0; i < f->n_meta; i++) {
        free((char *)f->meta[i].key);
        free((char *)f->meta[i].value);
    }
    for (size_t i = 0; i < f->n_owned; i++) free(f->owned[i]);
    free(f->tensors);
    free(f->meta);
    free(f->owned);
    free(f->path);
    memset(f, 0, sizeof *f);
}

/* Reads one header entry into t (name already set); `data` is the byte buffer after the header. */
static int parse_tensor(const st_file *f, st_tensor *t, json_t *info, const unsigned char *data, size_t data_len,
                        uint64_t *end_out, esp_err *err)
{
    const char *p = f->path, *name = t->name;
    json_t *dt = json_object_get(info, "dtype"), *shape = json_object_get(info, "shape");
    json_t *offs = json_object_get(info, "data_offsets");
    if (!json_is_object(info) || !json_is_string(dt) || !json_is_array(shape) || !json_is_array(offs) ||
        json_array_size(offs) != 2)
        return esp_fail(err, "%s: tensor '%s': header entry needs dtype, shape and data_offsets [begin, end]", p,
                        name);
    if (parse_dtype(json_string_value(dt), &t->dtype) != 0)
        return esp_fail(err, "%s: tensor '%s': unknown dtype '%s'", p, name, json_string_value(dt));
    if (json_array_size(shape) > ST_MAX_DIMS)
        return esp_fail(err, "%s: tensor '%s': %zu dimensions (at most %d supported)", p, name,
                        json_array_size(shape), ST_MAX_DIMS);
    t->ndim = (int)json_array_size(shape);
    uint64_t numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        json_t *v = json_array_get(shape, (size_t)d);
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return esp_fail(err, "%s: tensor '%s': shape must hold non-negative integers", p, name);
        t->shape[d] = json_integer_value(v);
        if (t->shape[d] && numel > UINT64_MAX / 16 / (uint64_t)t->shape[d])
            return esp_fail(err, "%s: tensor '%s': shape too large", p, name);
        numel *= (uint64_t)t->shape[d];
    }
    json_t *b = json_array_get(offs, 0), *e = json_array_get(offs, 1);
    if (!json_is_integer(b) || !json_is_integer(e) || json_integer_value(b) < 0 ||
        json_integer_value(e) < json_integer_value(b))
        return esp_fail(err, "%s: tensor '%s': bad data_offsets", p, name);
    uint64_t begin = (uint64_t)json_integer_value(b), end = (uint64_t)json_integer_value(e);
    uint64_t nbytes = numel * st_dtype_size(t->dtype);
    if (end - begin != nbytes)
        return esp_fail(err, "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] hold %" PRIu64
                             " bytes, but %s %" PRIu64 " elements need %" PRIu64,
                        p, name, begin, end, end - begin, st_dtype_name(t->dtype), numel, nbytes);
    if (end > data_len)
        return esp_fail(err, "%s: tensor '%s': data ends at byte %" PRIu64 " of %zu (file truncated?)", p, name,
                        end, data_len);
    t->data = data + begin;
    *end_out = end;
    return 0;
}

/* A foreign writer may leave a tensor unaligned for its dtype: copy it so typed access is valid. */
static void align_tensor(st_file *f, st_tensor *t)
{
    size_t nbytes = st_nbytes(t);
    if (nbytes == 0 || (uintptr_t)t->data % st_dtype_size(t->dtype) == 0) return;
    void *copy = xmalloc(nbytes);
    memcpy(copy, t->data, nbytes);
    f->owned = xrealloc(f->owned, (f->n_owned + 1) * sizeof *f->owned);
    f->owned[f->n_owned++] = copy;
    t->data = copy;
}

static int tensor_order(const void *a, const void *b)
{
    const st_tensor *x = a, *y = b;
    const char *xd = x->data, *yd = y->data;
    return (xd > yd) - (xd < yd);
}

int st_read(const char *path, st_file *out, esp_err *err)
{
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return esp_fail(err, "%s: cannot read: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return esp_fail(err, "%s: not a regular file", path);
    }
    size_t len = (size_t)sb.st_size;
    if (len < 8) {
        close(fd);
        return esp_fail(err, "%s: %zu bytes, too short for a safetensors file (truncated?)", path, len);
    }
    void *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED) return esp_fail(err, "%s: cannot map: %s", path, strerror(e));
    out->path = xstrdup(path);
    out->map = map;
    out->map_len = len;

    const unsigned char *bytes = map;
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)bytes[i] << (8 * i);
    if (hlen > ST_MAX_HEADER || hlen > len - 8) {
        esp_fail(err, "%s: header length %" PRIu64 " does not fit the file of %zu bytes (not safetensors?)", path,
                 hlen, len);
        goto fail;
    }
    json_error_t jerr;
    json_t *root = json_loadb((const char *)bytes + 8, (size_t)hlen, JSON_REJECT_DUPLICATES, &jerr);
    if (!root || !json_is_object(root)) {
        esp_fail(err, "%s: header is not a JSON object: %s (column %d)", path, root ? "not an object" : jerr.text,
                 jerr.column);
        json_decref(root);
        goto fail;
    }
    const unsigned char *data = bytes + 8 + hlen;
    size_t data_len = len - 8 - (size_t)hlen;
    size_t cap = json_object_size(root);
    out->tensors = xcalloc(cap ? cap : 1, sizeof *out->tensors);
    uint64_t covered = 0, max_end = 0;
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val)
    {
        if (strcmp(key, "__metadata__") == 0) {
            if (!json_is_object(val)) {
                esp_fail(err, "%s: __metadata__ must be an object of strings", path);
                goto fail_json;
            }
            out->meta = xcalloc(json_object_size(val) + 1, sizeof *out->meta);
            const char *mk;
            json_t *mv;
            json_object_foreach(val, mk, mv)
            {
                if (!json_is_string(mv)) {
                    esp_fail(err, "%s: __metadata__ value '%s' is not a string", path, mk);
                    goto fail_json;
                }
                out->meta[out->n_meta].key = xstrdup(mk);
                out->meta[out->n_meta++].value = xstrdup(json_string_value(mv));
            }
            continue;
        }
        st_tensor *t = &out->tensors[out->n++];
        t->name = xstrdup(key);
        uint64_t end = 0;
        if (parse_tensor(out, t, val, data, data_len, &end, err) != 0) goto fail_json;
        covered += st_nbytes(t);
        if (end > max_end) max_end = end;
    }
    json_decref(root);
    /* As the Python loader: the tensors must tile the data exactly, each starting where the one
     * before it ends (catches truncation, gaps and overlap). */
    qsort(out->tensors, out->n, sizeof *out->tensors, tensor_order);
    const unsigned char *next = data;
    for (size_t i = 0; i < out->n; i++) {
        const unsigned char *at = out->tensors[i].data;
        if (at != next) {
            esp_fail(err, "%s: tensor '%s' starts at byte %zu of the data, but the tensor before it ends at %zu "
                          "(overlapping or gapped data_offsets: corrupt file)",
                     path, out->tensors[i].name, (size_t)(at - data), (size_t)(next - data));
            goto fail;
        }
        next += st_nbytes(&out->tensors[i]);
    }
    if (covered != data_len || max_end != data_len) {
        esp_fail(err, "%s: tensors cover %" PRIu64 " bytes but the file holds %zu after the header "
                      "(truncated or corrupt file)", path, covered, data_len);
        goto fail;
    }
    for (size_t i = 0; i < out->n; i++) align_tensor(out, &out->tensors[i]);
    return 0;
fail_json:
    json_decref(root);
fail:
    st_close(out);
    return -1;
}

const st_tensor *st_get(const st_file *f, const char *name)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
    return NULL;
}

const char *st_meta_get(const st_file *f, const char *key)
{
    for (size_t i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta[i].key, key) == 0) return f->meta[i].value;
    return NULL;
}

static void format_shape(char *buf, size_t cap, int ndim, const int64_t *shape)
{
    size_t used = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < ndim && used < cap; d++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%" PRId64, d ? ", " : "", shape[d]);
    if (used < cap) snprintf(buf + used, cap - used, "]");
}

int st_get_f32(const st_file *f, const char *name, int ndim, const int64_t *shape, const float **out, esp_err *err)
{
    const st_tensor *t = st_get(f, name);
    if (!t) return esp_fail(err, "%s: no tensor '%s' (was the file written for another model?)", f->path, name);
    if (t->dtype != ST_F32)
        return esp_fail(err, "%s: tensor '%s' is %s, expected F32", f->path, name, st_dtype_name(t->dtype));
    int same = t->ndim == ndim;
    for (int d = 0; same && d < ndim; d++) same = t->shape[d] == shape[d];
    if (!same) {
        char got[160], want[160];
        format_shape(got, sizeof got, t->ndim, t->shape);
        format_shape(want, sizeof want, ndim, shape);
        return esp_fail(err, "%s: tensor '%s' has shape %s, expected %s (model config differs from the checkpoint?)",
                        f->path, name, got, want);
    }
    *out = t->data;
    return 0;
}
