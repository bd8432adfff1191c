/* core/config/config_task.h. */
#include "core/config/config_task.h"

#include <string.h>

int config_is_lm_task(const training_cfg *cfg)
{
    if (!cfg) return 0;
    if (cfg->model && cfg->model->lm) return 1;
    const char *t = cfg->task;
    size_t n = t ? strlen(t) : 0, k = strlen("LMTask");
    return n >= k && !strcmp(t + n - k, "LMTask") && (n == k || t[n - k - 1] == '.');
}
