/*
 * order_words.h - sorting and selecting rows as unique integer words.
 *
 * A row of keys becomes one word per element: (key - min) << ibits | index,
 * where ibits is just enough for the row's largest index.  Words are unique,
 * so any sort or selection over them is exact, and the index in the low bits
 * makes ties come out in index order (a stable result from unstable tools).
 * Keys too wide for that packing (64-bit keys spanning more than
 * 64 - ibits bits) use (key, index) records instead.
 */
#ifndef KWK_ORDER_WORDS_H
#define KWK_ORDER_WORDS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "kernels.h"
#include "simd_qsort.h"
#include "torch_order.h"
#include "word_network.h"

/* Rows at most this long are insertion-sorted: the radix sort's 256-bucket
 * histograms cost more than the quadratic moves below it. */
enum { KWK_INSERTION_MAX = 32 };
/* Radix digit width. */
enum { KWK_DIGIT_BITS = 8, KWK_BUCKETS = 1 << KWK_DIGIT_BITS };

/* Stable LSD radix sort of a[0..n) on bits [lo, lo + bits); tmp holds n
 * words.  Digits every element shares are skipped.  Long rows use up to
 * KWK_WIDE_DIGIT_BITS-bit digits (one pass fewer for 32-bit keys: the
 * 2048-bucket tables cost nothing next to a pass over a million words, and
 * are too costly for short rows); the bits are split evenly over the passes.
 * Counts are 32-bit (half the table cache footprint) below 2^32 elements. */
enum { KWK_WIDE_DIGIT_BITS = 11, KWK_WIDE_DIGIT_MIN_N = 1 << 16 };
/* Measured, random 28-bit keys: rows of 5000-40000 words sort 20% faster
 * with 10-11-bit digits (three passes) than with 8-bit ones (four). */
enum { KWK_DIGIT_TABLE_RATIO = 4 };

/* Returns the array holding the result (a or tmp). */
static uint64_t *words_radix_narrow_res(uint64_t *a, uint64_t *tmp, int64_t n, int lo, int bits)
{
    const int passes = (bits + KWK_DIGIT_BITS - 1) / KWK_DIGIT_BITS;
    int64_t counts[8][KWK_BUCKETS];
    memset(counts, 0, sizeof(int64_t) * KWK_BUCKETS * (size_t)passes);
    for (int64_t i = 0; i < n; ++i) {
        uint64_t w = a[i] >> lo;
        for (int p = 0; p < passes; ++p)
            counts[p][(w >> (p * KWK_DIGIT_BITS)) & (KWK_BUCKETS - 1)]++;
    }
    uint64_t *src = a, *dst = tmp;
    for (int p = 0; p < passes; ++p) {
        const int shift = lo + p * KWK_DIGIT_BITS;
        int64_t *c = counts[p];
        if (c[(src[0] >> shift) & (KWK_BUCKETS - 1)] == n) continue;
        int64_t sum = 0;
        for (int b = 0; b < KWK_BUCKETS; ++b) {
            int64_t t = c[b];
            c[b] = sum;
            sum += t;
        }
        for (int64_t i = 0; i < n; ++i) {
            uint64_t w = src[i];
            dst[c[(w >> shift) & (KWK_BUCKETS - 1)]++] = w;
        }
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    return src;
}

/* One radix pass set with `passes` digits of `db` bits (db <= 11), 32-bit
 * counts.  Returns the array holding the result (a or tmp). */
static uint64_t *words_radix_passes32(uint64_t *a, uint64_t *tmp, int64_t n, int lo,
                                      int bits, int passes, int db)
{
    uint32_t counts[6][1 << KWK_WIDE_DIGIT_BITS];
    const uint64_t dmask = ((uint64_t)1 << db) - 1;
    const size_t nb = (size_t)1 << db;
    for (int p = 0; p < passes; ++p) memset(counts[p], 0, nb * sizeof(uint32_t));
    const uint64_t bmask = bits >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << bits) - 1);
    (void)bmask;
    switch (passes) {
#define KWK_HIST_CASE(P)                                                      \
    case P:                                                                   \
        for (int64_t i = 0; i < n; ++i) {                                     \
            const uint64_t w = a[i] >> lo;                                    \
            for (int p = 0; p < P; ++p) counts[p][(w >> (p * db)) & dmask]++; \
        }                                                                     \
        break;
    KWK_HIST_CASE(1) KWK_HIST_CASE(2) KWK_HIST_CASE(3)
    KWK_HIST_CASE(4) KWK_HIST_CASE(5) KWK_HIST_CASE(6)
#undef KWK_HIST_CASE
    default: break;
    }
    uint64_t *src = a, *dst = tmp;
    for (int p = 0; p < passes; ++p) {
        const int shift = lo + p * db;
        uint32_t *c = counts[p];
        if (c[(src[0] >> shift) & dmask] == (uint32_t)n) continue;
        uint32_t sum = 0;
        for (size_t b = 0; b < nb; ++b) {
            uint32_t t = c[b];
            c[b] = sum;
            sum += t;
        }
        for (int64_t i = 0; i < n; ++i) {
            const uint64_t w = src[i];
            dst[c[(w >> shift) & dmask]++] = w;
        }
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    return src;
}

