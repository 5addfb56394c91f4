/*
 * dispatch.c - the public entry points: validate, then call the kernel
 * table of the chosen CPU target.
 *
 * Nothing reaches a kernel unchecked: dtype codes, sizes, k, pointers and
 * the reach of every stride are validated here, so a bad argument is a
 * status code, never an out-of-bounds access or an overflow inside a kernel.
 * (The library cannot know how large the caller's buffers are; it checks
 * that every offset it will form is representable, and the Python layer
 * derives sizes and strides from the tensors themselves.)
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif
#include "../include/kwker.h"
#include "kernels.h"
#include "fp_env.h"
#include "torch_sum.h"
#include "net_pairs.h"

#define KWK_VERSION_STRING "0.1.0"

int kwk_abi_version(void) { return KWK_ABI_VERSION; }
const char *kwk_version(void) { return KWK_VERSION_STRING; }

const char *kwk_strerror(int status)
{
    switch (status) {
    case KWK_OK: return "ok";
    case KWK_E_ARG: return "invalid argument (size, stride, k or pointer)";
    case KWK_E_NOMEM: return "out of memory allocating a workspace";
    case KWK_E_DTYPE: return "unsupported dtype";
    case KWK_E_OVERFLOW: return "size or offset overflows int64";
    case KWK_DEFER: return "result depends on torch's internal order; computed by torch";
    default: return "unknown status";
    }
}

/* ------------------------------------------------------------- targets */

#ifdef KWK_HAVE_AVX2_TARGET
static int cpu_has_avx2(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi2") &&
           __builtin_cpu_supports("fma") && __builtin_cpu_supports("popcnt");
}
#endif

#ifdef KWK_HAVE_AVX512_TARGET
/* libgcc's check also asks the OS (XGETBV) whether it saves the 512-bit
 * state: a CPU with AVX-512 under an OS that does not is "no". */
static int cpu_has_avx512(void)
{
    __builtin_cpu_init();
    return cpu_has_avx2() && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl");
}
#endif

static const kwk_kernel_table *best_table(void)
{
#ifdef KWK_HAVE_AVX512_TARGET
    if (cpu_has_avx512()) return &kwk_kernels_avx512;
#endif
#ifdef KWK_HAVE_AVX2_TARGET
    if (cpu_has_avx2()) return &kwk_kernels_avx2;
#endif
    return &kwk_kernels_portable;
}

static const kwk_kernel_table *table_named(const char *name)
{
    if (name == NULL || strcmp(name, "auto") == 0 || name[0] == '\0') return best_table();
    if (strcmp(name, "portable") == 0) return &kwk_kernels_portable;
#ifdef KWK_HAVE_AVX2_TARGET
    if (strcmp(name, "avx2") == 0 && cpu_has_avx2()) return &kwk_kernels_avx2;
#endif
#ifdef KWK_HAVE_AVX512_TARGET
    if (strcmp(name, "avx512") == 0 && cpu_has_avx512()) return &kwk_kernels_avx512;
#endif
    return NULL;
}

/* Chosen on first use; a pointer-sized load/store.  Concurrent first calls
 * may each compute the same table, which is harmless. */
static const kwk_kernel_table *volatile active_table;

static const kwk_kernel_table *kernels(void)
{
    const kwk_kernel_table *t = active_table;
    if (t == NULL) {
        t = table_named(getenv("KWKER_TARGET"));
        if (t == NULL) t = best_table(); /* an unknown name must not break the library */
        active_table = t;
    }
    return t;
}

const char *kwk_target(void) { return kernels()->name; }

static _Atomic int64_t kwk_counters[KWK_NUM_COUNTERS];

void kwk_count(int which, int64_t n)
{
    if (which >= 0 && which < KWK_NUM_COUNTERS)
        atomic_fetch_add_explicit(&kwk_counters[which], n, memory_order_relaxed);
}

int64_t kwk_counter(int which)
{
    if (which < 0 || which >= KWK_NUM_COUNTERS) return -1;
    return atomic_load_explicit(&kwk_counters[which], memory_order_relaxed);
}

/* ------------------------------------------------------------ threads */

/* Threads are started per call and joined before it returns: nothing
 * outlives a call, so a fork (torch's DataLoader workers) never inherits a
 * pool or a held lock, and the GIL-free native call owns its helpers.  A
 * thread start costs ~20-50 us, paid only by rows long enough (Python asks
 * for it from 2^18 elements, where one sort takes milliseconds). */
static _Thread_local int row_threads_setting = 1; /* kwk_set_row_threads */
static _Thread_local int row_threads = 1;         /* what kernels see now */

int kwk_set_row_threads(int n)
{
    if (n < 1 || n > KWK_MAX_ROW_THREADS) return KWK_E_ARG;
    const int old = row_threads_setting;
    row_threads_setting = n;
    return old;
}

int kwk_row_threads(void) { return row_threads; }

typedef struct {
    void (*part)(void *, int);
    void *ctx;
    int p;
} part_call;

static void *run_part(void *arg)
{
    const part_call *c = (const part_call *)arg;
    c->part(c->ctx, c->p);
    return NULL;
}

