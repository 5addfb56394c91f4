"""topk, kthvalue and median on the native kernels.

Each op calls its kernel once over all rows, or, for calls large enough to
be worth it, once per block of rows on several threads (parallel.run_rows);
the _*_block functions below are those per-block calls: the pointers moved
to the block's first row, the counts cut to its rows."""
from functools import partial

import torch

from kwker import _native
from kwker.ops import parallel
from kwker.ops._call import CODES, HUGE_OUTPUT_BYTES, advise_fresh, lib, select_rows
from kwker.ops.parallel import run_rows
from kwker.ops.rows import is_dense_permutation

_INT64 = torch.int64
# outputs: torch.empty(size=..., dtype=...) is 0.3-0.5 us cheaper than
# x.new_empty(shape) (no device or layout to copy); a 0-dim output
# cheapest of all as empty_strided((), ())
_empty = torch.empty
_empty_strided = torch.empty_strided
_topk = lib.kwk_topk_addr if lib is not None else None
_median_dim = lib.kwk_median_dim_addr if lib is not None else None
_median_all = lib.kwk_median_all_addr if lib is not None else None
_kthvalue = lib.kwk_kthvalue_addr if lib is not None else None
_DEFER = lib.KWK_DEFER if lib is not None else 1


def _topk_block(code, es, src, values, indices, rows, k, flags, o0, o1, i0, i1):
    _, length, inner, so, sl, si = rows
    d = o0 * k * inner + i0  # contiguous outputs of rows of k
    return _topk(code, src + (o0 * so + i0 * si) * es, o1 - o0, length, i1 - i0, so, sl, si, k,
                 values + d * es, indices + d * 8, k * inner, inner, 1, *flags)


def _reduce_block(fn, code, es, src, values, indices, rows, pre, flags, o0, o1, i0, i1):
    """A block of kthvalue (pre=(k,)) or median_dim (pre=()): one value and
    index per row, contiguous."""
    _, length, inner, so, sl, si = rows
    d = o0 * inner + i0
    return fn(code, src + (o0 * so + i0 * si) * es, o1 - o0, length, i1 - i0, so, sl, si, *pre,
              values + d * es, indices + d * 8, inner, 1, *flags)


def topk(x: torch.Tensor, k: int, dim: int, largest: bool, sorted_: bool, order: int):
    """(values, indices) as torch.topk gives them (contiguous outputs), or
    None where the kernel leaves the call to torch (torch's order over
    short rows that torch selects faster: kwker.h kwk_topk)."""
    shape = list(x.shape)
    shape[dim] = k
    values = _empty(size=shape, dtype=x.dtype)
    indices = _empty(size=shape, dtype=_INT64)
    src, rows = select_rows(x, dim)
    outer, length, inner, so, sl, si = rows
    numel = outer * length * inner
    if outer * k * inner * 8 >= HUGE_OUTPUT_BYTES:
        advise_fresh(values, indices)
    if numel < parallel.SPLIT_MIN:
        # contiguous output: rows of k along dim, `inner` elements apart
        status = _topk(
            CODES[x.dtype], src.data_ptr(), outer, length, inner, so, sl, si, k,
            values.data_ptr(), indices.data_ptr(), k * inner, inner, 1,
            largest, sorted_, order)
    else:
        status = run_rows(partial(_topk_block, CODES[x.dtype], x.element_size(), src.data_ptr(),
                                  values.data_ptr(), indices.data_ptr(), rows, k,
                                  (largest, sorted_, order)), outer, inner, numel)
    if status:
        if status == _DEFER:
            return None
        _native.check(status, "topk")
    return values, indices


def _reduced_outputs(x: torch.Tensor, dim: int, keepdim: bool):
    """Contiguous (values, indices) for a reduction over dim."""
    shape = list(x.shape)
    if keepdim:
        shape[dim] = 1
    else:
        del shape[dim]
    return _empty(size=shape, dtype=x.dtype), _empty(size=shape, dtype=_INT64)


def kthvalue(x: torch.Tensor, k: int, dim: int, keepdim: bool, order: int):
    """(values, indices) as torch.kthvalue gives them."""
    values, indices = _reduced_outputs(x, dim, keepdim)
    src, rows = select_rows(x, dim)
    outer, length, inner, so, sl, si = rows
    numel = outer * length * inner
    if numel < parallel.SPLIT_MIN:
        status = _kthvalue(CODES[x.dtype], src.data_ptr(), outer, length, inner, so, sl, si, k,
                           values.data_ptr(), indices.data_ptr(), inner, 1, order)
    else:
        status = run_rows(partial(_reduce_block, _kthvalue, CODES[x.dtype], x.element_size(),
                                  src.data_ptr(), values.data_ptr(), indices.data_ptr(), rows,
                                  (k,), (order,)), outer, inner, numel)
    if status:
        _native.check(status, "kthvalue")
    return values, indices


def median_dim(x: torch.Tensor, dim: int, keepdim: bool, ignore_nan: bool):
    """(values, indices) as torch.median(x, dim) / torch.nanmedian give them."""
    values, indices = _reduced_outputs(x, dim, keepdim)
    src, rows = select_rows(x, dim)
    outer, length, inner, so, sl, si = rows
    numel = outer * length * inner
    if numel < parallel.SPLIT_MIN:
        status = _median_dim(
            CODES[x.dtype], src.data_ptr(), outer, length, inner, so, sl, si,
            values.data_ptr(), indices.data_ptr(), inner, 1, ignore_nan)
    else:
        status = run_rows(partial(_reduce_block, _median_dim, CODES[x.dtype], x.element_size(),
                                  src.data_ptr(), values.data_ptr(), indices.data_ptr(), rows,
                                  (), (ignore_nan,)), outer, inner, numel)
    if status:
        _native.check(status, "median")
    return values, indices


def _memory_order(x: torch.Tensor):
    """(tensor, length, stride): x's elements in the order torch's median()
    visits them: it clones x (keeping a dense layout, making anything else
    contiguous) and walks the clone's memory.  The order only shows when
    equal keys differ in bits (+-0.0, NaN payloads).  A contiguous or
    densely permuted x is read in place from its first element (which has
    the lowest address)."""
    if x.is_contiguous() or is_dense_permutation(x.shape, x.stride()):
        return x, x.numel(), 1
    flat = x.reshape(-1)
    return flat, flat.shape[0], flat.stride()[0]


def median_all(x: torch.Tensor, ignore_nan: bool):
    """torch.median(x) / torch.nanmedian(x): a 0-dim tensor (x non-empty)."""
    src, length, stride = _memory_order(x)
    dtype = x.dtype
    out = _empty_strided((), (), dtype=dtype)
    status = _median_all(CODES[dtype], src.data_ptr(), length, stride, out.data_ptr(), ignore_nan)
    if status:
        _native.check(status, "median")
    return out
