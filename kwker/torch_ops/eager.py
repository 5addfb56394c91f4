"""Eager kernels of torch.ops.kwker: Kwker's native kernels on the CPU, and
compositions of torch's own ops (sort with stable=True, then a slice or a
gather) for everything the native path does not take.

The rule every kernel follows: equal elements are ordered by index.  sort
and argsort equal torch.sort(stable=True); topk returns the first k of that
sort (descending when largest) and always in sorted order (sorted=False
allowed any order); kthvalue the element at stable rank k-1; median(dim) the
element at stable rank (n-1)//2, or the row's first NaN, which is what torch
itself returns (median over all elements returns no index); nanmedian(dim)
the lower median of a row's non-NaN elements, and for an all-NaN row its
first NaN, index 0 (torch returns whichever NaN its selection stops on).
NaN is the largest value.  Values are the input's elements at the returned
indices, bit for bit (NaN payloads, -0.0), in every op and dtype (torch's
bfloat16 topk alone returns canonical NaNs).

The CPU kernels go to the composition for what the native path does not
take (dtypes outside support.OPS, 0-dim and empty inputs, a dim or k out of
range, neg-bit views, the library not loaded, float inputs while the thread
flushes subnormals to zero: torch then orders them as zeros).  There torch's own op runs
first: it raises torch's error for bad arguments and dtypes, and its result
is kept where it cannot differ (0-dim and empty inputs).
"""
import torch

from kwker import _native, support
from kwker.ops import selection, sorting
from kwker.ops import unique as unique_ops

# torch's own functions, never kwker.install()'s wrappers around them
_VF = torch._C._VariableFunctions
_STABLE = _native.ORDER_STABLE
_LOADED = _native.available()
_FLUSHABLE = _native.FLUSHABLE_DTYPES
_denormals_flushed = _native.denormals_flushed
_SORTABLE = support.OPS["sort"].dtypes
_SELECTABLE = support.OPS["topk"].dtypes
_strided = torch.strided
_INT64 = torch.int64


def _native_rows(x, dim, dtypes):
    """x's dim, wrapped, when the native kernels can take x along it; else
    None."""
    dtype = x.dtype
    if not _LOADED or dtype not in dtypes or (dtype in _FLUSHABLE and _denormals_flushed()):
        return None
    nd = x.dim()
    if nd == 0 or not -nd <= dim < nd or x.numel() == 0:
        return None
    if x.layout is not _strided or x.is_neg() or x._is_zerotensor():
        return None
    return dim + nd if dim < 0 else dim


def _trivial(x):
    """torch's own result is kept for 0-dim and empty inputs: nothing to
    order there."""
    return x.dim() == 0 or x.numel() == 0


def _fresh(t):
    """A copy with contiguous strides, as the native kernels allocate
    (.contiguous() would keep odd strides of size-1 dims)."""
    return t.clone(memory_format=torch.contiguous_format)


_HALF = (torch.float16, torch.bfloat16)


def gather_bits(x, dim, index):
    """x.gather(dim, index) with every bit kept: torch 2.13's CPU gather
    converts float16/bfloat16 through float32, which changes NaN payloads,
    so those are gathered as int16."""
    if x.dtype in _HALF:
        return x.view(torch.int16).gather(dim, index).view(x.dtype)
    return x.gather(dim, index)


# ------------------------------------------------------------ compositions
# Device-generic: sort(stable=True) is the reference order on every device.

def sort_composite(x, dim=-1, descending=False):
    return _VF.sort(x, dim=dim, descending=descending, stable=True)


def topk_composite(x, k, dim=-1, largest=True, sorted=True):
    if x.dim() == 0:
        return _VF.topk(x, k, dim, largest, sorted)
    values, indices = _VF.sort(x, dim=dim, descending=largest, stable=True)
    return _fresh(values.narrow(dim, 0, k)), _fresh(indices.narrow(dim, 0, k))


def kthvalue_composite(x, k, dim=-1, keepdim=False):
    if x.dim() == 0:
        return _VF.kthvalue(x, k, dim, keepdim)
    values, indices = _VF.sort(x, dim=dim, stable=True)
    values, indices = values.narrow(dim, k - 1, 1), indices.narrow(dim, k - 1, 1)
    if not keepdim:
        values, indices = values.squeeze(dim), indices.squeeze(dim)
    return _fresh(values), _fresh(indices)