void kwk_run_parts(void (*part)(void *ctx, int p), void *ctx, int parts)
{
    pthread_t tid[KWK_MAX_ROW_THREADS];
    part_call calls[KWK_MAX_ROW_THREADS];
    int started[KWK_MAX_ROW_THREADS];
    if (parts > KWK_MAX_ROW_THREADS) parts = KWK_MAX_ROW_THREADS;
    if (parts > 1) kwk_count(KWK_COUNT_ROW_SPLITS, 1);
    const int saved = row_threads;
    row_threads = 1;
    for (int p = 1; p < parts; ++p) {
        calls[p] = (part_call){part, ctx, p};
        started[p] = pthread_create(&tid[p], NULL, run_part, &calls[p]) == 0;
    }
    part(ctx, 0);
    for (int p = 1; p < parts; ++p) {
        if (started[p]) pthread_join(tid[p], NULL);
        else part(ctx, p);
    }
    row_threads = saved;
}

/* The workspace cache (kernels.h kwk_ws_take): per thread, so no lock and
 * nothing shared across a fork; a thread's blocks are freed by the key's
 * destructor when it exits.  Measured through Python (one thread, float32,
 * stable sort, ns/element, a fresh malloc'd workspace -> cached): 64x1000
 * 18.7 -> 10.5, 4096x64 8.1 -> 4.4-5.2, 1x32000 11.7 -> 9.9 (glibc returns
 * freed blocks of this size to the kernel, and the next call faults them
 * in again, with torch's outputs beside them).  Four slots: the rank
 * select of median/kthvalue holds four blocks at once (median of 65536
 * float32, native: 185-245 us with two kept, 55-90 with four; six were no
 * better), at most 16 MiB kept per thread. */
enum { WS_SLOTS = 4 };
typedef struct {
    void *p[WS_SLOTS];
    size_t cap[WS_SLOTS];
    kwk_net_pair *net; /* kwk_net_take's: the last network, for net_n */
    int net_n, net_count;
} ws_cache;

static pthread_key_t ws_key;
static pthread_once_t ws_once = PTHREAD_ONCE_INIT;
static int ws_key_ok;

static void ws_cache_free(void *arg)
{
    ws_cache *c = (ws_cache *)arg;
    for (int i = 0; i < WS_SLOTS; ++i) free(c->p[i]);
    free(c->net);
    free(c);
}

static void ws_key_make(void) { ws_key_ok = pthread_key_create(&ws_key, ws_cache_free) == 0; }

static ws_cache *ws_cache_get(int create)
{
    pthread_once(&ws_once, ws_key_make);
    if (!ws_key_ok) return NULL;
    ws_cache *c = (ws_cache *)pthread_getspecific(ws_key);
    if (!c && create) {
        c = (ws_cache *)calloc(1, sizeof *c);
        if (c && pthread_setspecific(ws_key, c) != 0) {
            free(c);
            c = NULL;
        }
    }
    return c;
}

void *kwk_ws_take(size_t bytes, size_t *cap)
{
    ws_cache *c = bytes < KWK_WS_CACHE_MAX ? ws_cache_get(0) : NULL;
    if (c) {
        int best = -1; /* the smallest block big enough */
        for (int i = 0; i < WS_SLOTS; ++i)
            if (c->p[i] && c->cap[i] >= bytes && (best < 0 || c->cap[i] < c->cap[best])) best = i;
        if (best >= 0) {
            void *p = c->p[best];
            *cap = c->cap[best];
            c->p[best] = NULL;
            c->cap[best] = 0;
            return p;
        }
    }
    *cap = bytes;
    return malloc(bytes);
}

void kwk_ws_give(void *p, size_t cap)
{
    if (!p) return;
    ws_cache *c = cap < KWK_WS_CACHE_MAX ? ws_cache_get(1) : NULL;
    if (c) {
        int slot = -1; /* an empty slot, else the smallest block if smaller */
        for (int i = 0; i < WS_SLOTS; ++i) {
            if (!c->p[i]) { slot = i; break; }
            if (c->cap[i] < cap && (slot < 0 || c->cap[i] < c->cap[slot])) slot = i;
        }
        if (slot >= 0) {
            free(c->p[slot]);
            c->p[slot] = p;
            c->cap[slot] = cap;
            return;
        }
    }
    free(p);
}

/* The sorting network's comparators are the same for every call with rows
 * of n, yet kwk_net_pairs' loops cost about 4 ns a comparator (rows of 196:
 * 11 us, of 1024: 89 us, per call), against a sort of 64 rows of 196
 * (MAE's random masking, torch.argsort) in ~55 us: so each thread keeps
 * its last network. */
kwk_net_pair *kwk_net_take(int n, int *npairs)
{
    ws_cache *c = ws_cache_get(0);
    if (c && c->net && c->net_n == n) {
        kwk_net_pair *p = c->net;
        *npairs = c->net_count;
        c->net = NULL;
        return p;
    }
    int k = 0; /* comparators for the next power of two 2^k >= n, k >= 2 */
    while (k < 2 || (1 << k) < n) ++k;
    kwk_net_pair *p = (kwk_net_pair *)malloc(((size_t)(k * k - k + 4) << (k - 2)) * sizeof(kwk_net_pair));
    if (!p) return NULL;
    *npairs = kwk_net_pairs(n, p);
    return p;
}

void kwk_net_give(kwk_net_pair *pairs, int n, int npairs)
{
    ws_cache *c = pairs ? ws_cache_get(1) : NULL;
    if (!c) {
        free(pairs);
        return;
    }
    if (c->net != pairs) free(c->net);
    c->net = pairs;
    c->net_n = n;
    c->net_count = npairs;
}

