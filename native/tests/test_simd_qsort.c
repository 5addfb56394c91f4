/*
 * test_simd_qsort.c - the quicksorts of bare u64 / u32 keys, AVX-512
 * (simd_qsort.h) and AVX2 (simd_qsort_avx2.h), against the C library's
 * qsort: every length 0..2100 (the in-register base case and the first
 * partitions), lengths around the partition's sizes, and a few big rows;
 * input kinds with repeated keys (all equal, two values, few values,
 * sorted, reversed, organ pipe, extremes); the heap sort fallback forced on
 * its own; the partial sorts (simd_qsort_*_first: the m smallest to the
 * front, in order, the rest a permutation of the others) for several m
 * per row; the selections (simd_select_*: the key of rank r, the row left
 * a permutation) for several r per row; the float64 sort of the floats
 * themselves (simd_qsort_64f) on the same kinds.  Red zones before and
 * after each row are checked.  Each version
 * runs where the CPU has its instructions (skipped otherwise).
 *
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -o /tmp/test_simd_qsort native/tests/test_simd_qsort.c
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ref_sort.h"

#if defined(__x86_64__) && defined(__GNUC__)
/* the AVX2 version under its own names (simd_qsort.h includes it again
 * below, where its include guard keeps it out) */
#define simd_qsort_64 avx2_qsort_64
#define simd_qsort_32 avx2_qsort_32
#define simd_qsort_64_first avx2_qsort_64_first
#define simd_qsort_32_first avx2_qsort_32_first
#define simd_qsort_64_biased avx2_qsort_64_biased
#define simd_qsort_32_biased avx2_qsort_32_biased
#define simd_select_64 avx2_select_64
#define simd_select_32 avx2_select_32
#define simd_qsort_64_par avx2_qsort_64_par
#define simd_qsort_32_par avx2_qsort_32_par
#define simd_qsort_64_biased_par avx2_qsort_64_biased_par
#define simd_qsort_32_biased_par avx2_qsort_32_biased_par
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,popcnt"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,popcnt")
#endif
#include "../src/simd_qsort_avx2.h"
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#undef simd_qsort_64
#undef simd_qsort_32
#undef simd_qsort_64_first
#undef simd_qsort_32_first
#undef simd_qsort_64_biased
#undef simd_qsort_32_biased
#undef simd_select_64
#undef simd_select_32
#undef simd_qsort_64_par
#undef simd_qsort_32_par
#undef simd_qsort_64_biased_par
#undef simd_qsort_32_biased_par
#undef KWK_SIMD_QSORT64_MAX_N
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,popcnt"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,popcnt")
#endif
#include "../src/simd_qsort.h"
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif

#if defined(KWK_HAVE_SIMD_QSORT)
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

enum { K_RANDOM, K_EQUAL, K_TWO, K_FEW, K_SORTED, K_REVERSED, K_ORGAN, K_EXTREME, K_SMALLRANGE, NKINDS };
static const char *KIND_NAMES[NKINDS] = {"random", "equal", "two", "few", "sorted", "reversed", "organ", "extreme", "smallrange"};

static uint64_t key_of(int kind, int64_t i, int64_t n, uint64_t c)
{
    switch (kind) {
    case K_RANDOM: return rnd();
    case K_EQUAL: return c;
    case K_TWO: return rnd() & 1 ? c : c + 1;
    case K_FEW: return c + rnd() % 5;
    case K_SORTED: return (uint64_t)i * 3;
    case K_REVERSED: return (uint64_t)(n - i);
    case K_ORGAN: return (uint64_t)(i < n / 2 ? i : n - i);
    case K_EXTREME: { const uint64_t r = rnd() % 4; return r == 0 ? 0 : r == 1 ? ~0ull : r == 2 ? ~0ull - 1 : rnd(); }
    default: return rnd() % 1000;
    }
}


enum { RED = 32 };
static long failures, checks;

/* One version's entry points: the sorts and their recursions (given
 * depth 0, the heap sort alone). */
