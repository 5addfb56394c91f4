/*
 * kwker.h - the only interface between the native library and Python (cffi
 * reads this file).  Plain C: no torch types, status codes instead of
 * exceptions, every size and stride in elements as int64_t.
 *
 * Rows.  Every kernel works on "rows": a tensor is viewed as
 * (outer, len, inner) and row (o, i) is the sequence of `len` elements at
 *     base + o*so + i*si + j*sl,   j = 0 .. len-1
 * with strides counted in elements (not bytes).  The caller (Python)
 * collapses the dims before and after the reduced dim into `outer` and
 * `inner`; a layout that cannot be collapsed is made contiguous first.
 * Outputs are described the same way with their own strides; the values and
 * indices outputs of one call share a layout.
 *
 * Order.  Keys compare as torch does: -inf < ... < -0.0 == +0.0 < ... < +inf
 * < NaN, all NaNs equal.  Values are written with their original bits.
 * KWK_ORDER_STABLE puts equal elements in index order (ascending index in
 * both directions).  KWK_ORDER_TORCH reproduces the order torch 2.13's CPU
 * kernels give equal elements (libstdc++ std::sort / partial_sort /
 * nth_element applied to (value, index) pairs).  KWK_ORDER_TORCH_PROBE
 * (kwk_topk only): torch's order, and the call may return KWK_DEFER where
 * torch would be faster (see kwk_topk).
 */
#ifndef KWKER_H
#define KWKER_H

#include <stdint.h>

#define KWK_ABI_VERSION 15

/* Status codes (negative: the call did nothing useful; see kwk_strerror). */
enum {
    KWK_OK = 0,
    KWK_E_ARG = -1,      /* a size, stride, k or pointer is invalid */
    KWK_E_NOMEM = -2,    /* a workspace allocation failed */
    KWK_E_DTYPE = -3,    /* the dtype code is unknown or not handled by this op */
    KWK_E_OVERFLOW = -4, /* a size or offset computation would overflow int64 */
    KWK_DEFER = 1        /* the exact answer depends on torch internals the library
                            does not reproduce here: compute this call with torch */
};

/* Element types, by storage: the codes Python maps torch dtypes onto. */
enum {
    KWK_BOOL = 0, KWK_UINT8 = 1, KWK_INT8 = 2, KWK_INT16 = 3, KWK_INT32 = 4,
    KWK_INT64 = 5, KWK_UINT16 = 6, KWK_UINT32 = 7, KWK_UINT64 = 8,
    KWK_FLOAT16 = 9, KWK_BFLOAT16 = 10, KWK_FLOAT32 = 11, KWK_FLOAT64 = 12,
    KWK_NUM_DTYPES = 13
};

/* Order given to equal elements. */
enum { KWK_ORDER_STABLE = 0, KWK_ORDER_TORCH = 1, KWK_ORDER_TORCH_PROBE = 2 };

int kwk_abi_version(void);
const char *kwk_version(void);
const char *kwk_strerror(int status);

/* The kernel set in use: "avx512", "avx2" or "portable".  Chosen once from
 * the CPU and the KWKER_TARGET environment variable ("portable" forces the
 * portable path, "avx2" the AVX2 one on an AVX-512 CPU); kwk_set_target
 * switches it ("auto", "portable", "avx2", "avx512") and returns
 * KWK_E_ARG for a name this CPU or build cannot run. */
const char *kwk_target(void);
int kwk_set_target(const char *name);

/* How many rows each kernel path has served since the library was loaded
 * (all threads; for tests that must prove a path ran).  Unknown counters
 * read -1. */
