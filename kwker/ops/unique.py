"""torch.unique (flattened form) from the native sort.

torch sorts the flattened input (torch.sort, unstable) and compares
neighbours; so does this, with Kwker's sort and one native pass for the
compaction (native/src/unique_runs.h).  Two things about torch's result depend
on how its unstable sort orders equal elements: the sign of a zero when
+0.0 and -0.0 both occur (they merge into one entry showing whichever came
first), and, for NaNs (never merged: one entry each), their payload order
when they differ or, with return_inverse, which NaN entry each NaN element
maps to.  One native pass over the input (kwk_unique_order_matters) finds
such inputs.  Where only the zeros show (both signs, at most one NaN), any
sort or the hashing pass (which then merges the zeros) gives the rest, and
kwk_unique_torch_zero writes into the zero entry the zero torch's std::sort
puts first, found by following its introsort down to that zero alone (about
two passes over the input instead of the whole emulated sort).  Two NaNs
(and float64 zeros whose keys do not pack) are sorted in torch's own order
(KWK_ORDER_TORCH, the emulation of its std::sort) and so reproduced
exactly; all others take
the cheaper stable or values-only sort (the compaction checks the sorted
values again and falls back to torch's order if it ever sees such a pair).

Inputs of few distinct values (quantized scores, hashed ids) skip the sort
of all n elements: one hashing pass (native/src/unique_hash.h) finds the
distinct values, counts them and numbers each element's value; only those
are sorted, and the elements renumbered by their sorted order.
The pass refuses inputs where the order of equal elements could show (but
merges the two zeros when asked, see above), and
stops once it has seen more distinct values than hashing pays for (see
HASH_DISTINCT_DIVISOR), or more than three in four of the first 4096, 8192,
... elements distinct: those are sorted as above.

Integers and bools whose values lie in a range not much longer than the
input (labels, segment ids, node ids sampled from a graph, token ids of a
vocabulary), however many distinct values they hold, skip both: a bitmap of
the range (a count per value, for short ranges) gives the sorted distinct
values, each element's place among them and the counts in a few linear
passes (native/src/unique_dense.h); it is tried first and declines wider
ranges after a look at the first few thousand elements.
"""
from typing import Optional, Tuple

import torch

from kwker import _native
from kwker.ops import parallel, sorting
from kwker.ops._call import CODES, advise_fresh, lib

_INT64 = torch.int64
_sort = lib.kwk_sort_addr if lib is not None else None
_runs = lib.kwk_unique_runs_addr if lib is not None else None
_fill = lib.kwk_unique_fill_addr if lib is not None else None
_order_matters = lib.kwk_unique_order_matters_addr if lib is not None else None
_torch_zero = lib.kwk_unique_torch_zero_addr if lib is not None else None
_DEFER = lib.KWK_DEFER if lib is not None else 1
_hash = lib.kwk_unique_hash_addr if lib is not None else None
_remap = lib.kwk_unique_remap_addr if lib is not None else None
_dense = lib.kwk_unique_dense_addr if lib is not None else None
_arange = torch.arange

# The hashing pass gives up past n // HASH_DISTINCT_DIVISOR distinct values
# (then the input is sorted): a half when the sort would have to carry
# indices (return_inverse or return_counts), an eighth for the values alone
# (their sort is cheap: 2048 token ids of 883 distinct values were sorted
# faster than hashed); and past HASH_MAX_DISTINCT (the table then takes 4
# MiB: 16 bytes an entry, at most a quarter full; 65339 distinct 62-bit ids
# of 262144 with the inverse and counts were hashed as fast as sorted).
# Inputs under HASH_MIN_NUMEL elements (HASH_MIN_NUMEL_VALUES for the values
# alone) are always sorted: the extra native call and small sort cost more
# there.
HASH_DISTINCT_DIVISOR = 2
HASH_DISTINCT_DIVISOR_VALUES = 8
HASH_MAX_DISTINCT = 1 << 17
HASH_MIN_NUMEL = 256
HASH_MIN_NUMEL_VALUES = 4096
# The bitmap pass's dtypes (no -0.0, no NaN) and the inputs it is tried on.
_DENSE_DTYPES = frozenset({torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32,
                           torch.int64, torch.uint16, torch.uint32, torch.uint64})
DENSE_MIN_NUMEL = 256
# kwk_unique_order_matters: both zero signs occur (1), two NaNs do (2)
_ZEROS_ONLY = 1


