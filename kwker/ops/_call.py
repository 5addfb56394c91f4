"""Calling the native library with tensors."""
import torch

from kwker import _native
from kwker.ops.rows import rows_along

lib = _native.lib
CODES = _native.DTYPE_CODES


def source_rows(x: torch.Tensor, dim: int):
    """(tensor, rows) to read: x itself, or a contiguous copy when its layout
    cannot be walked as rows."""
    rows = rows_along(x.shape, x.stride(), dim)
    if rows is None:
        x = x.contiguous()
        rows = rows_along(x.shape, x.stride(), dim)
    return x, rows
