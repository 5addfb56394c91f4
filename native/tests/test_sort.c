/*
 * test_sort.c - kwk_sort against simple references, every dtype, both
 * directions, both orders, both CPU targets.
 *
 *   every length 0..1100 (step 1; argv[1] thins it) and lengths around
 *   each switch point (16/17, 96/97, 256/257, 3072, 4096, 16384, 65536, 2^17...), ten input
 *   kinds.  ORDER_STABLE must equal a stable merge sort of the indices
 *   under an independent comparator (floats via double: NaN last, -0 ==
 *   +0).  ORDER_TORCH must be sorted, a permutation, carry the source bits,
 *   and equal the record emulation of std::sort (emu_std_sort, checked
 *   against torch) applied to (dense rank, index) records.  Output buffers
 *   have poisoned red zones before and after, checked afterwards.
 *
 * Build and run (also with -fsanitize=address,undefined -g):
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Inative/include -o /tmp/test_sort \
 *       native/tests/test_sort.c native/src/dispatch.c \
 *       native/src/targets/portable.c native/src/targets/avx2.c native/src/targets/avx512.c -lm && /tmp/test_sort
 *   (/tmp/test_sort STEP BIG: lengths above 300 in steps of STEP, BIG=0
 *   skips the lengths above 1100, BIG=2 thins those of 20000+; CI's runs:
 *   3 2 optimised, 16 0 under the sanitizers)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kwker.h"
#include "test_targets.h"
#include "../src/torch_order.h"
#include "../src/short_sort_network.h"

static uint64_t rng = 0x243F6A8885A308D3ull;
static uint64_t rnd(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

static const int ES[KWK_NUM_DTYPES] = {1, 1, 1, 2, 4, 8, 2, 4, 8, 2, 2, 4, 8};
static const char *NAMES[KWK_NUM_DTYPES] = {"bool", "uint8", "int8", "int16", "int32", "int64", "uint16",
                                            "uint32", "uint64", "float16", "bfloat16", "float32", "float64"};
static int is_float(int dt) { return dt >= KWK_FLOAT16; }

static uint64_t load_bits(const unsigned char *p, int es)
{
    /* little endian; fixed sizes, so loads rather than a memcpy call (the
     * check's inner loop compares every output element this way) */
    uint64_t v = 0;
    switch (es) {
    case 1: v = *p; break;
    case 2: memcpy(&v, p, 2); break;
    case 4: memcpy(&v, p, 4); break;
    default: memcpy(&v, p, 8); break;
    }
    return v;
}

static double half_to_double(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : (e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25));
    return (h & 0x8000) ? -v : v;
}

/* Independent comparison class: -1 less, 0 equal, 1 greater (ascending). */
typedef struct { int nan; double d; int64_t s; uint64_t u; } cval;
static cval cval_of(int dt, uint64_t b)
{
    cval c = {0, 0, 0, 0};
    switch (dt) {
    case KWK_BOOL: c.u = (b & 0xFF) != 0; break;
    case KWK_UINT8: case KWK_UINT16: case KWK_UINT32: case KWK_UINT64: c.u = b; break;
    case KWK_INT8: c.s = (int8_t)b; break;
    case KWK_INT16: c.s = (int16_t)b; break;
    case KWK_INT32: c.s = (int32_t)b; break;
    case KWK_INT64: c.s = (int64_t)b; break;
    case KWK_FLOAT16: c.d = half_to_double((uint16_t)b); break;
    case KWK_BFLOAT16: { uint32_t u = (uint32_t)b << 16; float f; memcpy(&f, &u, 4); c.d = f; break; }
    case KWK_FLOAT32: { uint32_t u = (uint32_t)b; float f; memcpy(&f, &u, 4); c.d = f; break; }
    default: { double f; memcpy(&f, &b, 8); c.d = f; break; }
    }
    if (is_float(dt) && isnan(c.d)) c.nan = 1;
    return c;
}
#define CMP_FLOAT(a, b) (((a).nan || (b).nan) ? (a).nan - (b).nan : ((a).d > (b).d) - ((a).d < (b).d))
#define CMP_SIGNED(a, b) (((a).s > (b).s) - ((a).s < (b).s))
#define CMP_UNSIGNED(a, b) (((a).u > (b).u) - ((a).u < (b).u))
static int is_signed_int(int dt) { return dt == KWK_INT8 || dt == KWK_INT16 || dt == KWK_INT32 || dt == KWK_INT64; }
static int ccmp(int dt, cval a, cval b)
{
    if (is_float(dt)) return CMP_FLOAT(a, b);
    if (is_signed_int(dt)) return CMP_SIGNED(a, b);
    return CMP_UNSIGNED(a, b);
}

/* stable merge sort of idx[0..n) by cv[] under direction.  The reference
 * costs more than the sorts it checks, so the comparison's class (float,
 * signed, unsigned: ccmp's branches) is chosen once per sort, not per
 * comparison (the same CMP_* macros as ccmp). */
