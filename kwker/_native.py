"""The native library, loaded once.

Importing this module never raises: if the compiled extension is missing or
broken, `LOAD_ERROR` says why and `lib` is None, and everything that would
use it falls back to torch.
"""
import torch

ABI_VERSION = 15

ffi = None
lib = None
LOAD_ERROR = None

try:
    from kwker._kwker_native import ffi, lib  # noqa: F811
except Exception as exc:  # ImportError, OSError from a broken .so, ...
    LOAD_ERROR = f"native library failed to load: {type(exc).__name__}: {exc}"
    if isinstance(exc, ImportError):
        # the usual cause: Python imported kwker from a source checkout (the
        # current directory) rather than from the installed package
        LOAD_ERROR += (f" (kwker imported from {__file__}; in a source checkout, "
                       "build it in place with pip install -e .)")
else:
    if lib.kwk_abi_version() != ABI_VERSION:
        LOAD_ERROR = (f"native library ABI {lib.kwk_abi_version()} != {ABI_VERSION} "
                      "expected by the Python package (rebuild with pip install .)")
        ffi = lib = None

# torch dtype -> the library's element-type code (kwker.h)
DTYPE_CODES = {}
if lib is not None:
    DTYPE_CODES = {
        torch.bool: lib.KWK_BOOL, torch.uint8: lib.KWK_UINT8, torch.int8: lib.KWK_INT8,
        torch.int16: lib.KWK_INT16, torch.int32: lib.KWK_INT32, torch.int64: lib.KWK_INT64,
        torch.uint16: lib.KWK_UINT16, torch.uint32: lib.KWK_UINT32, torch.uint64: lib.KWK_UINT64,
        torch.float16: lib.KWK_FLOAT16, torch.bfloat16: lib.KWK_BFLOAT16,
        torch.float32: lib.KWK_FLOAT32, torch.float64: lib.KWK_FLOAT64,
    }

ORDER_STABLE = 0
ORDER_TORCH = 1
ORDER_TORCH_PROBE = 2  # kwk_topk only: torch's order, or KWK_DEFER where torch is faster


class NativeError(RuntimeError):
    """The native library refused a call the dispatcher judged valid: a bug."""


class NativeMemoryError(RuntimeError, MemoryError):
    """A native workspace allocation failed.  A RuntimeError, as torch's own
    "DefaultCPUAllocator: can't allocate memory" is, so code that handles
    torch running out of memory handles Kwker's too; and a MemoryError, as
    it is one."""


def check(status: int, what: str) -> None:
    if status == 0:
        return
    message = ffi.string(lib.kwk_strerror(status)).decode()
    if status == lib.KWK_E_NOMEM:
        raise NativeMemoryError(f"kwker {what}: can't allocate memory: {message}")
    raise NativeError(f"kwker {what}: {message} (status {status}); please report this")


# dtypes whose subnormals torch's comparisons read as zero when the thread
# flushes them (torch.set_flush_denormal(True)): float16 subnormals widen to
# normal float32 values first, so float16 is not among them
FLUSHABLE_DTYPES = frozenset({torch.float32, torch.float64, torch.bfloat16})


def _no_flush() -> bool:
    return False


def _pick_denormals_flushed():
    """The cheapest reader of the thread's subnormal mode (fp_env.h): the C
    gate's (~40 ns), else the library's through cffi (~200 ns)."""
    try:
        from kwker._gate import denormals_flushed
        return denormals_flushed
    except ImportError:
        pass
    if lib is not None:
        return lambda: lib.kwk_denormals_flushed() != 0
    return _no_flush


#: denormals_flushed() -> bool: whether this thread reads or writes
#: subnormal floats as zero (x86 MXCSR DAZ/FTZ, as torch.set_flush_denormal
#: (True) sets them; AArch64 FPCR.FZ).  torch then compares a subnormal of a
#: FLUSHABLE_DTYPES tensor as zero, which Kwker's keys do not: the fast
#: paths that promise torch's results step aside.
denormals_flushed = _pick_denormals_flushed()


def available() -> bool:
    return lib is not None


def target() -> str:
    return ffi.string(lib.kwk_target()).decode() if lib is not None else "unavailable"


def set_target(name: str) -> None:
    """Switch kernels ("auto", "portable", "avx2", "avx512"); ValueError if this CPU
    or build cannot run them."""
    if lib is None:
        raise RuntimeError(LOAD_ERROR)
    if lib.kwk_set_target(name.encode()) != 0:
        raise ValueError(f"kwker: target {name!r} is not available on this CPU/build")


def version() -> str:
    return ffi.string(lib.kwk_version()).decode() if lib is not None else "unavailable"