enum {
    KWK_COUNT_SHORT_SORT_ROWS = 0,  /* sort rows through the eight-rows kernel */
    KWK_COUNT_SHORT_TOPK_ROWS = 1,  /* topk rows through the eight-rows kernel */
    KWK_COUNT_SHORT_TOPK_REDONE = 2, /* of those, rows with a tie, redone per row */
    KWK_COUNT_ROW_SPLITS = 3,       /* steps of one row's work run on several threads */
    KWK_COUNT_THRESHOLD_TOPK_ROWS = 4,   /* topk rows through the threshold kernel */
    KWK_COUNT_THRESHOLD_TOPK_TIES = 5,   /* of those, rows emulated in torch order */
    KWK_COUNT_THRESHOLD_TOPK_REDONE = 6, /* of those, rows redone per row */
    KWK_COUNT_SHORT_TOPK_STABLE_BY_THRESHOLD = 7, /* tied rows the eight-rows kernel
                                                    handed back answered by the
                                                    threshold kernel (stable order) */
    KWK_COUNT_TOP1_ROWS = 8,        /* topk k = 1 rows through the one-pass kernel */
    KWK_COUNT_KTH_BRACKET_ROWS = 9,   /* long rows whose rank a sampled bracket found
                                         (kthvalue, median; kth_pick.h) */
    KWK_COUNT_KTH_BRACKET_SECOND = 10, /* of those, rows the first bracket missed */
    KWK_COUNT_KTH_BRACKET_EXACT = 11,  /* of those, rows the second missed too */
    KWK_COUNT_SMALL_RANGE_SORT_ROWS = 12, /* stable sort rows of integer keys spanning
                                             few values, counted (sort_kernels.h) */
    KWK_COUNT_FEW_TOPK_ROWS = 13,   /* topk k = 2, 3 rows through the one-pass kernel
                                       (topk_few.h) */
    KWK_COUNT_FEW_TOPK_TIES = 14,   /* of those, rows handed back (a tie or a NaN
                                       among the k + 1 best) and redone */
    KWK_COUNT_DOMINANT_SPLIT_ROWS = 15, /* stable sort rows split around a key
                                           filling most of them (sort_kernels.h) */
    KWK_NUM_COUNTERS = 16
};
int64_t kwk_counter(int which);

/* Nonzero when the calling thread's floating-point environment treats
 * subnormal numbers as zero: x86's MXCSR with DAZ (inputs read as zero) or
 * FTZ (results flushed) set, as torch.set_flush_denormal(True) sets both;
 * AArch64's FPCR.FZ.  torch's comparisons then see a float32, float64 or
 * bfloat16 subnormal as a zero (float16 ones widen to normal floats), while
 * this library's keys order every bit pattern: callers that promise torch's
 * results hand such calls to torch.  0 on other architectures. */
int kwk_denormals_flushed(void);

/* Ask the OS to back the 2 MiB-aligned interior of a freshly allocated,
 * not yet written output buffer with transparent huge pages (Linux
 * madvise(MADV_HUGEPAGE)); buffers under 4 MiB are left alone.  Only a
 * hint: contents are unchanged and no memory is allocated or freed.  A
 * large output then faults once per 2 MiB instead of once per 4 KiB (the
 * faults cost more than the sort of a million short rows: see dispatch.c).
 * Returns the bytes advised (0: none: too small, not Linux, or refused). */
int64_t kwk_advise_fresh_output(void *p, int64_t bytes);

/* How many threads the calling thread's later kwk_sort calls of a single
 * row may use for it (1 to KWK_MAX_ROW_THREADS; the default, 1, uses none
 * but the caller).  A per-thread setting: a call that splits its row
 * starts helper threads and joins them before it returns (no pool stays
 * behind: fork-safe); calls of several rows, and the other functions,
 * never split (the caller splits rows by blocks).  Returns the previous
 * setting, or KWK_E_ARG (setting unchanged) for n out of range. */
enum { KWK_MAX_ROW_THREADS = 64 };
int kwk_set_row_threads(int n);

/* Each thread keeps the workspace blocks its last calls freed (at most
 * four, each under 4 MiB) for its next calls: a fresh block of a few
 * hundred KiB costs more in page faults than a sort that fills it.  They
 * are freed when the thread exits, or now by this call (the calling
 * thread's blocks only). */
void kwk_release_workspace(void);

/* Sort each row.  values (same dtype as src) or indices (int64) may be NULL
 * when not wanted, not both.  The outputs must not overlap src or each
 * other (kernels may write a row's output before reading later rows, and
 * the short-row network stores whole vectors that run into the next rows'
 * places before writing those). */