static cval *g_cv; static int g_dt, g_desc;
static int before(int64_t x, int64_t y) /* strict: x goes before y */
{
    int c = ccmp(g_dt, g_cv[x], g_cv[y]);
    return g_desc ? c > 0 : c < 0;
}
/* sorts a[0..n) using t[0..n); insertion sort for up to 16 elements */
#define DEFINE_MERGE_SORT(name, CMP)                                                           \
    static void name(int64_t *a, int64_t *t, int64_t n, const cval *cv, int desc)               \
    {                                                                                           \
        if (n <= 16) {                                                                          \
            for (int64_t i = 1; i < n; ++i) {                                                   \
                const int64_t v = a[i];                                                         \
                int64_t j = i;                                                                  \
                for (; j > 0; --j) {                                                            \
                    const int c = CMP(cv[v], cv[a[j - 1]]);                                     \
                    if (!(desc ? c > 0 : c < 0)) break;                                         \
                    a[j] = a[j - 1];                                                            \
                }                                                                               \
                a[j] = v;                                                                       \
            }                                                                                   \
            return;                                                                             \
        }                                                                                       \
        const int64_t h = n / 2;                                                                \
        name(a, t, h, cv, desc);                                                                \
        name(a + h, t, n - h, cv, desc);                                                        \
        int64_t i = 0, j = h, k = 0;                                                            \
        while (i < h && j < n) {                                                                \
            const int c = CMP(cv[a[j]], cv[a[i]]);                                              \
            t[k++] = (desc ? c > 0 : c < 0) ? a[j++] : a[i++];                                  \
        }                                                                                       \
        while (i < h) t[k++] = a[i++];                                                          \
        memcpy(a, t, (size_t)j * sizeof(int64_t)); /* a[j..n) is already in place */            \
    }
DEFINE_MERGE_SORT(merge_sort_float, CMP_FLOAT)
DEFINE_MERGE_SORT(merge_sort_signed, CMP_SIGNED)
DEFINE_MERGE_SORT(merge_sort_unsigned, CMP_UNSIGNED)
static void merge_sort(int64_t *a, int64_t *t, int64_t n)
{
    if (is_float(g_dt)) merge_sort_float(a, t, n, g_cv, g_desc);
    else if (is_signed_int(g_dt)) merge_sort_signed(a, t, n, g_cv, g_desc);
    else merge_sort_unsigned(a, t, n, g_cv, g_desc);
}

/* value bits for a numeric level in the dtype */
static uint64_t from_double(int dt, double v)
{
    switch (dt) {
    case KWK_BOOL: return v != 0;
    case KWK_UINT8: return (uint8_t)(int64_t)fabs(v);
    case KWK_INT8: return (uint8_t)(int8_t)(int64_t)v;
    case KWK_INT16: return (uint16_t)(int16_t)(int64_t)v;
    case KWK_INT32: return (uint32_t)(int32_t)(int64_t)v;
    case KWK_INT64: return (uint64_t)(int64_t)v;
    case KWK_UINT16: return (uint16_t)(int64_t)fabs(v);
    case KWK_UINT32: return (uint32_t)(int64_t)fabs(v);
    case KWK_UINT64: return (uint64_t)(int64_t)fabs(v);
    case KWK_FLOAT16: { /* exact for small multiples of 1/4 below 512 */
        float f = (float)v; uint32_t u; memcpy(&u, &f, 4);
        uint16_t s = (uint16_t)((u >> 16) & 0x8000);
        if (f == 0) return s;
        int e = (int)((u >> 23) & 255) - 127 + 15;
        if (e <= 0) return s; /* not produced by the generators */
        if (e >= 31) return s | 0x7C00;
        return s | (uint16_t)(e << 10) | (uint16_t)((u >> 13) & 1023);
    }
    case KWK_BFLOAT16: { float f = (float)v; uint32_t u; memcpy(&u, &f, 4); return u >> 16; }
    case KWK_FLOAT32: { float f = (float)v; uint32_t u; memcpy(&u, &f, 4); return u; }
    default: { uint64_t u; memcpy(&u, &v, 8); return u; }
    }
}

static uint64_t nan_bits(int dt)
{
    uint64_t r = rnd();
    switch (dt) {
    case KWK_FLOAT16: return 0x7C01u | (r & 0x83FFu) | ((r >> 20) & 0x200);
    case KWK_BFLOAT16: return 0x7F81u | (r & 0x807Fu);
    case KWK_FLOAT32: return 0x7F800001u | (r & 0x807FFFFFu);
    default: return 0x7FF0000000000001ull | (r & 0x800FFFFFFFFFFFFFull);
    }
}

