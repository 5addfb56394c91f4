"""Subnormal floats while the thread flushes them to zero.

torch.set_flush_denormal(True) sets x86's DAZ and FTZ: torch's comparisons
then read a float32, float64 or bfloat16 subnormal as zero (its sort puts
it among the zeros, its unique merges it with them), while Kwker's keys
order every bit pattern.  install() must then give torch's answers, so such
calls go to torch (condition "denormals"); float16 subnormals widen to
normal floats before torch compares them, so float16 keeps the fast path.
torch.ops.kwker.* and the kwker.nn layers run their torch compositions and
references meanwhile.  Every expected value comes from torch itself, run
with flushing on.
"""
import pytest
import torch

import kwker
import kwker.nn
import kwker.nn.sparse
import kwker.nn.topk_layers
import kwker.torch_ops  # noqa: F401  (registers torch.ops.kwker)
from kwker import _native, support
from kwker.nn import reference, reference_sparse, reference_topk
from kwker_testing import assert_same, compare

pytestmark = pytest.mark.skipif(not _native.available(), reason="native library not loaded")

FLUSHABLE = (torch.float32, torch.float64, torch.bfloat16)
# (bits of the largest subnormal, view dtype) per float dtype
_SUBNORMAL = {torch.float32: ((1 << 23) - 1, torch.int32),
              torch.float64: ((1 << 52) - 1, torch.int64),
              torch.bfloat16: ((1 << 7) - 1, torch.int16),
              torch.float16: ((1 << 10) - 1, torch.int16)}


@pytest.fixture
def flushing():
    """The test runs with subnormals flushed on this thread, and ends with
    them restored."""
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU cannot flush subnormals")
    try:
        assert _native.denormals_flushed()
        yield
    finally:
        torch.set_flush_denormal(False)
    assert not _native.denormals_flushed()


