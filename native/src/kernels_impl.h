/*
 * kernels_impl.h - the kernels, compiled once per CPU target.
 *
 * Included by targets/<target>.c, which defines KWK_TABLE (the exported
 * table's name) and the instruction set.  Everything here is static, so each
 * target gets its own copy built with its own flags.
 *
 * Per row: gather order keys from the (possibly strided) source into a
 * contiguous workspace, order them as unique words (order_words.h), and
 * write values (original bits, gathered by index) and int64 indices.  Rows
 * whose result depends on how torch orders equal elements are redone with
 * the emulation in torch_order.h when the caller asks for KWK_ORDER_TORCH.
 */
#include "sort_kernels.h"
#include "select_kernels.h"
#include "kthvalue_kernels.h"
#include "quantile_kernels.h"
#include "median_pool_kernels.h"
#include "sparse_kernels.h"
#include "topk_layer_kernels.h"
#include "softmax_torch.h"
#include "median_columns.h"
#include "batch_median.h"
#include "unique_runs.h"
#include "unique_hash.h"
#include "unique_dense.h"

/* median_dim: many short float32 rows along a non-last dim take the
 * sixteen-rows kernel on AVX-512 (batch_median.h bm_f32_columns_median),
 * else the eight-rows-at-once one (median_columns.h), other batches of short rows
 * the batch sort's network (batch_median.h), the rest the per-row one. */
static int impl_median_dim_any(int dtype, const void *src, int64_t outer, int64_t len,
                               int64_t inner, int64_t src_so, int64_t src_sl, int64_t src_si,
                               void *values, int64_t *indices, int64_t dst_so, int64_t dst_si,
                               int ignore_nan)
{
#if defined(__AVX512F__) && defined(KWK_HAVE_BATCH_SORT)
    if (bm_f32_columns_applies(dtype, len, inner, src_si, dst_si, values, indices))
        return bm_f32_columns_median((const float *)src, outer, len, inner, src_so, src_sl,
                                     (float *)values, indices, dst_so, ignore_nan);
#endif
    if (mc_applies(dtype, len, inner, src_si, dst_si, values, indices))
        return mc_median_dim(src, outer, len, inner, src_so, src_sl, values, indices, dst_so,
                             ignore_nan);
#if defined(KWK_HAVE_BATCH_SORT)
    /* other short rows (along the last dim, any dtype with keys of at most
     * 32 bits): sorted eight at a time (batch_median.h) */
    if (bm_applies(dtype, len, outer * inner)) {
        const int status = bm_median_dim(dtype, src, outer, len, inner, src_so, src_sl, src_si,
                                         values, indices, dst_so, dst_si, ignore_nan);
        if (status != KWK_E_NOMEM) return status;
    }
#endif
    return impl_median_dim(dtype, src, outer, len, inner, src_so, src_sl, src_si, values,
                           indices, dst_so, dst_si, ignore_nan);
}

const kwk_kernel_table KWK_TABLE = {
    KWK_TARGET_NAME, impl_sort, impl_topk_probed, impl_median_dim_any, impl_median_all, impl_kthvalue,
    impl_quantile, impl_median_pool2d, impl_median_pool2d_backward,
    impl_sparse_simplex, impl_sparsemax_backward, impl_entmax15_backward, impl_group_sort, impl_group_sort_backward, impl_sort_pool,
    impl_sort_pool_backward,
    impl_topk_dense, impl_kept_grad, impl_filter_below, impl_softmax_f32, impl_router_backward_f32, impl_router_top1_f32, impl_unique_runs, impl_unique_order_matters, impl_unique_torch_zero,
    impl_unique_fill,
    impl_unique_hash, impl_unique_remap, impl_unique_dense,
};