int kwk_sort(int dtype, const void *src,
             int64_t outer, int64_t len, int64_t inner,
             int64_t src_so, int64_t src_sl, int64_t src_si,
             void *values, int64_t *indices,
             int64_t dst_so, int64_t dst_sl, int64_t dst_si,
             int descending, int order);

/* The k largest (largest=1) or smallest elements of each row, in order when
 * sorted=1 (with KWK_ORDER_TORCH and sorted=0 the order torch gives).
 * 0 <= k <= len; outputs have k elements a row.  With KWK_ORDER_TORCH_PROBE
 * (else as KWK_ORDER_TORCH), over at least 256 rows (inner == 1) of at most
 * 64 elements, returns KWK_DEFER,
 * nothing written, when the first rows show that torch selects such rows
 * faster (short rows whose best keys tie, rows already in order with
 * sorted=0; select_kernels.h tk_probe_prefers_torch): the caller then runs
 * torch. */
int kwk_topk(int dtype, const void *src,
             int64_t outer, int64_t len, int64_t inner,
             int64_t src_so, int64_t src_sl, int64_t src_si,
             int64_t k, void *values, int64_t *indices,
             int64_t dst_so, int64_t dst_sl, int64_t dst_si,
             int largest, int sorted, int order);

/* The k-th smallest element of each row (1 <= k <= len) and its index, as
 * torch.kthvalue (NaN largest).  With KWK_ORDER_TORCH, a k-th value shared by
 * several elements gets the index torch's quickselect returns; with
 * KWK_ORDER_STABLE, the element at stable rank k-1.  One value and index per
 * row, at dst + o*dst_so + i*dst_si. */
int kwk_kthvalue(int dtype, const void *src,
                 int64_t outer, int64_t len, int64_t inner,
                 int64_t src_so, int64_t src_sl, int64_t src_si,
                 int64_t k, void *values, int64_t *indices,
                 int64_t dst_so, int64_t dst_si, int order);

/* Lower median of each row (len >= 1) and its index: torch.median(dim)
 * (ignore_nan=0: a row holding NaN gives its first NaN) or
 * torch.nanmedian(dim) (ignore_nan=1).  One value and index per row, at
 * dst + o*dst_so + i*dst_si. */
int kwk_median_dim(int dtype, const void *src,
                   int64_t outer, int64_t len, int64_t inner,
                   int64_t src_so, int64_t src_sl, int64_t src_si,
                   void *values, int64_t *indices,
                   int64_t dst_so, int64_t dst_si, int ignore_nan);

/* Lower median of n elements at src + j*stride (torch.median() /
 * torch.nanmedian() without dim).  n == 0 or a NaN (ignore_nan=0) gives the
 * quiet NaN torch returns.  Writes one value. */
int kwk_median_all(int dtype, const void *src, int64_t n, int64_t stride,
                   void *value, int ignore_nan);

/* Interpolation modes of torch.quantile. */
enum {
    KWK_QUANTILE_LINEAR = 0, KWK_QUANTILE_LOWER = 1, KWK_QUANTILE_HIGHER = 2,
    KWK_QUANTILE_MIDPOINT = 3, KWK_QUANTILE_NEAREST = 4
};
/* torch.quantile (ignore_nan=0) / torch.nanquantile (ignore_nan=1) of each
 * row (float32 or float64, len >= 1) at the nq probabilities q[] (each in
 * [0, 1], rounded to the input's precision as torch does).  The result for
 * q[t] in row (o, i) goes to out + t*dst_sq + o*dst_so + i*dst_si.  Returns
 * KWK_DEFER, having written partial results, when a selected element is one
 * of several equal keys with different bits (+0.0 beside -0.0, NaNs with
 * different payloads): which of them torch's sort puts there is not
 * reproduced, so the caller computes the call with torch. */
