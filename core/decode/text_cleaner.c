/* ESPnet2's TextCleaner for the metrics (see text_cleaner.h): Whisper's BasicTextNormalizer on
 * UTF-16 with ICU, step by step as Python runs it:
 *   s = s.lower()
 *   s = re.sub(r"[<\[][^>\]]*[>\]]", "", s)
 *   s = re.sub(r"\(([^)]+?)\)", "", s)
 *   s = "".join(" " if category(c)[0] in "MSP" else c for c in normalize("NFKC", s)).lower()
 *   s = re.sub(r"\s+", " ", s)
 * Python's lower() is Unicode's full lower-case mapping with Final_Sigma, as ICU's root locale
 * (u_strToLower with ""); \s is str.isspace(): category Zs or bidirectional class WS, B or S. */
#include "core/decode/text_cleaner.h"

#include <stdlib.h>
#include <string.h>
#include <unicode/uchar.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>
#include <unicode/utf16.h>

#include "core/base/log.h"

int text_cleaner_of(const char *name)
{
    return !strcmp(name, "whisper_basic") ? TEXT_CLEANER_WHISPER_BASIC : -1;
}

/* A UTF-16 string that grows. */
typedef struct u16buf {
    UChar *s;
    int32_t n, cap;
} u16buf;

static void u16_reserve(u16buf *b, int32_t cap)
{
    if (cap <= b->cap) return;
    b->s = xrealloc(b->s, (size_t)cap * sizeof *b->s);
    b->cap = cap;
}

/* One of ICU's string functions (preflight, then fill) from src into b. */
typedef int32_t (*u16_fn)(UChar *dst, int32_t cap, const UChar *src, int32_t n, UErrorCode *st);

static int32_t lower_root(UChar *dst, int32_t cap, const UChar *src, int32_t n, UErrorCode *st)
{
    return u_strToLower(dst, cap, src, n, "", st);
}

static int32_t nfkc(UChar *dst, int32_t cap, const UChar *src, int32_t n, UErrorCode *st)
{
    const UNormalizer2 *norm = unorm2_getNFKCInstance(st);
    return U_FAILURE(*st) ? 0 : unorm2_normalize(norm, src, n, dst, cap, st);
}

static void apply(u16buf *b, u16_fn fn)
{
    UErrorCode st = U_ZERO_ERROR;
    int32_t need = fn(NULL, 0, b->s, b->n, &st);
    ESP_CHECK(st == U_BUFFER_OVERFLOW_ERROR || U_SUCCESS(st));
    u16buf out = {0};
    u16_reserve(&out, need + 1);
    st = U_ZERO_ERROR;
    out.n = fn(out.s, out.cap, b->s, b->n, &st);
    ESP_CHECK(U_SUCCESS(st));
    free(b->s);
    *b = out;
}

/* re.sub(open + "[^" + closers + "]" + quant + close, "", s) for the two span patterns: a span opens
 * at a character of `open`, holds no character of `closers`, and ends at the first one, which
 * must be a character of `close`; min_inside is the quantifier's minimum (0 for *, 1 for +?). A
 * failed start leaves its character and tries the next, as the regex engine does. The delimiters
 * are ASCII, so UTF-16 units are compared directly (no surrogate equals them). */
static void drop_spans(u16buf *b, const char *open, const char *closers, const char *close, int min_inside)
{
    int32_t w = 0;
    for (int32_t i = 0; i < b->n;) {
        UChar c = b->s[i];
        if (c && c < 128 && strchr(open, (char)c)) {
            int32_t j = i + 1;
            while (j < b->n && !(b->s[j] && b->s[j] < 128 && strchr(closers, (char)b->s[j]))) j++;
            if (j < b->n && strchr(close, (char)b->s[j]) && j - i - 1 >= min_inside) {
                i = j + 1;
                continue;
            }
        }
        b->s[w++] = b->s[i++];
    }
    b->n = w;
}

/* Every mark, symbol and punctuation code point becomes a space. */
static void symbols_to_spaces(u16buf *b)
{
    u16buf out = {0};
    u16_reserve(&out, b->n + 1);
    for (int32_t i = 0; i < b->n;) {
        int32_t start = i;
        UChar32 c;
        U16_NEXT(b->s, i, b->n, c);
        if (U_GET_GC_MASK(c) & (U_GC_M_MASK | U_GC_S_MASK | U_GC_P_MASK)) out.s[out.n++] = ' ';
        else
            while (start < i) out.s[out.n++] = b->s[start++];
    }
    free(b->s);
    *b = out;
}

static int py_isspace(UChar32 c)
{
    UCharDirection d = u_charDirection(c);
    return (U_GET_GC_MASK(c) & U_GC_ZS_MASK) || d == U_WHITE_SPACE_NEUTRAL || d == U_BLOCK_SEPARATOR ||
           d == U_SEGMENT_SEPARATOR;
}

/* re.sub(r"\s+", " ", s). */
static void squeeze_spaces(u16buf *b)
{
    int32_t w = 0;
    for (int32_t i = 0; i < b->n;) {
        int32_t start = i;
        UChar32 c;
        U16_NEXT(b->s, i, b->n, c);
        if (!py_isspace(c)) {
            while (start < i) b->s[w++] = b->s[start++];
            continue;
        }
        while (i < b->n) { /* the rest of the run */
            int32_t k = i;
            U16_NEXT(b->s, k, b->n, c);
            if (!py_isspace(c)) break;
            i = k;
        }
        b->s[w++] = ' ';
    }
    b->n = w;
}

static void whisper_basic(u16buf *b)
{
    apply(b, lower_root);
    drop_spans(b, "<[", ">]", ">]", 0);
    drop_spans(b, "(", ")", ")", 1);
    apply(b, nfkc);
    symbols_to_spaces(b);
    apply(b, lower_root);
    squeeze_spaces(b);
}

char *text_clean(const int *kinds, size_t n, const char *utf8)
{
    UErrorCode st = U_ZERO_ERROR;
    u16buf b = {0};
    int32_t len = (int32_t)strlen(utf8), need = 0;
    u_strFromUTF8(NULL, 0, &need, utf8, len, &st);
    if (st != U_BUFFER_OVERFLOW_ERROR && U_FAILURE(st)) return NULL;
    u16_reserve(&b, need + 1);
    st = U_ZERO_ERROR;
    u_strFromUTF8(b.s, b.cap, &b.n, utf8, len, &st);
    if (U_FAILURE(st)) {
        free(b.s);
        return NULL;
    }
    for (size_t k = 0; k < n; k++) {
        ESP_CHECK(kinds[k] == TEXT_CLEANER_WHISPER_BASIC);
        whisper_basic(&b);
    }
    st = U_ZERO_ERROR;
    u_strToUTF8(NULL, 0, &need, b.s, b.n, &st);
    ESP_CHECK(st == U_BUFFER_OVERFLOW_ERROR || U_SUCCESS(st));
    char *out = xmalloc((size_t)need + 1);
    st = U_ZERO_ERROR;
    u_strToUTF8(out, need + 1, NULL, b.s, b.n, &st);
    ESP_CHECK(U_SUCCESS(st));
    free(b.s);
    return out;
}
