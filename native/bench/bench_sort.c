/* bench_sort.c - ns/element of kwk_sort on named inputs, one thread.
 * Build: gcc -D_GNU_SOURCE -O3 -std=c11 -Inative/include -o /tmp/bench_sort \
 *          native/bench/bench_sort.c native/src/dispatch.c \
 *          native/src/targets/portable.c native/src/targets/avx2.c native/src/targets/avx512.c -lm
 * Run:   /tmp/bench_sort [filter]  (thread CPU time: robust to a loaded machine)   (KWKER_TARGET=portable for the portable kernels) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "kwker.h"

static double now(void) { struct timespec t; clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }
static double unif(void) { return (next() >> 11) * (1.0 / 9007199254740992.0); }
static double gauss(void) { double u = unif() + 1e-300, v = unif(); return sqrt(-2 * log(u)) * cos(6.283185307179586 * v); }
static float bf16_round(float f) { uint32_t b; memcpy(&b, &f, 4); b = (b + 0x7FFF + ((b >> 16) & 1)) & 0xFFFF0000u; memcpy(&f, &b, 4); return f; }

typedef struct { const char *name; int dtype; long rows, n; int kind; int order; } bcase;
/* kind: 0 uniform float (like /tmp/bench.c), 1 bf16-rounded gaussian logits, 2 random int64 / float64 */
static const bcase CASES[] = {
    {"f32 1x1M torch", KWK_FLOAT32, 1, 1000000, 0, KWK_ORDER_TORCH},
    {"f32 1x1M stable", KWK_FLOAT32, 1, 1000000, 0, KWK_ORDER_STABLE},
    {"f32 64x1000 torch", KWK_FLOAT32, 64, 1000, 0, KWK_ORDER_TORCH},
    {"f32 64x1000 stable", KWK_FLOAT32, 64, 1000, 0, KWK_ORDER_STABLE},
    {"f32 4096x256 torch", KWK_FLOAT32, 4096, 256, 0, KWK_ORDER_TORCH},
    {"f32 4096x256 stable", KWK_FLOAT32, 4096, 256, 0, KWK_ORDER_STABLE},
    {"bf16r 8x128256 torch", KWK_FLOAT32, 8, 128256, 1, KWK_ORDER_TORCH},
    {"bf16r 8x128256 stable", KWK_FLOAT32, 8, 128256, 1, KWK_ORDER_STABLE},
    {"bf16r 4096x256 torch", KWK_FLOAT32, 4096, 256, 1, KWK_ORDER_TORCH},
    {"f64 64x1000 torch", KWK_FLOAT64, 64, 1000, 2, KWK_ORDER_TORCH},
    {"f64 64x1000 stable", KWK_FLOAT64, 64, 1000, 2, KWK_ORDER_STABLE},
    {"i64 64x1000 torch", KWK_INT64, 64, 1000, 2, KWK_ORDER_TORCH},
    {"i64 64x1000 stable", KWK_INT64, 64, 1000, 2, KWK_ORDER_STABLE},
    {"f32 4096x8 stable", KWK_FLOAT32, 4096, 8, 0, KWK_ORDER_STABLE},
    {"f32 4096x16 stable", KWK_FLOAT32, 4096, 16, 0, KWK_ORDER_STABLE},
    {"f32 4096x32 stable", KWK_FLOAT32, 4096, 32, 0, KWK_ORDER_STABLE},
    {"f32 4096x64 stable", KWK_FLOAT32, 4096, 64, 0, KWK_ORDER_STABLE},
    {"f32 4096x64 torch", KWK_FLOAT32, 4096, 64, 0, KWK_ORDER_TORCH},
    {"bf16 8x128256 torch", KWK_BFLOAT16, 8, 128256, 1, KWK_ORDER_TORCH},
    {"bf16 8x128256 stable", KWK_BFLOAT16, 8, 128256, 1, KWK_ORDER_STABLE},
};

int main(int argc, char **argv)
{
    const char *filter = argc > 1 ? argv[1] : "";
    printf("target %s\n", kwk_target());
    for (size_t c = 0; c < sizeof CASES / sizeof CASES[0]; ++c) {
        const bcase *b = &CASES[c];
        if (!strstr(b->name, filter)) continue;
        long total = b->rows * b->n;
        int es = b->dtype == KWK_BFLOAT16 ? 2 : (b->dtype == KWK_FLOAT32 ? 4 : 8);
        char *x = malloc((size_t)total * es), *v = malloc((size_t)total * es);
        int64_t *ix = malloc((size_t)total * 8);
        rng = 88172645463325252ull;
        srand(1);
        for (long i = 0; i < total; ++i) {
            if (b->dtype == KWK_FLOAT32) {
                float f = b->kind == 0 ? (float)rand() / RAND_MAX - 0.5f : bf16_round((float)(gauss() * 2.5));
                memcpy(x + i * 4, &f, 4);
            } else if (b->dtype == KWK_BFLOAT16) {
                float f = bf16_round((float)(gauss() * 2.5)); uint32_t u; memcpy(&u, &f, 4);
                uint16_t h = (uint16_t)(u >> 16); memcpy(x + i * 2, &h, 2);
            } else if (b->dtype == KWK_FLOAT64) {
                double d = gauss(); memcpy(x + i * 8, &d, 8);
            } else {
                int64_t q = (int64_t)next(); memcpy(x + i * 8, &q, 8);
            }
        }
        double best = 1e30;
        int reps = total >= 500000 ? 5 : (int)(4000000 / total);
        for (int r = 0; r < reps; ++r) {
            double t = now();
            int st = kwk_sort(b->dtype, x, b->rows, b->n, 1, b->n, 1, 1, v, ix, b->n, 1, 1, 0, b->order);
            t = now() - t;
            if (st) { printf("status %d\n", st); return 1; }
            if (t < best) best = t;
        }
        printf("%-24s %8.2f ns/elem\n", b->name, best * 1e9 / total);
        free(x); free(v); free(ix);
    }
    return 0;
}
