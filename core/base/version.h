/* The version of espnet3: --version prints it, packed models and their meta.yaml record it. */
#ifndef ESPNET3_BASE_VERSION_H
#define ESPNET3_BASE_VERSION_H

#define ESPNET3_VERSION "0.1.0"

#endif
