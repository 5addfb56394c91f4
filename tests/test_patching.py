"""install()/uninstall(): what gets patched, identity after uninstall, and
that the patched functions behave like torch's for everything but speed
(equality, hashing, pickling, TorchScript, torch.compile, threads).  Every
test runs twice: with the C gate's wrappers (kwker._gate) and with the
Python ones (KWKER_NO_GATE=1), as wrapt tests its own C extension."""
import os
import pickle
import subprocess
import sys
import textwrap
import threading
import warnings

import pytest
import torch

import kwker
from kwker import patching
from kwker_testing import (OPS, ORIG, ORIG_METHOD, TARGET_NAMES, assert_same, compare, fast_count,
                           make_values)


@pytest.fixture(autouse=True, params=["gate", "python"])
def _wrappers(request, monkeypatch):
    if request.param == "python" and "native_library_missing" in request.node.name:
        pytest.skip("no wrappers without the native library: one way is enough")
    if request.param == "python":
        monkeypatch.setenv(patching.GATE_ENV_VAR, "1")
    else:
        monkeypatch.delenv(patching.GATE_ENV_VAR, raising=False)


# Tensor methods implemented in C (on TensorBase): install sets them on
# torch.Tensor, uninstall must delete them again
C_METHODS = [op for op in OPS if op not in vars(torch.Tensor)]


def _tensor_vars():
    return set(vars(torch.Tensor))


def assert_untouched():
    for op in OPS:
        assert getattr(torch, op) is ORIG[op], op
        assert getattr(torch.Tensor, op) is ORIG_METHOD[op], op
    for op in C_METHODS:
        assert op not in vars(torch.Tensor), op
    assert not kwker.is_installed()
    assert kwker.info()["installed_ops"] == []


def test_c_methods_are_the_tensorbase_ones():
    assert set(C_METHODS) == set(OPS) - {"unique"}
    for op in C_METHODS:
        assert ORIG_METHOD[op] is vars(torch._C.TensorBase)[op]


def test_install_patches_everything_and_uninstall_restores_identity():
    before = _tensor_vars()
    assert kwker.install() is True
    assert kwker.is_installed()
    for op in OPS:
        assert getattr(torch, op) is not ORIG[op], op
    for op in C_METHODS:
        assert getattr(torch.Tensor, op) is not ORIG_METHOD[op], op
        assert op in vars(torch.Tensor)
    # Tensor.unique is Python code calling torch.unique: not patched itself
    assert torch.Tensor.unique is ORIG_METHOD["unique"]
    assert set(kwker.info()["installed_ops"]) == set(OPS)
    kwker.uninstall()
    assert_untouched()
    assert _tensor_vars() == before
    kwker.uninstall()  # a second uninstall is harmless
    assert_untouched()


def test_install_is_idempotent(gen):
    assert kwker.install() is True
    wrappers = {op: getattr(torch, op) for op in OPS}
    methods = {op: vars(torch.Tensor)[op] for op in C_METHODS}
    assert kwker.install() is True
    assert kwker.install(ops=["sort"]) is True
    for op in OPS:
        assert getattr(torch, op) is wrappers[op]
    for op in C_METHODS:
        assert vars(torch.Tensor)[op] is methods[op]
    assert len(patching._applied) == len(OPS) + len(C_METHODS)
    x = make_values("ties", (5, 40), torch.float32, gen)
    compare("sort", x)
    compare("topk", x, 4, method=True)
    kwker.uninstall()
    assert_untouched()


def test_install_some_ops(gen):
    assert kwker.install(ops=["topk"]) is True
    assert kwker.info()["installed_ops"] == ["topk"]
    assert torch.topk is not ORIG["topk"] and torch.Tensor.topk is not ORIG_METHOD["topk"]
    for op in OPS:
        if op != "topk":
            assert getattr(torch, op) is ORIG[op], op
            assert getattr(torch.Tensor, op) is ORIG_METHOD[op], op
    x = make_values("random", (3, 70), torch.float32, gen)
    compare("topk", x, 5)
    kwker.reset_stats()
    torch.sort(x)
    assert kwker.stats() == {}
    # adding ops later keeps the earlier ones
    kwker.install(ops=("median", "sort"))
    assert set(kwker.info()["installed_ops"]) == {"topk", "median", "sort"}
    kwker.uninstall()
    assert_untouched()


@pytest.mark.parametrize("ops", [["nope"], ["topk", "nope"], ["Sort"], "sort"])
def test_install_unknown_op_patches_nothing(ops):
    with pytest.raises(ValueError):
        kwker.install(ops=ops)  # a bare string is a list of letters: unknown ops
    assert_untouched()


