/* bench_sort_matrix.c - ns/element of kwk_sort per dtype and row length,
 * stable order, values + indices ("idx") and values only ("val"), one
 * thread, thread CPU time (robust on a loaded machine), min of repeats.
 * Each case sorts about 1M elements in all (rows = 1M / length).
 * Build: gcc -D_GNU_SOURCE -O3 -std=c11 -ffp-contract=off -Inative/include \
 *          -o /tmp/bench_sort_matrix native/bench/bench_sort_matrix.c \
 *          native/src/dispatch.c native/src/targets/portable.c \
 *          native/src/targets/avx2.c native/src/targets/avx512.c -lm
 * Run:   /tmp/bench_sort_matrix [filter] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "kwker.h"

static double now(void) { struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }
static double unif(void) { return (next() >> 11) * (1.0 / 9007199254740992.0); }

typedef struct { const char *name; int dtype; int es; int kind; } bdtype;
/* kind: 0 uniform f32 in [-0.5,0.5), 1 bf16 of a uniform in [-4,4), 2 f64 uniform,
 * 3 int64 in [0, 50257) (token ids), 4 int64 full range, 5 uint8 */
static const bdtype DT[] = {
    {"f32", KWK_FLOAT32, 4, 0}, {"bf16", KWK_BFLOAT16, 2, 1}, {"f64", KWK_FLOAT64, 8, 2},
    {"i64small", KWK_INT64, 8, 3}, {"i64full", KWK_INT64, 8, 4}, {"u8", KWK_UINT8, 1, 5},
};
static const long LENS[] = {8, 64, 1000, 4096, 1000000};

static void fill(const bdtype *d, char *x, long total)
{
    rng = 88172645463325252ull;
    for (long i = 0; i < total; ++i) {
        switch (d->kind) {
        case 0: { float f = (float)(unif() - 0.5); memcpy(x + i * 4, &f, 4); break; }
        case 1: { float f = (float)(unif() * 8 - 4); uint32_t u; memcpy(&u, &f, 4);
                  uint16_t h = (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16); memcpy(x + i * 2, &h, 2); break; }
        case 2: { double f = unif() - 0.5; memcpy(x + i * 8, &f, 8); break; }
        case 3: { int64_t q = (int64_t)(next() % 50257); memcpy(x + i * 8, &q, 8); break; }
        case 4: { int64_t q = (int64_t)next(); memcpy(x + i * 8, &q, 8); break; }
        default: x[i] = (char)next(); break;
        }
    }
}

int main(int argc, char **argv)
{
    const char *filter = argc > 1 ? argv[1] : "";
    /* BENCH_REPS=1: one run per case (for valgrind/cachegrind counts) */
    const int reps = getenv("BENCH_REPS") ? atoi(getenv("BENCH_REPS")) : 7;
    printf("target %s   (ns/elem, stable order; idx = values+indices, val = values only)\n", kwk_target());
    for (size_t d = 0; d < sizeof DT / sizeof DT[0]; ++d) {
        for (size_t l = 0; l < sizeof LENS / sizeof LENS[0]; ++l) {
            const long n = LENS[l], rows = n >= 1000000 ? 1 : 1000000 / n, total = rows * n;
            char name[64];
            snprintf(name, sizeof name, "%s %ldx%ld", DT[d].name, rows, n);
            if (!strstr(name, filter)) continue;
            char *x = malloc((size_t)total * DT[d].es), *v = malloc((size_t)total * DT[d].es);
            int64_t *ix = malloc((size_t)total * 8);
            fill(&DT[d], x, total);
            double res[2];
            for (int mode = 0; mode < 2; ++mode) {
                double best = 1e30;
                for (int r = 0; r < reps; ++r) {
                    double t = now();
                    int st = kwk_sort(DT[d].dtype, x, rows, n, 1, n, 1, 1, v, mode == 0 ? ix : NULL,
                                      n, 1, 1, 0, KWK_ORDER_STABLE);
                    t = now() - t;
                    if (st) { printf("status %d\n", st); return 1; }
                    if (t < best) best = t;
                }
                res[mode] = best * 1e9 / total;
            }
            printf("%-20s idx %7.2f   val %7.2f\n", name, res[0], res[1]);
            free(x); free(v); free(ix);
        }
    }
    return 0;
}
