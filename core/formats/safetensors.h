/* safetensors files (the Hugging Face format that `safetensors.torch.load_file` reads): a u64
 * little-endian header length, a JSON header {"__metadata__": {str: str}, "<name>": {"dtype",
 * "shape", "data_offsets": [begin, end]}, ...} padded with spaces to 8 bytes, then the raw
 * little-endian tensor bytes. Writing lays tensors out as the Python library does (by dtype,
 * widest first, then by name), so every tensor starts aligned to its element size; reading maps
 * the file and hands out pointers into it. */
#ifndef ESPNET3_SAFETENSORS_H
#define ESPNET3_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/log.h"

typedef enum st_dtype {
    ST_BOOL, ST_U8, ST_I8, ST_I16, ST_U16, ST_F16, ST_BF16, ST_I32, ST_U32, ST_F32, ST_F64, ST_I64, ST_U64,
    ST_NDTYPES
} st_dtype;

#define ST_MAX_DIMS 8

typedef struct st_tensor {
    const char *name;
    st_dtype dtype;
    int ndim;                      /* 0 for a scalar */
    int64_t shape[ST_MAX_DIMS];
    const void *data;              /* numel * st_dtype_size bytes, little-endian */
} st_tensor;

/* One "__metadata__" entry (safetensors allows only string values). */
typedef struct st_kv {
    const char *key;
    const char *value;
} st_kv;

/* An opened file: tensors in file order, each data pointer aligned to its element size. */
typedef struct st_file {
    char *path;
    st_tensor *tensors;
    size_t n;
    st_kv *meta;
    size_t n_meta;
    void *map;                     /* the whole file, read-only */
    size_t map_len;
    void **owned;                  /* aligned copies of tensors a foreign writer left unaligned */
    size_t n_owned;
} st_file;

size_t st_dtype_size(st_dtype t);
const char *st_dtype_name(st_dtype t);   /* "F32", ... as in the header */
int64_t st_numel(const st_tensor *t);
size_t st_nbytes(const st_tensor *t);

/* Writes the tensors (any order; names unique) and metadata atomically (temp + fsync + rename). */
int st_write(const char *path, const st_tensor *tensors, size_t n, const st_kv *meta, size_t n_meta,
             esp_err *err);

/* Maps and checks a file (header JSON, dtypes, shapes, offsets inside and covering the data).
 * Errors name the file and the tensor. Release with st_close. */
int st_read(const char *path, st_file *out, esp_err *err);
void st_close(st_file *f);

const st_tensor *st_get(const st_file *f, const char *name);
const char *st_meta_get(const st_file *f, const char *key);

/* The F32 tensor `name` with exactly this shape, or an error naming the file, the tensor, and the
 * dtype or shape found. */
int st_get_f32(const st_file *f, const char *name, int ndim, const int64_t *shape, const float **out,
               esp_err *err);

#endif
