"""Hypothesis: random shapes, dims, dtypes, layouts, values (heavy ties, NaN
payloads, -0.0, infinities, integer extremes) and argument forms for
sort/argsort/msort/topk/kthvalue/median/nanmedian, against torch's
originals (compare() also checks that every input is left bit-identical).

Examples per test: the "kwker" profile (kwker_testing.py), raised with
KWKER_HYPOTHESIS_EXAMPLES=N, or KWKER_HYPOTHESIS_PROFILE=long for the
reliability job (over 10^6 cases; add --hypothesis-show-statistics to see
the counts).
"""
import os

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import kwker
from kwker_testing import ORIG, SELECT_DTYPES, SORT_DTYPES, _nan_payloads, compare, layout

# applied explicitly: importing torch.testing._internal (test_opinfo.py)
# loads PyTorch's own hypothesis profile
PROFILE = settings.get_profile(os.environ.get("KWKER_HYPOTHESIS_PROFILE", "kwker"))

LAYOUT_KINDS = ("contiguous", "transposed", "step", "offset", "permuted", "expanded")


@st.composite
def value_pools(draw, dtype):
    """A few values of `dtype` the tensor's elements are drawn from (few
    distinct values mean many ties)."""
    if dtype == torch.bool:
        return torch.tensor([False, True])
    if dtype.is_floating_point:
        special = [0.0, -0.0, 1.0, -1.0, 0.5, float("inf"), -float("inf"), 65504.0, 1e-5]
        floats = st.one_of(st.sampled_from(special),
                           st.floats(-1e4, 1e4, allow_nan=False, width=32))
        values = draw(st.lists(floats, min_size=1, max_size=8))
        pool = torch.tensor(values, dtype=torch.float64).to(dtype)
        n_nan = draw(st.integers(0, 3))
        if n_nan:
            pool = torch.cat([pool, _nan_payloads(dtype)[:n_nan]])
        return pool
    if dtype in (torch.uint64, torch.uint32):
        hi = 2 ** 63 - 1
        values = draw(st.lists(st.integers(0, hi), min_size=1, max_size=8))
        top = draw(st.booleans())  # values with the top bit set
        pool = torch.tensor(values, dtype=torch.int64)
        if top:
            pool = pool | torch.tensor(-2 ** 63)
        return pool.view(torch.uint64).to(dtype) if dtype == torch.uint32 else pool.view(dtype)
    info = torch.iinfo(dtype)
    values = draw(st.lists(st.one_of(st.integers(info.min, info.max),
                                     st.sampled_from([info.min, info.max, 0, -1 if info.min else 1])),
                           min_size=1, max_size=8))
    return torch.tensor(values, dtype=torch.int64).to(dtype)


@st.composite
def inputs(draw, dtypes):
    """(x, dim): a tensor of a random shape, dtype and layout, and a dim in
    either spelling."""
    dtype = draw(st.sampled_from(dtypes))
    ndim = draw(st.integers(1, 4))
    shape = draw(st.lists(st.integers(1, 9), min_size=ndim, max_size=ndim))
    dim = draw(st.integers(-ndim, ndim - 1))
    if draw(st.booleans()):
        shape[dim] = draw(st.sampled_from([16, 17, 33, 64, 65, 130, 300, 1000]))
    pool = draw(value_pools(dtype))
    seed = draw(st.integers(0, 2 ** 31 - 1))
    g = torch.Generator().manual_seed(seed)
    numel = 1
    for s in shape:
        numel *= s
    x = pool[torch.randint(0, len(pool), (numel,), generator=g)].reshape(shape)
    kind = draw(st.sampled_from(LAYOUT_KINDS))
    if kind == "expanded":
        d = draw(st.integers(0, ndim - 1))
        x = x.narrow(d, 0, 1).expand(shape)
    else:
        x = layout(x, kind, dim)
    return x, dim


def _sort_args(draw_data, dim):
    form = draw_data.draw(st.sampled_from(["pos", "kw", "stable", "stable_none", "default"]))
    descending = draw_data.draw(st.booleans())
    if form == "pos":
        return (dim, descending), {}
    if form == "kw":
        return (), {"dim": dim, "descending": descending}
    if form == "stable":
        return (), {"dim": dim, "descending": descending, "stable": draw_data.draw(st.booleans())}
    if form == "stable_none":
        return (), {"stable": None, "dim": dim}
    return (), {}