def _sort_values(flat: torch.Tensor) -> torch.Tensor:
    """Sorted copy of a contiguous 1-D tensor (no index work); a long one
    on torch's threads inside the native call (parallel.run_rows), as
    msort's."""
    values = torch.empty_like(flat)
    n = flat.shape[0]
    advise_fresh(values)
    args = (CODES[flat.dtype], flat.data_ptr(), 1, n, 1, 0, 1, 0, values.data_ptr(), 0,
            0, 1, 0, False, _native.ORDER_STABLE)
    if n >= parallel.ROW_SPLIT_MIN:
        status = parallel.run_rows(lambda o0, o1, i0, i1: _sort(*args), 1, 1, n, "sort")
    else:
        status = _sort(*args)
    if status:
        _native.check(status, "unique")
    return values


def _flat(x: torch.Tensor) -> torch.Tensor:
    """x's elements as one contiguous row."""
    if x.ndim == 1 and x.is_contiguous():
        return x  # (a reshape costs 1 us)
    flat = x.reshape(-1)
    return flat if flat.is_contiguous() else flat.contiguous()


def _hash_may_pay(n: int, return_inverse: bool, return_counts: bool) -> bool:
    return n >= (HASH_MIN_NUMEL if return_inverse or return_counts else HASH_MIN_NUMEL_VALUES)


def unique_without_sort(x: torch.Tensor, return_inverse: bool, return_counts: bool,
                        most: Optional[int] = None):
    """unique() of x (non-empty) by the bitmap or the hashing pass alone, or
    None where both decline or would not pay: the result then depends on
    nobody's order of equal elements, so torch.ops.kwker.unique (stable
    order) serves it too.  `most`: a bound on x's distinct values, where the
    caller knows one (the room made for them)."""
    return _without_sort(_flat(x), x.shape, return_inverse, return_counts, most=most)


def _without_sort(flat, shape, return_inverse, return_counts, merge_zeros=False, most=None):
    n = flat.shape[0]
    dense = flat.dtype in _DENSE_DTYPES and n >= DENSE_MIN_NUMEL
    if not (dense or _hash_may_pay(n, return_inverse, return_counts)):
        return None
    # one set of outputs for both passes (the bitmap pass declines before
    # writing to them)
    room = n if dense else _hash_limit(n, return_inverse, return_counts)
    if most is not None:
        room = max(1, min(room, most))
    distinct = torch.empty(room, dtype=flat.dtype)
    counts = torch.empty(room, dtype=_INT64) if return_counts else None
    inverse = torch.empty(n, dtype=_INT64) if return_inverse else None
    advise_fresh(inverse)
    if dense:
        result = _unique_dense(flat, shape, distinct, counts, inverse)
        if result is not None or not _hash_may_pay(n, return_inverse, return_counts):
            return result
    return _unique_by_hash(flat, shape, distinct, counts, inverse, merge_zeros)


def unique(x: torch.Tensor, return_inverse: bool, return_counts: bool
           ) -> Tuple[torch.Tensor, Optional[torch.Tensor], Optional[torch.Tensor]]:
    """(output, inverse or None, counts or None) as torch.unique gives them
    for dim=None (x non-empty)."""
    flat = _flat(x)
    shows = 0
    if flat.dtype.is_floating_point:
        shows = _order_matters(CODES[flat.dtype], flat.data_ptr(), flat.shape[0])
        if shows < 0:
            _native.check(shows, "unique")
    # both zero signs (and at most one NaN): only the zero entry's sign
    # shows torch's order; the hash pass merges them and then any sort
    # serves, with torch's first zero written into that entry
    zeros_only = shows == _ZEROS_ONLY
    if shows == 0 or zeros_only:
        result = _without_sort(flat, x.shape, return_inverse, return_counts, zeros_only)
        if result is not None:
            return result
    if zeros_only:
        result = _sort_and_compact(flat, x.shape, return_inverse, return_counts, False,
                                   zeros_of=flat)
        if result is not None:
            return result
    # -0.0 and +0.0, or NaNs: torch's result shows its sort's order of equal
    # elements (the zero run's sign, which NaN comes first)
    result = _sort_and_compact(flat, x.shape, return_inverse, return_counts, bool(shows))
    if result is None:  # the compaction saw such a pair after all: torch's order
        result = _sort_and_compact(flat, x.shape, return_inverse, return_counts, True)
    return result


