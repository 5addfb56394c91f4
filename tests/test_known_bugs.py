"""Mismatches with torch 2.13 found by this suite, pinned as minimal
reproducers.  Each is xfail(strict=True): when Kwker is fixed the test
XPASSes, which fails the suite - then drop the marker (and, for the nanmedian
bugs, the tolerance in conftest.known_bug).
"""
import pytest
import torch

import kwker
from conftest import ORIG, ORIG_METHOD, assert_same

nan = float("nan")


@pytest.mark.xfail(strict=True, reason=(
    "kwker bug: torch.nanmedian(x, dim) on an all-NaN row of length >= 4 - torch returns "
    "the index its nth_element leaves (6 for a row of 8: [0,0,0,2,2,3,5,6,7,8] for lengths "
    "1..10) and that element's NaN bits; kwker returns index 0"))
def test_nanmedian_dim_all_nan_row(kw):
    x = torch.full((1, 8), nan)
    x.view(torch.int32)[0, 6] = 0x7FC12345  # a NaN payload makes the value differ too
    ref = ORIG["nanmedian"](x, 1)  # values [nan (0x7fc12345)], indices [6]
    got = torch.nanmedian(x, 1)    # values [nan (0x7fc00000)], indices [0]
    assert kwker.stats()["nanmedian"]["fast"] == 1
    assert_same(ref, got)


@pytest.mark.xfail(strict=True, reason=(
    "kwker bug: torch.nanmedian(x) (all elements) of a non-contiguous x holding NaN: torch "
    "selects in memory order, kwker in logical order (x.reshape(-1)), so a +-0.0 tie "
    "comes out with the other sign"))
def test_nanmedian_all_noncontiguous(kw):
    x = torch.tensor([[nan, 0.0], [-0.0, nan]]).t()
    ref = ORIG["nanmedian"](x)  # 0.0
    got = torch.nanmedian(x)    # -0.0 (what torch gives for x.contiguous())
    assert kwker.stats()["nanmedian"]["fast"] == 1
    assert_same(ref, got)


@pytest.mark.xfail(strict=True, raises=pytest.fail.Exception, reason=(
    "kwker bug: torch.median(x, dim=None) / torch.median(x, None) / nanmedian likewise: "
    "torch 2.13 raises TypeError (\"median(): argument 'dim' must be int, not NoneType\"); "
    "kwker's _parse_median treats dim=None as the all-elements form and returns a value"))
@pytest.mark.parametrize("op", ["median", "nanmedian"])
@pytest.mark.parametrize("form", ["kw", "pos", "method"])
def test_median_dim_none_raises_like_torch(kw, op, form):
    x = torch.tensor([[3.0, 1.0], [2.0, 5.0]])
    call = {"kw": lambda f: f(x, dim=None), "pos": lambda f: f(x, None),
            "method": lambda f: f(x, dim=None)}[form]
    original = ORIG_METHOD[op] if form == "method" else ORIG[op]
    patched = getattr(torch.Tensor, op) if form == "method" else getattr(torch, op)
    with pytest.raises(TypeError):
        call(original)
    with pytest.raises(TypeError):
        call(patched)  # kwker returns tensor(2.) instead


class TupleDuck:
    """A __torch_function__ override returning a plain tuple."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        return ("from", "override")


@pytest.mark.xfail(strict=True, reason=(
    "kwker bug: sort/argsort/msort entries post-process the fallback's result by type: a "
    "__torch_function__ override returning a plain tuple gets it turned into "
    "torch.return_types.sort (sort), or gets element [1] (argsort) / [0] (msort); a 3-tuple "
    "makes sort raise TypeError"))
@pytest.mark.parametrize("op", ["sort", "argsort", "msort"])
def test_override_result_passes_through(kw, op):
    duck = TupleDuck()
    ref = ORIG[op](duck)              # ('from', 'override')
    got = getattr(torch, op)(duck)    # sort: return_types.sort; argsort: 'override'; msort: 'from'
    assert type(got) is type(ref) and got == ref


@pytest.mark.xfail(strict=True, raises=NotImplementedError, reason=(
    "kwker bug: copy.copy / copy.deepcopy of a patched function (torch.sort, torch.Tensor.sort, "
    "...) raise NotImplementedError('object proxy must define __deepcopy__()') from wrapt; "
    "torch's functions copy as themselves, so deep-copying any object holding torch.sort "
    "(a config, an nn.Module attribute) breaks under install()"))
@pytest.mark.parametrize("how", ["copy", "deepcopy"])
@pytest.mark.parametrize("target", ["torch.sort", "torch.Tensor.sort"])
def test_copy_of_patched_function(kw, how, target):
    import copy
    fn = torch.sort if target == "torch.sort" else torch.Tensor.sort
    original = ORIG["sort"] if target == "torch.sort" else ORIG_METHOD["sort"]
    assert getattr(copy, how)(original) is original
    assert getattr(copy, how)(fn) == original
    assert getattr(copy, how)([fn])[0] == original


@pytest.mark.xfail(strict=True, raises=NotImplementedError, reason=(
    "kwker bug: pickle.dumps(torch.Tensor.sort) (any patched Tensor method) raises "
    "NotImplementedError('object proxy must define __reduce__()') while installed: "
    "torch.Tensor.sort is then a wrapt BoundFunctionWrapper, not a KwkerFunctionWrapper, "
    "so the __reduce_ex__ override does not apply; torch pickles it"))
@pytest.mark.parametrize("op", ["sort", "topk", "median"])
def test_pickle_patched_tensor_method(kw, op):
    import pickle
    assert pickle.loads(pickle.dumps(ORIG_METHOD[op])) is ORIG_METHOD[op]
    assert pickle.loads(pickle.dumps(getattr(torch.Tensor, op))) == ORIG_METHOD[op]


@pytest.mark.xfail(strict=True, raises=pytest.fail.Exception, reason=(
    "kwker bug (found by hypothesis): torch.argsort(x, stable=None) and x.argsort(stable=None) "
    "raise TypeError in torch 2.13 (argsort's stable is `bool`, only sort's is `bool?`); "
    "kwker's shared _parse_sort maps stable=None to False and returns a result"))
@pytest.mark.parametrize("form", ["function", "method", "with dim"])
def test_argsort_stable_none_raises_like_torch(kw, form):
    x = torch.tensor([3.0, 1.0, 2.0])
    call = {"function": lambda f: f(x, stable=None), "method": lambda f: f(x, stable=None),
            "with dim": lambda f: f(x, dim=0, stable=None)}[form]
    original = ORIG_METHOD["argsort"] if form == "method" else ORIG["argsort"]
    patched = torch.Tensor.argsort if form == "method" else torch.argsort
    with pytest.raises(TypeError):
        call(original)
    with pytest.raises(TypeError):
        call(patched)  # kwker returns tensor([1, 2, 0])