def median_dim_composite(x, dim, keepdim=False, ignore_nan=False):
    """The lower median at stable rank, the first NaN of a row holding one
    (median), or the lower median of the non-NaN elements (nanmedian; index
    0 for an all-NaN row, as torch)."""
    if x.dim() == 0:
        return (_VF.nanmedian if ignore_nan else _VF.median)(x, dim, keepdim)
    n = x.shape[dim]
    _, order = _VF.sort(x, dim=dim, stable=True)
    nan = torch.isnan(x)
    if ignore_nan:
        count = (~nan).sum(dim, keepdim=True)
        rank = ((count - 1) // 2).clamp_(min=0)
        index = order.gather(dim, rank)
    else:
        index = order.narrow(dim, (n - 1) // 2, 1)
        # argmax returns the first maximal position: the row's first NaN
        first_nan = nan.to(torch.uint8).argmax(dim, keepdim=True)
        index = torch.where(nan.any(dim, keepdim=True), first_nan, index)
    values = gather_bits(x, dim, index)
    if not keepdim:
        values, index = values.squeeze(dim), index.squeeze(dim)
    return _fresh(values), _fresh(index)


# --------------------------------------------------------------------- CPU

def sort_cpu(x, dim=-1, descending=False):
    d = _native_rows(x, dim, _SORTABLE)
    if d is None:
        return sort_composite(x, dim, descending)
    return sorting.sort(x, d, descending, _STABLE)


def sort_values_cpu(x, dim=-1, descending=False):
    d = _native_rows(x, dim, _SORTABLE)
    if d is None:
        return sort_composite(x, dim, descending)[0]
    return sorting.sort(x, d, descending, _STABLE, want_indices=False)[0]


def argsort_cpu(x, dim=-1, descending=False):
    d = _native_rows(x, dim, _SORTABLE)
    if d is None:
        return sort_composite(x, dim, descending)[1]
    return sorting.sort(x, d, descending, _STABLE, want_values=False)[1]


def topk_cpu(x, k, dim=-1, largest=True, sorted=True):
    d = _native_rows(x, dim, _SELECTABLE)
    if d is not None and 0 <= k <= x.shape[d]:
        # sorted=True always: one deterministic answer for both
        values, indices = selection.topk(x, k, d, largest, True, _STABLE)
        if x.dtype is torch.bfloat16:
            # the kernel returns NaNs as the canonical quiet NaN, as
            # torch.topk on bfloat16 does; kwker's values are the input's
            # elements bit for bit, as in every other op and dtype
            values = gather_bits(x, d, indices)
        return values, indices
    result = _VF.topk(x, k, dim, largest, sorted)  # torch's checks
    if _trivial(x):
        return result
    return topk_composite(x, k, dim, largest, sorted)


def kthvalue_cpu(x, k, dim=-1, keepdim=False):
    d = _native_rows(x, dim, _SELECTABLE)
    if d is not None and 1 <= k <= x.shape[d]:
        return selection.kthvalue(x, k, d, keepdim, _STABLE)
    result = _VF.kthvalue(x, k, dim, keepdim)
    if _trivial(x):
        return result
    return kthvalue_composite(x, k, dim, keepdim)


def _median_dim_cpu(x, dim, keepdim, ignore_nan):
    d = _native_rows(x, dim, _SELECTABLE)
    if d is not None:
        result = selection.median_dim(x, d, keepdim, ignore_nan)
    else:
        torch_median = _VF.nanmedian if ignore_nan else _VF.median
        # torch 2.13 answers wrongly on expanded inputs (SEMANTICS.md)
        source = x.contiguous() if 0 in x.stride() else x
        # torch's CPU median(dim) orders by (value, index): the same rule
        result = torch_median(source, dim, keepdim)
    if ignore_nan and x.is_floating_point() and x.dim() > 0:
        result = _all_nan_rows_first(x, dim, keepdim, *result)
    return result


def _all_nan_rows_first(x, dim, keepdim, values, indices):
    """nanmedian of an all-NaN row: its first NaN, index 0 (torch, and the
    native kernel that matches it, return the NaN its selection stops on).
    Only such rows give a NaN, so the output is all there is to check."""
    nan_rows = values.isnan()
    if not nan_rows.any():
        return values, indices
    first = x.narrow(dim, 0, 1)
    if not keepdim:
        first = first.squeeze(dim)
    # in place: both outputs are this call's own, and keep their layout
    torch.where(nan_rows, first, values, out=values)
    return values, indices.masked_fill_(nan_rows, 0)


def median_dim_cpu(x, dim, keepdim=False):
    return _median_dim_cpu(x, dim, keepdim, False)


def nanmedian_dim_cpu(x, dim, keepdim=False):
    return _median_dim_cpu(x, dim, keepdim, True)


def _median_all_cpu(x, ignore_nan):
    if _LOADED and x.dtype in _SELECTABLE and x.numel() > 0 and x.layout is _strided \
            and not x.is_neg() and not x._is_zerotensor():
        return selection.median_all(x, ignore_nan)
    # a value only: no tie order to keep
    return (_VF.nanmedian if ignore_nan else _VF.median)(x)


def median_all_cpu(x):
    return _median_all_cpu(x, False)


def nanmedian_all_cpu(x):
    return _median_all_cpu(x, True)


# --------------------------------------------------------- other devices

def median_dim_any(x, dim, keepdim=False):
    _VF.median(x, dim, keepdim)  # torch's checks (and errors)
    return median_dim_composite(x, dim, keepdim, False)


def nanmedian_dim_any(x, dim, keepdim=False):
    _VF.nanmedian(x, dim, keepdim)
    return median_dim_composite(x, dim, keepdim, True)


def topk_any(x, k, dim=-1, largest=True, sorted=True):
    _VF.topk(x, k, dim, largest, sorted)
    return topk_composite(x, k, dim, largest, sorted)


def kthvalue_any(x, k, dim=-1, keepdim=False):
    _VF.kthvalue(x, k, dim, keepdim)
    return kthvalue_composite(x, k, dim, keepdim)


# ------------------------------------------------------------------ unique

def unique_sorted(x, return_inverse, return_counts, sort):
    """torch._unique2's three outputs from a stable sort of the flattened
    input: each NaN its own entry (NaN != NaN), -0.0 and +0.0 merged with
    the sign of the first in index order; empty inverse/counts when not
    asked for, as torch."""
    flat = x.reshape(-1)
    n = flat.numel()
    values, order = sort(flat)
    starts = torch.ones(n, dtype=torch.bool, device=x.device)
    if n > 1:
        torch.ne(values[1:], values[:-1], out=starts[1:])
    unique_values = values[starts]
    inverse = x.new_empty((0,), dtype=_INT64)
    counts = x.new_empty((0,), dtype=_INT64)
    if return_inverse:
        group = starts.cumsum(0) - 1
        inverse = torch.empty_like(group).scatter_(0, order, group).view(x.shape)
    if return_counts:
        first = starts.nonzero().view(-1)
        ends = torch.cat([first[1:], first.new_full((1,), n)])
        counts = ends - first
    return unique_values, inverse, counts


def unique_cpu(x, sorted=True, return_inverse=False, return_counts=False):
    if _LOADED and x.dtype in _SORTABLE and x.layout is _strided and x.numel():
        # integers of a short range, or few distinct values: not sorted
        # (kwker.ops.unique)
        got = unique_ops.unique_without_sort(x, return_inverse, return_counts)
        if got is not None:
            values, inverse, counts = got
            empty = x.new_empty((0,), dtype=_INT64)
            return (values, inverse if return_inverse else empty,
                    counts if return_counts else empty.clone())
    return unique_sorted(x, return_inverse, return_counts, sort_cpu)


def unique_any(x, sorted=True, return_inverse=False, return_counts=False):
    return unique_sorted(x, return_inverse, return_counts, sort_composite)


def unique_dim_any(x, dim, sorted=True, return_inverse=False, return_counts=False):
    """torch's own unique(dim=): slices are distinct or equal as a whole, so
    only the bits of equal zeros and NaNs could depend on an order."""
    values, inverse, counts = torch.ops.aten.unique_dim.default(x, dim, sorted, True, True)
    if not return_inverse:
        inverse = x.new_empty((0,), dtype=_INT64)
    if not return_counts:  # a tensor of its own: outputs must not alias
        counts = x.new_empty((0,), dtype=_INT64)
    return values, inverse, counts


def unique_dim_cpu(x, dim, sorted=True, return_inverse=False, return_counts=False):
    """Integer slices packed into keys and sorted by Kwker (see
    kwker.ops.unique); everything else as torch computes it."""
    if _LOADED and x.layout is _strided and x.ndim and -x.ndim <= dim < x.ndim and x.numel():
        dim %= x.ndim
        plan = unique_ops.dim_plan(x, dim)
        if plan is not None:
            values, inverse, counts = unique_ops.unique_dim(x, dim, plan, True, True)
            if not return_inverse:
                inverse = x.new_empty((0,), dtype=_INT64)
            if not return_counts:
                counts = x.new_empty((0,), dtype=_INT64)
            return values, inverse, counts
    return unique_dim_any(x, dim, sorted, return_inverse, return_counts)


# op name -> (CPU kernel, kernel for every other device)
KERNELS = {
    "sort": (sort_cpu, sort_composite),
    "sort_values": (sort_values_cpu, lambda x, dim=-1, descending=False:
                    sort_composite(x, dim, descending)[0]),
    "argsort": (argsort_cpu, lambda x, dim=-1, descending=False:
                _VF.argsort(x, dim=dim, descending=descending, stable=True)),
    "topk": (topk_cpu, topk_any),
    "kthvalue": (kthvalue_cpu, kthvalue_any),
    "median": (median_all_cpu, _VF.median),
    "median.dim": (median_dim_cpu, median_dim_any),
    "nanmedian": (nanmedian_all_cpu, _VF.nanmedian),
    "nanmedian.dim": (nanmedian_dim_cpu, nanmedian_dim_any),
    "unique": (unique_cpu, unique_any),
    "unique_dim": (unique_dim_cpu, unique_dim_any),
}

# ops returning (values, indices)
PAIRS = frozenset({"sort", "topk", "kthvalue", "median.dim", "nanmedian.dim"})