void kwk_release_workspace(void)
{
    ws_cache *c = ws_cache_get(0);
    if (!c) return;
    free(c->net);
    c->net = NULL;
    for (int i = 0; i < WS_SLOTS; ++i) {
        free(c->p[i]);
        c->p[i] = NULL;
        c->cap[i] = 0;
    }
}

/* Fresh outputs of a large call are mostly page faults: sorting 600k rows
 * of 7 float32 (4.2M elements, 50 MB of values and int64 indices) took 34
 * ms through torch's fresh outputs and 12 ms writing the same outputs a
 * second time (avx2, AMD Zen 3; 12.8k faults of ~1.7 us in this container).
 * glibc serves such buffers from fresh mmaps (above its mmap threshold,
 * which stops growing at 32 MiB), so every call faults again.  Advising
 * the aligned interior before the first write makes each fault one 2 MiB
 * page.  torch's own THP_MEM_ALLOC_ENABLE=1 does the same for every
 * allocation of 2 MiB or more; this asks it only for Kwker's outputs. */
int kwk_denormals_flushed(void) { return kwk_fp_flushes_denormals(); }

int64_t kwk_advise_fresh_output(void *p, int64_t bytes)
{
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    const uintptr_t page = (uintptr_t)2 << 20;
    if (p == NULL || bytes < ((int64_t)4 << 20)) return 0;
    const uintptr_t start = ((uintptr_t)p + page - 1) & ~(page - 1);
    const uintptr_t end = ((uintptr_t)p + (uintptr_t)bytes) & ~(page - 1);
    if (end <= start || madvise((void *)start, end - start, MADV_HUGEPAGE) != 0) return 0;
    return (int64_t)(end - start);
#else
    (void)p;
    (void)bytes;
    return 0;
#endif
}

int kwk_set_target(const char *name)
{
    const kwk_kernel_table *t = table_named(name);
    if (t == NULL) return KWK_E_ARG;
    active_table = t;
    return KWK_OK;
}

/* ---------------------------------------------------------- validation */

static int valid_dtype(int dtype) { return dtype >= 0 && dtype < KWK_NUM_DTYPES; }

static int mul_ok(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_mul_overflow(a, b, out);
}

static int add_ok(int64_t a, int64_t b, int64_t *out)
{
    return !__builtin_add_overflow(a, b, out);
}

/* The largest |offset| in elements a (outer, len, inner) walk forms, and the
 * same in bytes, must fit in int64. */
static int check_reach(int64_t outer, int64_t len, int64_t inner, int64_t so,
                       int64_t sl, int64_t si, int64_t elem_size)
{
    int64_t a, b, c, t, bytes;
    if (!mul_ok(outer > 0 ? outer - 1 : 0, so < 0 ? -so : so, &a)) return KWK_E_OVERFLOW;
    if (!mul_ok(len > 0 ? len - 1 : 0, sl < 0 ? -sl : sl, &b)) return KWK_E_OVERFLOW;
    if (!mul_ok(inner > 0 ? inner - 1 : 0, si < 0 ? -si : si, &c)) return KWK_E_OVERFLOW;
    if (!add_ok(a, b, &t) || !add_ok(t, c, &t)) return KWK_E_OVERFLOW;
    if (!mul_ok(t, elem_size, &bytes)) return KWK_E_OVERFLOW;
    return KWK_OK;
}

static int check_rows(int dtype, const void *src, int64_t outer, int64_t len,
                      int64_t inner, int64_t so, int64_t sl, int64_t si)
{
    static const int64_t elem_size[KWK_NUM_DTYPES] = {1, 1, 1, 2, 4, 8, 2, 4, 8, 2, 2, 4, 8};
    int64_t n;
    if (!valid_dtype(dtype)) return KWK_E_DTYPE;
    if (outer < 0 || len < 0 || inner < 0) return KWK_E_ARG;
    if (so == INT64_MIN || sl == INT64_MIN || si == INT64_MIN) return KWK_E_OVERFLOW;
    if (!mul_ok(outer, len, &n) || !mul_ok(n, inner, &n)) return KWK_E_OVERFLOW;
    /* workspaces hold len 16-byte records */
    if (len > INT64_MAX / 16) return KWK_E_OVERFLOW;
    if (n > 0 && src == NULL) return KWK_E_ARG;
    return check_reach(outer, len, inner, so, sl, si, elem_size[dtype]);
}

int kwk_sort(int dtype, const void *src, int64_t outer, int64_t len, int64_t inner,
             int64_t src_so, int64_t src_sl, int64_t src_si, void *values,
             int64_t *indices, int64_t dst_so, int64_t dst_sl, int64_t dst_si,
             int descending, int order)
{
    int st = check_rows(dtype, src, outer, len, inner, src_so, src_sl, src_si);
    if (st != KWK_OK) return st;
    st = check_rows(dtype, values ? values : (void *)indices, outer, len, inner,
                    dst_so, dst_sl, dst_si);
    if (st != KWK_OK) return st;
    if (order != KWK_ORDER_STABLE && order != KWK_ORDER_TORCH) return KWK_E_ARG;
    if (outer == 0 || len == 0 || inner == 0) return KWK_OK;
    if (values == NULL && indices == NULL) return KWK_E_ARG;
    /* only a call of one row splits it (kwker.h kwk_set_row_threads) */
    row_threads = outer == 1 && inner == 1 ? row_threads_setting : 1;
    st = kernels()->sort(dtype, src, outer, len, inner, src_so, src_sl, src_si, values, indices,
                         dst_so, dst_sl, dst_si, descending != 0, order);
    row_threads = 1;
    return st;
}

