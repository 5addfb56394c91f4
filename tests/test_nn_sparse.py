"""kwker.nn's sparse layers (sparsemax, entmax15, GroupSort, SortPooling):
forward values and gradients bit for bit against the plain-torch
references (kwker.nn.reference_sparse), edge cases, gradcheck, opcheck,
vmap, compile, the modules, and (opt-in) the entmax package itself."""
import os
import sys

import pytest
import torch
from torch.library import opcheck

import kwker.nn as knn
from kwker.nn import reference_sparse as R
from kwker.nn import sparse as S
from kwker.ops import sparse as native
from kwker.torch_ops import layers_sparse as L
from kwker_testing import bits, make_values

K = torch.ops.kwker
DTYPES = [torch.float32, torch.float64]
# `target` (each native kernel set in turn): a fixture in conftest.py


def _assert_same(ref, got):
    assert ref.dtype == got.dtype and ref.shape == got.shape
    assert torch.equal(bits(ref), bits(got)), (ref != got).nonzero()[:5].tolist()


def _forward_and_grad(fn, x, grad):
    x = x.detach().clone().requires_grad_()
    y = fn(x)
    (g,) = torch.autograd.grad(y, x, grad)
    return y.detach(), g


def _check_same_as_reference(fast, ref, x, gen):
    """Values and gradient bits; or the same kind of error."""
    try:
        want = ref(x.detach())
    except RuntimeError:
        with pytest.raises(RuntimeError):
            fast(x.detach())
        return
    grad = torch.randn(want.shape, generator=gen, dtype=want.dtype)
    ref_y, ref_g = _forward_and_grad(ref, x, grad)
    got_y, got_g = _forward_and_grad(fast, x, grad)
    _assert_same(ref_y, got_y)
    _assert_same(ref_g, got_g)


SIMPLEX = [("sparsemax", S.sparsemax, R.sparsemax), ("entmax15", S.entmax15, R.entmax15)]


# ------------------------------------------------- sparsemax and entmax15

@pytest.mark.parametrize("name,fast,ref", SIMPLEX, ids=[s[0] for s in SIMPLEX])
@pytest.mark.parametrize("dtype", DTYPES)
def test_simplex_equals_the_reference(name, fast, ref, dtype, target, gen):
    """Short rows (insertion sort), long ones (radix sort of the
    candidates), scales from nearly uniform to one-hot, ties."""
    for shape in ((64, 50), (9, 1), (5, 2), (6, 300), (3, 4000)):
        for scale in (0.01, 1.0, 8.0, 300.0):
            x = torch.randn(shape, generator=gen, dtype=dtype) * scale
            _check_same_as_reference(fast, ref, x, gen)
        _check_same_as_reference(fast, ref, make_values("ties", shape, dtype, gen), gen)


@pytest.mark.parametrize("name,fast,ref", SIMPLEX, ids=[s[0] for s in SIMPLEX])
def test_simplex_dims_and_layouts(name, fast, ref, gen):
    x = torch.randn(4, 6, 7, generator=gen, dtype=torch.float64)
    for dim in (0, 1, 2, -1, -3):
        f = lambda t: fast(t, dim)  # noqa: E731
        r = lambda t: ref(t, dim)  # noqa: E731
        _check_same_as_reference(f, r, x, gen)
        _check_same_as_reference(f, r, x.transpose(0, 2), gen)
        _check_same_as_reference(f, r, x[:, ::2], gen)


@pytest.mark.parametrize("name,fast,ref", SIMPLEX, ids=[s[0] for s in SIMPLEX])
@pytest.mark.parametrize("dtype", DTYPES)
def test_simplex_edge_values(name, fast, ref, dtype, gen):
    """-inf entries (zero probability), all-equal rows (uniform), one
    element, signed zeros; NaN or an infinite maximum make the reference
    fail, and so the operator."""
    inf, nan = float("inf"), float("nan")
    rows = [[0.0, -inf, 1.0, -inf], [2.0, 2.0, 2.0, 2.0], [-0.0, 0.0, -0.0, -1.0],
            [1e-30, -1e-30, 0.0, 1e30], [-inf, -inf, 3.0, -inf]]
    _check_same_as_reference(fast, ref, torch.tensor(rows, dtype=dtype), gen)
    _check_same_as_reference(fast, ref, torch.full((3, 1), 5.0, dtype=dtype), gen)
    for row in ([nan, 1.0], [inf, 1.0], [-inf, -inf]):
        _check_same_as_reference(fast, ref, torch.tensor([row], dtype=dtype), gen)


