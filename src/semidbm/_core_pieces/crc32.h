/* CRC-32 as zlib computes it (reflected polynomial 0xEDB88320), for the
 * compiled kernel.
 *
 * Two ways, same results:
 * - tables, eight bytes a step: everywhere, and for short inputs;
 * - on x86 processors with carry-less multiplication (PCLMULQDQ, checked
 *   at run time), 16-byte blocks are folded forward: a block B followed
 *   by D more bits of data is worth B * x^D, and modulo the polynomial
 *   that product is the XOR of its two 64-bit halves times precomputed
 *   constants. What is left, one block, goes through the tables.
 *
 * semidbm_crc32_init() must run once before semidbm_crc32().
 */
#ifndef SEMIDBM_CRC32_H
#define SEMIDBM_CRC32_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

static uint32_t semidbm_crc_table[8][256];

static uint32_t semidbm_load_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

/* Continue the raw CRC register (no inversion) over size bytes. */
static uint32_t semidbm_crc_tables(uint32_t crc, const unsigned char *p, size_t size)
{
    uint32_t low, high;
    while (size >= 8) {
        low = semidbm_load_le32(p) ^ crc;
        high = semidbm_load_le32(p + 4);
        crc = semidbm_crc_table[7][low & 0xFF] ^ semidbm_crc_table[6][(low >> 8) & 0xFF] ^
              semidbm_crc_table[5][(low >> 16) & 0xFF] ^ semidbm_crc_table[4][low >> 24] ^
              semidbm_crc_table[3][high & 0xFF] ^ semidbm_crc_table[2][(high >> 8) & 0xFF] ^
              semidbm_crc_table[1][(high >> 16) & 0xFF] ^ semidbm_crc_table[0][high >> 24];
        p += 8;
        size -= 8;
    }
    while (size--) {
        crc = (crc >> 8) ^ semidbm_crc_table[0][(crc ^ *p++) & 0xFF];
    }
    return crc;
}

#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(_MSC_VER))
#define SEMIDBM_CRC_FOLD 1

#include <emmintrin.h>
#include <wmmintrin.h>
#ifdef _MSC_VER
#include <intrin.h>
#define SEMIDBM_CLMUL_TARGET
#else
#define SEMIDBM_CLMUL_TARGET __attribute__((target("pclmul,sse2")))
#endif

static int semidbm_have_clmul = 0;

/* Constants: bit-reversed (x^e mod P) in 64 bits. Folding by 4 blocks uses
 * e = 575 for the low half and 511 for the high half; by one block, 191
 * and 127. (One less than the distance, since a carry-less product of two
 * bit-reversed numbers comes out one place short.) */
SEMIDBM_CLMUL_TARGET
static __m128i semidbm_fold(__m128i block, __m128i constants)
{
    return _mm_xor_si128(_mm_clmulepi64_si128(block, constants, 0x00),
                         _mm_clmulepi64_si128(block, constants, 0x11));
}

SEMIDBM_CLMUL_TARGET
static uint32_t semidbm_crc_folded(uint32_t crc, const unsigned char *p, size_t size)
{
    const __m128i by_four = _mm_set_epi64x((long long)0xCAD38E8F00000000ULL,
                                           (long long)0x653D982200000000ULL);
    const __m128i by_one = _mm_set_epi64x((long long)0x9BA54C6F00000000ULL,
                                          (long long)0x65673B4600000000ULL);
    __m128i x0, x1, x2, x3;
    unsigned char rest[16];

    x0 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p), _mm_cvtsi32_si128((int)crc));
    p += 16;
    size -= 16;
    if (size >= 48) {
        x1 = _mm_loadu_si128((const __m128i *)p);
        x2 = _mm_loadu_si128((const __m128i *)(p + 16));
        x3 = _mm_loadu_si128((const __m128i *)(p + 32));
        p += 48;
        size -= 48;
        while (size >= 64) {
            x0 = _mm_xor_si128(semidbm_fold(x0, by_four), _mm_loadu_si128((const __m128i *)p));
            x1 = _mm_xor_si128(semidbm_fold(x1, by_four),
                               _mm_loadu_si128((const __m128i *)(p + 16)));
            x2 = _mm_xor_si128(semidbm_fold(x2, by_four),
                               _mm_loadu_si128((const __m128i *)(p + 32)));
            x3 = _mm_xor_si128(semidbm_fold(x3, by_four),
                               _mm_loadu_si128((const __m128i *)(p + 48)));
            p += 64;
            size -= 64;
        }
        x0 = _mm_xor_si128(semidbm_fold(x0, by_one), x1);
        x0 = _mm_xor_si128(semidbm_fold(x0, by_one), x2);
        x0 = _mm_xor_si128(semidbm_fold(x0, by_one), x3);
    }
    while (size >= 16) {
        x0 = _mm_xor_si128(semidbm_fold(x0, by_one), _mm_loadu_si128((const __m128i *)p));
        p += 16;
        size -= 16;
    }
    _mm_storeu_si128((__m128i *)rest, x0);
    crc = semidbm_crc_tables(0, rest, 16);
    return semidbm_crc_tables(crc, p, size);
}

static void semidbm_detect_clmul(void)
{
#ifdef _MSC_VER
    int info[4];
    __cpuid(info, 1);
    semidbm_have_clmul = (info[2] >> 1) & 1;
#else
    __builtin_cpu_init();
    semidbm_have_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse2");
#endif
}

#endif /* x86-64 */

static void semidbm_crc32_init(void)
{
    uint32_t value;
    int byte, bit, step;
    for (byte = 0; byte < 256; byte++) {
        value = (uint32_t)byte;
        for (bit = 0; bit < 8; bit++) {
            value = (value >> 1) ^ ((value & 1) ? 0xEDB88320u : 0);
        }
        semidbm_crc_table[0][byte] = value;
    }
    for (byte = 0; byte < 256; byte++) {
        for (step = 1; step < 8; step++) {
            value = semidbm_crc_table[step - 1][byte];
            semidbm_crc_table[step][byte] = (value >> 8) ^ semidbm_crc_table[0][value & 0xFF];
        }
    }
#ifdef SEMIDBM_CRC_FOLD
    semidbm_detect_clmul();
#endif
}

/* zlib's crc32(crc, data, size): start with crc = 0. */
static uint32_t semidbm_crc32(uint32_t crc, const char *data, size_t size)
{
    const unsigned char *p = (const unsigned char *)data;
    crc = ~crc;
#ifdef SEMIDBM_CRC_FOLD
    if (size >= 32 && semidbm_have_clmul) {
        return ~semidbm_crc_folded(crc, p, size);
    }
#endif
    return ~semidbm_crc_tables(crc, p, size);
}

#endif
