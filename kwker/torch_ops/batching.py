"""vmap rules: the batch dim moved to the front, the op's dim shifted past
it, one call for the whole batch.  Without a rule functorch would run one
call per sample (with a warning); out= ops and unique (data-dependent sizes)
have none, as torch's own."""
import torch

from kwker.torch_ops.schemas import LIB, overload


def _logical_dim(x, dim):
    """dim of a batched x (batch dim at 0) that a per-sample dim means;
    per-sample 0-dim tensors are given a row of one first (by the caller)."""
    nd = x.dim() - 1
    if not -nd <= dim < nd:
        raise IndexError(f"Dimension out of range (expected to be in range of "
                         f"[{-nd}, {nd - 1}], but got {dim})")
    return dim + 1 if dim >= 0 else dim


def _along_dim(name, dim_at, keeps_rank):
    """Rule for an op with a dim argument at args[dim_at] (default -1).
    keeps_rank: outputs keep the input's rank (sort, topk) rather than
    reducing it (kthvalue, median)."""
    op = overload(name)

    def rule(info, in_dims, x, *args):
        bdim = in_dims[0]
        if bdim is None:
            result = op(x, *args)
            return result, (None,) * len(result) if isinstance(result, tuple) else None
        x = x.movedim(bdim, 0)
        args = list(args)
        dim = args[dim_at] if len(args) > dim_at else -1
        while len(args) <= dim_at:
            args.append(None)
        if x.dim() == 1:  # per-sample 0-dim: dims -1 and 0 mean the sample itself
            if dim not in (-1, 0):
                raise IndexError(f"Dimension out of range (expected to be in range of "
                                 f"[-1, 0], but got {dim})")
            args[dim_at] = 1
            if not keeps_rank and len(args) > dim_at + 1:
                args[dim_at + 1] = False  # keepdim of a 0-dim sample is still 0-dim
            result = op(x.unsqueeze(1), *args)
            if keeps_rank:
                result = tuple(r.squeeze(1) for r in result) \
                    if isinstance(result, tuple) else result.squeeze(1)
        else:
            args[dim_at] = _logical_dim(x, dim)
            result = op(x, *args)
        return result, (0,) * len(result) if isinstance(result, tuple) else 0
    return rule


def _median_all(name):
    op = overload(name)

    def rule(info, in_dims, x):
        if in_dims[0] is None:
            return op(x), None
        x = x.movedim(in_dims[0], 0)
        # per sample: the all-elements median has no dim to batch along, and
        # its bits (sign of a zero, a NaN) follow torch's memory-order
        # selection, which a per-sample call keeps
        if x.shape[0] == 0:
            return x.new_empty((0,)), 0
        return torch.stack([op(sample) for sample in x.unbind(0)]), 0
    return rule


RULES = {
    "sort": _along_dim("sort", 0, True),
    "sort_values": _along_dim("sort_values", 0, True),
    "argsort": _along_dim("argsort", 0, True),
    "topk": _along_dim("topk", 1, True),
    "kthvalue": _along_dim("kthvalue", 1, False),
    "median.dim": _along_dim("median.dim", 0, False),
    "nanmedian.dim": _along_dim("nanmedian.dim", 0, False),
    "median": _median_all("median"),
    "nanmedian": _median_all("nanmedian"),
}


def register():
    for name, rule in RULES.items():
        torch.library.register_vmap("kwker::" + name, rule, lib=LIB)
