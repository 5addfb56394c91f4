"""sort, argsort, msort on the native kernels."""
import torch

from kwker import _native
from kwker.ops._call import CODES, lib, source_rows
from kwker.ops.rows import rows_along

_INT64 = torch.int64


def sort(x: torch.Tensor, dim: int, descending: bool, order: int, want_values: bool = True):
    """(values, indices) as torch.sort gives them: outputs laid out like
    torch.empty_like(x), values with their original bits.  With
    want_values=False, values is None (argsort)."""
    values = torch.empty_like(x) if want_values else None
    indices = torch.empty_like(x, dtype=_INT64)
    src, rows = source_rows(x, dim)
    dst_rows = rows_along(indices.shape, indices.stride(), dim)
    if dst_rows is None:
        # empty_like keeps a dense permuted layout that we cannot walk as
        # rows: fill contiguous outputs and copy them into place
        v, i = sort(x.contiguous(), dim, descending, order, want_values)
        if want_values:
            values.copy_(v)
        indices.copy_(i)
        return values, indices
    outer, length, inner, so, sl, si = rows
    status = lib.kwk_sort_addr(
        CODES[x.dtype], src.data_ptr(), outer, length, inner, so, sl, si,
        values.data_ptr() if want_values else 0, indices.data_ptr(),
        dst_rows[3], dst_rows[4], dst_rows[5], descending, order)
    if status:
        _native.check(status, "sort")
    return values, indices
