/*
 * kernels.h - the table of kernels one CPU target provides.
 *
 * Each target (portable C, AVX2, AVX-512) compiles the same kernel sources with its
 * own instruction set (targets/<name>.c) and exports one table; dispatch.c
 * validates every call, then calls through the table it chose once.
 * Kernels may assume validated arguments (see kwker.h for their meaning).
 */
#ifndef KWK_KERNELS_H
#define KWK_KERNELS_H

#include "../include/kwker.h"
#include "net_pairs.h"

typedef struct {
    const char *name;
    int (*sort)(int dtype, const void *src, int64_t outer, int64_t len,
                int64_t inner, int64_t src_so, int64_t src_sl, int64_t src_si,
                void *values, int64_t *indices, int64_t dst_so,
                int64_t dst_sl, int64_t dst_si, int descending, int order);
    int (*topk)(int dtype, const void *src, int64_t outer, int64_t len,
                int64_t inner, int64_t src_so, int64_t src_sl, int64_t src_si,
                int64_t k, void *values, int64_t *indices, int64_t dst_so,
                int64_t dst_sl, int64_t dst_si, int largest, int sorted,
                int order);
    int (*median_dim)(int dtype, const void *src, int64_t outer, int64_t len,
                      int64_t inner, int64_t src_so, int64_t src_sl,
                      int64_t src_si, void *values, int64_t *indices,
                      int64_t dst_so, int64_t dst_si, int ignore_nan);
    int (*median_all)(int dtype, const void *src, int64_t n, int64_t stride,
                      void *value, int ignore_nan);
    int (*kthvalue)(int dtype, const void *src, int64_t outer, int64_t len,
                    int64_t inner, int64_t src_so, int64_t src_sl, int64_t src_si,
                    int64_t k, void *values, int64_t *indices, int64_t dst_so,
                    int64_t dst_si, int order);
    int (*quantile)(int dtype, const void *src, int64_t outer, int64_t len,
                    int64_t inner, int64_t src_so, int64_t src_sl, int64_t src_si,
                    const double *q, int64_t nq, void *out, int64_t dst_sq,
                    int64_t dst_so, int64_t dst_si, int interpolation, int ignore_nan);
    int (*median_pool2d)(int dtype, const void *src, int64_t planes, int64_t h, int64_t w,
                         const int64_t *geometry, int mode, void *out, int64_t *index);
    int (*median_pool2d_backward)(int dtype, const void *grad, const int64_t *index,
                                  int64_t planes, int64_t h, int64_t w,
                                  const int64_t *geometry, int mode, void *grad_input);
    /* sparse_kernels.h */
    int (*sparse_simplex)(int dtype, int mode, const void *src, int64_t rows, int64_t len,
                          void *out, int64_t *support, void *stats);
    int (*sparsemax_backward)(int dtype, int phase, const void *grad, const void *y,
                              int64_t rows, int64_t len, void *masked, const void *v);
    int (*entmax15_backward)(int dtype, int phase, const void *grad, const void *y,
                             int64_t rows, int64_t len, void *a, void *b, const void *q);
    int (*group_sort)(int dtype, const void *src, int64_t groups, int64_t g, int descending,
                      void *out, uint8_t *perm);
    int (*group_sort_backward)(int dtype, const void *grad, const uint8_t *perm,
                               int64_t groups, int64_t g, void *grad_input);
    int (*sort_pool)(int dtype, const void *src, int64_t batch, int64_t nodes, int64_t c,
                     const int64_t *count, int64_t k, void *out, int64_t *index);
    int (*sort_pool_backward)(int dtype, const void *grad, const void *x, const int64_t *index,
                              const void *output, int64_t batch, int64_t nodes, int64_t c,
                              int64_t k, void *grad_input);
    int (*topk_dense)(int dtype, const void *src, int64_t rows, int64_t len, int64_t k,
                      int mode, double fill, void *out, uint8_t *mask, int64_t *kept);
    int (*kept_grad)(int es, const void *grad, const int64_t *kept, int64_t rows, int64_t len,
                     int64_t k, void *out);
    int (*filter_below)(int dtype, const void *key, const void *src, int64_t rows, int64_t len,
                        const void *cutoff, double fill, void *out, uint8_t *mask);
    /* softmax_torch.h */
    int (*softmax_f32)(const float *x, int64_t rows, int64_t n, int lanes, float *out);
    int (*router_backward_f32)(const float *p, const int64_t *ids, const float *g, int64_t rows,
                               int64_t n, int64_t k, int renormalize, int lanes, float *gx);
    int (*router_top1_f32)(const float *x, int64_t rows, int64_t n, int64_t *ids, int64_t *unsettled);
    /* unique_runs.h */
    int64_t (*unique_runs)(int dtype, const void *values, int64_t n, const int64_t *perm,
                           int64_t *inverse, int *shows);
    int (*unique_order_matters)(int dtype, const void *values, int64_t n);
    int (*unique_torch_zero)(int dtype, const void *values, int64_t n, void *out, int64_t runs);
    int (*unique_fill)(int dtype, const void *values, int64_t n, int64_t runs, void *out,
                       int64_t *counts);
    /* unique_hash.h */
    int (*unique_hash)(int dtype, const void *values, int64_t n, int64_t limit, void *distinct,
                       int64_t *counts, int64_t *slots, int64_t *u, int merge_zeros);
    int (*unique_remap)(int64_t *slots, int64_t n, const int64_t *rank, int64_t u);
    /* unique_dense.h */
    int (*unique_dense)(int dtype, const void *values, int64_t n, int64_t room, void *out,
                        int64_t *counts, int64_t *inverse, int64_t *u);
} kwk_kernel_table;