static uint64_t extreme_bits(int dt)
{
    int es = ES[dt];
    uint64_t mx = es == 8 ? ~0ull : ((1ull << (8 * es)) - 1);
    uint64_t choices[8];
    if (is_float(dt)) {
        double inf = INFINITY;
        choices[0] = from_double(dt, inf); choices[1] = from_double(dt, -inf);
        choices[2] = dt == KWK_FLOAT16 ? 0x7BFF : (dt == KWK_BFLOAT16 ? 0x7F7F : (dt == KWK_FLOAT32 ? 0x7F7FFFFF : 0x7FEFFFFFFFFFFFFFull));
        choices[3] = choices[2] | (1ull << (8 * es - 1));
        choices[4] = 1; /* smallest denormal */
        choices[5] = 1 | (1ull << (8 * es - 1));
        choices[6] = 0; choices[7] = 1ull << (8 * es - 1);
    } else {
        choices[0] = 0; choices[1] = mx; choices[2] = mx >> 1; choices[3] = (mx >> 1) + 1;
        choices[4] = 1; choices[5] = mx - 1; choices[6] = 2; choices[7] = (mx >> 1) - 1;
        if (dt == KWK_BOOL) for (int i = 0; i < 8; ++i) choices[i] &= 1;
    }
    return choices[rnd() % 8];
}

enum { K_RANDOM, K_EQUAL, K_TWO, K_SORTED, K_REVERSED, K_ORGAN, K_FEW, K_NAN, K_ZEROS, K_EXTREME,
       K_NEAR, K_RUNS, K_PERM, K_CLUSTER, K_DOMINANT, NKINDS };
static const char *KIND_NAMES[NKINDS] = {"random", "equal", "two", "sorted", "reversed", "organ", "few", "nan", "zeros", "extreme",
                                         "near", "runs", "perm", "cluster", "dominant"};

/* Whether position i of a row of n is one of those sort_kernels.h's tie
 * samples read (j * n / 64 and j * n / 256): K_CLUSTER keeps its cluster
 * away from them, so that the 32-bit word sort (words_sort_via32) takes
 * the row and meets a long run of keys equal in their leading bits. */
static int sampled_position(int64_t i, int64_t n)
{
    static const int64_t SAMPLES[2] = {64, 256};
    for (int s = 0; s < 2; ++s)
        for (int64_t j = i * SAMPLES[s] / (n ? n : 1); j <= i * SAMPLES[s] / (n ? n : 1) + 1; ++j)
            if (j < SAMPLES[s] && j * n / SAMPLES[s] == i) return 1;
    return 0;
}

static void fill(int dt, int kind, int64_t n, unsigned char *x)
{
    const int es = ES[dt];
    const uint64_t c0 = rnd(), c1 = rnd();
    for (int64_t i = 0; i < n; ++i) {
        uint64_t b;
        switch (kind) {
        case K_RANDOM: b = rnd(); if (dt == KWK_BOOL) b &= 1; break;
        case K_EQUAL: b = from_double(dt, (double)(c0 % 7)); break;
        case K_TWO: b = from_double(dt, (double)((rnd() & 1) ? 3 : 5)); break;
        case K_SORTED: b = from_double(dt, (double)(i / 3 % 120)); break;
        case K_REVERSED: b = from_double(dt, (double)((n - i) / 2 % 120)); break;
        case K_ORGAN: b = from_double(dt, (double)((i < n / 2 ? i : n - i) % 120)); break;
        case K_FEW: b = from_double(dt, (double)(rnd() % (1 + c1 % 8)) - 2.0); break;
        case K_NAN:
            b = is_float(dt) && rnd() % 3 == 0 ? nan_bits(dt) : from_double(dt, (double)(int64_t)(rnd() % 50) - 20.0);
            break;
        case K_ZEROS: {
            uint64_t r = rnd() % 5;
            /* a third of the rows hold -0.0 alone, a third +0.0 alone
             * (values-only sorts take those; both zeros go by index) */
            if (c0 % 3 < 2 && r < 2) r = c0 % 3;
            double v = r == 0 ? 0.0 : r == 1 ? -0.0 : r == 2 ? 0.25 : r == 3 ? -0.25 : -1.0;
            b = from_double(dt, v);
            break;
        }
        /* presorted rows (sort_kernels.h's runs merge and drop-merge):
         * ascending with 1 in 20 elements displaced anywhere, or 2-5
         * ascending runs one after another */
        case K_NEAR: b = from_double(dt, (double)(rnd() % 20 ? i : (int64_t)(rnd() % (uint64_t)n)) / 4.0); break;
        case K_RUNS: b = from_double(dt, (double)(i % (n / (int64_t)(2 + c1 % 4) + 1)) / 4.0); break;
        /* a random permutation of 0..n-1 (filled in below): integer keys
         * lo..lo + n - 1 each once take sort_kernels.h's direct placement */
        case K_PERM: b = from_double(dt, (double)i); break;
        /* keys spread over 31 (4-byte) or 40 (8-byte) bits, and half
         * of the unsampled positions in one cluster: keys equal but for
         * their last 10 bits (some exactly equal) */
        case K_CLUSTER:
            b = (!sampled_position(i, n) && rnd() % 2 == 0) ? (c0 & ~(uint64_t)0x3FF) | (rnd() & 0x3FF) : rnd();
            b &= es == 8 ? 0xFFFFFFFFFFull : 0x3FFFFFFFull;
            if (dt == KWK_BOOL) b &= 1;
            break;
        /* one value in 50-95% of the slots (sort_kernels.h's split
         * around a dominant key), the others random below and above it,
         * with ties among them; the value's place: anywhere, or the
         * row's tail (padding) */
        case K_DOMINANT: {
            const int64_t share = 10 + (int64_t)(c1 % 10); /* of 20 */
            const int dom = c0 % 2 ? (int64_t)(rnd() % 20) < share : i >= n - n * share / 20;
            b = dom ? from_double(dt, 3.0) : from_double(dt, (double)(int64_t)(rnd() % 200) / 8.0 - 10.0);
            if (dt == KWK_BOOL) b &= 1;
            break;
        }
        default: b = rnd() % 3 ? extreme_bits(dt) : rnd(); if (dt == KWK_BOOL) b &= 1; break;
        }
        memcpy(x + i * es, &b, (size_t)es);
    }
    if (kind == K_PERM) /* Fisher-Yates over the elements */
        for (int64_t i = n - 1; i > 0; --i) {
            const int64_t j = (int64_t)(rnd() % (uint64_t)(i + 1));
            unsigned char t[8];
            memcpy(t, x + i * es, (size_t)es);
            memcpy(x + i * es, x + j * es, (size_t)es);
            memcpy(x + j * es, t, (size_t)es);
        }
}

