/* Every way of src/semidbm/_core_pieces/crc32.h against CRC-32 computed a
 * bit at a time, for every length up to 600 bytes at each of 16 starting
 * alignments, and one input of a mebibyte, from several starting values.
 *
 *     cc -O2 -I src/semidbm tests/harness/crc_check.c -o crc_check
 *     ./crc_check [EXPECTED]
 *
 * EXPECTED, if given, is the name of the processor's own way that must
 * have been found ("clmul", "armv8"), or "none". The crc_arm nox session
 * builds this for 64-bit ARM and runs it under qemu-user, where the suite's
 * test of the same (tests/test_crc32.py) cannot run. Exit status 0: every
 * answer agreed and the expected way was there.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "_core_pieces/crc32.h"

/* zlib's crc32(crc, data, size), the slowest way there is: one bit a step. */
static uint32_t crc_by_bits(uint32_t crc, const unsigned char *p, size_t size)
{
    int bit;
    crc = ~crc;
    while (size--) {
        crc ^= *p++;
        for (bit = 0; bit < 8; bit++) {
            crc = (crc >> 1) ^ ((crc & 1) ? 0xEDB88320u : 0);
        }
    }
    return ~crc;
}

/* A fixed pseudo-random sequence (xorshift), so that a failure repeats. */
static uint32_t next_random(uint32_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 17;
    *state ^= *state << 5;
    return *state;
}

static int check(const unsigned char *p, size_t size, uint32_t start, int *hardware_used)
{
    uint32_t expected = crc_by_bits(start, p, size);
    int found, way, failures = 0;
    if (semidbm_crc32(start, (const char *)p, size) != expected) {
        fprintf(stderr, "semidbm_crc32: size %zu, start %08x\n", size, (unsigned)start);
        failures++;
    }
    for (way = 0; way < 2; way++) {
        uint32_t got = semidbm_crc32_way(way, start, (const char *)p, size, &found);
        if (found && got != expected) {
            fprintf(stderr, "way %d: size %zu, start %08x\n", way, size, (unsigned)start);
            failures++;
        }
        if (way == 1 && found) {
            *hardware_used = 1;
        }
    }
    return failures;
}

int main(int argc, char **argv)
{
    enum { SHORT = 600, LONG = 1 << 20 };
    unsigned char *data = malloc(LONG + 16);
    uint32_t state = 2463534242u, start;
    size_t size, at;
    int failures = 0, hardware_used = 0;
    const char *name;

    if (data == NULL) {
        return 2;
    }
    for (at = 0; at < LONG + 16; at++) {
        data[at] = (unsigned char)next_random(&state);
    }
    semidbm_crc32_init();
    name = semidbm_crc_hardware != NULL ? semidbm_crc_hardware : "none";
    for (size = 0; size <= SHORT; size++) {
        for (at = 0; at < 16; at++) {
            start = (at & 1) ? next_random(&state) : 0;
            failures += check(data + at, size, start, &hardware_used);
        }
    }
    failures += check(data + 3, LONG, next_random(&state), &hardware_used);
    printf("way: %s; hardware way used: %s; failures: %d\n", name,
           hardware_used ? "yes" : "no", failures);
    if (argc > 1 && (strcmp(argv[1], name) != 0 || hardware_used != (strcmp(name, "none") != 0))) {
        fprintf(stderr, "expected the way %s\n", argv[1]);
        return 1;
    }
    return failures != 0;
}
