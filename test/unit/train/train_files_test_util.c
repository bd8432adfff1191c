/* See train_files_test_util.h. No Test() here. */
#include "test/unit/train/train_files_test_util.h"

#include <stdio.h>

#include "core/base/fsio.h"
#include "core/base/log.h"
#include "test/unit/test_util.h"

char train_files_dir[64];

void train_files_setup(void)
{
    test_tmpdir_make(train_files_dir, sizeof train_files_dir, "ckpt");
    log_set_quiet(1);
}
void train_files_teardown(void) { test_tmpdir_remove(train_files_dir); }

int run_python(const char *code) { return test_run_python(train_files_dir, code); }

int python_has(const char *module)
{
    char code[256];
    snprintf(code, sizeof code, "import importlib.util, sys\nsys.exit(0 if importlib.util.find_spec('%s') else 77)\n",
             module);
    return run_python(code) == 0;
}

char *in_dir(const char *name) { return path_join(train_files_dir, name); }