enum { RED = 64 };
static long failures, checks;

/* The targets checked (each case's reference is computed once and every
 * target checked against it: the references cost more than the sorts). */
static const char *g_targets[KWK_TEST_NTARGETS];
static int g_ntargets, g_ti;
static long g_checks[KWK_TEST_NTARGETS], g_failures[KWK_TEST_NTARGETS];
static void use_target(int ti)
{
    g_ti = ti;
    if (kwk_set_target(g_targets[ti]) != KWK_OK) abort(); /* was available in main */
}

static void fail(const char *what, int dt, int kind, int64_t n, int desc, int order)
{
    ++g_failures[g_ti];
    if (failures++ < 20)
        printf("FAIL %s: %s kind=%s n=%lld desc=%d order=%s target=%s\n", what, NAMES[dt], KIND_NAMES[kind],
               (long long)n, desc, order ? "torch" : "stable", kwk_target());
}

static void check_case(int dt, int kind, int64_t n)
{
    const int es = ES[dt];
    unsigned char *x = malloc((size_t)(n ? n : 1) * es);
    unsigned char *vbuf = malloc((size_t)n * es + 2 * RED);
    unsigned char *ibuf = malloc((size_t)n * 8 + 2 * RED);
    int64_t *ref = malloc((size_t)(n ? n : 1) * 8), *tmp = malloc((size_t)(n ? n : 1) * 8);
    cval *cv = malloc((size_t)(n ? n : 1) * sizeof(cval));
    kwk_kv *kv = malloc((size_t)(n ? n : 1) * sizeof(kwk_kv));
    fill(dt, kind, n, x);
    for (int64_t i = 0; i < n; ++i) cv[i] = cval_of(dt, load_bits(x + i * es, es));
    for (int desc = 0; desc < 2; ++desc) {
        g_cv = cv; g_dt = dt; g_desc = desc;
        for (int64_t i = 0; i < n; ++i) ref[i] = i;
        merge_sort(ref, tmp, n);
        int tie = 0;
        for (int64_t i = 1; i < n; ++i) tie |= !before(ref[i - 1], ref[i]);
        for (int order = 0; order < 2; ++order) {
            const int64_t *expect = ref;
            if (order == KWK_ORDER_TORCH && tie && n > KWK_STD_SORT_THRESHOLD) {
                /* (dense rank, index) records through the record emulation */
                for (int64_t i = 0, rank = 0; i < n; ++i) {
                    if (i > 0 && before(ref[i - 1], ref[i])) ++rank;
                    kv[ref[i]].key = (uint64_t)rank;
                    kv[ref[i]].idx = ref[i];
                }
                emu_std_sort(kv, n);
                for (int64_t i = 0; i < n; ++i) tmp[i] = kv[i].idx;
                expect = tmp;
            }
            for (int ti = 0; ti < g_ntargets; ++ti) {
                use_target(ti);
                memset(vbuf, 0xA5, (size_t)n * es + 2 * RED);
                memset(ibuf, 0x5A, (size_t)n * 8 + 2 * RED);
                int64_t *oi = (int64_t *)(ibuf + RED);
                unsigned char *ov = vbuf + RED;
                int st = kwk_sort(dt, x, 1, n, 1, n, 1, 1, ov, oi, n, 1, 1, desc, order);
                ++checks;
                ++g_checks[ti];
                if (n == 0) { if (st != KWK_OK && st != KWK_E_ARG) fail("status", dt, kind, n, desc, order); }
                else if (st != KWK_OK) { fail("status", dt, kind, n, desc, order); continue; }
                for (int r = 0; r < RED; ++r)
                    if (vbuf[r] != 0xA5 || vbuf[RED + n * es + r] != 0xA5 || ibuf[r] != 0x5A || ibuf[RED + n * 8 + r] != 0x5A) {
                        fail("red zone", dt, kind, n, desc, order);
                        break;
                    }
                if (n == 0) continue;
                int bad_idx = 0, bad_val = 0;
                for (int64_t i = 0; i < n; ++i) {
                    if (oi[i] != expect[i]) bad_idx = 1;
                    if (oi[i] < 0 || oi[i] >= n) { bad_idx = 1; break; }
                    if (load_bits(ov + i * es, es) != load_bits(x + oi[i] * es, es)) bad_val = 1;
                }
                if (bad_idx) fail("indices", dt, kind, n, desc, order);
                if (bad_val) fail("values", dt, kind, n, desc, order);
                /* indices only / values only */
                if ((n % 7) == 3) {
                    int64_t *oi2 = malloc((size_t)n * 8);
                    unsigned char *ov2 = malloc((size_t)n * es);
                    if (kwk_sort(dt, x, 1, n, 1, n, 1, 1, NULL, oi2, n, 1, 1, desc, order) != KWK_OK ||
                        memcmp(oi2, oi, (size_t)n * 8) != 0)
                        fail("indices-only", dt, kind, n, desc, order);
                    if (kwk_sort(dt, x, 1, n, 1, n, 1, 1, ov2, NULL, n, 1, 1, desc, order) != KWK_OK ||
                        memcmp(ov2, ov, (size_t)n * es) != 0)
                        fail("values-only", dt, kind, n, desc, order);
                    free(oi2);
                    free(ov2);
                }
            }
        }
    }
    free(x); free(vbuf); free(ibuf); free(ref); free(tmp); free(cv); free(kv);
}

