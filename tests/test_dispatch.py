"""The funnel (kwker.dispatch) and its fallbacks (kwker.support).

Every Condition that can be triggered from Python is triggered by a real
call: the result (or the exception) must still be torch's, and the
condition's key must be counted in kwker.stats().
"""
import warnings

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import kwker
from kwker import support
from kwker_testing import ORIG, ORIG_METHOD, assert_same, bits, run, compare, fallbacks, fast_count, make_values


@pytest.fixture
def x(gen):
    return make_values("ties", (4, 37), torch.float32, gen)


def test_condition_keys_are_unique_and_documented():
    keys = [c.key for c in support.ALL_CONDITIONS]
    assert len(keys) == len(set(keys))
    for c in support.ALL_CONDITIONS:
        assert c.reason
    for op, s in support.OPS.items():
        assert set(s.conditions) <= set(support.ALL_CONDITIONS), op
    assert set(support.OPS) == set(kwker.patching.ALL_OPS)


# ---------------------------------------------------------------- autograd

@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
@pytest.mark.parametrize("op,args", [
    ("sort", (1,)), ("sort", (0, True)), ("topk", (3,)), ("topk", (2, 0, False)),
    ("median", (1,)), ("median", ()), ("nanmedian", (0, True)), ("nanmedian", ()),
    ("msort", ()), ("argsort", (1,)), ("kthvalue", (4, 1)), ("kthvalue", (2, 0, True)),
])
def test_requires_grad_backward_matches(kw, gen, op, args, dtype):
    """Inputs that require grad take the fast path (with torch's backward
    formula attached), except median()/nanmedian() over all elements, which
    go to torch; values and gradients are torch's, bit for bit, and so is
    the double backward."""
    base = make_values("bf16ties", (5, 16), torch.float64, gen).to(dtype)
    base[1, 3] = float("nan") if op == "nanmedian" else base[1, 3]
    x_ref = base.clone().requires_grad_()
    x_got = base.clone().requires_grad_()
    ref = ORIG[op](x_ref, *args)
    kwker.reset_stats()
    got = getattr(torch, op)(x_got, *args)
    all_elements = op in ("median", "nanmedian") and not args
    if all_elements:
        assert fallbacks(op) == {"no_grad": 1} and fast_count(op) == 0
    else:
        assert fallbacks(op) == {} and fast_count(op) == 1
    assert_same(ref, got)
    out_ref = ref[0] if isinstance(ref, tuple) else ref
    out_got = got[0] if isinstance(got, tuple) else got
    if op == "argsort":
        assert not out_got.requires_grad
        return
    assert out_got.requires_grad and out_got.grad_fn is not None
    if all_elements:
        assert type(out_got.grad_fn) is type(out_ref.grad_fn)
    w = torch.randn(out_ref.shape, generator=gen, dtype=torch.float64).to(dtype)
    w.view(-1)[::3] = -0.0  # torch's backward writes the gradient: -0.0 stays -0.0
    w_ref, w_got = w.clone().requires_grad_(), w.clone().requires_grad_()
    grad_ref, = torch.autograd.grad(out_ref, x_ref, w_ref, create_graph=True)
    grad_got, = torch.autograd.grad(out_got, x_got, w_got, create_graph=True)
    assert_same(grad_ref, grad_got)
    if not all_elements:
        assert not torch.equal(bits(grad_got), bits(grad_got.abs()))  # -0.0 came through
    # double backward: the gradient's own derivative (with respect to w)
    v = torch.randn(grad_ref.shape, generator=gen, dtype=torch.float64).to(dtype)
    assert_same(torch.autograd.grad(grad_ref, w_ref, v), torch.autograd.grad(grad_got, w_got, v))
    (out_ref.float() * w.float()).nansum().backward()
    (out_got.float() * w.float()).nansum().backward()
    assert_same(x_ref.grad, x_got.grad)


@pytest.mark.parametrize("ties", ["torch", "stable"])
def test_requires_grad_keeps_the_tie_order(gen, ties):
    """Under ties="torch" the indices (and so the gradient) are torch's on
    tie-heavy rows; under ties="stable" the gradient goes to the stable
    indices."""
    kwker.install(ties=ties)
    try:
        x = make_values("ties", (6, 50), torch.float32, gen)
        for op, args in (("sort", (1,)), ("topk", (7,)), ("kthvalue", (9, 1))):
            xg = x.clone().requires_grad_()
            values, indices = getattr(torch, op)(xg, *args)
            if ties == "torch":
                assert torch.equal(indices, ORIG[op](x, *args)[1])
            grad, = torch.autograd.grad(values.sum(), xg)
            expected = torch.zeros_like(x).scatter(
                1, indices if indices.dim() == 2 else indices[:, None], 1.0)
            assert torch.equal(grad, expected)
    finally:
        kwker.uninstall()


