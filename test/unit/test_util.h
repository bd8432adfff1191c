/* Helpers the unit tests share: where the binary under test and the repository are, temporary
 * folders, whole-file reads and writes, and running shell commands. Failures are Criterion
 * assertions, so a broken fixture fails the test that needs it. */
#ifndef ESPNET3_TEST_UTIL_H
#define ESPNET3_TEST_UTIL_H

#include <stdarg.h>
#include <stddef.h>

/* getenv(name), or fallback when it is unset or empty. */
const char *test_env_or(const char *name, const char *fallback);
/* The repository root (ESPNET3_ROOT, default "."): recipes/ and conf/ are found from there. */
const char *test_root_dir(void);
/* The binary under test (ESPNET3_BIN, default ./espnet3) as an absolute path, so a child that
 * changes folder still finds it. */
const char *test_bin_path(void);

/* "<dir>/<rel>" in one of 16 static buffers that are reused in turn: enough for the paths of
 * one statement, never to be freed or kept. */
const char *test_path(const char *dir, const char *rel);
/* 1 when path exists (stat succeeds). */
int test_exists(const char *path);
/* 1 when both files can be read and hold the same bytes. */
int test_same_file(const char *a, const char *b);

/* The whole file, NUL-terminated; the caller frees. Fails the test when it cannot be read. */
char *test_slurp(const char *path);
/* The same, but "" (still to be freed) when the file cannot be read: for logs quoted in messages
 * and for files whose absence the assertion after it reports. */
char *test_slurp_or_empty(const char *path);
/* Newlines in s (NULL: 0). */
int test_count_lines(const char *s);
/* Writes text to path (replacing it) or fails the test. */
void test_write_text(const char *path, const char *text);
/* The same, creating the folders path needs first (mkdir -p). */
void test_write_text_mkdirs(const char *path, const char *text);

/* Creates a fresh folder /tmp/espnet3_<tag>_XXXXXX and writes its path into dir (cap bytes). */
void test_tmpdir_make(char *dir, size_t cap, const char *tag);
/* Removes the folder and everything under it; fails the test when something is left. */
void test_tmpdir_remove(const char *dir);

/* Runs a printf-formatted /bin/sh command line (system(3)); returns its exit status, -1 when it
 * did not exit normally. */
int test_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* fmt and its arguments into cmd (cap bytes); fails the test when the command does not fit. */
void test_vformat_command(char *cmd, size_t cap, const char *fmt, va_list ap);
/* test_sh of a fixture command whose outputs all lie under dir, which it names: run once per run of
 * the test binary in a shared folder (dir's name replaced by the folder's), then copied into dir
 * with the folder's name in the text files written as dir, for this and every later test that runs
 * the same command with its own dir (test_run_once.c). The status is the run's. */
int test_sh_once(const char *dir, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Writes code to <dir>/check.py and runs it with /usr/bin/python3 in dir; returns its exit status
 * (-1 when it did not exit normally). */
int test_run_python(const char *dir, const char *code);
/* The same with another interpreter (the test venv's: test_venv_tool("python")). */
int test_run_python_with(const char *python, const char *dir, const char *code);

/* bin/<tool> of the cached venv of the real-world checks (PyTorch, torchrun, safetensors:
 * scripts/install_test_venv.sh, which make check runs; ESPNET3_TEST_VENV names it), or skips the
 * calling test with the reason it is not there (ESPNET3_NO_TEST_VENV=1, not installed). */
const char *test_venv_tool(const char *tool);
/* 1 in make asan's run (ESPNET3_SANITIZED=1): a test may take a smaller size of the same code there. */
int test_sanitized(void);
/* Skips the test in make asan's run with `why`: for the few longest end-to-end runs whose code the
 * sanitizer run already covers through the tests `why` names (CI's 30 minutes). */
void test_skip_under_sanitizer(const char *why);

/* A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then released). */
int test_free_port(void);
/* A free port whose next one is free too (a torchrun agent's MASTER_PORT: our store takes the next). */
int test_free_port_pair(void);

/* A parity fixture's array `name` of the npz file f (read from path, named in messages) as doubles,
 * exactly want of them (caller frees); as ints; the one value of a scalar. Fail the test otherwise. */
struct npz_file;
double *test_npz_doubles(const struct npz_file *f, const char *path, const char *name, size_t want);
int *test_npz_ints(const struct npz_file *f, const char *path, const char *name, size_t want);
double test_npz_one(const struct npz_file *f, const char *path, const char *name);

/* Largest |a - b| / (1 + |b|) (NaN counts as worst) over the tensors of two safetensors files
 * whose name contains `only` (NULL: all), leaving out those that contain `skip` (NULL: none). */
double test_st_max_diff(const char *path_a, const char *path_b, const char *only, const char *skip);

/* The parity tests' one comparison of a result a with its reference b (n elements, b scaled by
 * scale_b): max |a - s b| / max |s b| (the absolute error where the reference is all zero), or with
 * _abs the plain max |a - s b|. Any NaN, or an infinity on one side only, makes the error INFINITY
 * (fmax skips a NaN: an all-NaN output would otherwise score 0), and *bad (may be NULL) gets the
 * first such index, -1 when every pair is finite or equal. Equal infinities compare equal. */
double test_err_ff(const float *a, const float *b, size_t n, double scale_b, long *bad);
double test_err_fd(const float *a, const double *b, size_t n, long *bad);
double test_err_dd(const double *a, const double *b, size_t n, long *bad);
double test_err_abs_ff(const float *a, const float *b, size_t n, long *bad);
double test_err_abs_fd(const float *a, const double *b, size_t n, long *bad);
double test_err_abs_dd(const double *a, const double *b, size_t n, long *bad);
/* max |x[i]| for a check that values vanish; INFINITY when any is NaN (fmax would skip it). */
double test_max_abs(const float *x, size_t n);

#endif
