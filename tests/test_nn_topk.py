"""kwker.nn's top-k layers (torch.ops.kwker.topk_activation, topk_softmax,
top_k_filter, top_p_filter, min_p_filter): outputs and gradients bit for
bit against the plain-torch references (kwker.nn.reference_topk) on random,
tied, NaN/inf and special inputs, opcheck, gradcheck, vmap, compile, the
modules' use_fast switch, and (opt-in) transformers' own warpers."""
import importlib.util

import pytest
import torch
from torch.library import opcheck

import kwker.nn as knn
from kwker.nn import reference_topk as R
from kwker.nn import topk_layers as T
from kwker_testing import bits, make_values

K = torch.ops.kwker
DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16]
KINDS = ["random", "ties", "bf16ties", "equal", "nan", "special"]

# `target` (each native kernel set in turn): a fixture in conftest.py


def _same(ref, got):
    if isinstance(ref, tuple):
        for r, g in zip(ref, got):
            _same(r, g)
        return
    assert ref.dtype == got.dtype and ref.shape == got.shape, (ref.dtype, got.dtype)
    if ref.is_floating_point():
        ref, got = bits(ref), bits(got)
    assert torch.equal(ref, got), (ref != got).nonzero()[:5].tolist()


def _scores(kind, shape, dtype, gen):
    x = make_values(kind, shape, dtype, gen)
    return x


# ------------------------------------------------------- topk_activation

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("relu", [True, False])
def test_topk_activation_equals_the_reference(dtype, kind, relu, target, gen):
    """Values (bits) and which tied elements are kept: torch.topk's choice."""
    for n, ks in ((1, (0, 1)), (7, (0, 1, 3, 7)), (100, (1, 5, 32, 99, 100)),
                  (3000, (1, 32, 64, 300)), (4100, (1, 64, 2000))):  # 4100: sampled
        x = _scores(kind, (5, n), dtype, gen)
        for k in ks:
            _same(R.topk_activation(x, k, relu), T.topk_activation(x, k, relu))


def test_topk_activation_large_rows_and_layouts(gen):
    x = torch.randn(6, 20000, generator=gen)
    x[0, :100] = 1.5  # a tie across the boundary of k=64
    x[1] = x[1].round()
    for k in (32, 64, 256):
        _same(R.topk_activation(x, k), T.topk_activation(x, k))
    strided = torch.randn(40, 3, 50, generator=gen).transpose(0, 2)  # non-contiguous
    _same(R.topk_activation(strided, 5), T.topk_activation(strided, 5))
    _same(R.topk_activation(x[:, ::3], 7), T.topk_activation(x[:, ::3], 7))
    empty = torch.randn(0, 10)
    _same(R.topk_activation(empty, 3), T.topk_activation(empty, 3))
    one = torch.randn(9, generator=gen)
    _same(R.topk_activation(one, 4), T.topk_activation(one, 4))
    with pytest.raises(RuntimeError):
        T.topk_activation(x, 20001)


