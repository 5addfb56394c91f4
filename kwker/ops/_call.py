"""Calling the native library with tensors."""
import torch

from kwker import _native
from kwker.ops.rows import rows_along

lib = _native.lib
CODES = _native.DTYPE_CODES

# Outputs of at least this many bytes get huge-page advice before the kernel
# writes them (kwker.h: kwk_advise_fresh_output): their page faults would
# otherwise cost more than the kernel (600k sorted rows of 7: 30 -> 12.6 ms).
HUGE_OUTPUT_BYTES = 4 << 20
_advise = lib.kwk_advise_fresh_output_addr if lib is not None else None


def advise_fresh(*tensors: torch.Tensor) -> None:
    """Ask for huge pages behind large outputs that torch.empty just made
    (not yet written; None entries are skipped).  Callers test the size
    first where a call must stay cheap: this costs ~0.3 us per tensor."""
    for t in tensors:
        if t is not None:
            nbytes = t.numel() * t.element_size()
            if nbytes >= HUGE_OUTPUT_BYTES:
                _advise(t.data_ptr(), nbytes)


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
