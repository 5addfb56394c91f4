"""torch.ops.kwker: results against torch's stable order, errors, out=
forms, opcheck, autograd, vmap / torch.func, torch.compile and torch.export.

References come from torch itself: sort(stable=True) (and its prefix for
topk, its rank k-1 for kthvalue), torch.median/nanmedian (whose CPU kernel
orders equal elements by index), torch.unique, torch.quantile.
"""
import contextlib
import warnings

import pytest
import torch
from torch.autograd import gradcheck, gradgradcheck
from torch.library import opcheck

import kwker.torch_ops as kto
from kwker import _native
from kwker.torch_ops import eager
from kwker_testing import (ORIG, ORIG_METHOD, SELECT_DTYPES, SORT_DTYPES, assert_same, bits,
                           layout, make_values, run)

K = torch.ops.kwker

pytestmark = pytest.mark.skipif(not _native.available(), reason="native library not loaded")


# -------------------------------------------------------------- references

def _dense(t):
    """A fresh tensor with contiguous strides (what topk and kthvalue return)."""
    return t.clone(memory_format=torch.contiguous_format)


def ref_sort(x, dim=-1, descending=False):
    return tuple(ORIG["sort"](x, dim=dim, descending=descending, stable=True))


def ref_topk(x, k, dim=-1, largest=True, sorted=True):
    if x.dim() == 0:
        return tuple(ORIG["topk"](x, k, dim, largest, sorted))
    v, i = ref_sort(x, dim, largest)
    return _dense(v.narrow(dim, 0, k)), _dense(i.narrow(dim, 0, k))


def ref_kthvalue(x, k, dim=-1, keepdim=False):
    if x.dim() == 0:
        return tuple(ORIG["kthvalue"](x, k, dim, keepdim))
    v, i = ref_sort(x, dim)
    v, i = v.narrow(dim, k - 1, 1), i.narrow(dim, k - 1, 1)
    if not keepdim:
        v, i = v.squeeze(dim), i.squeeze(dim)
    return _dense(v), _dense(i)


def ref_median_dim(x, dim, keepdim=False, nan=False):
    # torch's CPU median(dim) picks stable rank (n-1)//2 or the first NaN;
    # a contiguous copy avoids its bug on expanded inputs
    values, indices = (ORIG["nanmedian"] if nan else ORIG["median"])(x.contiguous(), dim, keepdim)
    if nan and x.dim() and x.is_floating_point() and x.numel():
        # kwker's rule for an all-NaN row: its first NaN (torch: any NaN)
        all_nan = x.isnan().all(dim, keepdim=True)
        first = x.narrow(dim, 0, 1)
        if not keepdim:
            all_nan, first = all_nan.squeeze(dim), first.squeeze(dim)
        torch.where(all_nan, first, values, out=values)
        indices.masked_fill_(all_nan, 0)
    return values, indices


def assert_result(expected, got, what):
    """assert_same, except that the strides of empty tensors are not
    compared (they hold nothing; torch's own ops disagree on them)."""
    if isinstance(expected, tuple) and expected and expected[0].numel() == 0 or \
            isinstance(expected, torch.Tensor) and expected.numel() == 0:
        pairs = zip(expected, got) if isinstance(expected, tuple) else [(expected, got)]
        for e, g in pairs:
            assert (e.dtype, e.shape) == (g.dtype, g.shape), what
        return
    assert_same(expected, got, what)


def _canon(result):
    return tuple(result) if isinstance(result, tuple) else result


# op name -> (kwker call, reference, per-input argument lists)
def _dim_args(x):
    return [(d,) for d in range(-1, max(x.dim(), 1))] if x.dim() else [(-1,), (0,)]


def _sort_args(x):
    return [a + (desc,) for a in _dim_args(x) for desc in (False, True)]