def test_install_bad_ties_patches_nothing():
    with pytest.raises(ValueError):
        kwker.install(ties="random")
    assert_untouched()


def test_installed_context_manager(gen):
    x = make_values("ties", (4, 30), torch.float32, gen)
    with kwker.installed():
        assert kwker.is_installed()
        compare("sort", x)
    assert_untouched()
    # restores the state before the block: some ops, and the ties policy
    kwker.install(ops=["sort"])
    sort_wrapper = torch.sort
    with kwker.installed(ties="stable"):
        assert kwker.info()["ties"] == "stable"
        assert torch.topk is not ORIG["topk"]
    assert kwker.info()["installed_ops"] == ["sort"] and kwker.info()["ties"] == "torch"
    assert torch.sort == sort_wrapper and torch.topk is ORIG["topk"]
    kwker.uninstall()
    # and on an exception
    with pytest.raises(KeyError):
        with kwker.installed(ops=["median"]):
            raise KeyError("boom")
    assert_untouched()


def test_wrapper_equals_and_hashes_like_original(kw):
    for op in OPS:
        wrapper = getattr(torch, op)
        assert wrapper is not ORIG[op]
        assert wrapper == ORIG[op] and ORIG[op] == wrapper
        assert hash(wrapper) == hash(ORIG[op])
        assert {ORIG[op]: op}[wrapper] == op
        assert {wrapper: op}[ORIG[op]] == op
        assert wrapper.__name__ == ORIG[op].__name__
        assert wrapper.__doc__ == ORIG[op].__doc__
    for op in C_METHODS:
        assert torch.Tensor.__dict__[op] == ORIG_METHOD[op]
        assert {ORIG_METHOD[op]: 1}[torch.Tensor.__dict__[op]] == 1
    # torch.overrides tables keyed on torch functions still work
    overrides = torch.overrides.get_testing_overrides()
    assert torch.sort in overrides and torch.Tensor.sort in overrides
    assert torch.overrides.is_tensor_method_or_property(torch.Tensor.sort)


def test_wrapper_binds_as_a_class_attribute_as_the_original_does(kw, gen):
    """A torch function kept as a class attribute of a tensor subclass: a
    Python function (torch.unique) binds the instance as its first
    argument, a builtin (torch.sort) does not bind; the wrappers do as their
    originals (torch.unique's skips wrapt's per-call `__self__` lookup:
    patching.KwkerFunctionWrapper)."""
    x = make_values("ties", (40,), torch.int64, gen)
    for op in OPS:
        wrapper, original = getattr(torch, op), ORIG[op]
        holder = type("Holder", (torch.Tensor,), {"wrapped": wrapper, "original": original})
        t = x.as_subclass(holder)
        assert holder.wrapped is wrapper
        original_binds = t.original is not original
        assert original_binds == (op == "unique")
        assert (t.wrapped is not wrapper) == original_binds, op
        if original_binds:
            assert_same(t.wrapped(return_counts=True), t.original(return_counts=True))


def test_names_bound_before_install_keep_the_original(gen):
    from torch import sort as early_sort
    kwker.install()
    x = make_values("random", (3, 50), torch.float32, gen)
    kwker.reset_stats()
    early_sort(x)
    assert kwker.stats() == {}
    torch.sort(x)
    assert fast_count("sort") == 1


def test_tensor_unique_reaches_torch_unique(kw, gen):
    x = make_values("ties", (40,), torch.int64, gen)
    compare("unique", x, method=True)
    compare("unique", x, return_counts=True, method=True)


def test_pickle_while_installed(kw):
    for op in OPS:
        if op == "unique":  # torch.unique itself does not pickle (a local function)
            continue
        data = pickle.dumps(getattr(torch, op))
        assert pickle.loads(data) is getattr(torch, op)
    data = pickle.dumps({"fn": torch.sort, "k": torch.topk})
    kwker.uninstall()
    # unpickled after uninstall: torch's function again
    assert pickle.loads(data) == {"fn": ORIG["sort"], "k": ORIG["topk"]}
    assert pickle.loads(data)["fn"] is ORIG["sort"]


def scripted_body(x: torch.Tensor, k: int):
    v, i = torch.sort(x, 1, True)
    t = torch.topk(x, k)
    m = torch.median(x, 0)
    s = x.sort(0)
    a = torch.argsort(x, dim=1)
    return v, i, t.values, t.indices, m.values, m.indices, s.values, torch.median(x), a


