"""Fake (meta) kernels: output shapes, dtypes and layouts without data, for
FakeTensor, torch.compile, torch.export and AOTInductor."""
import torch

from kwker.torch_ops.schemas import FUNCTIONAL, LIB

_INT64 = torch.int64


def _wrap(x, dim):
    nd = max(x.dim(), 1)  # 0-dim tensors take dim -1 or 0, as in torch
    torch._check_index(-nd <= dim < nd, lambda: (
        f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], "
        f"but got {dim})"))
    return dim % nd


def sort(x, dim=-1, descending=False):
    _wrap(x, dim)
    return torch.empty_like(x), torch.empty_like(x, dtype=_INT64)


def sort_values(x, dim=-1, descending=False):
    _wrap(x, dim)
    return torch.empty_like(x)


def argsort(x, dim=-1, descending=False):
    _wrap(x, dim)
    return torch.empty_like(x, dtype=_INT64)


def topk(x, k, dim=-1, largest=True, sorted=True):
    d = _wrap(x, dim)
    shape = list(x.shape)
    size = shape[d] if shape else 1
    torch._check(k >= 0, lambda: "selected index k out of range")
    torch._check(k <= size, lambda: "selected index k out of range")
    if shape:
        shape[d] = k
    return x.new_empty(shape), x.new_empty(shape, dtype=_INT64)


def _reduced(x, dim, keepdim):
    d = _wrap(x, dim)
    shape = list(x.shape)
    if shape:
        torch._check(shape[d] > 0, lambda: "cannot reduce over an empty dimension")
        if keepdim:
            shape[d] = 1
        else:
            del shape[d]
    return x.new_empty(shape), x.new_empty(shape, dtype=_INT64)


def kthvalue(x, k, dim=-1, keepdim=False):
    size = x.shape[_wrap(x, dim)] if x.dim() else 1
    torch._check(k >= 1, lambda: "selected index k out of range")
    torch._check(k <= size, lambda: "selected index k out of range")
    return _reduced(x, dim, keepdim)


def median_dim(x, dim, keepdim=False):
    return _reduced(x, dim, keepdim)


def median_all(x):
    return x.new_empty(())


def unique(x, sorted=True, return_inverse=False, return_counts=False):
    count = torch.library.get_ctx().new_dynamic_size()
    values = x.new_empty((count,))
    inverse = x.new_empty(x.shape if return_inverse else (0,), dtype=_INT64)
    counts = x.new_empty((count,) if return_counts else (0,), dtype=_INT64)
    return values, inverse, counts


def unique_dim(x, dim, sorted=True, return_inverse=False, return_counts=False):
    d = _wrap(x, dim)
    count = torch.library.get_ctx().new_dynamic_size()
    shape = list(x.shape)
    shape[d] = count
    inverse = x.new_empty((x.shape[d],) if return_inverse else (0,), dtype=_INT64)
    counts = x.new_empty((count,) if return_counts else (0,), dtype=_INT64)
    return x.new_empty(shape), inverse, counts


FAKES = {
    "sort": sort, "sort_values": sort_values, "argsort": argsort, "topk": topk,
    "kthvalue": kthvalue, "median": median_all, "median.dim": median_dim,
    "nanmedian": median_all, "nanmedian.dim": median_dim, "unique": unique,
    "unique_dim": unique_dim,
}
assert set(FAKES) == set(FUNCTIONAL)


def register():
    for name, fn in FAKES.items():
        torch.library.register_fake("kwker::" + name, fn, lib=LIB)
