/*
 * test_batch_median.c - the parts of the eight-row median (batch_median.h)
 * that the API tests reach only through their results:
 *   - the constant comparator tables for rows of 9 and 25 equal what
 *     bm_select_pairs derives from the row network;
 *   - bm_select8 (keys-only network + index by rank) picks, in every row,
 *     the index the stable network puts at rank (len-1)/2, for rows of
 *     2..64 with all different, few and all equal keys, and refuses a batch
 *     holding a NaN key;
 *   - batch_load's transposing load of contiguous 4-byte rows gives every
 *     key kwk_key_at gives (both zero signs, NaN payloads, infinities,
 *     denormals, integer extremes; ascending and flipped), rows of 8..64 at
 *     unaligned addresses, with red zones after the last row.
 * AVX2 only (the batch kernels need it); skipped on other CPUs.
 *
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Inative/include -o /tmp/t native/tests/test_batch_median.c
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,bmi,bmi2,popcnt"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,bmi,bmi2,popcnt")
#endif
#include "../src/batch_median.h"
#define HAVE_TEST 1

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint64_t rnd(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }
static long failures;
#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            if (++failures < 20) { printf("FAIL: " __VA_ARGS__); printf("\n"); } \
        }                                                                       \
    } while (0)

static void test_tables(void)
{
    kwk_net_pair all[KWK_BATCH_MAX_PAIRS];
    CHECK(kwk_net_pairs(KWK_BATCH_MEDIAN_MAX, all) <= BM_MAX_PAIRS, "BM_MAX_PAIRS too small");
    kwk_net_pair derived[KWK_BATCH_MAX_PAIRS];
    const struct { int len; const kwk_net_pair *table; int n; } t[] = {
        {9, BM_SELECT_9, (int)(sizeof BM_SELECT_9 / sizeof BM_SELECT_9[0])},
        {25, BM_SELECT_25, (int)(sizeof BM_SELECT_25 / sizeof BM_SELECT_25[0])},
    };
    for (int i = 0; i < 2; ++i) {
        const int n = bm_select_pairs(t[i].len, (t[i].len - 1) / 2, derived);
        CHECK(n == t[i].n && !memcmp(derived, t[i].table, (size_t)n * sizeof(kwk_net_pair)),
              "BM_SELECT_%d differs from bm_select_pairs (%d comparators derived)", t[i].len, n);
    }
}

/* keys of eight rows of len: kind 0 all different-ish, 1 few values, 2 all equal */
static void fill_keys(kwk_batch_slot *s, int len, int kind)
{
    for (int j = 0; j < len; ++j) {
        int32_t k[8];
        for (int l = 0; l < 8; ++l) {
            const uint64_t r = rnd();
            k[l] = kind == 0 ? (int32_t)r : kind == 1 ? (int32_t)(r % 3) - 1 : 7;
        }
        s[j].key = _mm256_loadu_si256((const __m256i *)k);
        s[j].idx = _mm256_set1_epi32(j);
    }
}

static void test_select(void)
{
    kwk_net_pair pairs[KWK_BATCH_MAX_PAIRS], sel[KWK_BATCH_MAX_PAIRS];
    static kwk_batch_slot slots[KWK_BATCH_MEDIAN_MAX], sorted[KWK_BATCH_MEDIAN_MAX];
    for (int len = 2; len <= KWK_BATCH_MEDIAN_MAX; ++len) {
        const int npairs = kwk_net_pairs(len, pairs);
        const int nsel = bm_select_pairs(len, (len - 1) / 2, sel);
        for (int trial = 0; trial < 60; ++trial) {
            fill_keys(slots, len, trial % 3);
            memcpy(sorted, slots, (size_t)len * sizeof slots[0]);
            batch_network_stable(sorted, pairs, npairs);
            int32_t idx[8];
            CHECK(bm_select8(slots, len, 1, INT32_MAX, sel, nsel, idx), "refused len %d", len);
            for (int l = 0; l < 8; ++l)
                CHECK(idx[l] == batch_index(sorted, (len - 1) / 2, l),
                      "len %d kind %d lane %d: index %d, stable rank gives %lld", len, trial % 3, l,
                      idx[l], (long long)batch_index(sorted, (len - 1) / 2, l));
            /* a NaN key (the largest) anywhere refuses the batch for floats only */
            int32_t *k = (int32_t *)&slots[(int)(rnd() % (uint64_t)len)].key;
            k[rnd() % 8] = INT32_MAX;
            CHECK(!bm_select8(slots, len, 1, INT32_MAX, sel, nsel, idx), "NaN not seen, len %d", len);
            CHECK(bm_select8(slots, len, 0, INT32_MAX, sel, nsel, idx), "integer keys refused, len %d", len);
        }
    }
}