def test_requires_grad_without_grad_mode_is_fast(kw, gen):
    x = make_values("ties", (5, 16), torch.float32, gen).requires_grad_()
    with torch.no_grad():
        compare("sort", x, 1)
        compare("topk", x, 2)
        compare("median", x, 0)
        compare("median", x)
    with torch.inference_mode():
        compare("sort", x, 1)


def test_inference_tensors_are_fast(kw, gen):
    with torch.inference_mode():
        x = make_values("ties", (5, 16), torch.float32, gen)
    compare("sort", x, 1)
    compare("topk", x, 3)
    compare("nanmedian", x, 1)


# ---------------------------------------------------- tensors torch handles

class MyTensor(torch.Tensor):
    pass


class Logged(torch.Tensor):
    calls = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        cls.calls.append(func)
        return super().__torch_function__(func, types, args, kwargs or {})


class Duck:
    """Not a tensor: torch dispatches to __torch_function__."""

    def __init__(self, t):
        self.t = t

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        args = tuple(a.t if isinstance(a, Duck) else a for a in args)
        return ("duck", func.__name__, func(*args, **(kwargs or {})))


@pytest.mark.parametrize("op,args", [("sort", (1, True)), ("topk", (2,)), ("median", (1,)),
                                     ("median", ()), ("argsort", ()), ("msort", ()),
                                     ("nanmedian", (0,))])
def test_tensor_subclass(kw, x, op, args):
    sub = x.as_subclass(MyTensor)
    # Tensor.__torch_function__ calls torch's function again (for methods,
    # the patched one): only plain_tensor fallbacks, maybe more than one
    result = compare(op, sub, *args, fast={"plain_tensor"})
    first = result[0] if isinstance(result, tuple) else result
    assert type(first) is MyTensor
    compare(op, sub, *args, method=True, fast={"plain_tensor"})


def test_torch_function_override(kw, x):
    Logged.calls.clear()
    lg = x.as_subclass(Logged)
    compare("sort", lg, 1, fast={"plain_tensor"})
    compare("topk", lg, 3, method=True, fast={"plain_tensor"})
    assert ORIG["sort"] in Logged.calls
    # what handlers see for a method still compares and hashes as torch's
    method = next(f for f in Logged.calls if getattr(f, "__name__", "") == "topk")
    assert method == ORIG_METHOD["topk"] and {ORIG_METHOD["topk"]: 1}.get(method) == 1
    duck = Duck(x)
    for op, args in [("sort", (0,)), ("argsort", (1,)), ("msort", ()), ("topk", (2,)),
                     ("median", ()), ("kthvalue", (2,)), ("nanmedian", (0,)),
                     ("quantile", (0.5,))]:
        ref = getattr(Duck, "__torch_function__")(ORIG[op], (Duck,), (duck,) + args)
        kwker.reset_stats()
        got = getattr(torch, op)(duck, *args)
        assert got[0] == "duck" and got[1] == ref[1] == op
        assert_same(ref[2], got[2])
        assert fast_count(op) == 0 and sum(fallbacks(op).values()) == 1


