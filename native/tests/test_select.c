/*
 * test_select.c - kwk_topk / kwk_median_dim / kwk_median_all / kwk_kthvalue against a
 * simple reference (a full stable sort of (key, index)), for every dtype,
 * many lengths and k, several input kinds, both CPU targets, with poisoned
 * red zones around every output buffer.
 *
 * Build and run (from the repository root):
 *   gcc -std=c11 -O2 -D_GNU_SOURCE -Inative/include -o /tmp/test_select
 *       native/tests/test_select.c native/src/dispatch.c
 *       native/src/targets/portable.c native/src/targets/avx2.c native/src/targets/avx512.c && /tmp/test_select
 * add -fsanitize=address,undefined -g for the sanitizer run.  An argument
 * "quick" or "san" thins the lengths and kinds (CI's runs; see main).
 * Exit status 0 and "failures 0" when everything holds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kwker.h"
#include "ref_sort.h"
#include "test_targets.h"
#include "../src/keys.h"
#include "../src/torch_order.h"

static long failures, checks;
static long generation; /* bumped by fill(): cached references go stale */
#define FAIL(...)                                                             \
    do {                                                                      \
        if (failures++ < 25) {                                                \
            printf("FAIL %s:%d ", __FILE__, __LINE__);                        \
            printf(__VA_ARGS__);                                              \
            printf("\n");                                                     \
        }                                                                     \
    } while (0)

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static const char *DT_NAMES[KWK_NUM_DTYPES] = {"bool", "u8", "i8", "i16", "i32", "i64", "u16",
                                               "u32", "u64", "f16", "bf16", "f32", "f64"};

enum { K_RANDOM, K_EQUAL, K_TWO, K_SORTED, K_REVERSED, K_NAN, K_ZERO, K_EXTREME, K_SMALLINT, NKINDS };
static const char *KIND_NAMES[NKINDS] = {"random", "equal", "two", "sorted", "reversed",
                                         "nan", "zero", "extreme", "smallint"};

static uint64_t get_bits(const void *p, int es)
{
    uint64_t v = 0;
    memcpy(&v, p, (size_t)es); /* little-endian */
    return v;
}
static void put_bits(void *p, int es, uint64_t v) { memcpy(p, &v, (size_t)es); }

/* Bit patterns of a few float values per float dtype. */
static uint64_t fbits(int dt, int which)
{
    /* which: 0 +0, 1 -0, 2 qNaN, 3 -NaN payload, 4 1.0, 5 -1.0, 6 +inf, 7 -inf, 8 2.0 */
    static const uint64_t f16[] = {0, 0x8000, 0x7E00, 0xFE01, 0x3C00, 0xBC00, 0x7C00, 0xFC00, 0x4000};
    static const uint64_t bf16[] = {0, 0x8000, 0x7FC0, 0xFFC1, 0x3F80, 0xBF80, 0x7F80, 0xFF80, 0x4000};
    static const uint64_t f32[] = {0, 0x80000000u, 0x7FC00000u, 0xFFC00001u, 0x3F800000u,
                                   0xBF800000u, 0x7F800000u, 0xFF800000u, 0x40000000u};
    static const uint64_t f64[] = {0, 0x8000000000000000ull, 0x7FF8000000000000ull,
                                   0xFFF8000000000001ull, 0x3FF0000000000000ull,
                                   0xBFF0000000000000ull, 0x7FF0000000000000ull,
                                   0xFFF0000000000000ull, 0x4000000000000000ull};
    switch (dt) {
    case KWK_FLOAT16: return f16[which];
    case KWK_BFLOAT16: return bf16[which];
    case KWK_FLOAT32: return f32[which];
    default: return f64[which];
    }
}

