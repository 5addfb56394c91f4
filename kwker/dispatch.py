"""The funnel: every patched call comes through one of the entry functions
below, which parses the arguments, asks kwker.support whether the fast path
applies, and either runs a kernel from kwker.ops or calls the captured torch
original with the caller's arguments untouched.

Entry functions have wrapt's wrapper signature (wrapped, instance, args,
kwargs): `wrapped` is the torch original, or the Tensor method bound to
`instance`, the tensor (patching.KwkerMethod passes methods in function
form instead: the unbound method, instance None and the tensor first in
args, which calls the same).  With decide_only=True an entry runs
nothing: it returns None where the call would take the fast path, else the
Condition that sends it to torch (kwker.explain and the observing wrappers
of kwker.observe use this, so the decision has one implementation).
"""
import struct
import threading
from collections import Counter
from functools import partial
from typing import Dict, Optional

import torch

from kwker import _native, support
from kwker.ops import quantile as quantile_ops
from kwker.ops import selection, sorting
from kwker.ops import unique as unique_ops
from kwker.ops.backward import with_torch_backward
from kwker.support import ARGUMENTS, CPU_DENSE, DIM, NONEMPTY, SMALL, TORCH_RAISES, Condition

_ret = torch.return_types


class Policy:
    """Settings chosen by install(); read on every call."""
    order = _native.ORDER_TORCH  # ties="torch" (default) or "stable"


class Stats:
    """Per-op counts of fast and fallback calls (fallbacks by reason), and
    the time spent in each path where it is measured (kwker.observe)."""

    def __init__(self):
        self.lock = threading.Lock()
        # plain dicts holding every op from the start: `counts[op] += 1` on
        # one costs a third of what it costs on a Counter (__missing__)
        self.fast: Dict[str, int] = dict.fromkeys(support.OPS, 0)
        # the size rules' fallbacks (the most frequent), counted apart so
        # that the entries bump them the same way: snapshot() reports them
        # under the SMALL key with the others
        self.small: Dict[str, int] = dict.fromkeys(support.OPS, 0)
        # tensors on other devices sent to torch by install()'s C gate
        # (kwker._gate) before the entry parses anything: reported under
        # CPU_DENSE, the reason the entry gives them
        self.off_cpu: Dict[str, int] = dict.fromkeys(support.OPS, 0)
        # the gates patched in: they count in C, taken here when read
        self.gates: list = []
        self.fallback: Dict[str, Counter] = {}
        self.time_ns: Dict[str, list] = {}  # op -> [fast ns, fallback ns]

    def record_fallback(self, op: str, condition: Condition) -> None:
        # no lock: counters only need to be approximately right under races,
        # and this runs on every fallback call
        counts = self.fallback.get(op)
        if counts is None:
            counts = self.fallback.setdefault(op, Counter())
        counts[condition.key] += 1

    def record_time(self, op: str, fast: bool, ns: int) -> None:
        times = self.time_ns.get(op)
        if times is None:
            times = self.time_ns.setdefault(op, [0, 0])
        times[0 if fast else 1] += ns

    def add_gate(self, gate) -> None:
        with self.lock:
            self.gates.append(gate)

    def remove_gate(self, gate) -> None:
        """A gate patched out: its counts are kept, it is no longer read."""
        with self.lock:
            self._take_gate_counts()
            self.gates.remove(gate)

    def _take_gate_counts(self) -> None:
        for gate in self.gates:
            small, off_cpu = gate.take_counts()
            self.small[gate.op] += small
            self.off_cpu[gate.op] += off_cpu

    def snapshot(self) -> dict:
        with self.lock:
            self._take_gate_counts()
            snap = {}
            for op in sorted(set(self.fast) | set(self.fallback)):
                fast = self.fast.get(op, 0)
                fallback = dict(self.fallback.get(op, {}))
                for key, counts in ((SMALL.key, self.small), (CPU_DENSE.key, self.off_cpu)):
                    if counts.get(op, 0):
                        fallback[key] = fallback.get(key, 0) + counts[op]
                if fast or fallback:
                    snap[op] = {"fast": fast, "fallback": fallback}
            for op, (fast_ns, fallback_ns) in list(self.time_ns.items()):
                if op in snap:
                    snap[op]["time_s"] = {"fast": fast_ns / 1e9, "fallback": fallback_ns / 1e9}
            return snap

    def reset(self) -> None:
        with self.lock:
            self._take_gate_counts()
            # zeroed in place: the entries hold these dicts
            for counts in (self.fast, self.small, self.off_cpu):
                for op in counts:
                    counts[op] = 0
            self.fallback.clear()
            self.time_ns.clear()