@PROFILE
@given(inputs(SORT_DTYPES), st.data())
def test_sort_property(kw, xd, data):
    x, dim = xd
    args, kwargs = _sort_args(data, dim)
    method = data.draw(st.booleans())
    op = data.draw(st.sampled_from(["sort", "argsort"]))
    fast = True
    if op == "argsort" and kwargs.get("stable", False) is None:
        fast = "arguments"  # argsort's stable is not optional: torch raises TypeError
    big_unsigned = (x.dtype in (torch.uint16, torch.uint32, torch.uint64) and x.ndim == 1
                    and x.numel() >= 32768)
    compare(op, x, *args, method=method, fast=None if big_unsigned else fast, **kwargs)


@PROFILE
@given(inputs(SORT_DTYPES))
def test_msort_property(kw, xd):
    x, _ = xd
    compare("msort", x)


@PROFILE
@given(inputs(SELECT_DTYPES), st.data())
def test_topk_property(kw, xd, data):
    x, dim = xd
    n = x.shape[dim]
    k = data.draw(st.one_of(st.integers(0, n), st.sampled_from(
        [k for k in (0, 1, n // 64, n // 64 + 1, n - 1, n) if 0 <= k <= n])))
    largest = data.draw(st.booleans())
    sorted_ = data.draw(st.booleans())
    form = data.draw(st.sampled_from(["pos", "kw", "method"]))
    if form == "pos":
        compare("topk", x, k, dim, largest, sorted_)
    elif form == "kw":
        compare("topk", x, k, dim=dim, largest=largest, sorted=sorted_)
    else:
        compare("topk", x, k, dim, largest=largest, sorted=sorted_, method=True)


@PROFILE
@given(st.data())
def test_topk_few_property(kw, data):
    """topk k = 2, 3 of rows the one-pass kernel takes (topk_few.h: float32
    and bfloat16, 96..4100 long, contiguous): randn rows (the value pools
    above tie nearly every row) with a few elements set at random places to
    NaN of either sign, +-0.0, +-inf, a copy of the row's best, or a new
    best (which may share a vector lane with the old one), and half the
    time -0.0 and +0.0 as the best two of the first row, so that the
    one-pass answer, the hand-back and the second pass all occur."""
    dtype = data.draw(st.sampled_from([torch.float32, torch.bfloat16]))
    rows = data.draw(st.integers(1, 5))
    n = data.draw(st.integers(96, 4100))
    g = torch.Generator().manual_seed(data.draw(st.integers(0, 2 ** 31 - 1)))
    x = torch.randn(rows, n, generator=g).to(dtype)
    largest = data.draw(st.booleans())
    if data.draw(st.booleans()):  # -0.0 and +0.0 the best two of row 0: a tie
        x[0] = -(x[0].abs() + 1) if largest else x[0].abs() + 1
        i, j = data.draw(st.lists(st.integers(0, n - 1), min_size=2, max_size=2, unique=True))
        x[0, i], x[0, j] = -0.0, 0.0
    for _ in range(data.draw(st.integers(0, 4))):
        r, j = data.draw(st.integers(0, rows - 1)), data.draw(st.integers(0, n - 1))
        how = data.draw(st.sampled_from(["special", "copy_best", "new_best"]))
        if how == "special":
            x[r, j] = data.draw(st.sampled_from(
                [float("nan"), -float("nan"), 0.0, -0.0, float("inf"), -float("inf")]))
        elif how == "copy_best":
            x[r, j] = x[r].max() if largest else x[r].min()
        else:
            x[r, j] = 50.0 if largest else -50.0
    k = data.draw(st.sampled_from([2, 3]))
    compare("topk", x, k, -1, largest, data.draw(st.booleans()))


@PROFILE
@given(inputs(SELECT_DTYPES), st.data())
def test_median_property(kw, xd, data):
    x, dim = xd
    op = data.draw(st.sampled_from(["median", "nanmedian"]))
    form = data.draw(st.sampled_from(["all", "dim", "keepdim", "method"]))
    if x.stride(dim) == 0 and x.shape[dim] > 1 and form != "all":
        # torch 2.13 is wrong on a stride-0 reduced dim; Kwker gives the
        # contiguous answer (test_exactness.test_median_expanded)
        x = x.contiguous()
    if form == "all":
        compare(op, x)
    elif form == "dim":
        compare(op, x, dim)
    elif form == "keepdim":
        compare(op, x, dim=dim, keepdim=data.draw(st.booleans()))
    else:
        compare(op, x, dim, True, method=True)


@PROFILE
@given(inputs(SELECT_DTYPES), st.data())
def test_kthvalue_property(kw, xd, data):
    x, dim = xd
    n = x.shape[dim]
    k = data.draw(st.one_of(st.integers(1, n), st.sampled_from(sorted({1, (n + 1) // 2, n}))))
    form = data.draw(st.sampled_from(["pos", "kw", "method"]))
    if form == "pos":
        compare("kthvalue", x, k, dim, data.draw(st.booleans()))
    elif form == "kw":
        compare("kthvalue", x, k=k, dim=dim, keepdim=data.draw(st.booleans()))
    else:
        compare("kthvalue", x, k, dim, method=True)


@pytest.fixture
def kw_stable_each():
    assert kwker.install(ties="stable")
    yield
    kwker.uninstall()


def _stable_reference(op):

    def reference(x, *args, **kwargs):
        kwargs.pop("stable", None)
        kwargs.update(zip(("dim", "descending"), args))
        return ORIG[op](x, stable=True, **kwargs)
    return reference


@PROFILE
@given(inputs(SORT_DTYPES), st.booleans())
def test_sort_stable_ties_property(kw_stable_each, xd, descending):
    x, dim = xd
    big_unsigned = (x.dtype in (torch.uint16, torch.uint32, torch.uint64) and x.ndim == 1
                    and x.numel() >= 32768)
    compare("sort", x, dim, descending, reference=_stable_reference("sort"),
            fast=None if big_unsigned else True)


@PROFILE
@given(inputs(SELECT_DTYPES), st.data())
def test_topk_stable_ties_property(kw_stable_each, xd, data):
    """ties="stable": the first k of torch's stable sort."""
    x, dim = xd
    n = x.shape[dim]
    k = data.draw(st.integers(0, n))
    largest = data.draw(st.booleans())

    def reference(x, k, dim, largest):
        # torch's own result for the layout, the stable sort's first k for
        # the contents
        shaped = ORIG["topk"](x, k, dim, largest)
        order = ORIG["sort"](x, dim=dim, descending=largest, stable=True)
        values, indices = torch.empty_like(shaped.values), torch.empty_like(shaped.indices)
        values.copy_(order.values.narrow(dim, 0, k))
        indices.copy_(order.indices.narrow(dim, 0, k))
        if x.dtype == torch.bfloat16:
            # torch's topk returns bfloat16 NaN as 0x7FC0 (sort keeps payloads)
            values.masked_fill_(values.isnan(), float("nan"))
        return torch.return_types.topk((values, indices))

    compare("topk", x, k, dim, largest, reference=reference)


@PROFILE
@given(st.data())
def test_top1_router_property(data):
    """kwker.nn's topk_softmax(x, 1, renormalize) (the top-1 shortcut,
    kwk_router_top1_f32, forced at every size) against the plain-torch
    reference: logits from value pools (ties, infinities, NaN payloads) or
    continuous draws with competitors placed just below the maximum."""
    from kwker.nn import reference_topk as R
    from kwker.nn import topk_layers as T
    from kwker.ops import topk_layers as L
    dtype = data.draw(st.sampled_from([torch.float32, torch.bfloat16, torch.float16,
                                       torch.float64]))
    rows, n = data.draw(st.integers(1, 40)), data.draw(st.integers(1, 300))
    g = torch.Generator().manual_seed(data.draw(st.integers(0, 2 ** 31 - 1)))
    if data.draw(st.booleans()):
        pool = data.draw(value_pools(dtype))
        x = pool[torch.randint(0, len(pool), (rows, n), generator=g)]
    else:
        scale = data.draw(st.sampled_from([1e-4, 1e-2, 1.0, 40.0, 1e5]))
        x = (torch.randn(rows, n, generator=g) * scale).to(dtype)
        if n > 1:
            gap = data.draw(st.sampled_from([0.0, 2.0 ** -30, 2.0 ** -26, 2.0 ** -24,
                                             2.0 ** -19, 2.0 ** -18, 1e-3]))
            at = torch.randint(0, n, (rows,), generator=g)
            top = x.float().max(-1).values
            x[torch.arange(rows), at] = (top - gap).to(dtype)
    renormalize = data.draw(st.booleans())
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(L, "ROUTER_TOP1_MIN_NUMEL", 0)
        want, got = R.topk_softmax(x, 1, renormalize), T.topk_softmax(x, 1, renormalize)
    assert torch.equal(want[1], got[1])
    assert torch.equal(want[0].view(torch.int32), got[0].view(torch.int32))