/* A single digit (bits <= KWK_DIGIT_BITS: expert ids, class labels, graph
 * ids), 1 <= n < 2^32.  One pass is latency-bound: each count is read,
 * incremented and stored again, and keys from a few buckets make the next
 * element wait on that store (expert ids of 0..127 sorted at 3.2 ns a word
 * in histogram and scatter).  The row is cut in four quarters, each with
 * its own counts, walked in lockstep: four independent chains.  Stable:
 * within a bucket quarter 0's words go first, then 1's, 2's and 3's (whose
 * tail [4q, n) follows its main part).  Returns the array holding the
 * result (a or tmp). */
static uint64_t *words_radix_one_digit(uint64_t *a, uint64_t *tmp, int64_t n, int lo)
{
    uint32_t c[4][KWK_BUCKETS];
    memset(c, 0, sizeof c);
    const int64_t q = n / 4;
    const uint64_t *a0 = a, *a1 = a + q, *a2 = a + 2 * q, *a3 = a + 3 * q;
#define KWK_DIGIT(w) (((w) >> lo) & (KWK_BUCKETS - 1))
    for (int64_t i = 0; i < q; ++i) {
        c[0][KWK_DIGIT(a0[i])]++;
        c[1][KWK_DIGIT(a1[i])]++;
        c[2][KWK_DIGIT(a2[i])]++;
        c[3][KWK_DIGIT(a3[i])]++;
    }
    for (int64_t i = 4 * q; i < n; ++i) c[3][KWK_DIGIT(a[i])]++;
    if ((int64_t)c[0][KWK_DIGIT(a[0])] + c[1][KWK_DIGIT(a[0])] + c[2][KWK_DIGIT(a[0])] +
            c[3][KWK_DIGIT(a[0])] == n)
        return a; /* one digit value: nothing moves */
    uint32_t sum = 0;
    for (int b = 0; b < KWK_BUCKETS; ++b)
        for (int k = 0; k < 4; ++k) {
            const uint32_t t = c[k][b];
            c[k][b] = sum;
            sum += t;
        }
    for (int64_t i = 0; i < q; ++i) {
        const uint64_t w0 = a0[i], w1 = a1[i], w2 = a2[i], w3 = a3[i];
        tmp[c[0][KWK_DIGIT(w0)]++] = w0;
        tmp[c[1][KWK_DIGIT(w1)]++] = w1;
        tmp[c[2][KWK_DIGIT(w2)]++] = w2;
        tmp[c[3][KWK_DIGIT(w3)]++] = w3;
    }
    for (int64_t i = 4 * q; i < n; ++i) tmp[c[3][KWK_DIGIT(a[i])]++] = a[i];
#undef KWK_DIGIT
    return tmp;
}

