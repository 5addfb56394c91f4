/* bench_short_rows.c - ns per row (thread CPU time, best of reps) of kwk_sort and
 * kwk_topk over 4096 float32 rows of n elements (the many-short-rows case).
 *   gcc -D_GNU_SOURCE -O3 -std=c11 -Inative/include -o /tmp/bench_short_rows \
 *       native/bench/bench_short_rows.c native/src/dispatch.c native/src/targets/portable.c \
 *       native/src/targets/avx2.c native/src/targets/avx512.c -lm && /tmp/bench_short_rows [REPS] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "kwker.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_THREAD_CPUTIME_ID,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static double gauss(void){double u=(rand()+1.0)/(RAND_MAX+2.0),v=(rand()+1.0)/(RAND_MAX+2.0);return __builtin_sqrt(-2*__builtin_log(u))*__builtin_cos(6.283185307*v);}
enum { ROWS = 4096 };
int main(int argc, char **argv)
{
    int reps = argc > 1 ? atoi(argv[1]) : 30;
    static const int ns[] = {2, 4, 7, 8, 16, 32, 64, 128, 256};
    static const int ks[] = {1, 2, 4, 8};
    for (size_t a = 0; a < sizeof ns / sizeof ns[0]; ++a) {
        const int n = ns[a];
        float *x = malloc(sizeof(float) * ROWS * n), *v = malloc(sizeof(float) * ROWS * n);
        int64_t *ix = malloc(sizeof(int64_t) * ROWS * n);
        srand(1);
        for (long i = 0; i < (long)ROWS * n; ++i) x[i] = (float)gauss();
        if (n <= 16) {
            double best = 1e9;
            for (int r = 0; r < reps; ++r) {
                double t = now();
                int st = kwk_sort(KWK_FLOAT32, x, ROWS, n, 1, n, 1, 1, v, ix, n, 1, 1, 0, 1);
                t = now() - t;
                if (st) printf("status %d\n", st);
                if (t < best) best = t;
            }
            printf("sort 4096x%-3d        %7.1f ns/row\n", n, best * 1e9 / ROWS);
        }
        for (size_t b = 0; b < sizeof ks / sizeof ks[0]; ++b) {
            const int k = ks[b];
            if (k > n) continue;
            double best = 1e9;
            for (int r = 0; r < reps; ++r) {
                double t = now();
                int st = kwk_topk(KWK_FLOAT32, x, ROWS, n, 1, n, 1, 1, k, v, ix, k, 1, 1, 1, 1, 1);
                t = now() - t;
                if (st) printf("status %d\n", st);
                if (t < best) best = t;
            }
            printf("topk 4096x%-3d k=%d    %7.1f ns/row\n", n, k, best * 1e9 / ROWS);
        }
        free(x); free(v); free(ix);
    }
    return 0;
}