static void fill(int dt, int kind, char *x, int64_t n)
{
    ++generation;
    const kwk_dtype_info info = KWK_DTYPES[dt];
    const int es = info.elem_size;
    const uint64_t mask = kwk_width_mask(es * 8);
    for (int64_t j = 0; j < n; ++j) {
        uint64_t v = rnd() & mask;
        switch (kind) {
        case K_RANDOM:
            if (info.is_float && (v & 0xF) == 0) v = fbits(dt, (int)(rnd() % 9));
            break;
        case K_EQUAL: v = info.is_float ? fbits(dt, 4) : 3; break;
        case K_TWO: v = info.is_float ? fbits(dt, 4 + (int)(rnd() & 1)) : (rnd() & 1) * 5; break;
        case K_SORTED: v = (uint64_t)(j % 200); if (info.is_float) v = fbits(dt, 4) + v; break;
        case K_REVERSED: v = (uint64_t)((n - j) % 200); if (info.is_float) v = fbits(dt, 4) + v; break;
        case K_NAN:
            v = info.is_float ? fbits(dt, (int)(rnd() % 9)) : (rnd() % 4);
            if (info.is_float && rnd() % 3 == 0) v = fbits(dt, 2 + (int)(rnd() & 1));
            break;
        case K_ZERO:
            v = info.is_float ? fbits(dt, (int)(rnd() % 3 ? rnd() & 1 : 4)) : (rnd() % 3 == 0);
            break;
        case K_EXTREME: {
            /* int extremes: 0, max, min (as bits), -1 */
            static const int sel[4] = {0, 1, 2, 3};
            int s = sel[rnd() % 4];
            uint64_t top = (uint64_t)1 << (es * 8 - 1);
            v = s == 0 ? 0 : s == 1 ? (top - 1) : s == 2 ? top : mask;
            if (info.is_float && s == 3) v = fbits(dt, 6 + (int)(rnd() & 1));
            break;
        }
        default: /* small ints (heavy ties) */
            v = info.is_float ? fbits(dt, 4) + (rnd() % 8) : rnd() % 8;
            break;
        }
        if (dt == KWK_BOOL) v &= 1;
        put_bits(x + j * es, es, v);
    }
}

typedef struct { uint64_t key; int64_t idx; } rec;
/* records listed by index, sorted stably by key: by (key, index) */
REF_SORT_DEFINE(ref_sort_rec, rec, REF_KEY_FIELD, 8)

/* Reference: records (flipped key, index) of row sorted stably. */
static void reference(int dt, const char *row, int64_t n, int64_t step, int largest, rec *r)
{
    const uint64_t flip = largest ? kwk_width_mask(KWK_DTYPES[dt].key_bits) : 0;
    for (int64_t j = 0; j < n; ++j) {
        r[j].key = kwk_key_at(dt, row + j * step) ^ flip;
        r[j].idx = j;
    }
    ref_sort_rec(r, n);
}

enum { RED = 64 };
static const unsigned char POISON = 0xA5;

static void *red_alloc(size_t bytes)
{
    unsigned char *p = malloc(bytes + 2 * RED);
    memset(p, POISON, bytes + 2 * RED);
    return p + RED;
}
static int red_ok(void *q, size_t bytes)
{
    unsigned char *p = (unsigned char *)q - RED;
    for (size_t i = 0; i < RED; ++i)
        if (p[i] != POISON || p[RED + bytes + i] != POISON) return 0;
    return 1;
}
static void red_free(void *q) { free((unsigned char *)q - RED); }

static uint64_t out_bits_expected(int dt, const char *src, int64_t idx, int64_t step, int es)
{
    uint64_t b = get_bits(src + idx * step, es);
    if (dt == KWK_BFLOAT16 && (b & 0x7FFFu) > 0x7F80u) b = 0x7FC0u;
    return b;
}

/* topk on `outer` rows of len (row-major, or strided through inner) */
static unsigned char *seen;
static rec *ref_cache[2][3];
static long ref_gen[2][3] = {{-1, -1, -1}, {-1, -1, -1}};
static int64_t ref_inner[2][3];

/* reference() for row (o, i) of the current data, cached (inner == 1 or
 * o == 0 with i < 3) */
static const rec *cached_reference(int dt, const char *row, int64_t n, int64_t step,
                                   int largest, int64_t slot, int64_t inner, rec *scratch)
{
    if (slot > 2) {
        reference(dt, row, n, step, largest, scratch);
        return scratch;
    }
    if (ref_gen[largest][slot] != generation || ref_inner[largest][slot] != inner) {
        reference(dt, row, n, step, largest, ref_cache[largest][slot]);
        ref_gen[largest][slot] = generation;
        ref_inner[largest][slot] = inner;
    }
    return ref_cache[largest][slot];
}
/* torch 2.13's topk of one row on (key, index) records (TopKImpl.h):
 * partial_sort when k * 64 <= len, else nth_element at k - 1 and, when
 * sorted, a sort of the first k - 1; keys compared alone (flipped for
 * largest), so ties come out as libstdc++ leaves them.  The record
 * emulations of torch_order.h (test_emu_words.c holds the library's word
 * versions to them). */