typedef struct {
    const char *name;
    void (*sort64)(uint64_t *, int64_t);
    void (*sort32)(uint32_t *, int64_t);
    void (*rec64)(uint64_t *, int64_t, int);
    void (*rec32)(uint32_t *, int64_t, int);
    void (*first64)(uint64_t *, int64_t, int64_t);
    void (*first32)(uint32_t *, int64_t, int64_t);
    uint64_t (*select64)(uint64_t *, int64_t, int64_t); /* NULL: not checked */
    uint32_t (*select32)(uint32_t *, int64_t, int64_t);
    /* a long row cut into ranges sorted by `run` (values_sort.h's rows on
     * several threads) */
    void (*par64)(uint64_t *, int64_t, int, kwk_parts_fn);
    void (*par32)(uint32_t *, int64_t, int, kwk_parts_fn);
} version;

/* kwk_parts_fn running the parts one after another, last first (the
 * library's runs them side by side: every part must stand alone) */
static void run_serially(void (*part)(void *, int), void *ctx, int parts)
{
    for (int p = parts - 1; p >= 0; --p) part(ctx, p);
}
static int g_parts = 2; /* the parts mode 4 asks for */

/* The AVX2 version's recursion works on biased keys (x ^ top bit): its
 * heap sort alone, with the bias its entry point applies. */
static void avx2_heap64(uint64_t *a, int64_t n, int depth)
{
    for (int64_t i = 0; i < n; ++i) a[i] ^= 1ull << 63;
    qa64_rec(a, n, depth);
    for (int64_t i = 0; i < n; ++i) a[i] ^= 1ull << 63;
}
static void avx2_heap32(uint32_t *a, int64_t n, int depth)
{
    for (int64_t i = 0; i < n; ++i) a[i] ^= 1u << 31;
    qa32_rec(a, n, depth);
    for (int64_t i = 0; i < n; ++i) a[i] ^= 1u << 31;
}

/* The AVX-512 version's signed instantiation (simd_qsort_*_biased, qs64s_*,
 * qs32s_*: values_sort.h's biased keys) checked through the same unsigned
 * cases: keys biased on the way in, unbiased on the way out. */
#define BIAS_WRAP(NAME, T, TOP, PARAMS, CALL)                                \
    static void NAME PARAMS                                                   \
    {                                                                         \
        for (int64_t i = 0; i < n; ++i) a[i] ^= (TOP);                        \
        CALL;                                                                 \
        for (int64_t i = 0; i < n; ++i) a[i] ^= (TOP);                        \
    }
BIAS_WRAP(s512_sort64, uint64_t, 1ull << 63, (uint64_t *a, int64_t n), simd_qsort_64_biased(a, n))
BIAS_WRAP(s512_sort32, uint32_t, 1u << 31, (uint32_t *a, int64_t n), simd_qsort_32_biased(a, n))
BIAS_WRAP(s512_heap64, uint64_t, 1ull << 63, (uint64_t *a, int64_t n, int depth),
          qs64s_rec((int64_t *)(void *)a, n, depth))
BIAS_WRAP(s512_heap32, uint32_t, 1u << 31, (uint32_t *a, int64_t n, int depth),
          qs32s_rec((int32_t *)(void *)a, n, depth))
BIAS_WRAP(s512_first64, uint64_t, 1ull << 63, (uint64_t *a, int64_t n, int64_t m),
          simd_qsort_64s_first((int64_t *)(void *)a, n, m))
BIAS_WRAP(s512_first32, uint32_t, 1u << 31, (uint32_t *a, int64_t n, int64_t m),
          simd_qsort_32s_first((int32_t *)(void *)a, n, m))
BIAS_WRAP(s512_par64, uint64_t, 1ull << 63, (uint64_t *a, int64_t n, int parts, kwk_parts_fn run),
          simd_qsort_64_biased_par(a, n, parts, run))
BIAS_WRAP(s512_par32, uint32_t, 1u << 31, (uint32_t *a, int64_t n, int parts, kwk_parts_fn run),
          simd_qsort_32_biased_par(a, n, parts, run))
