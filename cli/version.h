/* `espnet3 --version`: the version and the backends compiled into this binary. */
#ifndef ESPNET3_CLI_VERSION_H
#define ESPNET3_CLI_VERSION_H

#include "core/base/version.h"

void print_version(void *fp /* FILE* */);

#endif
