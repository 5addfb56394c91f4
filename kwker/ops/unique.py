"""torch.unique (flattened form) from the native sort.

torch sorts the flattened input (torch.sort, unstable) and compares
neighbours; so does this, with Kwker's sort and torch's vectorised
element-wise ops for the compaction.  Two things about torch's result depend
on how its unstable sort orders equal elements: the sign of a zero when
+0.0 and -0.0 both occur (they merge into one entry showing whichever came
first), and, for NaNs (never merged: one entry each), their payload order
when they differ or, with return_inverse, which NaN entry each NaN element
maps to.  Those inputs are sorted in torch's own order (KWK_ORDER_TORCH,
the emulation of its std::sort), which reproduces them exactly; all others
take the cheaper stable or values-only sort.
"""
from typing import Optional, Tuple

import torch

from kwker import _native
from kwker.ops import sorting
from kwker.ops._call import CODES, lib

_INT64 = torch.int64
_BITS = {2: torch.int16, 4: torch.int32, 8: torch.int64}
_sort = lib.kwk_sort_addr if lib is not None else None


def _sort_values(flat: torch.Tensor) -> torch.Tensor:
    """Sorted copy of a contiguous 1-D tensor (no index work)."""
    values = torch.empty_like(flat)
    n = flat.shape[0]
    status = _sort(CODES[flat.dtype], flat.data_ptr(), 1, n, 1, 0, 1, 0, values.data_ptr(), 0,
                   0, 1, 0, False, _native.ORDER_STABLE)
    if status:
        _native.check(status, "unique")
    return values


def _depends_on_tie_order(flat: torch.Tensor, return_inverse: bool) -> bool:
    nan = torch.isnan(flat)
    if nan.any():
        nans = flat[nan]
        if nans.shape[0] > 1:
            if return_inverse:
                return True
            bits = nans.view(_BITS[flat.element_size()])
            if not bool((bits == bits[0]).all()):
                return True
    zero = flat == 0
    if zero.any():
        signs = torch.signbit(flat[zero])
        if bool(signs.any()) and not bool(signs.all()):
            return True
    return False


def unique(x: torch.Tensor, return_inverse: bool, return_counts: bool
           ) -> Tuple[torch.Tensor, Optional[torch.Tensor], Optional[torch.Tensor]]:
    """(output, inverse or None, counts or None) as torch.unique gives them
    for dim=None (x non-empty)."""
    flat = x.reshape(-1)
    if not flat.is_contiguous():
        flat = flat.contiguous()
    n = flat.shape[0]
    if x.dtype.is_floating_point and _depends_on_tie_order(flat, return_inverse):
        values, perm = sorting.sort(flat, 0, False, _native.ORDER_TORCH)
    elif return_inverse:
        values, perm = sorting.sort(flat, 0, False, _native.ORDER_STABLE)
    else:
        values, perm = _sort_values(flat), None
    # an entry starts where a value differs from the one before (NaN != NaN:
    # every NaN its own entry, as in torch)
    starts = torch.empty(n, dtype=torch.bool)
    starts[0] = True
    torch.ne(values[1:], values[:-1], out=starts[1:])
    output = values[starts]
    inverse = counts = None
    if return_inverse:
        group = starts.cumsum(0)
        group -= 1
        inverse = torch.empty(n, dtype=_INT64).scatter_(0, perm, group).view(x.shape)
    if return_counts:
        first = starts.nonzero().squeeze(1)
        counts = torch.empty_like(first)
        torch.sub(first[1:], first[:-1], out=counts[:-1])
        counts[-1] = n - first[-1]
    return output, inverse, counts