/* several rows in one call, strided source and output (inner = 2; inner
 * = 1024 / es + 5: rows along a non-last dim staged, their positions 1 KB
 * apart or more, sort_kernels.h row_stage, with a partial stage and
 * batches straddling the outer slices; inner = 8 and 13: 4- and 8-byte
 * rows through the row-major stage, whole and partial).  tout: the
 * outputs laid out with each row contiguous (dst_si = n), so not
 * adjacent: the input alone is staged. */
static void check_strided_out(int dt, int64_t n, int64_t inner, int tout)
{
    const int es = ES[dt];
    const int64_t outer = 3, total = outer * n * inner;
    unsigned char *x = malloc((size_t)(total ? total : 1) * es);
    unsigned char *v = malloc((size_t)(total ? total : 1) * es), *v1 = malloc((size_t)(n ? n : 1) * es);
    int64_t *ix = malloc((size_t)(total ? total : 1) * 8), *i1 = malloc((size_t)(n ? n : 1) * 8);
    unsigned char *row = malloc((size_t)(n ? n : 1) * es);
    fill(dt, K_FEW, total, x);
    for (int order = 0; order < 2; ++order) {
        const int64_t dsl = tout ? 1 : inner, dsi = tout ? n : 1;
        if (kwk_sort(dt, x, outer, n, inner, n * inner, inner, 1, v, ix, n * inner, dsl, dsi, 1, order) != KWK_OK) {
            fail("strided status", dt, K_FEW, n, 1, order);
            continue;
        }
        for (int64_t o = 0; o < outer; ++o)
            for (int64_t i = 0; i < inner; ++i) {
                for (int64_t j = 0; j < n; ++j) memcpy(row + j * es, x + ((o * n + j) * inner + i) * es, (size_t)es);
                kwk_sort(dt, row, 1, n, 1, n, 1, 1, v1, i1, n, 1, 1, 1, order);
                for (int64_t j = 0; j < n; ++j)
                    if (ix[o * n * inner + j * dsl + i * dsi] != i1[j] ||
                        memcmp(v + (o * n * inner + j * dsl + i * dsi) * es, v1 + j * es, (size_t)es)) {
                        fail("strided", dt, K_FEW, n, 1, order);
                        o = outer; i = inner;
                        break;
                    }
            }
    }
    free(x); free(v); free(v1); free(ix); free(i1); free(row);
}

static void check_strided(int dt, int64_t n, int64_t inner) { check_strided_out(dt, n, inner, 0); }

/* The sorting networks of short_sort_network.h: each pair inside the row
 * and in order, and every row of 0s and 1s sorted (the 0-1 principle: a
 * comparator network that sorts all 2^n of them sorts everything). */
