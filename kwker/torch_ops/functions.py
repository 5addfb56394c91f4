"""torch.unique, torch.quantile and torch.nanquantile with torch's
signatures, composed from torch.ops.kwker operators and aten ops so that
they run under autograd, torch.compile (no graph break) and torch.export.

quantile follows aten's own composition step by step (sort the reduced dim,
ranks q*(n-1) in the input dtype, gather, torch.lerp), so its values are
torch's; the sort is kwker's stable one, which can only change which of two
equal values a gradient goes to and the sign of a zero result built from
-0.0 and +0.0.
"""
import numbers
from typing import Optional

import torch

from kwker.torch_ops.checks import check
from kwker.torch_ops.out import resize_output

_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """torch.unique: sorted unique values (always sorted, as torch on the
    CPU), with the inverse indices and counts when asked for.  NaNs are each
    their own entry; -0.0 and +0.0 merge, keeping the sign of the first in
    index order (torch keeps whichever its unstable sort put first)."""
    if dim is None:
        values, inverse, counts = torch.ops.kwker.unique(
            input, sorted, return_inverse, return_counts)
    else:
        values, inverse, counts = torch.ops.kwker.unique_dim(
            input, dim, sorted, return_inverse, return_counts)
    if return_inverse and return_counts:
        return values, inverse, counts
    if return_inverse:
        return values, inverse
    if return_counts:
        return values, counts
    return values


def _output_shape(x, q, dim: Optional[int], keepdim: bool, wrapped: int):
    """q's size first, then the reduced shape (aten's quantile_output_shape)."""
    if dim is not None and x.dim() > 0:
        shape = list(x.shape)
        if keepdim:
            shape[wrapped] = 1
        else:
            del shape[wrapped]
    elif keepdim:
        shape = [1] * x.dim()
    else:
        shape = []
    if q.dim() > 0:
        shape.insert(0, q.numel())
    return shape


def _quantile(x, q, dim, keepdim, interpolation, out, ignore_nan):
    if isinstance(q, numbers.Real) and not isinstance(q, bool):
        if not 0 <= q <= 1:
            raise RuntimeError(f"quantile() q must be in the range [0, 1] but got {q}")
        q = torch.scalar_tensor(q, dtype=x.dtype, device=x.device)
    if not x.numel() > 0:
        raise RuntimeError("quantile() input tensor must be non-empty")
    if not q.dim() <= 1:
        raise RuntimeError("quantile() q must be a scalar or 1D tensor")
    if x.dtype not in (torch.float32, torch.float64):
        raise RuntimeError("quantile() input tensor must be either float or double dtype")
    if q.dtype != x.dtype:
        raise RuntimeError("quantile() q tensor must be same dtype as the input tensor")
    if q.device != x.device:
        raise RuntimeError("quantile() q tensor must be on the same device as the input tensor")
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError("quantile() interpolation must be one of linear, lower, higher, "
                           f"midpoint or nearest. Got {interpolation}")
    if out is not None and out.dtype != x.dtype:
        raise RuntimeError("quantile() out tensor must be same dtype as the input tensor")
    nd = x.dim()
    wrapped = 0
    if dim is not None:
        span = max(nd, 1)
        if not -span <= dim < span:
            raise IndexError(f"Dimension out of range (expected to be in range of "
                             f"[{-span}, {span - 1}], but got {dim})")
        wrapped = dim % span
    if x.device.type == "cpu":
        # torch checks q's range on the CPU only (no device sync); an async
        # assert keeps compiled graphs free of a data-dependent branch
        torch._assert_async(q.ge(0).logical_and(q.le(1)).all(),
                            "quantile() q values must be in the range [0, 1]")

    shape = _output_shape(x, q, dim, keepdim, wrapped)
    sort_values = torch.ops.kwker.sort_values
    if dim is None:
        ordered = sort_values(x.flatten())
    elif wrapped == nd - 1:
        ordered = sort_values(x)
    else:
        ordered = sort_values(x.unsqueeze(-1).transpose(wrapped, -1))
    # q as 1-D for the computation; view as the reduced shape + the sorted dim
    work_shape = shape if q.dim() > 0 else [q.numel()] + shape
    ordered = ordered.reshape(work_shape[1:] + [ordered.shape[-1]])
    check(ordered.shape[-1] <= 2 ** 24, lambda: "quantile() input tensor is too large")

    if ignore_nan:
        # ranks over the non-NaN count; an all-NaN row gets rank 0 (NaN)
        ranks = q * (ordered.isnan().logical_not().sum(-1, True) - 1)
        ranks = ranks.masked_fill(ranks < 0, 0)
    else:
        # a row holding NaN is ranked last, so its quantile is NaN
        last = ordered.shape[-1] - 1
        ranks, has_nan = torch.broadcast_tensors(q * last, ordered.isnan().any(-1, True))
        ranks = ranks.masked_fill(has_nan, last)

    if interpolation == "lower":
        ranks = ranks.floor()
    elif interpolation == "higher":
        ranks = ranks.ceil()
    elif interpolation == "nearest":
        ranks = ranks.round()
    below = ranks.to(torch.int64)
    result = ordered.gather(-1, below)
    if interpolation in ("linear", "midpoint"):
        weights = (torch.full_like(ranks, 0.5) if interpolation == "midpoint"
                   else ranks - below)
        above = ordered.gather(-1, ranks.ceil().to(torch.int64))
        result = result.lerp(above, weights)

    if q.dim() == 0:
        result = result.squeeze(-1)
    else:
        result = result.unsqueeze(0).transpose(0, -1).squeeze(-1)
    if out is not None:
        resize_output(out, result.shape)
        return out.copy_(result)
    return result


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """torch.quantile with kwker's sort."""
    return _quantile(input, q, dim, keepdim, interpolation, out, ignore_nan=False)


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
    """torch.nanquantile with kwker's sort."""
    return _quantile(input, q, dim, keepdim, interpolation, out, ignore_nan=True)
