#include "core/formats/npz.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "core/base/fsio.h"

static size_t dtype_size(npy_dtype t) { return t == NPY_F32 ? 4 : 8; }
static const char *dtype_descr(npy_dtype t) { return t == NPY_F32 ? "<f4" : t == NPY_F64 ? "<f8" : "<i8"; }

/* ---- .npy ---------------------------------------------------------------------------- */

/* NPY v1.0: magic, version, u16 header length, a Python dict literal padded to 64 bytes. */
static unsigned char *npy_encode(const npy_array *a, size_t *len_out)
{
    char dict[256];
    int used = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (", dtype_descr(a->dtype));
    for (int i = 0; i < a->ndim; i++)
        used += snprintf(dict + used, sizeof dict - (size_t)used, "%zu,%s", a->shape[i], i + 1 < a->ndim ? " " : "");
    used += snprintf(dict + used, sizeof dict - (size_t)used, "), }");
    size_t header = 10 + (size_t)used + 1; /* + '\n' */
    size_t pad = (64 - header % 64) % 64;
    size_t hlen = (size_t)used + pad + 1;
    size_t data_len = a->count * dtype_size(a->dtype);
    unsigned char *buf = xmalloc(10 + hlen + data_len);
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (unsigned char)(hlen & 0xff);
    buf[9] = (unsigned char)(hlen >> 8);
    memcpy(buf + 10, dict, (size_t)used);
    memset(buf + 10 + used, ' ', pad);
    buf[10 + hlen - 1] = '\n';
    if (data_len) memcpy(buf + 10 + hlen, a->data, data_len);
    *len_out = 10 + hlen + data_len;
    return buf;
}

/* The quoted value after `key` in an .npy header dict ('<f4' of 'descr': '<f4'), or NULL. */
static const char *dict_value(const char *h, const char *key)
{
    const char *v = strstr(h, key);
    if (!v) return NULL;
    v += strlen(key);
    while (*v == ' ') v++;
    return v;
}

static int npy_decode(const unsigned char *buf, size_t len, npy_array *a, const char *where, esp_err *err)
{
    if (len < 10 || memcmp(buf, "\x93NUMPY", 6) != 0) return esp_fail(err, "%s: not a .npy array", where);
    size_t hlen, off;
    if (buf[6] == 1) hlen = buf[8] | (size_t)buf[9] << 8, off = 10;
    else if (len >= 12) hlen = buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24, off = 12;
    else return esp_fail(err, "%s: truncated .npy header", where);
    if (off + hlen > len) return esp_fail(err, "%s: truncated .npy header", where);
    if (memchr(buf + off, '\0', hlen)) return esp_fail(err, "%s: .npy header holds a NUL byte", where);
    char *h = xstrndup((const char *)buf + off, hlen);
    int rc = 0;
    const char *d = dict_value(h, "'descr':");
    const char *s = dict_value(h, "'shape':");
    const char *fo = dict_value(h, "'fortran_order':");
    if (!d || !s || !fo || strncmp(fo, "False", 5) != 0) {
        rc = esp_fail(err, "%s: unsupported .npy header %s (expected descr, fortran_order False and shape)", where, h);
        goto out;
    }
    if (!strncmp(d, "'<f4'", 5)) a->dtype = NPY_F32;
    else if (!strncmp(d, "'<f8'", 5)) a->dtype = NPY_F64;
    else if (!strncmp(d, "'<i8'", 5)) a->dtype = NPY_I64;
    else {
        rc = esp_fail(err, "%s: unsupported dtype in %s (expected <f4, <f8 or <i8)", where, h);
        goto out;
    }
    /* A tuple of decimal integers: (), (3,), (2, 3). */
    if (*s != '(') {
        rc = esp_fail(err, "%s: shape is not a tuple in %s", where, h);
        goto out;
    }
    a->ndim = 0;
    a->count = 1;
    size_t limit = (len - off - hlen) / dtype_size(a->dtype); /* the elements the data can hold */
    for (const char *p = s + 1;;) {
        while (*p == ' ') p++;
        if (*p == ')') break;
        if (*p < '0' || *p > '9') {
            rc = esp_fail(err, "%s: shape is not a tuple of non-negative integers in %s", where, h);
            goto out;
        }
        size_t v = 0;
        for (; *p >= '0' && *p <= '9'; p++) {
            if (v > (SIZE_MAX - 9) / 10) v = SIZE_MAX; /* saturate: fails the size check below */
            else v = v * 10 + (size_t)(*p - '0');
        }
        if (a->ndim == 4) {
            rc = esp_fail(err, "%s: more than 4 dimensions", where);
            goto out;
        }
        a->shape[a->ndim++] = v;
        /* Multiply without overflow: a count over what the data holds fails the size check. */
        a->count = v == 0 || a->count == 0 ? 0 : a->count > limit / v + 1 ? limit + 1 : a->count * v;
        while (*p == ' ') p++;
        if (*p == ',') p++;
        else if (*p != ')') {
            rc = esp_fail(err, "%s: shape is not a tuple of non-negative integers in %s", where, h);
            goto out;
        }
    }
    if (a->count > limit || (len - off - hlen) != a->count * dtype_size(a->dtype)) {
        rc = esp_fail(err, "%s: %zu bytes of data do not match the shape in %s", where, len - off - hlen, h);
        goto out;
    }
    size_t need = a->count * dtype_size(a->dtype);
    a->data = xmalloc(need ? need : 1);
    memcpy(a->data, buf + off + hlen, need);
out:
    free(h);
    return rc;
}

/* ---- zip container ------------------------------------------------------------------- */

static void put16(unsigned char *p, unsigned v) { p[0] = (unsigned char)v, p[1] = (unsigned char)(v >> 8); }
static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static unsigned get16(const unsigned char *p) { return p[0] | (unsigned)p[1] << 8; }
static uint32_t get32(const unsigned char *p) { return p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

int npz_write(const char *path, const npy_array *arrays, size_t n, esp_err *err)
{
    atomic_file af;
    if (atomic_open(&af, path, err) != 0) return -1;
    unsigned char *central = NULL;
    size_t central_len = 0;
    uint32_t offset = 0;
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++) {
        size_t len;
        unsigned char *npy = npy_encode(&arrays[i], &len);
        char *name = xasprintf("%s.npy", arrays[i].name);
        size_t name_len = strlen(name);
        uint32_t crc = (uint32_t)crc32(0L, npy, (uInt)len);
        unsigned char local[30] = {0};
        put32(local, 0x04034b50);
        put16(local + 4, 20);       /* version needed */
        put16(local + 10, 0);       /* mod time */
        put16(local + 12, 0x21);    /* mod date: 1980-01-01, fixed so output is reproducible */
        put32(local + 14, crc);
        put32(local + 18, (uint32_t)len);
        put32(local + 22, (uint32_t)len);
        put16(local + 26, (unsigned)name_len);
        ok = fwrite(local, 1, 30, af.fp) == 30 && fwrite(name, 1, name_len, af.fp) == name_len &&
             fwrite(npy, 1, len, af.fp) == len;
        central = xrealloc(central, central_len + 46 + name_len);
        unsigned char *c = central + central_len;
        memset(c, 0, 46);
        put32(c, 0x02014b50);
        put16(c + 4, 20);
        put16(c + 6, 20);
        put16(c + 14, 0x21);
        put32(c + 16, crc);
        put32(c + 20, (uint32_t)len);
        put32(c + 24, (uint32_t)len);
        put16(c + 28, (unsigned)name_len);
        put32(c + 42, offset);
        memcpy(c + 46, name, name_len);
        central_len += 46 + name_len;
        offset += (uint32_t)(30 + name_len + len);
        free(npy);
        free(name);
    }
    unsigned char end[22] = {0};
    put32(end, 0x06054b50);
    put16(end + 8, (unsigned)n);
    put16(end + 10, (unsigned)n);
    put32(end + 12, (uint32_t)central_len);
    put32(end + 16, offset);
    ok = ok && fwrite(central, 1, central_len, af.fp) == central_len && fwrite(end, 1, 22, af.fp) == 22;
    free(central);
    if (!ok) {
        atomic_abort(&af);
        return esp_fail(err, "%s: write failed (check free disk space)", path);
    }
    return atomic_commit(&af, err);
}

static int inflate_raw(const unsigned char *in, size_t in_len, unsigned char *out, size_t out_len)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) return -1;
    zs.next_in = (Bytef *)in;
    zs.avail_in = (uInt)in_len;
    zs.next_out = out;
    zs.avail_out = (uInt)out_len;
    int rc = inflate(&zs, Z_FINISH);
    inflateEnd(&zs);
    return rc == Z_STREAM_END && zs.total_out == out_len ? 0 : -1;
}