/* Returns the array holding the result (a or tmp). */
static uint64_t *words_radix_res(uint64_t *a, uint64_t *tmp, int64_t n, int lo, int bits)
{
    if (n <= 0 || bits <= 0) return a;
    if (n >= ((int64_t)1 << 32)) return words_radix_narrow_res(a, tmp, n, lo, bits);
    if (bits <= KWK_DIGIT_BITS) return words_radix_one_digit(a, tmp, n, lo);
    int maxdb = KWK_WIDE_DIGIT_BITS;
    if (n < KWK_WIDE_DIGIT_MIN_N) {
        /* 8-bit digits (the constant-digit loops are faster per pass)
         * unless a wider digit saves a pass and the row holds
         * KWK_DIGIT_TABLE_RATIO times its buckets */
        maxdb = 0;
        for (int db = KWK_WIDE_DIGIT_BITS; db > KWK_DIGIT_BITS; --db)
            if (((int64_t)1 << db) * KWK_DIGIT_TABLE_RATIO <= n) {
                maxdb = db;
                break;
            }
        if (maxdb == 0 || (bits + maxdb - 1) / maxdb >= (bits + KWK_DIGIT_BITS - 1) / KWK_DIGIT_BITS)
            return words_radix_narrow_res(a, tmp, n, lo, bits);
    }
    int passes = (bits + maxdb - 1) / maxdb;
    if (passes > 6) return words_radix_narrow_res(a, tmp, n, lo, bits);
    const int db = (bits + passes - 1) / passes;
    return words_radix_passes32(a, tmp, n, lo, bits, passes, db);
}

static void words_radix_sort(uint64_t *a, uint64_t *tmp, int64_t n, int lo, int bits)
{
    uint64_t *res = words_radix_res(a, tmp, n, lo, bits);
    if (res != a) memcpy(a, res, (size_t)n * sizeof(uint64_t));
}

/* Rows at most this long are sorted by comparison: rank sorts of 16-word
 * chunks, then branch-free merges (no 256-bucket tables to clear and scan,
 * no mispredicted insertion steps); measured (AVX2, random 31-bit keys):
 * 64 words 9.6 vs 16.2 ns/elem for radix, 128 words 13.4 vs 14.1. */
enum { KWK_SMALL_SORT_MAX = 128 };

#if defined(__AVX2__)
#include <immintrin.h>
#endif

/* n <= 16 unique words: each goes to its rank (how many are smaller). */
static inline void words_rank_sort16(uint64_t *a, int n)
{
    if (n < 2) return;
    uint64_t w[16] = {0};
    for (int j = 0; j < n; ++j) w[j] = a[j]; /* no memcpy call for a few words */
    const unsigned valid = (1u << n) - 1;
#if defined(__AVX2__)
    const __m256i sign = _mm256_set1_epi64x((long long)0x8000000000000000ull);
    const __m256i t0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(w + 0)), sign);
    const __m256i t1 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(w + 4)), sign);
    const __m256i t2 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(w + 8)), sign);
    const __m256i t3 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(w + 12)), sign);
    if (n <= 8) { /* half the compares */
        for (int i = 0; i < n; ++i) {
            const __m256i b = _mm256_set1_epi64x((long long)(w[i] ^ 0x8000000000000000ull));
            unsigned mk = (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(b, t0)));
            mk |= (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(b, t1))) << 4;
            a[__builtin_popcount(mk & valid)] = w[i];
        }
        return;
    }
    for (int i = 0; i < n; ++i) {
        const __m256i b = _mm256_set1_epi64x((long long)(w[i] ^ 0x8000000000000000ull));
        unsigned mk = (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(b, t0)));
        mk |= (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(b, t1))) << 4;
        mk |= (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(b, t2))) << 8;
        mk |= (unsigned)_mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(b, t3))) << 12;
        a[__builtin_popcount(mk & valid)] = w[i];
    }
#else
    (void)valid;
    for (int i = 0; i < n; ++i) {
        int r = 0;
        for (int j = 0; j < n; ++j) r += w[j] < w[i];
        a[r] = w[i];
    }
#endif
}

/* Merge sorted runs x[0..nx) and y[0..ny) (nx, ny >= 1) of unique words
 * into out: the h = n/2 smallest from the front and the rest from the back
 * at once, two independent dependency chains (each step's index depends on
 * its previous load, so one chain alone is latency-bound).  Indices are
 * clamped for the loads; the validity flags decide.  AVX-512: blocks of
 * eight where both runs have them, also from both ends (simd_qsort.h's
 * qs64_merge2, its quicksort's base-case merge: a third of this loop's
 * time a word; from both ends, torchvision's NMS scores, five sorted
 * runs, 1.15x). */