class Recorder(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.funcs = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.funcs.append(func)
        return func(*args, **(kwargs or {}))


class DispatchRecorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def test_torch_function_mode(kw, x):
    with Recorder() as mode:
        compare("sort", x, 1, fast="no_transform")
        compare("median", x, fast="no_transform")
        compare("argsort", x, 0, True, fast="no_transform")
        # a method: torch hands the mode torch.Tensor.topk (patched), which
        # the mode calls with itself disabled, so the kernel may run there
        compare("topk", x, 2, method=True, fast=None)
        assert fallbacks("topk") == {"no_transform": 1}
    # the mode saw torch's own function (the original), once for each call
    assert mode.funcs.count(ORIG["sort"]) == 2
    method = next(f for f in mode.funcs if getattr(f, "__name__", "") == "topk")
    assert method == ORIG_METHOD["topk"] and method in {ORIG_METHOD["topk"]: 1}


def test_torch_dispatch_mode(kw, x):
    with DispatchRecorder() as mode:
        compare("sort", x, 1, fast="no_transform")
        compare("nanmedian", x, 0, True, fast="no_transform")
    assert any("aten.sort" in op for op in mode.ops)


def test_forward_ad(kw, gen):
    import torch.autograd.forward_ad as fwAD
    x = make_values("random", (4, 9), torch.float64, gen)
    tangent = torch.randn(x.shape, generator=gen, dtype=torch.float64)
    with fwAD.dual_level():
        dual = fwAD.make_dual(x, tangent)
        ref = fwAD.unpack_dual(ORIG["sort"](dual, 1).values).tangent
        kwker.reset_stats()
        got = fwAD.unpack_dual(torch.sort(dual, 1).values).tangent
        assert fallbacks("sort") == {"no_transform": 1}
        # inside a dual level even a plain tensor goes to torch
        compare("topk", x, 2, fast="no_transform")
    assert_same(ref, got)


def test_meta_device(kw):
    x = torch.empty(4, 9, device="meta")
    for op, args in [("sort", (1,)), ("topk", (3,)), ("median", (0,)), ("argsort", ()),
                     ("msort", ()), ("nanmedian", (1, True))]:
        compare(op, x, *args, fast="cpu_dense")


def test_sparse_and_nested(kw, x):
    sp = x.to_sparse()
    for op, args in [("sort", ()), ("topk", (2,)), ("median", (1,)), ("argsort", ())]:
        compare(op, sp, *args, fast="cpu_dense")  # torch raises NotImplementedError
    nt = torch.nested.nested_tensor([x[0], x[1, :5]])
    compare("sort", nt, fast="cpu_dense")


def test_negative_and_zero_views(kw, x):
    compare("sort", torch._neg_view(x), 1, fast="cpu_dense")
    compare("topk", torch._neg_view(x), 3, fast="cpu_dense")
    compare("sort", torch._efficientzerotensor(5), fast="cpu_dense")


def test_conj_view_is_not_confused(kw, gen):
    # complex is not a sort dtype; torch raises its own error
    c = torch.randn(5, dtype=torch.complex64, generator=gen)
    compare("sort", c, fast="dtype")
    compare("sort", c.conj(), fast="dtype")


# ---------------------------------------------------------- argument forms

def _first(result):
    return result[0] if isinstance(result, tuple) else result


@pytest.mark.parametrize("op,args,n_out", [
    ("sort", (1,), 2), ("sort", (0, True), 2), ("topk", (3,), 2), ("median", (0,), 2),
    ("nanmedian", (0, True), 2), ("msort", (), 1), ("median", (), 1), ("nanmedian", (), 1),
    ("argsort", (), 1),  # torch has no argsort out=: TypeError
    ("kthvalue", (2,), 2),
])
def test_out_argument(kw, x, op, args, n_out):
    def outs():
        if n_out == 1:
            return torch.empty(0, dtype=torch.long if op == "argsort" else x.dtype)
        return (torch.empty(0), torch.empty(0, dtype=torch.long))

    out_ref, out_got = outs(), outs()
    ref = run(ORIG[op], x, *args, out=out_ref)
    kwker.reset_stats()
    got = run(getattr(torch, op), x, *args, out=out_got)
    assert fallbacks(op) == {"arguments": 1}, op
    assert ref[0] == got[0]
    if ref[0] == "raise":
        assert type(ref[1]) is type(got[1]) and str(ref[1]) == str(got[1])
        return
    assert_same(ref[1], got[1])
    assert_same(out_ref, out_got)
    # torch returns the out tensors themselves
    assert _first(got[1]).data_ptr() == _first(out_got).data_ptr()


def test_sort_stable_positional_is_rejected_like_torch(kw, x):
    compare("sort", x, 1, stable=True, fast="arguments")
    compare("sort", x, 1, True, stable=True, fast="arguments")
    compare("sort", x, 0, stable=True, method=True, fast="arguments")
    compare("argsort", x, 1, stable=True, fast="arguments")
    compare("argsort", x, 1, True, stable=False, method=True, fast="arguments")
    with pytest.raises(TypeError):
        ORIG["sort"](x, 1, stable=True)


@pytest.mark.parametrize("call", [
    ("sort", (), {"stable": 1}), ("sort", (1, 1), {}), ("sort", (), {"descending": None}),
    ("sort", (), {"dim": None}), ("sort", (np.int64(1),), {}), ("sort", (1, np.bool_(True)), {}),
    ("sort", (), {"dim": 1.0}), ("sort", (), {"dimension": 1}), ("sort", (1, False, 3), {}),
    ("argsort", (np.int32(0),), {}), ("topk", (np.int64(2),), {}), ("topk", (2, np.int64(0)), {}),
    ("topk", (True,), {}), ("topk", (2,), {"largest": 1}), ("topk", (2, None), {}),
    ("topk", (2.0,), {}), ("topk", (), {}), ("topk", (2,), {"k": 2}),
    ("topk", (2, 1, True, True, 5), {}), ("topk", (2,), {"sorted": None}),
    ("median", (np.int64(1),), {}), ("median", (), {"keepdim": True}),
    ("median", (None, True), {}), ("median", (1,), {"keepdim": 1}),
    ("median", (1,), {"dim": 1}), ("nanmedian", (1.0,), {}), ("msort", (0,), {}),
    ("msort", (), {"dim": 0}), ("kthvalue", (2, np.int64(1)), {}),
    ("sort", (True,), {}), ("topk", (2, True), {}), ("median", (False,), {}),
    ("topk", (torch.tensor(2),), {}), ("sort", (torch.tensor(1),), {}),
    ("argsort", (), {"dim": torch.tensor(0)}), ("median", (torch.tensor(1), True), {}),
    ("topk", (2,), {"largest": np.bool_(False)}), ("sort", (), {"descending": torch.tensor(True)}),
], ids=repr)
def test_unusual_arguments_go_to_torch(kw, x, call):
    """Forms the fast path does not parse (numpy ints, non-bool flags, None,
    unknown keywords, too many arguments): torch's exact result or exception,
    and an 'arguments' fallback."""
    op, args, kwargs = call
    compare(op, x, *args, fast="arguments", **kwargs)


def test_median_dim_none(kw, x):
    """torch.median(x, dim=None) is a TypeError in torch 2.13 (only median(x)
    is the all-elements form); see test_regressions.py."""
    for op in ("median", "nanmedian"):
        with pytest.raises(TypeError):
            ORIG[op](x, dim=None)


@pytest.mark.parametrize("op,args", [
    ("sort", ("C",)), ("sort", (), ), ("topk", (2, "C")), ("median", ("C",)),
    ("argsort", ("N",)), ("nanmedian", ("N", True)), ("kthvalue", (1, "C")),
], ids=repr)
def test_dimname_arguments(kw, x, op, args):
    """Dimname (str) dims: torch 2.13 has no named tensors; it rejects them."""
    kwargs = {"dim": "C"} if not args else {}
    compare(op, x, *args, fast="arguments", **kwargs)


def test_zero_dim_input(kw):
    s = torch.tensor(2.5)
    compare("sort", s, fast="dim")
    compare("sort", s, 0, fast="dim")
    compare("sort", s, -1, True, fast="dim")
    compare("argsort", s, fast="dim")
    compare("topk", s, 1, fast="dim")
    compare("topk", s, 0, fast="dim")
    compare("median", s, 0, fast="dim")
    compare("median", s, 0, True, fast="dim")
    compare("nanmedian", s, -1, fast="dim")
    compare("median", s)  # all elements of a 0-dim tensor: one element, fast
    compare("msort", s, fast="dim")
    compare("sort", s, 1, fast="dim")  # out of range: IndexError like torch


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 4), (2, 0, 3)], ids=str)
def test_empty_input(kw, shape):
    e = torch.empty(shape)
    for dim in range(-len(shape), len(shape)):
        compare("sort", e, dim, fast="nonempty")
        compare("argsort", e, dim, True, fast="nonempty")
        compare("median", e, dim, fast="nonempty")  # IndexError when dim is empty
        compare("nanmedian", e, dim, True, fast="nonempty")
        compare("topk", e, 0, dim, fast="nonempty")
        compare("topk", e, 1, dim, fast="dim" if e.shape[dim] == 0 else "nonempty")
    compare("median", e, fast="nonempty")  # NaN
    compare("nanmedian", e, fast="nonempty")
    compare("msort", e, fast="nonempty")
    compare("median", torch.empty(0, dtype=torch.int64), fast="nonempty")  # torch raises


