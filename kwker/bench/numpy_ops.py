"""numpy's nearest equivalent of each op, as a reference time for the table."""
from typing import Callable, Optional

import numpy as np
import torch

# What the numpy column times, per op (printed under the table).
NUMPY_EQUIVALENTS = {
    "sort": "np.sort (values only; kind='stable' when stable; ascending for descending too)",
    "argsort": "np.argsort(kind='stable')",
    "topk": "np.argpartition, then the k values gathered (and sorted when sorted)",
    "kthvalue": "np.argpartition at k-1, value gathered",
    "median": "np.median",
    "nanmedian": "np.nanmedian",
    "quantile": "np.quantile(method=interpolation)",
    "nanquantile": "np.nanquantile(method=interpolation)",
    "unique": "np.unique(return_inverse, return_counts, axis=dim)",
}


def top_k_along_last(a: np.ndarray, k: int, largest: bool, sorted_: bool):
    """Indices and values of the k largest (smallest) along the last axis."""
    if largest:
        kept = np.argpartition(a, -k, axis=-1)[..., -k:]
    else:
        kept = np.argpartition(a, k - 1, axis=-1)[..., :k]
    values = np.take_along_axis(a, kept, axis=-1)
    if sorted_:
        order = np.argsort(-values if largest else values, axis=-1)
        kept, values = np.take_along_axis(kept, order, -1), np.take_along_axis(values, order, -1)
    return values, kept


def numpy_equivalent(op: str, args: dict, x: torch.Tensor) -> Optional[Callable[[], object]]:
    """A zero-argument call doing the op's work in numpy on a copy of x (made here, outside
    any timing), or None where numpy has no equivalent or lacks the dtype (bfloat16)."""
    if op not in NUMPY_EQUIVALENTS or x.dtype == torch.bfloat16:
        return None
    a = x.numpy().copy()
    dim = args.get("dim")
    keepdims = args.get("keepdim", False)
    if op == "sort":
        kind = "stable" if args.get("stable") else "quicksort"
        return lambda: np.sort(a, axis=dim if dim is not None else -1, kind=kind)
    if op == "argsort":
        return lambda: np.argsort(a, axis=dim if dim is not None else -1, kind="stable")
    if op in ("topk", "kthvalue"):
        last = np.moveaxis(a, dim if dim is not None else -1, -1)
        if op == "topk":
            largest, sorted_ = args.get("largest", True), args.get("sorted", True)
            return lambda: top_k_along_last(last, args["k"], largest, sorted_)
        kth = args["k"] - 1
        return lambda: np.take_along_axis(last, np.argpartition(last, kth, axis=-1)[..., kth:kth + 1], -1)
    if op in ("median", "nanmedian"):
        median = np.median if op == "median" else np.nanmedian
        return lambda: median(a, axis=dim, keepdims=keepdims)
    if op in ("quantile", "nanquantile"):
        quantile = np.quantile if op == "quantile" else np.nanquantile
        q, method = np.asarray(args["q"]), args.get("interpolation", "linear")
        return lambda: quantile(a, q, axis=dim, method=method, keepdims=keepdims)
    return lambda: np.unique(a, return_inverse=args.get("return_inverse", False),
                             return_counts=args.get("return_counts", False), axis=dim)
