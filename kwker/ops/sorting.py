"""sort, argsort, msort on the native kernels."""
from functools import partial

import torch

from kwker import _native
from kwker.ops._call import (CODES, HUGE_OUTPUT_BYTES, advise_fresh, contiguous_rows, lib,
                             source_rows)
from kwker.ops import parallel
from kwker.ops.parallel import run_rows
from kwker.ops.rows import rows_along

_INT64 = torch.int64
_empty_like = torch.empty_like
_sort = lib.kwk_sort_addr if lib is not None else None


def _sort_block(code, es, src, values, indices, length, src_strides, dst_strides,
                descending, order, o0, o1, i0, i1):
    """kwk_sort on the rows o0 <= o < o1, i0 <= i < i1 (a block for
    parallel.run_rows; no values / indices when their address is 0)."""
    so, sl, si = src_strides
    dso, dsl, dsi = dst_strides
    d = o0 * dso + i0 * dsi
    return _sort(code, src + (o0 * so + i0 * si) * es, o1 - o0, length, i1 - i0, so, sl, si,
                 values + d * es if values else 0, indices + d * 8 if indices else 0,
                 dso, dsl, dsi, descending, order)


def sort(x: torch.Tensor, dim: int, descending: bool, order: int, want_values: bool = True,
         want_indices: bool = True):
    """(values, indices) as torch.sort gives them: outputs laid out like
    torch.empty_like(x), values with their original bits.  With
    want_values=False, values is None (argsort); with want_indices=False,
    indices is None (msort: the kernel then skips all index work where it
    can)."""
    values = _empty_like(x) if want_values else None
    indices = _empty_like(x, dtype=_INT64) if want_indices else None
    out = values if values is not None else indices
    if x.is_contiguous():
        src = x
        rows = dst_rows = contiguous_rows(x, dim)  # so is empty_like(x)
    else:
        src, rows = source_rows(x, dim)
        dst_rows = rows_along(out.shape, out.stride(), dim)
        if dst_rows is None:
            # empty_like kept a dense permuted layout that cannot be walked
            # as rows: fill contiguous outputs and copy them into place
            v, i = sort(x.contiguous(), dim, descending, order, want_values, want_indices)
            if want_values:
                values.copy_(v)
            if want_indices:
                indices.copy_(i)
            return values, indices
    outer, length, inner, so, sl, si = rows
    dso, dsl, dsi = dst_rows[3], dst_rows[4], dst_rows[5]
    numel = outer * length * inner
    if numel * 8 >= HUGE_OUTPUT_BYTES:  # int64 indices: the larger output
        advise_fresh(values, indices)
    if numel < parallel.SPLIT_MIN:  # the common case, without the closure below
        status = _sort(CODES[x.dtype], src.data_ptr(), outer, length, inner, so, sl, si,
                       values.data_ptr() if want_values else 0,
                       indices.data_ptr() if want_indices else 0,
                       dso, dsl, dsi, descending, order)
    else:
        status = run_rows(partial(
            _sort_block, CODES[x.dtype], x.element_size(), src.data_ptr(),
            values.data_ptr() if want_values else 0,
            indices.data_ptr() if want_indices else 0, length,
            (so, sl, si), (dso, dsl, dsi), descending, order), outer, inner, numel, "sort")
    if status:
        _native.check(status, "sort")
    return values, indices