@pytest.mark.parametrize("name,fast,ref", SIMPLEX, ids=[s[0] for s in SIMPLEX])
def test_simplex_empty_and_other_dtypes(name, fast, ref, gen):
    empty = torch.randn(0, 5, generator=gen)
    _assert_same(ref(empty), fast(empty))
    for dtype in (torch.bfloat16, torch.float16):
        x = torch.randn(3, 9, generator=gen).to(dtype)
        _check_same_as_reference(fast, ref, x, gen)


@pytest.mark.parametrize("dtype", DTYPES)
def test_simplex_values_around_the_kernels_cut(dtype, target, gen):
    """Rows crowded just above and below the kernel's candidate cut
    (x - max near -1 for sparsemax, near -3 for entmax15: z = (x - max) / 2
    near -1.5) and near the thresholds themselves, long and short."""
    for n in (7, 200, 5000):
        for centre in (-1.0, -3.0, -2.0, -0.5):
            x = centre + torch.randn(16, n, generator=gen, dtype=dtype) * 0.05
            x[:, 0] = 0.0
            for _, fast, ref in SIMPLEX:
                _check_same_as_reference(fast, ref, x, gen)


def test_simplex_kernel_support_size(gen):
    x = torch.randn(50, 30, generator=gen)
    out, support = K.sparsemax(x, -1)
    assert torch.equal(support, R.sparsemax_forward(x)[1])
    assert torch.equal(support, (out > 0).sum(-1, keepdim=True))


def test_simplex_rows_the_kernel_defers_run_the_reference(gen):
    """Row [0, -2]: entmax15's test at rho = 2 is an exact tie (tau = z =
    -1), the kernel leaves it to the reference (torch's square root could
    decide it differently); the other rows stay native.  A NaN row makes
    the reference, and so the operator, fail."""
    x = torch.tensor([[0.0, -2.0], [0.0, 1.0], [3.0, 1.0], [0.0, -2.0]])
    code = native.CODES[x.dtype]
    out, support, stats = torch.empty_like(x), torch.empty(4, dtype=torch.int64), \
        torch.empty(4, 2)
    assert native.lib.kwk_sparse_simplex_addr(code, 1, x.data_ptr(), 4, 2, out.data_ptr(),
                                              support.data_ptr(), stats.data_ptr()) \
        == native.lib.KWK_DEFER
    assert support.tolist()[0] == -1 and support.tolist()[3] == -1 and support[1] > 0
    _assert_same(R.entmax15_forward(x), native.simplex_rows(x, entmax=True)[0])
    _assert_same(R.entmax15_forward(x), S.entmax15(x))
    x = torch.randn(4, 6, generator=gen)
    x[2, 3] = float("nan")
    with pytest.raises(RuntimeError):
        native.simplex_rows(x, entmax=False)


@pytest.mark.parametrize("dtype", DTYPES)
def test_entmax15_backward_rows_take_torchs_square_root(dtype, target, gen):
    """The native backward's gppr is torch's own sqrt of y (MKL's, which is
    not correctly rounded for some values: y is made of such values here,
    where numpy's root differs), with y's zeros kept as they are (+0.0 and
    -0.0), and gradients holding -0.0, inf and NaN: bits equal to the
    reference's, and equal through the operator's autograd."""
    import numpy as np
    y = torch.rand(40, 64, generator=gen, dtype=dtype) * 0.1
    rounded = torch.from_numpy(np.sqrt(y.numpy()))
    off = y.sqrt() != rounded  # where torch's root is not the correctly rounded one
    if dtype is torch.float32:
        assert off.any(), "no value where torch's sqrt differs: the check below proves less"
    y[torch.rand(y.shape, generator=gen) < 0.6] = 0.0
    y[3, :5] = -0.0
    y[5] = 0.0  # a row without support (its sums are 0 / 0)
    grad = torch.randn(y.shape, generator=gen, dtype=dtype)
    grad[1, 7], grad[2, 3], grad[4, 0] = -0.0, float("inf"), float("nan")
    for g, out in ((grad, y), (grad[:, :33].contiguous(), y[:, :33].contiguous()),
                   (grad[:1], y[:1])):
        _assert_same(R.entmax15_backward(g, out, -1), native.entmax15_backward_rows(g, out))
        _assert_same(R.entmax15_backward(g, out, -1), K.entmax15_backward(g, out, -1))
    # grads not in contiguous rows: the reference (its sums follow grad's layout)
    for gt in (grad.t().contiguous().t(), grad[:, :33]):
        out = y[:, :gt.shape[1]].contiguous()
        _assert_same(R.entmax15_backward(gt, out, -1), K.entmax15_backward(gt, out, -1))
    x = torch.randn(30, 50, generator=gen, dtype=dtype, requires_grad=True)
    _assert_same(*(torch.autograd.grad(f(x, -1), x, grad[:30, :50])[0]
                   for f in (R.entmax15, S.entmax15)))