int kwk_topk(int dtype, const void *src, int64_t outer, int64_t len, int64_t inner,
             int64_t src_so, int64_t src_sl, int64_t src_si, int64_t k,
             void *values, int64_t *indices, int64_t dst_so, int64_t dst_sl,
             int64_t dst_si, int largest, int sorted, int order)
{
    int st = check_rows(dtype, src, outer, len, inner, src_so, src_sl, src_si);
    if (st != KWK_OK) return st;
    if (k < 0 || k > len) return KWK_E_ARG;
    st = check_rows(dtype, values ? values : (void *)indices, outer, k, inner,
                    dst_so, dst_sl, dst_si);
    if (st != KWK_OK) return st;
    if (order != KWK_ORDER_STABLE && order != KWK_ORDER_TORCH && order != KWK_ORDER_TORCH_PROBE)
        return KWK_E_ARG;
    if (outer == 0 || k == 0 || inner == 0) return KWK_OK;
    if (values == NULL && indices == NULL) return KWK_E_ARG;
    return kernels()->topk(dtype, src, outer, len, inner, src_so, src_sl, src_si, k,
                           values, indices, dst_so, dst_sl, dst_si, largest != 0,
                           sorted != 0, order);
}

int kwk_median_dim(int dtype, const void *src, int64_t outer, int64_t len,
                   int64_t inner, int64_t src_so, int64_t src_sl, int64_t src_si,
                   void *values, int64_t *indices, int64_t dst_so, int64_t dst_si,
                   int ignore_nan)
{
    int st = check_rows(dtype, src, outer, len, inner, src_so, src_sl, src_si);
    if (st != KWK_OK) return st;
    if (len == 0 && outer > 0 && inner > 0) return KWK_E_ARG; /* no median of nothing */
    st = check_rows(dtype, values ? values : (void *)indices, outer, 1, inner,
                    dst_so, 0, dst_si);
    if (st != KWK_OK) return st;
    if (outer == 0 || inner == 0) return KWK_OK;
    if (values == NULL && indices == NULL) return KWK_E_ARG;
    return kernels()->median_dim(dtype, src, outer, len, inner, src_so, src_sl, src_si,
                                 values, indices, dst_so, dst_si, ignore_nan != 0);
}

int kwk_kthvalue(int dtype, const void *src, int64_t outer, int64_t len, int64_t inner,
                 int64_t src_so, int64_t src_sl, int64_t src_si, int64_t k,
                 void *values, int64_t *indices, int64_t dst_so, int64_t dst_si, int order)
{
    int st = check_rows(dtype, src, outer, len, inner, src_so, src_sl, src_si);
    if (st != KWK_OK) return st;
    if (outer > 0 && inner > 0 && (k < 1 || k > len)) return KWK_E_ARG;
    st = check_rows(dtype, values ? values : (void *)indices, outer, 1, inner,
                    dst_so, 0, dst_si);
    if (st != KWK_OK) return st;
    if (order != KWK_ORDER_STABLE && order != KWK_ORDER_TORCH) return KWK_E_ARG;
    if (outer == 0 || inner == 0) return KWK_OK;
    if (values == NULL && indices == NULL) return KWK_E_ARG;
    return kernels()->kthvalue(dtype, src, outer, len, inner, src_so, src_sl, src_si, k,
                               values, indices, dst_so, dst_si, order);
}

int kwk_median_all(int dtype, const void *src, int64_t n, int64_t stride,
                   void *value, int ignore_nan)
{
    int st = check_rows(dtype, src, 1, n, 1, 0, stride, 0);
    if (st != KWK_OK) return st;
    if (n <= 0 || value == NULL) return KWK_E_ARG;
    return kernels()->median_all(dtype, src, n, stride, value, ignore_nan != 0);
}

int kwk_quantile(int dtype, const void *src, int64_t outer, int64_t len, int64_t inner,
                 int64_t src_so, int64_t src_sl, int64_t src_si, const double *q,
                 int64_t nq, void *out, int64_t dst_sq, int64_t dst_so, int64_t dst_si,
                 int interpolation, int ignore_nan)
{
    int st = check_rows(dtype, src, outer, len, inner, src_so, src_sl, src_si);
    if (st != KWK_OK) return st;
    if (dtype != KWK_FLOAT32 && dtype != KWK_FLOAT64) return KWK_E_DTYPE;
    if (len == 0 && outer > 0 && inner > 0) return KWK_E_ARG; /* no quantile of nothing */
    if (nq < 0 || (nq > 0 && q == NULL)) return KWK_E_ARG;
    if (nq > INT64_MAX / 16) return KWK_E_OVERFLOW;
    for (int64_t t = 0; t < nq; ++t)
        if (!(q[t] >= 0.0 && q[t] <= 1.0)) return KWK_E_ARG; /* NaN fails too */
    if (interpolation < KWK_QUANTILE_LINEAR || interpolation > KWK_QUANTILE_NEAREST)
        return KWK_E_ARG;
    /* the output is walked as (nq, outer, 1, inner) */
    st = check_rows(dtype, out, outer, nq, inner, dst_so, dst_sq, dst_si);
    if (st != KWK_OK) return st;
    if (outer == 0 || inner == 0 || nq == 0) return KWK_OK;
    if (out == NULL) return KWK_E_ARG;
    return kernels()->quantile(dtype, src, outer, len, inner, src_so, src_sl, src_si, q, nq,
                               out, dst_sq, dst_so, dst_si, interpolation, ignore_nan != 0);
}

