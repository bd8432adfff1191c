/* metrics.csv as Lightning's CSVLogger writes it: a header of every key seen so far, sorted, with
 * "step" among them; one row per log call, empty cells for keys a row lacks; numbers as Python
 * prints them (repr of the float, "nan", "inf"); CRLF line ends (csv's excel dialect). When a row
 * brings a new key the whole file is rewritten under the wider header, atomically; rows are
 * appended with one write(2) each, so a killed run leaves whole rows. */
#ifndef ESPNET3_METRICS_CSV_H
#define ESPNET3_METRICS_CSV_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/log.h"

/* One logged value: "train/loss" 12.5, or "epoch" 3 with is_int (Lightning logs epoch as an int). */
typedef struct metric {
    const char *name;
    double value;
    int is_int;
} metric;

typedef struct metrics_csv {
    char *path;
    char **keys;        /* the header, sorted; includes "step" */
    size_t n_keys;
} metrics_csv;

/* Opens (creating the directory) <path>, usually <save_dir>/<name>/version_<n>/metrics.csv. An
 * existing file is kept and its header adopted; resume_step >= 0 (a resumed run) first drops the rows
 * a killed run logged after that step. resume_step -1 keeps every row. */
int metrics_csv_open(metrics_csv *m, const char *path, int64_t resume_step, esp_err *err);

/* Appends one row at `step`. Names must be unique within the call and must not be "step". */
int metrics_csv_log(metrics_csv *m, int64_t step, const metric *vals, size_t n, esp_err *err);

void metrics_csv_close(metrics_csv *m);

/* Python's repr() of a double ("0.1", "2.0", "1e-05", "nan"); writes at most 32 bytes. */
void format_py_float(char *buf, size_t cap, double v);

#endif
