"""Calling the native library with tensors."""
import torch

from kwker import _native
from kwker.ops.rows import rows_along

lib = _native.lib
CODES = _native.DTYPE_CODES


def source_rows(x: torch.Tensor, dim: int):
    """(tensor, rows) to read along dim: x itself, or a contiguous copy when
    its layout cannot be walked as rows.  Contiguous inputs (the common
    case) skip the general stride analysis."""
    shape = x.shape
    if x.is_contiguous():
        length = shape[dim]
        inner = 1
        for size in shape[dim + 1:]:
            inner *= size
        step = length * inner
        return x, (x.numel() // step if step else 0, length, inner, step, inner, 1)
    rows = rows_along(shape, x.stride(), dim)
    if rows is None:
        x = x.contiguous()
        return source_rows(x, dim)
    return x, rows
