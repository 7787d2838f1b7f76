/* CRC-32 as zlib computes it (reflected polynomial 0xEDB88320), for the
 * compiled kernel.
 *
 * Three ways, same results:
 * - tables, eight bytes a step: everywhere, and on x86-64 for inputs under
 *   16 bytes;
 * - on x86-64 processors with carry-less multiplication (PCLMULQDQ, and
 *   SSSE3's byte shuffles, checked at run time), 16-byte blocks are folded forward: a block B followed
 *   by D more bits of data is worth B * x^D, and modulo the polynomial
 *   that product is the XOR of its two 64-bit halves times precomputed
 *   constants. The last block is then reduced to 32 bits by two more folds
 *   and a Barrett reduction, all carry-less products;
 * - on 64-bit ARM processors with the CRC32 instructions (checked at run
 *   time on Linux, or known at compile time), eight bytes an instruction:
 *   they compute this very polynomial.
 *
 * semidbm_crc32_init() must run once before semidbm_crc32(). The suite
 * compares every way a processor has against zlib's crc32
 * (semidbm_crc32_way), and tests/harness/crc_check.c does the same in C,
 * compiled for ARM and run under an emulator by the crc_arm nox session.
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
    if (size >= 4) {
        low = semidbm_load_le32(p) ^ crc;
        crc = semidbm_crc_table[3][low & 0xFF] ^ semidbm_crc_table[2][(low >> 8) & 0xFF] ^
              semidbm_crc_table[1][(low >> 16) & 0xFF] ^ semidbm_crc_table[0][low >> 24];
        p += 4;
        size -= 4;
    }
    while (size--) {
        crc = (crc >> 8) ^ semidbm_crc_table[0][(crc ^ *p++) & 0xFF];
    }
    return crc;
}

/* The processor's own way, if it has one (set by semidbm_crc32_init):
 * "clmul" or "armv8", or NULL. */
static const char *semidbm_crc_hardware = NULL;

#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(_MSC_VER))
#define SEMIDBM_CRC_CLMUL 1

#include <emmintrin.h>
#include <wmmintrin.h>
#ifdef _MSC_VER
#include <intrin.h>
#define SEMIDBM_CLMUL_TARGET
#else
#define SEMIDBM_CLMUL_TARGET __attribute__((target("pclmul,ssse3")))
#endif
#include <tmmintrin.h>

/* Shuffle masks for _mm_shuffle_epi8 (a byte of 0x80 makes a zero byte):
 * 16 bytes from semidbm_shifts + n move a block's first n bytes to its end,
 * zeros before them; from semidbm_shifts + 16 + n, its other 16 - n bytes
 * to its start, zeros after them. */
static const unsigned char semidbm_shifts[48] = {
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
    0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80};
/* 16 bytes from semidbm_last_bytes + n keep a block's last n bytes. */
static const unsigned char semidbm_last_bytes[32] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
    0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF};

/* Constants: bit-reversed (x^e mod P) in 64 bits. Folding by 4 blocks uses
 * e = 575 for the low half and 511 for the high half; by one block, 191
 * and 127; the reduction of the last block, 95 and 63. (One less than the
 * distance, since a carry-less product of two bit-reversed numbers comes
 * out one place short.) */
SEMIDBM_CLMUL_TARGET
static __m128i semidbm_fold(__m128i block, __m128i constants)
{
    return _mm_xor_si128(_mm_clmulepi64_si128(block, constants, 0x00),
                         _mm_clmulepi64_si128(block, constants, 0x11));
}

/* The raw CRC register of a message whose last 128 bits, bit-reversed, are
 * x (the bits before them already folded in), i.e. x * x^32 mod P.
 * In polynomials, with x = H * x^64 + L: x * x^32 = H * x^96 + L * x^32,
 * congruent to a 96-bit A * x^64 + B with H * (x^96 mod P); that to a
 * 64-bit Q with A * (x^64 mod P); then Q mod P = Q + q * P with
 * q = floor(floor(Q / x^32) * floor(x^64 / P) / x^32) (Barrett). */
