"""Bit-for-bit comparison of an op's results: Kwker's promise is identity with torch."""
from typing import List, Optional, Tuple

import torch

# Floating values are compared as their bit patterns: NaN payloads and -0.0 count.
BIT_PATTERN_DTYPES = {torch.float16: torch.int16, torch.bfloat16: torch.int16,
                      torch.float32: torch.int32, torch.float64: torch.int64}


def named_outputs(result) -> List[Tuple[str, object]]:
    """(name, tensor) for each output: a tensor, torch's (values, indices) return type or a tuple."""
    if isinstance(result, torch.Tensor):
        return [("result", result)]
    names = getattr(result, "__match_args__", None) or [f"output {i}" for i in range(len(result))]
    return list(zip(names, result))


def bit_pattern(t: torch.Tensor) -> torch.Tensor:
    return t.view(BIT_PATTERN_DTYPES[t.dtype]) if t.dtype in BIT_PATTERN_DTYPES else t


def difference(expected, actual) -> Optional[str]:
    """None when `actual` equals torch's `expected` bit for bit (dtypes and shapes too),
    else what differs first, in words."""
    want, got = named_outputs(expected), named_outputs(actual)
    if len(want) != len(got):
        return f"{len(got)} outputs where torch gives {len(want)}"
    for (name, e), (_, a) in zip(want, got):
        if not isinstance(a, torch.Tensor):
            return f"{name}: a {type(a).__name__}, not a tensor"
        if a.dtype != e.dtype:
            return f"{name}: dtype {a.dtype}, torch gives {e.dtype}"
        if a.shape != e.shape:
            return f"{name}: shape {tuple(a.shape)}, torch gives {tuple(e.shape)}"
        e_bits, a_bits = bit_pattern(e), bit_pattern(a)
        if not torch.equal(e_bits, a_bits):
            differs = (e_bits != a_bits).flatten()
            first = int(differs.nonzero()[0])
            return (f"{name}: {int(differs.sum())} of {differs.numel()} differ; first at flat index "
                    f"{first}: torch {e.flatten()[first].item()!r}, kwker {a.flatten()[first].item()!r}")
    return None