STATS = Stats()
# bound once: the entries bump these on every call
_FAST = STATS.fast
_SMALL_COUNT = STATS.small

_SORT_DTYPES = support.OPS["sort"].dtypes
# bound once: looked up on every call
_context_failure = support.context_failure
_tensor_failure = support.tensor_failure
_grad_enabled = torch.is_grad_enabled
_torch_raises_unsigned_radix = support.torch_raises_unsigned_radix
_torch_sort_is_stable = support.torch_sort_is_stable
_row_shape_failure = support.row_shape_failure
_topk_nth_failure = support.topk_nth_failure
_topk_order = support.topk_order
_ORDER_STABLE = _native.ORDER_STABLE
_SELECT_DTYPES = support.OPS["topk"].dtypes
_QUANTILE_DTYPES = support.OPS["quantile"].dtypes
_QUANTILE_MAX_ROW = support.QUANTILE_MAX_ROW
_FLOAT32, _FLOAT64 = torch.float32, torch.float64
_F32 = struct.Struct("f")
_full_q = torch.full


def _fallback(op, condition, wrapped, args, kwargs):
    STATS.record_fallback(op, condition)
    return wrapped(*args, **kwargs)


_Tensor = torch.Tensor
_MIN_NUMEL = support.MIN_FAST_NUMEL


def _size_rule_first(op, body):
    """The entry for `op`: the size rule's first check (a plain tensor
    input with fewer elements than the op's crossover goes to torch) before
    anything else, inline, since it is both the cheapest check and the most
    frequent fallback; then body(wrapped, instance, args, kwargs,
    decide_only) does the rest."""

    def entry(wrapped, instance, args, kwargs, decide_only=False):
        x = instance if instance is not None else (args[0] if args else kwargs.get("input"))
        if type(x) is _Tensor and x.numel() < _MIN_NUMEL[op]:
            if decide_only:
                return SMALL
            _SMALL_COUNT[op] += 1
            return wrapped(*args, **kwargs)
        return body(wrapped, instance, args, kwargs, decide_only)
    entry.__name__ = entry.__qualname__ = f"{op}_entry"
    # what install()'s C gate needs to run the first check itself
    # (patching.py): the op, and the rest of the entry
    entry.size_rule_op, entry.body = op, body
    return entry


_NO_MIN_NUMEL = dict.fromkeys(support.MIN_FAST_NUMEL, 0)


def _no_row_shape_failure(op, numel, row, x=None):
    return None


def _no_topk_nth_failure(row, k, torch_order, dtype):
    return None


def _no_topk_probe(order):
    return order


def _row_shape_failure_stable_ties(op, numel, row, x=None):
    return None if op in support.TIE_ORDER_OPS else support.row_shape_failure(op, numel, row, x)


def use_size_rules(enabled: bool, stable_ties: bool = False) -> None:
    """install(use_fast="auto") (enabled) or use_fast=True (the fast path at
    every size): rebinds the names the size checks read, so the choice
    costs nothing per call.  stable_ties (install(ties="stable")): the
    rules leave support.TIE_ORDER_OPS alone (their element counts read as
    0), since torch would answer those in its own tie order; the counts are
    taken from support.MIN_FAST_NUMEL here, at install()."""
    global _MIN_NUMEL, _row_shape_failure, _topk_nth_failure, _topk_order
    if enabled:
        _MIN_NUMEL, _row_shape_failure = support.MIN_FAST_NUMEL, support.row_shape_failure
        if stable_ties:
            _MIN_NUMEL = {op: 0 if op in support.TIE_ORDER_OPS else n
                          for op, n in support.MIN_FAST_NUMEL.items()}
            _row_shape_failure = _row_shape_failure_stable_ties
        _topk_nth_failure, _topk_order = support.topk_nth_failure, support.topk_order
    else:
        _MIN_NUMEL, _row_shape_failure = _NO_MIN_NUMEL, _no_row_shape_failure
        _topk_nth_failure, _topk_order = _no_topk_nth_failure, _no_topk_probe


