"""install()'s settings (use_fast, strict, verify, timing, environment
defaults), kwker.explain, kwker.report and the "kwker" DEBUG log."""
import logging
import warnings

import numpy as np
import pytest
import torch

import kwker
from kwker import dispatch, patching, policy, support
from kwker.ops import sorting
from kwker_testing import ORIG, assert_same, compare, fallbacks, fast_count, make_values

ENV_VARS = tuple(policy.ENV_VARS.values())


@pytest.fixture
def x(gen):
    return make_values("ties", (6, 50), torch.float32, gen)


@pytest.fixture
def clean_env(monkeypatch):
    for var in ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def _patched_entries():
    return {p.name: p.entry for p in patching._applied}


# ------------------------------------------------------------------ use_fast

@pytest.mark.real_thresholds
def test_use_fast_modes(gen):
    """auto: the size rules apply; True: the kernel at any size; False:
    torch for every call.  Results are torch's in every mode."""
    small = make_values("ties", (3, 9), torch.float32, gen)  # far below every rule
    big = make_values("ties", (64, 256), torch.float32, gen)
    kwker.install()
    compare("sort", small, fast="small")
    compare("topk", small, 2, method=True, fast="small")
    compare("sort", big, 1)
    kwker.install(use_fast=True)
    assert kwker.info()["use_fast"] is True
    compare("sort", small)
    compare("topk", small, 2, method=True)
    compare("median", small, 1)
    kwker.install(use_fast=False)
    compare("sort", big, 1, fast="use_fast")
    compare("kthvalue", big, 3, method=True, fast="use_fast")
    kwker.install(use_fast="auto")
    compare("sort", small, fast="small")
    compare("sort", big, 1)


def test_use_fast_bad_value_patches_nothing(clean_env):
    with pytest.raises(ValueError):
        kwker.install(use_fast="sometimes")
    with pytest.raises(ValueError):
        kwker.install(strict=True, use_fast=False)  # every call would raise
    assert not kwker.is_installed()


def test_nothing_observed_patches_the_plain_entries(clean_env):
    """With strict, verify, timing and logging off the patched entries are
    the dispatcher's own functions: no wrapper, no per-call check."""
    assert not logging.getLogger("kwker").isEnabledFor(logging.DEBUG)
    for use_fast in ("auto", True):
        kwker.install(use_fast=use_fast)
        assert _patched_entries() == {op: dispatch.ENTRIES[op] for op in patching.ALL_OPS}
    kwker.install(use_fast=False)
    assert _patched_entries() == {op: dispatch.TORCH_ENTRIES[op] for op in patching.ALL_OPS}


def test_settings_change_rewraps_and_same_settings_keep_wrappers(clean_env, x):
    kwker.install()
    plain = torch.sort
    kwker.install()
    assert torch.sort is plain
    kwker.install(strict=True)
    strict = torch.sort
    assert strict is not plain and strict == ORIG["sort"]
    kwker.install(strict=True)
    assert torch.sort is strict
    # the last install() sets every patched op, including ones not named
    kwker.install(ops=["topk"])
    assert _patched_entries()["sort"] is dispatch.ENTRIES["sort"]
    compare("sort", x, 1)


def test_installed_restores_settings(clean_env, x):
    kwker.install(ops=["sort", "topk"], ties="stable")
    before = _patched_entries()
    with kwker.installed(strict=True, timing=True):
        assert kwker.info()["strict"] and kwker.info()["ties"] == "torch"
        with pytest.raises(kwker.KwkerFallbackError):
            torch.sort(x.to("meta"))  # cpu_dense
    assert _patched_entries() == before
    assert kwker.info()["ties"] == "stable" and not kwker.info()["strict"]
    assert set(kwker.info()["installed_ops"]) == {"sort", "topk"}


# -------------------------------------------------------------- environment

