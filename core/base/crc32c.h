/* CRC-32C (Castagnoli), the checksum of TensorBoard/TFRecord event files.
 * Debian bookworm ships no C library for it (zlib has only the IEEE CRC-32), so this is the
 * classic reflected table-driven form: one 1 KiB table, one lookup per byte. */
#ifndef ESPNET3_CRC32C_H
#define ESPNET3_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continues a CRC over more bytes: crc32c_extend(0, ...) starts one; crc32c("123456789") = 0xE3069283. */
uint32_t crc32c_extend(uint32_t crc, const void *data, size_t len);
static inline uint32_t crc32c(const void *data, size_t len) { return crc32c_extend(0, data, len); }

/* TFRecord's masked form: stored CRCs are rotated and offset so that a CRC of data that itself
 * holds CRCs does not degenerate. */
static inline uint32_t crc32c_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

#endif