/* ------------------------------------------------------- median_pool2d */

static int check_median_pool2d(int dtype, const void *src, int64_t planes, int64_t h,
                               int64_t w, const int64_t *g, int mode, const void *out,
                               const int64_t *index)
{
    int64_t t;
    if (dtype != KWK_FLOAT32 && dtype != KWK_FLOAT64) return KWK_E_DTYPE;
    if (!src || !g || !out || !index) return KWK_E_ARG;
    if (planes < 0 || h < 1 || w < 1) return KWK_E_ARG;
    if (mode != KWK_PAD_ZEROS && mode != KWK_PAD_REFLECT && mode != KWK_PAD_REPLICATE &&
        mode != KWK_PAD_CIRCULAR)
        return KWK_E_ARG;
    for (int i = 0; i < 4; i++)
        if (g[i] < 1) return KWK_E_ARG;      /* kernel and stride */
    for (int i = 4; i < 8; i++)
        if (g[i] < 0 || g[i] > (int64_t)1 << 30) return KWK_E_ARG; /* padding */
    if (g[0] > 4096 || g[1] > 4096 || g[0] * g[1] > ((int64_t)1 << 24)) return KWK_E_ARG;
    if (mode == KWK_PAD_REFLECT && (g[4] >= h || g[5] >= h || g[6] >= w || g[7] >= w))
        return KWK_E_ARG;
    if (mode == KWK_PAD_CIRCULAR && (g[4] > h || g[5] > h || g[6] > w || g[7] > w))
        return KWK_E_ARG;
    if (g[8] != h + g[4] + g[5] || g[9] != w + g[6] + g[7]) return KWK_E_ARG;
    if (g[8] < g[0] || g[9] < g[1]) return KWK_E_ARG;
    if (g[10] != (g[8] - g[0]) / g[2] + 1 || g[11] != (g[9] - g[1]) / g[3] + 1) return KWK_E_ARG;
    if (!mul_ok(g[8], g[9], &t) || !mul_ok(t, 8, &t)) return KWK_E_OVERFLOW;
    if (!mul_ok(planes, h, &t) || !mul_ok(t, w, &t) || !mul_ok(t, 8, &t)) return KWK_E_OVERFLOW;
    if (!mul_ok(planes, g[10], &t) || !mul_ok(t, g[11], &t) || !mul_ok(t, 8, &t))
        return KWK_E_OVERFLOW;
    return KWK_OK;
}

int kwk_median_pool2d(int dtype, const void *src, int64_t planes, int64_t h, int64_t w,
                      const int64_t *geometry, int mode, void *out, int64_t *index)
{
    int status = check_median_pool2d(dtype, src, planes, h, w, geometry, mode, out, index);
    if (status != KWK_OK) return status;
    return kernels()->median_pool2d(dtype, src, planes, h, w, geometry, mode, out, index);
}

int kwk_median_pool2d_backward(int dtype, const void *grad, const int64_t *index,
                               int64_t planes, int64_t h, int64_t w,
                               const int64_t *geometry, int mode, void *grad_input)
{
    int status = check_median_pool2d(dtype, grad, planes, h, w, geometry, mode, grad_input,
                                     index);
    if (status != KWK_OK) return status;
    return kernels()->median_pool2d_backward(dtype, grad, index, planes, h, w, geometry, mode,
                                             grad_input);
}

/* -------------------------------------------------------- sparse layers */

static int float_dtype(int dtype) { return dtype == KWK_FLOAT32 || dtype == KWK_FLOAT64; }

int kwk_sparse_simplex(int dtype, int mode, const void *src, int64_t rows, int64_t len,
                       void *out, int64_t *support, void *stats)
{
    int64_t t;
    if (!float_dtype(dtype)) return KWK_E_DTYPE;
    if (rows < 0 || len < 1 || mode < KWK_SPARSEMAX || mode > KWK_ENTMAX15_APPLY)
        return KWK_E_ARG;
    if (!mul_ok(rows, len, &t) || !mul_ok(t, 8, &t) || !mul_ok(len, 48, &t))
        return KWK_E_OVERFLOW;
    if (rows == 0) return KWK_OK;
    if (!src || !out || !support || (mode != KWK_SPARSEMAX && !stats)) return KWK_E_ARG;
    return kernels()->sparse_simplex(dtype, mode, src, rows, len, out, support, stats);
}

int kwk_sparsemax_backward(int dtype, int phase, const void *grad, const void *y,
                           int64_t rows, int64_t len, void *masked, const void *v)
{
    int64_t t;
    if (!float_dtype(dtype)) return KWK_E_DTYPE;
    if (rows < 0 || len < 0 || (phase != 0 && phase != 1)) return KWK_E_ARG;
    if (!mul_ok(rows, len, &t) || !mul_ok(t, 8, &t)) return KWK_E_OVERFLOW;
    if (rows == 0 || len == 0) return KWK_OK;
    if (!grad || !y || !masked || (phase == 1 && !v)) return KWK_E_ARG;
    return kernels()->sparsemax_backward(dtype, phase, grad, y, rows, len, masked, v);
}