def test_k_out_of_range(kw, x):
    for k in (-1, 38, 1000):
        compare("topk", x, k, fast="dim")
        compare("topk", x, k, method=True, fast="dim")
    compare("topk", x, 5, 0, fast="dim")
    compare("topk", x, 4, 0)


@pytest.mark.parametrize("dim", [2, -3, 100])
def test_bad_dim(kw, x, dim):
    for op, args in [("sort", (dim,)), ("argsort", (dim,)), ("topk", (1, dim)),
                     ("median", (dim,)), ("nanmedian", (dim, True))]:
        compare(op, x, *args, fast="dim")
        compare(op, x, *args, method=True, fast="dim")
    with pytest.raises(IndexError):
        ORIG["sort"](x, dim)


@pytest.mark.parametrize("op,dtype", [
    ("topk", torch.bool), ("topk", torch.uint16), ("topk", torch.uint32),
    ("topk", torch.uint64), ("median", torch.bool), ("median", torch.uint16),
    ("nanmedian", torch.uint32), ("sort", torch.complex64), ("topk", torch.complex128),
])
def test_unsupported_dtype(kw, op, dtype):
    x = torch.ones(3, 5, dtype=dtype)
    args = (2,) if op == "topk" else (1,) if op != "sort" else ()
    compare(op, x, *args, fast="dtype")
    if op in ("median", "nanmedian"):
        compare(op, x, fast="dtype")  # all elements


