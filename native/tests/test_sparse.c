/*
 * test_sparse.c - the sparse layers' entry points (sparse_kernels.h) on
 * every row length up to 300 and a few long ones, both CPU targets,
 * buffers allocated to their exact sizes (the sanitizer build catches any
 * access past them).  Checks what holds whatever the rounding: sparsemax
 * and entmax15 outputs are non-negative, sum to 1 within rounding, zero
 * below the threshold, and both targets agree bit for bit; the backward
 * passes compute what kwker.h says; GroupSort
 * writes each group sorted, its positions a permutation, and the backward
 * inverts it; SortPooling keeps the largest keys, in order, ties by node.
 * The exact agreement with the reference is tested from Python
 * (tests/test_nn_sparse.py).
 *
 *   gcc -O2 -std=c11 -D_GNU_SOURCE -Inative/include -o /tmp/test_sparse \
 *       native/tests/test_sparse.c native/src/dispatch.c \
 *       native/src/targets/portable.c native/src/targets/avx2.c native/src/targets/avx512.c -lm
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kwker.h"
#include "test_targets.h"
#include "test_common.h"

static float value(int kind)
{
    switch (kind) {
    case 0: return (float)((uniform() - 0.5) * 6);          /* spread */
    case 1: return (float)(int)(uniform() * 4);             /* ties */
    case 2: return (float)((uniform() - 0.5) * 0.01);       /* nearly uniform */
    default: return uniform() < 0.2 ? -INFINITY : (float)(uniform() * 100); /* -inf, one-hot */
    }
}

static int same_float(float a, float b) { return memcmp(&a, &b, sizeof a) == 0; }

static void simplex(const char *target, int64_t rows, int64_t n, int kind, float *last_out)
{
    float *x = malloc(sizeof(float) * rows * n), *out = malloc(sizeof(float) * rows * n);
    float *stats = malloc(sizeof(float) * rows * 2), *tau = malloc(sizeof(float) * rows);
    int64_t *support = malloc(sizeof(int64_t) * rows);
    for (int64_t i = 0; i < rows * n; ++i) x[i] = value(kind);
    for (int64_t r = 0; r < rows; ++r) x[r * n] = 1.0f; /* a finite maximum candidate */
    for (int mode = 0; mode < 2; ++mode) {
        int status = kwk_sparse_simplex(KWK_FLOAT32, mode ? KWK_ENTMAX15_THRESHOLD : KWK_SPARSEMAX,
                                        x, rows, n, out, support, stats);
        CHECK(status == KWK_OK || status == KWK_DEFER, "%s n=%lld status %d", target,
              (long long)n, status);
        if (status != KWK_OK) continue;
        if (mode) {
            for (int64_t r = 0; r < rows; ++r) tau[r] = stats[2 * r] - sqrtf(stats[2 * r + 1]);
            status = kwk_sparse_simplex(KWK_FLOAT32, KWK_ENTMAX15_APPLY, x, rows, n, out,
                                        support, tau);
            CHECK(status == KWK_OK, "apply status %d", status);
        }
        for (int64_t r = 0; r < rows; ++r) {
            double sum = 0;
            int64_t positive = 0;
            for (int64_t j = 0; j < n; ++j) {
                CHECK(out[r * n + j] >= 0, "%s mode %d n=%lld negative", target, mode,
                      (long long)n);
                sum += out[r * n + j];
                positive += out[r * n + j] > 0;
            }
            /* float32 thresholds of long, nearly uniform rows: ~2e-4 off */
            CHECK(fabs(sum - 1) < 1e-3, "%s mode %d n=%lld kind %d sum %g", target, mode,
                  (long long)n, kind, sum);
            /* the package's count can miss a tied element that still
             * ends up above tau: positive and support need not agree */
            CHECK(support[r] >= 1 && support[r] <= n && positive >= 1,
                  "%s mode %d support %lld positive %lld", target, mode,
                  (long long)support[r], (long long)positive);
        }
        if (last_out && mode == 1) memcpy(last_out, out, sizeof(float) * rows * n);
        if (mode == 1) { /* entmax15's backward, its three passes (sqrtf for the
                          * caller's root, q = 0.25 for its sums) */
            float *a = malloc(sizeof(float) * rows * n), *b = malloc(sizeof(float) * rows * n);
            float *q = malloc(sizeof(float) * rows);
            for (int64_t r = 0; r < rows; ++r) q[r] = 0.25f;
            int ok = kwk_entmax15_backward(KWK_FLOAT32, 0, NULL, out, rows, n, a, NULL, NULL) == KWK_OK;
            for (int64_t i = 0; i < rows * n; ++i) {
                CHECK(same_float(a[i], out[i] == 0 ? 1.0f : out[i]), "entmax15 backward phase 0");
                a[i] = sqrtf(a[i]);
            }
            ok &= kwk_entmax15_backward(KWK_FLOAT32, 1, x, out, rows, n, a, b, NULL) == KWK_OK;
            for (int64_t i = 0; i < rows * n; ++i) {
                const float gppr = out[i] == 0 ? out[i] : sqrtf(out[i]);
                CHECK(same_float(a[i], gppr) && same_float(b[i], x[i] * gppr),
                      "entmax15 backward phase 1");
            }
            ok &= kwk_entmax15_backward(KWK_FLOAT32, 2, NULL, out, rows, n, a, b, q) == KWK_OK;
            for (int64_t i = 0; i < rows * n; ++i) {
                const float gppr = out[i] == 0 ? out[i] : sqrtf(out[i]);
                const float dx = x[i] * gppr, t = 0.25f * gppr;
                CHECK(same_float(b[i], dx - t), "entmax15 backward phase 2");
            }
            CHECK(ok, "entmax15 backward status");
            free(a); free(b); free(q);
        }
        if (mode == 0) { /* the backward's two passes: masked, then shifted */
            float *masked = malloc(sizeof(float) * rows * n), *v = malloc(sizeof(float) * rows);
            for (int64_t r = 0; r < rows; ++r) v[r] = 0.5f;
            CHECK(kwk_sparsemax_backward(KWK_FLOAT32, 0, x, out, rows, n, masked, NULL) == KWK_OK &&
                  kwk_sparsemax_backward(KWK_FLOAT32, 1, x, out, rows, n, masked, v) == KWK_OK,
                  "backward status");
            for (int64_t i = 0; i < rows * n; ++i)
                CHECK(out[i] == 0 ? masked[i] == 0 : masked[i] == x[i] - 0.5f, "backward value");
            free(masked); free(v);
        }
    }
    free(x); free(out); free(stats); free(tau); free(support);
}