#undef BIAS_WRAP

static const version VERSIONS[] = {
    {"avx2", avx2_qsort_64, avx2_qsort_32, avx2_heap64, avx2_heap32, avx2_qsort_64_first,
     avx2_qsort_32_first, avx2_select_64, avx2_select_32, avx2_qsort_64_par, avx2_qsort_32_par},
    {"avx512", simd_qsort_64, simd_qsort_32, qs64_rec, qs32_rec, simd_qsort_64_first,
     simd_qsort_32_first, simd_select_64, simd_select_32, simd_qsort_64_par, simd_qsort_32_par},
    {"avx512 signed", s512_sort64, s512_sort32, s512_heap64, s512_heap32, s512_first64,
     s512_first32, NULL, NULL, s512_par64, s512_par32},
};

/* mode 0: the sort; 1: the heap sort alone (depth 0); 2: the partial sort
 * of the first m (the rest then sorted by the full sort, so the row must
 * still hold every key once); 3: the selection of rank m (the row then
 * sorted by the full sort, likewise); 4: the sort cut into g_parts ranges */
static void check_m(const version *ver, int kind, int64_t n, int mode, int64_t m)
{
    uint64_t *b64 = malloc((size_t)(n + 2 * RED) * 8), *r64 = malloc((size_t)(n + 1) * 8);
    uint32_t *b32 = malloc((size_t)(n + 2 * RED) * 4), *r32 = malloc((size_t)(n + 1) * 4);
    const uint64_t c = rnd();
    for (int64_t i = 0; i < RED; ++i) {
        b64[i] = b64[RED + n + i] = 0xA5A5A5A5A5A5A5A5ull + (uint64_t)i;
        b32[i] = b32[RED + n + i] = 0xA5A5A5A5u + (uint32_t)i;
    }
    for (int64_t i = 0; i < n; ++i) {
        const uint64_t k = key_of(kind, i, n, c);
        r64[i] = b64[RED + i] = k;
        r32[i] = b32[RED + i] = (uint32_t)(k ^ (k >> 32));
    }
    ref_sort_u64(r64, n);
    ref_sort_u32(r32, n);
    if (mode == 0) {
        ver->sort64(b64 + RED, n);
        ver->sort32(b32 + RED, n);
    } else if (mode == 2) {
        ver->first64(b64 + RED, n, m);
        ver->first32(b32 + RED, n, m);
        const int head64 = memcmp(b64 + RED, r64, (size_t)m * 8) != 0;
        const int head32 = memcmp(b32 + RED, r32, (size_t)m * 4) != 0;
        ver->sort64(b64 + RED + m, n - m);
        ver->sort32(b32 + RED + m, n - m);
        if (head64) b64[RED] = ~r64[0]; /* fail below */
        if (head32) b32[RED] = ~r32[0];
    } else if (mode == 4) {
        ver->par64(b64 + RED, n, g_parts, run_serially);
        ver->par32(b32 + RED, n, g_parts, run_serially);
    } else if (mode == 3) {
        const int wrong64 = ver->select64(b64 + RED, n, m) != r64[m];
        const int wrong32 = ver->select32(b32 + RED, n, m) != r32[m];
        ver->sort64(b64 + RED, n);
        ver->sort32(b32 + RED, n);
        if (wrong64) b64[RED] = ~r64[0]; /* fail below */
        if (wrong32) b32[RED] = ~r32[0];
    } else {
        ver->rec64(b64 + RED, n, 0);
        ver->rec32(b32 + RED, n, 0);
    }
    int bad64 = memcmp(b64 + RED, r64, (size_t)n * 8) != 0, bad32 = memcmp(b32 + RED, r32, (size_t)n * 4) != 0;
    for (int64_t i = 0; i < RED; ++i) {
        bad64 |= b64[i] != 0xA5A5A5A5A5A5A5A5ull + (uint64_t)i || b64[RED + n + i] != 0xA5A5A5A5A5A5A5A5ull + (uint64_t)i;
        bad32 |= b32[i] != 0xA5A5A5A5u + (uint32_t)i || b32[RED + n + i] != 0xA5A5A5A5u + (uint32_t)i;
    }
    checks += 2;
    if (bad64 && failures++ < 20) printf("FAIL %s u64 kind=%s n=%lld mode=%d m=%lld\n", ver->name, KIND_NAMES[kind], (long long)n, mode, (long long)m);
    if (bad32 && failures++ < 20) printf("FAIL %s u32 kind=%s n=%lld mode=%d m=%lld\n", ver->name, KIND_NAMES[kind], (long long)n, mode, (long long)m);
    free(b64); free(r64); free(b32); free(r32);
}