def test_wide_unsigned_sort_is_fast(kw, gen):
    """uint16/32/64 are sort dtypes (though not topk/median ones)."""
    for dtype in (torch.uint16, torch.uint32, torch.uint64):
        x = make_values("special", (3, 70), dtype, gen)
        compare("sort", x)
        compare("argsort", x, 0, True)


# ------------------------------------------------------------- transforms

def test_vmap(kw, gen):
    x = make_values("ties", (6, 5, 9), torch.float32, gen)

    def ref_fn(r):
        return ORIG["sort"](r, 1).values, ORIG["topk"](r, 2).indices, ORIG["median"](r, 0)[0]

    def got_fn(r):
        return torch.sort(r, 1).values, torch.topk(r, 2).indices, torch.median(r, 0)[0]

    ref = torch.func.vmap(ref_fn)(x)
    kwker.reset_stats()
    got = torch.func.vmap(got_fn)(x)
    assert_same(ref, got)
    for op in ("sort", "topk", "median"):
        assert fast_count(op) == 0 and set(fallbacks(op)) == {"no_transform"}, kwker.stats()


def test_func_grad_and_jacrev(kw, gen):
    x = make_values("random", (7,), torch.float64, gen)

    def loss(fns):
        def f(t):
            v = fns["sort"](t, descending=True).values
            return (v * torch.arange(7.0, dtype=torch.float64)).sum() + \
                fns["topk"](t, 2).values.sum() * 3 + fns["median"](t) * 5
        return f

    ref = torch.func.grad(loss(ORIG))(x)
    kwker.reset_stats()
    got = torch.func.grad(loss({op: getattr(torch, op) for op in ORIG}))(x)
    assert_same(ref, got)
    assert fallbacks("sort") == {"no_transform": 1}
    ref_j = torch.func.jacrev(lambda t: ORIG["sort"](t).values)(x)
    got_j = torch.func.jacrev(lambda t: torch.sort(t).values)(x)
    assert_same(ref_j, got_j)


def test_jit_trace(kw, gen):
    x = make_values("ties", (4, 20), torch.float32, gen)

    def f(t):
        v, i = torch.sort(t, 1, True)
        return v, i, torch.topk(t, 3).indices, t.median(0).values

    kwker.reset_stats()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(f, (x,), check_trace=False)
    assert fallbacks("sort") == {"no_transform": 1} and fast_count("sort") == 0
    assert "aten::sort" in str(traced.graph) and "aten::topk" in str(traced.graph)
    y = make_values("ties", (4, 20), torch.float32, gen)
    v, i = ORIG["sort"](y, 1, True)
    ref = (v, i, ORIG["topk"](y, 3).indices, ORIG["median"](y, 0).values)
    got = traced(y)
    assert_same(ref, got)


# ------------------------------------------------------- ops with no kernel

def test_quantile_call_forms(kw, gen):
    """The argument forms of quantile/nanquantile (positional, keyword,
    Tensor method) reach the kernel; a bad q goes to torch, which raises."""
    x = make_values("ties", (6, 40), torch.float32, gen)
    q = torch.tensor([0.0, 0.25, 0.5, 0.9, 1.0])
    calls = [
        ("quantile", x, (q,), {}), ("quantile", x, (0.3, 1, True), {}),
        ("quantile", x, (q,), {"dim": 0, "interpolation": "nearest"}),
        ("quantile", x, (q,), {"dim": 1, "interpolation": "midpoint"}),
        ("nanquantile", x, (q, 1), {"interpolation": "lower"}),
        ("nanquantile", x, (0.5,), {"interpolation": "higher"}),
    ]
    for op, t, args, kwargs in calls:
        compare(op, t, *args, fast=True, **kwargs)
        compare(op, t, *args, method=True, fast=True, **kwargs)
    compare("quantile", x, 1.5, fast="arguments")
    xn = x.clone()
    xn[::2, ::3] = float("nan")
    compare("nanquantile", xn, q, 1, fast=True)
    compare("quantile", xn, q, 1, fast=True)


# ------------------------------------------------------ small-input crossover

_ARGS = {"sort": (0,), "argsort": (0, True), "msort": (), "topk": (1,), "median": (0,),
         "nanmedian": (0, True), "kthvalue": (1,), "quantile": (0.5,), "nanquantile": (0.5,),
         "unique": ()}


_SHORT_ROW_ARGS = {"sort": (-1,), "argsort": (-1, True), "topk": (1,), "median": (-1,),
                   "nanmedian": (-1, True), "kthvalue": (1,)}


