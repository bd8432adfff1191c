/* Helpers of the tests of the files training writes (test_train_logs.c, test_safetensors.c,
 * test_ckpt_files.c): a temporary folder per test, paths in it, and Python scripts run there. */
#ifndef ESPNET3_TRAIN_FILES_TEST_UTIL_H
#define ESPNET3_TRAIN_FILES_TEST_UTIL_H

/* The test's temporary folder, made by train_files_setup and removed by train_files_teardown (the
 * .init and .fini of suites safetensors, tb_events, metrics_csv and checkpoint). */
extern char train_files_dir[64];
void train_files_setup(void);
void train_files_teardown(void);

/* Runs a Python script in the test directory; returns its exit status (77 = a module is missing). */
int run_python(const char *code);
/* 1 when /usr/bin/python3 can import module. */
int python_has(const char *module);
/* dir/name (malloc'd). */
char *in_dir(const char *name);

#endif