static kwk_kv *torch_topk_rec;
/* rows up to this long get the torch-order reference (the sanitized run:
 * rows below 4096, so that it keeps to CI's time; the optimised run checks
 * every length) */
static int64_t torch_topk_max_len = 140000;
static void torch_topk_reference(int dt, const char *row, int64_t len, int64_t step, int largest,
                                 int64_t k, int sorted, kwk_kv *r)
{
    const uint64_t flip = largest ? kwk_width_mask(KWK_DTYPES[dt].key_bits) : 0;
    for (int64_t j = 0; j < len; ++j) {
        r[j].key = kwk_key_at(dt, row + j * step) ^ flip;
        r[j].idx = j;
    }
    if (k == 0) return;
    if (k * 64 <= len) {
        emu_partial_sort(r, k, len);
    } else {
        emu_nth_element(r, k - 1, len);
        if (sorted) emu_std_sort(r, k - 1);
    }
}

static void test_topk(int dt, int kind, int64_t len, int64_t k, int largest, int sorted,
                      int order, int64_t outer, int64_t inner, const char *x, rec *scratch)
{
    const int es = KWK_DTYPES[dt].elem_size;
    const int64_t nout = outer * k * inner;
    char *vals = red_alloc((size_t)(nout ? nout : 1) * es);
    int64_t *inds = red_alloc((size_t)(nout ? nout : 1) * 8);
    /* source layout: (outer, len, inner) contiguous; output (outer, k, inner) */
    int st = kwk_topk(dt, x, outer, len, inner, len * inner, inner, 1, k, vals, inds,
                      k * inner, inner, 1, largest, sorted, order);
    ++checks;
    if (st != KWK_OK) {
        FAIL("topk status %d dt=%s len=%lld k=%lld", st, DT_NAMES[dt], (long long)len, (long long)k);
        goto out;
    }
    if (!red_ok(vals, (size_t)(nout ? nout : 1) * es) || !red_ok(inds, (size_t)(nout ? nout : 1) * 8))
        FAIL("topk red zone dt=%s len=%lld k=%lld", DT_NAMES[dt], (long long)len, (long long)k);
    for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
            const char *row = x + (o * len * inner + i) * es;
            const int64_t step = inner * es;
            const rec *ref = cached_reference(dt, row, len, step, largest, o + i, inner, scratch);
            const uint64_t flip = largest ? kwk_width_mask(KWK_DTYPES[dt].key_bits) : 0;
            int tie_free = 1;
            for (int64_t j = 1; j < (k < len ? k + 1 : len); ++j)
                if (ref[j].key == ref[j - 1].key) tie_free = 0;
            uint64_t seen_hash = 0, ref_hash = 0;
            memset(seen, 0, (size_t)len);
            /* torch's own indices, ties included (rows up to the cache) */
            const int exact_torch = order == KWK_ORDER_TORCH && !tie_free && len <= torch_topk_max_len;
            if (exact_torch) torch_topk_reference(dt, row, len, step, largest, k, sorted, torch_topk_rec);
            for (int64_t j = 0; j < k; ++j) {
                int64_t idx = inds[(o * k + j) * inner + i];
                uint64_t vb = get_bits(vals + ((o * k + j) * inner + i) * es, es);
                if (idx < 0 || idx >= len) {
                    FAIL("topk index out of range %lld", (long long)idx);
                    goto out;
                }
                if (vb != out_bits_expected(dt, row, idx, step, es))
                    FAIL("topk value bits dt=%s kind=%s len=%lld k=%lld j=%lld", DT_NAMES[dt],
                         KIND_NAMES[kind], (long long)len, (long long)k, (long long)j);
                uint64_t key = kwk_key_at(dt, row + idx * step) ^ flip;
                if (order == KWK_ORDER_STABLE || (sorted && tie_free)) {
                    if (idx != ref[j].idx)
                        FAIL("topk %s index dt=%s kind=%s len=%lld k=%lld j=%lld got %lld want %lld",
                             order ? "torch" : "stable", DT_NAMES[dt], KIND_NAMES[kind],
                             (long long)len, (long long)k, (long long)j, (long long)idx,
                             (long long)ref[j].idx);
                } else if (exact_torch) {
                    if (idx != torch_topk_rec[j].idx)
                        FAIL("topk torch tie order dt=%s kind=%s len=%lld k=%lld j=%lld largest=%d "
                             "sorted=%d got %lld want %lld", DT_NAMES[dt], KIND_NAMES[kind],
                             (long long)len, (long long)k, (long long)j, largest, sorted,
                             (long long)idx, (long long)torch_topk_rec[j].idx);
                } else if (sorted) {
                    if (key != ref[j].key)
                        FAIL("topk torch key order dt=%s kind=%s len=%lld k=%lld j=%lld",
                             DT_NAMES[dt], KIND_NAMES[kind], (long long)len, (long long)k, (long long)j);
                }
                /* multiset of keys, and distinct indices */
                seen_hash += key * 0x9E3779B97F4A7C15ull + 1;
                ref_hash += ref[j].key * 0x9E3779B97F4A7C15ull + 1;
                if (seen[idx]) FAIL("topk duplicate index");
                seen[idx] = 1;
            }
            if (seen_hash != ref_hash)
                FAIL("topk key multiset dt=%s kind=%s len=%lld k=%lld largest=%d sorted=%d order=%d",
                     DT_NAMES[dt], KIND_NAMES[kind], (long long)len, (long long)k, largest, sorted, order);
        }
    }