int kwk_entmax15_backward(int dtype, int phase, const void *grad, const void *y,
                          int64_t rows, int64_t len, void *a, void *b, const void *q)
{
    int64_t t;
    if (!float_dtype(dtype)) return KWK_E_DTYPE;
    if (rows < 0 || len < 0 || phase < 0 || phase > 2) return KWK_E_ARG;
    if (!mul_ok(rows, len, &t) || !mul_ok(t, 8, &t)) return KWK_E_OVERFLOW;
    if (rows == 0 || len == 0) return KWK_OK;
    if (!y || !a || (phase >= 1 && !b) || (phase == 1 && !grad) || (phase == 2 && !q))
        return KWK_E_ARG;
    return kernels()->entmax15_backward(dtype, phase, grad, y, rows, len, a, b, q);
}

static int check_group_sort(int dtype, const void *a, int64_t groups, int64_t g,
                            const void *b, const uint8_t *perm)
{
    int64_t t;
    if (!float_dtype(dtype)) return KWK_E_DTYPE;
    if (groups < 0 || g < 1 || g > 256) return KWK_E_ARG;
    if (!mul_ok(groups, g, &t) || !mul_ok(t, 8, &t)) return KWK_E_OVERFLOW;
    if (groups > 0 && (!a || !b || !perm)) return KWK_E_ARG;
    return KWK_OK;
}

int kwk_group_sort(int dtype, const void *src, int64_t groups, int64_t g, int descending,
                   void *out, uint8_t *perm)
{
    int status = check_group_sort(dtype, src, groups, g, out, perm);
    if (status != KWK_OK || groups == 0) return status;
    return kernels()->group_sort(dtype, src, groups, g, descending != 0, out, perm);
}

int kwk_group_sort_backward(int dtype, const void *grad, const uint8_t *perm,
                            int64_t groups, int64_t g, void *grad_input)
{
    int status = check_group_sort(dtype, grad, groups, g, grad_input, perm);
    if (status != KWK_OK || groups == 0) return status;
    /* a perm entry >= g would write outside its group; checked a block at
     * a time without an early exit inside (so the compiler vectorises it:
     * the byte-by-byte loop cost more than the whole backward) */
    const int64_t n = groups * g;
    for (int64_t i = 0; i < n; i += 4096) {
        const int64_t e = n - i < 4096 ? n - i : 4096;
        uint8_t most = 0; /* a byte maximum: one instruction per 16 bytes */
        for (int64_t j = 0; j < e; ++j) most = perm[i + j] > most ? perm[i + j] : most;
        if (most >= g) return KWK_E_ARG;
    }
    return kernels()->group_sort_backward(dtype, grad, perm, groups, g, grad_input);
}

/* The shapes SortPooling's forward and backward share: x (batch, nodes, c)
 * and the kept rows (batch, k, c) of a float dtype, byte sizes in range. */
static int check_sort_pool(int dtype, int64_t batch, int64_t nodes, int64_t c, int64_t k)
{
    int64_t t;
    if (!float_dtype(dtype)) return KWK_E_DTYPE;
    if (batch < 0 || nodes < 0 || c < 1 || k < 0) return KWK_E_ARG;
    if (!mul_ok(batch, nodes, &t) || !mul_ok(t, c, &t) || !mul_ok(t, 8, &t))
        return KWK_E_OVERFLOW;
    if (!mul_ok(batch, k, &t) || !mul_ok(t, c, &t) || !mul_ok(t, 8, &t))
        return KWK_E_OVERFLOW;
    return KWK_OK;
}

int kwk_sort_pool(int dtype, const void *src, int64_t batch, int64_t nodes, int64_t c,
                  const int64_t *count, int64_t k, void *out, int64_t *index)
{
    const int status = check_sort_pool(dtype, batch, nodes, c, k);
    if (status != KWK_OK) return status;
    if (batch == 0 || k == 0) return KWK_OK;
    if (!count || !out || !index || (nodes > 0 && !src)) return KWK_E_ARG;
    for (int64_t b = 0; b < batch; ++b)
        if (count[b] < 0 || count[b] > nodes) return KWK_E_ARG;
    return kernels()->sort_pool(dtype, src, batch, nodes, c, count, k, out, index);
}

int kwk_sort_pool_backward(int dtype, const void *grad, const void *x, const int64_t *index,
                           const void *output, int64_t batch, int64_t nodes, int64_t c,
                           int64_t k, void *grad_input)
{
    const int status = check_sort_pool(dtype, batch, nodes, c, k);
    if (status != KWK_OK) return status;
    if (batch == 0 || nodes == 0) return KWK_OK; /* nothing to write */
    if (!grad_input || (k > 0 && (!grad || !x || !index || !output))) return KWK_E_ARG;
    for (int64_t i = 0; i < batch * k; ++i)
        if (index[i] >= nodes) return KWK_E_ARG;
    return kernels()->sort_pool_backward(dtype, grad, x, index, output, batch, nodes, c, k,
                                         grad_input);
}

/* ---------------------------------------------------------- topk_dense */

