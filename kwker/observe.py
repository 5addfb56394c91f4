"""Observing wrappers: strict mode, verify mode, per-call timing and the
"kwker" DEBUG log.

They are chosen by install() and patched in place of the plain entries of
kwker.dispatch only when one of those is asked for, so the plain path pays
nothing for them.  A wrapper first asks its entry for the decision
(decide_only=True), then runs the entry (fast) or torch (fallback): a fast
call is decided twice, the price of observing without touching the entry
code.
"""
import logging
import warnings
from time import perf_counter_ns
from typing import Optional

import torch

from kwker.dispatch import STATS
from kwker.errors import KwkerFallbackError, KwkerMismatchError, KwkerMismatchWarning

LOGGER = logging.getLogger("kwker")
_DEBUG = logging.DEBUG
_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _bits(t: torch.Tensor) -> torch.Tensor:
    # floats compare by bit pattern: NaN payloads and -0.0 count
    return t if t.dtype is torch.bool else t.view(_BITS[t.element_size()])


def difference(got, expected) -> Optional[str]:
    """None when `got` is bitwise what `expected` is (type, dtype, shape,
    every element's bits; strides may differ), else what differs."""
    if type(got) is not type(expected):
        return f"result type {type(got).__name__} != {type(expected).__name__}"
    if isinstance(expected, tuple):
        if len(got) != len(expected):
            return f"{len(got)} results != {len(expected)}"
        for i, (g, e) in enumerate(zip(got, expected)):
            problem = difference(g, e)
            if problem is not None:
                # torch.return_types are structseqs: their field names
                names = getattr(expected, "__match_args__", None) or \
                    getattr(expected, "_fields", None)
                return f"{names[i] if names else f'result {i}'}: {problem}"
        return None
    if not isinstance(expected, torch.Tensor):
        return None if got == expected else f"{got!r} != {expected!r}"
    if got.dtype != expected.dtype:
        return f"dtype {got.dtype} != {expected.dtype}"
    if got.shape != expected.shape:
        return f"shape {tuple(got.shape)} != {tuple(expected.shape)}"
    differs = _bits(got) != _bits(expected)
    if differs.any():
        where = tuple(differs.nonzero()[0].tolist())
        return (f"{int(differs.sum())} of {got.numel()} elements differ, first at {where}: "
                f"{got[where].item()!r} != {expected[where].item()!r}")
    return None


def _describe(instance, args, kwargs) -> str:
    x = instance if instance is not None else (args[0] if args else kwargs.get("input"))
    if isinstance(x, torch.Tensor):
        return f"{str(x.dtype).replace('torch.', '')}{list(x.shape)}"
    return type(x).__name__


def _verify(op, result, wrapped, args, kwargs, mode) -> None:
    expected = wrapped(*args, **kwargs)
    problem = difference(result, expected)
    if problem is None:
        return
    message = f"kwker verify: torch.{op} differs from torch's own result: {problem}"
    if mode == "raise":
        raise KwkerMismatchError(message)
    warnings.warn(message, KwkerMismatchWarning, stacklevel=3)


def observing(op, entry, strict: bool, verify: Optional[str], timing: bool):
    """The wrapper standing in for `entry` while any observation is on.
    DEBUG records follow the logger's level call by call here."""
    record_time = STATS.record_time
    record_fallback = STATS.record_fallback

    def observed(wrapped, instance, args, kwargs, decide_only=False):
        failure = entry(wrapped, instance, args, kwargs, True)
        if decide_only:
            return failure
        if LOGGER.isEnabledFor(_DEBUG):
            if failure is None:
                LOGGER.debug("%s %s: fast", op, _describe(instance, args, kwargs))
            else:
                LOGGER.debug("%s %s: torch (%s: %s)", op, _describe(instance, args, kwargs),
                             failure.key, failure.reason)
        if failure is None:
            start = perf_counter_ns() if timing else 0
            result = entry(wrapped, instance, args, kwargs)
            if timing:
                record_time(op, True, perf_counter_ns() - start)
            if verify:
                _verify(op, result, wrapped, args, kwargs, verify)
            return result
        record_fallback(op, failure)
        if strict:
            # inputs torch rejects raise torch's own error here
            wrapped(*args, **kwargs)
            raise KwkerFallbackError(op, failure)
        start = perf_counter_ns() if timing else 0
        result = wrapped(*args, **kwargs)
        if timing:
            record_time(op, False, perf_counter_ns() - start)
        return result

    observed.__name__ = f"observed_{getattr(entry, '__name__', op)}"
    observed.__wrapped__ = entry
    return observed


def logging_enabled() -> bool:
    return LOGGER.isEnabledFor(_DEBUG)


def log_to_stderr() -> None:
    """KWKER_LOG=1 / python -m kwker --log: the kwker logger at DEBUG,
    printing to stderr unless the program configured handlers for it."""
    LOGGER.setLevel(_DEBUG)
    if not LOGGER.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("kwker: %(message)s"))
        LOGGER.addHandler(handler)
        LOGGER.propagate = False