def _topk_args(x):
    out = []
    for (d,) in _dim_args(x):
        n = x.shape[d] if x.dim() else 1
        for k in sorted({0, 1, n // 2, n}):
            out += [(k, d, True, True), (k, d, False, True), (k, d, True, False)]
    return out


def _kth_args(x):
    out = []
    for (d,) in _dim_args(x):
        n = x.shape[d] if x.dim() else 1
        for k in sorted({1, (n + 1) // 2, n}):
            if 1 <= k <= n:
                out += [(k, d, False), (k, d, True)]
    return out


def _median_args(x):
    return [(d, keep) for (d,) in _dim_args(x) for keep in (False, True)]


OPS = {
    "sort": (K.sort, ref_sort, _sort_args),
    "sort_values": (K.sort_values, lambda x, *a: ref_sort(x, *a)[0], _sort_args),
    "argsort": (K.argsort, lambda x, *a: ref_sort(x, *a)[1], _sort_args),
    "topk": (K.topk, ref_topk, _topk_args),
    "kthvalue": (K.kthvalue, ref_kthvalue, _kth_args),
    "median.dim": (K.median, ref_median_dim, _median_args),
    "nanmedian.dim": (K.nanmedian, lambda x, *a: ref_median_dim(x, *a, nan=True),
                      _median_args),
    "median": (K.median, ORIG["median"], lambda x: [()]),
    "nanmedian": (K.nanmedian, ORIG["nanmedian"], lambda x: [()]),
}
DTYPES = {name: SORT_DTYPES if name in ("sort", "sort_values", "argsort") else SELECT_DTYPES
          for name in OPS}
SHAPES = [(), (0,), (1,), (17,), (5, 33), (3, 4, 6), (2, 0, 3), (2, 3, 2, 5)]


@contextlib.contextmanager
def composite_path(enabled):
    """The CPU kernels without the native library: the composition of
    torch's ops that other devices use too."""
    if not enabled:
        yield
        return
    saved = eager._LOADED
    eager._LOADED = False
    try:
        yield
    finally:
        eager._LOADED = saved


def _inputs(dtype, gen, kinds=("random", "ties", "equal", "nan", "special", "bf16ties")):
    for shape in SHAPES:
        for kind in kinds:
            if kind == "equal" and not shape:
                continue
            x = make_values(kind, shape, dtype, gen)
            for lay in ("contiguous", "transposed", "step"):
                yield layout(x, lay)
    yield make_values("ties", (7,), dtype, gen).expand(3, 7)  # stride 0


# ----------------------------------------------------------- exactness

@pytest.mark.parametrize("composite", [False, True], ids=["native", "composite"])
@pytest.mark.parametrize("name", list(OPS))
def test_matches_stable_torch(name, composite, gen):
    op, ref, arg_lists = OPS[name]
    # the composition is dtype-agnostic torch code: a few dtypes suffice
    dtypes = [d for d in DTYPES[name] if not composite or d in (
        torch.uint8, torch.int64, torch.bfloat16, torch.float32)]
    with composite_path(composite):
        for dtype in dtypes:
            for x in _inputs(dtype, gen):
                for args in arg_lists(x):
                    what = f"{name}{args} {dtype} {tuple(x.shape)}"
                    expected, got = run(ref, x, *args), run(op, x, *args)
                    if expected[0] == "raise":  # e.g. a reduction over nothing
                        assert got[0] == "raise", what
                        assert type(got[1]) is type(expected[1]), (what, got[1], expected[1])
                    else:
                        assert got[0] == "ok", (what, got[1])
                        assert_result(expected[1], _canon(got[1]), what)


def test_tie_rule_examples():
    """The documented rule on hand-checkable rows: equal elements by index,
    NaN largest; median's lower median at stable rank, or the first NaN."""
    x = torch.tensor([2.0, 1.0, 2.0, float("nan"), 1.0, 2.0, float("nan")])
    assert K.topk(x, 3)[1].tolist() == [3, 6, 0]
    assert K.topk(x, 3, largest=False)[1].tolist() == [1, 4, 0]
    assert K.sort(x, descending=True)[1].tolist() == [3, 6, 0, 2, 5, 1, 4]
    assert K.kthvalue(x, 3)[1].item() == 0
    assert K.median(x, 0)[1].item() == 3
    assert K.nanmedian(x, 0)[1].item() == 0  # sorted non-NaN: 1 1 [2] 2 2
    all_nan = torch.tensor([[float("nan")] * 5] * 3)
    assert K.nanmedian(all_nan, 1)[1].tolist() == [0, 0, 0]
    y = torch.tensor([5, 5, 5, 5])
    assert K.topk(y, 2)[1].tolist() == [0, 1]
    assert K.median(y, 0)[1].item() == 1


@pytest.mark.parametrize("name", ["topk", "kthvalue", "median.dim", "nanmedian.dim"])
def test_other_device_composition_on_cpu(name, gen):
    """The kernels other devices get, run on CPU tensors."""
    any_kernel = eager.KERNELS[name][1]
    op, ref, arg_lists = OPS[name]
    for dtype in (torch.float32, torch.int32, torch.bfloat16):
        for x in _inputs(dtype, gen, kinds=("ties", "nan", "special")):
            if x.numel() == 0:
                continue
            for args in arg_lists(x):
                assert_result(ref(x, *args), _canon(any_kernel(x, *args)), f"{name}{args}")


def test_bfloat16_topk_keeps_nan_payloads():
    """torch.topk on bfloat16 returns canonical NaNs (float16/32/64 keep the
    payloads); kwker's values are the input's elements in every dtype."""
    payload = torch.tensor([0x7FC1, -0x40], dtype=torch.int16).view(torch.bfloat16)
    x = torch.cat([payload, torch.ones(2, dtype=torch.bfloat16)])
    canonical = torch.tensor([float("nan")] * 2, dtype=torch.bfloat16)
    assert torch.equal(bits(ORIG["topk"](x, 2).values), bits(canonical))
    assert torch.equal(bits(K.topk(x, 2)[0]), bits(payload))


def test_topk_sorted_false_is_sorted(gen):
    x = make_values("ties", (6, 300), torch.float32, gen)
    assert_same(ref_topk(x, 40), tuple(K.topk(x, 40, sorted=False)))


def test_positional_and_keyword_arguments_match_torch(gen):
    x = make_values("random", (4, 9), torch.float32, gen)
    assert_same(tuple(ORIG["topk"](x, 3, 0, False, True)), tuple(K.topk(x, 3, 0, False, True)))
    assert_same(tuple(ORIG["topk"](x, k=2, dim=1, largest=True)),
                tuple(K.topk(x, k=2, dim=1, largest=True)))
    assert_same(tuple(ORIG["kthvalue"](x, 2, dim=0, keepdim=True)),
                tuple(K.kthvalue(x, 2, dim=0, keepdim=True)))
    assert_same(tuple(ORIG["sort"](x, dim=0, descending=True)),
                tuple(K.sort(x, dim=0, descending=True)))
    # like torch.ops.aten.*, the operators return plain tuples
    assert type(K.topk(x, 3)) is tuple


ERROR_CALLS = [
    ("topk", lambda f, x: f(x, 10)),
    ("topk", lambda f, x: f(x, -1)),
    ("topk", lambda f, x: f(x, 1, 2)),
    ("topk", lambda f, x: f(x.bool(), 1)),
    ("topk", lambda f, x: f(x.to(torch.uint16), 1)),
    ("kthvalue", lambda f, x: f(x, 0)),
    ("kthvalue", lambda f, x: f(x, 6)),
    ("kthvalue", lambda f, x: f(x, 1, -3)),
    ("kthvalue", lambda f, x: f(x.bool(), 1)),
    ("kthvalue", lambda f, x: f(x[:, :0], 1)),
    ("sort", lambda f, x: f(x, 2)),
    ("argsort", lambda f, x: f(x, -3)),
    ("median", lambda f, x: f(x, 2)),
    ("median", lambda f, x: f(x[:, :0], 1)),
    ("median", lambda f, x: f(x.bool(), 1)),
    ("median", lambda f, x: f(x.bool())),
    ("nanmedian", lambda f, x: f(x.to(torch.uint32))),
]


@pytest.mark.parametrize("case", range(len(ERROR_CALLS)))
def test_errors_are_torchs(case):
    name, call = ERROR_CALLS[case]
    x = torch.randn(4, 5)
    with pytest.raises(Exception) as expected:
        call(ORIG[name], x)
    kw_op = getattr(K, name)
    with pytest.raises(type(expected.value)):
        call(kw_op, x)


# ------------------------------------------------------------- out= forms

OUT_CALLS = {
    "sort_out": (lambda x: (x, 1, True), ("values", "indices")),
    "sort_values_out": (lambda x: (x, 0), ("out",)),
    "argsort_out": (lambda x: (x, -1, True), ("out",)),
    "topk_out": (lambda x: (x, 3, 1, False), ("values", "indices")),
    "kthvalue_out": (lambda x: (x, 2, 0, True), ("values", "indices")),
    "median_out": (lambda x: (x, 1), ("values", "indices")),
    "nanmedian_out": (lambda x: (x, 0, True), ("values", "indices")),
    "median_all_out": (lambda x: (x,), ("out",)),
    "nanmedian_all_out": (lambda x: (x,), ("out",)),
}


def _functional_of(out_name):
    functional = kto.OUT[out_name][0]
    packet, _, overload = functional.partition(".")
    return getattr(getattr(K, packet), overload or "default")


def _empty_outs(names, x, shape=(0,)):
    return {n: torch.empty(shape, dtype=torch.int64 if n == "indices" or
                           (n == "out" and "argsort" in str(names)) else x.dtype)
            for n in names}


@pytest.mark.parametrize("name", list(OUT_CALLS))
def test_out_forms(name, gen):
    make_args, names = OUT_CALLS[name]
    x = make_values("ties", (6, 9), torch.float32, gen)
    x[2, 3] = float("inf")  # no NaN: opcheck compares without equal_nan (aten's ops fail too)
    op = getattr(K, name).default
    expected = _functional_of(name)(*make_args(x))
    expected = expected if isinstance(expected, tuple) else (expected,)
    dtypes = {n: e.dtype for n, e in zip(names, expected)}

    # empty outputs: resized silently, filled, returned
    outs = {n: torch.empty(0, dtype=dtypes[n]) for n in names}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = op(*make_args(x), **outs)
    got = got if isinstance(got, tuple) else (got,)
    for n, g, e in zip(names, got, expected):
        assert g is outs[n]
        assert torch.equal(bits(g), bits(e))

    # a non-empty output of the wrong shape: torch's deprecation warning
    outs = {n: torch.empty(1, 1, 1, 1, 1, dtype=dtypes[n]) for n in names}
    with pytest.warns(UserWarning, match="was resized"):
        op(*make_args(x), **outs)
    for n, e in zip(names, expected):
        assert torch.equal(bits(outs[n]), bits(e))

    # right shape but not contiguous: filled in place, strides kept
    outs = {}
    for n, e in zip(names, expected):
        big = torch.zeros(tuple(s * 2 for s in e.shape), dtype=e.dtype)
        outs[n] = big[tuple(slice(None, None, 2) for _ in e.shape)] if e.dim() else \
            torch.zeros((), dtype=e.dtype)
    strides = {n: o.stride() for n, o in outs.items()}
    op(*make_args(x), **outs)
    for n, e in zip(names, expected):
        assert outs[n].stride() == strides[n]
        assert torch.equal(bits(outs[n]), bits(e))

    # wrong dtype: torch's RuntimeError
    for wrong in names:
        outs = {n: torch.empty(0, dtype=dtypes[n]) for n in names}
        outs[wrong] = torch.empty(0, dtype=torch.int32)
        with pytest.raises(RuntimeError, match="Expected out tensor to have dtype"):
            op(*make_args(x), **outs)

    # autograd: refused, as aten's out= functions do
    xg = x.clone().requires_grad_()
    outs = {n: torch.empty(0, dtype=dtypes[n]) for n in names}
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        op(*make_args(xg), **outs)
    with torch.no_grad():
        op(*make_args(xg), **outs)

    outs = {n: torch.empty(0, dtype=dtypes[n]) for n in names}
    opcheck(op, make_args(x), outs,
            test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_dynamic"))


def test_out_form_compiles_and_exports(gen):
    def f(x, values, indices):
        torch.ops.kwker.topk_out(x, 3, values=values, indices=indices)
        return values * 2, indices

    x = make_values("ties", (5, 40), torch.float32, gen)
    v, i = torch.empty(5, 3), torch.empty(5, 3, dtype=torch.int64)
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    got = compiled(x, v, i)
    ref = ref_topk(x, 3)
    assert torch.equal(got[0], ref[0] * 2) and torch.equal(got[1], ref[1])
    assert torch.equal(v, ref[0])

    class M(torch.nn.Module):
        def forward(self, x):
            values = torch.empty(x.shape[0], 3)
            indices = torch.empty(x.shape[0], 3, dtype=torch.int64)
            torch.ops.kwker.topk_out(x, 3, values=values, indices=indices)
            return values, indices
    ep = torch.export.export(M(), (x,))
    assert_same(ref, tuple(ep.module()(x)))

    class WritesArguments(torch.nn.Module):
        def forward(self, x, values, indices):
            torch.ops.kwker.topk_out(x, 3, values=values, indices=indices)
            return values * 1, indices

    def transposed_outs():
        return torch.zeros(3, 5).t(), torch.zeros(3, 5, dtype=torch.int64).t()
    # non-contiguous outputs given as inputs: torch 2.13 exports them
    ep = torch.export.export(WritesArguments(), (x,) + transposed_outs())
    values, indices = transposed_outs()
    got = ep.module()(x, values, indices)
    assert torch.equal(got[0], ref[0]) and torch.equal(values, ref[0])
    assert torch.equal(indices, ref[1]) and values.stride() == (1, 5)


# ------------------------------------------------------------- opcheck

def _opcheck_inputs(gen):
    """A spread without NaN: opcheck compares eager and traced outputs
    without equal_nan, so aten.sort itself fails it on NaN input."""
    f64 = make_values("ties", (4, 7), torch.float64, gen)
    special = make_values("special", (3, 8), torch.float32, gen)
    return [
        f64.clone().requires_grad_(),
        special.masked_fill(special.isnan(), -0.0),
        layout(make_values("ties", (5, 6), torch.int64, gen), "transposed"),
        make_values("random", (), torch.float64, gen).requires_grad_(),
        make_values("random", (2, 3, 4), torch.bfloat16, gen),
    ]


OPCHECK_ARGS = {
    "sort": lambda x: [(x,), (x, 0, True)],
    "sort_values": lambda x: [(x, -1, True)],
    "argsort": lambda x: [(x, 0)],
    "topk": lambda x: [(x, 1), (x, min(2, x.shape[0]) if x.dim() else 1, 0, False, False)],
    "kthvalue": lambda x: [(x, 1, -1, True), (x, 1, 0)],
    "median.dim": lambda x: [(x, 0), (x, -1, True)],
    "nanmedian.dim": lambda x: [(x, -1)],
    "median": lambda x: [(x,)],
    "nanmedian": lambda x: [(x,)],
}


@pytest.mark.parametrize("name", list(OPCHECK_ARGS))
def test_opcheck(name, gen):
    packet, _, overload = name.partition(".")
    op = getattr(getattr(K, packet), overload or "default")
    for x in _opcheck_inputs(gen):
        utils = ("test_schema", "test_faketensor", "test_aot_dispatch_dynamic") + \
            (("test_autograd_registration",) if x.requires_grad else ())
        for args in OPCHECK_ARGS[name](x):
            opcheck(op, args, test_utils=utils)


@pytest.mark.parametrize("dim", [None, 0])
def test_opcheck_unique(dim, gen):
    x = make_values("ties", (6, 5), torch.int64, gen)
    xf = make_values("bf16ties", (6, 5), torch.float64, gen).requires_grad_()
    for inp in (x, xf):
        for flags in ((True, False, False), (True, True, True), (False, True, False)):
            if dim is None:
                opcheck(K.unique.default, (inp,) + flags)
            else:
                opcheck(K.unique_dim.default, (inp, dim) + flags)


def test_meta_tensors_have_torchs_shapes():
    m = torch.empty(4, 10, device="meta")
    calls = [("sort", (0, True)), ("topk", (3,)), ("topk", (2, 0, False)),
             ("kthvalue", (2, 0, True)), ("median", ()), ("median", (1,)),
             ("nanmedian", (0, True)), ("argsort", (1,))]
    for name, args in calls:
        ref, got = getattr(torch, name)(m, *args), getattr(K, name)(m, *args)
        ref = tuple(ref) if isinstance(ref, tuple) else (ref,)
        got = got if isinstance(got, tuple) else (got,)
        assert [(t.shape, t.dtype, t.device) for t in ref] == \
            [(t.shape, t.dtype, t.device) for t in got], name


# ---------------------------------------------------------------- autograd

DIFFERENTIABLE = {
    "sort": (lambda x: K.sort(x, 1, True)[0], lambda x: ORIG["sort"](x, 1, True).values),
    "sort_values": (lambda x: K.sort_values(x, 0), lambda x: ORIG["sort"](x, 0).values),
    "topk": (lambda x: K.topk(x, 3)[0], lambda x: ORIG["topk"](x, 3).values),
    "kthvalue": (lambda x: K.kthvalue(x, 2, 0)[0], lambda x: ORIG["kthvalue"](x, 2, 0).values),
    "median.dim": (lambda x: K.median(x, 1)[0], lambda x: ORIG["median"](x, 1).values),
    "nanmedian.dim": (lambda x: K.nanmedian(x, 0, True)[0],
                      lambda x: ORIG["nanmedian"](x, 0, True).values),
    "median": (lambda x: K.median(x), lambda x: ORIG["median"](x)),
    "nanmedian": (lambda x: K.nanmedian(x), lambda x: ORIG["nanmedian"](x)),
    "quantile": (lambda x: kto.quantile(x, torch.tensor([0.2, 0.75], dtype=x.dtype), 1),
                 lambda x: ORIG["quantile"](x, torch.tensor([0.2, 0.75], dtype=x.dtype), 1)),
    "nanquantile": (lambda x: kto.nanquantile(x, 0.4, 0, interpolation="midpoint"),
                    lambda x: ORIG["nanquantile"](x, 0.4, 0, interpolation="midpoint")),
}


@pytest.mark.parametrize("name", list(DIFFERENTIABLE))
def test_gradients(name, gen):
    ours, theirs = DIFFERENTIABLE[name]
    x = make_values("random", (5, 8), torch.float64, gen).requires_grad_()
    assert gradcheck(ours, (x,))
    assert gradgradcheck(ours, (x,))
    # tie-free input: the same gradient as torch's, bit for bit
    grad_out = torch.randn_like(ours(x))
    ours_grad, = torch.autograd.grad(ours(x), x, grad_out)
    theirs_grad, = torch.autograd.grad(theirs(x), x, grad_out)
    assert torch.equal(bits(ours_grad), bits(theirs_grad))
    # torch.func.grad and forward-mode AD agree with it
    assert torch.equal(torch.func.grad(lambda t: (ours(t) * grad_out).sum())(x.detach()),
                       ours_grad)
    tangent = torch.randn_like(x)
    import torch.autograd.forward_ad as fwAD
    with fwAD.dual_level():
        out = fwAD.unpack_dual(ours(fwAD.make_dual(x.detach(), tangent)))
    with fwAD.dual_level():
        ref = fwAD.unpack_dual(theirs(fwAD.make_dual(x.detach(), tangent)))
    assert torch.equal(out.primal, ref.primal) and torch.equal(out.tangent, ref.tangent)


def test_gradient_goes_to_the_returned_index(gen):
    x = make_values("ties", (4, 30), torch.float64, gen).requires_grad_()
    values, indices = K.topk(x, 5)
    grad_out = torch.randn_like(values)
    grad, = torch.autograd.grad(values, x, grad_out)
    expected = torch.zeros_like(x).scatter(1, indices, grad_out)
    assert torch.equal(grad, expected)
    values, indices = K.median(x, 1)
    grad, = torch.autograd.grad(values.sum(), x)
    assert torch.equal(grad, torch.zeros_like(x).scatter(1, indices[:, None], 1.0))


def test_median_all_gradient_is_torchs_on_ties():
    x = torch.tensor([1.0, 3.0, 2.0, 2.0, 5.0, 2.0], requires_grad=True)
    ours, = torch.autograd.grad(K.median(x), x)
    theirs, = torch.autograd.grad(ORIG["median"](x), x)
    assert torch.equal(ours, theirs)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_grad_mode_results_are_the_same(dtype, gen):
    """With a gradient wanted the values are recomputed from the indices:
    the same bits (NaN payloads too, in half precision) as without."""
    for lay in ("contiguous", "step"):
        x = layout(make_values("nan", (4, 30), dtype, gen), lay)
        xg = x.detach().requires_grad_()
        for name in ("sort", "sort_values", "topk", "kthvalue", "median.dim",
                     "nanmedian.dim"):
            op, ref, arg_lists = OPS[name]
            for args in arg_lists(x):
                got = _canon(op(xg, *args))
                first = got[0] if isinstance(got, tuple) else got
                assert first.requires_grad
                detached = tuple(t.detach() for t in got) if isinstance(got, tuple) \
                    else got.detach()
                assert_result(_canon(op(x, *args)), detached, f"{name}{args}")


# ------------------------------------------------------------ functorch

VMAP_CALLS = {
    "sort": lambda t: K.sort(t, 0, True),
    "sort_values": lambda t: K.sort_values(t, -1),
    "argsort": lambda t: K.argsort(t, 1),
    "topk": lambda t: K.topk(t, 2, 0, False),
    "kthvalue": lambda t: K.kthvalue(t, 3, -1, True),
    "median.dim": lambda t: K.median(t, 1),
    "nanmedian.dim": lambda t: K.nanmedian(t, 0, True),
    "median": lambda t: K.median(t),
    "nanmedian": lambda t: K.nanmedian(t),
}


@pytest.mark.parametrize("name", list(VMAP_CALLS))
def test_vmap(name, gen):
    fn = VMAP_CALLS[name]
    x = make_values("nan", (4, 5, 6), torch.float32, gen)
    for in_dim in (0, 1, 2):
        batched = x.movedim(0, in_dim)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no per-sample fallback warning
            got = torch.func.vmap(fn, in_dims=in_dim)(batched)
        per_sample = [fn(sample) for sample in x.unbind(0)]
        if isinstance(got, tuple):
            for j, g in enumerate(got):
                assert torch.equal(bits(g), bits(torch.stack([p[j] for p in per_sample])))
        else:
            assert torch.equal(bits(got), bits(torch.stack(per_sample)))
    # nested: over two batch dims at once
    nested = torch.func.vmap(torch.func.vmap(fn))(x.unsqueeze(0).expand(2, 4, 5, 6))
    flat = torch.func.vmap(fn)(x)
    first = nested[0] if isinstance(nested, tuple) else nested
    flat_first = flat[0] if isinstance(flat, tuple) else flat
    assert torch.equal(bits(first[1]), bits(flat_first))


def test_vmap_of_a_per_sample_0dim():
    x = torch.tensor([3.0, 1.0, 2.0])
    assert torch.equal(torch.func.vmap(lambda t: K.topk(t, 1)[0])(x), x)
    assert torch.equal(torch.func.vmap(lambda t: K.kthvalue(t, 1)[1])(x),
                       torch.zeros(3, dtype=torch.int64))
    with pytest.raises(IndexError):
        torch.func.vmap(lambda t: K.sort(t, 1))(x)


def test_vmap_of_grad(gen):
    x = make_values("random", (3, 4, 9), torch.float64, gen)
    per_sample = torch.func.vmap(torch.func.grad(lambda t: K.topk(t, 2)[0].sum()))(x)
    for sample, grad in zip(x.unbind(0), per_sample.unbind(0)):
        t = sample.clone().requires_grad_()
        expected, = torch.autograd.grad(K.topk(t, 2)[0].sum(), t)
        assert torch.equal(grad, expected)


# --------------------------------------------------- compile and export

def _all_ops(x):
    return (K.sort(x, 1, True), K.sort_values(x, 0), K.argsort(x), K.topk(x, 3),
            K.topk(x, 2, 0, False), K.kthvalue(x, 2, 1, True), K.median(x), K.median(x, 0),
            K.nanmedian(x), K.nanmedian(x, 1),
            kto.quantile(x, torch.tensor([0.25, 0.5], dtype=x.dtype), 1),
            kto.nanquantile(x, 0.5, interpolation="higher"))


def _flat(result):
    out = []
    for r in result:
        out.extend(r if isinstance(r, tuple) else (r,))
    return out


def _assert_all_same(ref, got):
    ref, got = _flat(ref), _flat(got)
    assert len(ref) == len(got)
    for i, (r, g) in enumerate(zip(ref, got)):
        assert r.dtype == g.dtype and r.shape == g.shape, i
        assert torch.equal(bits(r), bits(g)), i


@pytest.mark.parametrize("name", list(VMAP_CALLS) + ["quantile", "unique"])
def test_compile_fullgraph_dynamic(name, gen):
    """Every op under torch.compile(fullgraph=True, dynamic=True): no graph
    break, eager's results on two shapes (aot_eager: the fake kernels and
    AOT dispatch; Inductor runs in test_compile_inductor_all_ops)."""
    import torch._dynamo
    torch._dynamo.reset()
    fn = {"quantile": lambda t: kto.quantile(t, 0.3, 0, interpolation="linear"),
          "unique": lambda t: kto.unique(t, return_inverse=True, return_counts=True)}.get(
        name) or VMAP_CALLS[name]
    x = make_values("nan", (6, 9), torch.float32, gen)
    # unique's output size depends on the data: like torch.unique (and
    # nonzero) it stays in the graph with capture_dynamic_output_shape_ops
    config = torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True) \
        if name == "unique" else contextlib.nullcontext()
    with config:
        assert torch._dynamo.explain(fn)(x).graph_break_count == 0
        compiled = torch.compile(fn, fullgraph=True, dynamic=True, backend="aot_eager")
        for shape in ((6, 9), (7, 12)):
            y = make_values("nan", shape, torch.float32, gen)
            ref, got = fn(y), compiled(y)
            _assert_all_same(ref if isinstance(ref, tuple) else (ref,),
                             got if isinstance(got, tuple) else (got,))
    torch._dynamo.reset()


def test_kernels_run_eagerly_under_compile_are_not_traced(gen):
    """unique breaks the graph (without capture_dynamic_output_shape_ops)
    and runs eagerly inside the compiled function; Dynamo must not trace
    its kernels' Python frames (and break inside them)."""
    import torch._dynamo
    from torch._dynamo.utils import counters
    torch._dynamo.reset()
    counters.clear()

    def f(x):
        return kto.unique(x * 2, return_counts=True)[1] + 1

    x = make_values("ties", (6, 9), torch.float32, gen)
    assert torch.equal(torch.compile(f, backend="eager")(x), f(x))
    reasons = [reason.splitlines()[0] for reason in counters["graph_break"]]
    assert reasons == ["Dynamic shape operator"], reasons
    torch._dynamo.reset()


def test_compile_symbolic_k(gen):
    """k is a SymInt (as in aten's schemas): a k computed from a dynamic
    size stays symbolic, one graph for every size."""
    import torch._dynamo
    torch._dynamo.reset()

    def f(x):
        n = x.shape[1]
        return K.topk(x, n // 2)[0], K.kthvalue(x, n // 3 + 1, 1)[1]
    from torch._dynamo.utils import counters
    counters.clear()
    compiled = torch.compile(f, fullgraph=True, dynamic=True, backend="aot_eager")
    for shape in ((4, 10), (6, 17), (3, 31)):
        x = make_values("ties", shape, torch.float32, gen)
        _assert_all_same(f(x), compiled(x))
    assert counters["stats"]["unique_graphs"] == 1
    torch._dynamo.reset()


def test_compile_inductor_all_ops(gen):
    import torch._dynamo
    torch._dynamo.reset()
    compiled = torch.compile(_all_ops, fullgraph=True, dynamic=True)
    for shape in ((6, 9), (5, 13)):
        x = make_values("ties", shape, torch.float32, gen)
        _assert_all_same(_all_ops(x), compiled(x))
    torch._dynamo.reset()


def test_compile_training_step(gen):
    """Forward and backward through the ops in one compiled graph."""
    import torch._dynamo
    torch._dynamo.reset()

    def loss(x):
        return (K.topk(x, 3)[0].sum() + K.median(x, 1)[0].sum()
                + kto.quantile(x, 0.3, 1).sum())
    x = make_values("random", (4, 20), torch.float32, gen).requires_grad_()
    expected, = torch.autograd.grad(loss(x), x)
    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")
    got, = torch.autograd.grad(compiled(x), x)
    assert torch.equal(got, expected)
    torch._dynamo.reset()


@pytest.mark.parametrize("name", list(VMAP_CALLS) + ["quantile", "unique"])
def test_export(name, gen):
    fn = {"quantile": lambda t: kto.quantile(t, 0.3, 0, interpolation="nearest"),
          "unique": lambda t: kto.unique(t, return_counts=True)}.get(name) or VMAP_CALLS[name]

    class M(torch.nn.Module):
        def forward(self, x):
            return fn(x)
    x = make_values("ties", (6, 9), torch.float32, gen)
    batch = torch.export.Dim("batch", min=2, max=64)
    ep = torch.export.export(M(), (x,), dynamic_shapes=({0: batch},))
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    packet = "sort_values" if name == "quantile" else name.partition(".")[0]
    assert any(t.startswith(f"kwker.{packet}.") for t in targets), targets
    for shape in ((6, 9), (11, 9)):
        y = make_values("ties", shape, torch.float32, gen)
        ref, got = fn(y), ep.module()(y)
        _assert_all_same(ref if isinstance(ref, tuple) else (ref,),
                         got if isinstance(got, tuple) else (got,))


AOTI_CHILD = """
import sys
import torch
import kwker.torch_ops  # registers kwker::topk before the package loads
package, inputs = sys.argv[1], sys.argv[2]
scores = torch.load(inputs)
values, indices = torch._inductor.aoti_load_package(package)(scores)
expected = torch.topk(scores, 10, -1, True, True)
assert torch.equal(values, expected.values) and torch.equal(indices, expected.indices)
print("AOTI OK")
"""


@pytest.mark.slow
def test_aoti_round_trip(tmp_path, gen):
    """export -> aoti_compile_and_package -> aoti_load_package in a fresh
    process (30-80 s: the C++ build of one small module)."""
    import subprocess
    import sys

    class TopK(torch.nn.Module):
        def forward(self, scores):
            return torch.ops.kwker.topk(scores, 10, -1, True, True)
    scores = make_values("random", (8, 1000), torch.float32, gen)
    ep = torch.export.export(TopK(), (scores,))
    package = torch._inductor.aoti_compile_and_package(
        ep, package_path=str(tmp_path / "topk.pt2"))
    torch.save(scores, tmp_path / "scores.pt")
    child = subprocess.run([sys.executable, "-c", AOTI_CHILD, package,
                            str(tmp_path / "scores.pt")],
                           capture_output=True, text=True, timeout=300)
    assert child.returncode == 0, child.stderr[-3000:]
    assert "AOTI OK" in child.stdout


# ------------------------------------------------- unique and quantile

def _same_numbers(r, g):
    """Equal as numbers, NaN equal to NaN: the sign of a merged zero and
    which NaN lands in which NaN entry may differ from torch (documented)."""
    if not r.is_floating_point():
        return torch.equal(r, g)
    return torch.equal(r.isnan(), g.isnan()) and torch.equal(r.nan_to_num(0.0),
                                                              g.nan_to_num(0.0))


def _torch_unique_equal(x, kw):
    ref = ORIG["unique"](x, **kw)
    got = kto.unique(x, **kw)
    ref = ref if isinstance(ref, tuple) else (ref,)
    got = got if isinstance(got, tuple) else (got,)
    assert len(ref) == len(got)
    for r, g in zip(ref, got):
        assert r.dtype == g.dtype and r.shape == g.shape
    assert _same_numbers(ref[0], got[0])
    if kw.get("return_inverse"):
        r, g = ref[1], got[1]
        if "dim" in kw:
            assert torch.equal(r, g)
        else:
            nan = x.isnan() if x.is_floating_point() else torch.zeros_like(x, dtype=torch.bool)
            assert torch.equal(r[~nan], g[~nan])
            # each NaN is an entry of its own
            assert got[0][g[nan]].isnan().all() and g[nan].unique().numel() == nan.sum()
    if kw.get("return_counts"):
        assert torch.equal(ref[-1], got[-1])


@pytest.mark.parametrize("dtype", SORT_DTYPES)
def test_unique_matches_torch(dtype, gen):
    for shape in ((0,), (1,), (40,), (6, 7)):
        for kind in ("ties", "random", "special"):
            x = make_values(kind, shape, dtype, gen)
            for kw in ({}, {"return_inverse": True}, {"return_counts": True},
                       {"return_inverse": True, "return_counts": True, "sorted": False}):
                _torch_unique_equal(x, kw)
                if len(shape) == 2:
                    _torch_unique_equal(x, dict(kw, dim=1))


def test_unique_of_few_values_by_hashing(gen, hash_spy):
    """Inputs of few distinct values take unique's hashing pass and give
    torch's result; those it declines (both zero signs: the merged zero's
    sign is an order's) give the stable sort's."""
    from kwker.ops import unique as unique_ops
    taken = hash_spy
    for dtype in (torch.float32, torch.int64, torch.uint8, torch.bfloat16):
        for shape in ((300,), (20, 30), (5000,)):
            x = make_values("ties", shape, dtype, gen)
            if dtype.is_floating_point:
                x = x.abs()  # one zero sign: nobody's order shows
            for kw in ({}, {"return_inverse": True}, {"return_counts": True},
                       {"return_inverse": True, "return_counts": True}):
                _torch_unique_equal(x, kw)
                taken.clear()
                ref = ORIG["unique"](x, **kw)
                got = kto.unique(x, **kw)
                for r, g in zip(ref if isinstance(ref, tuple) else (ref,),
                                got if isinstance(got, tuple) else (got,)):
                    assert torch.equal(bits(r), bits(g))
                assert taken == ([True] if kw or x.numel() >= unique_ops.HASH_MIN_NUMEL_VALUES
                                 else []), (dtype, shape, kw)
    x = torch.tensor([0.0, -0.0, 2.0] * 200)  # declined: -0.0 merges into the first zero, +0.0
    taken.clear()
    values, inverse, counts = kto.unique(x, return_inverse=True, return_counts=True)
    assert taken == [False] and torch.equal(bits(values), bits(torch.tensor([0.0, 2.0])))
    assert counts.tolist() == [400, 200] and inverse[:3].tolist() == [0, 0, 1]


def test_unique_nan_entries_and_zero_sign():
    x = torch.tensor([float("nan"), 0.0, -0.0, 1.0, float("nan"), 0.0])
    values, inverse, counts = kto.unique(x, return_inverse=True, return_counts=True)
    assert torch.equal(bits(values[:2]), bits(torch.tensor([0.0, 1.0])))  # +0.0 comes first
    assert values[2:].isnan().all() and len(values) == 4
    assert inverse.tolist() == [2, 0, 0, 1, 3, 0]
    assert counts.tolist() == [3, 1, 1, 1]


QUANTILE_QS = (0.0, 0.37, 1.0, [0.0, 0.5, 0.9, 1.0])


@pytest.mark.parametrize("interpolation", ["linear", "lower", "higher", "midpoint", "nearest"])
@pytest.mark.parametrize("fn", ["quantile", "nanquantile"])
def test_quantile_matches_torch(fn, interpolation, gen):
    ours, theirs = getattr(kto, fn), ORIG[fn]
    for dtype in (torch.float32, torch.float64):
        for kind in ("random", "ties", "nan"):
            x = make_values(kind, (5, 6, 7), dtype, gen)
            for q in QUANTILE_QS:
                qq = torch.tensor(q, dtype=dtype) if isinstance(q, list) else q
                for dim in (None, 0, 1, -1):
                    for keepdim in (False, True):
                        ref = theirs(x, qq, dim, keepdim, interpolation=interpolation)
                        got = ours(x, qq, dim, keepdim, interpolation=interpolation)
                        assert ref.shape == got.shape and ref.dtype == got.dtype
                        torch.testing.assert_close(got, ref, rtol=0, atol=0, equal_nan=True)


def test_quantile_out_and_errors(gen):
    x = make_values("random", (4, 5), torch.float32, gen)
    out = torch.empty(0)
    assert kto.quantile(x, 0.5, 1, out=out) is out
    assert torch.equal(out, ORIG["quantile"](x, 0.5, 1))
    bad = [
        lambda f: f(x, 1.5), lambda f: f(x, torch.tensor([0.5, 2.0])),
        lambda f: f(x, torch.tensor([[0.5]])), lambda f: f(x.double(), 0.5, out=torch.empty(0)),
        lambda f: f(x.int(), 0.5), lambda f: f(x, torch.tensor(0.5, dtype=torch.float64)),
        lambda f: f(x[:0], 0.5), lambda f: f(x, 0.5, 2), lambda f: f(x, 0.5, interpolation="x"),
    ]
    for call in bad:
        with pytest.raises(Exception) as expected:
            call(ORIG["quantile"])
        with pytest.raises(type(expected.value)):
            call(kto.quantile)


# ------------------------------------------------------- under install()

def test_compile_of_patched_torch_calls_has_no_graph_break(kw, gen):
    """While kwker is installed, user code calling torch.sort/topk still
    compiles to one graph (there torch's own ops run: kwker's patch steps
    aside under tracing)."""
    import torch._dynamo
    torch._dynamo.reset()

    def user_code(x):
        v, i = torch.sort(x, dim=-1)
        t = x.topk(3)
        return v * 2, i, t.values, torch.median(x, 1).values, torch.quantile(x, 0.5)
    x = make_values("random", (8, 20), torch.float32, gen)
    explanation = torch._dynamo.explain(user_code)(x)
    assert explanation.graph_break_count == 0 and explanation.graph_count == 1
    compiled = torch.compile(user_code, fullgraph=True, dynamic=True, backend="aot_eager")
    for shape in ((8, 20), (5, 31)):
        y = make_values("random", shape, torch.float32, gen)
        ref = (ORIG["sort"](y, dim=-1)[0] * 2, ORIG["sort"](y, dim=-1)[1],
               ORIG_METHOD["topk"](y, 3).values, ORIG["median"](y, 1).values,
               ORIG["quantile"](y, 0.5))
        _assert_all_same(ref, compiled(y))
    torch._dynamo.reset()


def test_compiled_training_step_while_installed(kw, gen):
    import torch._dynamo
    torch._dynamo.reset()

    def loss(x):
        return (torch.sort(x, 1)[0][:, :3].sum() + x.topk(2)[0].sum()
                + torch.median(x, 0)[0].sum())
    x = make_values("ties", (8, 20), torch.float32, gen).requires_grad_()
    assert torch._dynamo.explain(loss)(x).graph_break_count == 0
    expected = (ORIG["sort"](x, 1)[0][:, :3].sum() + ORIG_METHOD["topk"](x, 2)[0].sum()
                + ORIG["median"](x, 0)[0].sum())
    expected_grad, = torch.autograd.grad(expected, x)
    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")
    got = compiled(x)
    got_grad, = torch.autograd.grad(got, x)
    assert torch.equal(got, expected) and torch.equal(got_grad, expected_grad)
    torch._dynamo.reset()


def test_operators_do_not_call_installed_wrappers(kw, gen):
    """Inside the kernels torch's own functions run, never the patched
    torch.sort/topk/...: the results stay kwker's stable ones and kwker's
    install() counters see nothing."""
    x = make_values("ties", (6, 40), torch.float32, gen)
    kwker_stats_before = kw.stats()
    with composite_path(True):
        for name in ("sort", "topk", "kthvalue", "median.dim", "nanmedian.dim", "median"):
            op, ref, arg_lists = OPS[name]
            for args in arg_lists(x)[:3]:
                assert_result(ref(x, *args), _canon(op(x, *args)), name)
        kto.unique(x, return_counts=True, dim=0)
    assert kw.stats() == kwker_stats_before


def test_import_does_not_load_dynamo():
    """import kwker.torch_ops stays cheap: torch._dynamo (about 3 s to
    import) is not pulled in by the registrations."""
    import subprocess
    import sys
    code = ("import sys, torch, kwker.torch_ops; "
            "assert torch.ops.kwker.topk(torch.arange(5.0), 2)[1].tolist() == [4, 3]; "
            "print('torch._dynamo' in sys.modules)")
    child = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=300)
    assert child.returncode == 0, child.stderr[-2000:]
    assert child.stdout.strip() == "False"
