/*
 * fuzz_common.h - what every fuzz target shares: reading the fuzzer's bytes
 * as a call (dtype, sizes, strides, values, options), buffers exactly as
 * large as the strides reach (so AddressSanitizer sees any access outside
 * them) with poisoned gaps, and a plain reference: a stable merge sort of
 * indices under a comparator written from the definition of torch's order
 * (floats through double: -inf < ... < -0 == +0 < ... < +inf < NaN, every
 * NaN equal; bool: nonzero is true).  Nothing here uses the library's own
 * key transforms, so a wrong key cannot hide in both.
 *
 * A target is one C file defining LLVMFuzzerTestOneInput with this header;
 * any disagreement aborts with a description (libFuzzer saves the input).
 *
 * One input: a header of option bytes, then the bytes values are made of.
 * "Must reject" inputs (one header bit) break one argument on purpose and
 * check the library answers with a negative status without touching any
 * buffer.
 */
#ifndef KWK_FUZZ_COMMON_H
#define KWK_FUZZ_COMMON_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kwker.h"

#define FZ_FAIL(...)                                                          \
    do {                                                                      \
        fprintf(stderr, "kwker fuzz FAIL %s:%d: ", __FILE__, __LINE__);       \
        fprintf(stderr, __VA_ARGS__);                                         \
        fprintf(stderr, "\n");                                                \
        fz_describe_call();                                                   \
        abort();                                                              \
    } while (0)

/* ------------------------------------------------------------ the input */

typedef struct {
    const uint8_t *p;
    size_t n, pos;
} fz_reader;

/* nbytes bytes little-endian; zeros past the end of the input. */
static uint64_t fz_take(fz_reader *r, int nbytes)
{
    uint64_t v = 0;
    for (int b = 0; b < nbytes; ++b) {
        uint64_t byte = r->pos < r->n ? r->p[r->pos] : 0;
        r->pos++;
        v |= byte << (8 * b);
    }
    return v;
}

static const int FZ_ES[KWK_NUM_DTYPES] = {1, 1, 1, 2, 4, 8, 2, 4, 8, 2, 2, 4, 8};
static const char *FZ_DTYPE[KWK_NUM_DTYPES] = {"bool", "uint8", "int8", "int16", "int32", "int64",
                                               "uint16", "uint32", "uint64", "float16",
                                               "bfloat16", "float32", "float64"};
static int fz_is_float(int dt) { return dt >= KWK_FLOAT16; }
static int fz_is_signed(int dt)
{
    return dt == KWK_INT8 || dt == KWK_INT16 || dt == KWK_INT32 || dt == KWK_INT64;
}

static uint64_t fz_bits(const char *p, int es)
{
    uint64_t v = 0;
    memcpy(&v, p, (size_t)es); /* little-endian, as the library assumes */
    return v;
}

/* ------------------------------------------------------- the reference */

static double fz_half(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : (e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25));
    return (h & 0x8000) ? -v : v;
}

static double fz_as_double(int dt, uint64_t b)
{
    float f;
    double d;
    uint32_t u;
    switch (dt) {
    case KWK_FLOAT16: return fz_half((uint16_t)b);
    case KWK_BFLOAT16: u = (uint32_t)(b & 0xFFFF) << 16; memcpy(&f, &u, 4); return f;
    case KWK_FLOAT32: u = (uint32_t)b; memcpy(&f, &u, 4); return f;
    default: memcpy(&d, &b, 8); return d;
    }
}

static int fz_is_nan(int dt, uint64_t b) { return fz_is_float(dt) && isnan(fz_as_double(dt, b)); }

/* torch's ascending order: -1, 0 (equivalent) or 1. */
static int fz_cmp_bits(int dt, uint64_t a, uint64_t b)
{
    if (fz_is_float(dt)) {
        double x = fz_as_double(dt, a), y = fz_as_double(dt, b);
        int xn = isnan(x) != 0, yn = isnan(y) != 0;
        if (xn || yn) return xn - yn;
        return (x > y) - (x < y);
    }
    if (dt == KWK_BOOL) {
        int x = (a & 0xFF) != 0, y = (b & 0xFF) != 0;
        return x - y;
    }
    if (fz_is_signed(dt)) {
        int sh = 64 - 8 * FZ_ES[dt];
        int64_t x = (int64_t)(a << sh) >> sh, y = (int64_t)(b << sh) >> sh;
        return (x > y) - (x < y);
    }
    return (a > b) - (a < b);
}