static void group_sort(int64_t groups, int64_t g, int descending)
{
    const int64_t n = groups * g;
    float *x = malloc(sizeof(float) * n), *out = malloc(sizeof(float) * n);
    float *back = malloc(sizeof(float) * n);
    uint8_t *perm = malloc((size_t)n);
    for (int64_t i = 0; i < n; ++i) x[i] = uniform() < 0.1 ? NAN : value(1);
    CHECK(kwk_group_sort(KWK_FLOAT32, x, groups, g, descending, out, perm) == KWK_OK, "gs");
    for (int64_t i = 0; i < groups; ++i) {
        int seen[256] = {0};
        for (int64_t k = 0; k < g; ++k) {
            const float v = out[i * g + k];
            CHECK(memcmp(&v, &x[i * g + perm[i * g + k]], sizeof v) == 0, "gs value");
            seen[perm[i * g + k]]++;
            if (k > 0) {
                const float a = out[i * g + k - 1], b = v;
                const int ordered = descending ? (isnan(a) || !(a < b)) : (isnan(b) || !(b < a));
                CHECK(ordered, "gs order g=%lld", (long long)g);
                if (a == b || (isnan(a) && isnan(b)))
                    CHECK(perm[i * g + k - 1] < perm[i * g + k], "gs stable");
            }
        }
        for (int64_t k = 0; k < g; ++k) CHECK(seen[k] == 1, "gs permutation");
    }
    CHECK(kwk_group_sort_backward(KWK_FLOAT32, out, perm, groups, g, back) == KWK_OK, "gsb");
    for (int64_t i = 0; i < n; ++i)
        CHECK(memcmp(&back[i], &x[i], sizeof(float)) == 0, "gs backward inverts");
    /* a position outside its group, anywhere (the check runs in blocks) */
    if (g < 256) {
        for (int64_t at = 0; at < n; at += 1 + n / 5) {
            const uint8_t keep = perm[at];
            perm[at] = (uint8_t)g;
            CHECK(kwk_group_sort_backward(KWK_FLOAT32, out, perm, groups, g, back) == KWK_E_ARG,
                  "gsb position %d of group size %lld", (int)g, (long long)g);
            perm[at] = keep;
        }
    }
    free(x); free(out); free(back); free(perm);
}

