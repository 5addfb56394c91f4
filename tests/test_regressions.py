"""Regression tests for mismatches with torch that this suite found in Kwker
and that were fixed (commit e809e86): argument forms torch rejects, results
of __torch_function__ overrides passed through untouched, copying and
pickling of the patched functions, and median() over all elements visiting
the elements in torch's (memory) order."""
import copy
import pickle

import pytest
import torch

import kwker

from kwker_testing import LAYOUTS, ORIG, ORIG_METHOD, assert_same, compare, layout, make_values

nan = float("nan")


def test_nanmedian_all_noncontiguous_minimal(kw):
    """Was: kwker selected in logical order (x.reshape(-1)), torch in memory
    order, so a +-0.0 tie came out with the other sign (kwker -0.0, torch 0.0)."""
    x = torch.tensor([[nan, 0.0], [-0.0, nan]]).t()
    compare("nanmedian", x)
    compare("nanmedian", x, method=True)


@pytest.mark.parametrize("op", ["median", "nanmedian"])
@pytest.mark.parametrize("lay", LAYOUTS + ("step0", "expanded"))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_median_all_elements_in_memory_order(kw, gen, op, lay, dtype):
    """median()/nanmedian() over all elements of every layout, with values
    whose equal keys differ in bits (+-0.0, NaN payloads)."""
    for trial in range(6):
        base = make_values("nan" if trial % 2 else "bf16ties", (3, 4, 5, 6), dtype, gen)
        base[base.abs() < 0.5] = 0.0
        base[(base == 0) & (torch.rand(base.shape, generator=gen) < 0.5)] = -0.0
        if lay == "step0":
            x = layout(base, "step", 0)
        elif lay == "expanded":
            x = base[:, :1].expand(3, 4, 5, 6)
        else:
            x = layout(base, lay, trial % 4)
        compare(op, x)


@pytest.mark.parametrize("op", ["median", "nanmedian"])
@pytest.mark.parametrize("form", ["kw", "pos", "method", "pos keepdim"])
def test_median_dim_none_raises_like_torch(kw, op, form):
    """Was: kwker treated dim=None as the all-elements form; torch 2.13 raises
    TypeError ("median(): argument 'dim' must be int, not NoneType")."""
    x = torch.tensor([[3.0, 1.0], [2.0, 5.0]]).repeat(20, 20)
    if form == "method":
        compare(op, x, dim=None, method=True, fast="arguments")
    elif form == "kw":
        compare(op, x, dim=None, fast="arguments")
    elif form == "pos":
        compare(op, x, None, fast="arguments")
    else:
        compare(op, x, None, True, fast="arguments")
    with pytest.raises(TypeError):
        ORIG[op](x, dim=None)


@pytest.mark.parametrize("form", ["function", "method", "with dim"])
def test_argsort_stable_none_raises_like_torch(kw, form):
    """Was (found by hypothesis): argsort's stable is `bool` in torch (sort's
    is `bool?`), so stable=None is a TypeError; kwker returned a result."""
    x = torch.randn(100)
    if form == "method":
        compare("argsort", x, stable=None, method=True, fast="arguments")
    elif form == "function":
        compare("argsort", x, stable=None, fast="arguments")
    else:
        compare("argsort", x, dim=0, stable=None, fast="arguments")
    with pytest.raises(TypeError):
        ORIG["argsort"](x, stable=None)
    compare("sort", x, stable=None)  # valid for sort


class TupleDuck:
    """A __torch_function__ override returning a plain tuple."""

    def __init__(self, result):
        self.result = result

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return args[0].result


@pytest.mark.parametrize("op", ["sort", "argsort", "msort", "topk", "median"])
@pytest.mark.parametrize("result", [("from", "override"), ("a", "b", "c"), [1, 2], ()], ids=repr)
def test_override_result_passes_through(kw, op, result):
    """Was: the sort/argsort/msort entries post-processed a fallback's tuple
    result (into return_types.sort, or its [1] / [0] element)."""
    duck = TupleDuck(result)
    args = (1,) if op == "topk" else ()
    ref = ORIG[op](duck, *args)
    got = getattr(torch, op)(duck, *args)
    assert type(got) is type(ref) and got == ref == result