/* A row: element j at base + j*step bytes. */
typedef struct {
    int dt, es;
    const char *base;
    int64_t step;
    int64_t len;
} fz_row;

static uint64_t fz_elem(const fz_row *r, int64_t j) { return fz_bits(r->base + j * r->step, r->es); }

static int fz_cmp_elems(const fz_row *r, int64_t i, int64_t j, int descending)
{
    int c = fz_cmp_bits(r->dt, fz_elem(r, i), fz_elem(r, j));
    return descending ? -c : c;
}

/* idx[0..n) := 0..n-1 stably sorted (equal elements by ascending index),
 * by a top-down merge sort. */
static void fz_merge(const fz_row *r, int desc, int64_t *a, int64_t *tmp, int64_t n)
{
    if (n < 2) return;
    int64_t h = n / 2;
    fz_merge(r, desc, a, tmp, h);
    fz_merge(r, desc, a + h, tmp, n - h);
    int64_t i = 0, j = h, o = 0;
    while (i < h && j < n) tmp[o++] = fz_cmp_elems(r, a[j], a[i], desc) < 0 ? a[j++] : a[i++];
    while (i < h) tmp[o++] = a[i++];
    while (j < n) tmp[o++] = a[j++];
    memcpy(a, tmp, (size_t)n * sizeof(int64_t));
}

static int64_t *fz_stable_order(const fz_row *r, int descending)
{
    size_t n = (size_t)(r->len > 0 ? r->len : 1);
    int64_t *idx = (int64_t *)malloc(n * sizeof(int64_t));
    int64_t *tmp = (int64_t *)malloc(n * sizeof(int64_t));
    if (!idx || !tmp) abort();
    for (int64_t j = 0; j < r->len; ++j) idx[j] = j;
    fz_merge(r, descending, idx, tmp, r->len);
    free(tmp);
    return idx;
}

static int fz_u64_cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Is got[0..m) (bit patterns) a sub-multiset of the row's bit patterns? */
/* Sort bit patterns into torch's order (for comparing multisets of
 * equivalence classes). */
static int fz_qs_dt, fz_qs_desc;
static int fz_qs_cmp(const void *a, const void *b)
{
    int c = fz_cmp_bits(fz_qs_dt, *(const uint64_t *)a, *(const uint64_t *)b);
    return fz_qs_desc ? -c : c;
}
static void fz_sort_bits(int dt, int descending, uint64_t *bits, int64_t m)
{
    fz_qs_dt = dt;
    fz_qs_desc = descending;
    qsort(bits, (size_t)m, 8, fz_qs_cmp);
}

/* torch's topk returns bfloat16 NaN as 0x7FC0 (its values go through a
 * float round trip); `canon` applies that to the row's elements. */
static uint64_t fz_canon(int dt, uint64_t b, int canon)
{
    return canon && dt == KWK_BFLOAT16 && fz_is_nan(dt, b) ? 0x7FC0u : b;
}

static int fz_bits_within_row(const fz_row *r, const uint64_t *got, int64_t m, int canon)
{
    uint64_t *all = (uint64_t *)malloc((size_t)(r->len > 0 ? r->len : 1) * 8);
    uint64_t *g = (uint64_t *)malloc((size_t)(m > 0 ? m : 1) * 8);
    if (!all || !g) abort();
    for (int64_t j = 0; j < r->len; ++j) all[j] = fz_canon(r->dt, fz_elem(r, j), canon);
    memcpy(g, got, (size_t)m * 8);
    qsort(all, (size_t)r->len, 8, fz_u64_cmp);
    qsort(g, (size_t)m, 8, fz_u64_cmp);
    int64_t i = 0, ok = 1;
    for (int64_t j = 0; j < m && ok; ++j) {
        while (i < r->len && all[i] < g[j]) ++i;
        if (i == r->len || all[i] != g[j]) ok = 0;
        else ++i;
    }
    free(all);
    free(g);
    return (int)ok;
}