/* kwk_topk_dense_backward: per row, grad at the kept positions j >= 0,
 * +0.0 elsewhere (~j entries too); every row length around the vector
 * widths, k from none to the whole row, about a quarter of the positions
 * stored as ~j, the arrays in exact-size buffers; entries outside the row
 * refused before anything is written. */
static void dense_backward(int64_t rows, int64_t n, int64_t k)
{
    const size_t total = (size_t)(rows * n), nk = (size_t)(rows * k);
    float *g = malloc(sizeof(float) * (total + 1)), *o = malloc(sizeof(float) * (total + 1));
    double *g64 = malloc(sizeof(double) * (total + 1));
    double *o64 = malloc(sizeof(double) * (total + 1));
    int64_t *kept = malloc(sizeof(int64_t) * (nk + 1)), *perm = malloc(sizeof(int64_t) * (n + 1));
    uint8_t *want = malloc(total + 1);
    memset(want, 0, total + 1);
    for (size_t i = 0; i < total; ++i) {
        g[i] = uniform() < 0.1 ? -0.0f : value(0);
        g64[i] = uniform() < 0.1 ? -0.0 : (double)value(0);
    }
    for (int64_t r = 0; r < rows; ++r) { /* k distinct positions of the row */
        for (int64_t j = 0; j < n; ++j) perm[j] = j;
        for (int64_t i = 0; i < k; ++i) {
            const int64_t at = i + (int64_t)(uniform() * (double)(n - i));
            const int64_t j = perm[at];
            perm[at] = perm[i];
            const int passes = uniform() < 0.75;
            kept[r * k + i] = passes ? j : ~j;
            want[r * n + j] = (uint8_t)passes;
        }
    }
    CHECK(kwk_topk_dense_backward(KWK_FLOAT32, g, kept, rows, n, k, o) == KWK_OK,
          "dense backward status");
    CHECK(kwk_topk_dense_backward(KWK_FLOAT64, g64, kept, rows, n, k, o64) == KWK_OK,
          "dense backward status");
    for (size_t i = 0; i < total; ++i) {
        const float w = want[i] ? g[i] : 0.0f;
        const double w64 = want[i] ? g64[i] : 0.0;
        CHECK(memcmp(&o[i], &w, sizeof w) == 0, "dense backward f32 %lldx%lld k %lld at %zu",
              (long long)rows, (long long)n, (long long)k, i);
        CHECK(memcmp(&o64[i], &w64, sizeof w64) == 0, "dense backward f64 at %zu", i);
    }
    CHECK(kwk_topk_dense_backward(KWK_INT32, g, kept, rows, n, k, o) == KWK_E_DTYPE,
          "dense backward dtype");
    CHECK(kwk_topk_dense_backward(KWK_FLOAT32, g, kept, -1, n, k, o) == KWK_E_ARG,
          "dense backward rows");
    CHECK(kwk_topk_dense_backward(KWK_FLOAT32, g, kept, rows, n, n + 1, o) == KWK_E_ARG,
          "dense backward k > len");
    CHECK(kwk_topk_dense_backward(KWK_FLOAT32, NULL, kept, rows, n, k, o) ==
              (total ? KWK_E_ARG : KWK_OK), "dense backward NULL");
    if (nk) { /* a position past the row, either way stored: refused, nothing written */
        const int64_t bad[] = {n, ~n, INT64_MIN, INT64_MAX};
        for (int b = 0; b < 4; ++b) {
            const int64_t keep = kept[nk - 1];
            kept[nk - 1] = bad[b];
            o[0] = 7.0f;
            CHECK(kwk_topk_dense_backward(KWK_FLOAT32, g, kept, rows, n, k, o) == KWK_E_ARG &&
                      o[0] == 7.0f, "dense backward position %lld refused", (long long)bad[b]);
            kept[nk - 1] = keep;
        }
    }
    free(g); free(o); free(g64); free(o64); free(kept); free(perm); free(want);
}

