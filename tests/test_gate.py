"""kwker._gate (native/python/kwker_gate.c): install()'s size-rule check in
C.  A call it sends to torch must be exactly torch's call (result, error,
arguments untouched, counted as `small`); anything else must reach the
Python entry as before.  Each test runs with the gate and with the Python
wrappers (KWKER_NO_GATE=1), which must agree; tests/test_patching.py runs
its identity tests both ways too."""
import copy
import gc
import pickle
import sys

import pytest
import torch

import kwker
from kwker import dispatch, patching, support
from kwker_testing import ORIG, ORIG_METHOD, assert_same, make_values

SIZE_RULE_OPS = [op for op, n in support.DEFAULT_SIZE_RULES.items() if n.min_numel > 0]


@pytest.fixture(params=["gate", "python"])
def wrappers(request, monkeypatch):
    """install()'s wrappers with the C gate, or the Python ones."""
    if request.param == "python":
        monkeypatch.setenv(patching.GATE_ENV_VAR, "1")
    else:
        monkeypatch.delenv(patching.GATE_ENV_VAR, raising=False)
    return request.param


def test_gate_is_built():
    """CI builds it: losing it (a broken build, optional=True hiding the
    error) must fail here rather than slow every fallback by ~1 us."""
    assert patching._gate is not None
    assert patching.gate_module() is patching._gate


def test_install_uses_the_gate_unless_turned_off(wrappers):
    kwker.install()
    gated = wrappers == "gate"
    assert (type(torch.Tensor.sort).__name__ == "MethodGate") == gated
    assert (type(torch.sort._self_wrapper).__name__ == "FunctionGate") == gated
    kwker.install(strict=True)  # observed entries keep the Python wrappers
    assert type(torch.Tensor.sort) is patching.KwkerMethod
    kwker.uninstall()
    assert torch.sort is ORIG["sort"] and torch.Tensor.sort is ORIG_METHOD["sort"]


def _small_calls(x):
    """(name, call) in every form install() patches, each below the
    shipped crossovers."""
    return [
        ("torch.sort", lambda: torch.sort(x, descending=True)),
        ("torch.sort(input=)", lambda: torch.sort(input=x, dim=-1)),
        ("x.sort", lambda: x.sort(0, True)),
        ("Tensor.sort", lambda: torch.Tensor.sort(x, stable=True)),
        ("torch.argsort", lambda: torch.argsort(x, dim=0)),
        ("x.argsort", lambda: x.argsort(descending=True)),
        ("x.msort", lambda: x.msort()),
        ("torch.topk", lambda: torch.topk(x, 3, largest=False)),
        ("x.topk", lambda: x.topk(k=2)),
        ("torch.median", lambda: torch.median(x)),
        ("x.median(dim)", lambda: x.median(0, keepdim=True)),
        ("x.nanmedian", lambda: x.nanmedian()),
        ("torch.kthvalue", lambda: torch.kthvalue(x, 4)),
        ("torch.unique", lambda: torch.unique(x, return_counts=True)),
        ("x.unique", lambda: x.unique(sorted=True, return_inverse=True)),
    ]


@pytest.mark.real_thresholds
def test_small_calls_are_torchs_calls_counted(wrappers, gen):
    x = make_values("ties", (50,), torch.float32, gen)
    x[7] = float("nan")
    before = x.clone()
    expected = [(name, call()) for name, call in _small_calls(x)]
    kwker.install()
    kwker.reset_stats()
    for (name, call), (_, want) in zip(_small_calls(x), expected):
        assert_same(want, call(), name)
    assert torch.equal(x.nan_to_num(), before.nan_to_num())
    stats = kwker.stats()
    assert all(s["fast"] == 0 and set(s["fallback"]) == {"small"} for s in stats.values()), stats
    assert sum(s["fallback"]["small"] for s in stats.values()) == len(expected)


@pytest.mark.real_thresholds
@pytest.mark.parametrize("call, error", [
    (lambda x: torch.sort(x, dim=3), IndexError),
    (lambda x: x.topk(51), RuntimeError),
    (lambda x: torch.kthvalue(x, 0), RuntimeError),
    (lambda x: x.median(dim="rows"), TypeError),
    (lambda x: torch.sort(x, bogus=1), TypeError),
    (lambda x: torch.Tensor.sort(x, 0, False, True), TypeError),
    (lambda x: torch.sort(), TypeError),
    (lambda x: torch.Tensor.sort(), TypeError),
    (lambda x: torch.sort(x.tolist()), TypeError),
])
def test_small_calls_raise_torchs_errors(wrappers, gen, call, error):
    x = make_values("random", (50,), torch.float32, gen)
    with pytest.raises(error) as reference:
        call(x)
    kwker.install()
    with pytest.raises(error) as patched:
        call(x)
    assert str(patched.value) == str(reference.value)


@pytest.mark.real_thresholds
def test_crossovers_are_read_at_each_call(wrappers, gen, monkeypatch):
    """The gate holds no copy: calibration and install(use_fast=True)
    change what it does at once."""
    x = make_values("random", (4, 100), torch.float32, gen)
    kwker.install()
    kwker.reset_stats()
    torch.sort(x)
    assert kwker.stats()["sort"]["fallback"] == {"small": 1}
    monkeypatch.setitem(support.MIN_FAST_NUMEL, "sort", 64)
    monkeypatch.setitem(support.SIZE_RULES, "sort", support.SizeRule(64))
    kwker.reset_stats()
    assert_same(ORIG["sort"](x), torch.sort(x))
    assert kwker.stats()["sort"] == {"fast": 1, "fallback": {}}
    monkeypatch.setitem(support.MIN_FAST_NUMEL, "sort", support.DEFAULT_SIZE_RULES["sort"].min_numel)
    monkeypatch.undo()
    kwker.install(use_fast=True)
    kwker.reset_stats()
    assert_same(ORIG_METHOD["median"](x[0]), x[0].median())
    assert kwker.stats()["median"] == {"fast": 1, "fallback": {}}


