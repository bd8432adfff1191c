/* Unpacking a zip archive into a folder (libzip), for ESPnet2's packed models (the zip of
 * meta.yaml, exp/.../config.yaml, the .pth, statistics, bpe model). Untrusted input: entry names
 * must be relative paths without "." / ".." components, the sizes the entries declare are checked
 * against a limit before anything is written, and every entry is read in full (libzip checks its
 * CRC). */
#ifndef ESPNET3_ZIP_UNPACK_H
#define ESPNET3_ZIP_UNPACK_H

#include <stdint.h>

#include "core/base/log.h"

/* 1 when the zip has an entry of that exact name, 0 when not, -1 (err) when it is no readable zip. */
int zip_has_entry(const char *zip_path, const char *name, esp_err *err);
/* Writes every entry under dest (created if needed). max_bytes bounds the total unpacked size. */
int zip_unpack(const char *zip_path, const char *dest, uint64_t max_bytes, esp_err *err);

#endif