/* kwk_filter_below: fill where the key is below the row's cutoff (IEEE's
 * <: NaN never below, -0.0 not below +0.0), the value's bits elsewhere;
 * keys the values themselves (same_key, the top-p filter) or another array
 * (min-p); rows of every length around the vector widths, exact-size
 * buffers, float32 and float64. */
static void filter_below(int64_t rows, int64_t n, int same_key)
{
    const size_t total = (size_t)(rows * n);
    float *x = malloc(sizeof(float) * (total + 1)), *o = malloc(sizeof(float) * (total + 1));
    float *kx = same_key ? x : malloc(sizeof(float) * (total + 1));
    double *x64 = malloc(sizeof(double) * (total + 1)), *o64 = malloc(sizeof(double) * (total + 1));
    double *k64 = same_key ? x64 : malloc(sizeof(double) * (total + 1));
    float *cut = malloc(sizeof(float) * (size_t)(rows + 1));
    double *cut64 = malloc(sizeof(double) * (size_t)(rows + 1));
    uint8_t *m = malloc(total + 1), *m64 = malloc(total + 1);
    for (size_t i = 0; i < total; ++i) {
        const double u = uniform(), w = uniform();
        x[i] = u < 0.05 ? NAN : u < 0.1 ? -0.0f : u < 0.15 ? 0.0f : value(1);
        x64[i] = x[i];
        if (!same_key) {
            kx[i] = w < 0.05 ? NAN : w < 0.1 ? -0.0f : w < 0.15 ? 0.0f : value(1);
            k64[i] = kx[i];
        }
    }
    for (int64_t r = 0; r < rows; ++r) {
        const double u = uniform();
        cut[r] = u < 0.1 ? NAN : u < 0.2 ? -0.0f : u < 0.3 ? 0.0f : value(1);
        cut64[r] = cut[r];
    }
    const double fill = 0.1; /* rounded to float for float32 rows */
    CHECK(kwk_filter_below(KWK_FLOAT32, kx, x, rows, n, cut, fill, o, m) == KWK_OK,
          "filter status");
    CHECK(kwk_filter_below(KWK_FLOAT64, k64, x64, rows, n, cut64, fill, o64, m64) == KWK_OK,
          "filter status f64");
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < n; ++j) {
            const size_t i = (size_t)(r * n + j);
            const int below = kx[i] < cut[r];
            const float want = below ? (float)fill : x[i];
            const double want64 = below ? fill : x64[i];
            CHECK(m[i] == below && memcmp(&o[i], &want, sizeof want) == 0,
                  "filter f32 rows %lld n %lld at %lld,%lld", (long long)rows, (long long)n,
                  (long long)r, (long long)j);
            CHECK(m64[i] == below && memcmp(&o64[i], &want64, sizeof want64) == 0,
                  "filter f64 at %lld,%lld", (long long)r, (long long)j);
        }
    CHECK(kwk_filter_below(KWK_INT32, kx, x, rows, n, cut, fill, o, m) == KWK_E_DTYPE,
          "filter dtype");
    CHECK(kwk_filter_below(KWK_FLOAT32, kx, x, -1, n, cut, fill, o, m) == KWK_E_ARG,
          "filter rows");
    CHECK(kwk_filter_below(KWK_FLOAT32, kx, x, rows, -1, cut, fill, o, m) == KWK_E_ARG,
          "filter len");
    CHECK(kwk_filter_below(KWK_FLOAT32, kx, x, rows, n, NULL, fill, o, m) ==
              (rows && n ? KWK_E_ARG : KWK_OK), "filter NULL cutoff");
    CHECK(kwk_filter_below(KWK_FLOAT32, NULL, x, rows, n, cut, fill, o, m) ==
              (rows && n ? KWK_E_ARG : KWK_OK), "filter NULL key");
    CHECK(kwk_filter_below(KWK_FLOAT32, kx, x, INT64_MAX / 2, 4, cut, fill, o, m) ==
              KWK_E_OVERFLOW, "filter overflow");
    if (!same_key) { free(kx); free(k64); }
    free(x); free(o); free(x64); free(o64); free(cut); free(cut64); free(m); free(m64);
}