static inline void words_merge(const uint64_t *x, int64_t nx, const uint64_t *y, int64_t ny, uint64_t *out)
{
#if defined(KWK_HAVE_SIMD_QSORT) && defined(__AVX512F__)
    if (nx >= 8 && ny >= 8) {
        qs64_merge2(x, nx, y, ny, out);
        return;
    }
#endif
    const int64_t n = nx + ny, h = n / 2;
    int64_t i = 0, j = 0, ie = nx - 1, je = ny - 1, ke = n - 1;
    for (int64_t k = 0; k < h; ++k) {
        const uint64_t xi = x[i < nx ? i : nx - 1], yj = y[j < ny ? j : ny - 1];
        const int take_y = (j < ny) & ((i >= nx) | (yj < xi));
        out[k] = take_y ? yj : xi;
        j += take_y;
        i += !take_y;
        const uint64_t xe = x[ie >= 0 ? ie : 0], ye = y[je >= 0 ? je : 0];
        const int take_x = (ie >= 0) & ((je < 0) | (xe > ye));
        out[ke--] = take_x ? xe : ye;
        ie -= take_x;
        je -= !take_x;
    }
    if (n & 1) {
        const uint64_t xe = x[ie >= 0 ? ie : 0], ye = y[je >= 0 ? je : 0];
        const int take_x = (ie >= 0) & ((je < 0) | (xe > ye));
        out[ke] = take_x ? xe : ye;
    }
}

/* Sort n unique words (any n; meant for short rows); tmp holds n words.
 * Rows of 17..128 words take the bitonic network where there is AVX2
 * (word_network.h: 5-7 ns a word at 100-128 against 11 for the merges). */
