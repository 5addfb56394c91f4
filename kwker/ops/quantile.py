"""quantile and nanquantile on the native selection kernel."""
from typing import Optional, Sequence

import torch

from kwker import _native
from kwker.ops._call import CODES, lib, source_rows

_quantile = lib.kwk_quantile_addr if lib is not None else None
_DEFER = lib.KWK_DEFER if lib is not None else 1

INTERPOLATION = {"linear": 0, "lower": 1, "higher": 2, "midpoint": 3, "nearest": 4}


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
        src = x.reshape(-1)
        src, rows = source_rows(src, 0)
    else:
        reduced = list(x.shape)
        if keepdim:
            reduced[dim] = 1
        else:
            del reduced[dim]
        src, rows = source_rows(x, dim)
    outer, length, inner, so, sl, si = rows
    nq = q.shape[0]
    # torch computes [rows..., q] and moves q to the front (a permuted
    # view): the same layout keeps strides identical to torch's
    out = x.new_empty(list(reduced) + [nq])
    status = _quantile(CODES[x.dtype], src.data_ptr(), outer, length, inner, so, sl, si,
                       q.data_ptr(), nq, out.data_ptr(), 1, inner * nq, nq,
                       INTERPOLATION[interpolation], ignore_nan)
    if status == _DEFER:
        return None
    if status:
        _native.check(status, "quantile")
    return out.movedim(-1, 0) if q_is_vector else out.squeeze(-1)
