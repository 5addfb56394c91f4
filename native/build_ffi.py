"""cffi builder for kwker's native library (API mode).

API mode compiles a CPython extension that calls the C functions directly;
measured on this machine an empty call costs 0.22 us against 0.41 us through
ABI mode's dlopen + libffi, and the Python wrappers call the library once per
torch call, so the cheaper call wins.  The only declarations cffi sees are
those of native/include/kwker.h.
"""
import glob
import os
import re

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))
INCLUDE = os.path.join(HERE, "include")
SOURCES = [
    "src/dispatch.c",
    "src/targets/portable.c",
    "src/targets/avx2.c",
    "src/targets/avx512.c",
]


def header_declarations() -> str:
    """kwker.h minus what cdef() cannot parse (comments, include guards,
    #include lines)."""
    with open(os.path.join(INCLUDE, "kwker.h")) as f:
        text = f.read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    lines = [
        line
        for line in text.splitlines()
        if not re.match(r"\s*#\s*(ifndef|endif|include|define KWKER_H)", line)
    ]
    return "\n".join(lines)


def compile_args() -> list:
    # no FMA contraction: quantile's arithmetic must round exactly where
    # torch's does (its explicit fma() calls are unaffected)
    # no errno from sqrt, no floating-point traps assumed (Kwker never reads
    # the exception flags): lets the compiler vectorise loops with square
    # roots and float compares, such as entmax15's per-position thresholds
    # (sparse_kernels.h); every operation still rounds as IEEE says, so the
    # results are the same bits
    # _DEFAULT_SOURCE: -std=c11 alone hides POSIX/Linux declarations such as
    # madvise and MADV_HUGEPAGE (the workspace's huge pages, row_io.h)
    # -g1 (line tables, after Python's own -g): perf and gdb still map the
    # kernels' code to file:line, the code generated is the same, and each
    # CPU target compiles in 70% of the time (avx2.c 81 -> 57 s, avx512.c
    # 80 -> 54, portable.c 53 -> 41 on the 2-core machines here, where the
    # install's compile is most of CI's set-up)
    # -falign-functions=64 -falign-loops=64: the hot loops' speed no longer
    # moves with where unrelated code pushes them: the torch-order emulation
    # of qwen3's router topk (4096x128 k=8) ran at 695-700 or 810-840 us
    # depending on the build (a merge added elsewhere moved it; the same
    # build measured either way across runs), aligned 694-711 in every build
    # and run; 30 other corpus and synthetic calls measured alike (0.97-1.04x,
    # A/B, three alternating rounds)
    args = ["-std=c11", "-D_DEFAULT_SOURCE", "-O3", "-g1", "-fno-strict-aliasing",
            "-ffp-contract=off", "-fno-math-errno", "-fno-trapping-math", "-pthread",
            "-falign-functions=64", "-falign-loops=64"]
    if os.environ.get("KWKER_SANITIZE"):
        # ASan/UBSan build for the sanitizer test job (never for releases)
        args += ["-O1", "-g", "-fno-omit-frame-pointer",
                 "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"]
    return args


def link_args() -> list:
    # -pthread: a long row's sort starts helper threads (dispatch.c)
    if os.environ.get("KWKER_SANITIZE"):
        return ["-pthread", "-fsanitize=address,undefined"]
    return ["-pthread"]


