"""Describe a tensor as rows along one dim, the way the native library
takes them: (outer, len, inner) with one stride each (kwker.h)."""
from typing import Optional, Sequence, Tuple

Rows = Tuple[int, int, int, int, int, int]  # outer, len, inner, so, sl, si


def _collapse(sizes: Sequence[int], strides: Sequence[int]) -> Optional[Tuple[int, int]]:
    """(count, stride) walking the dims as one, or None if they do not
    form a single arithmetic progression.  Size-1 dims are ignored."""
    count, stride = 1, 0
    for size, st in zip(reversed(sizes), reversed(strides)):
        if size == 1:
            continue
        if count == 1:
            count, stride = size, st
        elif st == stride * count:
            count *= size
        else:
            return None
    return count, stride


def rows_along(sizes: Sequence[int], strides: Sequence[int], dim: int) -> Optional[Rows]:
    """Rows of a tensor along `dim` (non-negative), or None if the dims
    before or after it cannot be walked with one stride each."""
    before = _collapse(sizes[:dim], strides[:dim])
    after = _collapse(sizes[dim + 1:], strides[dim + 1:])
    if before is None or after is None:
        return None
    return before[0], sizes[dim], after[0], before[1], strides[dim], after[1]


def is_dense_permutation(sizes: Sequence[int], strides: Sequence[int]) -> bool:
    """True when the tensor's elements fill a contiguous block of memory
    exactly once (a contiguous tensor with its dims permuted)."""
    expected = 1
    for size, stride in sorted((p for p in zip(sizes, strides) if p[0] != 1), key=lambda p: p[1]):
        if stride != expected:
            return False
        expected *= size
    return True