def subnormal_mix(shape, dtype, gen, nan=True):
    """Half subnormals of both signs (a few repeated), the rest +-0.0,
    small normals, +-inf and (nan=True) NaN: rows where torch's order under
    flushing differs from the bit order.  Made without float arithmetic
    (which flushing would change): bits, signs by an integer or."""
    top, view = _SUBNORMAL[dtype]
    n = 1
    for s in shape:
        n *= s
    bits = torch.randint(1, top + 1, (n,), generator=gen).to(view)
    sign_bit = torch.tensor(-1, dtype=view) << (8 * torch.finfo(dtype).bits // 8 - 1)
    bits = torch.where(torch.randint(0, 2, (n,), generator=gen).bool(), bits | sign_bit, bits)
    m = n // 8
    bits[:m] = bits[m:2 * m]  # repeated subnormals
    sub = bits.view(dtype)
    tiny = torch.finfo(dtype).tiny
    normal = torch.tensor([tiny, -tiny, 4 * tiny, 0.0, -0.0, float("inf"), -float("inf"), 1.0],
                          dtype=torch.float64).to(dtype)
    other = normal[torch.randint(0, len(normal), (n,), generator=gen)]
    if nan:
        other[torch.randint(0, n, (max(1, n // 50),), generator=gen)] = float("nan")
    pick = torch.rand(n, generator=gen) < 0.5
    x = torch.where(pick, sub, other)
    return x[torch.randperm(n, generator=gen)].reshape(shape)


CALLS = [
    ("sort", (), {}), ("sort", (), {"stable": True}), ("sort", (0,), {"descending": True}),
    ("argsort", (), {"descending": True}), ("msort", (), {}),
    ("topk", (7,), {}), ("topk", (7,), {"sorted": False}), ("topk", (7,), {"largest": False}),
    ("kthvalue", (9,), {}), ("median", (), {}), ("median", (-1,), {}),
    ("nanmedian", (), {}), ("nanmedian", (-1,), {}),
    ("unique", (), {}), ("unique", (), {"return_inverse": True, "return_counts": True}),
    ("quantile", (), {"q": 0.37}), ("nanquantile", (), {"q": 0.5, "dim": -1}),
]


def _arguments(op, x, args, kwargs):
    if op in ("quantile", "nanquantile") and x.dtype not in support.OPS["quantile"].dtypes:
        return None
    if op == "quantile" and "q" in kwargs and isinstance(kwargs["q"], float):
        kwargs = dict(kwargs, q=torch.tensor([0.1, kwargs["q"], 0.93], dtype=x.dtype))
    return args, kwargs


@pytest.mark.parametrize("dtype", FLUSHABLE, ids=str)
@pytest.mark.parametrize("shape", [(600,), (6, 150)], ids=str)
@pytest.mark.parametrize("op,args,kwargs", CALLS, ids=lambda c: str(c))
def test_install_gives_torchs_answer_while_flushing(kw, flushing, gen, op, args, kwargs, dtype,
                                                    shape):
    x = subnormal_mix(shape, dtype, gen, nan=op not in ("quantile",))
    call = _arguments(op, x, args, dict(kwargs))
    if call is None:
        return
    compare(op, x, *call[0], fast="denormals", **call[1])
    explained = kwker.explain(getattr(torch, op), x, *call[0], **call[1])
    assert explained.condition is support.FLUSHED_DENORMALS


def test_flushing_shows_in_torchs_own_answers(flushing, gen):
    """The premise: flushing changes torch's sort of these inputs (so the
    tests above would catch a fast path that ignored it)."""
    x = subnormal_mix((600,), torch.float32, gen)
    flushed = torch.sort(x, stable=True).indices
    torch.set_flush_denormal(False)
    assert not torch.equal(flushed, torch.sort(x, stable=True).indices)


@pytest.mark.parametrize("op,args,kwargs", CALLS[:14], ids=lambda c: str(c))
def test_float16_keeps_the_fast_path_while_flushing(kw, flushing, gen, op, args, kwargs):
    x = subnormal_mix((6, 150), torch.float16, gen)
    compare(op, x, *args, fast=True, **kwargs)


def test_fast_path_returns_when_flushing_stops(kw, gen):
    x = subnormal_mix((600,), torch.float32, gen)
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU cannot flush subnormals")
    try:
        compare("sort", x, fast="denormals")
    finally:
        torch.set_flush_denormal(False)
    compare("sort", x, fast=True)


@pytest.mark.parametrize("dtype", FLUSHABLE, ids=str)
def test_torch_ops_follow_torch_while_flushing(flushing, gen, dtype):
    """torch.ops.kwker.* order equal elements by index: under flushing,
    torch's stable sort (subnormals equal to zero) is that order."""
    x = subnormal_mix((6, 150), dtype, gen)
    ref = torch.sort(x, stable=True)
    assert_same(tuple(ref), tuple(torch.ops.kwker.sort(x, -1, False)))
    top = torch.sort(x, dim=-1, descending=True, stable=True)
    got = torch.ops.kwker.topk(x, 5, -1, True, True)
    assert_same((top.values[:, :5].contiguous(), top.indices[:, :5].contiguous()), tuple(got))
    got = torch.ops.kwker.kthvalue(x, 9, -1, False)
    assert_same((ref.values[:, 8].contiguous(), ref.indices[:, 8].contiguous()), tuple(got))


@pytest.mark.parametrize("dtype", (torch.float32, torch.float64), ids=str)
def test_layers_follow_their_references_while_flushing(flushing, gen, dtype):
    x = subnormal_mix((2, 24, 31), dtype, gen, nan=False)
    got = kwker.nn.functional.median_pool2d(x, 3)
    want = reference.median_pool2d(x, (3, 3), (1, 1), (1, 1, 1, 1), "reflect")
    assert_same(want, got)
    rows = torch.where(x.isinf(), torch.ones((), dtype=dtype), x).reshape(-1, 31)
    assert_same(reference_sparse.sparsemax_forward(rows)[0], kwker.nn.sparse.sparsemax(rows))
    assert_same(reference_sparse.group_sort(rows[:, :30], 3),
                kwker.nn.sparse.group_sort(rows[:, :30], 3))


@pytest.mark.parametrize("dtype", FLUSHABLE, ids=str)
def test_topk_layers_follow_their_references_while_flushing(flushing, gen, dtype):
    x = subnormal_mix((8, 200), dtype, gen, nan=False)
    x = torch.where(x.isinf(), torch.zeros((), dtype=dtype), x)
    assert_same(reference_topk.topk_activation(x, 9, relu=False),
                kwker.nn.topk_layers.topk_activation(x, 9, relu=False))
    assert_same(reference_topk.top_k_filter(x, 9), kwker.nn.topk_layers.top_k_filter(x, 9))


def test_native_values_sort_keeps_every_value_while_flushing(gen):
    """The native values-only sort compares float64 rows as floats only
    while subnormals are read as they are (values_sort.h:
    vs_row_f64_native); flushed, a subnormal would equal zero there and a
    min/max pair could return one of them twice.  The kernel, called below
    the Python layer's own step-aside, must keep the keys' order (every bit
    pattern kept, subnormals apart from zeros) with flushing on."""
    from kwker.ops import sorting
    x = subnormal_mix((3, 3000), torch.float64, gen, nan=False)
    x = torch.where(x == 0, torch.zeros((), dtype=torch.float64), x)  # one zero sign: the float path's rows
    x[:, ::5] *= 1e300  # spread keys over more than 40 bits
    expected = sorting.sort(x, 1, False, 0, want_indices=False)[0]  # not flushing: the bit order
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU cannot flush subnormals")
    try:
        got = sorting.sort(x, 1, False, 0, want_indices=False)[0]
    finally:
        torch.set_flush_denormal(False)
    assert_same(torch.sort(x, -1).values, expected)
    assert_same(expected, got)
