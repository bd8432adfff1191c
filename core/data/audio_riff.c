/* The RIFF chunk checks around libsndfile's WAV and RF64 parsers: see audio_riff.h. */
#include "core/data/audio_riff.h"

#include <stdint.h>
#include <string.h>

/* A subchunk of a LIST chunk claiming this many bytes or more: libsndfile adds it to a 32-bit
 * count, which wraps, and its loop never ends. No list entry (a title, a label) is that long. */
#define LIST_ENTRY_LIMIT 0x80000000u

static uint32_t get32(const unsigned char *p, int big_endian)
{
    return big_endian ? (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]
                      : p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The entries of the LIST chunk whose content is [start, start + size), walked as libsndfile's
 * list parser walks them: -1 at an entry it would loop on. */
static int check_list(riff_read_fn read, void *src, long start, uint32_t size, int big, const char *name,
                      esp_err *err)
{
    if (size <= 8) return 0; /* libsndfile skips such a list whole */
    long off = start, end = start + (long)size;
    unsigned char b[4];
    while (off < end && read(src, off, b, 4) == 4) {
        off += 4;
        /* list types without a length; the entries after which libsndfile leaves the list */
        if (!memcmp(b, "adtl", 4) || !memcmp(b, "INFO", 4)) continue;
        if (!memcmp(b, "exif", 4) || !memcmp(b, "data", 4) || !memcmp(b, "\0\0\0\0", 4)) return 0;
        char id[5] = {(char)b[0], (char)b[1], (char)b[2], (char)b[3], 0};
        if (read(src, off, b, 4) != 4) return 0;
        uint32_t len = get32(b, big);
        if (len >= LIST_ENTRY_LIMIT)
            return esp_fail(err, "%s: malformed WAV: entry '%s' of its LIST chunk at byte %ld claims %u bytes "
                                 "(libsndfile would never finish reading the header; re-create the file)",
                            name, id[0] >= 32 && id[0] < 127 ? id : "?", off - 4, len);
        off += 4 + (long)len + (len & 1);
    }
    return 0;
}

int audio_riff_check(riff_read_fn read, void *src, const char *name, esp_err *err)
{
    unsigned char h[12];
    if (read(src, 0, h, 12) != 12 || memcmp(h + 8, "WAVE", 4) ||
        (memcmp(h, "RIFF", 4) && memcmp(h, "RIFX", 4) && memcmp(h, "RF64", 4)))
        return 0;
    int big = h[3] == 'X', fmts = 0, datas = 0;
    long pos = 12;
    while (read(src, pos, h, 8) == 8) {
        uint32_t len = get32(h + 4, big);
        if (!memcmp(h, "LIST", 4) && check_list(read, src, pos + 8, len, big, name, err) != 0) return -1;
        int *seen = !memcmp(h, "fmt ", 4) ? &fmts : !memcmp(h, "data", 4) ? &datas : NULL;
        if (seen && ++*seen > 1)
            return esp_fail(err, "%s: malformed WAV: a second '%.4s' chunk at byte %ld (a WAV holds one; libsndfile "
                                 "would read the file by its last and a pipe by its first)", name, (const char *)h, pos);
        if (len == UINT32_MAX || (len == 0 && !memcmp(h, "data", 4))) break; /* runs to the end of the file */
        pos += 8 + (long)len + (len & 1);
    }
    return 0;
}

static long file_read(void *src, long off, void *buf, long n)
{
    FILE *fp = src;
    return fseek(fp, off, SEEK_SET) == 0 ? (long)fread(buf, 1, (size_t)n, fp) : 0;
}

int audio_riff_check_file(FILE *fp, const char *name, esp_err *err)
{
    return audio_riff_check(file_read, fp, name, err);
}

int audio_riff_data_truncated(FILE *fp, uint32_t *declared, long *present)
{
    unsigned char h[12];
    int truncated = 0;
    if (fseek(fp, 0, SEEK_SET) == 0 && fread(h, 1, 12, fp) == 12 && (!memcmp(h, "RIFF", 4) || !memcmp(h, "RIFX", 4)) &&
        !memcmp(h + 8, "WAVE", 4) && fseek(fp, 0, SEEK_END) == 0) {
        int big = h[3] == 'X';
        long size = ftell(fp), pos = 12;
        while (pos >= 0 && size - pos >= 8 && fseek(fp, pos, SEEK_SET) == 0 && fread(h, 1, 8, fp) == 8) {
            uint32_t len = get32(h + 4, big);
            if (!memcmp(h, "data", 4)) {
                *declared = len;
                *present = size - pos - 8;
                truncated = len != 0 && len != UINT32_MAX && (long)len > *present;
                break;
            }
            pos += 8 + (long)len + (len & 1);
        }
    }
    return truncated;
}