SEMIDBM_CLMUL_TARGET
static uint32_t semidbm_crc_reduce(__m128i x)
{
    /* Low: x^95 mod P; high: x^63 mod P (bit-reversed, 64 bits). */
    const __m128i shortening = _mm_set_epi64x((long long)0xB8BC676500000000ULL,
                                              (long long)0xCCAA009E00000000ULL);
    /* Low: floor(x^64 / P) * x^31; high: P (bit-reversed, 64 bits). */
    const __m128i barrett = _mm_set_epi64x((long long)0xEDB8832080000000ULL,
                                           (long long)0x1F7011641ULL);
    __m128i wide, quotient, product;
    uint64_t q_high;

    wide = _mm_xor_si128(_mm_clmulepi64_si128(x, shortening, 0x00),
                         _mm_slli_si128(_mm_srli_si128(x, 8), 4));
    wide = _mm_xor_si128(_mm_clmulepi64_si128(wide, shortening, 0x10),
                         _mm_unpackhi_epi64(_mm_setzero_si128(), wide));
    q_high = (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(wide, wide));
    quotient = _mm_clmulepi64_si128(_mm_cvtsi64_si128((long long)(q_high << 32)), barrett, 0x00);
    product = _mm_clmulepi64_si128(quotient, barrett, 0x10);
    return (uint32_t)((((uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(product, product)) << 1) ^
                       q_high) >> 32);
}

/* Continue the raw CRC register over size >= 16 bytes. */
SEMIDBM_CLMUL_TARGET
static uint32_t semidbm_crc_folded(uint32_t crc, const unsigned char *p, size_t size)
{
    const __m128i by_four = _mm_set_epi64x((long long)0xCAD38E8F00000000ULL,
                                           (long long)0x653D982200000000ULL);
    const __m128i by_one = _mm_set_epi64x((long long)0x9BA54C6F00000000ULL,
                                          (long long)0x65673B4600000000ULL);
    __m128i x0, x1, x2, x3;

    x0 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p), _mm_cvtsi32_si128((int)crc));
    p += 16;
    size -= 16;
    if (size >= 112) {
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
    if (size) {
        /* The last size bytes shift in: the block's first size bytes, as a
         * block of their own (zeros first), fold over the 16 that follow
         * them, which are the block's other bytes and then the last ones
         * (the end of the last 16 bytes of the input, which has at least
         * 16). Byte shifts by size are shuffles through semidbm_shifts. */
        x1 = _mm_shuffle_epi8(x0, _mm_loadu_si128((const __m128i *)(semidbm_shifts + size)));
        x0 = _mm_shuffle_epi8(x0, _mm_loadu_si128((const __m128i *)(semidbm_shifts + 16 + size)));
        x2 = _mm_and_si128(_mm_loadu_si128((const __m128i *)(p + size - 16)),
                           _mm_loadu_si128((const __m128i *)(semidbm_last_bytes + size)));
        x0 = _mm_xor_si128(_mm_xor_si128(semidbm_fold(x1, by_one), x0), x2);
    }
    return semidbm_crc_reduce(x0);
}

static void semidbm_detect_crc_hardware(void)
{
    int have;
#ifdef _MSC_VER
    int info[4];
    __cpuid(info, 1);
    have = ((info[2] >> 1) & 1) && ((info[2] >> 9) & 1);
#else
    __builtin_cpu_init();
    have = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("ssse3");
#endif
    semidbm_crc_hardware = have ? "clmul" : NULL;
}

#define semidbm_crc_hardware_way semidbm_crc_folded
/* The folds start from one whole block. */
#define SEMIDBM_CRC_HARDWARE_TAKES(size) ((size) >= 16)

#elif defined(__aarch64__) && defined(__GNUC__) && \
    (defined(__ARM_FEATURE_CRC32) || defined(__linux__)) && \
    defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define SEMIDBM_CRC_ARMV8 1