@pytest.mark.real_thresholds
def test_small_inputs_go_to_torch(kw, gen):
    """Below kwker's measured crossover (support.MIN_FAST_NUMEL) calls go
    straight to torch ('small'); from the crossover on the kernel runs.  Both
    sides give torch's exact result."""
    thresholds = getattr(support, "MIN_FAST_NUMEL", None)
    if not thresholds:
        pytest.skip("this kwker has no small-input crossover")
    assert "small" in {c.key for c in support.ALL_CONDITIONS}
    for op, n in thresholds.items():
        assert n >= 0 and op in _ARGS, op
        if n <= 1:
            continue
        rule = support.SIZE_RULES[op]
        below = make_values("ties", (n - 1,), torch.float32, gen)
        compare(op, below, *_ARGS[op], fast="small")
        compare(op, below, *_ARGS[op], method=True, fast="small")
        if rule.max_row:
            # rows longer than max_row go to torch whatever the size
            at = make_values("ties", (n // rule.max_row, rule.max_row), torch.float32, gen)
            compare(op, at, *_ARGS[op])
            compare(op, at.reshape(1, -1), *_ARGS[op], fast="small")
        else:
            at = make_values("ties", (n,), torch.float32, gen)
            compare(op, at, *_ARGS[op])
            if op != "msort":  # msort sorts dim 0: rows of 1 are short rows
                compare(op, at.reshape(1, n), *(_ARGS[op][:1] if op in ("topk", "kthvalue") else ()))
        # short rows need more elements before the kernel wins
        if rule.min_numel_short > n:
            rows = (n // rule.short_row, rule.short_row)
            if op == "msort":  # msort's rows run along dim 0
                compare(op, make_values("ties", rows[::-1], torch.float32, gen), fast="small")
            else:
                short = make_values("ties", rows, torch.float32, gen)
                compare(op, short, *_SHORT_ROW_ARGS[op], fast="small")
        # rows shorter than min_row go to torch at any size
        if rule.min_row > 1 and op != "msort":
            tiny_rows = make_values("ties", (4 * max(n, rule.min_numel_short), rule.min_row - 1),
                                    torch.float32, gen)
            compare(op, tiny_rows, *_SHORT_ROW_ARGS[op], fast="small")
        # small wins over every other reason, and torch still decides
        compare(op, below.requires_grad_(), *_ARGS[op], fast="small")
        compare(op, below.detach(), 5, fast="small")  # dim out of range: IndexError
    x = torch.tensor([3.0, 1.0, 2.0])
    kwker.reset_stats()
    assert_same(ORIG["sort"](input=x), torch.sort(input=x))
    assert fallbacks("sort") == {"small": 1}


@pytest.mark.real_thresholds
def test_unsorted_topk_nth_branch_rule(kw, gen):
    """topk(sorted=False) through torch's nth_element branch (k > 1, k * 64 >
    row) in torch's order: rows shorter than nth_min_row, and int64 rows, go
    to torch ('small') at any size; the rest, sorted=True, k = 1 and
    ties="stable" run the kernel.  Every call gives torch's exact result."""
    rule = support.SIZE_RULES["topk"]
    assert rule.nth_min_row > 2 and rule.nth_int64
    n = 4 * rule.min_numel
    short = make_values("ties", (n // 8, 8), torch.float32, gen)
    compare("topk", short, 2, sorted=False, fast="small")
    # (not this rule's: tied rows of 8 go to torch by the kernel's probe)
    compare("topk", short, 2, sorted=True, fast="torch_rows")
    compare("topk", short, 1, sorted=False, fast="torch_rows")
    compare("topk", make_values("random", short.shape, torch.float32, gen), 2, sorted=True)
    at_bound = make_values("ties", (n // rule.nth_min_row, rule.nth_min_row), torch.bfloat16, gen)
    compare("topk", at_bound, 4, sorted=False)
    compare("topk", at_bound[:, :rule.nth_min_row - 1].contiguous(), 3, sorted=False, fast="small")
    rows = make_values("ties", (rule.min_numel // 64, 64), torch.float32, gen)
    compare("topk", rows, 4, sorted=False)
    compare("topk", rows, 4, -1, True, False, method=True)
    wide = make_values("ties", (n // 64, 64), torch.int64, gen)
    compare("topk", wide, 4, sorted=False, fast="small")
    # (not this rule's: tied integer rows go to torch by the kernel's probe)
    compare("topk", wide, 4, sorted=True, fast="torch_rows")
    compare("topk", wide.double(), 4, sorted=False)
    compare("topk", wide, 1, sorted=False)
    with kwker.installed(ties="stable"):
        x = short.clone()
        kwker.reset_stats()
        got = torch.topk(x, 2, sorted=False)
        assert kwker.stats()["topk"] == {"fast": 1, "fallback": {}}
        assert torch.equal(got.values.sort(-1, descending=True).values,
                           ORIG["topk"](x, 2).values)
    with kwker.installed(use_fast=True):
        compare("topk", short, 2, sorted=False)
        compare("topk", wide, 4, sorted=False)


@pytest.mark.real_thresholds
def test_topk_probe_leaves_short_rows_to_torch(kw, gen):
    """topk in torch's order over many short rows: the kernel looks at the
    first rows and leaves the call to torch ('torch_rows') where torch is
    the faster: rows of <= 16 whose best keys tie (sorted=True or k = 1),
    rows already in order (sorted=False).  Random rows, longer tied rows,
    ties="stable" and use_fast=True run the kernel.  Every result is
    torch's."""
    assert support.SIZE_RULES["topk"].probe_rows
    for dtype in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8,
                  torch.float64, torch.float32, torch.bfloat16, torch.float16):
        tied = torch.randint(0, 4, (4096, 8), generator=gen).to(dtype)
        compare("topk", tied, 2, fast="torch_rows")
        compare("topk", tied, 1, largest=False, fast="torch_rows")
        compare("topk", tied, 1, sorted=False, fast="torch_rows")
        in_order = (torch.rand(4096, 16, generator=gen) * 100).sort(-1).values.to(dtype)
        unsorted_rule = "small" if dtype is torch.int64 else "torch_rows"  # (nth_int64 first)
        compare("topk", in_order, 4, sorted=False, fast=unsorted_rule)
        compare("topk", in_order.flip(-1), 3, sorted=False, fast=unsorted_rule)
        if dtype.is_floating_point:
            compare("topk", torch.randn(4096, 16, generator=gen).to(dtype), 4)
    rnd = torch.randn(4096, 16, generator=gen)
    compare("topk", rnd, 4, sorted=False)
    compare("topk", rnd.sort(-1).values, 4)  # float32 in order, sorted=True: the network
    past_16 = torch.randint(0, 4, (300, 32), generator=gen)
    compare("topk", past_16, 2, fast="torch_rows")  # integer rows to 64 are probed for ties
    compare("topk", past_16.float(), 2)  # float rows past 16 are not
    compare("topk", past_16, 1)  # nor k = 1 past 16
    tied = torch.randint(0, 4, (4096, 8), generator=gen)
    compare("topk", tied[:, ::2], 2, fast="torch_rows")  # strided rows are probed too
    compare("topk", tied.t().contiguous(), 2, dim=0)  # rows along dim 0 are not
    with kwker.installed(ties="stable"):
        compare("topk", tied, 2, reference=_stable_topk)
    with kwker.installed(use_fast=True):
        compare("topk", tied, 2)
        compare("topk", rnd.sort(-1).values, 4, sorted=False)


def _stable_topk(x, k, largest=True, sorted=True):
    values, indices = ORIG["sort"](x, dim=-1, descending=largest, stable=True)
    return torch.return_types.topk((values[..., :k].contiguous(), indices[..., :k].contiguous()))


def _stable_sort(x, dim=-1, descending=False):
    return ORIG["sort"](x, dim=dim, descending=descending, stable=True)


def _stable_argsort(x, dim=-1, descending=False):
    return _stable_sort(x, dim, descending).indices


def _stable_kthvalue(x, k, dim=-1):
    values, indices = _stable_sort(x, dim)
    return torch.return_types.kthvalue((values[..., k - 1], indices[..., k - 1]))


@pytest.mark.real_thresholds
def test_stable_ties_keep_small_calls(gen):
    """Under ties="stable" the size rules do not send the ops whose result
    shows the order of equal elements (support.TIE_ORDER_OPS) to torch,
    whose answer would be its own order: a sort of 64 sequence lengths
    (pack_padded_sequence's, below every op's crossover) runs the kernel
    and gives the stable order, as do topk, kthvalue, msort and argsort of
    such rows and rows the row-shape rules name; median (whose index is the
    stable rank either way) and unique keep the rules.  Under ties="torch"
    the same calls go to torch ('small')."""
    lengths = torch.randint(1, 9, (64,), generator=gen)
    short_rows = torch.randint(0, 4, (6, 5), generator=gen).float()
    assert lengths.numel() < min(support.MIN_FAST_NUMEL[op] for op in support.TIE_ORDER_OPS)
    with kwker.installed():
        compare("sort", lengths, descending=True, fast="small")
        compare("median", lengths.float(), fast="small")
    with kwker.installed(ties="stable"):
        for descending in (False, True):
            compare("sort", lengths, descending=descending, reference=_stable_sort)
            compare("argsort", lengths, descending=descending, reference=_stable_argsort)
            compare("sort", short_rows, descending=descending, reference=_stable_sort)
        compare("msort", lengths.float().reshape(8, 8),
                reference=lambda x: _stable_sort(x, 0).values)
        compare("topk", lengths, 5, reference=_stable_topk)
        compare("topk", short_rows, 2, reference=_stable_topk)
        compare("kthvalue", lengths, 20, reference=_stable_kthvalue)
        compare("median", lengths.float(), fast="small")
        compare("unique", lengths, fast="small")


# ------------------------------------------------------------ completeness

def _trigger(key, x, monkeypatch):
    """One real call that fails the condition `key` (torch's result or
    exception is compared by compare())."""
    big = torch.randn(3, 200)
    if key == "small":
        def call():
            with monkeypatch.context() as m:
                m.setitem(support.MIN_FAST_NUMEL, "sort", 64)
                compare("sort", torch.randn(3), fast="small")
        return call
    if key == "no_transform":
        def call():
            with Recorder():
                compare("sort", big, fast="no_transform")
        return call
    if key == "denormals":
        def call():
            if not torch.set_flush_denormal(True):
                return  # this CPU cannot flush (tests/test_flush_denormal.py skips too)
            try:
                compare("sort", big, fast="denormals")
            finally:
                torch.set_flush_denormal(False)
        return call
    if key == "torch_rows":
        def call():
            with monkeypatch.context() as m:
                m.setitem(support.SIZE_RULES, "topk", support.SizeRule(0, probe_rows=True))
                compare("topk", torch.randint(0, 4, (4096, 8)), 2, fast="torch_rows")
        return call
    if key == "use_fast":
        def call():
            with kwker.installed(use_fast=False):
                compare("sort", big, fast="use_fast")
                compare("topk", big, 2, method=True, fast="use_fast")
                compare("unique", big, fast="use_fast")
        return call
    return {
        "arguments": lambda: compare("sort", big, np.int64(0), fast="arguments"),
        "plain_tensor": lambda: compare("topk", big.as_subclass(MyTensor), 2,
                                        fast={"plain_tensor"}),
        "cpu_dense": lambda: compare("sort", big.to("meta"), fast="cpu_dense"),
        "no_grad": lambda: compare("median", big.clone().requires_grad_(), fast="no_grad"),
        "dtype": lambda: compare("topk", big > 0, 1, fast="dtype"),
        "dim": lambda: compare("sort", big, 3, fast="dim"),
        "nonempty": lambda: compare("sort", big[:, :0], fast="nonempty"),
        "torch_raises": lambda: compare("sort", torch.zeros(40000, dtype=torch.uint32),
                                        fast="torch_raises"),
        "tie_bits": lambda: compare("quantile", torch.tensor([0.0, -0.0, 0.0, -0.0, 1.0]), 0.25,
                                    interpolation="lower", fast="tie_bits"),
        "unique_dim": lambda: compare("unique", torch.rand(5, 3), dim=0,
                                      fast="unique_dim"),
        # the library missing: test_patching.test_native_library_missing_subprocess
        "native": None,
    }[key]


def test_every_condition_is_triggered(kw, x, monkeypatch):
    """A new Condition in kwker.support fails this test until a real call
    triggering it is added here.  (With the real small-input crossover an
    empty input is always 'small', so 'nonempty' is reached with the
    crossover at 0, as in every test not marked real_thresholds.)"""
    for condition in support.ALL_CONDITIONS:
        trigger = _trigger(condition.key, x, monkeypatch)
        if trigger is not None:
            trigger()


def test_unbound_method_and_input_keyword(kw, gen):
    """torch.Tensor.sort(x, ...) through the class takes the fast path like
    x.sort(...); torch.sort(input=x) is left to torch."""
    x = make_values("ties", (4, 100), torch.float32, gen)
    for op, args in [("sort", (0, True)), ("topk", (3,)), ("median", (1,)), ("argsort", ()),
                     ("msort", ()), ("nanmedian", ())]:
        kwker.reset_stats()
        assert_same(ORIG_METHOD[op](x, *args), getattr(torch.Tensor, op)(x, *args))
        assert fast_count(op) == 1, (op, kwker.stats())
    for op, kwargs in [("sort", {"dim": 0}), ("topk", {"k": 2}), ("median", {"dim": 1}),
                       ("argsort", {"descending": True})]:
        kwker.reset_stats()
        ref = run(ORIG[op], input=x, **kwargs)
        got = run(getattr(torch, op), input=x, **kwargs)
        assert ref[0] == got[0] == "ok"
        assert_same(ref[1], got[1])
        assert fast_count(op) == 0 and fallbacks(op) == {"arguments": 1}