# --------------------------------------------------------- argument parsing
# Each parser accepts only the plain forms torch accepts and returns None for
# anything else, which then goes to torch unchanged (torch's parser is the
# reference: e.g. it rejects sort(x, 1, stable=True) and a non-bool flag).

def _parse_sort(args, kwargs, stable_may_be_none=True):
    """(x, dim, descending, stable) from sort/argsort arguments (sort's
    stable is `bool?`, argsort's a plain bool)."""
    n = len(args)
    if n == 0 or n > 3:
        return None
    x = args[0]
    dim = args[1] if n > 1 else -1
    descending = args[2] if n > 2 else False
    stable = False
    for key, value in kwargs.items():
        if key == "dim" and n < 2:
            dim = value
        elif key == "descending" and n < 3:
            descending = value
        elif key == "stable" and n == 1:  # torch's stable overload is keyword-only
            stable = False if value is None and stable_may_be_none else value
        else:
            return None
    if type(dim) is not int or type(descending) is not bool or type(stable) is not bool:
        return None
    return x, dim, descending, stable


_TOPK_NAMES = ("k", "dim", "largest", "sorted")


def _parse_topk(args, kwargs):
    """(x, k, dim, largest, sorted) from topk arguments."""
    n = len(args)
    if n == 0 or n > 5:
        return None
    params = [-1, -1, True, True]  # k (required), dim, largest, sorted
    params[:n - 1] = args[1:]
    given = n - 1
    for key, value in kwargs.items():
        try:
            pos = _TOPK_NAMES.index(key)
        except ValueError:
            return None
        if pos < given:
            return None
        params[pos] = value
    if given == 0 and "k" not in kwargs:
        return None
    k, dim, largest, sorted_ = params
    if type(k) is not int or type(dim) is not int or type(largest) is not bool \
            or type(sorted_) is not bool:
        return None
    return args[0], k, dim, largest, sorted_


def _parse_median(args, kwargs):
    """(x, dim or None, keepdim) from median/nanmedian arguments."""
    n = len(args)
    if n == 0 or n > 3:
        return None
    if n == 1 and not kwargs:
        return args[0], None, False  # the all-elements form
    # the dim forms: torch rejects dim=None and keepdim without dim
    dim = args[1] if n > 1 else None
    keepdim = args[2] if n > 2 else False
    for key, value in kwargs.items():
        if key == "dim" and n < 2:
            dim = value
        elif key == "keepdim" and n < 3:
            keepdim = value
        else:
            return None
    if type(dim) is not int:
        return None
    if type(keepdim) is not bool:
        return None
    return args[0], dim, keepdim


_KTHVALUE_NAMES = ("k", "dim", "keepdim")


def _parse_kthvalue(args, kwargs):
    """(x, k, dim, keepdim) from kthvalue arguments."""
    n = len(args)
    if n < 1 or n > 4:
        return None
    params = [None, -1, False]  # k (required), dim, keepdim
    params[:n - 1] = args[1:]
    for key, value in kwargs.items():
        try:
            pos = _KTHVALUE_NAMES.index(key)
        except ValueError:
            return None
        if pos < n - 1:
            return None
        params[pos] = value
    k, dim, keepdim = params
    if type(k) is not int or type(dim) is not int or type(keepdim) is not bool:
        return None
    return args[0], k, dim, keepdim


_QUANTILE_NAMES = ("q", "dim", "keepdim")
_QUANTILE_POSITIONAL = 4  # input, q, dim, keepdim; interpolation and out are keyword-only


def _parse_quantile(args, kwargs):
    """(x, q, dim, keepdim, interpolation) from quantile/nanquantile
    arguments (out= is left to torch)."""
    n = len(args)
    if n < 1 or n > _QUANTILE_POSITIONAL:
        return None
    params = [None, None, False]  # q (required), dim, keepdim
    params[:n - 1] = args[1:]
    interpolation = "linear"
    for key, value in kwargs.items():
        if key == "interpolation":
            interpolation = value
            continue
        try:
            pos = _QUANTILE_NAMES.index(key)
        except ValueError:
            return None
        if pos < n - 1:
            return None
        params[pos] = value
    q, dim, keepdim = params
    if q is None or (dim is not None and type(dim) is not int) or type(keepdim) is not bool \
            or type(interpolation) is not str or interpolation not in quantile_ops.INTERPOLATION:
        return None
    return args[0], q, dim, keepdim, interpolation