out:
    red_free(vals);
    red_free(inds);
}


/* torch's kthvalue quickselect (aten quick_select_template with a NaN-largest
 * comparison), written out independently of the kernel's emulation: the
 * record it leaves at k is the one torch reports. */
static void ref_torch_quickselect(rec *a, int64_t n, int64_t k)
{
#define GT(x, y) ((x).key > (y).key)
#define SWAP(x, y) do { rec t_ = (x); (x) = (y); (y) = t_; } while (0)
    int64_t L = 0, R = n - 1;
    while (R > L) {
        if (R == L + 1) {
            if (GT(a[L], a[R])) SWAP(a[L], a[R]);
            return;
        }
        int64_t md = (L + R) >> 1;
        SWAP(a[md], a[L + 1]);
        if (GT(a[L + 1], a[R])) SWAP(a[L + 1], a[R]);
        if (GT(a[L], a[R])) SWAP(a[L], a[R]);
        if (GT(a[L + 1], a[L])) SWAP(a[L + 1], a[L]);
        int64_t i = L + 1, j = R;
        const rec piv = a[L];
        for (;;) {
            do ++i; while (GT(piv, a[i]));
            do --j; while (GT(a[j], piv));
            if (j < i) break;
            SWAP(a[i], a[j]);
        }
        SWAP(a[L], a[j]);
        if (j <= k) L = i;
        if (j >= k) R = j - 1;
    }
#undef GT
#undef SWAP
}

/* kthvalue of `outer` rows of len laid out (outer, len, inner), every k in
 * ks, both orders, against the stable sort (and the quickselect for torch
 * order when the k-th key is shared). */