def test_environment_gives_the_defaults(clean_env, x):
    clean_env.setenv("KWKER_STRICT", "1")
    clean_env.setenv("KWKER_TIES", "stable")
    clean_env.setenv("KWKER_VERIFY", "warn")
    clean_env.setenv("KWKER_TIMING", "yes")
    kwker.install()
    info = kwker.info()
    assert (info["strict"], info["ties"], info["verify"], info["timing"]) == \
        (True, "stable", "warn", True)
    kwker.install(strict=False, ties="torch", verify=False, timing=False)  # keywords win
    info = kwker.info()
    assert (info["strict"], info["ties"], info["verify"], info["timing"]) == \
        (False, "torch", None, False)
    clean_env.setenv("KWKER_USE_FAST", "0")
    clean_env.setenv("KWKER_STRICT", "0")
    kwker.install()
    assert kwker.info()["use_fast"] is False
    compare("sort", x, fast="use_fast")
    clean_env.setenv("KWKER_VERIFY", "maybe")
    with pytest.raises(ValueError, match="verify"):
        kwker.install()


# ------------------------------------------------------------------- strict

def test_strict_raises_on_fallback_naming_op_and_reason(clean_env, x):
    kwker.install(strict=True)
    compare("sort", x, 1)  # the fast path is unaffected
    compare("topk", x, 3, method=True)
    for call, op, key in [
        (lambda: torch.median(x.clone().requires_grad_()), "median", "no_grad"),
        (lambda: x.to("meta").topk(2), "topk", "cpu_dense"),
        (lambda: torch.unique(x, dim=0), "unique", "unique_dim"),  # float slices
        (lambda: torch.sort(x[:, :0], 1), "sort", "nonempty"),
        (lambda: torch.median(x[:, :0], 0), "median", "nonempty"),
    ]:
        with pytest.raises(kwker.KwkerFallbackError) as info:
            call()
        assert isinstance(info.value, RuntimeError)
        assert info.value.op == op and info.value.condition.key == key
        assert f"torch.{op}" in str(info.value) and key in str(info.value)


def test_strict_keeps_torchs_own_errors(clean_env, x):
    """Inputs torch rejects raise torch's exception, not a KwkerFallbackError."""
    kwker.install(strict=True)
    compare("topk", x, 1000, fast="dim")           # k out of range: RuntimeError
    compare("topk", x.bool(), 2, fast="dtype")     # bool topk: RuntimeError
    compare("sort", x, 5, fast="dim")              # dim out of range: IndexError
    compare("sort", x, "rows", fast="arguments")   # TypeError from torch's parser
    # an argument form torch accepts but the fast path does not: strict
    with pytest.raises(kwker.KwkerFallbackError, match="arguments"):
        torch.topk(x, np.int64(2))


@pytest.mark.real_thresholds
def test_strict_small_inputs_and_use_fast_true(clean_env, gen):
    small = make_values("random", (2, 5), torch.float32, gen)
    kwker.install(strict=True)
    with pytest.raises(kwker.KwkerFallbackError, match="use_fast=True"):
        torch.sort(small)
    kwker.install(strict=True, use_fast=True)
    compare("sort", small)


# ------------------------------------------------------------------- verify

def _wrong_sort(monkeypatch):
    real = sorting.sort

    def wrong(x, dim, descending, order, want_values=True, want_indices=True):
        values, indices = real(x, dim, descending, order, want_values, want_indices)
        if values is not None:
            values.view(-1)[0] += 1
        return values, indices
    monkeypatch.setattr(sorting, "sort", wrong)