@pytest.mark.parametrize("how", [copy.copy, copy.deepcopy], ids=["copy", "deepcopy"])
@pytest.mark.parametrize("op", ["sort", "topk", "median", "quantile"])
def test_copy_of_patched_functions(kw, how, op):
    """Was: wrapt raised NotImplementedError('object proxy must define
    __deepcopy__()'), so deep-copying anything holding torch.sort failed."""
    assert how(ORIG[op]) is ORIG[op]
    assert how(getattr(torch, op)) == ORIG[op]
    assert how(torch.Tensor.__dict__[op]) == ORIG_METHOD[op]
    assert how(getattr(torch.Tensor, op)) == ORIG_METHOD[op]
    held = {"fn": getattr(torch, op), "method": getattr(torch.Tensor, op)}
    copied = how(held)
    assert copied["fn"] == ORIG[op] and copied["method"] == ORIG_METHOD[op]


@pytest.mark.parametrize("op", ["sort", "topk", "median", "argsort"])
def test_pickle_patched_tensor_methods(kw, op):
    """Was: pickle.dumps(torch.Tensor.sort) raised NotImplementedError under
    install (a plain wrapt BoundFunctionWrapper); torch pickles it."""
    assert pickle.loads(pickle.dumps(ORIG_METHOD[op])) is ORIG_METHOD[op]
    assert pickle.loads(pickle.dumps(getattr(torch.Tensor, op))) == ORIG_METHOD[op]
    # a bound method pickles with its tensor, as torch's does
    x = torch.tensor([3.0, 1.0, 2.0, 5.0])
    bound_ref = pickle.loads(pickle.dumps(getattr(x, op).__wrapped__ if hasattr(
        getattr(x, op), "__wrapped__") else getattr(x, op)))
    bound_got = pickle.loads(pickle.dumps(getattr(x, op)))
    args = (2,) if op == "topk" else ()
    assert_same(bound_ref(*args), bound_got(*args))


# ---- nanmedian(x, dim) on an all-NaN row of length >= 4: torch returns the
# index (and that element's NaN bits) its nth_element leaves at rank 0, not 0

def test_nanmedian_dim_all_nan_row(kw):
    x = torch.full((1, 8), float("nan"))
    x.view(torch.int32)[0, 6] = 0x7FC12345  # a NaN payload makes the value differ too
    ref = ORIG["nanmedian"](x, 1)  # values [nan (0x7fc12345)], indices [6]
    got = torch.nanmedian(x, 1)
    assert kwker.stats()["nanmedian"]["fast"] == 1
    assert_same(ref, got)


def test_torch_all_nan_row_indices():
    """The torch behaviour behind it (a fact, checked against torch)."""
    expected = [0, 0, 0, 2, 2, 3, 5, 6, 7, 8]
    assert [int(ORIG["nanmedian"](torch.full((1, n), float("nan")), 1).indices)
            for n in range(1, 11)] == expected


@pytest.mark.parametrize("shape,dim", [((5,), 0), ((300,), 0), ((5000,), 0), ((64, 20), 1),
                                       ((64, 1000), 1), ((64, 1000), 0)])
def test_bool_values_come_out_as_0_or_1(gen, shape, dim):
    """Was: a bool tensor viewed from bytes other than 0/1 sorted to values
    carrying those bytes; torch's sort writes bool values as 0 or 1 (every
    path: short rows, the batched network, packed words, the byte counting
    sort).  torch.equal sees such bools as equal, so the bytes are compared."""
    raw = torch.randint(0, 4, shape, generator=gen, dtype=torch.uint8)
    x = raw.view(torch.bool)
    assert kwker.install(use_fast=True)
    try:
        for stable in (False, True):
            for descending in (False, True):
                got = torch.sort(x, dim=dim, descending=descending, stable=stable)
                ref = ORIG["sort"](x, dim=dim, descending=descending, stable=stable)
                assert torch.equal(got.values.view(torch.uint8), ref.values.view(torch.uint8))
                assert torch.equal(got.indices, ref.indices)
        assert torch.equal(torch.msort(x).view(torch.uint8), ORIG["msort"](x).view(torch.uint8))
    finally:
        kwker.uninstall()
    assert torch.equal(raw, x.view(torch.uint8))  # input untouched