def _kept_reference(x, k, relu):
    """The op's second output from torch.topk itself: each row's kept
    positions ascending, ~j where the reference's output there is <= 0
    under ReLU (its gradient stops; NaN passes)."""
    pos = torch.topk(x, k, dim=-1).indices.sort(-1).values
    if relu:
        stopped = R.topk_activation(x, k, relu).gather(-1, pos) <= 0
        pos = torch.where(stopped, ~pos, pos)
    return pos


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", ["random", "ties", "bf16ties", "equal", "nan", "special"])
def test_topk_activation_kept_positions(dtype, kind, target, gen):
    """The positions the backward reads, on every path of the native kernel
    (nothing or all kept, the block maxima's candidates, the sampled and the
    whole-row thresholds, a tie cut by k, the rows taken from topk's own
    indices) and of the torch fallback (16-bit floats): ascending, ~j where
    ReLU stops the gradient, the same whatever the path."""
    for n, ks in ((1, (0, 1)), (9, (0, 4, 9)), (100, (1, 33, 100)), (3000, (1, 32, 300)),
                  (4127, (7, 31, 64))):
        x = _scores(kind, (3, n), dtype, gen)
        x[0, n // 2] = -0.0 if n > 1 else x[0, 0]
        for k in ks:
            for relu in (True, False):
                want = _kept_reference(x, k, relu)
                _same(want, K.topk_activation.default(x, k, relu)[1])
                if dtype == torch.float32:  # the op's torch-only path agrees
                    from kwker.torch_ops.layers_topk import topk_activation_any
                    _same(want, topk_activation_any(x, k, relu)[1])


@pytest.mark.parametrize("kind", ["random", "ties", "sorted", "reversed", "nan", "special"])
def test_dense_rows_from_block_maxima(kind, target, gen):
    """float32 rows of at least 4k blocks of 32 take their candidates from
    the blocks' maxima (topk_layer_kernels.h): lengths around a multiple of
    32 (the tail past the last whole block is read separately), k up to
    and past the bound, the row's largest values in the tail, NaN in the
    tail and as the k-th largest (the filter then removes nothing), and
    both zeros at the threshold."""
    for n in (128, 129, 159, 160, 1055, 4127):
        x = make_values(kind, (3, n), torch.float32, gen)
        tail = n % 32
        if tail:
            x[0, -tail:] = 50.0 + torch.arange(tail, dtype=torch.float32)
            x[1, -1] = float("nan")
        x[2, : n // 2] = torch.where(torch.arange(n // 2) % 2 == 0, 0.0, -0.0)
        nb = n // 32
        for k in sorted({1, 2, max(1, nb // 4), nb // 4 + 1, 7, 31}):
            if k > n:
                continue
            for relu in (True, False):
                _same(R.topk_activation(x, k, relu), T.topk_activation(x, k, relu))
            _same(R.top_k_filter(x, k), T.top_k_filter(x, k))
            _same(R.top_k_filter(x, k, -1e4, 3), T.top_k_filter(x, k, -1e4, 3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("relu", [True, False])
def test_topk_activation_gradient_is_the_references(relu, dtype, gen):
    # 301: the native backward's scalar tail; float32 rows from 1024 take the
    # kept positions from torch.topk's indices (topk_layer_kernels.h)
    for shape in ((4, 300), (3, 301), (3, 2000), (2, 5000)):
        x = make_values("bf16ties", shape, dtype, gen)
        x[0, 3] = float("nan")
        x[-1] = -x[-1].abs() - 1  # every kept value negative: ReLU stops its gradient
        x[1, :60] = 0.0  # kept zeros: ReLU's gradient is 0 at 0
        grad = torch.randn(x.shape, generator=gen, dtype=dtype)
        grad[:, ::7] = -0.0  # kept: the sign stays; dropped: +0.0
        grad[1, ::5] = float("nan")
        for g in (grad, grad[:, :1].expand(x.shape)):  # an expanded grad: torch's way
            xr, xf = x.clone().requires_grad_(), x.clone().requires_grad_()
            R.topk_activation(xr, 40, relu).backward(g)
            T.topk_activation(xf, 40, relu).backward(g)
            _same(xr.grad, xf.grad)


@pytest.mark.parametrize("relu", [True, False])
def test_topk_activation_gradcheck(relu, gen):
    x = torch.randn(3, 12, dtype=torch.float64, generator=gen, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: T.topk_activation(t, 4, relu), (x,))
    assert torch.autograd.gradgradcheck(lambda t: T.topk_activation(t, 4, relu), (x,))


# --------------------------------------------------------- topk_softmax

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("renormalize", [True, False])
def test_topk_softmax_equals_the_reference(dtype, kind, renormalize, gen):
    for experts in (1, 8, 64, 128, 256):
        x = _scores(kind, (33, experts), dtype, gen)
        for k in sorted({0, 1, min(2, experts), min(8, experts), experts}):
            _same(R.topk_softmax(x, k, renormalize), T.topk_softmax(x, k, renormalize))


def test_topk_softmax_gradient_and_gradcheck(gen):
    grad = torch.randn(16, 4, generator=gen)
    for renormalize in (True, False):
        # with grad the ids come from the softmax the backward runs through:
        # torch.topk's order of tied probabilities included
        for kind in ("random", "ties", "bf16ties", "equal"):
            for dtype in (torch.float32, torch.bfloat16):
                x = _scores(kind, (16, 64), dtype, gen)
                xr, xf = x.clone().requires_grad_(), x.clone().requires_grad_()
                want, got = R.topk_softmax(xr, 4, renormalize), T.topk_softmax(xf, 4, renormalize)
                _same(tuple(t.detach() for t in want), tuple(t.detach() for t in got))
                want[0].backward(grad)
                got[0].backward(grad)
                _same(xr.grad, xf.grad)
        x64 = torch.randn(3, 10, dtype=torch.float64, generator=gen, requires_grad=True)
        # the weights are float32: gradcheck in float64 on a float64 detour
        fn = lambda t: T.topk_softmax(t, 3, renormalize)[0].double()  # noqa: E731
        ref = lambda t: R.topk_softmax(t, 3, renormalize)[0].double()  # noqa: E731
        gf = torch.autograd.grad(fn(x64).sum(), x64)[0]
        gr = torch.autograd.grad(ref(x64).sum(), x64)[0]
        _same(gr, gf)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_topk_softmax_first_order_gradient_is_the_references(dtype, gen):
    """The router's one-node backward (kwk_router_backward_f32: k <= 2
    renormalised natively, larger k by torch's steps, NaN gradients by
    torch's own ops) against the reference's autograd, bit for bit: every
    k from 1 to 3 and 8, lengths around the vector widths, tied and
    saturated probabilities, gradients with -0.0, zeros, inf and NaN; torch
    on one thread and on two (its own results depend on it for rows with a
    partial last vector: router_backward_takes)."""
    threads_before = torch.get_num_threads()
    for experts, threads in ((1, 1), (2, 2), (7, 1), (8, 2), (9, 1), (16, 1), (17, 2), (33, 1),
                             (60, 1), (64, 1), (256, 2)):
        torch.set_num_threads(threads)
        for kind in ("random", "ties"):
            x = _scores(kind, (24, experts), dtype, gen)
            x[::5] *= 50  # probabilities that are exactly zero
            for k in sorted({1, min(2, experts), min(3, experts), min(8, experts)}):
                grad = torch.randn(24, k, generator=gen)
                grad[::4] = -0.0
                grad[1::6, 0] = float("inf")
                for renormalize in (True, False):
                    for g in (grad, torch.where(torch.arange(24)[:, None] == 3, float("nan"),
                                                grad)):
                        xr, xf = x.clone().requires_grad_(), x.clone().requires_grad_()
                        R.topk_softmax(xr, k, renormalize)[0].backward(g)
                        T.topk_softmax(xf, k, renormalize)[0].backward(g)
                        _same(xr.grad, xf.grad)
    torch.set_num_threads(threads_before)


def test_top1_router_without_softmax(target, gen, monkeypatch):
    """topk_softmax(x, 1, renormalize=True) from the largest logit alone
    (kwk_router_top1_f32: weight 1, the id the largest logit's where no
    other lies within 2^-19 of it) against the reference on every native
    target: competitors placed a given gap below the maximum (0; under
    2^-25, where the probabilities tie; the threshold's neighbourhood;
    far), logits of several magnitudes (the threshold's rounding), NaN, +-inf and all -inf rows, each input dtype
    (converted to float32 first, as the reference's softmax does).  Rows
    within the gap are computed through the softmax; a threshold set too
    close lets rounding's ties in the probabilities through, which this
    catches."""
    from kwker.ops import topk_layers as L
    # every call through the kernel, however small (the size rule would
    # send these to the softmax path)
    monkeypatch.setattr(L, "ROUTER_TOP1_MIN_NUMEL", 0)
    for dtype in DTYPES:
        for n in (1, 2, 15, 16, 17, 64, 100, 256):
            for scale in (1e-3, 1.0, 30.0, 1e4):
                # (probabilities tie where exp(x_j - m) rounds to 1: a gap
                # under 2^-25, which only small logits can hold)
                for gap in (0.0, 2.0 ** -30, 2.0 ** -27, 2.0 ** -25, 2.0 ** -23, 2.0 ** -20,
                            2.0 ** -19, 2.0 ** -18, 1e-4, 1.0):
                    x = torch.randn(24, n, generator=gen) * scale
                    if n > 1:
                        at = torch.randint(0, n, (24,), generator=gen)
                        x[torch.arange(24), at] = x.max(-1).values - gap
                    x[0, 0] = float("nan")
                    x[1] = float("-inf")
                    x[2, -1] = float("inf")
                    x = x.to(dtype)
                    _same(R.topk_softmax(x, 1), T.topk_softmax(x, 1))
    # the shortcut runs (no softmax) on clear rows, and not for other k
    monkeypatch.undo()
    x = torch.randn(64, 128, generator=gen)  # (at the size rule)
    assert L.router_parts(x, 1, True)[2] is None
    assert L.router_parts(x, 2, True)[2] is not None
    assert L.router_parts(x, 1, False)[2] is not None


def test_top1_router_kernel_checks_its_arguments(gen):
    from kwker import _native
    lib = _native.lib
    if lib is None:
        pytest.skip("no native library")
    # (the test's own generator: the global one's state depends on the tests
    # run before this one in its worker, and once gave a failure not seen again)
    x = torch.randn(4, 8, generator=gen)
    ids = torch.empty(4, dtype=torch.int64)
    left = torch.zeros(1, dtype=torch.int64)
    f = lib.kwk_router_top1_f32_addr
    assert f(x.data_ptr(), 4, 0, ids.data_ptr(), left.data_ptr()) == lib.KWK_E_ARG
    assert f(x.data_ptr(), -1, 8, ids.data_ptr(), left.data_ptr()) == lib.KWK_E_ARG
    assert f(x.data_ptr(), 4, 8, 0, left.data_ptr()) == lib.KWK_E_ARG
    assert f(x.data_ptr(), 4, 8, ids.data_ptr(), 0) == lib.KWK_E_ARG
    assert f(x.data_ptr(), 1 << 62, 1 << 62, ids.data_ptr(), left.data_ptr()) == lib.KWK_E_OVERFLOW
    assert f(x.data_ptr(), 4, 8, ids.data_ptr(), left.data_ptr()) == 0
    assert torch.equal(ids, x.argmax(-1)) and int(left) == 0


def test_topk_softmax_ids_dtype_and_shape(gen):
    w, ids = T.topk_softmax(torch.randn(4096, 128, generator=gen), 8)
    assert w.dtype == torch.float32 and ids.dtype == torch.int64 and w.shape == (4096, 8)
    assert torch.allclose(w.sum(-1), torch.ones(4096))


# -------------------------------------------------------------- filters

FILTERS = [
    ("top_k", R.top_k_filter, T.top_k_filter, (1, 2, 50, 999)),
    ("top_p", R.top_p_filter, T.top_p_filter, (0.0, 0.1, 0.5, 0.9, 0.95, 1.0)),
    ("min_p", R.min_p_filter, T.min_p_filter, (0.0, 0.05, 0.1, 0.5, 1.0)),
]


@pytest.mark.parametrize("name,ref,fast,values", FILTERS, ids=[f[0] for f in FILTERS])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kind", KINDS)
def test_filters_equal_the_reference(name, ref, fast, values, dtype, kind, target, gen):
    for shape in ((3, 1), (4, 17), (2, 1000), (1, 5000)):  # 5000: sampled pivot
        x = _scores(kind, shape, dtype, gen)
        if kind == "random":
            x = x * 4  # logits-like spread
        for value in values:
            for keep, fv in ((1, -float("inf")), (3, -1e4)):
                _same(ref(x, value, fv, keep), fast(x, value, fv, keep))


@pytest.mark.parametrize("name,ref,fast,values", FILTERS, ids=[f[0] for f in FILTERS])
def test_filters_at_vocab_size(name, ref, fast, values, gen):
    """Rows as long as an LLM's vocabulary, logits from a peaked distribution
    (so top-p and min-p keep a handful of tokens), one with bf16-rounded
    logits (many ties across the top-p boundary), one with -inf masked
    tokens."""
    x = torch.randn(4, 32000, generator=gen) * 3
    x[1] = x[1].to(torch.bfloat16).float()
    x[2, ::7] = -float("inf")
    x[3, :5] += 12
    for value in values:
        _same(ref(x, value), fast(x, value))
        _same(ref(x, value, min_tokens_to_keep=5), fast(x, value, min_tokens_to_keep=5))


def test_top_p_ties_straddling_the_boundary(gen):
    """Equal logits across the cumulative boundary: torch.sort's order of
    ties decides which are removed; those rows are the reference's."""
    x = torch.zeros(3, 64)
    x[:, :4] = 2.0
    for p in (0.3, 0.5, 0.77, 0.9):
        _same(R.top_p_filter(x, p), T.top_p_filter(x, p))
    y = torch.tensor([[0.0, -0.0, 0.0, -0.0, 1.0]])
    for p in (0.2, 0.5, 0.7, 0.8):
        _same(R.top_p_filter(y, p), T.top_p_filter(y, p))


def test_top_p_count_edges(gen):
    """The count of removed tokens comes from a binary search over each
    row's cumulative sum, checked against the comparison itself: rows with
    NaN (the search does not order them: counted in full), +inf (a NaN
    softmax), a bound that rounds onto a cumulative value, and every
    min_tokens_to_keep slice the reference's `[..., -m:]` can make (0
    zeroes the whole row, more than the row, negative)."""
    x = torch.randn(6, 300, generator=gen) * 3
    x[1, 17] = float("nan")
    x[2, 5] = float("inf")
    x[3] = 0.0  # uniform: cumulative steps of exactly 1/300
    x[4, :150] = -float("inf")
    for p in (0.0, 0.5, 0.9, 1.0, 1 - 1 / 3, 1 - 0.5):
        for keep in (1, 0, 2, 299, 300, 301, -2):
            _same(R.top_p_filter(x, p, min_tokens_to_keep=keep),
                  T.top_p_filter(x, p, min_tokens_to_keep=keep))
    x64 = x.double()
    _same(R.top_p_filter(x64, 0.9), T.top_p_filter(x64, 0.9))


def test_min_p_protection_by_argsort(gen):
    """min_tokens_to_keep larger than the kept set: the argsort's first ones
    stay, ties in torch's order (rows redone by the reference)."""
    x = torch.tensor([[10.0, 0.0, 0.0, 0.0, 0.0, -1.0], [10.0, 9.0, 1.0, 1.0, 1.0, 1.0]])
    for keep in (1, 2, 3, 4):
        _same(R.min_p_filter(x, 0.5, min_tokens_to_keep=keep),
              T.min_p_filter(x, 0.5, min_tokens_to_keep=keep))


def test_filters_edge_layouts(gen):
    x = torch.randn(8, 40, 3, generator=gen).transpose(1, 2)  # non-contiguous rows
    for _, ref, fast, values in FILTERS:
        _same(ref(x, values[1]), fast(x, values[1]))
        empty = torch.randn(0, 50)
        _same(ref(empty, values[1]), fast(empty, values[1]))
        one = torch.randn(50, generator=gen)
        _same(ref(one, values[1]), fast(one, values[1]))


@pytest.mark.parametrize("name,ref,fast,values", FILTERS, ids=[f[0] for f in FILTERS])
def test_filter_gradients(name, ref, fast, values, gen):
    x = torch.randn(3, 30, dtype=torch.float64, generator=gen)
    grad = torch.randn(x.shape, dtype=x.dtype, generator=gen)
    xr, xf = x.clone().requires_grad_(), x.clone().requires_grad_()
    ref(xr, values[1]).backward(grad)
    fast(xf, values[1]).backward(grad)
    _same(xr.grad, xf.grad)
    xf.grad = None
    assert torch.autograd.gradcheck(lambda t: fast(t, values[1], -1e4), (xf,))


# --------------------------------------------------- torch integration

def _op_cases(gen):
    x64 = torch.randn(3, 20, dtype=torch.float64, generator=gen)
    x32 = make_values("ties", (4, 30, 3), torch.float32, gen).transpose(1, 2)
    return [
        (K.topk_activation.default, (x64, 5, True)),
        (K.topk_activation.default, (x32, 4, False)),
        (K.topk_softmax.default, (x64, 3, True)),
        (K.topk_softmax.default, (x32, 2, False)),
        (K.top_k_filter.default, (x64, 5, -float("inf"), 1)),
        (K.top_p_filter.default, (x64, 0.9, -float("inf"), 1)),
        (K.min_p_filter.default, (x32.contiguous(), 0.1, -1e4, 2)),
    ]


def test_opcheck(gen):
    utils = ("test_schema", "test_faketensor", "test_aot_dispatch_dynamic",
             "test_autograd_registration")
    for op, args in _op_cases(gen):
        x = args[0]
        opcheck(op, (x,) + args[1:], test_utils=utils[:3])
        if x.dtype == torch.float64:
            opcheck(op, (x.clone().requires_grad_(),) + args[1:], test_utils=utils)


def test_vmap_and_func_grad(gen):
    for op, args in _op_cases(gen):
        x = args[0].contiguous()
        batched = torch.stack([x, x.flip(-1)])
        got = torch.vmap(lambda t: op(t, *args[1:]))(batched)
        for i in range(2):
            _same(tuple(t[i] for t in got), op(batched[i], *args[1:]))
    x = torch.randn(4, 20, dtype=torch.float64, generator=gen)
    fast = lambda t: T.topk_activation(t, 5).pow(2).sum()  # noqa: E731
    ref = lambda t: R.topk_activation(t, 5).pow(2).sum()  # noqa: E731
    _same(torch.func.grad(ref)(x), torch.func.grad(fast)(x))


def test_compile_fullgraph(gen):
    def f(x, logits, scores):
        a = T.topk_activation(x, 8)
        w, ids = T.topk_softmax(logits, 2)
        s = T.top_p_filter(T.top_k_filter(scores, 20), 0.9)
        return a.sum() + w.sum() + T.min_p_filter(s, 0.05).amax(), ids
    x = torch.randn(4, 64, generator=gen, requires_grad=True)
    logits = torch.randn(16, 8, generator=gen)
    scores = torch.randn(2, 500, generator=gen)
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    got, want = compiled(x, logits, scores), f(x, logits, scores)
    _same(want[0].detach(), got[0].detach())
    _same(want[1], got[1])
    got[0].backward()
    assert x.grad is not None


# ------------------------------------------------------------- modules

MODULES = [
    (lambda **kw: knn.TopK(8, **kw), lambda: torch.randn(4, 100)),
    (lambda **kw: knn.TopKSoftmaxRouter(2, **kw), lambda: torch.randn(16, 8)),
    (lambda **kw: knn.TopKLogits(10, **kw), lambda: torch.randn(2, 300)),
    (lambda **kw: knn.TopPLogits(0.9, **kw), lambda: torch.randn(2, 300)),
    (lambda **kw: knn.MinPLogits(0.1, **kw), lambda: torch.randn(2, 300)),
]


@pytest.mark.parametrize("make,data", MODULES)
@pytest.mark.parametrize("use_fast", [False, True, "auto"])
def test_modules_match_their_references(make, data, use_fast):
    module = make(use_fast=use_fast)
    ref_cls = next(c for c in type(module).__mro__ if c.__module__ == R.__name__)
    x = data()
    # the references hold no parameters or buffers: nor do the fast modules
    assert len(module.state_dict()) == 0 and not list(module.parameters())
    _same(ref_cls.forward(module, x), module(x))
    assert f"use_fast={use_fast!r}" in repr(module)


def test_module_switches_and_validation(monkeypatch):
    model = torch.nn.Sequential(knn.TopK(4), knn.TopPLogits(0.5))
    assert [n for n, _ in knn.fast_modules(model)] == ["0", "1"]
    calls = []
    monkeypatch.setattr(T, "topk_activation", lambda *a: calls.append(a) or R.topk_activation(*a))
    model(torch.randn(2, 10))
    assert len(calls) == 1
    knn.deactivate(model)
    model(torch.randn(2, 10))
    assert len(calls) == 1
    with pytest.raises(ValueError):
        knn.TopKLogits(0)
    with pytest.raises(ValueError):
        knn.TopPLogits(1.5)
    with pytest.raises(ValueError):
        knn.MinPLogits(-0.1)


# ------------------------------------------------- transformers (opt-in)

@pytest.mark.skipif(importlib.util.find_spec("transformers") is None,
                    reason="transformers not installed")
def test_matches_transformers_warpers(gen):
    from transformers.generation import logits_process as lp
    ids = torch.zeros(3, 1, dtype=torch.long)
    x = torch.randn(3, 32000, generator=gen) * 3
    x[1] = x[1].to(torch.bfloat16).float()
    for keep in (1, 4):
        for warper, fast, value in ((lp.TopKLogitsWarper, T.top_k_filter, 50),
                                    (lp.TopPLogitsWarper, T.top_p_filter, 0.9),
                                    (lp.MinPLogitsWarper, T.min_p_filter, 0.05)):
            want = warper(value, min_tokens_to_keep=keep)(ids, x.clone())
            _same(want, fast(x, value, min_tokens_to_keep=keep))
