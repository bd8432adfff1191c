/* core/config/config_task.h. */
#include "core/config/config_task.h"

#include <string.h>

/* Whether s is name, or a dotted path ending in ".name". */
static int names_class(const char *s, const char *name)
{
    size_t n = s ? strlen(s) : 0, k = strlen(name);
    return n >= k && !strcmp(s + n - k, name) && (n == k || s[n - k - 1] == '.');
}

int config_is_lm_data_src(const char *data_src) { return names_class(data_src, "lm_dataset"); }

int config_is_lm_task(const ynode *root)
{
    const ynode *lm = yt_get_path(root, "model.lm"), *task = yt_get_path(root, "task");
    if (lm && !yt_is_null(lm)) return 1;
    return task && task->kind == YN_SCALAR && names_class(task->str, "LMTask");
}