/* The calling thread's kwk_set_row_threads setting (dispatch.c). */
int kwk_row_threads(void);

/* Run part(ctx, p) for p = 0..parts-1, part 0 on the calling thread and the
 * others on helper threads, and return when all are done; a part whose
 * thread cannot be started runs on the caller after its own.  While the
 * parts run, the caller's kwk_row_threads() reads 1 (a part never splits
 * again).  parts <= KWK_MAX_ROW_THREADS (dispatch.c). */
void kwk_run_parts(void (*part)(void *ctx, int p), void *ctx, int parts);

/* Workspace blocks through the calling thread's cache (dispatch.c,
 * kwker.h kwk_release_workspace): kwk_ws_take returns a block of at least
 * `bytes` (its size in *cap) or NULL; kwk_ws_give takes it back (keeps it
 * for a later call of this thread, or frees it).  Blocks of KWK_WS_CACHE_MAX
 * bytes or more are never cached. */
enum { KWK_WS_CACHE_MAX = 4 << 20 };
void *kwk_ws_take(size_t bytes, size_t *cap);
void kwk_ws_give(void *p, size_t cap);

/* The comparators of row_network.h's kwk_net_pairs(n) (n <= 1024) through
 * the calling thread's cache (dispatch.c): kwk_net_take returns them (their
 * count in *npairs), the cached ones when the thread's last network was
 * for n, else computed (NULL: no memory); kwk_net_give keeps them for the
 * thread's next call (or frees them).  The comparators are what
 * kwk_net_pairs writes, never modified by a caller. */
kwk_net_pair *kwk_net_take(int n, int *npairs);
void kwk_net_give(kwk_net_pair *pairs, int n, int npairs);

/* Add n to a kwk_counter (dispatch.c; relaxed atomic, once per call). */
void kwk_count(int which, int64_t n);

extern const kwk_kernel_table kwk_kernels_portable;
#if defined(__x86_64__) || defined(_M_X64)
#define KWK_HAVE_AVX2_TARGET 1
extern const kwk_kernel_table kwk_kernels_avx2;
#define KWK_HAVE_AVX512_TARGET 1
extern const kwk_kernel_table kwk_kernels_avx512;
#endif

#endif
