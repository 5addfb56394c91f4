"""PyTorch's own OpInfo sample inputs (and error inputs) for every patched op:
under install() each gives torch's exact result, or raises the same
exception type with the same message, through the function and the Tensor
method.  (The samples hold few ties and no largest=False/sorted=False topk:
test_exactness.py covers those.)"""
import sys
import types
import unittest

import pytest
import torch

import kwker
from kwker_testing import OPS, compare


def _load_op_db():
    # torch.testing._internal imports expecttest (a test-only dependency of
    # PyTorch) for its TestCase base class; a stand-in is enough for op_db.
    try:
        import expecttest  # noqa: F401
    except ImportError:
        stub = types.ModuleType("expecttest")
        stub.TestCase = unittest.TestCase
        sys.modules["expecttest"] = stub
    from hypothesis import settings
    profile = settings.default
    from torch.testing._internal.common_methods_invocations import op_db
    # common_utils loads its own hypothesis profile on import: put ours back
    settings.register_profile("_kwker_restored", profile)
    settings.load_profile("_kwker_restored")
    return op_db


try:
    OP_DB = [op for op in _load_op_db() if op.name in OPS]
except Exception as exc:  # noqa: BLE001 - an internal module; skip rather than break
    OP_DB = []
    LOAD_ERROR = exc
else:
    LOAD_ERROR = None

DTYPES = (torch.float32, torch.float64, torch.int64, torch.bfloat16, torch.uint8, torch.bool)
# unique has ~500 samples a dtype; it has no kernel yet, so two dtypes do
FEW_DTYPES = {"unique": (torch.float32, torch.int64)}


def _cases():
    cases = []
    for op in OP_DB:
        supported = op.supported_dtypes("cpu")
        for dtype in FEW_DTYPES.get(op.name, DTYPES):
            if dtype in supported:
                cases.append(pytest.param(op, dtype, id=f"{op.name}-{op.variant_test_name}-"
                                                         f"{str(dtype)[6:]}"))
    return cases


def test_op_db_covers_the_patched_ops():
    if LOAD_ERROR is not None:
        pytest.skip(f"op_db unavailable: {LOAD_ERROR!r}")
    names = {op.name for op in OP_DB}
    assert names == set(OPS), set(OPS) - names


def _key(sample):
    def norm(a):
        if isinstance(a, torch.Tensor):
            return ("T", a.dtype, tuple(a.shape), a.stride(), a.storage_offset(),
                    tuple(a.flatten()[:64].tolist()) if a.numel() else ())
        if isinstance(a, (list, tuple)):
            return tuple(norm(b) for b in a)
        return repr(a)
    return (norm(sample.input), norm(sample.args), tuple(sorted(
        (k, norm(v)) for k, v in sample.kwargs.items())))


@pytest.mark.skipif(not OP_DB, reason=f"op_db unavailable: {LOAD_ERROR!r}")
@pytest.mark.parametrize("opinfo,dtype", _cases())
def test_opinfo_samples(kw, opinfo, dtype):
    name = opinfo.name
    seen = set()
    n = 0
    for sample in opinfo.sample_inputs("cpu", dtype, requires_grad=False):
        key = _key(sample)
        if key in seen:
            continue
        seen.add(key)
        kw.reset_stats()
        compare(name, sample.input, *sample.args, fast=None, **sample.kwargs)
        if opinfo.method_variant is not None:
            compare(name, sample.input, *sample.args, method=True, fast=None, **sample.kwargs)
        n += 1
        entry = kw.stats().get(name)
        assert entry is not None and entry["fast"] + sum(entry["fallback"].values()) >= 1, \
            "the call did not go through Kwker"
    assert n > 0


@pytest.mark.skipif(not OP_DB, reason=f"op_db unavailable: {LOAD_ERROR!r}")
@pytest.mark.parametrize("opinfo", [op for op in OP_DB if op.error_inputs_func is not None],
                         ids=lambda op: op.name)
def test_opinfo_error_inputs(kw, opinfo):
    for err in opinfo.error_inputs("cpu"):
        s = err.sample_input
        with pytest.raises(err.error_type, match=err.error_regex):
            getattr(torch, opinfo.name)(s.input, *s.args, **s.kwargs)
        compare(opinfo.name, s.input, *s.args, fast=None, **s.kwargs)


@pytest.mark.skipif(not OP_DB, reason=f"op_db unavailable: {LOAD_ERROR!r}")
def test_fast_path_ran_on_opinfo_sort_samples(kw):
    """The OpInfo sort samples are plain tensors: most must take the fast
    path (else the comparison above would only test torch against itself)."""
    sort = next(op for op in OP_DB if op.name == "sort")
    for sample in sort.sample_inputs("cpu", torch.float32, requires_grad=False):
        torch.sort(sample.input, *sample.args, **sample.kwargs)
    stats = kwker.stats()["sort"]
    assert stats["fast"] > sum(stats["fallback"].values())