# Adapters that take buffer addresses as integers: Python hands over
# tensor.data_ptr() directly, saving an ffi.cast per pointer (0.27 us each,
# three per sort call, measured).  They add no logic: kwker.h's functions
# validate everything.
ADDRESS_ADAPTERS_CDEF = """
int kwk_sort_addr(int dtype, uintptr_t src, int64_t outer, int64_t len, int64_t inner,
                  int64_t src_so, int64_t src_sl, int64_t src_si, uintptr_t values,
                  uintptr_t indices, int64_t dst_so, int64_t dst_sl, int64_t dst_si,
                  int descending, int order);
int kwk_topk_addr(int dtype, uintptr_t src, int64_t outer, int64_t len, int64_t inner,
                  int64_t src_so, int64_t src_sl, int64_t src_si, int64_t k,
                  uintptr_t values, uintptr_t indices, int64_t dst_so, int64_t dst_sl,
                  int64_t dst_si, int largest, int sorted, int order);
int kwk_median_dim_addr(int dtype, uintptr_t src, int64_t outer, int64_t len,
                        int64_t inner, int64_t src_so, int64_t src_sl, int64_t src_si,
                        uintptr_t values, uintptr_t indices, int64_t dst_so,
                        int64_t dst_si, int ignore_nan);
int kwk_median_all_addr(int dtype, uintptr_t src, int64_t n, int64_t stride,
                        uintptr_t value, int ignore_nan);
int kwk_kthvalue_addr(int dtype, uintptr_t src, int64_t outer, int64_t len, int64_t inner,
                      int64_t src_so, int64_t src_sl, int64_t src_si, int64_t k,
                      uintptr_t values, uintptr_t indices, int64_t dst_so, int64_t dst_si,
                      int order);
int kwk_quantile_addr(int dtype, uintptr_t src, int64_t outer, int64_t len, int64_t inner,
                      int64_t src_so, int64_t src_sl, int64_t src_si, uintptr_t q,
                      int64_t nq, uintptr_t out, int64_t dst_sq, int64_t dst_so,
                      int64_t dst_si, int interpolation, int ignore_nan);
int kwk_median_pool2d_addr(int dtype, uintptr_t src, int64_t planes, int64_t h, int64_t w,
                           uintptr_t geometry, int mode, uintptr_t out, uintptr_t index);
int kwk_median_pool2d_backward_addr(int dtype, uintptr_t grad, uintptr_t index,
                                    int64_t planes, int64_t h, int64_t w,
                                    uintptr_t geometry, int mode, uintptr_t grad_input);
int kwk_sparse_simplex_addr(int dtype, int mode, uintptr_t src, int64_t rows, int64_t len,
                            uintptr_t out, uintptr_t support, uintptr_t stats);
int kwk_sparsemax_backward_addr(int dtype, int phase, uintptr_t grad, uintptr_t y,
                                int64_t rows, int64_t len, uintptr_t masked, uintptr_t v);
int kwk_entmax15_backward_addr(int dtype, int phase, uintptr_t grad, uintptr_t y,
                               int64_t rows, int64_t len, uintptr_t a, uintptr_t b, uintptr_t q);
int kwk_group_sort_addr(int dtype, uintptr_t src, int64_t groups, int64_t g, int descending,
                        uintptr_t out, uintptr_t perm);
int kwk_group_sort_backward_addr(int dtype, uintptr_t grad, uintptr_t perm, int64_t groups,
                                 int64_t g, uintptr_t grad_input);
int kwk_sort_pool_addr(int dtype, uintptr_t src, int64_t batch, int64_t nodes, int64_t c,
                       uintptr_t count, int64_t k, uintptr_t out, uintptr_t index);
int kwk_sort_pool_backward_addr(int dtype, uintptr_t grad, uintptr_t x, uintptr_t index,
                                uintptr_t output, int64_t batch, int64_t nodes, int64_t c,
                                int64_t k, uintptr_t grad_input);
int kwk_topk_dense_addr(int dtype, uintptr_t src, int64_t rows, int64_t len, int64_t k,
                        int mode, double fill, uintptr_t out, uintptr_t mask, uintptr_t kept);
int kwk_topk_dense_backward_addr(int dtype, uintptr_t grad, uintptr_t kept, int64_t rows,
                                 int64_t len, int64_t k, uintptr_t out);
int kwk_filter_below_addr(int dtype, uintptr_t key, uintptr_t src, int64_t rows, int64_t len,
                          uintptr_t cutoff, double fill, uintptr_t out, uintptr_t mask);
int kwk_softmax_f32_addr(uintptr_t x, int64_t rows, int64_t n, int lanes, uintptr_t out);
int kwk_renormalize_f32_addr(uintptr_t w, int64_t rows, int64_t k);
int kwk_router_top1_f32_addr(uintptr_t x, int64_t rows, int64_t n, uintptr_t ids, uintptr_t unsettled);
int kwk_router_backward_f32_addr(uintptr_t p, uintptr_t ids, uintptr_t g, int64_t rows, int64_t n,
                                 int64_t k, int renormalize, int lanes, uintptr_t gx);
int64_t kwk_unique_runs_addr(int dtype, uintptr_t values, int64_t n, uintptr_t perm,
                             uintptr_t inverse);
int kwk_unique_fill_addr(int dtype, uintptr_t values, int64_t n, int64_t runs, uintptr_t out,
                         uintptr_t counts);
int kwk_unique_order_matters_addr(int dtype, uintptr_t values, int64_t n);
int kwk_unique_torch_zero_addr(int dtype, uintptr_t values, int64_t n, uintptr_t out,
                               int64_t runs);
int64_t kwk_unique_hash_addr(int dtype, uintptr_t values, int64_t n, int64_t limit,
                             uintptr_t distinct, uintptr_t counts, uintptr_t slots,
                             int merge_zeros);
int kwk_unique_remap_addr(uintptr_t slots, int64_t n, uintptr_t rank, int64_t u);
int64_t kwk_unique_dense_addr(int dtype, uintptr_t values, int64_t n, int64_t room,
                              uintptr_t out, uintptr_t counts, uintptr_t inverse);
int64_t kwk_advise_fresh_output_addr(uintptr_t p, int64_t bytes);
"""