def test_jit_script_while_installed(kw, gen):
    x = make_values("ties", (6, 33), torch.float32, gen)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        scripted = torch.jit.script(scripted_body)
    graph = str(scripted.graph)
    for name in ("aten::sort", "aten::topk", "aten::median", "aten::argsort"):
        assert name in graph, name
    got = scripted(x, 3)
    v, i = ORIG["sort"](x, 1, True)
    t = ORIG["topk"](x, 3)
    m = ORIG["median"](x, 0)
    s = ORIG_METHOD["sort"](x, 0)
    ref = (v, i, t.values, t.indices, m.values, m.indices, s.values, ORIG["median"](x),
           ORIG["argsort"](x, dim=1))
    assert_same(ref, got)


def compiled_body(x):
    v, i = torch.sort(x, 1)
    t = torch.topk(x, 3, largest=False)
    return (v, i, t.values, t.indices, torch.median(x, 0).values, torch.median(x),
            torch.argsort(x, 0, True), x.sort(0, True)[1], x.topk(2).values)


def _eager_reference(x):
    v, i = ORIG["sort"](x, 1)
    t = ORIG["topk"](x, 3, largest=False)
    return (v, i, t.values, t.indices, ORIG["median"](x, 0).values, ORIG["median"](x),
            ORIG["argsort"](x, 0, True), ORIG_METHOD["sort"](x, 0, True)[1],
            ORIG_METHOD["topk"](x, 2).values)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_fullgraph(kw, gen, backend):
    import torch._dynamo
    torch._dynamo.reset()
    x = make_values("random", (8, 20), torch.float32, gen)
    explanation = torch._dynamo.explain(compiled_body)(x)
    assert explanation.graph_break_count == 0, explanation.break_reasons
    assert explanation.graph_count == 1
    compiled = torch.compile(compiled_body, fullgraph=True, backend=backend)
    assert_same(_eager_reference(x), compiled(x))
    y = make_values("random", (8, 20), torch.float32, gen)  # same shapes: no recompile
    got = compiled(y)
    for r, g in zip(_eager_reference(y), got):
        assert torch.equal(r, g)
    torch._dynamo.reset()


def test_threads_concurrent_calls(kw, gen):
    inputs = [make_values(kind, (64, 300), torch.float32, gen)
              for kind in ("random", "ties", "nan", "bf16ties")]
    refs = [(ORIG["sort"](x, 1), ORIG["topk"](x, 7), ORIG["median"](x, 1)) for x in inputs]
    errors = []
    barrier = threading.Barrier(8)

    def work(t):
        try:
            barrier.wait()
            for rep in range(15):
                j = (t + rep) % len(inputs)
                x = inputs[j]
                assert_same(refs[j][0], torch.sort(x, 1))
                assert_same(refs[j][1], x.topk(7))
                assert_same(refs[j][2], torch.median(x, 1))
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors[0]
    # the counters are documented as approximate under races
    assert 0 < fast_count("sort") <= 8 * 15