def _quantile_q(x, q):
    """q as (1-D float64 tensor in x's precision, has a q dim), or None
    when the fast path leaves q to torch (a bad q: torch raises)."""
    tq = type(q)
    if tq is float or tq is int:
        # torch checks the double, then rounds it to the input's dtype
        if not 0.0 <= q <= 1.0:
            return None
        if x.dtype is _FLOAT32:  # rounded as C's (float) cast does (a third of a tensor's cost)
            q = _F32.unpack(_F32.pack(q))[0]
        return _full_q((1,), q, dtype=_FLOAT64), False
    if tq is not _Tensor or q.dtype is not x.dtype or q.device != x.device or q.ndim > 1 \
            or (q.requires_grad and torch.is_grad_enabled()) or q.layout is not torch.strided:
        return None
    qd = q.reshape(-1).double()
    if not bool(((qd >= 0) & (qd <= 1)).all()):
        return None
    return qd, q.ndim == 1


_UNIQUE_NAMES = ("sorted", "return_inverse", "return_counts", "dim")


def _parse_unique(args, kwargs):
    """(x, return_inverse, return_counts, dim) from torch.unique arguments
    (dim None or an int; `sorted` is ignored on the CPU, as by torch)."""
    n = len(args)
    if n < 1 or n > 5:
        return None
    params = [True, False, False, None]  # sorted, return_inverse, return_counts, dim
    params[:n - 1] = args[1:]
    for key, value in kwargs.items():
        try:
            pos = _UNIQUE_NAMES.index(key)
        except ValueError:
            return None
        if pos < n - 1:
            return None
        params[pos] = value
    sorted_, return_inverse, return_counts, dim = params
    if type(sorted_) is not bool or type(return_inverse) is not bool \
            or type(return_counts) is not bool or (dim is not None and type(dim) is not int):
        return None
    return args[0], return_inverse, return_counts, dim


def _wrap_dim(x, dim) -> Optional[int]:
    nd = x.ndim
    if nd == 0 or not -nd <= dim < nd:
        return None
    return dim + nd if dim < 0 else dim


def _rows_failure(op, x, d, k=None, k_min=0) -> Optional[Condition]:
    """The condition sending a call along wrapped dim `d` to torch, or None:
    dim (and k) in range, a non-empty input, a row shape where the kernel
    was measured faster (support.SIZE_RULES)."""
    if d is None or (k is not None and not k_min <= k <= x.shape[d]):
        return DIM
    numel = x.numel()
    if numel == 0:
        return NONEMPTY
    return _row_shape_failure(op, numel, x.shape[d], x)


# ------------------------------------------------------------- entry points

def _sort_common(op, finish, wrapped, instance, args, kwargs, decide_only):
    """sort/argsort/msort; `finish` turns the kernel's (values, indices) into
    the op's result (fallback results pass through untouched)."""
    full = args if instance is None else (instance,) + args
    failure = _context_failure()
    if failure is None:
        if op == "msort":
            call = (full[0], 0, False, False) if len(full) == 1 and not kwargs else None
        else:
            call = _parse_sort(full, kwargs, stable_may_be_none=op == "sort")
        if call is None:
            failure = ARGUMENTS
        else:
            x, dim, descending, stable = call
            failure = _tensor_failure(x, _SORT_DTYPES, grad_ok=True)
            if failure is None:
                d = _wrap_dim(x, dim)
                failure = _rows_failure(op, x, d)
                if failure is None and _torch_raises_unsigned_radix(x, descending):
                    failure = TORCH_RAISES
                if failure is None:
                    order = Policy.order
                    if stable or _torch_sort_is_stable(x, d, descending):
                        order = _ORDER_STABLE
                    if decide_only:
                        return None
                    _FAST[op] += 1
                    if x.requires_grad and op != "argsort" and _grad_enabled():
                        return finish(with_torch_backward(
                            x, d, True, lambda: sorting.sort(x, d, descending, order)))
                    return finish(sorting.sort(x, d, descending, order, op != "argsort",
                                                op != "msort"))
    return failure if decide_only else _fallback(op, failure, wrapped, args, kwargs)


