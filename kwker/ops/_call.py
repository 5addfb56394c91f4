"""Calling the native library with tensors."""
import math

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


def select_rows(x: torch.Tensor, dim: int):
    """source_rows for the selection kernels (topk, kthvalue, median,
    quantile), which walk one row at a time: long rows whose elements lie in
    cache lines that evict each other are read from a copy with `dim` moved
    last (_rows_thrash).  The copy is at most the input's size, and a row's
    positions, hence the answer (ties included), are the same in it."""
    src, rows = source_rows(x, dim)
    outer, length, inner, so, sl, si = rows
    if sl != 1 and outer * inner > 1 and _rows_thrash(length, sl * x.element_size()):
        return x.movedim(dim, -1).contiguous(), (outer, length, inner, inner * length, 1, length)
    return src, rows


# A cache assumed for _rows_thrash: 2048 sets of 16 lines of 64 bytes (a
# 2 MB L2; most x86 L2s have no more sets).
_SETS, _WAYS, _LINE = 2048, 16, 64
# Rows up to this long keep their place: the kernels' short-row paths read
# neighbouring rows together (measured 0.85-1.0x staged at 200 x 8192).
SELECT_STAGE_MIN_LEN = 256


def _rows_thrash(length: int, stride: int) -> bool:
    """Whether a row of `length` elements `stride` bytes apart overflows the
    cache sets its lines map to (its neighbouring rows, which share the
    lines, then miss them again).  A stride of a multiple of 64 bytes maps a
    row to SETS / gcd(stride / 64, SETS) sets; powers of two (dims of 256,
    512, 1024 ...) to few of them; other strides spread a row over all the
    sets.  Measured (float32, along dim 0, median / topk k=5 / kthvalue /
    quantile, staged against in place): 1000 x 1024 4.0 / 4.9 / 2.8 /
    2.6x, 512 x 1024 1.4 / 1.9 / 1.2 / 1.2x, 700 x 2048 3.1 / 3.8 / 2.1 /
    2.1x, 8192 x 64 2.0 / 2.5 / 1.6 / 1.7x, 20000 x 1000 3.5 / 3.8 / 3.1 /
    2.9x; but shorter rows of strides that spread over the sets lose to the
    copy (1000 x 1000 0.73 / 0.69 / 0.85 / 0.84x, 512 x 500 float64
    0.5-0.8x), and so do rows that fit (256 x 1024 0.8-1.05x)."""
    if length <= SELECT_STAGE_MIN_LEN or stride < _LINE:
        return False
    sets = _SETS // math.gcd(stride // _LINE, _SETS) if stride % _LINE == 0 else _SETS
    return 2 * length > sets * _WAYS


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
