"""Sparse layers built on sorting: functions on tensors (the fast
operators) and nn.Modules with use_fast, each equal bit for bit to its
plain-torch reference in kwker.nn.reference_sparse, gradients included.

    probs = kwker.nn.sparse.entmax15(scores, dim=-1)
    act = kwker.nn.GroupSort(group_size=2)          # MaxMin
    pool = kwker.nn.SortPooling(k=30)               # DGCNN / PyG SortAggregation

Native kernels serve float32 and float64 on the CPU; bfloat16/float16 and
other devices run the reference (through the same operators).
"""
import torch

import kwker.torch_ops  # noqa: F401  (registers torch.ops.kwker)
from kwker.nn import reference_sparse as reference
from kwker.nn.modules import FastModule
from kwker.ops import sparse as _native


def sparsemax(x, dim=-1):
    """sparsemax over dim (Martins & Astudillo 2016), as entmax.sparsemax
    (deep-spin/entmax: the exact sort-based threshold; its closed-form
    backward, s * (g - sum(g * s) / |S|) with s the support)."""
    return torch.ops.kwker.sparsemax.default(x, dim)[0]


def entmax15(x, dim=-1):
    """1.5-entmax over dim (Peters, Niculae & Martins 2019), as
    entmax.entmax15 (the exact sort-based threshold; backward with
    gppr = sqrt(y): gppr * g - gppr * sum(gppr * g) / sum(gppr))."""
    return torch.ops.kwker.entmax15.default(x, dim)


def group_sort(x, group_size=2, dim=-1, descending=False):
    """GroupSort (Anil, Lucas & Grosse 2019; LNets' group_sort): dim split
    into consecutive groups of group_size, each sorted ascending (equal
    elements and their gradients in index order); group_size 2 is MaxMin
    as (min, max) pairs.  group_size up to 256."""
    return torch.ops.kwker.group_sort.default(x, group_size, dim, descending)[0]


def sort_pool(x, k, num_nodes=None):
    """SortPooling (DGCNN; torch_geometric.nn.aggr.SortAggregation(k)) of
    a dense batch x (B, N, C), graph b holding its num_nodes[b] real nodes
    first (all N when None): per graph the k nodes with the largest last
    channel, descending (ties by node index), missing rows zero, as
    (B, k * C).  PyG's padding rule (entries equal to min(x) - 1 become 0)
    is kept."""
    return torch.ops.kwker.sort_pool.default(x, k, num_nodes)[0]


class _Native:
    def _native_takes(self, x):
        return x.device.type == "cpu" and x.dtype in _native.DTYPES and _native.lib is not None


class Sparsemax(FastModule, _Native, reference.Sparsemax):
    __doc__ = reference.Sparsemax.__doc__ + """

    Kwker's torch.ops.kwker.sparsemax when use_fast says so: the same
    values and gradients bit for bit."""

    def __init__(self, dim=-1, use_fast="auto"):
        super().__init__(dim)
        self._init_fast(use_fast)

    def forward(self, x):
        return sparsemax(x, self.dim) if self._fast_for(x) else super().forward(x)

    def extra_repr(self):
        return super().extra_repr() + f", use_fast={self.use_fast!r}"


class Entmax15(FastModule, _Native, reference.Entmax15):
    __doc__ = reference.Entmax15.__doc__ + """

    Kwker's torch.ops.kwker.entmax15 when use_fast says so: the same
    values and gradients bit for bit."""

    def __init__(self, dim=-1, use_fast="auto"):
        super().__init__(dim)
        self._init_fast(use_fast)

    def forward(self, x):
        return entmax15(x, self.dim) if self._fast_for(x) else super().forward(x)

    def extra_repr(self):
        return super().extra_repr() + f", use_fast={self.use_fast!r}"


class GroupSort(FastModule, _Native, reference.GroupSort):
    __doc__ = reference.GroupSort.__doc__ + """

    Kwker's torch.ops.kwker.group_sort when use_fast says so (group_size
    up to 256): the same values and gradients bit for bit."""

    def __init__(self, group_size=2, dim=-1, descending=False, use_fast="auto"):
        super().__init__(group_size, dim, descending)
        self._init_fast(use_fast)

    def forward(self, x):
        if self.group_size <= _native.MAX_GROUP and self._fast_for(x):
            return group_sort(x, self.group_size, self.dim, self.descending)
        return super().forward(x)

    def extra_repr(self):
        return super().extra_repr() + f", use_fast={self.use_fast!r}"


class SortPooling(FastModule, _Native, reference.SortPooling):
    __doc__ = reference.SortPooling.__doc__ + """

    Kwker's torch.ops.kwker.sort_pool when use_fast says so: the same
    values and gradients bit for bit."""

    def __init__(self, k, use_fast="auto"):
        super().__init__(k)
        self._init_fast(use_fast)

    def forward(self, x, num_nodes=None):
        if self._fast_for(x):
            return sort_pool(x, self.k, num_nodes)
        return super().forward(x, num_nodes)

    def extra_repr(self):
        return super().extra_repr() + f", use_fast={self.use_fast!r}"
