"""Calling the native library with tensors."""
import torch

from kwker import _native
from kwker.ops.rows import rows_along

lib = _native.lib
CODES = _native.DTYPE_CODES


def contiguous_rows(x: torch.Tensor, dim: int):
    """The rows of contiguous x along dim.  (Indexing x.shape: slicing a
    torch.Size makes another one, which cost more than the rest together.)"""
    shape = x.shape
    length = shape[dim]
    inner = 1
    for j in range(dim + 1, len(shape)):
        inner *= shape[j]
    step = length * inner
    # no rows at all when a row is empty (the kernels see outer == 0)
    return x.numel() // step if step else 0, length, inner, step, inner, 1


def source_rows(x: torch.Tensor, dim: int):
    """(tensor, rows) to read along dim: x itself, or a contiguous copy when
    its layout cannot be walked as rows.  Contiguous inputs (the common
    case) skip the general stride analysis."""
    if x.is_contiguous():
        return x, contiguous_rows(x, dim)
    rows = rows_along(x.shape, x.stride(), dim)
    if rows is None:
        x = x.contiguous()
        return x, contiguous_rows(x, dim)
    return x, rows
