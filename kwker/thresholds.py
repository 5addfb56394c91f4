"""This machine's crossover sizes, per user: `python -m kwker calibrate`
measures them and saves them here; install(use_fast="auto") loads them.

The file is $KWKER_CACHE_DIR (else $XDG_CACHE_HOME/kwker, else
~/.cache/kwker) / thresholds-<kwker version>-<cpu>.json.  It records the
kwker and torch versions and the native target it was measured with; a file
that does not match the running ones, or cannot be read, is ignored with
one KwkerWarning and the shipped thresholds (support.SIZE_RULES) stay.
Calibration sets each op's min_numel (whole rows); the row-shape rules
(short rows, row caps) stay as shipped.
"""
import dataclasses
import hashlib
import json
import os
import platform
import re
import warnings
from typing import Dict, Optional

import torch

from kwker import _native, support
from kwker.errors import KwkerWarning

CACHE_ENV_VAR = "KWKER_CACHE_DIR"
FORMAT = 1
_warned = set()


def cache_dir() -> str:
    explicit = os.environ.get(CACHE_ENV_VAR)
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kwker")


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.split(":")[0].strip() == "model name":
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _cpu_slug() -> str:
    name = cpu_name()
    readable = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40]
    return f"{readable}-{hashlib.sha1(name.encode()).hexdigest()[:8]}"


def cache_path() -> str:
    from kwker import __version__
    return os.path.join(cache_dir(), f"thresholds-{__version__}-{_cpu_slug()}.json")


def fingerprint() -> dict:
    """What a calibration is only valid for."""
    from kwker import __version__
    return {"kwker": __version__, "torch": torch.__version__, "target": _native.target(),
            "cpu": cpu_name()}


def save(min_numel: Dict[str, int], details: Optional[dict] = None) -> str:
    path = cache_path()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = {"format": FORMAT, **fingerprint(), "min_numel": dict(min_numel),
            "details": details or {}}
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2)
    os.replace(tmp, path)  # readers never see a half-written file
    return path


def _validated(data) -> Dict[str, int]:
    """min_numel per op, or ValueError saying why the file is unusable."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"corrupt: not a format-{FORMAT} calibration file")
    for key, value in fingerprint().items():
        if data.get(key) != value:
            raise ValueError(f"stale: measured with {key} {data.get(key)!r}, running {value!r}")
    rules = data.get("min_numel")
    if not isinstance(rules, dict) or not all(
            op in support.DEFAULT_SIZE_RULES and type(n) is int and n >= 0
            for op, n in rules.items()):
        raise ValueError("corrupt: min_numel must map op names to counts")
    return rules


def load() -> Optional[Dict[str, int]]:
    """This machine's min_numel per op, or None (no file, or an unusable
    one: one KwkerWarning per file and process)."""
    path = cache_path()
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        problem = f"unreadable: {exc}"
    else:
        try:
            data = json.loads(text)
        except ValueError as exc:
            problem = f"corrupt: {exc}"
        else:
            try:
                return _validated(data)
            except ValueError as exc:
                problem = str(exc)
    if path not in _warned:
        _warned.add(path)
        warnings.warn(f"kwker: ignoring the calibration in {path} ({problem}); the shipped "
                      "thresholds are used (run python -m kwker calibrate again)",
                      KwkerWarning, stacklevel=5)
    return None


def load_calibration() -> bool:
    """Put this machine's min_numel, if calibrated, into the tables the
    dispatcher reads.  True if a calibration was applied."""
    rules = load()
    if not rules:
        return False
    for op, n in rules.items():
        support.SIZE_RULES[op] = dataclasses.replace(support.DEFAULT_SIZE_RULES[op], min_numel=n)
        support.MIN_FAST_NUMEL[op] = n
    return True
