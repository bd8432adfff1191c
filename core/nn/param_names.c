/* espnet3's older parameter names and ESPnet's (core/nn/model_params.h). Kept apart from the
 * table so that readers of checkpoint files (averaging, the fuzz targets) need nothing else. */
#include <stdio.h>
#include <string.h>

#include "core/nn/model_params.h"

int param_legacy_name(const char *name, char *buf, size_t cap)
{
    /* espnet3 wrote encoder.embed.out.{weight,bias} (no Sequential index) before ESPnet's names. */
    static const char cur[] = "encoder.embed.out.0.";
    if (strncmp(name, cur, sizeof cur - 1)) return 0;
    return snprintf(buf, cap, "encoder.embed.out.%s", name + sizeof cur - 1) < (int)cap;
}

int param_current_name(const char *name, char *buf, size_t cap)
{
    static const char older[] = "encoder.embed.out.";
    if (strncmp(name, older, sizeof older - 1) || strchr(name + sizeof older - 1, '.')) return 0;
    return snprintf(buf, cap, "encoder.embed.out.0.%s", name + sizeof older - 1) < (int)cap;
}
