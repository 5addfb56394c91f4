/*
 * test_common.h - what the native tests that include it share: a failure
 * count with a CHECK that prints the first 20 failures, and a xorshift
 * generator (fixed seed: every run draws the same inputs).
 */
#ifndef KWK_TEST_COMMON_H
#define KWK_TEST_COMMON_H

#include <stdint.h>
#include <stdio.h>

static int failures;
#define CHECK(cond, ...)                                                      \
    do {                                                                      \
        if (!(cond)) {                                                        \
            if (failures++ < 20) { printf(__VA_ARGS__); printf("\n"); }       \
        }                                                                     \
    } while (0)

static uint64_t state = 88172645463325252ull;
static uint64_t next(void)
{
    state ^= state << 13; state ^= state >> 7; state ^= state << 17;
    return state;
}
/* uniform in [0, 1) */
static double uniform(void) { return (double)(next() >> 11) * 0x1p-53; }

#endif
