/* Fixture packs written by scripts/make_decoder_fixtures.py and make_lm_fixtures.py: <name>.txt
 * lines "name offset count dim..." describing float32 values in <name>.f32, under
 * test/fixtures/<dir>/. Shared by test_decoder.c and test_lm.c. */
#ifndef ESPNET3_TEST_NN_FX_PACK_H
#define ESPNET3_TEST_NN_FX_PACK_H

#include <stddef.h>

typedef struct pack {
    char (*names)[128];
    size_t *off, *count, n;
    float *data;
} pack;

/* Loads test/fixtures/<dir>/<name>.{txt,f32}; a missing or short file fails the test. */
pack load_pack(const char *dir, const char *name);
void pack_free(pack *p);
/* The tensor `name` (NULL when absent); its element count in *n (n may be NULL). */
const float *pack_get(const pack *p, const char *name, size_t *n);
/* The same; a missing tensor fails the test. */
const float *pack_must(const pack *p, const char *name, size_t *n);
/* max |a - scale_b * b| / max |scale_b * b| (the absolute error where b is all zero). */
double pack_rel_err(const float *a, const float *b, size_t n, double scale_b);

#endif