/* ------------------------------------------------------------ the call */

/* What is being run, for failure reports. */
static struct {
    const char *op;
    int dt, target, order, flag_a, flag_b, must_reject;
    int64_t outer, len, inner, k, so, sl, si, dso, dsl, dsi;
} fz_call;

static void fz_describe_call(void)
{
    fprintf(stderr,
            "  call: %s dtype=%s target=%s order=%d flags=%d,%d must_reject=%d\n"
            "  outer=%lld len=%lld inner=%lld k=%lld src strides (%lld,%lld,%lld) "
            "dst strides (%lld,%lld,%lld)\n",
            fz_call.op, fz_call.dt >= 0 && fz_call.dt < KWK_NUM_DTYPES ? FZ_DTYPE[fz_call.dt] : "?",
            fz_call.target ? kwk_target() : "portable", fz_call.order, fz_call.flag_a, fz_call.flag_b,
            fz_call.must_reject, (long long)fz_call.outer, (long long)fz_call.len,
            (long long)fz_call.inner, (long long)fz_call.k, (long long)fz_call.so,
            (long long)fz_call.sl, (long long)fz_call.si, (long long)fz_call.dso,
            (long long)fz_call.dsl, (long long)fz_call.dsi);
}

/* The portable target or the best SIMD one: the input picks per call.  On
 * an AVX-512 machine the SIMD target is avx512 (the AVX2 kernels' source but
 * for its AVX-512 paths), elsewhere avx2. */
static void fz_pick_target(int simd)
{
    fz_call.target = 0;
    if (simd && (kwk_set_target("avx512") == KWK_OK || kwk_set_target("avx2") == KWK_OK)) {
        fz_call.target = 1;
        return;
    }
    if (kwk_set_target("portable") != KWK_OK) abort();
}

/* Row lengths: mostly short (every code path for small rows), some a few
 * hundred to a thousand, rarely around the long-row switches (65536: such
 * an input costs ~0.3 s under the sanitizers). */
static int64_t fz_length(fz_reader *r)
{
    uint64_t sel = fz_take(r, 1), v = fz_take(r, 2);
    if (sel < 176) return (int64_t)(sel % 72);
    if (sel < 255) return (int64_t)(v % 1300);
    return 65536 - 600 + (int64_t)(v % 1800);
}

/* A buffer for a (possibly strided, reversed or expanded) 3-dim view. */
typedef struct {
    char *buf;       /* malloc'd, exactly `bytes` long */
    size_t bytes;
    char *base;      /* where element (0,0,0) is */
    int64_t s[3];    /* strides in elements of dims (outer, len, inner) */
    int64_t n[3];    /* sizes */
    int es;
} fz_view;

/* Strides for sizes n[3] from three layout bytes: which dim is innermost
 * in memory (6 orders), a gap factor per dim (1 or 2: elements between rows
 * that must stay untouched), a stride-0 (expanded) dim for inputs, and a
 * reversed (negative stride) dim.  The buffer is exactly as large as the
 * view reaches. */
static void fz_layout(fz_view *v, const int64_t n[3], int es, uint64_t lay, int allow_zero)
{
    static const int ORDERS[6][3] = {{2, 1, 0}, {1, 2, 0}, {2, 0, 1}, {0, 2, 1}, {1, 0, 2}, {0, 1, 2}};
    const unsigned b0 = (unsigned)(lay & 0xFF), b1 = (unsigned)((lay >> 8) & 0xFF),
                   b2 = (unsigned)((lay >> 16) & 0xFF);
    const int *ord = ORDERS[b0 % 6]; /* ord[0]: innermost */
    const int zero_dim = allow_zero && (b1 & 0x18) == 0x08 ? (int)((b1 >> 5) % 3) : -1;
    const int neg_dim = (b2 & 3) == 1 ? (int)((b2 >> 2) % 3) : -1;
    int64_t acc = 1, lo = 0, hi = 0;
    memset(v, 0, sizeof *v);
    v->es = es;
    for (int d = 0; d < 3; ++d) v->n[d] = n[d];
    for (int q = 0; q < 3; ++q) {
        const int d = ord[q];
        int64_t st = acc * (((b1 >> q) & 1) ? 2 : 1);
        if (d == zero_dim) st = 0;
        if (d == neg_dim) st = -st;
        v->s[d] = st;
        if (n[d] > 1 && st != 0) acc = (st < 0 ? -st : st) * n[d];
        if (n[d] > 0) {
            int64_t far = (n[d] - 1) * st;
            if (far < 0) lo += far; else hi += far;
        }
    }
    int64_t count = 1;
    for (int d = 0; d < 3; ++d) count *= n[d];
    int64_t span = count == 0 ? 0 : hi - lo + 1;
    v->bytes = (size_t)(span > 0 ? span : 1) * (size_t)es;
    v->buf = (char *)malloc(v->bytes);
    if (!v->buf) abort();
    v->base = v->buf + (-lo) * es;
}

