"""Peak memory of one call, from the kernel's resident-set high-water mark (Linux).

Writing "5" to /proc/self/clear_refs resets VmHWM to the current RSS, so the
peak seen after the call is what the call added, outputs included. Freed heap
pages that malloc keeps would hide reuse, so the heap is trimmed first, after
the workspace blocks Kwker's thread keeps between calls are released: every
call is measured cold, whatever the inputs measured before it left. Memory
the call reuses from pages already resident is not counted: the numbers are a
lower bound, comparable between torch and Kwker on the same input.
"""
import ctypes
import ctypes.util
import gc
from typing import Optional, Tuple

from kwker import release_workspace

CLEAR_REFS = "/proc/self/clear_refs"
STATUS = "/proc/self/status"
RESET_PEAK_RSS = "5"


def _load_libc():
    name = ctypes.util.find_library("c")
    return ctypes.CDLL(name) if name else None


_LIBC = _load_libc()


def _status_bytes(field: str) -> int:
    with open(STATUS) as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024  # reported in kB
    raise KeyError(field)


def _reset_peak() -> bool:
    try:
        with open(CLEAR_REFS, "w") as clear_refs:
            clear_refs.write(RESET_PEAK_RSS)
        return True
    except OSError:
        return False


def call_with_peak(call) -> Tuple[object, Optional[int]]:
    """(call's result, bytes by which the call raised the resident set at its peak);
    the bytes are None where the peak cannot be reset (not Linux, /proc not writable)."""
    gc.collect()
    release_workspace()
    if _LIBC is not None and hasattr(_LIBC, "malloc_trim"):
        _LIBC.malloc_trim(0)
    if not _reset_peak():
        return call(), None
    before = _status_bytes("VmRSS")
    result = call()
    return result, max(0, _status_bytes("VmHWM") - before)
