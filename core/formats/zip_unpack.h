/* Unpacking a zip archive into a folder (libzip), for ESPnet2's packed models (the zip of
 * meta.yaml, exp/.../config.yaml, the .pth, statistics, bpe model). Untrusted input: entry names
 * must be relative paths without "." / ".." components, the entry count and the sizes the entries
 * declare are checked (against a total limit and against their compressed sizes) before anything is
 * written, entries are copied in chunks, and every entry is read in full (libzip checks its CRC). */
#ifndef ESPNET3_ZIP_UNPACK_H
#define ESPNET3_ZIP_UNPACK_H

#include <stdint.h>

#include "core/base/log.h"

/* A packed model holds a dozen files; 4096 bounds a zip of countless empty entries. */
enum { ZIP_UNPACK_MAX_ENTRIES = 4096 };
/* Unpacked bytes per compressed byte: weights compress ~1.1x, configs and token lists ~5-10x,
 * deflate reaches ~1030x only on bombs. Per entry, and for the whole zip past the first 16 MiB. */
enum { ZIP_UNPACK_MAX_RATIO = 64 };
#define ZIP_UNPACK_FREE_BYTES ((uint64_t)16 << 20)
/* A packed model is its weights, config, stats and tokenizer: 64 GiB in all bounds a hostile zip
 * (the largest ESPnet models are a few GB). */
#define ZIP_UNPACK_MAX_BYTES ((uint64_t)64 << 30)

/* 1 when the zip has an entry of that exact name, 0 when not, -1 (err) when it is no readable zip. */
int zip_has_entry(const char *zip_path, const char *name, esp_err *err);
/* Writes every entry under dest (created if needed). max_bytes bounds the total unpacked size. */
int zip_unpack(const char *zip_path, const char *dest, uint64_t max_bytes, esp_err *err);

#endif