static void check(const version *ver, int kind, int64_t n, int mode)
{
    check_m(ver, kind, n, mode, 0);
}

/* the partial sort for m at both ends, around a third, and at random */
static void check_first(const version *ver, int kind, int64_t n)
{
    const int64_t ms[] = {0, 1, n / 3, n - 1, n, n ? (int64_t)(rnd() % (uint64_t)n) : 0};
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; ++i)
        if (ms[i] >= 0 && ms[i] <= n) check_m(ver, kind, n, 2, ms[i]);
}

/* the selection at both ends, the middle and at random (n >= 1) */
static void check_select(const version *ver, int kind, int64_t n)
{
    if (!ver->select64 || n < 1) return;
    const int64_t rs[] = {0, n - 1, n / 2, (int64_t)(rnd() % (uint64_t)n)};
    for (size_t i = 0; i < sizeof rs / sizeof rs[0]; ++i) check_m(ver, kind, n, 3, rs[i]);
}

/* simd_qsort_64f (float64 rows sorted as floats: values_sort.h) on
 * doubles made from the same kinds of keys by an order-preserving map into
 * the finite doubles, subnormals and both signs included, -0.0 folded into
 * +0.0 (the sort's preconditions: no NaN, one zero sign), against qsort
 * with the floats' compare; red zones around the row. */
