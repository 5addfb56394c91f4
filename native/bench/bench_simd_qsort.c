/* bench_simd_qsort.c - ns/element of simd_qsort.h's sorts against the radix
 * sorts they replace, on the keys of float32 rows (normal values): u32 keys
 * (values-only sort: key_radix_u32) and packed (key - lo) << ibits | index
 * words (indexed sort: words_sort_top_first).  One thread, thread CPU time,
 * min of repeats.  Chooses QS_*_MIN / QS_*_MAX in sort_kernels.h / values_sort.h.
 * Build: gcc -D_GNU_SOURCE -O3 -std=c11 -pthread -Inative/include -o /tmp/bench_simd_qsort \
 *          native/bench/bench_simd_qsort.c native/src/dispatch.c native/src/targets/*.c -lm
 * (add -DBENCH_AVX2 for the AVX2 version, simd_qsort_avx2.h)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(BENCH_AVX2)
#pragma GCC target("avx2,bmi,bmi2,fma,popcnt")
#else
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,bmi,bmi2,fma,popcnt")
#endif
#include "../src/sort_kernels.h"
#include "../src/simd_qsort.h"

static double now(void) { struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }
static double unif(void) { return (next() >> 11) * (1.0 / 9007199254740992.0); }
static double gauss(void) { double u = unif() + 1e-300, v = unif(); return sqrt(-2 * log(u)) * cos(6.283185307179586 * v); }

static uint32_t fkey(float f) { uint32_t b; memcpy(&b, &f, 4); return (b & 0x80000000u) ? ~b : b ^ 0x80000000u; }

int main(int argc, char **argv)
{
    const int64_t maxn = argc > 1 ? atoll(argv[1]) : 16000000;
    static const int64_t NS[] = {64, 128, 256, 512, 1000, 2000, 4000, 10000, 30000, 100000, 300000, 1000000, 4000000, 16000000};
    printf("%10s %10s %10s %10s %10s   (ns/element)\n", "n", "u32 radix", "u32 qsort", "u64 radix", "u64 qsort");
    for (size_t s = 0; s < sizeof NS / sizeof NS[0] && NS[s] <= maxn; ++s) {
        const int64_t n = NS[s];
        uint32_t *k = malloc(n * 4), *a32 = malloc(n * 4), *t32 = malloc(n * 4);
        uint64_t *w = malloc(n * 8), *a64 = malloc(n * 8), *t64 = malloc(n * 8);
        uint32_t lo = ~0u, hi = 0;
        for (int64_t i = 0; i < n; ++i) {
            k[i] = fkey((float)gauss());
            lo = k[i] < lo ? k[i] : lo;
            hi = k[i] > hi ? k[i] : hi;
        }
        const int ibits = n > 1 ? 64 - __builtin_clzll((uint64_t)(n - 1)) : 0;
        const int rbits = 32 - __builtin_clz((hi - lo) | 1);
        for (int64_t i = 0; i < n; ++i) w[i] = ((uint64_t)(k[i] - lo) << ibits) | (uint64_t)i;
        const int reps = n <= 100000 ? (int)(2000000 / n) + 3 : n <= 1000000 ? 5 : 2;
        double best[4] = {1e30, 1e30, 1e30, 1e30};
        for (int r = 0; r < reps; ++r) {
            double t;
            memcpy(a32, k, n * 4); t = now(); key_radix_u32(a32, t32, n, lo, rbits); t = now() - t;
            best[0] = t < best[0] ? t : best[0];
            memcpy(t32, k, n * 4); t = now(); simd_qsort_32(t32, n); t = now() - t;
            best[1] = t < best[1] ? t : best[1];
            if (memcmp(a32, t32, n * 4)) { printf("MISMATCH u32 n=%lld\n", (long long)n); return 1; }
            memcpy(a64, w, n * 8); t = now(); words_sort_top_first(a64, t64, n, ibits, rbits); t = now() - t;
            best[2] = t < best[2] ? t : best[2];
            memcpy(t64, w, n * 8); t = now(); simd_qsort_64(t64, n); t = now() - t;
            best[3] = t < best[3] ? t : best[3];
            if (memcmp(a64, t64, n * 8)) { printf("MISMATCH u64 n=%lld\n", (long long)n); return 1; }
        }
        printf("%10lld %10.2f %10.2f %10.2f %10.2f\n", (long long)n, best[0] * 1e9 / n, best[1] * 1e9 / n,
               best[2] * 1e9 / n, best[3] * 1e9 / n);
        fflush(stdout);
        free(k); free(a32); free(t32); free(w); free(a64); free(t64);
    }
    return 0;
}