static void test_kthvalue(int dt, int kind, int64_t len, int64_t outer, int64_t inner,
                          const char *x, rec *ref, const int64_t *ks, int nks)
{
    enum { MAX_KS = 8 };
    const int es = KWK_DTYPES[dt].elem_size;
    const int64_t nout = outer * inner;
    char *vals[MAX_KS][2] = {{0}};
    int64_t *inds[MAX_KS][2] = {{0}};
    int ok[MAX_KS][2] = {{0}};
    /* every (k, order) call first; then each row's reference once (a stable
     * sort), checked against all of them */
    for (int ki = 0; ki < nks && ki < MAX_KS; ++ki) {
        const int64_t k = ks[ki];
        if (k < 1 || k > len) continue;
        for (int order = 0; order < 2; ++order) {
            vals[ki][order] = red_alloc((size_t)nout * es);
            inds[ki][order] = red_alloc((size_t)nout * 8);
            int st = kwk_kthvalue(dt, x, outer, len, inner, len * inner, inner, 1, k,
                                  vals[ki][order], inds[ki][order], inner, 1, order);
            ++checks;
            if (st != KWK_OK) FAIL("kthvalue status %d", st);
            if (!red_ok(vals[ki][order], (size_t)nout * es) ||
                !red_ok(inds[ki][order], (size_t)nout * 8))
                FAIL("kthvalue red zone");
            ok[ki][order] = st == KWK_OK;
        }
    }
    rec *quick = malloc((size_t)len * sizeof(rec));
    for (int64_t o = 0; o < outer; ++o) {
        for (int64_t i = 0; i < inner; ++i) {
            const char *row = x + (o * len * inner + i) * es;
            const int64_t step = inner * es;
            reference(dt, row, len, step, 0, ref);
            for (int ki = 0; ki < nks && ki < MAX_KS; ++ki) {
                const int64_t k = ks[ki];
                for (int order = 0; order < 2; ++order) {
                    if (!ok[ki][order]) continue;
                    const uint64_t kkey = ref[k - 1].key;
                    int shared = (k > 1 && ref[k - 2].key == kkey) || (k < len && ref[k].key == kkey);
                    int64_t want = ref[k - 1].idx;
                    if (order == KWK_ORDER_TORCH && shared) {
                        for (int64_t j = 0; j < len; ++j) {
                            quick[j].key = kwk_key_at(dt, row + j * step);
                            quick[j].idx = j;
                        }
                        ref_torch_quickselect(quick, len, k - 1);
                        want = quick[k - 1].idx;
                    }
                    const int64_t got = inds[ki][order][o * inner + i];
                    if (got != want)
                        FAIL("kthvalue index dt=%s kind=%s len=%lld k=%lld order=%d got %lld want %lld",
                             DT_NAMES[dt], KIND_NAMES[kind], (long long)len, (long long)k, order,
                             (long long)got, (long long)want);
                    else if (get_bits(vals[ki][order] + (o * inner + i) * es, es) !=
                             get_bits(row + got * step, es))
                        FAIL("kthvalue value bits dt=%s", DT_NAMES[dt]);
                }
            }
        }
    }
    free(quick);
    for (int ki = 0; ki < MAX_KS; ++ki)
        for (int order = 0; order < 2; ++order)
            if (vals[ki][order]) {
                red_free(vals[ki][order]);
                red_free(inds[ki][order]);
            }
}

/* median_dim over (outer, len, inner) with inner > 1 (rows along a non-last
 * dim; float32 takes the eight-rows-at-once kernel there) against the
 * reference, row by row. */
static void test_median_inner(int dt, int kind, int64_t len, int64_t outer, int64_t inner,
                              const char *x, rec *ref)
{
    const kwk_dtype_info info = KWK_DTYPES[dt];
    const int es = info.elem_size;
    const uint64_t nan_key = kwk_width_mask(info.key_bits);
    const int64_t nout = outer * inner;
    for (int ignore_nan = 0; ignore_nan < 2; ++ignore_nan) {
        char *vals = red_alloc((size_t)nout * es);
        int64_t *inds = red_alloc((size_t)nout * 8);
        int st = kwk_median_dim(dt, x, outer, len, inner, len * inner, inner, 1, vals, inds,
                                inner, 1, ignore_nan);
        ++checks;
        if (st != KWK_OK) FAIL("median inner status %d", st);
        if (!red_ok(vals, (size_t)nout * es) || !red_ok(inds, (size_t)nout * 8))
            FAIL("median inner red zone");
        for (int64_t o = 0; o < outer && st == KWK_OK; ++o) {
            for (int64_t i = 0; i < inner; ++i) {
                const char *row = x + (o * len * inner + i) * es;
                const int64_t step = inner * es;
                reference(dt, row, len, step, 0, ref);
                int64_t nnan = 0, first_nan = -1;
                for (int64_t j = 0; j < len; ++j)
                    if (info.is_float && kwk_key_at(dt, row + j * step) == nan_key) {
                        if (first_nan < 0) first_nan = j;
                        ++nnan;
                    }
                int64_t want = (!ignore_nan && first_nan >= 0) ? first_nan
                                                               : ref[(len - nnan - 1) / 2].idx;
                const int64_t got = inds[o * inner + i];
                if (ignore_nan && nnan == len) want = got; /* nth_element's choice */
                if (got != want)
                    FAIL("median inner index dt=%s kind=%s len=%lld inner=%lld nan=%d got %lld want %lld",
                         DT_NAMES[dt], KIND_NAMES[kind], (long long)len, (long long)inner,
                         ignore_nan, (long long)got, (long long)want);
                else if (get_bits(vals + (o * inner + i) * es, es) != get_bits(row + got * step, es))
                    FAIL("median inner value bits");
            }
        }
        red_free(vals);
        red_free(inds);
    }
}