static void words_small_sort(uint64_t *a, uint64_t *tmp, int64_t n)
{
#if defined(KWK_HAVE_WORD_NETWORK)
    if (n > 16 && n <= KWK_WNET_MAX) {
        words_network_sort(a, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i += 16) words_rank_sort16(a + i, (int)(n - i < 16 ? n - i : 16));
    if (n <= 16) return;
    uint64_t *src = a, *dst = tmp;
    for (int64_t width = 16; width < n; width *= 2) {
        for (int64_t i = 0; i < n; i += 2 * width) {
            const int64_t nx = n - i < width ? n - i : width;
            const int64_t rest = n - i - nx;
            const int64_t ny = rest < width ? rest : width;
            if (ny > 0) words_merge(src + i, nx, src + i + nx, ny, dst + i);
            else memcpy(dst + i, src + i, (size_t)nx * sizeof(uint64_t));
        }
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != a) memcpy(a, src, (size_t)n * sizeof(uint64_t));
}

/* Rows too big for the cache whose keys would need three or more LSD
 * passes take one most-significant-digit pass first: a single scatter
 * through memory, then each bucket is sorted while it sits in cache and
 * copied back.  (Every LSD pass over a million words costs about as much as
 * that whole second stage.)  From KWK_MSD_MIN_N words (5 MiB) on one
 * thread: below it the LSD passes still run from the L3 cache, and the
 * buckets' own passes cost more than the LSD pass saved (Zen 3, float32
 * randn keys + index, ns/word LSD vs MSD, min of 5 alternating runs:
 * 152064 9.4 vs 15.9, 262144 9.9 vs 13.8, 524288 12.1 vs 16.7, 600000
 * 14.6 vs 13.4, 1M 16.5 vs 15.0; int32 of 20 bits 152064 9.6 vs 13.2;
 * int64 of 20 bits 152064 18.0 vs 22.3).  With row threads the MSD pass
 * starts at KWK_MSD_SPLIT_MIN_N: its buckets are what the threads share. */
enum {
    KWK_MSD_MIN_N = 5 << 17,
    KWK_MSD_SPLIT_MIN_N = 1 << 17,
    KWK_MSD_LSD_MAX_BITS = 2 * KWK_WIDE_DIGIT_BITS
};

static uint64_t *words_sort_bits_res(uint64_t *a, uint64_t *tmp, int64_t n, int lo, int bits);
static void words_sort_bits(uint64_t *a, uint64_t *tmp, int64_t n, int lo, int bits);

/* The MSD pass over several threads (kwker.h kwk_set_row_threads): each
 * part counts its slice of the row, the offsets run bucket by bucket and
 * part by part within a bucket (so each bucket keeps the row's order: the
 * pass stays stable), each part scatters its slice, and then the buckets
 * are shared out in runs of about n / parts words, each part sorting its
 * own.  Three rounds of threads (count, scatter, buckets): each needs the
 * last one finished. */
typedef struct {
    uint64_t *a, *tmp;
    int64_t n;
    int lo, bits, shift, parts;
    uint32_t *count; /* parts x NB: counts, then each part's next slot */
    uint32_t *end;   /* NB: end of each bucket in tmp */
    int cut[KWK_MAX_ROW_THREADS + 1]; /* part p sorts buckets [cut[p], cut[p + 1]) */
} msd_split;

enum { MSD_NB = 1 << KWK_WIDE_DIGIT_BITS };

static void msd_count_part(void *ctx, int p)
{
    const msd_split *s = (const msd_split *)ctx;
    uint32_t *count = s->count + (size_t)p * MSD_NB;
    const int64_t i1 = s->n * (p + 1) / s->parts;
    for (int64_t i = s->n * p / s->parts; i < i1; ++i) count[(s->a[i] >> s->shift) & (MSD_NB - 1)]++;
}

static void msd_scatter_part(void *ctx, int p)
{
    const msd_split *s = (const msd_split *)ctx;
    uint32_t *next = s->count + (size_t)p * MSD_NB;
    const int64_t i1 = s->n * (p + 1) / s->parts;
    for (int64_t i = s->n * p / s->parts; i < i1; ++i) {
        const uint64_t w = s->a[i];
        s->tmp[next[(w >> s->shift) & (MSD_NB - 1)]++] = w;
    }
}

/* Sort bucket b (in tmp, with its place in a as scratch) into a.  Buckets
 * of a few hundred words with many bits left (int64 keys, float32 keys of
 * long rows) take the vector quicksort where one is compiled: the LSD
 * sort would make one pass per 8 bits left over a bucket that fits in L1,
 * each pass paying for its table (a 300k-word row of 40-bit int64 keys:
 * buckets of ~150 words, 48 bits, six passes: 1.9x faster); with 17-24
 * bits left, only buckets of up to MSD_QSORT_SHORT words (measured on Zen
 * 3, buckets of 146-293 words: 62-bit keys 17% and 600k int64 of 32 bits
 * 25% faster; a 1M float32 row's ~490-word buckets 5% slower). */
enum { MSD_QSORT_MIN_BITS = 3 * KWK_DIGIT_BITS, MSD_QSORT_SHORT = 384 };

static void msd_sort_bucket(uint64_t *a, uint64_t *tmp, int64_t start, int64_t end, int lo, int bits)
{
    const int64_t m = end - start;
#if defined(KWK_HAVE_SIMD_QSORT)
    if (m > KWK_SMALL_SORT_MAX && m <= KWK_SIMD_QSORT64_MAX_N &&
        (bits > MSD_QSORT_MIN_BITS || (bits > 2 * KWK_DIGIT_BITS && m <= MSD_QSORT_SHORT))) {
        simd_qsort_64(tmp + start, m);
        memcpy(a + start, tmp + start, (size_t)m * sizeof(uint64_t));
        return;
    }
#endif
    const uint64_t *res = m > 1 ? words_sort_bits_res(tmp + start, a + start, m, lo, bits) : tmp + start;
    if (m > 0 && res != a + start) memcpy(a + start, res, (size_t)m * sizeof(uint64_t));
}

static void msd_buckets_part(void *ctx, int p)
{
    const msd_split *s = (const msd_split *)ctx;
    for (int b = s->cut[p]; b < s->cut[p + 1]; ++b)
        msd_sort_bucket(s->a, s->tmp, b ? s->end[b - 1] : 0, s->end[b], s->lo,
                        s->bits - KWK_WIDE_DIGIT_BITS);
}

/* 0 when there is no memory for the tables (the caller sorts alone). */
static int words_msd_sort_split(uint64_t *a, uint64_t *tmp, int64_t n, int lo, int bits, int parts)
{
    msd_split s = {a, tmp, n, lo, bits, lo + bits - KWK_WIDE_DIGIT_BITS, parts, NULL, NULL, {0}};
    s.count = (uint32_t *)calloc((size_t)(parts + 1) * MSD_NB, sizeof(uint32_t));
    if (!s.count) return 0;
    s.end = s.count + (size_t)parts * MSD_NB;
    kwk_run_parts(msd_count_part, &s, parts);
    uint32_t sum = 0;
    for (int b = 0; b < MSD_NB; ++b) {
        for (int p = 0; p < parts; ++p) {
            uint32_t *c = s.count + (size_t)p * MSD_NB + b;
            const uint32_t k = *c;
            *c = sum;
            sum += k;
        }
        s.end[b] = sum;
    }
    kwk_run_parts(msd_scatter_part, &s, parts);
    /* part p takes the buckets up to the one holding word n * (p + 1) / parts */
    s.cut[0] = 0;
    for (int p = 1, b = 0; p <= parts; ++p) {
        const int64_t goal = n * p / parts;
        while (b < MSD_NB && s.end[b] < goal) ++b;
        s.cut[p] = p == parts ? MSD_NB : (b < MSD_NB ? b + 1 : MSD_NB);
        if (s.cut[p] < s.cut[p - 1]) s.cut[p] = s.cut[p - 1];
    }
    kwk_run_parts(msd_buckets_part, &s, parts);
    free(s.count);
    return 1;
}

static void words_msd_sort(uint64_t *a, uint64_t *tmp, int64_t n, int lo, int bits)
{
    enum { D = KWK_WIDE_DIGIT_BITS, NB = 1 << KWK_WIDE_DIGIT_BITS };
    const int shift = lo + bits - D;
    const int parts = kwk_row_threads();
    if (parts > 1 && words_msd_sort_split(a, tmp, n, lo, bits, parts)) return;
    uint32_t *count = (uint32_t *)calloc(NB, sizeof(uint32_t));
    if (!count) { /* no memory for the table: LSD needs none on the heap */
        words_radix_sort(a, tmp, n, lo, bits);
        return;
    }
    for (int64_t i = 0; i < n; ++i) count[(a[i] >> shift) & (NB - 1)]++;
    if (count[(a[0] >> shift) & (NB - 1)] == (uint32_t)n) {
        free(count);
        words_sort_bits(a, tmp, n, lo, bits - D);
        return;
    }
    uint32_t sum = 0;
    for (int b = 0; b < NB; ++b) {
        const uint32_t c = count[b];
        count[b] = sum;
        sum += c;
    }
    for (int64_t i = 0; i < n; ++i) {
        const uint64_t w = a[i];
        tmp[count[(w >> shift) & (NB - 1)]++] = w;
    }
    /* count[b] is now the end of bucket b; each bucket is sorted with its
     * place in a[] as scratch, and copied only if the result is in tmp */
    int64_t start = 0;
    for (int b = 0; b < NB; ++b) {
        msd_sort_bucket(a, tmp, start, count[b], lo, bits - D);
        start = count[b];
    }
    free(count);
}

/* Stable sort of n unique words by bits [lo, lo + bits) (the bits above
 * are equal in all of them); tmp holds n words. */
static uint64_t *words_sort_bits_res(uint64_t *a, uint64_t *tmp, int64_t n, int lo, int bits)
{
    if (bits <= 0 || n < 2) return a;
    if (n <= KWK_SMALL_SORT_MAX) words_small_sort(a, tmp, n);
    else if (n >= KWK_MSD_SPLIT_MIN_N && n < ((int64_t)1 << 32) && bits > KWK_MSD_LSD_MAX_BITS &&
             (n >= KWK_MSD_MIN_N || kwk_row_threads() > 1))
        words_msd_sort(a, tmp, n, lo, bits);
    else return words_radix_res(a, tmp, n, lo, bits);
    return a;
}

/* Same, the result in a[]. */
static void words_sort_bits(uint64_t *a, uint64_t *tmp, int64_t n, int lo, int bits)
{
    uint64_t *res = words_sort_bits_res(a, tmp, n, lo, bits);
    if (res != a) memcpy(a, res, (size_t)n * sizeof(uint64_t));
}

static void words_sort(uint64_t *a, uint64_t *tmp, int64_t n, int ibits, int rbits)
{
    /* rbits == 0: every key equal, words already in index order */
    words_sort_bits(a, tmp, n, ibits, rbits);
}

/* Records compare by (key, idx): unique, so selection is exact too. */
static inline int kv_before(kwk_kv a, kwk_kv b)
{
    return a.key < b.key || (a.key == b.key && a.idx < b.idx);
}

static void kvs_insertion_sort(kwk_kv *a, int64_t n)
{
    for (int64_t i = 1; i < n; ++i) {
        kwk_kv v = a[i];
        int64_t j = i;
        while (j > 0 && kv_before(v, a[j - 1])) {
            a[j] = a[j - 1];
            --j;
        }
        a[j] = v;
    }
}

/* Stable LSD radix sort of records by their whole 64-bit key. */
static void kvs_radix_sort(kwk_kv *a, kwk_kv *tmp, int64_t n)
{
    enum { PASSES = 64 / KWK_DIGIT_BITS };
    if (n <= KWK_INSERTION_MAX) {
        kvs_insertion_sort(a, n);
        return;
    }
    int64_t counts[PASSES][KWK_BUCKETS];
    memset(counts, 0, sizeof counts);
    for (int64_t i = 0; i < n; ++i)
        for (int p = 0; p < PASSES; ++p)
            counts[p][(a[i].key >> (p * KWK_DIGIT_BITS)) & (KWK_BUCKETS - 1)]++;
    kwk_kv *src = a, *dst = tmp;
    for (int p = 0; p < PASSES; ++p) {
        const int shift = p * KWK_DIGIT_BITS;
        int64_t *c = counts[p];
        if (c[(src[0].key >> shift) & (KWK_BUCKETS - 1)] == n) continue;
        int64_t sum = 0;
        for (int b = 0; b < KWK_BUCKETS; ++b) {
            int64_t t = c[b];
            c[b] = sum;
            sum += t;
        }
        for (int64_t i = 0; i < n; ++i)
            dst[c[(src[i].key >> shift) & (KWK_BUCKETS - 1)]++] = src[i];
        kwk_kv *t = src;
        src = dst;
        dst = t;
    }
    if (src != a) memcpy(a, src, (size_t)n * sizeof(kwk_kv));
}

/* Quickselect: afterwards a[0..m) holds the m smallest elements (any order)
 * and a[m-1] is the m-th smallest.  Median-of-three pivots; a range that
 * keeps failing to shrink is finished by a full sort, so the worst case
 * stays O(n log n). */
#define KWK_DEFINE_SELECT(NAME, T, BEFORE, SORT_ALL)                          \
    static void NAME(T *a, T *tmp, int64_t n, int64_t m)                      \
    {                                                                         \
        int64_t lo = 0, hi = n, target = m - 1;                               \
        int budget = 2 * 64;                                                  \
        if (m <= 0 || m > n) return;                                          \
        while (hi - lo > KWK_INSERTION_MAX) {                                 \
            if (budget-- == 0) {                                              \
                SORT_ALL(a + lo, tmp, hi - lo);                               \
                return;                                                       \
            }                                                                 \
            int64_t mid = lo + (hi - lo) / 2;                                 \
            T x = a[lo], y = a[mid], z = a[hi - 1], pivot;                    \
            if (BEFORE(x, y)) pivot = BEFORE(y, z) ? y : (BEFORE(x, z) ? z : x); \
            else pivot = BEFORE(x, z) ? x : (BEFORE(y, z) ? z : y);           \
            int64_t i = lo, j = hi - 1;                                       \
            for (;;) {                                                        \
                while (BEFORE(a[i], pivot)) ++i;                              \
                while (BEFORE(pivot, a[j])) --j;                              \
                if (i >= j) break;                                            \
                T t = a[i]; a[i] = a[j]; a[j] = t;                            \
                ++i; --j;                                                     \
            }                                                                 \
            /* a[lo..j] <= pivot <= a[j+1..hi) */                             \
            if (target <= j) hi = j + 1;                                      \
            else lo = j + 1;                                                  \
        }                                                                     \
        SORT_ALL(a + lo, tmp, hi - lo);                                       \
    }

#define KWK_WORD_BEFORE(x, y) ((x) < (y))
#define KWK_WORDS_SORT_ALL(p, tmp, n) (words_radix_sort((p), (tmp), (n), 0, 64), (void)0)
#define KWK_KVS_SORT_ALL(p, tmp, n) kvs_sort_all((p), (tmp), (n))

/* Records sorted by (key, idx) by merges: insertion-sorted runs of
 * KVS_RUN, then pairwise merges whose choice is data flow, not a branch
 * (tmp holds n records).  For up to KVS_MERGE_MAX records, where the two
 * 8-pass radix sorts below cost their histograms' fixed work: torch.topk
 * of 4096 rows of 64 float64, k = 64, spent 2.6 us a row there (0.57x
 * torch's time). */
enum { KVS_RUN = 16, KVS_MERGE_MAX = 4096 };
static void kvs_merge_sort(kwk_kv *a, kwk_kv *tmp, int64_t n)
{
    for (int64_t s = 0; s < n; s += KVS_RUN) kvs_insertion_sort(a + s, n - s < KVS_RUN ? n - s : KVS_RUN);
    kwk_kv *src = a, *dst = tmp;
    for (int64_t w = KVS_RUN; w < n; w *= 2) {
        for (int64_t s = 0; s < n; s += 2 * w) {
            const int64_t mid = s + w < n ? s + w : n, e = s + 2 * w < n ? s + 2 * w : n;
            int64_t i = s, j = mid, o = s;
            while (i < mid && j < e) {
                const int right = kv_before(src[j], src[i]);
                dst[o++] = right ? src[j] : src[i];
                j += right;
                i += !right;
            }
            while (i < mid) dst[o++] = src[i++];
            while (j < e) dst[o++] = src[j++];
        }
        kwk_kv *t = src;
        src = dst;
        dst = t;
    }
    if (src != a) memcpy(a, src, (size_t)n * sizeof(kwk_kv));
}

static void kvs_sort_all(kwk_kv *a, kwk_kv *tmp, int64_t n)
{
    if (n <= KWK_INSERTION_MAX) {
        kvs_insertion_sort(a, n);
        return;
    }
    if (n <= KVS_MERGE_MAX) {
        kvs_merge_sort(a, tmp, n);
        return;
    }
    /* records here are unique by (key, idx) but not in index order, so sort
     * by index first (radix on idx), then stably by key */
    for (int64_t i = 0; i < n; ++i) { uint64_t t = (uint64_t)a[i].idx; a[i].idx = (int64_t)a[i].key; a[i].key = t; }
    kvs_radix_sort(a, tmp, n);
    for (int64_t i = 0; i < n; ++i) { uint64_t t = (uint64_t)a[i].idx; a[i].idx = (int64_t)a[i].key; a[i].key = t; }
    kvs_radix_sort(a, tmp, n);
}

static void words_sort_small_or_radix(uint64_t *a, uint64_t *tmp, int64_t n)
{
    if (n <= KWK_SMALL_SORT_MAX) words_small_sort(a, tmp, n);
    else words_radix_sort(a, tmp, n, 0, 64);
}
#undef KWK_WORDS_SORT_ALL
#define KWK_WORDS_SORT_ALL(p, tmp, n) words_sort_small_or_radix((p), (tmp), (n))

KWK_DEFINE_SELECT(words_select, uint64_t, KWK_WORD_BEFORE, KWK_WORDS_SORT_ALL)
KWK_DEFINE_SELECT(kvs_select, kwk_kv, kv_before, KWK_KVS_SORT_ALL)

#endif