static const uint32_t SPECIAL_F32[] = {
    0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00000u, 0x7F800001u,
    0xFFFFFFFFu, 0x00000001u, 0x80000001u, 0x007FFFFFu, 0x3F800000u, 0xBF800000u, 0x7F7FFFFFu};

static void test_load(void)
{
    enum { MAXLEN = KWK_BATCH_MEDIAN_MAX, RED = 64 };
    static uint8_t buf[8 * MAXLEN * 4 + 4 + RED];
    static kwk_batch_slot slots[MAXLEN];
    const int dtypes[] = {KWK_FLOAT32, KWK_INT32, KWK_UINT32};
    for (int d = 0; d < 3; ++d)
        for (int len = 8; len <= MAXLEN; ++len)
            for (int shift = 0; shift < 4; ++shift)
                for (int flipped = 0; flipped < 2; ++flipped) {
                    const int dt = dtypes[d];
                    uint8_t *base = buf + shift + (shift == 3); /* 0, 1, 2, 4 bytes in */
                    const size_t used = (size_t)8 * len * 4;
                    for (size_t i = 0; i < used; i += 4) {
                        const uint64_t r = rnd();
                        uint32_t v = (uint32_t)r;
                        if (r >> 61 == 0) v = SPECIAL_F32[(r >> 32) % (sizeof SPECIAL_F32 / 4)];
                        else if (r >> 61 == 1) v = (uint32_t)(r >> 32) & 0x8000000Fu;
                        memcpy(base + i, &v, 4);
                    }
                    memset(base + used, 0xA5, RED);
                    kwk_batch_src src;
                    /* rows in a shuffled order: the load must follow row[l] */
                    for (int l = 0; l < 8; ++l) src.row[l] = (const char *)base + (size_t)((l * 5) % 8) * len * 4;
                    src.step = 4;
                    src.adjacent = 0;
                    const uint32_t flip = flipped ? 0xFFFFFFFFu : 0;
                    batch_load(dt, &src, len, flip, slots);
                    for (int j = 0; j < len; ++j)
                        for (int l = 0; l < 8; ++l) {
                            const uint32_t want = ((uint32_t)kwk_key_at(dt, src.row[l] + 4 * j) ^ flip) ^ 0x80000000u;
                            const uint32_t got = ((const uint32_t *)&slots[j].key)[l];
                            CHECK(got == want, "load dt %d len %d slot %d lane %d: %08x want %08x", dt, len, j, l,
                                  got, want);
                            CHECK(((const int32_t *)&slots[j].idx)[l] == j, "load index");
                        }
                    for (int i = 0; i < RED; ++i) CHECK(base[used + i] == 0xA5, "red zone written");
                }
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif

int main(void)
{
#if defined(HAVE_TEST)
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx2")) {
        printf("skipped (no AVX2)\n");
        return 0;
    }
    test_tables();
    test_select();
    test_load();
    if (failures) {
        printf("%ld failures\n", failures);
        return 1;
    }
    printf("tables, selection and loads agree\n");
#else
    printf("skipped (not x86-64)\n");
#endif
    return 0;
}
