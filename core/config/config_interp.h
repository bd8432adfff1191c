/* OmegaConf-style interpolation over a composed config tree:
 *   ${a.b}  ${a.b[0]}  ${.sibling}  "${exp_dir}/tensorboard"  ${num_nodes * num_device}
 *   ${self_name:}  ${config_path:rel}  ${load_line:file}  ${load_yaml:file,key}  ${oc.env:NAME,default}
 *   ${oc.select:key,default}
 * A value that is exactly one reference takes the referenced value with its type (and keeps the
 * source position for errors); anything else becomes a string. "\${" is a literal "${". */
#ifndef ESPNET3_CONFIG_INTERP_H
#define ESPNET3_CONFIG_INTERP_H

#include "core/base/log.h"
#include "core/config/yamltree.h"

typedef struct interp_opts {
    const char *self_name; /* stem of the config file given on the command line */
    /* A config from elsewhere (an ESPnet2 config, one inside a packed model): the resolvers that
     * read this machine (load_line, load_yaml, oc.env) are refused, so a downloaded file cannot
     * pull local files or the environment into its values or error text. */
    int foreign;
} interp_opts;

int config_interpolate(ynode *root, const interp_opts *opts, esp_err *err);

#endif