static void test_median(int dt, int kind, int64_t len, int64_t outer, const char *x, rec *ref)
{
    const kwk_dtype_info info = KWK_DTYPES[dt];
    const int es = info.elem_size;
    const uint64_t nan_key = kwk_width_mask(info.key_bits);
    for (int ignore_nan = 0; ignore_nan < 2; ++ignore_nan) {
        char *vals = red_alloc((size_t)outer * es);
        int64_t *inds = red_alloc((size_t)outer * 8);
        int st = kwk_median_dim(dt, x, outer, len, 1, len, 1, 1, vals, inds, 1, 1, ignore_nan);
        ++checks;
        if (st != KWK_OK) FAIL("median status %d", st);
        if (!red_ok(vals, (size_t)outer * es) || !red_ok(inds, (size_t)outer * 8))
            FAIL("median red zone");
        for (int64_t o = 0; o < outer && st == KWK_OK; ++o) {
            const char *row = x + o * len * es;
            reference(dt, row, len, es, 0, ref);
            int64_t nnan = 0, first_nan = -1;
            for (int64_t j = 0; j < len; ++j)
                if (info.is_float && kwk_key_at(dt, row + j * es) == nan_key) {
                    if (first_nan < 0) first_nan = j;
                    ++nnan;
                }
            int64_t want;
            if (!ignore_nan && first_nan >= 0) want = first_nan;
            else want = ref[(len - nnan - 1) / 2].idx;
            int64_t got = inds[o];
            if (ignore_nan && nnan == len) { /* nth_element's choice among NaNs */
                if (got < 0 || got >= len) FAIL("nanmedian all-NaN index");
                want = got;
            }
            if (got != want)
                FAIL("median index dt=%s kind=%s len=%lld nan=%d got %lld want %lld", DT_NAMES[dt],
                     KIND_NAMES[kind], (long long)len, ignore_nan, (long long)got, (long long)want);
            else if (get_bits(vals + o * es, es) != get_bits(row + got * es, es))
                FAIL("median value bits");
        }
        red_free(vals);
        red_free(inds);
        /* median over all elements (value only) */
        const int64_t n = outer * len;
        char *v = red_alloc((size_t)es);
        st = kwk_median_all(dt, x, n, 1, v, ignore_nan);
        ++checks;
        if (!red_ok(v, (size_t)es)) FAIL("median_all red zone");
        if (n > 0) {
            reference(dt, x, n, es, 0, ref);
            int64_t nnan = 0;
            for (int64_t j = 0; j < n; ++j)
                nnan += info.is_float && kwk_key_at(dt, x + j * es) == nan_key;
            uint64_t got = get_bits(v, es);
            if (st != KWK_OK) FAIL("median_all status %d", st);
            else if (!ignore_nan && nnan > 0) {
                if (kwk_key_at(dt, v) != nan_key) FAIL("median_all NaN");
            } else {
                const rec want = ref[(n - nnan - 1) / 2];
                if (kwk_key_at(dt, v) != want.key) {
                    FAIL("median_all key dt=%s kind=%s n=%lld", DT_NAMES[dt], KIND_NAMES[kind], (long long)n);
                } else {
                    int found = 0;
                    for (int64_t j = 0; j < n && !found; ++j) found = get_bits(x + j * es, es) == got;
                    if (!found) FAIL("median_all value bits not from input");
                }
            }
        }
        red_free(v);
    }
}