int kwk_quantile(int dtype, const void *src,
                 int64_t outer, int64_t len, int64_t inner,
                 int64_t src_so, int64_t src_sl, int64_t src_si,
                 const double *q, int64_t nq, void *out,
                 int64_t dst_sq, int64_t dst_so, int64_t dst_si,
                 int interpolation, int ignore_nan);

/* Padding modes of median_pool2d (as torch.nn.functional.pad's). */
enum { KWK_PAD_ZEROS = 0, KWK_PAD_REFLECT = 1, KWK_PAD_REPLICATE = 2, KWK_PAD_CIRCULAR = 3 };
/* Median filter over `planes` contiguous h x w planes (float32/float64).
 * geometry[12] = kernel h, w; stride h, w; padding top, bottom, left, right;
 * padded h, w; output h, w (the caller's sizes, checked for consistency).
 * Each output is the lower median of its window: the element at stable rank
 * (n-1)//2 by (value, position in the window, row-major), or the window's
 * first NaN; index gets that position (0 .. kh*kw-1).  Outputs are
 * contiguous (planes, out h, out w).  Reflect padding needs each pad < the
 * input's size along it, circular each pad <= it. */
int kwk_median_pool2d(int dtype, const void *src, int64_t planes, int64_t h, int64_t w,
                      const int64_t *geometry, int mode, void *out, int64_t *index);
/* The gradient of kwk_median_pool2d: grad (planes, out h, out w) goes to the
 * elements index names, summed in the order of the reference's backward
 * (col2im, then the pad's backward); grad_input (planes, h, w) is written
 * whole. */
int kwk_median_pool2d_backward(int dtype, const void *grad, const int64_t *index,
                               int64_t planes, int64_t h, int64_t w,
                               const int64_t *geometry, int mode, void *grad_input);

/* sparsemax and 1.5-entmax of each of `rows` contiguous rows of len >= 1
 * elements (float32/float64), as the entmax package computes them (its
 * sort-based thresholds), bit for bit.  mode 0 (sparsemax): out gets the
 * probabilities, support[r] row r's support size as the package counts it.
 * mode 1 (entmax15 threshold): support as for mode 0, stats[2r] and
 * stats[2r+1] the row's mean and clamped delta at that size (tau is
 * mean - sqrt(delta), the square root left to the caller: torch's is not
 * always correctly rounded).  mode 2 (entmax15 output): out from
 * tau = stats[r], skipping rows whose support is negative.  Rows the
 * kernel leaves to the caller (a NaN or an infinite maximum, which the
 * package cannot solve; rows too long for the kernel's exactness proof or
 * with a decision within an ulp of torch's square root, see
 * sparse_kernels.h) get support -1 and the call returns KWK_DEFER, every
 * other row done. */
enum { KWK_SPARSEMAX = 0, KWK_ENTMAX15_THRESHOLD = 1, KWK_ENTMAX15_APPLY = 2 };
int kwk_sparse_simplex(int dtype, int mode, const void *src, int64_t rows, int64_t len,
                       void *out, int64_t *support, void *stats);
/* sparsemax's backward in two passes around the caller's row sums (of
 * rows contiguous rows of len): phase 0 writes masked = grad where y != 0,
 * +0.0 elsewhere; phase 1, with v[r] = that row's sum / support size,
 * rewrites masked to masked - v[r] where y != 0 (v unused in phase 0 and
 * may be NULL). */
int kwk_sparsemax_backward(int dtype, int phase, const void *grad, const void *y,
                           int64_t rows, int64_t len, void *masked, const void *v);
/* entmax15's backward, gppr = sqrt(y), grad * gppr - gppr * sum(grad *
 * gppr) / sum(gppr), in three passes around the caller's square root
 * (torch's, not always correctly rounded) and row sums (torch's order), over
 * rows contiguous rows of len: phase 0 writes a = y where y != 0, 1.0
 * elsewhere (the square root is then taken of a, in place, skipping the
 * slow zeros of MKL's); phase 1, with a holding that root, rewrites a to
 * gppr (y itself where y == 0: the root of +-0 is +-0) and writes
 * b = grad * gppr; phase 2, with q[r] = sum(b) / sum(gppr) of row r,
 * rewrites b to b - q[r] * gppr (each product and difference rounded as
 * torch rounds them).  grad is read in phase 1 only, q in phase 2 only
 * (either may be NULL in the other phases). */