@pytest.mark.parametrize("name", ["sparsemax", "entmax15"])
def test_simplex_gradcheck(name, gen):
    x = torch.randn(3, 7, generator=gen, dtype=torch.float64, requires_grad=True)
    fn = (lambda t: K.sparsemax(t, 0)[0]) if name == "sparsemax" else \
        (lambda t: K.entmax15(t, 0))
    assert torch.autograd.gradcheck(fn, (x,))
    if name == "sparsemax":
        # entmax15's backward takes sqrt(y): its derivative at y = 0 is
        # infinite, the reference's double backward gives NaN as well
        assert torch.autograd.gradgradcheck(fn, (x,))


# ------------------------------------------------------------- GroupSort

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("group_size", [1, 2, 3, 4, 8])
def test_group_sort_equals_the_reference(dtype, group_size, target, gen):
    for kind in ("random", "ties", "nan", "special"):
        for descending in (False, True):
            for dim in (-1, 0):
                x = make_values(kind, (24, 48), dtype, gen)
                f = lambda t: S.group_sort(t, group_size, dim, descending)  # noqa: E731
                r = lambda t: R.group_sort(t, group_size, dim, descending)  # noqa: E731
                _check_same_as_reference(f, r, x, gen)
                v, p = K.group_sort(x, group_size, dim, descending)
                rv, rp = R.group_sort_with_positions(x, group_size, dim, descending)
                assert torch.equal(p.long(), rp)


def test_group_sort_layouts_empty_and_errors(gen):
    x = make_values("ties", (6, 8, 4), torch.float32, gen)
    for t in (x.transpose(0, 2), x[:, ::2], x.permute(1, 0, 2)):
        _check_same_as_reference(lambda a: S.group_sort(a, 2, 1), lambda a: R.group_sort(a, 2, 1),
                                 t, gen)
    for kind in ("nan", "special", "ties"):  # an odd number of groups: a vector tail
        y = make_values(kind, (5, 12), torch.float32, gen)
        for g in (2, 4):
            for descending in (False, True):
                _check_same_as_reference(lambda a: S.group_sort(a, g, -1, descending),
                                         lambda a: R.group_sort(a, g, -1, descending), y, gen)
    empty = torch.randn(0, 4)
    _assert_same(R.group_sort(empty, 2), S.group_sort(empty, 2))
    _check_same_as_reference(lambda a: S.group_sort(a, 2), lambda a: R.group_sort(a, 2),
                             torch.randn(5, 6, generator=gen).bfloat16(), gen)
    with pytest.raises(ValueError):
        S.group_sort(torch.randn(3, 5), 2)
    with pytest.raises(ValueError):
        S.group_sort(torch.randn(3, 512), 512)


def test_group_sort_backward_takes_any_positions_as_the_reference(gen):
    """Positions that are not the forward's (int64, another shape, out of
    their group) give the reference's result or its error, never a read of
    the wrong bytes."""
    grad = torch.randn(6, 8, generator=gen)
    _, positions = K.group_sort(torch.randn(6, 8, generator=gen), 4, -1, False)
    want = L.group_sort_backward_any(grad, positions, 4, -1)
    assert torch.equal(K.group_sort_backward(grad, positions, 4, -1), want)
    assert torch.equal(K.group_sort_backward(grad, positions.long(), 4, -1), want)
    assert torch.equal(K.group_sort_backward(grad, positions[:1].expand(6, 8), 4, -1),
                       L.group_sort_backward_any(grad, positions[:1].expand(6, 8), 4, -1))
    bad = positions.clone()
    bad[2, 5] = 4
    with pytest.raises(RuntimeError, match="out of bounds"):
        L.group_sort_backward_any(grad, bad, 4, -1)
    with pytest.raises(RuntimeError, match="out of bounds"):
        K.group_sort_backward(grad, bad, 4, -1)


