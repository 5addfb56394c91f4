"""The machine a run measured: CPU, versions, and the memory bandwidth that bounds
a radix sort."""
import os
import platform
import time

import numpy as np
import torch

from .corpus import one_thread

REPORTED_CPU_FLAGS = ("avx2", "avx512f")
BANDWIDTH_BUFFER_BYTES = 256 << 20   # far beyond any cache

# An LSD radix sort of (key, int64 index) pairs reads and writes both every pass,
# one pass per 8-bit digit of the key.
RADIX_DIGIT_BITS = 8
INDEX_BYTES = 8
RADIX_BOUND_MIN_NUMEL = 1 << 20      # only large sorts are bandwidth-bound


def _cpuinfo_field(name: str) -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.split(":")[0].strip() == name:
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def describe(threads: int, kwker_info: dict) -> dict:
    flags = set(_cpuinfo_field("flags").split())
    return {
        "cpu": _cpuinfo_field("model name") or platform.processor() or platform.machine(),
        "cpu_flags": {flag: flag in flags for flag in REPORTED_CPU_FLAGS},
        "cores": os.cpu_count(),
        "threads": threads,
        "kwker": kwker_info,
        "torch": torch.__version__,
        "numpy": np.__version__,
        "python": platform.python_version(),
    }


def copy_bandwidth(repeats: int) -> float:
    """Single-thread memory bandwidth in bytes/s: bytes read plus written by the best
    of `repeats` copies of a large buffer."""
    source = torch.ones(BANDWIDTH_BUFFER_BYTES // 4, dtype=torch.float32)
    target = torch.empty_like(source)
    best = float("inf")
    with one_thread():
        for _ in range(repeats):
            start = time.perf_counter()
            target.copy_(source)
            best = min(best, time.perf_counter() - start)
    return 2 * BANDWIDTH_BUFFER_BYTES / best


def radix_bound_ns(dtype: torch.dtype, bandwidth: float) -> float:
    """ns per element an LSD radix sort of (key, index) pairs needs at `bandwidth` just
    to move its data: passes x 2 (read + write) x (key bytes + index bytes)."""
    key_bytes = torch.empty((), dtype=dtype).element_size()
    passes = key_bytes * 8 // RADIX_DIGIT_BITS
    return passes * 2 * (key_bytes + INDEX_BYTES) / bandwidth * 1e9