static char *fz_at(const fz_view *v, int64_t o, int64_t j, int64_t i)
{
    return v->base + (o * v->s[0] + j * v->s[1] + i * v->s[2]) * v->es;
}

/* ---------------------------------------------------------- the values */

static uint64_t fz_special(int dt, unsigned which)
{
    static const uint64_t f16[] = {0x0000, 0x8000, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0x7D23,
                                   0x3C00, 0xBC00, 0x7BFF, 0xFBFF, 0x0001, 0x8001, 0x0400};
    static const uint64_t bf16[] = {0x0000, 0x8000, 0x7F80, 0xFF80, 0x7FC0, 0xFFC0, 0x7F81, 0x7FA5,
                                    0x3F80, 0xBF80, 0x7F7F, 0xFF7F, 0x0001, 0x8001, 0x0080};
    static const uint64_t f32[] = {0x0, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u,
                                   0xFFC00000u, 0x7F800001u, 0x7FC12345u, 0x3F800000u,
                                   0xBF800000u, 0x7F7FFFFFu, 0xFF7FFFFFu, 0x1, 0x80000001u,
                                   0x00800000u};
    static const uint64_t f64[] = {0x0, 0x8000000000000000ull, 0x7FF0000000000000ull,
                                   0xFFF0000000000000ull, 0x7FF8000000000000ull,
                                   0xFFF8000000000000ull, 0x7FF0000000000001ull,
                                   0x7FF8DEAD00000000ull, 0x3FF0000000000000ull,
                                   0xBFF0000000000000ull, 0x7FEFFFFFFFFFFFFFull,
                                   0xFFEFFFFFFFFFFFFFull, 0x1, 0x8000000000000001ull,
                                   0x0010000000000000ull};
    const unsigned i = which % 15;
    const int es = FZ_ES[dt];
    const uint64_t mask = es == 8 ? ~0ull : ((1ull << (8 * es)) - 1);
    switch (dt) {
    case KWK_FLOAT16: return f16[i];
    case KWK_BFLOAT16: return bf16[i];
    case KWK_FLOAT32: return f32[i];
    case KWK_FLOAT64: return f64[i];
    case KWK_BOOL: { static const uint64_t b[] = {0, 1, 2, 0x80, 0xFF}; return b[i % 5]; }
    default: {
        /* 0, 1, all ones, the signed and unsigned extremes and neighbours */
        const uint64_t top = 1ull << (8 * es - 1);
        const uint64_t v[] = {0, 1, mask, top, top - 1, top + 1, mask - 1, 2, 3, top >> 1};
        return v[i % 10] & mask;
    }
    }
}

static uint64_t fz_xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Fill every element of the buffer (gaps too) from the remaining bytes:
 *   raw   the bytes themselves, cycled (any bit pattern),
 *   pool  up to 16 values (specials: NaN payloads, +-0, +-inf, extremes,
 *         and raw ones) picked by the bytes: many ties,
 *   ramp  an arithmetic progression of bits, up or down (presorted runs),
 *   noise a PRNG seeded from the bytes, over a pool (long tie-heavy rows). */