def test_group_sort_gradcheck(gen):
    x = torch.randn(4, 12, generator=gen, dtype=torch.float64, requires_grad=True)
    for g, dim in ((2, -1), (3, 1), (4, 0)):
        fn = lambda t: K.group_sort(t, g, dim, False)[0]  # noqa: E731
        assert torch.autograd.gradcheck(fn, (x,))
        assert torch.autograd.gradgradcheck(fn, (x,))


# ----------------------------------------------------------- SortPooling

POOL_CASES = [
    ((4, 10, 5), 3, None),
    ((4, 10, 5), 12, None),                      # N < k: zero rows after
    ((4, 10, 5), 6, [10, 2, 0, 7]),              # ragged graphs, one empty
    ((3, 1, 1), 2, [1, 0, 1]),
]


@pytest.mark.parametrize("dtype", DTYPES)
def test_sort_pool_equals_the_reference(dtype, target, gen):
    for shape, k, counts in POOL_CASES:
        for kind in ("random", "ties", "special", "nan"):
            x = make_values(kind, shape, dtype, gen)
            n = None if counts is None else torch.tensor(counts)
            f = lambda t: S.sort_pool(t, k, n)  # noqa: E731
            r = lambda t: R.sort_pool(t, k, n)  # noqa: E731
            if kind in ("random", "ties"):
                assert native.sort_pool(x, k, n if n is not None else
                                        torch.full((shape[0],), shape[1])) is not None
            _check_same_as_reference(f, r, x, gen)
            got, index = K.sort_pool(x, k, n)
            want, want_index = R.sort_pool_with_index(x, k, n) if (
                kind != "nan" or counts is None) else (got, index)
            assert torch.equal(index, want_index)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sort_pool_backward_op_takes_any_index_as_the_reference(dtype, target, gen):
    """torch.ops.kwker.sort_pool_backward (native for float32/float64): the
    reference's bits for indices of zero rows other than -1, and its error
    for an index past the nodes (the kernel refuses it, writing nothing)."""
    from kwker.torch_ops.layers_sparse import sort_pool_backward_any
    x = make_values("special", (3, 7, 4), dtype, gen)
    out, index = K.sort_pool(x, 5)
    grad = torch.randn(out.shape, generator=gen).to(dtype)
    index = index.clone()
    index[1, 2] = -5
    _assert_same(sort_pool_backward_any(grad, x, index, out),
                 K.sort_pool_backward(grad, x, index, out))
    index[2, 0] = 7
    with pytest.raises(RuntimeError) as want:
        sort_pool_backward_any(grad, x, index, out)
    with pytest.raises(RuntimeError) as got:
        K.sort_pool_backward(grad, x, index, out)
    assert str(got.value) == str(want.value)


def test_sort_pool_pyg_padding_rule(gen):
    """PyG pads with min(x) - 1 and zeroes every entry equal to it: a kept
    -inf (min - 1 = -inf) becomes 0, with no gradient; the kernel defers."""
    x = torch.randn(2, 5, 3, generator=gen)
    x[0, 1, 0] = -float("inf")
    x[0, 1, 2] = 10.0  # node 1 is kept first
    _check_same_as_reference(lambda t: S.sort_pool(t, 2), lambda t: R.sort_pool(t, 2), x, gen)
    assert S.sort_pool(x, 2)[0, 0] == 0