def _unique_dense(flat, shape, distinct, counts, inverse):
    """unique() through the bitmap of the values' range (integers and
    bools), or None where it declined (a range too wide for the input's
    length, or more distinct values than `distinct` and `counts` have room
    for)."""
    n = flat.shape[0]
    packed = _dense(CODES[flat.dtype], flat.data_ptr(), n, distinct.shape[0], distinct.data_ptr(),
                    counts.data_ptr() if counts is not None else 0,
                    inverse.data_ptr() if inverse is not None else 0)
    if packed < 0:
        _native.check(packed, "unique")
    if packed == 1:
        return None
    u = packed // 2
    if u < distinct.shape[0]:  # outputs of their own size, as torch's
        distinct = distinct[:u].clone()
        counts = counts[:u].clone() if counts is not None else None
    return distinct, inverse.view(shape) if inverse is not None else None, counts


def _hash_limit(n: int, return_inverse: bool, return_counts: bool) -> int:
    return min(n // (HASH_DISTINCT_DIVISOR if return_inverse or return_counts
                     else HASH_DISTINCT_DIVISOR_VALUES), HASH_MAX_DISTINCT)


def _unique_by_hash(flat, shape, distinct, counts, inverse, merge_zeros=False):
    """unique() through the hashing pass, or None where it declined (too
    many distinct values, or the sort's order of equal elements would show).
    `distinct` and `counts` have room for _hash_limit() values or more.
    merge_zeros: -0.0 and +0.0 are one value, given torch's sign here (the
    input holds both, and at most one NaN)."""
    n = flat.shape[0]
    return_inverse, return_counts = inverse is not None, counts is not None
    limit = min(_hash_limit(n, return_inverse, return_counts), distinct.shape[0])
    code = CODES[flat.dtype]
    packed = _hash(code, flat.data_ptr(), n, limit, distinct.data_ptr(),
                   counts.data_ptr() if return_counts else 0,
                   inverse.data_ptr() if return_inverse else 0, merge_zeros)
    if packed < 0:
        _native.check(packed, "unique")
    if packed == 1:
        return None
    u = packed // 2
    if not (return_inverse or return_counts):
        output = _sort_values(distinct[:u])
        if merge_zeros and not _torch_zero_into(code, flat, output):
            return None
        return output, None, None
    # distinct values: any sort's order is torch's
    output, perm = sorting.sort(distinct[:u], 0, False, _native.ORDER_STABLE)
    if merge_zeros and not _torch_zero_into(code, flat, output):
        return None
    if return_counts:
        # (index_select: advanced indexing cost 6x as much, 0.87 vs 0.14 ms
        # for 65339 counts)
        counts = counts.index_select(0, perm)
    if return_inverse:
        rank = torch.empty(u, dtype=_INT64).scatter_(0, perm, _arange(u))
        status = _remap(inverse.data_ptr(), n, rank.data_ptr(), u)
        if status:
            _native.check(status, "unique")
        inverse = inverse.view(shape)
    return output, inverse, counts


def _torch_zero_into(code, flat, output) -> bool:
    """Write the zero torch's sort puts first among flat's into output's
    zero entry (kwk_unique_torch_zero); False where the library cannot tell
    it cheaply."""
    status = _torch_zero(code, flat.data_ptr(), flat.shape[0], output.data_ptr(),
                         output.shape[0])
    if status == _DEFER:
        return False
    if status:
        _native.check(status, "unique")
    return True


def _sort_and_compact(flat, shape, return_inverse, return_counts, torch_order, zeros_of=None):
    if torch_order:
        values, perm = sorting.sort(flat, 0, False, _native.ORDER_TORCH)
    elif return_inverse:
        values, perm = sorting.sort(flat, 0, False, _native.ORDER_STABLE)
    else:
        values, perm = _sort_values(flat), None
    return _compact(values, perm, shape, return_inverse, return_counts, torch_order, zeros_of)


def _compact(values, perm, shape, return_inverse, return_counts, torch_order=False,
             zeros_of=None):
    """(output, inverse, counts) from the sorted values (and the sort's
    permutation, for the inverse): kwk_unique_runs / kwk_unique_fill.  None
    when the result depends on how the sort ordered equal elements and the
    sort was not torch's (torch_order), unless that is only the zero
    entry's sign and `zeros_of` (the unsorted input) lets the library say
    which zero torch's sort puts first (kwk_unique_torch_zero); None also
    when it cannot."""
    code, n = CODES[values.dtype], values.shape[0]
    inverse = torch.empty(n, dtype=_INT64) if return_inverse else None
    advise_fresh(inverse)
    packed = _runs(code, values.data_ptr(), n, perm.data_ptr() if return_inverse else 0,
                   inverse.data_ptr() if return_inverse else 0)
    if packed < 0:
        _native.check(packed, "unique")
    runs, order_shows = divmod(packed, 2)
    fix_zero = order_shows and not torch_order
    if fix_zero and zeros_of is None:
        return None
    output = torch.empty(runs, dtype=values.dtype)
    counts = torch.empty(runs, dtype=_INT64) if return_counts else None
    status = _fill(code, values.data_ptr(), n, runs, output.data_ptr(),
                   counts.data_ptr() if return_counts else 0)
    if status:
        _native.check(status, "unique")
    if fix_zero and not _torch_zero_into(code, zeros_of, output):
        return None
    return output, inverse.view(shape) if return_inverse else None, counts