static void sort_pool(int64_t batch, int64_t nodes, int64_t c, int64_t k)
{
    float *x = malloc(sizeof(float) * (batch * nodes * c + 1));
    float *out = malloc(sizeof(float) * (batch * k * c + 1));
    int64_t *count = malloc(sizeof(int64_t) * batch), *index = malloc(sizeof(int64_t) * (batch * k + 1));
    for (int64_t i = 0; i < batch * nodes * c; ++i) x[i] = value(1);
    for (int64_t b = 0; b < batch; ++b) count[b] = (int64_t)(uniform() * (nodes + 1));
    int status = kwk_sort_pool(KWK_FLOAT32, x, batch, nodes, c, count, k, out, index);
    CHECK(status == KWK_OK, "sort_pool status %d", status);
    for (int64_t b = 0; b < batch && status == KWK_OK; ++b)
        for (int64_t r = 0; r < k; ++r) {
            const int64_t node = index[b * k + r];
            if (r >= count[b]) { CHECK(node == -1 && out[(b * k + r) * c] == 0, "pad"); continue; }
            CHECK(node >= 0 && node < count[b], "node range");
            CHECK(memcmp(&out[(b * k + r) * c], &x[(b * nodes + node) * c],
                         sizeof(float) * c) == 0, "row copied");
            if (r > 0) {
                const int64_t prev = index[b * k + r - 1];
                const float a = x[(b * nodes + prev) * c + c - 1], v = x[(b * nodes + node) * c + c - 1];
                CHECK(a > v || (a == v && prev < node), "descending, ties by node");
            }
        }
    free(x); free(out); free(count); free(index);
}

/* kwk_sort_pool_backward against its definition: +0.0 everywhere but at
 * the kept rows' nodes, which take their gradient row except where the
 * pooling zeroed an entry (output 0, x not 0); negative indices are zero
 * rows; an index past the nodes is refused before anything is written.
 * Exact-size buffers. */
static void sort_pool_backward(int64_t batch, int64_t nodes, int64_t c, int64_t k)
{
    const size_t nx = (size_t)(batch * nodes * c), ng = (size_t)(batch * k * c);
    double *x = malloc(sizeof(double) * (nx ? nx : 1)), *gi = malloc(sizeof(double) * (nx ? nx : 1));
    double *grad = malloc(sizeof(double) * (ng ? ng : 1)), *out = malloc(sizeof(double) * (ng ? ng : 1));
    int64_t *index = malloc(sizeof(int64_t) * (size_t)(batch * k > 0 ? batch * k : 1));
    for (size_t i = 0; i < nx; ++i) x[i] = uniform() < 0.2 ? 0.0 : value(1);
    for (int64_t b = 0; b < batch; ++b)
        for (int64_t r = 0; r < k; ++r) { /* distinct nodes, some zero rows */
            const int64_t node = (r * 7 + b) % (nodes > 0 ? nodes : 1);
            index[b * k + r] = r >= nodes || uniform() < 0.2 ? (uniform() < 0.5 ? -1 : -5) : node;
        }
    for (size_t i = 0; i < ng; ++i) {
        grad[i] = uniform() < 0.1 ? -0.0 : value(1);
        out[i] = uniform() < 0.3 ? 0.0 : value(1); /* zeroed by the pooling, or kept */
    }
    int status = kwk_sort_pool_backward(KWK_FLOAT64, grad, x, index, out, batch, nodes, c, k, gi);
    CHECK(status == KWK_OK, "sort_pool_backward status %d", status);
    for (int64_t b = 0; b < batch && status == KWK_OK; ++b)
        for (int64_t j = 0; j < nodes; ++j)
            for (int64_t q = 0; q < c; ++q) {
                double want = 0.0;
                for (int64_t r = 0; r < k; ++r)
                    if (index[b * k + r] == j) {
                        const size_t at = (size_t)((b * k + r) * c + q);
                        want = out[at] == 0 && x[(b * nodes + j) * c + q] != 0 ? 0.0 : grad[at];
                    }
                CHECK(memcmp(&gi[(b * nodes + j) * c + q], &want, sizeof want) == 0,
                      "sort_pool_backward %lld,%lld,%lld", (long long)b, (long long)j,
                      (long long)q);
            }
    if (batch * k > 0 && nodes > 0) {
        index[batch * k - 1] = nodes;
        CHECK(kwk_sort_pool_backward(KWK_FLOAT64, grad, x, index, out, batch, nodes, c, k, gi) ==
                  KWK_E_ARG, "sort_pool_backward index past the nodes");
    }
    CHECK(kwk_sort_pool_backward(KWK_INT32, grad, x, index, out, batch, nodes, c, k, gi) ==
              KWK_E_DTYPE, "sort_pool_backward dtype");
    free(x); free(gi); free(grad); free(out); free(index);
}

