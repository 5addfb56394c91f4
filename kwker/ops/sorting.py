"""sort, argsort, msort on the native kernels."""
import torch

from kwker import _native
from kwker.ops._call import CODES, lib, source_rows
from kwker.ops.rows import rows_along

_INT64 = torch.int64
_empty_like = torch.empty_like
_sort = lib.kwk_sort_addr if lib is not None else None


def sort(x: torch.Tensor, dim: int, descending: bool, order: int, want_values: bool = True):
    """(values, indices) as torch.sort gives them: outputs laid out like
    torch.empty_like(x), values with their original bits.  With
    want_values=False, values is None (argsort)."""
    values = _empty_like(x) if want_values else None
    indices = _empty_like(x, dtype=_INT64)
    src, rows = source_rows(x, dim)
    if src is x and x.is_contiguous():
        dst_rows = rows  # empty_like of a contiguous tensor is contiguous
    else:
        dst_rows = rows_along(indices.shape, indices.stride(), dim)
        if dst_rows is None:
            # empty_like kept a dense permuted layout that cannot be walked
            # as rows: fill contiguous outputs and copy them into place
            v, i = sort(x.contiguous(), dim, descending, order, want_values)
            if want_values:
                values.copy_(v)
            indices.copy_(i)
            return values, indices
    outer, length, inner, so, sl, si = rows
    status = _sort(CODES[x.dtype], src.data_ptr(), outer, length, inner, so, sl, si,
                   values.data_ptr() if want_values else 0, indices.data_ptr(),
                   dst_rows[3], dst_rows[4], dst_rows[5], descending, order)
    if status:
        _native.check(status, "sort")
    return values, indices
