#include "core/base/crc32c.h"

#include <pthread.h>

/* Reflected Castagnoli polynomial 0x1EDC6F41. */
#define CRC32C_POLY 0x82F63B78u

static uint32_t table[256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (CRC32C_POLY & (0u - (c & 1u)));
        table[i] = c;
    }
}

uint32_t crc32c_extend(uint32_t crc, const void *data, size_t len)
{
    pthread_once(&table_once, table_init);
    const unsigned char *p = data;
    crc = ~crc;
    for (size_t i = 0; i < len; i++) crc = table[(crc ^ p[i]) & 0xffu] ^ (crc >> 8);
    return ~crc;
}