@pytest.mark.real_thresholds
def test_other_inputs_reach_the_entry(wrappers, gen):
    """Tensor subclasses, parameters, non-tensors: not the gate's to send
    (its check is for exact torch.Tensor only); the entry gives the reason."""

    class Sub(torch.Tensor):
        pass
    x = make_values("random", (50,), torch.float32, gen)
    sub = x.as_subclass(Sub)
    param = torch.nn.Parameter(x.clone())
    kwker.install()
    kwker.reset_stats()
    assert_same(ORIG["sort"](sub), torch.sort(sub))
    with torch.no_grad():
        assert_same(ORIG_METHOD["topk"](param, 3), param.topk(3))
    fallbacks = {op: s["fallback"] for op, s in kwker.stats().items()}
    assert fallbacks == {"sort": {"plain_tensor": 1}, "topk": {"plain_tensor": 1}}


@pytest.mark.real_thresholds
def test_no_reference_leaks(wrappers, gen):
    """Every path of the gate releases what it takes (the tensor, the
    kwargs, the results), over many calls."""
    small = make_values("random", (50,), torch.float32, gen)
    large = make_values("random", (4, 5000), torch.float32, gen)
    kwker.install()
    calls = [lambda: torch.sort(small, dim=0), lambda: small.topk(k=3),
             lambda: torch.sort(input=large, dim=1), lambda: large.topk(3, dim=1, largest=True),
             lambda: torch.Tensor.median(large, 1)]
    for call in calls:
        call()
    gc.collect()
    refs = (sys.getrefcount(small), sys.getrefcount(large))
    for _ in range(100):
        for call in calls:
            call()
    gc.collect()
    assert (sys.getrefcount(small), sys.getrefcount(large)) == refs


def test_method_gate_is_the_original_to_its_users(wrappers):
    """What KwkerMethod promises, for the C type too: equal and hashing as
    the original, itself through the class, copied as itself, pickled as
    the attribute it is, the original's name and doc."""
    original = ORIG_METHOD["topk"]
    kwker.install()
    method = torch.Tensor.topk
    assert method is not original and method == original and original == method
    assert hash(method) == hash(original) and {original: 1}[method] == 1
    assert method.__wrapped__ is original
    assert method.__name__ == "topk" and method.__doc__ == original.__doc__
    assert copy.copy(method) is method and copy.deepcopy(method) is method
    assert pickle.loads(pickle.dumps(method)) is method
    x = torch.arange(6.0)
    bound = x.topk
    assert bound.__self__ is x
    assert_same(ORIG_METHOD["topk"](x, 2), bound(2))
    assert "topk" in repr(method)
    kwker.uninstall()
    assert pickle.loads(pickle.dumps(method)) is original  # whatever it is when loaded


def test_gate_refuses_bad_use():
    gate = patching._gate
    with pytest.raises(TypeError):
        gate.FunctionGate(op="sort")
    with pytest.raises(TypeError):
        gate.MethodGate(op="sort", body=dispatch.ENTRIES["sort"].body, tensor_type=torch.Tensor,
                        namespace=vars(dispatch), name="_MIN_NUMEL", original=5)
    g = gate.FunctionGate(op="sort", body=dispatch.ENTRIES["sort"].body,
                          tensor_type=torch.Tensor, namespace=vars(dispatch), name="_MIN_NUMEL")
    with pytest.raises(TypeError):
        g(1, 2)
    with pytest.raises(TypeError):
        g(ORIG["sort"], None, [torch.ones(3)], {})  # args must be a tuple
    with pytest.raises(TypeError):
        g(ORIG["sort"], None, (torch.ones(3),), [])  # kwargs a dict or None


@pytest.mark.real_thresholds
def test_other_devices_go_to_torch_as_cpu_dense(wrappers):
    """A tensor on another device goes to torch with its arguments (the
    gate sends it before parsing them; the Python entry after), counted
    under cpu_dense either way; below the crossover, under small."""
    large = torch.empty(4, 5000, device="meta")
    small = torch.empty(10, device="meta")
    kwker.install()
    kwker.reset_stats()
    for got, want in ((torch.sort(large, dim=1, descending=True),
                       ORIG["sort"](large, dim=1, descending=True)),
                      (large.topk(5), ORIG_METHOD["topk"](large, 5)),
                      (small.median(), ORIG_METHOD["median"](small))):
        for g, w in zip(got if isinstance(got, tuple) else (got,),
                        want if isinstance(want, tuple) else (want,)):
            assert (g.device, g.shape, g.dtype) == (w.device, w.shape, w.dtype)
    assert kwker.stats() == {"sort": {"fast": 0, "fallback": {"cpu_dense": 1}},
                             "topk": {"fast": 0, "fallback": {"cpu_dense": 1}},
                             "median": {"fast": 0, "fallback": {"small": 1}}}


@pytest.mark.real_thresholds
def test_counts_outlive_the_patch_and_reset_clears_them(wrappers, gen):
    """The gates count in C; stats() takes their counts, also from gates
    patched out since, and reset_stats() drops them."""
    x = make_values("random", (30,), torch.float32, gen)
    kwker.install()
    kwker.reset_stats()
    torch.sort(x)
    x.sort()
    kwker.uninstall()
    assert kwker.stats() == {"sort": {"fast": 0, "fallback": {"small": 2}}}
    kwker.install()
    x.topk(3)
    kwker.reset_stats()
    assert kwker.stats() == {}
    x.topk(3)
    assert kwker.stats() == {"topk": {"fast": 0, "fallback": {"small": 1}}}
