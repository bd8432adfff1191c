/* libFuzzer target for the metrics.csv reader that a resumed run uses: bytes -> metrics_csv_open
 * (dropping rows after step 3, as a resume from a step-3 checkpoint does), then one logged row with
 * a new key (a rewrite) and one without (an append), then the file is opened again. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/formats/metrics_csv.h"
#include "test/fuzz/fuzz_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    fuzz_scratch("metrics_csv");
    return 0;
}

static int has_step(const metrics_csv *m)
{
    for (size_t k = 0; k < m->n_keys; k++)
        if (!strcmp(m->keys[k], "step")) return 1;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_write("metrics.csv", data, size);
    metrics_csv m;
    esp_err err;
    if (metrics_csv_open(&m, path, 3, &err) != 0) {
        if (!strstr(err.msg, path)) abort(); /* every error names the file */
        return 0;
    }
    if (m.n_keys && !has_step(&m)) abort();
    metric a[] = {{"train/loss", 1.25, 0}, {"zz/new", 0.5, 0}};
    if (metrics_csv_log(&m, 4, a, 2, &err) != 0) abort();
    metric b[] = {{"train/loss", 1.0, 0}, {"epoch", 1, 1}};
    if (metrics_csv_log(&m, 5, b, 2, &err) != 0) abort();
    metrics_csv_close(&m);
    if (metrics_csv_open(&m, path, -1, &err) != 0 || !has_step(&m)) abort();
    metrics_csv_close(&m);
    return 0;
}