int kwk_topk_dense(int dtype, const void *src, int64_t rows, int64_t len, int64_t k,
                   int mode, double fill, void *out, uint8_t *mask, int64_t *kept)
{
    int64_t t;
    if (dtype != KWK_FLOAT32 && dtype != KWK_FLOAT64) return KWK_E_DTYPE;
    if (mode != KWK_TOPK_DENSE_KEEP && mode != KWK_TOPK_DENSE_RELU &&
        mode != KWK_TOPK_DENSE_FILTER)
        return KWK_E_ARG;
    if (rows < 0 || len < 0 || k < 0 || k > len) return KWK_E_ARG;
    if (!mul_ok(rows, len, &t) || !mul_ok(t, 8, &t)) return KWK_E_OVERFLOW;
    if (!mul_ok(len, 3 * 8, &t) || !mul_ok(rows, k, &t) || !mul_ok(t, 8, &t))
        return KWK_E_OVERFLOW;
    if (rows == 0 || len == 0) return KWK_OK;
    if (!src || !out || (mode == KWK_TOPK_DENSE_FILTER ? !mask : k > 0 && !kept))
        return KWK_E_ARG;
    return kernels()->topk_dense(dtype, src, rows, len, k, mode, fill, out, mask, kept);
}

int kwk_filter_below(int dtype, const void *key, const void *src, int64_t rows, int64_t len,
                     const void *cutoff, double fill, void *out, uint8_t *mask)
{
    int64_t t;
    if (dtype != KWK_FLOAT32 && dtype != KWK_FLOAT64) return KWK_E_DTYPE;
    if (rows < 0 || len < 0) return KWK_E_ARG;
    if (!mul_ok(rows, len, &t) || !mul_ok(t, 8, &t) || !mul_ok(rows, 8, &t))
        return KWK_E_OVERFLOW;
    if (rows == 0 || len == 0) return KWK_OK;
    if (!key || !src || !cutoff || !out || !mask) return KWK_E_ARG;
    return kernels()->filter_below(dtype, key, src, rows, len, cutoff, fill, out, mask);
}

int kwk_softmax_f32(const float *x, int64_t rows, int64_t n, int lanes, float *out)
{
    int64_t t;
    if (rows < 0 || n < 0 || (lanes != 8 && lanes != 16)) return KWK_E_ARG;
    if (!mul_ok(rows, n, &t) || !mul_ok(t, 4, &t)) return KWK_E_OVERFLOW;
    if (rows == 0 || n == 0) return KWK_OK;
    if (!x || !out) return KWK_E_ARG;
    return kernels()->softmax_f32(x, rows, n, lanes, out);
}

int kwk_router_backward_f32(const float *p, const int64_t *ids, const float *g, int64_t rows,
                            int64_t n, int64_t k, int renormalize, int lanes, float *gx)
{
    int64_t t;
    if (rows < 0 || n < 1 || k < 1 || k > n || (lanes != 8 && lanes != 16) ||
        (renormalize != 0 && renormalize != 1) || (renormalize && k > KWK_TORCH_SHORT_SUM_MAX))
        return KWK_E_ARG;
    if (!mul_ok(rows, n, &t) || !mul_ok(t, 4, &t) || !mul_ok(rows, k, &t) || !mul_ok(t, 8, &t))
        return KWK_E_OVERFLOW;
    if (rows == 0) return KWK_OK;
    if (!p || !ids || !g || !gx) return KWK_E_ARG;
    return kernels()->router_backward_f32(p, ids, g, rows, n, k, renormalize, lanes, gx);
}

int kwk_router_top1_f32(const float *x, int64_t rows, int64_t n, int64_t *ids, int64_t *unsettled)
{
    int64_t t;
    if (rows < 0 || n < 1 || !unsettled) return KWK_E_ARG;
    if (!mul_ok(rows, n, &t) || !mul_ok(t, 4, &t) || !mul_ok(rows, 8, &t)) return KWK_E_OVERFLOW;
    *unsettled = 0;
    if (rows == 0) return KWK_OK;
    if (!x || !ids) return KWK_E_ARG;
    return kernels()->router_top1_f32(x, rows, n, ids, unsettled);
}

int kwk_renormalize_f32(float *w, int64_t rows, int64_t k)
{
    int64_t t;
    if (rows < 0 || k < 1 || k > KWK_TORCH_SHORT_SUM_MAX) return KWK_E_ARG;
    if (!mul_ok(rows, k, &t) || !mul_ok(t, 4, &t)) return KWK_E_OVERFLOW;
    if (rows == 0) return KWK_OK;
    if (!w) return KWK_E_ARG;
    /* (scalar code: a loop this simple needs no per-target copy) */
    for (int64_t r = 0; r < rows; ++r) {
        float *row = w + r * k;
        const float s = kwk_torch_short_sum(row, k);
        for (int64_t i = 0; i < k; ++i) row[i] = row[i] / s;
    }
    return KWK_OK;
}

/* n sorted elements of a known dtype; every byte of them reachable */
static int check_unique(int dtype, const void *values, int64_t n)
{
    int64_t t;
    if (dtype < 0 || dtype >= KWK_NUM_DTYPES) return KWK_E_DTYPE;
    if (n < 0) return KWK_E_ARG;
    if (!mul_ok(n, 8, &t)) return KWK_E_OVERFLOW;
    if (n > 0 && !values) return KWK_E_ARG;
    return KWK_OK;
}

int kwk_unique_runs(int dtype, const void *values, int64_t n, const int64_t *perm,
                    int64_t *inverse, int64_t *runs, int *order_shows)
{
    int status = check_unique(dtype, values, n);
    if (status != KWK_OK) return status;
    if (!runs || !order_shows || (inverse && !perm)) return KWK_E_ARG;
    *runs = 0;
    *order_shows = 0;
    if (n == 0) return KWK_OK;
    if (inverse) /* inverse[perm[i]] must stay inside inverse; in blocks, no
                  * early exit inside one (a branch per element cost more) */
        for (int64_t i = 0; i < n; i += 4096) {
            const int64_t e = n - i < 4096 ? n - i : 4096;
            int bad = 0;
            for (int64_t j = 0; j < e; ++j) bad |= (uint64_t)perm[i + j] >= (uint64_t)n;
            if (bad) return KWK_E_ARG;
        }
    *runs = kernels()->unique_runs(dtype, values, n, inverse ? perm : NULL, inverse,
                                   order_shows);
    return KWK_OK;
}

