"""The torch result Kwker must reproduce under each `ties=` mode of kwker.install().

ties="torch" (the default): the very same torch call. ties="stable" orders equal
elements by index, which torch spells as stable=True for sort and argsort and as
the head of a stable sort for topk (sorted or not: with sorted=False torch leaves
the order open, and Kwker's stable mode returns the sorted order). Other calls keep
torch's own order as the reference (a difference in tie order is then reported as
a mismatch).
"""
import functools

import torch


def stable_topk(x: torch.Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True):
    """topk with ties in index order: the first k of a stable sort (NaN counts as largest
    in both, as in torch.topk)."""
    ordered = torch.sort(x, dim=dim, descending=largest, stable=True)
    return torch.return_types.topk((ordered.values.narrow(dim, 0, k), ordered.indices.narrow(dim, 0, k)))


def reference_call(op: str, function, args, kwargs: dict, ties: str = "torch"):
    """A zero-argument call giving the result Kwker's `function(*args, **kwargs)` must equal."""
    if ties == "stable":
        if op in ("sort", "argsort"):
            return functools.partial(function, *args, **dict(kwargs, stable=True))
        if op == "topk":
            return functools.partial(stable_topk, *args, **kwargs)
    return functools.partial(function, *args, **kwargs)