_KEY_BITS = 63
_PACKABLE = frozenset({torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32,
                       torch.int64, torch.uint16, torch.uint32})


def dim_plan(x: torch.Tensor, dim: int) -> Optional[Tuple[torch.Tensor, torch.Tensor, list]]:
    """(slices as int64 rows, column minimums, column widths in bits) for
    unique(x, dim=dim) (x non-empty, dim wrapped), or None where the slices
    cannot be packed into keys: a dtype other than the integer ones that
    convert to int64 exactly, or ranges needing more than 63 bits."""
    if x.dtype not in _PACKABLE:
        return None
    n = x.shape[dim]
    wide = x.movedim(dim, 0).reshape(n, -1).to(_INT64)
    lows, highs = torch.aminmax(wide, dim=0)
    spans = (highs - lows).tolist()
    # an int64 column spanning 2^63 or more wraps to a negative span
    widths = [s.bit_length() if s >= 0 else 64 for s in spans]
    if sum(widths) > _KEY_BITS:
        return None
    return wide, lows, widths


def slice_keys(wide: torch.Tensor, lows: torch.Tensor, widths: list) -> torch.Tensor:
    """One int64 key per row of `wide`, ordering the rows lexicographically
    (equal rows, equal keys): each column's offset from its minimum, in its
    own bits, the first column most significant."""
    keys = None
    shift = 0
    for j in reversed(range(len(widths))):
        if widths[j]:
            # one column's offsets at a time, shifted in place: at most the
            # keys and one column's worth beside the input
            offsets = wide[:, j] - lows[j]
            if shift:
                offsets <<= shift
            if keys is None:
                keys = offsets
            else:
                keys += offsets
            shift += widths[j]
    return keys if keys is not None else torch.zeros(wide.shape[0], dtype=_INT64)


def key_columns(keys: torch.Tensor, lows: torch.Tensor, widths: list) -> torch.Tensor:
    """The rows slice_keys packed into `keys`, back as int64 columns (its inverse)."""
    columns = torch.empty(keys.shape[0], len(widths), dtype=_INT64)
    shift = 0
    for j in reversed(range(len(widths))):
        w = widths[j]
        columns[:, j] = ((keys >> shift) & ((1 << w) - 1)) + lows[j] if w else lows[j]
        shift += w
    return columns


def unique_dim(x: torch.Tensor, dim: int, plan, return_inverse: bool, return_counts: bool
               ) -> Tuple[torch.Tensor, Optional[torch.Tensor], Optional[torch.Tensor]]:
    """(output, inverse or None, counts or None) as torch.unique(x, dim=dim)
    computes them, from dim_plan(x, dim).  Slices of few distinct keys (label
    pairs, edge types) take the bitmap or hashing pass over the keys and are
    decoded from the distinct keys themselves: no sort of all n keys, and no
    permutation or inverse the caller did not ask for (panoptic pairs,
    307200 x 2 of 30 distinct: 3.1 -> 1.2 ms, 3.0 -> 1.0 copies of the input
    beyond the outputs)."""
    wide, lows, widths = plan
    n = wide.shape[0]
    keys = slice_keys(wide, lows, widths)
    moved = x.movedim(dim, 0)
    bits = sum(widths)
    found = unique_without_sort(keys, return_inverse, return_counts,
                                most=1 << bits if bits < 62 else None)
    if found is not None:
        distinct, inverse, counts = found
        output = key_columns(distinct, lows, widths).to(x.dtype).view(
            (distinct.shape[0],) + moved.shape[1:]).movedim(0, dim)
        return output, inverse, counts
    values, perm = sorting.sort(keys, 0, False, _native.ORDER_STABLE)
    del keys
    # int64 keys: equal keys have equal bits, so the compaction never asks
    # for torch's order
    _, inverse, counts = _compact(values, perm, (n,), True, True)
    first = counts.cumsum(0) - counts
    # laid out as torch lays it out: the chosen slices stacked, then moved
    # back to dim
    output = moved.reshape(n, -1).index_select(0, perm[first]).view(
        (first.shape[0],) + moved.shape[1:]).movedim(0, dim)
    return output, inverse if return_inverse else None, counts if return_counts else None