def test_sort_pool_gradcheck(gen):
    x = torch.randn(3, 6, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    n = torch.tensor([6, 2, 3])
    for k in (2, 4, 8):
        fn = lambda t: K.sort_pool(t, k, n)[0]  # noqa: E731
        assert torch.autograd.gradcheck(fn, (x,))
        assert torch.autograd.gradgradcheck(fn, (x,))


def test_sort_pool_matches_pyg():
    """Opt-in: PyG's SortAggregation on the same graphs."""
    pyg = pytest.importorskip("torch_geometric.nn.aggr")
    gen = torch.Generator().manual_seed(0)
    counts = torch.tensor([5, 3, 7])
    x = torch.randn(3, 7, 4, generator=gen)
    nodes = torch.cat([x[b, :c] for b, c in enumerate(counts.tolist())])
    batch = torch.repeat_interleave(torch.arange(3), counts)
    want = pyg.SortAggregation(k=4)(nodes, batch)
    assert torch.equal(want, S.sort_pool(x, 4, counts))


# ------------------------------------------------------ operator machinery

def test_opcheck(gen):
    utils = ("test_schema", "test_faketensor", "test_aot_dispatch_dynamic",
             "test_autograd_registration")
    x64 = torch.randn(3, 8, generator=gen, dtype=torch.float64)
    x32 = make_values("ties", (4, 6, 8), torch.float32, gen).transpose(1, 2)
    for x in (x64.requires_grad_(), x32):
        u = utils if x.requires_grad else utils[:3]
        opcheck(K.sparsemax.default, (x, -1), test_utils=u)
        opcheck(K.entmax15.default, (x, 1), test_utils=u)
        opcheck(K.group_sort.default, (x, 2, -1, False), test_utils=u)
    pool = torch.randn(3, 6, 4, generator=gen, dtype=torch.float64).requires_grad_()
    opcheck(K.sort_pool.default, (pool, 4, torch.tensor([6, 2, 3])), test_utils=utils)
    opcheck(K.sort_pool.default, (pool.detach(), 8, None), test_utils=utils[:3])
    x = x64.detach()
    y, support = K.sparsemax(x, -1)
    grad = torch.randn_like(y)
    opcheck(K.sparsemax_backward.default, (grad, y, support, -1), test_utils=utils[:3])
    opcheck(K.entmax15_backward.default, (grad, K.entmax15(x, -1), -1), test_utils=utils[:3])
    _, positions = K.group_sort(x, 2, -1, False)
    opcheck(K.group_sort_backward.default, (grad, positions, 2, -1), test_utils=utils[:3])


def test_vmap(gen):
    x = torch.randn(5, 4, 6, generator=gen)
    for op, args in ((lambda t, d: K.sparsemax(t, d)[0], ()), (K.entmax15, ()),
                     (lambda t, d: K.group_sort(t, 2, d)[0], ())):
        ref = op(x, -1)
        for in_dim in (0, 1):
            got = torch.vmap(lambda t: op(t, -1), in_dims=in_dim)(x.movedim(0, in_dim))
            assert torch.equal(ref, got)
        ref = op(x, 1)
        got = torch.vmap(lambda t: op(t, 0))(x)
        assert torch.equal(ref, got)


def test_compile_fullgraph(gen):
    import torch._dynamo
    torch._dynamo.reset()
    model = torch.nn.Sequential(torch.nn.Linear(8, 8, dtype=torch.float64),
                                knn.GroupSort(2, use_fast=True),
                                knn.Entmax15(use_fast=True), knn.Sparsemax(0, use_fast=True))
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    for rows in (5, 9):
        x = torch.randn(rows, 8, dtype=torch.float64, generator=gen, requires_grad=True)
        ref, got = model(x), compiled(x)
        _assert_same(ref, got)
        grad = torch.randn(ref.shape, generator=gen, dtype=torch.float64)
        _assert_same(torch.autograd.grad(ref, x, grad)[0], torch.autograd.grad(got, x, grad)[0])
    pool = torch.compile(knn.SortPooling(3, use_fast=True), fullgraph=True, backend="aot_eager")
    x = torch.randn(2, 5, 4, generator=gen)
    _assert_same(R.sort_pool(x, 3), pool(x))
    torch._dynamo.reset()


# --------------------------------------------------------------- modules

MODULES = [
    (knn.Sparsemax, R.Sparsemax, dict(dim=0), (6, 5)),
    (knn.Entmax15, R.Entmax15, dict(dim=-1), (6, 5)),
    (knn.GroupSort, R.GroupSort, dict(group_size=4, dim=1), (3, 8)),
    (knn.SortPooling, R.SortPooling, dict(k=3), (2, 5, 4)),
]


@pytest.mark.parametrize("use_fast", [False, True, "auto"])
@pytest.mark.parametrize("fast_cls,ref_cls,kwargs,shape", MODULES,
                         ids=[m[0].__name__ for m in MODULES])
def test_modules_match_their_references(fast_cls, ref_cls, kwargs, shape, use_fast, gen):
    fast, ref = fast_cls(**kwargs, use_fast=use_fast), ref_cls(**kwargs)
    assert fast.state_dict().keys() == ref.state_dict().keys()
    assert list(fast.parameters()) == [] and list(fast.buffers()) == []
    x = make_values("ties", shape, torch.float32, gen) + torch.rand(shape, generator=gen)
    _check_same_as_reference(fast, ref, x, gen)
    assert (fast_cls, "use_fast") and fast.use_fast == use_fast
    assert knn.fast_modules(torch.nn.Sequential(fast))


def test_use_fast_false_runs_the_reference(gen, monkeypatch):
    calls = []
    real = R.sparsemax

    def counting(*args):
        calls.append(1)
        return real(*args)
    monkeypatch.setattr(R, "sparsemax", counting)
    model = torch.nn.Sequential(knn.Sparsemax())
    x = torch.randn(3, 4, generator=gen)
    model(x)
    assert calls == []
    knn.deactivate(model)
    model(x)
    assert calls == [1]


# ---------------------------------------------------------------- native

def test_native_status_codes():
    lib = native.lib
    code = native.CODES[torch.float32]
    x = torch.randn(2, 4)
    out = torch.empty(2, 4)
    support = torch.empty(2, dtype=torch.int64)
    perm = torch.empty(2, 4, dtype=torch.uint8)
    assert lib.kwk_sparse_simplex_addr(code, 0, x.data_ptr(), 2, 4, out.data_ptr(),
                                       support.data_ptr(), 0) == 0
    assert lib.kwk_sparse_simplex_addr(code, 1, x.data_ptr(), 2, 4, out.data_ptr(),
                                       support.data_ptr(), 0) == lib.KWK_E_ARG
    assert lib.kwk_sparse_simplex_addr(code, 3, x.data_ptr(), 2, 4, out.data_ptr(),
                                       support.data_ptr(), 0) == lib.KWK_E_ARG
    assert lib.kwk_sparse_simplex_addr(native.CODES[torch.int32], 0, x.data_ptr(), 2, 4,
                                       out.data_ptr(), support.data_ptr(), 0) == lib.KWK_E_DTYPE
    assert lib.kwk_sparsemax_backward_addr(code, 2, x.data_ptr(), x.data_ptr(), 2, 4,
                                           out.data_ptr(), 0) == lib.KWK_E_ARG
    assert lib.kwk_sparsemax_backward_addr(code, 1, x.data_ptr(), x.data_ptr(), 2, 4,
                                           out.data_ptr(), 0) == lib.KWK_E_ARG
    assert lib.kwk_group_sort_addr(code, x.data_ptr(), 2, 257, 0, out.data_ptr(),
                                   perm.data_ptr()) == lib.KWK_E_ARG
    perm.fill_(4)  # outside a group of 4
    assert lib.kwk_group_sort_backward_addr(code, x.data_ptr(), perm.data_ptr(), 2, 4,
                                            out.data_ptr()) == lib.KWK_E_ARG
    counts = torch.tensor([3, 5])  # 5 > 4 nodes
    index = torch.empty(2, 2, dtype=torch.int64)
    assert lib.kwk_sort_pool_addr(code, x.data_ptr(), 2, 4, 1, counts.data_ptr(), 2,
                                  out.data_ptr(), index.data_ptr()) == lib.KWK_E_ARG


# ---------------------------------------------------- the entmax package

ENTMAX_DIR = os.environ.get("KWKER_ENTMAX_PATH", "/work/pydeps-layers-sparse")


def _entmax():
    if os.path.isdir(ENTMAX_DIR) and ENTMAX_DIR not in sys.path:
        sys.path.append(ENTMAX_DIR)
    return pytest.importorskip("entmax")


@pytest.mark.parametrize("dtype", DTYPES)
def test_matches_the_entmax_package(dtype, gen):
    """Opt-in (skips without the package; KWKER_ENTMAX_PATH names a
    private install): entmax.sparsemax / entmax.entmax15, values and
    gradients bit for bit."""
    entmax = _entmax()
    for shape, dim in (((64, 50), -1), ((8, 3000), -1), ((5, 30, 4), 1)):
        x = torch.randn(shape, generator=gen, dtype=dtype) * 3
        for theirs, ours in ((entmax.sparsemax, S.sparsemax), (entmax.entmax15, S.entmax15)):
            _check_same_as_reference(lambda t: ours(t, dim), lambda t: theirs(t, dim=dim), x, gen)