int main(void)
{
    const char *const *targets = KWK_TEST_TARGET_NAMES;
    static float first[4 * 5000], second[4 * 5000];
    for (int64_t n = 1; n <= 300; ++n)
        for (int kind = 0; kind < 4; ++kind)
            for (int t = 0; t < KWK_TEST_NTARGETS; ++t) {
                if (test_set_target(targets[t]) != 0) continue;
                simplex(targets[t], 3, n, kind, NULL);
            }
    for (int kind = 0; kind < 4; ++kind) {
        uint64_t saved = state;
        kwk_set_target("portable");
        simplex("portable", 4, 5000, kind, first);
        state = saved;
        if (kwk_set_target("avx2") == 0) {
            simplex("avx2", 4, 5000, kind, second);
            CHECK(memcmp(first, second, sizeof first) == 0, "targets differ, kind %d", kind);
        }
    }
    { /* what kwk_entmax15_backward refuses */
        float y[4] = {0}, a[4], b[4], q[2] = {0};
        CHECK(kwk_entmax15_backward(KWK_INT32, 0, NULL, y, 2, 2, a, NULL, NULL) == KWK_E_DTYPE &&
              kwk_entmax15_backward(KWK_FLOAT32, 3, y, y, 2, 2, a, b, q) == KWK_E_ARG &&
              kwk_entmax15_backward(KWK_FLOAT32, 0, NULL, y, -1, 2, a, NULL, NULL) == KWK_E_ARG &&
              kwk_entmax15_backward(KWK_FLOAT32, 1, NULL, y, 2, 2, a, b, NULL) == KWK_E_ARG &&
              kwk_entmax15_backward(KWK_FLOAT32, 2, NULL, y, 2, 2, a, b, NULL) == KWK_E_ARG &&
              kwk_entmax15_backward(KWK_FLOAT32, 0, NULL, y, INT64_MAX, 2, a, NULL, NULL) ==
                  KWK_E_OVERFLOW &&
              kwk_entmax15_backward(KWK_FLOAT32, 1, NULL, NULL, 0, 2, NULL, NULL, NULL) == KWK_OK,
              "entmax15 backward argument checks");
    }
    for (int t = 0; t < KWK_TEST_NTARGETS; ++t) {
        if (test_set_target(targets[t]) != 0) continue;
        for (int64_t g = 1; g <= 9; ++g) {
            group_sort(37, g, 0);
            group_sort(37, g, 1);
        }
        group_sort(3, 256, 0);
        group_sort(3001, 2, 1); /* past one 4096-byte block of the position check */
        group_sort(1501, 4, 0);
        for (int64_t n = 0; n <= 40; ++n) {
            dense_backward(3, n, n / 2);
            dense_backward(2, n, n);
            dense_backward(2, n, n > 0);
        }
        for (int64_t n = 60; n <= 100; n += 7) {
            dense_backward(3, n, 0);
            dense_backward(1, n, 5);
        }
        dense_backward(0, 8, 3);
        for (int64_t n = 0; n <= 40; ++n) {
            filter_below(3, n, 1);
            filter_below(3, n, 0);
        }
        filter_below(0, 5, 0);
        filter_below(2, 1001, 1);
        filter_below(2, 1001, 0);
        dense_backward(2, 1001, 500);
        dense_backward(3, 4099, 41);
        sort_pool_backward(4, 9, 3, 5);
        sort_pool_backward(3, 4, 1, 6); /* k > nodes: zero rows */
        sort_pool_backward(2, 30, 97, 30);
    }
    kwk_set_target("auto");
    sort_pool(5, 9, 3, 4);
    sort_pool(5, 3, 2, 7);
    sort_pool(1, 1, 1, 1);
    printf("test_sparse: %s (%d failures)\n", failures ? "FAILED" : "ok", failures);
    return failures != 0;
}
