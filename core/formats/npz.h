/* NumPy .npz files (a zip of .npy arrays), the format of ESPnet's feats_stats.npz.
 * Writing stores entries uncompressed, as np.savez does; reading accepts stored and deflated
 * (np.savez_compressed) entries of dtypes <f4, <f8 and <i8. */
#ifndef ESPNET3_NPZ_H
#define ESPNET3_NPZ_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/log.h"

typedef enum npy_dtype { NPY_F32, NPY_F64, NPY_I64 } npy_dtype;

typedef struct npy_array {
    char *name;        /* without ".npy" */
    npy_dtype dtype;
    int ndim;          /* 0 for a scalar */
    size_t shape[4];
    size_t count;      /* number of elements */
    void *data;        /* little-endian values, count of them */
} npy_array;

typedef struct npz_file {
    npy_array *arrays;
    size_t n;
} npz_file;

/* Writes arrays atomically as a .npz that numpy.load reads. */
int npz_write(const char *path, const npy_array *arrays, size_t n, esp_err *err);
int npz_read(const char *path, npz_file *out, esp_err *err);
const npy_array *npz_get(const npz_file *f, const char *name);
void npz_free(npz_file *f);

/* Reads one array as doubles (any supported dtype); errors name the file and the key. */
int npz_get_doubles(const npz_file *f, const char *path, const char *name, double **out, size_t *n, esp_err *err);

#endif
