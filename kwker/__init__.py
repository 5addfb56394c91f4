"""Kwker: PyTorch's CPU sorting and selection, faster, with torch's exact results.

    import kwker
    kwker.install()      # torch.sort, torch.topk, ... now run Kwker's kernels
    kwker.uninstall()    # torch exactly as it was

Under install() every result is bit-identical to the running torch's,
including the order torch gives equal elements; calls the fast path does not
support go to torch unchanged (see kwker.explain and compat_matrix/).
"""
import contextlib
import threading
import warnings

from kwker import _native, dispatch, patching, policy, support
from kwker.errors import (KwkerFallbackError, KwkerMismatchError, KwkerMismatchWarning,
                          KwkerWarning)

__version__ = "0.1.0"

__all__ = ["install", "uninstall", "is_installed", "installed", "info", "stats",
           "reset_stats", "report", "explain", "release_workspace", "KwkerWarning",
           "KwkerFallbackError",
           "KwkerMismatchError", "KwkerMismatchWarning"]

_warned_unavailable = threading.Event()


def install(ops=None, *, ties=None, use_fast=None, strict=None, verify=None,
            timing=None) -> bool:
    """Route torch's sorting functions (and Tensor methods) through Kwker.

    ops: names to patch (default: all of kwker.patching.ALL_OPS).
    ties: "torch" (default) gives equal elements the order torch gives them,
      so results are bit-identical to torch's; "stable" orders equal
      elements by index (faster on tie-heavy inputs; what torch.ops.kwker
      always does).
    use_fast: "auto" (default) takes the fast path where it is supported and
      measured faster (support.SIZE_RULES, or this machine's
      `python -m kwker calibrate` results); True wherever supported, at any
      size; False never (every call goes to torch, still counted).
    strict: a call that goes to torch raises KwkerFallbackError naming the
      op and the reason (torch's own error where torch rejects the input).
    verify: "raise" (or True) / "warn": every fast call also runs torch and
      raises KwkerMismatchError / warns KwkerMismatchWarning on any bitwise
      difference; the result returned is Kwker's, unchanged.
    timing: time every call, for kwker.stats()/kwker.report().
    A keyword left as None takes its environment variable (KWKER_TIES,
    KWKER_USE_FAST, KWKER_STRICT, KWKER_VERIFY, KWKER_TIMING), else the
    default; KWKER_LOG=1 puts the "kwker" logger at DEBUG on stderr.
    The settings are process-wide: the last install() sets them for every
    patched op.  With strict, verify, timing or the "kwker" logger at DEBUG
    (checked here, when install() runs) the calls go through an observing
    wrapper; otherwise they cost nothing extra.

    Returns True if installed; False (with one KwkerWarning) when the native
    library is unavailable, in which case torch is left untouched.
    Idempotent and thread-safe; all-or-nothing.
    """
    names = patching.ALL_OPS if ops is None else tuple(ops)
    unknown = [op for op in names if op not in patching.PATCH_TABLE]
    if unknown:
        raise ValueError(f"kwker.install: unknown op(s) {unknown}; "
                         f"choose from {list(patching.ALL_OPS)}")
    settings = policy.resolve(ties=ties, use_fast=use_fast, strict=strict, verify=verify,
                              timing=timing)
    if not _native.available():
        if not _warned_unavailable.is_set():
            _warned_unavailable.set()
            warnings.warn(f"kwker.install: {_native.LOAD_ERROR}; torch is left unchanged",
                          KwkerWarning, stacklevel=2)
        return False
    if policy.log_requested():
        from kwker import observe
        observe.log_to_stderr()
    policy.apply(names, settings)
    return True


def uninstall() -> None:
    """Restore every original torch function and Tensor method (and the
    default settings)."""
    with patching.lock:
        patching.uninstall()
        policy.reset()


def is_installed() -> bool:
    return bool(patching.installed_ops())


@contextlib.contextmanager
def installed(ops=None, **settings):
    """`with kwker.installed(): ...` - patched inside the block (install()'s
    keywords apply), and torch restored to its state before the block on
    exit."""
    with patching.lock:
        before_ops, before = patching.installed_ops(), policy.current()
    install(ops, **settings)
    try:
        yield
    finally:
        with patching.lock:
            uninstall()
            if before_ops:
                policy.apply(before_ops, before)


def info() -> dict:
    """Versions, the native target in use, and why the library is missing
    if it is."""
    import torch
    return {
        "version": __version__,
        "native_version": _native.version(),
        "target": _native.target(),
        "native_error": _native.LOAD_ERROR,
        # install()'s size-rule check in C (kwker._gate), or the Python one
        "gate": patching.gate_module() is not None,
        "torch": torch.__version__,
        "installed_ops": list(patching.installed_ops()),
        "ties": "stable" if dispatch.Policy.order == _native.ORDER_STABLE else "torch",
        "use_fast": policy.current().use_fast,
        "strict": policy.current().strict,
        "verify": policy.current().verify,
        "timing": policy.current().timing,
    }


def release_workspace() -> None:
    """Free the workspace blocks the calling thread keeps between calls
    (at most four, each under 4 MiB; kwker.h kwk_release_workspace).  Other
    threads' blocks are freed when those threads exit."""
    if _native.lib is not None:
        _native.lib.kwk_release_workspace()


def stats() -> dict:
    """Per op: number of fast calls and of fallbacks by reason key (see
    kwker.support); with timing on (install(timing=True)), also "time_s":
    seconds spent in the fast path and in torch."""
    return dispatch.STATS.snapshot()


def reset_stats() -> None:
    dispatch.STATS.reset()


def report(file=None) -> None:
    """Print the per-op table of kwker.stats() (to stdout by default)."""
    from kwker.reporting import render
    print(render(stats()), file=file)


def explain(fn, *args, **kwargs):
    """Would `fn(*args, **kwargs)` take Kwker's fast path under the current
    settings, and if not, why?  Runs nothing.  fn: torch.topk, x.topk,
    torch.Tensor.topk, or an op name ("topk", input first).  Returns a
    kwker.explaining.Explanation (print it, or read .fast and .condition)."""
    from kwker.explaining import explain as _explain
    return _explain(fn, *args, **kwargs)