def _second(pair):
    return pair[1]


def _first(pair):
    return pair[0]


sort_entry = _size_rule_first("sort", partial(_sort_common, "sort", _ret.sort))
argsort_entry = _size_rule_first("argsort", partial(_sort_common, "argsort", _second))
msort_entry = _size_rule_first("msort", partial(_sort_common, "msort", _first))


def _topk(wrapped, instance, args, kwargs, decide_only):
    full = args if instance is None else (instance,) + args
    failure = _context_failure()
    if failure is None:
        call = _parse_topk(full, kwargs)
        if call is None:
            failure = ARGUMENTS
        else:
            x, k, dim, largest, sorted_ = call
            failure = _tensor_failure(x, _SELECT_DTYPES, grad_ok=True)
            if failure is None:
                d = _wrap_dim(x, dim)
                failure = _rows_failure("topk", x, d, k)
                if failure is None and not sorted_:  # (sorted: the common case, no call)
                    failure = _topk_nth_failure(x.shape[d], k, Policy.order != _ORDER_STABLE, x.dtype)
                if failure is None:
                    if decide_only:
                        # the kernel's probe of the rows is known only once it has run
                        return None
                    result = selection.topk(x, k, d, largest, sorted_, _topk_order(Policy.order))
                    if result is not None:
                        _FAST["topk"] += 1
                        if x.requires_grad and _grad_enabled():
                            return _ret.topk(with_torch_backward(x, d, True, lambda: result))
                        return _ret.topk(result)
                    failure = support.TORCH_ROWS
    return failure if decide_only else _fallback("topk", failure, wrapped, args, kwargs)


topk_entry = _size_rule_first("topk", _topk)


def _median_common(op, ignore_nan, result_type, wrapped, instance, args, kwargs, decide_only):
    full = args if instance is None else (instance,) + args
    failure = _context_failure()
    if failure is None:
        call = _parse_median(full, kwargs)
        if call is None:
            failure = ARGUMENTS
        else:
            x, dim, keepdim = call
            # the all-elements form has no indices to scatter a gradient to
            failure = _tensor_failure(x, _SELECT_DTYPES, grad_ok=dim is not None)
            if failure is None:
                if x.numel() == 0:
                    failure = NONEMPTY
                elif dim is None:
                    if decide_only:
                        return None
                    _FAST[op] += 1
                    return selection.median_all(x, ignore_nan)
                else:
                    d = _wrap_dim(x, dim)
                    failure = _rows_failure(op, x, d)
                    if failure is None:
                        if decide_only:
                            return None
                        _FAST[op] += 1
                        if x.requires_grad and _grad_enabled():
                            return result_type(with_torch_backward(
                                x, d, keepdim,
                                lambda: selection.median_dim(x, d, keepdim, ignore_nan)))
                        return result_type(selection.median_dim(x, d, keepdim, ignore_nan))
    return failure if decide_only else _fallback(op, failure, wrapped, args, kwargs)


median_entry = _size_rule_first("median", partial(_median_common, "median", False, _ret.median))
nanmedian_entry = _size_rule_first("nanmedian", partial(_median_common, "nanmedian", True,
                                                        _ret.nanmedian))


def _kthvalue(wrapped, instance, args, kwargs, decide_only):
    full = args if instance is None else (instance,) + args
    failure = _context_failure()
    if failure is None:
        call = _parse_kthvalue(full, kwargs)
        if call is None:
            failure = ARGUMENTS
        else:
            x, k, dim, keepdim = call
            failure = _tensor_failure(x, _SELECT_DTYPES, grad_ok=True)
            if failure is None:
                d = _wrap_dim(x, dim)
                failure = _rows_failure("kthvalue", x, d, k, k_min=1)
                if failure is None:
                    if decide_only:
                        return None
                    _FAST["kthvalue"] += 1
                    if x.requires_grad and _grad_enabled():
                        return _ret.kthvalue(with_torch_backward(x, d, keepdim, lambda: (
                            selection.kthvalue(x, k, d, keepdim, Policy.order))))
                    return _ret.kthvalue(selection.kthvalue(x, k, d, keepdim, Policy.order))
    return failure if decide_only else _fallback("kthvalue", failure, wrapped, args, kwargs)


