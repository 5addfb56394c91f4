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

from kwker import _native, dispatch, patching, support

__version__ = "0.1.0"

__all__ = ["install", "uninstall", "is_installed", "installed", "info", "stats",
           "reset_stats", "KwkerWarning"]

_TIES = {"torch": _native.ORDER_TORCH, "stable": _native.ORDER_STABLE}
_warned_unavailable = threading.Event()


class KwkerWarning(UserWarning):
    """Kwker could not do what was asked; torch runs unchanged."""


def install(ops=None, *, ties: str = "torch") -> bool:
    """Route torch's sorting functions (and Tensor methods) through Kwker.

    ops: names to patch (default: all of kwker.patching.ALL_OPS).
    ties: "torch" (default) gives equal elements the order torch gives them,
      so results are bit-identical to torch's; "stable" orders equal
      elements by index (faster on tie-heavy inputs; what torch.ops.kwker
      always does).
    Returns True if installed; False (with one KwkerWarning) when the native
    library is unavailable, in which case torch is left untouched.
    Idempotent and thread-safe; all-or-nothing.
    """
    names = patching.ALL_OPS if ops is None else tuple(ops)
    unknown = [op for op in names if op not in patching.PATCH_TABLE]
    if unknown:
        raise ValueError(f"kwker.install: unknown op(s) {unknown}; "
                         f"choose from {list(patching.ALL_OPS)}")
    if ties not in _TIES:
        raise ValueError(f"kwker.install: ties must be 'torch' or 'stable', not {ties!r}")
    if not _native.available():
        if not _warned_unavailable.is_set():
            _warned_unavailable.set()
            warnings.warn(f"kwker.install: {_native.LOAD_ERROR}; torch is left unchanged",
                          KwkerWarning, stacklevel=2)
        return False
    dispatch.Policy.order = _TIES[ties]
    patching.install(names)
    return True


def uninstall() -> None:
    """Restore every original torch function and Tensor method."""
    patching.uninstall()


def is_installed() -> bool:
    return bool(patching.installed_ops())


@contextlib.contextmanager
def installed(ops=None, *, ties: str = "torch"):
    """`with kwker.installed(): ...` - patched inside the block, and torch
    restored to its state before the block on exit."""
    before = patching.installed_ops()
    before_order = dispatch.Policy.order
    install(ops, ties=ties)
    try:
        yield
    finally:
        uninstall()
        dispatch.Policy.order = before_order
        if before:
            patching.install(before)


def info() -> dict:
    """Versions, the native target in use, and why the library is missing
    if it is."""
    import torch
    return {
        "version": __version__,
        "native_version": _native.version(),
        "target": _native.target(),
        "native_error": _native.LOAD_ERROR,
        "torch": torch.__version__,
        "installed_ops": list(patching.installed_ops()),
        "ties": "stable" if dispatch.Policy.order == _native.ORDER_STABLE else "torch",
    }


def stats() -> dict:
    """Per op: number of fast calls and of fallbacks by reason key (see
    kwker.support)."""
    return dispatch.STATS.snapshot()


def reset_stats() -> None:
    dispatch.STATS.reset()
