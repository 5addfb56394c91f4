"""Turning Kwker on and off around the benchmark's timed blocks.

Talks to Kwker only through its public API: kwker.install(), uninstall(),
is_installed() and info(). When that API is missing, or install() declines
(returns False: no native library), the switch does nothing and says so
(`available` is False, `unavailable_reason` why): the run then times torch
against itself.
"""
import contextlib
import inspect
from typing import Optional

import torch

# What kwker.install() patches, on the torch module and as Tensor methods.
PATCHED_NAMES = ("sort", "argsort", "msort", "topk", "kthvalue", "median", "nanmedian",
                 "unique", "quantile", "nanquantile")


class UsageError(Exception):
    """A command-line request this Kwker cannot honour."""


def accepts_keyword(function, name: str) -> bool:
    parameters = inspect.signature(function).parameters.values()
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def patchable_attributes():
    """(owner, name) of every attribute kwker.install() may replace."""
    return [(owner, name) for owner in (torch, torch.Tensor) for name in PATCHED_NAMES]


class KwkerSwitch:
    def __init__(self, ties: Optional[str] = None):
        import kwker
        self._kwker = kwker
        missing = [f for f in ("install", "uninstall") if not callable(getattr(kwker, f, None))]
        self.available = not missing
        self.unavailable_reason = f"kwker has no {', '.join(missing)}" if missing else None
        self._install_kwargs = {}
        self.ties = ties
        if ties is not None:
            if not self.available:
                raise UsageError(f"--ties {ties} needs kwker.install ({self.unavailable_reason})")
            if not accepts_keyword(kwker.install, "ties"):
                raise UsageError(f"--ties {ties}: this kwker.install() takes no `ties` argument")
            self._install_kwargs["ties"] = ties
        if self.available and self._is_installed():
            kwker.uninstall()  # the torch side of the benchmark must be torch's own functions
        self._originals = {(owner, name): getattr(owner, name) for owner, name in patchable_attributes()}
        if self.available:
            self._probe_install()

    def _probe_install(self):
        """install() returning False means Kwker left torch untouched (no native library)."""
        try:
            if self._kwker.install(**self._install_kwargs) is False:
                self.unavailable_reason = f"kwker.install() declined: {self.info().get('native_error')}"
                self.available = False
        finally:
            self._kwker.uninstall()
        self._check_restored()

    def _is_installed(self) -> bool:
        is_installed = getattr(self._kwker, "is_installed", None)
        return bool(is_installed()) if callable(is_installed) else False

    def info(self) -> dict:
        info = getattr(self._kwker, "info", None)
        details = dict(info()) if callable(info) else {"version": getattr(self._kwker, "__version__", None)}
        if not self.available:
            details["target"] = f"unavailable ({self.unavailable_reason})"
        return details

    @contextlib.contextmanager
    def installed(self):
        """Kwker installed inside the block, torch's originals restored after it."""
        if not self.available:
            yield
            return
        self._kwker.install(**self._install_kwargs)
        try:
            yield
        finally:
            self._kwker.uninstall()
            self._check_restored()

    def _check_restored(self):
        """uninstall() must give back the very objects captured before install (identity:
        a wrapper may compare equal to the function it wraps)."""
        left = [f"{owner.__name__}.{name}" for (owner, name), original in self._originals.items()
                if getattr(owner, name) is not original]
        if left:
            raise RuntimeError(f"kwker.uninstall() left patched: {', '.join(left)}")