kthvalue_entry = _size_rule_first("kthvalue", _kthvalue)


def _quantile_common(op, ignore_nan, wrapped, instance, args, kwargs, decide_only):
    full = args if instance is None else (instance,) + args
    failure = _context_failure()
    if failure is None:
        call = _parse_quantile(full, kwargs)
        if call is None:
            failure = ARGUMENTS
        else:
            x, q, dim, keepdim, interpolation = call
            failure = _tensor_failure(x, _QUANTILE_DTYPES)
            if failure is None:
                qs = _quantile_q(x, q)
                if qs is None:
                    failure = ARGUMENTS
                elif dim is None:
                    failure = NONEMPTY if x.numel() == 0 else None
                    length = x.numel()
                else:
                    dim = _wrap_dim(x, dim)
                    failure = _rows_failure(op, x, dim)
                    length = x.shape[dim] if failure is None else 0
                if failure is None and length > _QUANTILE_MAX_ROW:
                    failure = TORCH_RAISES
                if failure is None:
                    if decide_only:
                        # tie_bits is known only once the kernel has run
                        return None
                    result = quantile_ops.quantile(x, qs[0], qs[1], dim, keepdim, interpolation,
                                                   ignore_nan)
                    if result is not None:
                        _FAST[op] += 1
                        return result
                    failure = support.TIE_BITS
    return failure if decide_only else _fallback(op, failure, wrapped, args, kwargs)


quantile_entry = _size_rule_first("quantile", partial(_quantile_common, "quantile", False))
nanquantile_entry = _size_rule_first("nanquantile", partial(_quantile_common, "nanquantile",
                                                            True))


def _unique(wrapped, instance, args, kwargs, decide_only):
    full = args if instance is None else (instance,) + args
    failure = _context_failure()
    if failure is None:
        call = _parse_unique(full, kwargs)
        if call is None:
            failure = ARGUMENTS
        else:
            x, return_inverse, return_counts, dim = call
            failure = _tensor_failure(x, _SORT_DTYPES)
            if failure is None and dim is not None:
                dim = _wrap_dim(x, dim)
                failure = DIM if dim is None else None
            if failure is None and x.numel() == 0:
                failure = NONEMPTY
            if failure is None and dim is None and _torch_raises_unsigned_radix(
                    x, False, flattened=True):
                failure = TORCH_RAISES
            plan = None
            if failure is None and dim is not None:
                plan = unique_ops.dim_plan(x, dim)
                if plan is None:
                    failure = support.UNIQUE_DIM
            if failure is None:
                if decide_only:
                    return None
                if dim is None:
                    output, inverse, counts = unique_ops.unique(x, return_inverse, return_counts)
                else:
                    output, inverse, counts = unique_ops.unique_dim(x, dim, plan, return_inverse,
                                                                    return_counts)
                _FAST["unique"] += 1
                if not (return_inverse or return_counts):
                    return output
                return tuple(t for t in (output, inverse, counts) if t is not None)
    return failure if decide_only else _fallback("unique", failure, wrapped, args, kwargs)


unique_entry = _size_rule_first("unique", _unique)


def _torch_entry(op, condition):
    """An entry sending every call to torch for `condition`: ops without a
    kernel, and every op under install(use_fast=False)."""

    def entry(wrapped, instance, args, kwargs, decide_only=False):
        if decide_only:
            return condition
        STATS.record_fallback(op, condition)
        return wrapped(*args, **kwargs)
    entry.__name__ = f"{op}_{condition.key}_entry"
    return entry


ENTRIES = {
    "sort": sort_entry,
    "argsort": argsort_entry,
    "msort": msort_entry,
    "topk": topk_entry,
    "median": median_entry,
    "nanmedian": nanmedian_entry,
    "kthvalue": kthvalue_entry,
    "unique": unique_entry,
    "quantile": quantile_entry,
    "nanquantile": nanquantile_entry,
}
#: install(use_fast=False): torch for every call, still counted per op
TORCH_ENTRIES = {op: _torch_entry(op, support.USE_FAST) for op in ENTRIES}