static double f64_of(uint64_t u)
{
    uint64_t k = (1ull << 52) + (u >> 1); /* between -inf's key and +inf's */
    if (k == 0x7FFFFFFFFFFFFFFFull) k = 0x8000000000000000ull; /* -0.0 -> +0.0 */
    const uint64_t b = (k >> 63) ? k ^ (1ull << 63) : ~k;
    double d;
    memcpy(&d, &b, 8);
    return d;
}
static int cmpf64(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static void check_f64(int kind, int64_t n, int parts)
{
    double *buf = malloc((size_t)(n + 2 * RED) * 8), *ref = malloc((size_t)n * 8 + 8);
    const uint64_t c = rnd();
    for (int i = 0; i < RED; ++i) buf[i] = buf[RED + n + i] = -12345.0;
    for (int64_t i = 0; i < n; ++i) ref[i] = buf[RED + i] = f64_of(key_of(kind, i, n, c));
    if (parts) simd_qsort_64f_par(buf + RED, n, parts, run_serially);
    else simd_qsort_64f(buf + RED, n);
    qsort(ref, (size_t)n, 8, cmpf64);
    int bad = memcmp(buf + RED, ref, (size_t)n * 8) != 0;
    for (int i = 0; i < RED; ++i) bad |= buf[i] != -12345.0 || buf[RED + n + i] != -12345.0;
    ++checks;
    if (bad && failures++ < 10) printf("FAIL 64f %s n=%ld\n", KIND_NAMES[kind], (long)n);
    free(buf);
    free(ref);
}

int main(int argc, char **argv)
{
    ref_sort_self_check();
    const int step = argc > 1 ? atoi(argv[1]) : 1;
    /* rows longer than 20000 only up to this length (argument 2: 0 for
     * none; the default all, up to 3M) */
    const int64_t big = argc > 2 ? atoll(argv[2]) : INT64_MAX;
    const int avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
                       __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
    const int has[3] = {__builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt"), avx512, avx512};
    /* the AVX-512 versions once with each way the partition stores lanes
     * (qs_compress_memory_form: compress in a register, then to memory) */
    for (int run = 0; run < 5; ++run) {
        const int v = run == 0 ? 0 : 1 + (run - 1) / 2;
        const version *ver = &VERSIONS[v];
        if (!has[v]) {
            printf("%s: not on this CPU, skipped\n", ver->name);
            continue;
        }
        if (v > 0) qs_compress_memory_form = (run - 1) % 2;
        const char *form = v == 0 ? "" : qs_compress_memory_form ? ", compress to memory" : ", compress in a register";
        const long before = checks;
        for (int64_t n = 0; n <= 2100; n += (n < 600 ? 1 : step))
            for (int kind = 0; kind < NKINDS; ++kind) check(ver, kind, n, 0);
        static const int64_t SIZES[] = {4095, 4096, 4097, 10007, 65536, 100003, 1 << 20, 3000017};
        for (size_t s = 0; s < sizeof SIZES / sizeof SIZES[0]; ++s)
            if (SIZES[s] < 20000 || SIZES[s] <= big)
                for (int kind = 0; kind < NKINDS; ++kind) check(ver, kind, SIZES[s], 0);
        for (int64_t n = 0; n <= 700; n += 7)
            for (int kind = 0; kind < NKINDS; ++kind) check(ver, kind, n, 1);
        for (int64_t n = 0; n <= 3000; n += (n < 300 ? 1 : 37))
            for (int kind = 0; kind < NKINDS; ++kind) check_first(ver, kind, n);
        for (int kind = 0; kind < NKINDS; ++kind) check_first(ver, kind, big >= 100003 ? 100003 : 10007);
        for (int64_t n = 1; n <= 5000; n += (n < 300 ? 1 : 53))
            for (int kind = 0; kind < NKINDS; ++kind) check_select(ver, kind, n);
        for (int kind = 0; kind < NKINDS; ++kind) check_select(ver, kind, big >= 100003 ? 100003 : 10007);
        /* cut into ranges: up to QS_PAR_MAX of them, where a range is cut
         * (from QS_PAR_MIN), into ranges of one key, and asking for more */
        static const int64_t PAR_SIZES[] = {1000, 16383, 16384, 40000, 100003};
        static const int PARTS[] = {1, 2, 3, 5, 16, 64};
        for (size_t s = 0; s < sizeof PAR_SIZES / sizeof PAR_SIZES[0]; ++s)
            for (size_t p = 0; p < sizeof PARTS / sizeof PARTS[0]; ++p)
                for (int kind = 0; kind < NKINDS; ++kind) {
                    g_parts = PARTS[p];
                    if (PAR_SIZES[s] < 20000 || PAR_SIZES[s] <= big || p == 1) check(ver, kind, PAR_SIZES[s], 4);
                }
        printf("%s%s: %ld checks\n", ver->name, form, checks - before);
    }
    for (int form = 0; avx512 && form < 2; ++form) {
        qs_compress_memory_form = form;
        const long before = checks;
        for (int64_t n = 0; n <= 2100; n += (n < 600 ? 1 : step))
            for (int kind = 0; kind < NKINDS; ++kind) check_f64(kind, n, 0);
        static const int64_t SIZES[] = {4095, 4097, 65536, 1 << 20};
        for (size_t s = 0; s < sizeof SIZES / sizeof SIZES[0]; ++s)
            if (SIZES[s] < 20000 || SIZES[s] <= big)
                for (int kind = 0; kind < NKINDS; ++kind) check_f64(kind, SIZES[s], 0);
        for (int parts = 2; parts <= 5; parts += 3)
            for (int kind = 0; kind < NKINDS; ++kind) check_f64(kind, 40000, parts);
        printf("avx512 float64%s: %ld checks\n", form ? ", compress to memory" : ", compress in a register",
               checks - before);
    }
    printf("simd_qsort: %ld checks, %ld failures\n%s\n", checks, failures, failures ? "FAILED" : "ok");
    return failures != 0;
}
#else
int main(void)
{
    printf("not an x86-64 GCC/clang build: skipped\nok\n");
    return 0;
}
#endif