int kwk_entmax15_backward(int dtype, int phase, const void *grad, const void *y,
                          int64_t rows, int64_t len, void *a, void *b, const void *q);
/* GroupSort: `groups` contiguous groups of g elements (1 <= g <= 256),
 * each sorted ascending (descending != 0: descending), NaN after all
 * numbers (before them when descending), equal elements in index order.
 * perm gets, for each output position, the position in its group it came
 * from. */
int kwk_group_sort(int dtype, const void *src, int64_t groups, int64_t g, int descending,
                   void *out, uint8_t *perm);
/* The gradient of kwk_group_sort: grad_input[group, perm[j]] = grad[group, j]. */
int kwk_group_sort_backward(int dtype, const void *grad, const uint8_t *perm,
                            int64_t groups, int64_t g, void *grad_input);
/* SortPooling of a dense batch x (batch, nodes, c), c >= 1, where graph b
 * has count[b] real nodes, the first ones: out (batch, k, c) gets, per
 * graph, the rows of the k real nodes with the largest last channel (NaN
 * first, equal keys by node index), zero rows past count[b]; index (batch,
 * k) the node of each (-1 for a zero row).  Returns KWK_DEFER when a
 * graph has fewer real nodes than nodes or k and a real value is NaN, or,
 * everything written, when a kept value is NaN, infinite or of magnitude >= 2^24
 * (float32) / 2^53 (float64) (see sparse_kernels.h). */
int kwk_sort_pool(int dtype, const void *src, int64_t batch, int64_t nodes, int64_t c,
                  const int64_t *count, int64_t k, void *out, int64_t *index);
/* The gradient of kwk_sort_pool (as kwker's reference computes it):
 * grad_input (batch, nodes, c) is +0.0 but at each kept row's node,
 * index[b, r] >= 0, where it takes grad (batch, k, c) row r, except in the
 * entries the pooling zeroed (output 0 where x is not 0: +0.0 there).
 * KWK_E_ARG when an index is >= nodes (a negative one marks a zero row). */
int kwk_sort_pool_backward(int dtype, const void *grad, const void *x, const int64_t *index,
                           const void *output, int64_t batch, int64_t nodes, int64_t c,
                           int64_t k, void *grad_input);
/* The gradient of kwk_topk_dense's KEEP and RELU outputs from their kept
 * positions: for `rows` contiguous rows of `len` float32/float64 elements,
 * out = +0.0 except out[r, j] = grad[r, j] for each j >= 0 among the row's
 * k entries kept[r, 0..k) (a negative entry ~j, where ReLU stops the
 * gradient, leaves out[r, ~j] at +0.0): torch.where on the dense mask the
 * positions stand for.  KWK_E_ARG when an entry is outside [-len, len). */
int kwk_topk_dense_backward(int dtype, const void *grad, const int64_t *kept, int64_t rows,
                            int64_t len, int64_t k, void *out);
/* torch.unique's compaction of n >= 0 sorted contiguous elements: runs of
 * equal values as torch.ne sees them (-0.0 == +0.0; every NaN a run of its
 * own).  kwk_unique_runs stores the number of runs in *runs and, when perm
 * (the sort's permutation: sorted position -> input position, each in
 * [0, n)) and inverse are both given, inverse[perm[i]] = the run of sorted
 * element i; *order_shows = 1 when the result depends on how the sort
 * ordered equal elements (-0.0 next to +0.0, two NaNs), else 0.
 * kwk_unique_fill writes each run's first value (its bits) to
 * out and its length to counts (either may be NULL; each holds `runs`
 * elements, the count kwk_unique_runs gave). */
int kwk_unique_runs(int dtype, const void *values, int64_t n, const int64_t *perm,
                    int64_t *inverse, int64_t *runs, int *order_shows);
int kwk_unique_fill(int dtype, const void *values, int64_t n, int64_t runs, void *out,
                    int64_t *counts);