static void fz_fill(fz_reader *r, int dt, char *buf, size_t bytes)
{
    const int es = FZ_ES[dt];
    const int64_t count = (int64_t)(bytes / (size_t)es);
    const uint64_t mode = fz_take(r, 1) % 4;
    uint64_t pool[16];
    int npool = 1;
    if (mode == 1 || mode == 3) {
        npool = 1 + (int)(fz_take(r, 1) % 16);
        for (int q = 0; q < npool; ++q) {
            uint64_t sel = fz_take(r, 1);
            pool[q] = sel < 160 ? fz_special(dt, (unsigned)sel) : fz_take(r, es);
        }
    }
    const uint8_t *data = r->p + (r->pos < r->n ? r->pos : r->n);
    const size_t nd = r->pos < r->n ? r->n - r->pos : 0;
    uint64_t state = 0x9E3779B97F4A7C15ull ^ fz_take(r, 8);
    if (!state) state = 1;
    const uint64_t start = mode == 2 ? fz_take(r, es) : 0;
    const uint64_t step = mode == 2 ? fz_take(r, 1) : 0;
    const int down = mode == 2 && (step & 1);
    for (int64_t j = 0; j < count; ++j) {
        uint64_t v;
        if (mode == 0) {
            v = 0;
            for (int b = 0; b < es; ++b)
                v |= (uint64_t)(nd ? data[((size_t)j * es + b) % nd] : 0) << (8 * b);
        } else if (mode == 1) {
            v = pool[(nd ? data[(size_t)j % nd] : 0) % npool];
        } else if (mode == 2) {
            v = down ? start - (uint64_t)j * (step >> 1) : start + (uint64_t)j * (step >> 1);
        } else {
            v = pool[fz_xorshift(&state) % (uint64_t)npool];
        }
        memcpy(buf + j * es, &v, (size_t)es);
    }
}

/* ------------------------------------------------------------- outputs */

enum { FZ_POISON = 0xA5 };

/* An output view filled with poison; fz_check_gaps() afterwards checks that
 * only the elements of the view were written. */
static void fz_output(fz_view *v, const int64_t n[3], int es, uint64_t lay)
{
    fz_layout(v, n, es, lay, 0);
    memset(v->buf, FZ_POISON, v->bytes);
}

static void fz_check_gaps(const fz_view *v, const char *what)
{
    unsigned char *mark = (unsigned char *)calloc(v->bytes, 1);
    if (!mark) abort();
    for (int64_t o = 0; o < v->n[0]; ++o)
        for (int64_t j = 0; j < v->n[1]; ++j)
            for (int64_t i = 0; i < v->n[2]; ++i)
                memset(mark + (fz_at(v, o, j, i) - v->buf), 1, (size_t)v->es);
    for (size_t b = 0; b < v->bytes; ++b)
        if (!mark[b] && (unsigned char)v->buf[b] != FZ_POISON)
            FZ_FAIL("%s: byte %zu outside the output elements was written", what, b);
    free(mark);
}

static void fz_check_untouched(const fz_view *v, const char *what)
{
    for (size_t b = 0; b < v->bytes; ++b)
        if ((unsigned char)v->buf[b] != FZ_POISON)
            FZ_FAIL("%s: written by a call that was rejected", what);
}

/* Which outputs a call gets: both, values only, indices only. */
enum { FZ_BOTH, FZ_VALUES, FZ_INDICES };

/* An output not asked for stays untouched; one asked for is written only
 * at its elements. */
static void fz_check_outputs(const fz_view *vals, const fz_view *inds, int outs)
{
    if (outs == FZ_INDICES) fz_check_untouched(vals, "values (not requested)");
    else fz_check_gaps(vals, "values");
    if (outs == FZ_VALUES) fz_check_untouched(inds, "indices (not requested)");
    else fz_check_gaps(inds, "indices");
}

/* ------------------------------------------------------ must-reject calls */

/* The ways one argument can be made invalid.  Each needs the sizes it
 * names to be non-zero (fz_reject_prepare makes them so), so the call is
 * invalid whatever else the input chose. */
