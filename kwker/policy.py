"""What install() sets up: the settings, their environment variables, and
the entries patched for them.

Every choice is made here, at install() time, by picking which entry
functions the patches call (plain, observing, or torch-only) and which size
tables the dispatcher reads; nothing is re-checked per call.
"""
import os
from dataclasses import dataclass
from typing import Dict, Optional, Union

from kwker import _native, dispatch, observe, patching

#: install() keyword -> the environment variable giving its default
ENV_VARS = {
    "ties": "KWKER_TIES",          # torch | stable
    "use_fast": "KWKER_USE_FAST",  # auto | 1 | 0
    "strict": "KWKER_STRICT",      # 1 | 0
    "verify": "KWKER_VERIFY",      # raise (or 1) | warn | 0
    "timing": "KWKER_TIMING",      # 1 | 0
}
LOG_ENV_VAR = "KWKER_LOG"          # 1: the "kwker" logger at DEBUG on stderr

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}
_TIES = {"torch": _native.ORDER_TORCH, "stable": _native.ORDER_STABLE}


@dataclass(frozen=True)
class Settings:
    ties: str = "torch"
    use_fast: Union[bool, str] = "auto"
    strict: bool = False
    verify: Optional[str] = None   # None, "raise" or "warn"
    timing: bool = False

    @property
    def observed(self) -> bool:
        return self.strict or self.verify is not None or self.timing


DEFAULT = Settings()


def _flag(name: str, value) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"kwker: {name} must be true or false, not {value!r}")


def _use_fast(value) -> Union[bool, str]:
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    try:
        return _flag("use_fast", value)
    except ValueError:
        raise ValueError(f"kwker: use_fast must be True, False or 'auto', not {value!r}") from None


def _verify(value) -> Optional[str]:
    if isinstance(value, str) and value.strip().lower() in ("raise", "warn"):
        return value.strip().lower()
    try:
        return "raise" if _flag("verify", value) else None
    except ValueError:
        raise ValueError(f"kwker: verify must be 'raise', 'warn', True or False, "
                         f"not {value!r}") from None


def _ties(value) -> str:
    if value not in _TIES:
        raise ValueError(f"kwker.install: ties must be 'torch' or 'stable', not {value!r}")
    return value


_PARSE = {"ties": _ties, "use_fast": _use_fast, "strict": lambda v: _flag("strict", v),
          "verify": _verify, "timing": lambda v: _flag("timing", v)}


def resolve(environ=None, **given) -> Settings:
    """Settings from install()'s keywords; one left as None takes its
    environment variable, else the default.  ValueError on a bad value."""
    environ = os.environ if environ is None else environ
    values = {}
    for name, parse in _PARSE.items():
        value = given.get(name)
        if value is None:
            value = environ.get(ENV_VARS[name])
            if value is None or (value.strip() == "" and name in ("ties", "use_fast")):
                continue
            value = value.strip()
        values[name] = parse(value)
    settings = Settings(**values)
    if settings.strict and settings.use_fast is False:
        raise ValueError("kwker: strict=True with use_fast=False would fail every call")
    return settings


def log_requested(environ=None) -> bool:
    """KWKER_LOG set to 1 (or true, yes, on, debug)."""
    value = (os.environ if environ is None else environ).get(LOG_ENV_VAR, "")
    return value.strip().lower() in _TRUE | {"debug"}


# ------------------------------------------------------------------ apply

_current = DEFAULT
_observed_cache: Dict[tuple, Dict[str, object]] = {}


def entries_for(settings: Settings) -> Dict[str, object]:
    """op -> the entry to patch in: the plain entries unless something is
    observed (strict, verify, timing, or the "kwker" logger at DEBUG when
    install() runs).  The same settings give the same entry objects, so
    installing twice keeps the same wrappers."""
    base = dispatch.TORCH_ENTRIES if settings.use_fast is False else dispatch.ENTRIES
    if not (settings.observed or observe.logging_enabled()):
        return base
    key = (settings.use_fast is False, settings.strict, settings.verify, settings.timing)
    entries = _observed_cache.get(key)
    if entries is None:
        entries = {op: observe.observing(op, entry, settings.strict, settings.verify,
                                         settings.timing) for op, entry in base.items()}
        _observed_cache[key] = entries
    return entries


def apply(ops, settings: Settings) -> None:
    """Patch `ops` (with the ops already patched, which take the new
    settings too) for `settings`."""
    global _current
    from kwker import thresholds
    with patching.lock:
        if settings.use_fast == "auto":
            thresholds.load_calibration()
        dispatch.Policy.order = _TIES[settings.ties]
        dispatch.use_size_rules(settings.use_fast != True,  # noqa: E712 ("auto" too)
                                stable_ties=settings.ties == "stable")
        patching.install(tuple(ops) + patching.installed_ops(), entries_for(settings))
        _current = settings


def reset() -> None:
    """Back to the defaults (after uninstall())."""
    global _current
    dispatch.Policy.order = _TIES[DEFAULT.ties]
    dispatch.use_size_rules(True)
    _current = DEFAULT


def current() -> Settings:
    return _current


def current_entries() -> Dict[str, object]:
    """The entries the installed settings use (explain() asks them)."""
    return entries_for(_current)