#ifdef __ARM_FEATURE_CRC32
#define SEMIDBM_ARMV8_TARGET
#elif defined(__clang__)
#define SEMIDBM_ARMV8_TARGET __attribute__((target("crc")))
#else
#define SEMIDBM_ARMV8_TARGET __attribute__((target("+crc")))
#endif
/* The instructions: clang's builtins (its arm_acle.h declared __crc32d and
 * the others only where the whole build has them, before clang 16), GCC's
 * arm_acle.h (which enables them for its own declarations). */
#ifdef __clang__
#define semidbm_crc32x(crc, word) __builtin_arm_crc32d(crc, word)
#define semidbm_crc32w(crc, word) __builtin_arm_crc32w(crc, word)
#define semidbm_crc32b(crc, byte) __builtin_arm_crc32b(crc, byte)
#else
#include <arm_acle.h>
#define semidbm_crc32x(crc, word) __crc32d(crc, word)
#define semidbm_crc32w(crc, word) __crc32w(crc, word)
#define semidbm_crc32b(crc, byte) __crc32b(crc, byte)
#endif
#ifndef __ARM_FEATURE_CRC32
#include <sys/auxv.h>
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif
#endif

/* Continue the raw CRC register over size bytes, with the CRC32X, CRC32W
 * and CRC32B instructions (zlib's polynomial, the register as it is). */
SEMIDBM_ARMV8_TARGET
static uint32_t semidbm_crc_armv8(uint32_t crc, const unsigned char *p, size_t size)
{
    uint64_t word;
    uint32_t half;
    while (size >= 8) {
        memcpy(&word, p, 8);
        crc = semidbm_crc32x(crc, word);
        p += 8;
        size -= 8;
    }
    if (size >= 4) {
        memcpy(&half, p, 4);
        crc = semidbm_crc32w(crc, half);
        p += 4;
        size -= 4;
    }
    while (size--) {
        crc = semidbm_crc32b(crc, *p++);
    }
    return crc;
}

static void semidbm_detect_crc_hardware(void)
{
#ifdef __ARM_FEATURE_CRC32
    semidbm_crc_hardware = "armv8";
#else
    semidbm_crc_hardware = (getauxval(AT_HWCAP) & HWCAP_CRC32) ? "armv8" : NULL;
#endif
}

#define semidbm_crc_hardware_way semidbm_crc_armv8
#define SEMIDBM_CRC_HARDWARE_TAKES(size) 1

#endif /* the processor's own way */

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
#ifdef semidbm_crc_hardware_way
    semidbm_detect_crc_hardware();
#endif
}

/* zlib's crc32(crc, data, size): start with crc = 0. */
static uint32_t semidbm_crc32(uint32_t crc, const char *data, size_t size)
{
    const unsigned char *p = (const unsigned char *)data;
    crc = ~crc;
#ifdef semidbm_crc_hardware_way
    if (SEMIDBM_CRC_HARDWARE_TAKES(size) && semidbm_crc_hardware != NULL) {
        return ~semidbm_crc_hardware_way(crc, p, size);
    }
#endif
    return ~semidbm_crc_tables(crc, p, size);
}

/* The same through one way: 0 the tables, 1 the processor's own, for the
 * tests. Sets *found to 0 (and returns 0) where this processor has no way 1
 * or does not take it for size bytes. */
static uint32_t semidbm_crc32_way(int way, uint32_t crc, const char *data, size_t size,
                                  int *found)
{
    const unsigned char *p = (const unsigned char *)data;
    *found = 1;
    if (way == 0) {
        return ~semidbm_crc_tables(~crc, p, size);
    }
#ifdef semidbm_crc_hardware_way
    if (semidbm_crc_hardware != NULL && SEMIDBM_CRC_HARDWARE_TAKES(size)) {
        return ~semidbm_crc_hardware_way(~crc, p, size);
    }
#endif
    *found = 0;
    return 0;
}

#endif