/* Deflate turns one byte into at most 258 * 8 / 2 = 1032 (a length-258 match per 2 bits). */
#define MAX_INFLATE_RATIO 1032u

int npz_read(const char *path, npz_file *out, esp_err *err)
{
    memset(out, 0, sizeof *out);
    size_t len;
    unsigned char *buf = (unsigned char *)read_file(path, READ_MODEL, &len, err);
    if (!buf) return -1;
    int rc = 0;
    /* The end-of-central-directory record is in the last 22 + 65535 bytes. */
    size_t eocd = (size_t)-1;
    for (size_t i = len >= 22 ? len - 22 + 1 : 0; i-- > 0 && len - i <= 22 + 65535;)
        if (get32(buf + i) == 0x06054b50) {
            eocd = i;
            break;
        }
    if (eocd == (size_t)-1) {
        rc = esp_fail(err, "%s: not an .npz (zip) file", path);
        goto done;
    }
    size_t count = get16(buf + eocd + 10), cd = get32(buf + eocd + 16);
    if (count > eocd / 46) { /* each entry takes 46 bytes or more before the end record */
        rc = esp_fail(err, "%s: zip directory claims %zu entries in %zu bytes (corrupt file)", path, count, eocd);
        goto done;
    }
    out->arrays = xcalloc(count, sizeof *out->arrays);
    for (size_t k = 0; k < count; k++) {
        if (cd + 46 > len || get32(buf + cd) != 0x02014b50) {
            rc = esp_fail(err, "%s: corrupt zip directory", path);
            goto done;
        }
        unsigned method = get16(buf + cd + 10);
        uint32_t crc = get32(buf + cd + 16);
        size_t csize = get32(buf + cd + 20), usize = get32(buf + cd + 24);
        size_t nlen = get16(buf + cd + 28), xlen = get16(buf + cd + 30), clen = get16(buf + cd + 32);
        size_t loff = get32(buf + cd + 42);
        if (cd + 46 + nlen > len || loff + 30 > len) {
            rc = esp_fail(err, "%s: corrupt zip directory", path);
            goto done;
        }
        if (memchr(buf + cd + 46, '\0', nlen)) {
            rc = esp_fail(err, "%s: zip entry %zu has a NUL byte in its name (corrupt file)", path, k);
            goto done;
        }
        char *name = xstrndup((const char *)buf + cd + 46, nlen);
        size_t data_off = loff + 30 + get16(buf + loff + 26) + get16(buf + loff + 28);
        char *where = xasprintf("%s: %s", path, name);
        if (data_off + csize > len || (method != 0 && method != 8)) {
            rc = esp_fail(err, "%s: unsupported or truncated zip entry", where);
        } else if (method == 0 && usize != csize) {
            rc = esp_fail(err, "%s: stored zip entry of %zu bytes claims %zu uncompressed (corrupt file)", where,
                          csize, usize);
        } else if (method == 8 && usize > MAX_INFLATE_RATIO * csize + 64) {
            /* Checked before allocating: the claim can be 4 GiB in a file of a few bytes. */
            rc = esp_fail(err, "%s: zip entry claims %zu bytes from %zu compressed, more than deflate can "
                               "produce (corrupt file)", where, usize, csize);
        } else {
            unsigned char *data = xmalloc(usize ? usize : 1);
            if (method == 0) memcpy(data, buf + data_off, usize);
            else if (inflate_raw(buf + data_off, csize, data, usize) != 0) rc = esp_fail(err, "%s: cannot inflate", where);
            if (rc == 0 && (uint32_t)crc32(0L, data, (uInt)usize) != crc) rc = esp_fail(err, "%s: CRC mismatch", where);
            npy_array *a = &out->arrays[out->n];
            if (rc == 0) rc = npy_decode(data, usize, a, where, err);
            if (rc == 0) {
                size_t nl = strlen(name);
                a->name = nl >= 4 && !strcmp(name + nl - 4, ".npy") ? xstrndup(name, nl - 4) : xstrdup(name);
                if (npz_get(out, a->name)) { /* a lookup by name would see only the first */
                    rc = esp_fail(err, "%s: a second array named '%s' (corrupt file)", where, a->name);
                    free(a->name);
                    free(a->data);
                } else {
                    out->n++;
                }
            }
            free(data);
        }
        free(where);
        free(name);
        if (rc != 0) goto done;
        cd += 46 + nlen + xlen + clen;
    }
done:
    free(buf);
    if (rc != 0) npz_free(out);
    return rc;
}

const npy_array *npz_get(const npz_file *f, const char *name)
{
    for (size_t i = 0; i < f->n; i++)
        if (!strcmp(f->arrays[i].name, name)) return &f->arrays[i];
    return NULL;
}

void npz_free(npz_file *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free(f->arrays[i].name);
        free(f->arrays[i].data);
    }
    free(f->arrays);
    memset(f, 0, sizeof *f);
}

int npz_get_doubles(const npz_file *f, const char *path, const char *name, double **out, size_t *n, esp_err *err)
{
    const npy_array *a = npz_get(f, name);
    if (!a) return esp_fail(err, "%s: no array '%s' (is this a feats_stats.npz from collect_stats?)", path, name);
    double *v = xmalloc((a->count ? a->count : 1) * sizeof *v);
    for (size_t i = 0; i < a->count; i++) {
        if (a->dtype == NPY_F32) v[i] = ((const float *)a->data)[i];
        else if (a->dtype == NPY_F64) v[i] = ((const double *)a->data)[i];
        else v[i] = (double)((const int64_t *)a->data)[i];
    }
    *out = v;
    *n = a->count;
    return 0;
}