int main(int argc, char **argv)
{
    /* quick: CI's optimised run; san: CI's sanitized run, as quick but
     * rows of 70..4095 take three of the nine input kinds per dtype (a
     * different three for each dtype: every kind at every such length
     * across the dtypes), as the optimised run checks them all */
    ref_sort_self_check();
    const int san = argc > 1 && strcmp(argv[1], "san") == 0;
    if (san) torch_topk_max_len = 4095;
    const int quick = san || (argc > 1 && strcmp(argv[1], "quick") == 0);
    const char *const *targets = KWK_TEST_TARGET_NAMES;
    static const int64_t extra_lens[] = {127, 128, 129, 191, 192, 193, 255, 256, 257, 300, 511, 512, 513,
                                         2002, 2047, 2048, 2049, 4095, 4097,
                                         639, 640, 641, 1000, 1023, 1024, 1025, 1100, 4096, 6400, 6463, 6464, 20000};
    const int64_t max_len = 140000;
    char *x = malloc((size_t)max_len * 8 + 8);
    rec *ref = malloc((size_t)max_len * sizeof(rec));
    seen = malloc((size_t)max_len);
    torch_topk_rec = malloc((size_t)max_len * sizeof(kwk_kv));
    for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 3; ++b) ref_cache[a][b] = malloc((size_t)max_len * sizeof(rec));
    for (int t = 0; t < KWK_TEST_NTARGETS; ++t) {
        if (test_set_target(targets[t]) != KWK_OK) {
            printf("target %s not available here, skipped\n", targets[t]);
            continue;
        }
        printf("target %s\n", kwk_target());
        for (int dt = 0; dt < KWK_NUM_DTYPES; ++dt) {
            const int es = KWK_DTYPES[dt].elem_size;
            const int nlens = (quick ? 70 : 1101) + (int)(sizeof extra_lens / sizeof extra_lens[0]);
            for (int li = 0; li < nlens; ++li) {
                int64_t len = li < (quick ? 70 : 1101) ? li : extra_lens[li - (quick ? 70 : 1101)];
                if (!quick && len > 200 && len < 1101 && len % 37 != 0 && li < 1101) continue;
                for (int kind = 0; kind < NKINDS; ++kind) {
                    /* long rows: two kinds per dtype (quick: one, ties on every other
                     * dtype; the sanitized run must fit CI's time) */
                    if (len >= 4096 && kind != (dt % NKINDS) && kind != K_SMALLINT) continue;
                    if (quick && len >= 4096 && kind != (dt % 2 ? K_SMALLINT : dt % NKINDS))
                        continue;
                    if (san && len >= 70 && len < 4096 && (kind + dt) % 3 != 0) continue;
                    const int64_t outer = len >= 4096 ? 1 : 2;
                    fill(dt, kind, x, outer * len);
                    int64_t ks[] = {0, 1, 2, 3, 8, 9, 16, 17, 50, 100, len / 64, len / 64 + 1,
                                    len / 2, len - 1, len};
                    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ++ki) {
                        int64_t k = ks[ki];
                        if (k < 0 || k > len) continue;
                        for (int largest = 0; largest < 2; ++largest)
                            for (int sorted = 0; sorted < 2; ++sorted)
                                for (int order = 0; order < 2; ++order)
                                    test_topk(dt, kind, len, k, largest, sorted, order, outer, 1, x, ref);
                    }
                    /* strided rows: (1, len, 3) */
                    if (len > 0 && len <= 1100 && len % 7 == 0) {
                        fill(dt, kind, x, 3 * len);
                        int64_t k = len / 64 + 1 < len ? len / 64 + 1 : len;
                        test_topk(dt, kind, len, k, 1, 1, KWK_ORDER_TORCH, 1, 3, x, ref);
                        test_topk(dt, kind, len, k, 0, 1, KWK_ORDER_STABLE, 1, 3, x, ref);
                        fill(dt, kind, x, outer * len);
                    }
                    /* quick (the sanitized CI run): rows of up to 17 and the lengths
                     * around the kernel's 32/64/256 steps, k without 3 and len/2 */
                    if (len > 0 && len <= 257 &&
                        (!quick || len <= 17 || len == 32 || len == 33 || len == 64 || len >= 256)) {
                        /* many short rows: topk's eight-rows kernel (11 rows: a group
                         * and a tail), along the last dim and along a strided one */
                        fill(dt, kind, x, 11 * len);
                        /* k of 1, 2, 4, 8: the dense emit's transposes; 3, 6: its
                         * gathers */
                        const int64_t sk[] = {1, 2, 3, 4, 6, 8, 9, len / 2, len};
                        for (size_t ki = 0; ki < sizeof sk / sizeof sk[0]; ++ki) {
                            if (sk[ki] < 1 || sk[ki] > len) continue;
                            if (quick && (ki == 2 || ki == 4 || ki == 7)) continue;
                            for (int largest = 0; largest < 2; ++largest)
                                for (int order = 0; order < 2; ++order) {
                                    test_topk(dt, kind, len, sk[ki], largest, 1, order, 11, 1, x, ref);
                                    test_topk(dt, kind, len, sk[ki], largest, 0, order, 1, 11, x, ref);
                                }
                        }
                        fill(dt, kind, x, outer * len);
                    }
                    /* float32 rows of up to 129 in groups of sixteen
                     * (topk_short16.h on AVX-512: 37 rows, two groups and a
                     * tail of five for the eight-rows kernel) */
                    if (dt == KWK_FLOAT32 && len >= 2 && len <= 129 &&
                        (!quick || len <= 18 || len % 16 <= 1)) {
                        fill(dt, kind, x, 37 * len);
                        const int64_t gk[] = {1, 2, 3, 4, 5, 8, len - 1};
                        for (size_t ki = 0; ki < sizeof gk / sizeof gk[0]; ++ki) {
                            if (gk[ki] < 1 || gk[ki] > 8 || gk[ki] > len || (ki == 6 && gk[ki] <= 5)) continue;
                            for (int largest = 0; largest < 2; ++largest)
                                for (int order = 0; order < 2; ++order)
                                    for (int sorted = 0; sorted < 2; ++sorted)
                                        test_topk(dt, kind, len, gk[ki], largest, sorted, order, 37, 1, x, ref);
                        }
                        fill(dt, kind, x, outer * len);
                    }
                    if (len > 0) test_median(dt, kind, len, outer, x, ref);
                    /* float32 rows of up to 32, sixteen at a time on AVX-512
                     * (batch_median.h bm_f32_rows16): 37 rows */
                    if (dt == KWK_FLOAT32 && len >= 2 && len <= 33 && (!quick || len <= 17 || len % 8 <= 1)) {
                        fill(dt, kind, x, 37 * len);
                        test_median(dt, kind, len, 37, x, ref);
                        fill(dt, kind, x, outer * len);
                    }
                    if (len > 0 && len <= 33) { /* short rows along a non-last dim */
                        fill(dt, kind, x, 2 * len * 19);
                        test_median_inner(dt, kind, len, 2, 19, x, ref);
                        fill(dt, kind, x, outer * len);
                    }
                    if (len > 0 && (!quick || len >= 60)) {
                        const int64_t kk[] = {1, 2, len / 10 + 1, (len + 1) / 2, len - len / 1000, len - 1, len};
                        test_kthvalue(dt, kind, len, outer, 1, x, ref, kk, 7);
                        if (len <= 2100 && len % 7 == 0) { /* strided rows: (2, len, 3) */
                            fill(dt, kind, x, 6 * len);
                            test_kthvalue(dt, kind, len, 2, 3, x, ref, kk, 7);
                        }
                    }
                }
            }
            (void)es;
            /* long rows: the median reads them block by block */
            static const int long_kinds[] = {K_RANDOM, K_SMALLINT, K_NAN, K_ZERO, K_TWO};
            for (int q = 0; q < 5; q += quick ? 3 : 1) { /* quick: random 2^17, 70001 zeros */
                const int64_t len = q & 1 ? 70001 : 131072;
                fill(dt, long_kinds[q], x, len);
                test_median(dt, long_kinds[q], len, 1, x, ref);
                const int64_t kk[] = {1, len / 3, (len + 1) / 2, len - 7, len};
                test_kthvalue(dt, long_kinds[q], len, 1, 1, x, ref, kk, 5);
            }
        }
    }
    /* the short-row kernel ran, and handed tied rows back; the threshold
     * kernel ran, emulated tied rows and handed back crowded ones */
    ++checks;
    if (kwk_counter(KWK_COUNT_SHORT_TOPK_ROWS) <= 0 || kwk_counter(KWK_COUNT_SHORT_TOPK_REDONE) <= 0 ||
        kwk_counter(KWK_NUM_COUNTERS) != -1)
        FAIL("short-row topk counters %lld %lld", (long long)kwk_counter(KWK_COUNT_SHORT_TOPK_ROWS),
             (long long)kwk_counter(KWK_COUNT_SHORT_TOPK_REDONE));
    ++checks;
    if (kwk_counter(KWK_COUNT_THRESHOLD_TOPK_ROWS) <= 0 || kwk_counter(KWK_COUNT_THRESHOLD_TOPK_TIES) <= 0 ||
        kwk_counter(KWK_COUNT_THRESHOLD_TOPK_REDONE) <= 0)
        FAIL("threshold topk counters %lld %lld %lld",
             (long long)kwk_counter(KWK_COUNT_THRESHOLD_TOPK_ROWS),
             (long long)kwk_counter(KWK_COUNT_THRESHOLD_TOPK_TIES),
             (long long)kwk_counter(KWK_COUNT_THRESHOLD_TOPK_REDONE));
    printf("checks %ld failures %ld\n", checks, failures);
    free(x);
    free(ref);
    return failures != 0;
}