def test_verify_passes_when_identical(clean_env, x):
    kwker.install(verify=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compare("sort", x, 1)
        compare("topk", x, 4, method=True)
        compare("median", x)
        compare("kthvalue", x, 2, 0)


def test_verify_raise_reports_the_difference(clean_env, x, monkeypatch):
    kwker.install(verify="raise")
    _wrong_sort(monkeypatch)
    with pytest.raises(kwker.KwkerMismatchError, match=r"torch\.sort.*values.*1 of 300"):
        torch.sort(x, 1)
    torch.argsort(x, 1)  # argsort's values are not kept: nothing differs


def test_verify_warn_returns_kwkers_result_unchanged(clean_env, x, monkeypatch):
    kwker.install(verify="warn")
    _wrong_sort(monkeypatch)
    expected = sorting.sort(x, 1, False, dispatch.Policy.order)[0]
    kwker.reset_stats()
    with pytest.warns(kwker.KwkerMismatchWarning, match="values") as record:
        got = torch.sort(x, 1)
    assert record[0].filename == __file__  # points at the caller
    assert_same(expected, got.values)
    assert fast_count("sort") == 1 and not torch.equal(got.values, ORIG["sort"](x, 1).values)


def test_verify_difference_checks_every_bit():
    from kwker.observe import difference
    a = torch.tensor([0.0, 1.0, float("nan")])
    assert difference(a, a.clone()) is None
    assert "1 of 3" in difference(torch.tensor([-0.0, 1.0, float("nan")]), a)
    assert "dtype" in difference(a.double(), a)
    assert "shape" in difference(a[:2], a)
    t = a.expand(2, 3).t()
    assert difference(t, t.contiguous()) is None  # strides do not matter
    pair = torch.return_types.sort((a, torch.arange(3)))
    bad = torch.return_types.sort((a, torch.tensor([0, 2, 1])))
    assert difference(pair, pair) is None and "indices" in difference(bad, pair)


# ------------------------------------------------------- timing and report

def test_timing_and_report(clean_env, x, capsys):
    kwker.install()
    kwker.reset_stats()
    torch.sort(x)
    assert "time_s" not in kwker.stats()["sort"]  # not timed unless asked
    kwker.install(timing=True)
    kwker.reset_stats()
    torch.sort(x)
    x.topk(2)
    torch.unique(x, dim=0)
    stats = kwker.stats()
    assert stats["sort"]["fast"] == 1 and stats["sort"]["time_s"]["fast"] > 0
    assert stats["unique"]["time_s"]["fallback"] > 0 and stats["unique"]["time_s"]["fast"] == 0
    kwker.report()
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[1].split()[:3] == ["op", "fast", "torch"] and "fast ms" in lines[1]
    rows = {line.split()[0]: line.split() for line in lines[3:] if line and line[0] != "t"}
    assert rows["sort"][1:3] == ["1", "0"] and rows["unique"][1:4] == ["0", "1", "unique_dim"]
    assert "total: 2 fast, 1 to torch" in out


def test_report_without_calls(capsys):
    kwker.reset_stats()
    kwker.report()
    assert "no calls" in capsys.readouterr().out


# ------------------------------------------------------------------ logging

def test_debug_log_says_fast_or_fallback_and_why(clean_env, x, caplog):
    with caplog.at_level(logging.DEBUG, logger="kwker"):
        kwker.install()  # the level is read here
        torch.sort(x)
        torch.median(x.double().requires_grad_())
    messages = [r.getMessage() for r in caplog.records if r.name == "kwker"]
    assert messages == ["sort float32[6, 50]: fast",
                        f"median float64[6, 50]: torch (no_grad: {support.NO_GRAD.reason})"]
    kwker.install()  # DEBUG off again: the plain entries
    assert _patched_entries()["sort"] is dispatch.ENTRIES["sort"]


# ------------------------------------------------------------------ explain

_CALLS = [
    # (form, op, args, kwargs) - the input is the fixture's x unless a
    # callable makes it from x
    ("function", "sort", (), {}),
    ("method", "sort", (0, True), {}),
    ("unbound", "topk", (3,), {}),
    ("name", "topk", (3,), {"largest": False}),
    ("function", "median", (), {}),
    ("method", "kthvalue", (2, 1), {}),
    ("function", "nanmedian", (1, True), {}),
    ("function", "argsort", (1,), {"stable": True}),
    ("method", "msort", (), {}),
    ("function", "sort", (5,), {}),                      # dim
    ("function", "topk", (1000,), {}),                   # k
    ("function", "topk", (2.0,), {}),                    # arguments
    ("function", "sort", (), {"dim": np.int64(0)}),      # arguments
    ("function", "unique", (), {}),
    ("function", "unique", (), {"dim": 0}),              # unique_dim (float slices)
    (lambda x: x.long(), "unique", (), {"dim": 0}),
    ("function", "quantile", (0.5,), {}),
    (lambda x: x.int(), "quantile", (0.5,), {}),         # dtype
    (lambda x: x.bool(), "topk", (2,), {}),              # dtype
    (lambda x: x.clone().requires_grad_(), "median", (), {}),  # no_grad (all elements)
    (lambda x: x[:, :0], "sort", (), {}),                # nonempty
    (lambda x: x.to("meta"), "sort", (), {}),            # cpu_dense
]


def _explain_and_call(form, op, x, args, kwargs):
    if callable(form):
        x, form = form(x), "function"
    target = {"function": getattr(torch, op), "method": getattr(x, op),
              "unbound": getattr(torch.Tensor, op), "name": op}[form]
    explain_args = args if form == "method" else (x,) + args
    before = kwker.stats()
    explanation = kwker.explain(target, *explain_args, **kwargs)
    assert kwker.stats() == before, "explain() ran something"
    kwker.reset_stats()
    call = getattr(torch, op) if form == "name" else target
    try:
        call(*explain_args, **kwargs)
    except Exception:  # noqa: BLE001 - torch rejects some of these inputs
        pass
    return explanation, kwker.stats().get(op, {"fast": 0, "fallback": {}})


@pytest.mark.parametrize("use_fast", ["auto", False])
def test_explain_agrees_with_the_call(clean_env, x, use_fast):
    kwker.install(use_fast=use_fast)
    seen = set()
    for form, op, args, kwargs in _CALLS:
        explanation, counted = _explain_and_call(form, op, x, args, kwargs)
        assert explanation.op == op and explanation.installed
        if explanation.fast:
            assert counted == {"fast": 1, "fallback": {}}, (op, args, counted)
            assert "fast path" in str(explanation)
            seen.add("fast")
        else:
            assert counted["fast"] == 0, (op, args, counted)
            assert counted["fallback"] == {explanation.condition.key: 1}, (op, args, counted)
            assert explanation.condition.key in str(explanation)
            seen.add(explanation.condition.key)
    if use_fast is False:
        assert seen == {"use_fast"}
    else:
        assert seen == {"fast", "dim", "arguments", "dtype", "no_grad", "nonempty", "cpu_dense",
                        "unique_dim"}


@pytest.mark.real_thresholds
def test_explain_small_and_use_fast_true(clean_env, gen):
    small = make_values("random", (4, 4), torch.float32, gen)
    assert kwker.explain(torch.sort, small).condition is support.SMALL
    kwker.install(use_fast=True)
    assert kwker.explain(small.sort).fast


def test_explain_when_not_installed(x):
    explanation = kwker.explain(torch.topk, x, 2)
    assert explanation.fast and not explanation.installed
    assert "not patched" in str(explanation)
    kwker.install(ops=["sort"])
    assert kwker.explain(torch.sort, x).installed
    assert not kwker.explain(x.topk, 2).installed


@pytest.mark.parametrize("fn", [len, "sorted", np.sort, torch.add, "Sort"])
def test_explain_rejects_other_functions(x, fn):
    with pytest.raises(ValueError, match="not one of the torch functions"):
        kwker.explain(fn, x)


def test_explain_under_a_transform(kw, x):
    from torch.overrides import TorchFunctionMode

    class Mode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))
    with Mode():
        assert kwker.explain(torch.sort, x).condition is support.NO_TRANSFORM
    assert kwker.explain(torch.sort, x).fast
    assert fallbacks("sort") == {}


def test_kwker_log_variable(clean_env, x, capfd):
    """KWKER_LOG=1: the kwker logger at DEBUG on stderr (observing entries)."""
    logger = logging.getLogger("kwker")
    saved = (logger.level, list(logger.handlers), logger.propagate)
    clean_env.setenv("KWKER_LOG", "1")
    try:
        kwker.install()
        torch.sort(x)
        assert "kwker: sort float32[6, 50]: fast" in capfd.readouterr().err
    finally:
        logger.setLevel(saved[0])
        logger.handlers[:] = saved[1]
        logger.propagate = saved[2]