int kwk_unique_fill(int dtype, const void *values, int64_t n, int64_t runs, void *out,
                    int64_t *counts)
{
    int status = check_unique(dtype, values, n);
    if (status != KWK_OK) return status;
    if (n == 0) return runs == 0 ? KWK_OK : KWK_E_ARG;
    if (runs < 1 || runs > n) return KWK_E_ARG;
    return kernels()->unique_fill(dtype, values, n, runs, out, counts);
}

int kwk_topk_dense_backward(int dtype, const void *grad, const int64_t *kept, int64_t rows,
                            int64_t len, int64_t k, void *out)
{
    int64_t t;
    if (dtype != KWK_FLOAT32 && dtype != KWK_FLOAT64) return KWK_E_DTYPE;
    if (rows < 0 || len < 0 || k < 0 || k > len) return KWK_E_ARG;
    if (!mul_ok(rows, len, &t) || !mul_ok(t, 8, &t) || !mul_ok(rows, k, &t) ||
        !mul_ok(t, 8, &t))
        return KWK_E_OVERFLOW;
    if (rows == 0 || len == 0) return KWK_OK;
    if (!grad || !out || (k > 0 && !kept)) return KWK_E_ARG;
    for (int64_t i = 0; i < rows * k; ++i) /* each j or ~j a position of its row */
        if ((kept[i] < 0 ? ~kept[i] : kept[i]) >= len) return KWK_E_ARG;
    return kernels()->kept_grad(dtype == KWK_FLOAT32 ? 4 : 8, grad, kept, rows, len, k, out);
}

static int unique_hash(int dtype, const void *values, int64_t n, int64_t limit, void *distinct,
                       int64_t *counts, int64_t *slots, int64_t *u, int merge_zeros)
{
    int status = check_unique(dtype, values, n);
    if (status != KWK_OK) return status;
    if (limit < 0 || !u) return KWK_E_ARG;
    *u = 0;
    if (n == 0) return KWK_OK;
    if (limit == 0) return KWK_DEFER;
    if (!distinct) return KWK_E_ARG;
    /* no more distinct values than elements; slot numbers fit 32 bits */
    if (limit > n) limit = n;
    if (limit > ((int64_t)1 << 30)) limit = (int64_t)1 << 30;
    return kernels()->unique_hash(dtype, values, n, limit, distinct, counts, slots, u,
                                  merge_zeros);
}

int kwk_unique_hash(int dtype, const void *values, int64_t n, int64_t limit, void *distinct,
                    int64_t *counts, int64_t *slots, int64_t *u)
{
    return unique_hash(dtype, values, n, limit, distinct, counts, slots, u, 0);
}

int kwk_unique_hash_zeros(int dtype, const void *values, int64_t n, int64_t limit,
                          void *distinct, int64_t *counts, int64_t *slots, int64_t *u)
{
    return unique_hash(dtype, values, n, limit, distinct, counts, slots, u, 1);
}

int kwk_unique_dense(int dtype, const void *values, int64_t n, int64_t room, void *out,
                     int64_t *counts, int64_t *inverse, int64_t *u)
{
    int64_t t;
    int status = check_unique(dtype, values, n);
    if (status != KWK_OK) return status;
    if (dtype == KWK_FLOAT16 || dtype == KWK_BFLOAT16 || dtype == KWK_FLOAT32
        || dtype == KWK_FLOAT64)
        return KWK_E_DTYPE;
    if (room < 0 || !u) return KWK_E_ARG;
    if (!mul_ok(room, 8, &t)) return KWK_E_OVERFLOW;
    *u = 0;
    if (n == 0) return KWK_OK;
    if (room > 0 && !out) return KWK_E_ARG;
    return kernels()->unique_dense(dtype, values, n, room, out, counts, inverse, u);
}

int kwk_unique_remap(int64_t *slots, int64_t n, const int64_t *rank, int64_t u)
{
    int64_t t;
    if (n < 0 || u < 0) return KWK_E_ARG;
    if (!mul_ok(n, 8, &t) || !mul_ok(u, 8, &t)) return KWK_E_OVERFLOW;
    if (n == 0) return KWK_OK;
    if (!slots || !rank) return KWK_E_ARG;
    return kernels()->unique_remap(slots, n, rank, u);
}

int kwk_unique_order_matters(int dtype, const void *values, int64_t n)
{
    int status = check_unique(dtype, values, n);
    if (status != KWK_OK) return status;
    return n == 0 ? 0 : kernels()->unique_order_matters(dtype, values, n);
}

int kwk_unique_torch_zero(int dtype, const void *values, int64_t n, void *out, int64_t runs)
{
    int status = check_unique(dtype, values, n);
    if (status != KWK_OK) return status;
    if (runs < 0 || runs > n || (runs > 0 && !out)) return KWK_E_ARG;
    return n == 0 ? KWK_OK : kernels()->unique_torch_zero(dtype, values, n, out, runs);
}
