"""Calling the native library with tensors."""
import torch

from kwker import _native
from kwker.ops.rows import rows_along

lib = _native.lib
CODES = _native.DTYPE_CODES


def contiguous_rows(shape, dim: int):
    """The rows of a contiguous tensor of this shape along dim."""
    outer = 1
    for size in shape[:dim]:
        outer *= size
    inner = 1
    for size in shape[dim + 1:]:
        inner *= size
    length = shape[dim]
    step = length * inner
    # no rows at all when a row is empty (the kernels see outer == 0)
    return outer if step else 0, length, inner, step, inner, 1


def source_rows(x: torch.Tensor, dim: int):
    """(tensor, rows) to read along dim: x itself, or a contiguous copy when
    its layout cannot be walked as rows.  Contiguous inputs (the common
    case) skip the general stride analysis."""
    if x.is_contiguous():
        return x, contiguous_rows(x.shape, dim)
    rows = rows_along(x.shape, x.stride(), dim)
    if rows is None:
        x = x.contiguous()
        return x, contiguous_rows(x.shape, dim)
    return x, rows