/* Whether torch.unique's result over these n (unsorted) elements depends on
 * how its sort orders equal elements (float dtypes): 1 when both -0.0 and
 * +0.0 occur, plus 2 when two NaNs do; 0 when neither; or a negative
 * status. */
int kwk_unique_order_matters(int dtype, const void *values, int64_t n);
/* For n elements where kwk_unique_order_matters gave 1 (zeros of both
 * signs, at most one NaN): the compaction of any sort of them (`out`, the
 * `runs` values kwk_unique_fill wrote) gets the zero torch's sort puts
 * first written into its zero entry, which is then torch's result.
 * KWK_DEFER, changing nothing, when the library cannot tell which zero
 * that is cheaply (sort in torch's order instead); KWK_E_ARG when out holds
 * no zero entry. */
int kwk_unique_torch_zero(int dtype, const void *values, int64_t n, void *out, int64_t runs);
/* torch.unique of n >= 0 (unsorted, contiguous) elements by hashing, for
 * inputs of few distinct values (unique_hash.h): each distinct value once in
 * `distinct` (its bits, bool as 0 or 1), in the order of first occurrence;
 * counts[s] the number of elements equal to distinct value s, slots[i] the
 * distinct value of element i (counts and slots may be NULL); their number in
 * *u.  `distinct` and `counts` have room for `limit` >= 0 elements.  Returns
 * KWK_DEFER, having written nothing to rely on, when there are more than
 * `limit` distinct values, when their keys collide too often, or when
 * torch's result would show its sort's order of equal elements (both -0.0
 * and +0.0, or two NaNs: see kwk_unique_order_matters): sort instead. */
int kwk_unique_hash(int dtype, const void *values, int64_t n, int64_t limit, void *distinct,
                    int64_t *counts, int64_t *slots, int64_t *u);
/* kwk_unique_hash, but -0.0 and +0.0 are one distinct value (shown with
 * the sign met first; kwk_unique_torch_zero then gives it torch's): for
 * inputs where kwk_unique_order_matters gave 1. */
int kwk_unique_hash_zeros(int dtype, const void *values, int64_t n, int64_t limit,
                          void *distinct, int64_t *counts, int64_t *slots, int64_t *u);
/* slots[i] = rank[slots[i]] for the n slots kwk_unique_hash wrote (rank:
 * distinct value -> its place in sorted order, u entries); KWK_E_ARG when a
 * slot is outside [0, u). */
int kwk_unique_remap(int64_t *slots, int64_t n, const int64_t *rank, int64_t u);
/* torch.unique of n >= 0 (unsorted, contiguous) elements of an integer or
 * bool dtype whose values lie in a short range (unique_dense.h): the
 * distinct values in ascending order in `out` (bool as 0 or 1), counts[s] the number of
 * elements equal to out[s], inverse[i] the place in `out` of element i's
 * value (counts and inverse may be NULL); their number in *u.  `out` and
 * `counts` have room for `room` >= 0 elements.  Returns KWK_DEFER, having
 * written nothing to rely on, when the range is too wide for the input's
 * length (hash or sort instead) or there are more than `room` distinct
 * values; KWK_E_DTYPE for the float dtypes. */
int kwk_unique_dense(int dtype, const void *values, int64_t n, int64_t room, void *out,
                     int64_t *counts, int64_t *inverse, int64_t *u);
/* kwk_topk_dense modes. */
enum { KWK_TOPK_DENSE_KEEP = 0, KWK_TOPK_DENSE_RELU = 1, KWK_TOPK_DENSE_FILTER = 2 };
/* The k largest of each of `rows` contiguous rows of `len` float32/float64
 * elements (0 <= k <= len), written densely to out (same layout):
 *   KEEP    out = the element where kept, +0.0 elsewhere; kept (rows x k
 *           int64) = each row's kept positions, ascending.  Of elements
 *           tied at the k-th value, those torch.topk(sorted=True) returns
 *           are kept.
 *   RELU    as KEEP with kept negative values made +0.0 (torch.relu); a
 *           kept position j whose value is <= 0 (ReLU's gradient stops
 *           there; NaN's passes) is stored as ~j (negative).
 *   FILTER  out = fill (rounded to the dtype) where the element is below
 *           the k-th largest, the element elsewhere; mask (rows x len
 *           bytes) = replaced.
 * The positions are what the layer's backward needs (k per row, where a
 * byte mask held rows x len).  Each mode writes only its own: mask may be
 * NULL for KEEP and RELU, kept for FILTER.
 * Order as everywhere: -0.0 == +0.0, NaN largest. */