ADDRESS_ADAPTERS_SOURCE = """
#include "kwker.h"
#define P(a) ((void *)(a))
int kwk_sort_addr(int dtype, uintptr_t src, int64_t outer, int64_t len, int64_t inner,
                  int64_t src_so, int64_t src_sl, int64_t src_si, uintptr_t values,
                  uintptr_t indices, int64_t dst_so, int64_t dst_sl, int64_t dst_si,
                  int descending, int order)
{
    return kwk_sort(dtype, P(src), outer, len, inner, src_so, src_sl, src_si, P(values),
                    (int64_t *)P(indices), dst_so, dst_sl, dst_si, descending, order);
}
int kwk_topk_addr(int dtype, uintptr_t src, int64_t outer, int64_t len, int64_t inner,
                  int64_t src_so, int64_t src_sl, int64_t src_si, int64_t k,
                  uintptr_t values, uintptr_t indices, int64_t dst_so, int64_t dst_sl,
                  int64_t dst_si, int largest, int sorted, int order)
{
    return kwk_topk(dtype, P(src), outer, len, inner, src_so, src_sl, src_si, k, P(values),
                    (int64_t *)P(indices), dst_so, dst_sl, dst_si, largest, sorted, order);
}
int kwk_median_dim_addr(int dtype, uintptr_t src, int64_t outer, int64_t len,
                        int64_t inner, int64_t src_so, int64_t src_sl, int64_t src_si,
                        uintptr_t values, uintptr_t indices, int64_t dst_so,
                        int64_t dst_si, int ignore_nan)
{
    return kwk_median_dim(dtype, P(src), outer, len, inner, src_so, src_sl, src_si,
                          P(values), (int64_t *)P(indices), dst_so, dst_si, ignore_nan);
}
int kwk_median_all_addr(int dtype, uintptr_t src, int64_t n, int64_t stride,
                        uintptr_t value, int ignore_nan)
{
    return kwk_median_all(dtype, P(src), n, stride, P(value), ignore_nan);
}
int kwk_kthvalue_addr(int dtype, uintptr_t src, int64_t outer, int64_t len, int64_t inner,
                      int64_t src_so, int64_t src_sl, int64_t src_si, int64_t k,
                      uintptr_t values, uintptr_t indices, int64_t dst_so, int64_t dst_si,
                      int order)
{
    return kwk_kthvalue(dtype, P(src), outer, len, inner, src_so, src_sl, src_si, k,
                        P(values), (int64_t *)P(indices), dst_so, dst_si, order);
}
int kwk_quantile_addr(int dtype, uintptr_t src, int64_t outer, int64_t len, int64_t inner,
                      int64_t src_so, int64_t src_sl, int64_t src_si, uintptr_t q,
                      int64_t nq, uintptr_t out, int64_t dst_sq, int64_t dst_so,
                      int64_t dst_si, int interpolation, int ignore_nan)
{
    return kwk_quantile(dtype, P(src), outer, len, inner, src_so, src_sl, src_si,
                        (const double *)P(q), nq, P(out), dst_sq, dst_so, dst_si,
                        interpolation, ignore_nan);
}
int kwk_median_pool2d_addr(int dtype, uintptr_t src, int64_t planes, int64_t h, int64_t w,
                           uintptr_t geometry, int mode, uintptr_t out, uintptr_t index)
{
    return kwk_median_pool2d(dtype, P(src), planes, h, w, (const int64_t *)P(geometry), mode,
                             P(out), (int64_t *)P(index));
}
int kwk_median_pool2d_backward_addr(int dtype, uintptr_t grad, uintptr_t index,
                                    int64_t planes, int64_t h, int64_t w,
                                    uintptr_t geometry, int mode, uintptr_t grad_input)
{
    return kwk_median_pool2d_backward(dtype, P(grad), (const int64_t *)P(index), planes, h, w,
                                      (const int64_t *)P(geometry), mode, P(grad_input));
}
int kwk_sparse_simplex_addr(int dtype, int mode, uintptr_t src, int64_t rows, int64_t len,
                            uintptr_t out, uintptr_t support, uintptr_t stats)
{
    return kwk_sparse_simplex(dtype, mode, P(src), rows, len, P(out), (int64_t *)P(support),
                              P(stats));
}
int kwk_sparsemax_backward_addr(int dtype, int phase, uintptr_t grad, uintptr_t y,
                                int64_t rows, int64_t len, uintptr_t masked, uintptr_t v)
{
    return kwk_sparsemax_backward(dtype, phase, P(grad), P(y), rows, len, P(masked), P(v));
}
int kwk_entmax15_backward_addr(int dtype, int phase, uintptr_t grad, uintptr_t y,
                               int64_t rows, int64_t len, uintptr_t a, uintptr_t b, uintptr_t q)
{
    return kwk_entmax15_backward(dtype, phase, P(grad), P(y), rows, len, P(a), P(b), P(q));
}
int kwk_group_sort_addr(int dtype, uintptr_t src, int64_t groups, int64_t g, int descending,
                        uintptr_t out, uintptr_t perm)
{
    return kwk_group_sort(dtype, P(src), groups, g, descending, P(out), (uint8_t *)P(perm));
}
int kwk_group_sort_backward_addr(int dtype, uintptr_t grad, uintptr_t perm, int64_t groups,
                                 int64_t g, uintptr_t grad_input)
{
    return kwk_group_sort_backward(dtype, P(grad), (const uint8_t *)P(perm), groups, g,
                                   P(grad_input));
}
int kwk_sort_pool_addr(int dtype, uintptr_t src, int64_t batch, int64_t nodes, int64_t c,
                       uintptr_t count, int64_t k, uintptr_t out, uintptr_t index)
{
    return kwk_sort_pool(dtype, P(src), batch, nodes, c, (const int64_t *)P(count), k, P(out),
                         (int64_t *)P(index));
}
int kwk_sort_pool_backward_addr(int dtype, uintptr_t grad, uintptr_t x, uintptr_t index,
                                uintptr_t output, int64_t batch, int64_t nodes, int64_t c,
                                int64_t k, uintptr_t grad_input)
{
    return kwk_sort_pool_backward(dtype, P(grad), P(x), (const int64_t *)P(index), P(output),
                                  batch, nodes, c, k, P(grad_input));
}
int kwk_topk_dense_addr(int dtype, uintptr_t src, int64_t rows, int64_t len, int64_t k,
                        int mode, double fill, uintptr_t out, uintptr_t mask, uintptr_t kept)
{
    return kwk_topk_dense(dtype, P(src), rows, len, k, mode, fill, P(out), (uint8_t *)P(mask),
                          (int64_t *)P(kept));
}
int kwk_topk_dense_backward_addr(int dtype, uintptr_t grad, uintptr_t kept, int64_t rows,
                                 int64_t len, int64_t k, uintptr_t out)
{
    return kwk_topk_dense_backward(dtype, P(grad), (const int64_t *)P(kept), rows, len, k,
                                   P(out));
}
int kwk_filter_below_addr(int dtype, uintptr_t key, uintptr_t src, int64_t rows, int64_t len,
                          uintptr_t cutoff, double fill, uintptr_t out, uintptr_t mask)
{
    return kwk_filter_below(dtype, P(key), P(src), rows, len, P(cutoff), fill, P(out),
                            (uint8_t *)P(mask));
}
int kwk_softmax_f32_addr(uintptr_t x, int64_t rows, int64_t n, int lanes, uintptr_t out)
{
    return kwk_softmax_f32((const float *)P(x), rows, n, lanes, (float *)P(out));
}
int kwk_renormalize_f32_addr(uintptr_t w, int64_t rows, int64_t k)
{
    return kwk_renormalize_f32((float *)P(w), rows, k);
}
int kwk_router_top1_f32_addr(uintptr_t x, int64_t rows, int64_t n, uintptr_t ids, uintptr_t unsettled)
{
    return kwk_router_top1_f32((const float *)P(x), rows, n, (int64_t *)P(ids), (int64_t *)P(unsettled));
}
int kwk_router_backward_f32_addr(uintptr_t p, uintptr_t ids, uintptr_t g, int64_t rows, int64_t n,
                                 int64_t k, int renormalize, int lanes, uintptr_t gx)
{
    return kwk_router_backward_f32((const float *)P(p), (const int64_t *)P(ids),
                                   (const float *)P(g), rows, n, k, renormalize, lanes,
                                   (float *)P(gx));
}
/* 2 * runs + order_shows (kwker.h kwk_unique_runs), or a negative status */
int64_t kwk_unique_runs_addr(int dtype, uintptr_t values, int64_t n, uintptr_t perm,
                             uintptr_t inverse)
{
    int64_t runs = 0;
    int shows = 0;
    const int status = kwk_unique_runs(dtype, P(values), n, (const int64_t *)P(perm),
                                       (int64_t *)P(inverse), &runs, &shows);
    return status != KWK_OK ? status : 2 * runs + shows;
}
int kwk_unique_order_matters_addr(int dtype, uintptr_t values, int64_t n)
{
    return kwk_unique_order_matters(dtype, P(values), n);
}
int kwk_unique_torch_zero_addr(int dtype, uintptr_t values, int64_t n, uintptr_t out,
                               int64_t runs)
{
    return kwk_unique_torch_zero(dtype, P(values), n, P(out), runs);
}
int kwk_unique_fill_addr(int dtype, uintptr_t values, int64_t n, int64_t runs, uintptr_t out,
                         uintptr_t counts)
{
    return kwk_unique_fill(dtype, P(values), n, runs, P(out), (int64_t *)P(counts));
}
/* 2u when the hash pass found u distinct values, 1 when it deferred, else
 * the (negative) status */
/* (merge_zeros: kwk_unique_hash_zeros) */
int64_t kwk_unique_hash_addr(int dtype, uintptr_t values, int64_t n, int64_t limit,
                             uintptr_t distinct, uintptr_t counts, uintptr_t slots,
                             int merge_zeros)
{
    int64_t u = 0;
    const int status = (merge_zeros ? kwk_unique_hash_zeros : kwk_unique_hash)(
        dtype, P(values), n, limit, P(distinct), (int64_t *)P(counts), (int64_t *)P(slots), &u);
    return status == KWK_OK ? 2 * u : status == KWK_DEFER ? 1 : status;
}
/* 2u when the bitmap pass found u distinct values, 1 when it deferred, else
 * the (negative) status */
int64_t kwk_unique_dense_addr(int dtype, uintptr_t values, int64_t n, int64_t room,
                              uintptr_t out, uintptr_t counts, uintptr_t inverse)
{
    int64_t u = 0;
    const int status = kwk_unique_dense(dtype, P(values), n, room, P(out), (int64_t *)P(counts),
                                        (int64_t *)P(inverse), &u);
    return status == KWK_OK ? 2 * u : status == KWK_DEFER ? 1 : status;
}
int kwk_unique_remap_addr(uintptr_t slots, int64_t n, uintptr_t rank, int64_t u)
{
    return kwk_unique_remap((int64_t *)P(slots), n, (const int64_t *)P(rank), u);
}
int64_t kwk_advise_fresh_output_addr(uintptr_t p, int64_t bytes)
{
    return kwk_advise_fresh_output(P(p), bytes);
}
"""

ffibuilder = FFI()
ffibuilder.cdef(header_declarations() + ADDRESS_ADAPTERS_CDEF)
ffibuilder.set_source(
    "kwker._kwker_native",
    ADDRESS_ADAPTERS_SOURCE,
    sources=[os.path.relpath(os.path.join(HERE, s)) for s in SOURCES],
    # the kernels are headers: without this, setuptools rebuilds only when a
    # .c file changes, and an in-place build keeps stale objects
    depends=sorted(os.path.relpath(p) for p in
                   glob.glob(os.path.join(HERE, "src", "**", "*.h"), recursive=True)
                   + glob.glob(os.path.join(INCLUDE, "*.h"))),
    include_dirs=[os.path.relpath(INCLUDE)],
    extra_compile_args=compile_args(),
    extra_link_args=link_args(),
    libraries=["m"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