static void check_networks(void)
{
    for (int n = 2; n <= SN_MAX; ++n) {
        int bad = 0;
        for (int c = SN_AT[n]; c < SN_AT[n + 1]; ++c)
            bad |= !(SN_PAIRS[c][0] < SN_PAIRS[c][1] && SN_PAIRS[c][1] < n);
        for (uint32_t bits = 0; !bad && bits < (1u << n); ++bits) {
            uint32_t b = bits;
            for (int c = SN_AT[n]; c < SN_AT[n + 1]; ++c) {
                const int lo = SN_PAIRS[c][0], hi = SN_PAIRS[c][1];
                if ((b >> lo & 1) && !(b >> hi & 1)) b ^= (1u << lo) | (1u << hi);
            }
            /* sorted: the ones at the top, contiguous */
            const int ones = __builtin_popcount(b);
            bad |= b != (ones ? ((1u << n) - 1) & ~((1u << (n - ones)) - 1) : 0);
        }
        ++g_checks[0];
        if (bad) {
            ++failures;
            printf("FAIL sorting network of %d elements\n", n);
        }
    }
}

/* Many short rows (sort's eight-rows kernel, short_rows.h, for rows of
 * 2..16 and at least 8 rows, and its sorting network for 32-bit elements,
 * short_sort_network.h, which takes whole groups of eight): every row
 * equal to the same row sorted alone (the per-row kernel, checked against
 * merge sort above), for rows along the last dim and along a strided dim
 * (inner = rows), 8, 13 or 18 of them (whole groups, and groups and a
 * tail), values and indices, values only, indices only. */
static void check_short_rows(int dt, int kind, int64_t n)
{
    const int es = ES[dt];
    const int64_t rows = 8 + (n % 3) * 5, total = rows * n;
    unsigned char *x = malloc((size_t)total * es), *v = malloc((size_t)total * es);
    unsigned char *v2 = malloc((size_t)total * es), *v1 = malloc((size_t)n * es);
    unsigned char *row = malloc((size_t)n * es);
    int64_t *ix = malloc((size_t)total * 8), *ix2 = malloc((size_t)total * 8), *i1 = malloc((size_t)n * 8);
    fill(dt, kind, total, x);
    for (int desc = 0; desc < 2; ++desc)
        for (int order = 0; order < 2; ++order)
            for (int lay = 0; lay < 2; ++lay) {
                /* lay 0: (rows, n) rows along the last dim; lay 1: (1, n, rows) */
                const int64_t outer = lay ? 1 : rows, inner = lay ? rows : 1;
                const int64_t so = n * inner, sl = inner;
                const int64_t before = kwk_counter(KWK_COUNT_SHORT_SORT_ROWS);
                int st = kwk_sort(dt, x, outer, n, inner, so, sl, 1, v, ix, so, sl, 1, desc, order);
                const int64_t served = kwk_counter(KWK_COUNT_SHORT_SORT_ROWS) - before;
                st |= kwk_sort(dt, x, outer, n, inner, so, sl, 1, v2, NULL, so, sl, 1, desc, order);
                st |= kwk_sort(dt, x, outer, n, inner, so, sl, 1, NULL, ix2, so, sl, 1, desc, order);
                if (st != KWK_OK) { fail("short rows status", dt, kind, n, desc, order); continue; }
                if (served != (n >= 2 && n <= 16 && es <= 4 ? rows : 0))
                    fail("short rows counter", dt, kind, n, desc, order);
                for (int64_t r = 0; r < rows; ++r) {
                    const int64_t o = lay ? 0 : r, i = lay ? r : 0;
                    for (int64_t j = 0; j < n; ++j)
                        memcpy(row + j * es, x + (o * so + j * sl + i) * es, (size_t)es);
                    kwk_sort(dt, row, 1, n, 1, n, 1, 1, v1, i1, n, 1, 1, desc, order);
                    for (int64_t j = 0; j < n; ++j) {
                        const int64_t at = o * so + j * sl + i;
                        if (ix[at] != i1[j] || ix2[at] != i1[j] ||
                            memcmp(v + at * es, v1 + j * es, (size_t)es) ||
                            memcmp(v2 + at * es, v1 + j * es, (size_t)es)) {
                            fail("short rows", dt, kind, n, desc, order);
                            r = rows;
                            break;
                        }
                    }
                }
            }
    free(x); free(v); free(v2); free(v1); free(row); free(ix); free(ix2); free(i1);
}

/* kwk_advise_fresh_output: only a hint, so what can be checked is that it
 * refuses what it should, never reaches outside the buffer (the sanitized
 * build would see a write; madvise writes nothing) and changes no byte. */
