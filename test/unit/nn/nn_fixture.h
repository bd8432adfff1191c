/* Shared by the model tests (test_conformer.c and test_ebranchformer.c against ESPnet's fixtures,
 * test_decoder.c and test_preencoder.c for gradients): reading the .npz arrays, comparing within a
 * relative tolerance, loading the parameter state and the padded batch of 2, and snapshots of the
 * parameters and gradients. */
#ifndef ESPNET3_TEST_NN_FIXTURE_H
#define ESPNET3_TEST_NN_FIXTURE_H

#include <stddef.h>

#include "core/formats/npz.h"
#include "core/nn/model.h"

/* Array `name` of f; a missing one fails the test. */
const npy_array *fx_get(const npz_file *f, const char *name);
/* The fixture's float array as floats (int64 / f64 ones converted); caller frees. */
float *fx_floats(const npy_array *a);
/* max |a - b| / max |b| (the absolute error where b is all zero). */
double fx_rel_err(const float *a, const float *b, size_t n);
/* Compares n floats with fixture array `name` within tol; returns the error and tracks the worst. */
double fx_compare(const npz_file *f, const char *name, const float *ours, size_t n, double *worst, double tol);
/* Every param.<name> of the fixture into the model's state; every table entry must be set once. */
void fx_load_state(asr_model *m, const npz_file *f);

typedef struct fx_batch {
    float *feats;
    int lens[2], ylens[2], labels[256], stride, T;
} fx_batch;

/* in.feats / in.lens / in.ys / in.ylens; label padding (< 0) becomes pad. */
void fx_load_batch(fx_batch *b, const npz_file *f, int idim, int pad);

/* Copies of the trained parameters and of their gradients after a backward, the two ends of a
 * directional-difference check (caller frees both). */
void fx_snapshot(const asr_model *m, float **params, float **grads);

#endif