enum {
    FZ_BAD_DTYPE, FZ_BAD_OUTER, FZ_BAD_LEN, FZ_BAD_INNER, FZ_BAD_ORDER, FZ_BAD_K_LOW,
    FZ_BAD_K_HIGH, FZ_NO_OUTPUT, FZ_NULL_SRC, FZ_STRIDE_MIN, FZ_STRIDE_HUGE,
    FZ_STRIDE_BYTES, FZ_SIZE_PRODUCT, FZ_DST_STRIDE_MIN, FZ_NUM_BAD
};

static const int64_t FZ_BAD_DTYPES[] = {-1, KWK_NUM_DTYPES, 255, -2147483647 - 1};

/* Source bytes copied before a call, compared after it. */
static char *fz_snapshot(const fz_view *v)
{
    char *copy = (char *)malloc(v->bytes);
    if (!copy) abort();
    memcpy(copy, v->buf, v->bytes);
    return copy;
}

static void fz_check_source(const fz_view *v, char *copy)
{
    if (memcmp(copy, v->buf, v->bytes) != 0) FZ_FAIL("the source was modified");
    free(copy);
}

static void fz_view_free(fz_view *v) { free(v->buf); }

/* Row (o, i) of a view along its middle dim. */
static fz_row fz_row_of(const fz_view *v, int dt, int64_t o, int64_t i)
{
    fz_row r = {dt, v->es, fz_at(v, o, 0, i), v->s[1] * v->es, v->n[1]};
    return r;
}

/* outer and inner: 1..4 each, sometimes 0 (an empty call); long rows get
 * one row so that an input stays fast. */
static void fz_outer_inner(fz_reader *r, int64_t len, int64_t *outer, int64_t *inner)
{
    const uint64_t b = fz_take(r, 1);
    *outer = 1 + (int64_t)(b & 3);
    *inner = 1 + (int64_t)((b >> 2) & 3);
    if ((b >> 4) == 15) *outer = 0;
    if ((b >> 4) == 14) *inner = 0;
    if (len > 2000) *outer = *inner = ((b >> 4) >= 14 ? 0 : 1);
}

/* k in [lo, len]: the edges, the small-k paths (k*64 <= len, k*16 <= len)
 * and anything between. */
static int64_t fz_k(fz_reader *r, int64_t len, int64_t lo)
{
    const uint64_t sel = fz_take(r, 1), v = fz_take(r, 2);
    const int64_t span = len - lo + 1;
    int64_t k;
    if (span <= 0) return lo;
    switch (sel % 8) {
    case 0: k = lo; break;
    case 1: k = len; break;
    case 2: k = len - 1; break;
    case 3: k = len / 64; break;
    case 4: k = len / 64 + 1; break;
    case 5: k = len / 16 + (int64_t)(v % 3); break;
    case 6: k = lo + (int64_t)(v % 17); break;
    default: k = lo + (int64_t)(v % (uint64_t)span); break;
    }
    return k < lo ? lo : (k > len ? len : k);
}

/* ------------------------------------------------------ the argument set */

typedef struct {
    int dtype;
    const void *src;
    int64_t outer, len, inner, so, sl, si, k;
    void *values;
    int64_t *indices;
    int64_t dso, dsl, dsi;
    int order;
} fz_args;

enum { FZ_OP_SORT, FZ_OP_TOPK, FZ_OP_KTHVALUE, FZ_OP_MEDIAN_DIM, FZ_OP_MEDIAN_ALL };

/* Record the call about to be made (printed if it fails): op, or the name
 * of the broken argument of a must-reject call, and a's sizes and strides. */
static void fz_record(const char *op, const char *broken, const fz_args *a, int order,
                      int flag_a, int flag_b, int reject)
{
    fz_call.op = broken ? broken : op;
    fz_call.dt = a->dtype; fz_call.order = order; fz_call.flag_a = flag_a; fz_call.flag_b = flag_b;
    fz_call.must_reject = reject; fz_call.outer = a->outer; fz_call.len = a->len;
    fz_call.inner = a->inner; fz_call.k = a->k; fz_call.so = a->so; fz_call.sl = a->sl;
    fz_call.si = a->si; fz_call.dso = a->dso; fz_call.dsl = a->dsl; fz_call.dsi = a->dsi;
}