#define PLAIN_FAIL(...) do { ++failures; printf("FAIL " __VA_ARGS__); printf("\n"); } while (0)
static void check_advise(void)
{
    const int64_t mib = 1 << 20;
    if (kwk_advise_fresh_output(NULL, 64 * mib) != 0) PLAIN_FAIL("advise: NULL accepted");
    if (kwk_advise_fresh_output(&rng, -1) != 0 || kwk_advise_fresh_output(&rng, 8) != 0)
        PLAIN_FAIL("advise: a small or negative size accepted");
    const int64_t bytes = 12 * mib + 123;
    unsigned char *buf = (unsigned char *)malloc((size_t)bytes + 1);
    if (!buf) return;
    unsigned char *p = buf + 1; /* not page aligned */
    for (int64_t i = 0; i < bytes; ++i) p[i] = (unsigned char)(i * 131 + 7);
    const int64_t got = kwk_advise_fresh_output(p, bytes);
    if (got < 0 || got > bytes || got % (2 * mib) != 0) PLAIN_FAIL("advise: %lld bytes advised of %lld", (long long)got, (long long)bytes);
#if defined(__linux__)
    if (got < 8 * mib) printf("advise: %lld bytes advised (THP off here?)\n", (long long)got);
#endif
    for (int64_t i = 0; i < bytes; ++i)
        if (p[i] != (unsigned char)(i * 131 + 7)) { PLAIN_FAIL("advise: byte %lld changed", (long long)i); break; }
    free(buf);
}

/* A stable sort of n int64 of `bits` random bits, checked directly (sorted,
 * a permutation, the source's values, equal values in index order): keys
 * of 31-46 bits in a row of 300k put buckets of ~150 words with 20-35
 * bits left after the MSD pass (the vector quicksort's, where compiled),
 * which the ten input kinds never do. */
static void check_stable_int64(int64_t n, int bits)
{
    int64_t *x = malloc((size_t)n * 8), *v = malloc((size_t)n * 8), *ix = malloc((size_t)n * 8);
    unsigned char *seen = calloc((size_t)n, 1);
    for (int64_t i = 0; i < n; ++i) x[i] = (int64_t)(rnd() >> (64 - bits)) - ((int64_t)1 << (bits - 1));
    for (int64_t i = 0; i < 64; ++i) x[rnd() % (uint64_t)n] = x[rnd() % (uint64_t)n]; /* ties */
    for (int ti = 0; ti < g_ntargets; ++ti) {
        use_target(ti);
        ++checks;
        ++g_checks[ti];
        int bad = kwk_sort(KWK_INT64, x, 1, n, 1, n, 1, 1, v, ix, n, 1, 1, 0, KWK_ORDER_STABLE) != KWK_OK;
        memset(seen, 0, (size_t)n);
        for (int64_t i = 0; !bad && i < n; ++i) {
            bad = ix[i] < 0 || ix[i] >= n || seen[ix[i]] || v[i] != x[ix[i]] ||
                  (i > 0 && (v[i] < v[i - 1] || (v[i] == v[i - 1] && ix[i] < ix[i - 1])));
            if (!bad) seen[ix[i]] = 1;
        }
        if (bad) {
            PLAIN_FAIL("stable int64 of %d bits, n=%lld, target %s", bits, (long long)n, g_targets[ti]);
            ++g_failures[ti];
        }
    }
    free(x); free(v); free(ix); free(seen);
}

/* One long row split over threads (kwker.h kwk_set_row_threads): the same
 * checks as check_case, on the lengths where the split starts (2^17: the
 * loads and writes; the radix pass from 2^17 with keys of over 22 bits),
 * with an odd part count, then the setting's range. */