def test_install_uninstall_racing_with_calls(gen):
    """Patching and unpatching while other threads call the ops never gives a
    wrong result (each call is served by torch or by Kwker, both exact)."""
    inputs = [make_values(kind, (16, 200), torch.float32, gen) for kind in ("ties", "nan")]
    refs = [(ORIG["sort"](x, 1), ORIG["topk"](x, 5), ORIG_METHOD["argsort"](x, 0)) for x in inputs]
    stop = threading.Event()
    errors = []
    calls = [0]

    def caller(t):
        try:
            while not stop.is_set():
                j = t % 2
                x = inputs[j]
                assert_same(refs[j][0], torch.sort(x, 1))
                assert_same(refs[j][1], torch.topk(x, 5))
                assert_same(refs[j][2], x.argsort(0))
                calls[0] += 1
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)
            stop.set()

    threads = [threading.Thread(target=caller, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    try:
        for i in range(300):
            kwker.install()  # (ties="stable" would change results by design)
            with kwker.installed(ops=["topk"]):
                pass
            kwker.uninstall()
            if stop.is_set():
                break
    finally:
        stop.set()
        for th in threads:
            th.join()
        kwker.uninstall()
    assert not errors, errors[0]
    assert calls[0] > 0


def test_info_and_stats(gen):
    info = kwker.info()
    for key in ("version", "native_version", "target", "native_error", "torch",
                "installed_ops", "ties"):
        assert key in info, key
    assert info["version"] == kwker.__version__
    assert info["torch"] == torch.__version__
    assert info["target"] in TARGET_NAMES
    assert info["native_error"] is None
    assert info["gate"] is (patching.GATE_ENV_VAR not in os.environ)  # the fixture's two ways
    kwker.install()
    kwker.reset_stats()
    x = make_values("random", (3, 9), torch.float32, gen)
    torch.sort(x)
    torch.sort(x)
    torch.topk(x, 0, 0)
    for _ in range(2):
        with pytest.raises(RuntimeError):
            torch.topk(x, 4, 0)  # k out of range: torch raises after the fallback
    stats = kwker.stats()
    assert stats["sort"] == {"fast": 2, "fallback": {}}
    assert stats["topk"] == {"fast": 1, "fallback": {"dim": 2}}
    stats["sort"]["fast"] = 99  # a snapshot, not the live counters
    assert kwker.stats()["sort"]["fast"] == 2
    kwker.reset_stats()
    assert kwker.stats() == {}


_NO_NATIVE = textwrap.dedent("""
    import sys, warnings
    sys.modules["kwker._kwker_native"] = None   # the library fails to import
    import torch
    originals = {op: getattr(torch, op) for op in ("sort", "topk", "median", "unique")}
    methods = {op: getattr(torch.Tensor, op) for op in ("sort", "topk", "median")}
    import kwker
    from kwker import dispatch, _native
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = kwker.install()
        second = kwker.install(ops=["topk"])
        with kwker.installed():
            pass
    kw = [w for w in caught if issubclass(w.category, kwker.KwkerWarning)]
    assert first is False and second is False, (first, second)
    assert len(kw) == 1, [str(w.message) for w in caught]
    assert "native library failed to load" in str(kw[0].message), kw[0].message
    assert kw[0].filename == "<string>", kw[0].filename  # points at the caller
    for op, f in originals.items():
        assert getattr(torch, op) is f, op
    for op, f in methods.items():
        assert getattr(torch.Tensor, op) is f and op not in vars(torch.Tensor), op
    assert not kwker.is_installed()
    info = kwker.info()
    assert info["native_error"] and info["target"] == "unavailable", info
    # the entry points themselves fall back with the 'native' condition
    x = torch.randn(8, 1000)  # above the small-input crossover
    got = dispatch.sort_entry(torch.sort, None, (x, 1), {})
    ref = torch.sort(x, 1)
    assert torch.equal(got.values, ref.values) and torch.equal(got.indices, ref.indices)
    assert kwker.stats() == {"sort": {"fast": 0, "fallback": {"native": 1}}}, kwker.stats()
    try:
        _native.set_target("portable")
    except RuntimeError:
        pass
    else:
        raise AssertionError("set_target without the library")
    print("OK")
""")


def test_native_library_missing_subprocess():
    env = dict(os.environ)
    env.pop("KWKER_INSTALL", None)
    proc = subprocess.run([sys.executable, "-c", _NO_NATIVE], capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("OK"), \
        proc.stdout + proc.stderr


@pytest.mark.real_thresholds
def test_methods_through_the_class_and_bound_count_alike(kw, gen):
    """KwkerMethod: torch.Tensor.sort(x, ...) and x.sort(...) are the same
    call (fast or torch, counted once each); a bound method pickles with
    its tensor and names the op."""
    x = make_values("random", (3, 4000), torch.float32, gen)
    small = make_values("random", (5,), torch.float32, gen)
    kwker.reset_stats()
    assert_same(ORIG_METHOD["sort"](x, 1), torch.Tensor.sort(x, 1))
    assert_same(ORIG_METHOD["sort"](x, 1), x.sort(1))
    assert_same(ORIG_METHOD["topk"](small, 2), torch.Tensor.topk(small, 2))
    assert_same(ORIG_METHOD["topk"](small, 2), small.topk(2))
    assert kwker.stats() == {"sort": {"fast": 2, "fallback": {}},
                             "topk": {"fast": 0, "fallback": {"small": 2}}}
    assert x.sort.__name__ == "sort" and x.sort.__self__ is x
    with pytest.raises(TypeError):
        torch.Tensor.sort(5)  # torch's own error for a non-tensor


@pytest.mark.real_thresholds
def test_small_fallbacks_counted_with_observed_ones(gen):
    small = make_values("random", (5,), torch.float32, gen)
    kwker.install()
    kwker.reset_stats()
    torch.sort(small)
    kwker.install(timing=True)  # the observing wrappers count by reason themselves
    torch.sort(small)
    assert kwker.stats()["sort"]["fallback"] == {"small": 2}
    kwker.reset_stats()
    assert kwker.stats() == {}
    kwker.uninstall()