/* Sizes a must-reject mutation needs non-zero (or large enough) to be
 * invalid whatever the rest of the call is. */
static void fz_reject_prepare(int bad, int op, int64_t *outer, int64_t *len, int64_t *inner)
{
    if (*outer == 0) *outer = 1;
    if (*inner == 0) *inner = 1;
    if (bad == FZ_STRIDE_HUGE && *len < 3) *len = 3;
    if ((bad == FZ_STRIDE_BYTES || bad == FZ_NO_OUTPUT || bad == FZ_NULL_SRC) && *len < 2) *len = 2;
    if (op != FZ_OP_SORT && *len < 1) *len = 1;
}

/* Break one argument.  Returns a description. */
static const char *fz_break(int bad, int op, fz_args *a, int es, uint64_t pick)
{
    if (op == FZ_OP_MEDIAN_ALL && bad != FZ_BAD_DTYPE && bad != FZ_BAD_LEN && bad != FZ_NO_OUTPUT
        && bad != FZ_NULL_SRC && bad != FZ_STRIDE_MIN && bad != FZ_STRIDE_HUGE
        && bad != FZ_STRIDE_BYTES && bad != FZ_DST_STRIDE_MIN)
        bad = FZ_NUM_BAD; /* no outer/inner/k/order there */
    switch (bad) {
    case FZ_BAD_DTYPE: a->dtype = (int)FZ_BAD_DTYPES[pick % 4]; return "dtype";
    case FZ_BAD_OUTER: a->outer = -1 - (int64_t)(pick % 3) * INT64_C(0x100000000); return "outer < 0";
    case FZ_BAD_LEN: a->len = pick & 1 ? INT64_MIN : -1; return "len < 0";
    case FZ_BAD_INNER: a->inner = -1 - (int64_t)(pick % 5); return "inner < 0";
    case FZ_BAD_ORDER:
        if (op == FZ_OP_MEDIAN_DIM || op == FZ_OP_MEDIAN_ALL) break;
        /* (kwk_topk also takes KWK_ORDER_TORCH_PROBE, 2) */
        a->order = pick & 1 ? (op == FZ_OP_TOPK ? 3 : 2) : -1;
        return "order";
    case FZ_BAD_K_LOW:
        if (op == FZ_OP_TOPK) { a->k = pick & 1 ? -1 : INT64_MIN; return "k < 0"; }
        if (op == FZ_OP_KTHVALUE) { a->k = pick & 1 ? 0 : -1; return "k < 1"; }
        break;
    case FZ_BAD_K_HIGH:
        if (op == FZ_OP_TOPK || op == FZ_OP_KTHVALUE) {
            a->k = pick & 1 ? a->len + 1 : INT64_MAX;
            return "k > len";
        }
        break;
    case FZ_NO_OUTPUT:
        a->values = NULL;
        a->indices = NULL;
        if (op == FZ_OP_TOPK && a->k == 0) a->k = 1;
        return "no output";
    case FZ_NULL_SRC: a->src = NULL; return "src NULL";
    case FZ_STRIDE_MIN: a->sl = INT64_MIN; return "stride INT64_MIN";
    case FZ_STRIDE_HUGE: a->sl = INT64_MAX / 2 + 1; return "(len-1)*stride overflows";
    case FZ_STRIDE_BYTES:
        if (es == 1) { a->sl = INT64_MAX / 2 + 1; a->len = a->len < 3 ? 3 : a->len; }
        else a->sl = INT64_MAX / es + 1;
        return "stride in bytes overflows";
    case FZ_SIZE_PRODUCT:
        if (op == FZ_OP_MEDIAN_ALL) break;
        a->outer = INT64_C(1) << 32;
        a->inner = INT64_C(1) << 32;
        if (a->len < 1) a->len = 1;
        return "outer*len*inner overflows";
    case FZ_DST_STRIDE_MIN:
        if (op == FZ_OP_MEDIAN_ALL) { a->values = NULL; return "value NULL"; }
        a->dsi = INT64_MIN;
        return "dst stride INT64_MIN";
    default: break;
    }
    a->len = -7; /* the mutation does not apply to this op: a negative size */
    return "len < 0 (fallback)";
}

#endif