int kwk_topk_dense(int dtype, const void *src, int64_t rows, int64_t len, int64_t k,
                   int mode, double fill, void *out, uint8_t *mask, int64_t *kept);
/* kwk_topk_dense's FILTER output with each row's threshold given, and the
 * comparison on keys that may differ from the values: for `rows`
 * contiguous rows of `len` float32/float64 keys and values (same dtype;
 * key may be src) and cutoff[r] (one key per row), out = fill (rounded to
 * the dtype) where key < cutoff[r], src elsewhere; mask = replaced.  The
 * comparison is IEEE's, as torch's `key < cutoff`: NaN on either side
 * replaces nothing, -0.0 == +0.0.  (The top-p filter: key = src, its
 * cutoff from a sorted row; min-p: key = softmax(src).) */
int kwk_filter_below(int dtype, const void *key, const void *src, int64_t rows, int64_t len,
                     const void *cutoff, double fill, void *out, uint8_t *mask);
/* torch.softmax(x, -1) of `rows` contiguous rows of n float32, bit for bit
 * as torch 2.13's CPU kernel computes it with vectors of `lanes` floats
 * (16: ATen's AVX-512 kernels, 8: AVX2; see softmax_torch.h).  KWK_DEFER
 * (out partly written) when a row holds a NaN or an infinite maximum. */
int kwk_softmax_f32(const float *x, int64_t rows, int64_t n, int lanes, float *out);
/* w / w.sum(-1, keepdim=True) in place for `rows` contiguous rows of k
 * float32 weights, 1 <= k <= 8, with torch's bits on x86 (the router's
 * renormalisation; torch_sum.h says how torch sums such rows). */
int kwk_renormalize_f32(float *w, int64_t rows, int64_t k);
/* topk_softmax(x, 1, renormalize=True) of `rows` contiguous rows of n >= 1
 * float32 logits without the softmax: its weights are all 1, and ids[r] is
 * the column of row r's largest logit where no other lies within 2^-19 of
 * it (softmax_torch.h says why that is the largest probability's), else -1
 * (a NaN, an infinite maximum, a near tie: the caller computes those rows
 * the long way); *unsettled = the rows given -1. */
int kwk_router_top1_f32(const float *x, int64_t rows, int64_t n, int64_t *ids, int64_t *unsettled);
/* The MoE router's gradient (topk_layers: topk_softmax's backward) for
 * `rows` contiguous rows: p the n softmax probabilities (float32), ids the
 * k selected columns (distinct, in [0, n): KWK_E_ARG otherwise), g the
 * gradient of the k weights; gx (rows x n) = what torch's autograd gives
 * the softmax's input, bit for bit with torch 2.13's kernels of `lanes`
 * floats (8 or 16): topk's scatter into zeros, then
 * _softmax_backward_data.  With renormalize (k <= 8 only) the weights were
 * w = t / t.sum(-1) and g is w's gradient; else w = t.  (torch's own
 * result for rows with a partial last vector depends on the copy of its
 * loop that runs: the one in the calling thread fuses that vector's
 * multiply-add; this kernel gives the other's, and kwker uses it only for
 * rows of whole vectors or of less than one.)  KWK_DEFER (gx
 * partly written) when g or a row's p holds a NaN: which of two NaNs a sum
 * keeps is the compiler's choice of operand order, not reproducible. */
int kwk_router_backward_f32(const float *p, const int64_t *ids, const float *g, int64_t rows,
                            int64_t n, int64_t k, int renormalize, int lanes, float *gx);

#endif
