"""quantile and nanquantile on the native selection kernel."""
from functools import partial
from typing import Optional, Sequence

import torch

from kwker import _native
from kwker.ops._call import CODES, lib, select_rows, source_rows
from kwker.ops.parallel import run_rows

_quantile = lib.kwk_quantile_addr if lib is not None else None
_DEFER = lib.KWK_DEFER if lib is not None else 1

INTERPOLATION = {"linear": 0, "lower": 1, "higher": 2, "midpoint": 3, "nearest": 4}


def _block(code, es, src, q, nq, out, rows, mode, ignore_nan, o0, o1, i0, i1):
    """The rows o0 <= o < o1, i0 <= i < i1 (a block for parallel.run_rows);
    out is laid out [rows..., q]."""
    _, length, inner, so, sl, si = rows
    return _quantile(code, src + (o0 * so + i0 * si) * es, o1 - o0, length, i1 - i0, so, sl, si,
                     q, nq, out + (o0 * inner + i0) * nq * es, 1, inner * nq, nq, mode,
                     ignore_nan)


def quantile(x: torch.Tensor, q: torch.Tensor, q_is_vector: bool, dim: Optional[int],
             keepdim: bool, interpolation: str, ignore_nan: bool) -> Optional[torch.Tensor]:
    """torch.quantile / torch.nanquantile, or None when the exact answer
    depends on the order torch's sort gives equal keys of different bits
    (the caller then asks torch).

    q: the probabilities as a 1-D float64 tensor (values already in the
    input's precision, all in [0, 1]); q_is_vector: whether the result has
    a leading q dimension.  x is non-empty, float32 or float64."""
    if dim is None:
        reduced: Sequence[int] = [1] * x.ndim if keepdim else []
        if x.is_contiguous():  # one row of all elements, read in place
            numel = x.numel()
            src, rows = x, (1, numel, 1, numel, 1, 1)
        else:
            src, rows = source_rows(x.reshape(-1), 0)
    else:
        reduced = list(x.shape)
        if keepdim:
            reduced[dim] = 1
        else:
            del reduced[dim]
        src, rows = select_rows(x, dim)
    outer, length, inner = rows[:3]
    nq = q.shape[0]
    # torch computes [rows..., q] and moves q to the front (a permuted
    # view): the same layout keeps strides identical to torch's
    out = torch.empty(size=list(reduced) + [nq], dtype=x.dtype)  # (cheaper than new_empty)
    status = run_rows(partial(_block, CODES[x.dtype], x.element_size(), src.data_ptr(),
                              q.data_ptr(), nq, out.data_ptr(), rows,
                              INTERPOLATION[interpolation], ignore_nan),
                      outer, inner, outer * length * inner)
    if status == _DEFER:
        return None
    if status:
        _native.check(status, "quantile")
    return out.movedim(-1, 0) if q_is_vector else out.squeeze(-1)