static void check_row_threads(int big)
{
    static const int dts[] = {KWK_FLOAT32, KWK_INT64, KWK_FLOAT64, KWK_BFLOAT16, KWK_INT32};
    static const int64_t ns[] = {131072, 140001, 300007};
    /* first on one thread: LSD below order_words.h's KWK_MSD_MIN_N, the
     * MSD pass from it */
    for (int bits = 31; bits <= 46; bits += 5) check_stable_int64(300007, bits);
    check_case(KWK_FLOAT32, K_RANDOM, 655359);
    check_case(KWK_FLOAT32, K_RANDOM, 655360);
    check_case(KWK_INT64, K_RANDOM, 655360);
    if (kwk_set_row_threads(3) != 1) PLAIN_FAIL("row threads: default not 1");
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; ++d)
        for (size_t s = 0; s < sizeof ns / sizeof ns[0]; ++s)
            for (int kind = 0; kind < NKINDS; ++kind)
                if (dts[d] == KWK_FLOAT32 ? s < 2 || big == 1
                                          : kind == K_RANDOM || (kind + (int)d + (int)s) % 4 == 0)
                    check_case(dts[d], kind, ns[s]);
    {   /* a call of two rows is not split; one of one row is */
        const int64_t n = 300000;
        float *x = malloc((size_t)n * 2 * sizeof(float)), *v = malloc((size_t)n * 2 * sizeof(float));
        int64_t *ix = malloc((size_t)n * 2 * sizeof(int64_t));
        for (int64_t i = 0; i < 2 * n; ++i) x[i] = (float)(rnd() >> 40);
        const int64_t before = kwk_counter(KWK_COUNT_ROW_SPLITS);
        if (kwk_sort(KWK_FLOAT32, x, 2, n, 1, n, 1, 1, v, ix, n, 1, 1, 0, KWK_ORDER_STABLE) != KWK_OK ||
            kwk_counter(KWK_COUNT_ROW_SPLITS) != before)
            PLAIN_FAIL("row threads: a call of two rows split");
        if (kwk_sort(KWK_FLOAT32, x, 1, n, 1, n, 1, 1, v, ix, n, 1, 1, 0, KWK_ORDER_STABLE) != KWK_OK ||
            kwk_counter(KWK_COUNT_ROW_SPLITS) == before)
            PLAIN_FAIL("row threads: a call of one long row not split");
        /* values only: the quicksort of the keys cut into ranges sorted side
         * by side (values_sort.h VS_QSORT_THREADS) */
        const int64_t before_values = kwk_counter(KWK_COUNT_ROW_SPLITS);
        if (kwk_sort(KWK_FLOAT32, x, 1, n, 1, n, 1, 1, v, NULL, n, 1, 1, 0, KWK_ORDER_STABLE) != KWK_OK ||
            kwk_counter(KWK_COUNT_ROW_SPLITS) == before_values)
            PLAIN_FAIL("row threads: a values-only sort of one long row not split");
        for (int64_t i = 1; i < n; ++i)
            if (v[i - 1] > v[i]) {
                PLAIN_FAIL("row threads: values-only sort of one long row out of order at %lld", (long long)i);
                break;
            }
        free(x); free(v); free(ix);
    }
    if (kwk_set_row_threads(0) != KWK_E_ARG || kwk_set_row_threads(KWK_MAX_ROW_THREADS + 1) != KWK_E_ARG)
        PLAIN_FAIL("row threads: a count out of range accepted");
    if (kwk_set_row_threads(1) != 3) PLAIN_FAIL("row threads: setting not kept");
}

int main(int argc, char **argv)
{
    const int step = argc > 1 ? atoi(argv[1]) : 1;
    if (step < 0) { /* only the long rows on threads (manual runs) */
        for (int t = 0; t < KWK_TEST_NTARGETS; ++t)
            if (test_set_target(KWK_TEST_TARGET_NAMES[t]) == KWK_OK) g_targets[g_ntargets++] = KWK_TEST_TARGET_NAMES[t];
        check_row_threads(argc > 2 ? atoi(argv[2]) : 1);
        printf("%s\n", failures ? "FAILED" : "ok");
        return failures != 0;
    }
    /* big: 1 checks lengths of 20000+ on four of the ten input kinds, 2 (CI)
     * on two per dtype (a different two for each dtype), 0 skips them */
    const int big = argc > 2 ? atoi(argv[2]) : 1;
    static const int64_t SWITCH[] = {1101, 1500, 2047, 2048, 2049, 3072, 3073, 4095, 4096, 4097, 10007, 16383, 16384, 16385, 65535, 65536, 65537, 131071, 131078, 140000};
    for (int t = 0; t < KWK_TEST_NTARGETS; ++t) {
        if (test_set_target(KWK_TEST_TARGET_NAMES[t]) == KWK_OK) g_targets[g_ntargets++] = KWK_TEST_TARGET_NAMES[t];
        else printf("target %s not available here, skipped\n", KWK_TEST_TARGET_NAMES[t]);
    }
    for (int dt = 0; dt < KWK_NUM_DTYPES; ++dt) {
        for (int64_t n = 0; n <= 1100; n += (n < 300 ? 1 : step))
            for (int kind = 0; kind < NKINDS; ++kind) check_case(dt, kind, n);
        for (size_t s = 0; big && s < sizeof SWITCH / sizeof SWITCH[0]; ++s)
            for (int kind = 0; kind < NKINDS; ++kind)
                if (SWITCH[s] < 20000 || (big == 1 ? kind % 3 == 0 : (kind + dt) % 5 == 0))
                    check_case(dt, kind, SWITCH[s]);
        /* these compare each target with itself (one row at a time) */
        for (int ti = 0; ti < g_ntargets; ++ti) {
            use_target(ti);
            for (int64_t n = 0; n < 300; n += 17) check_strided(dt, n, 2);
            for (int64_t n = 2; n < 800; n += n < 64 ? 31 : 233) check_strided(dt, n, 1024 / ES[dt] + 5);
            for (int64_t n = 17; n < 1200; n += n < 64 ? 23 : 377)
                for (int tout = 0; tout < 2; ++tout) {
                    check_strided_out(dt, n, 8, tout);
                    check_strided_out(dt, n, 13, tout);
                }
            for (int64_t n = 1; n <= 17; ++n)
                for (int kind = 0; kind < NKINDS; ++kind) check_short_rows(dt, kind, n);
        }
    }
    check_advise();
    check_networks();
    if (big) check_row_threads(big);
    for (int ti = 0; ti < g_ntargets; ++ti)
        printf("target %s: %ld checks, %ld failures\n", g_targets[ti], g_checks[ti], g_failures[ti]);
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}
