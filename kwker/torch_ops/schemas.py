"""The operator surface of torch.ops.kwker: one Library, every schema.

Schemas copy the matching aten ones (argument names, defaults, SymInt k), so
`torch.ops.kwker.topk(x, 3)` takes what `torch.topk(x, 3)` takes,
positionally or by name.  Each out= form is a separate operator tagged
Tag.out (`kwker::sort_out`): out= overloads of the functional operator break
Inductor in torch 2.13 (it rewrites the functional call into the overload and
emits code that fails), separate operators do not.
"""
import torch
from torch.library import Library

LIB = Library("kwker", "DEF")

# name -> schema without the name
FUNCTIONAL = {
    "sort": "(Tensor self, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)",
    "sort_values": "(Tensor self, int dim=-1, bool descending=False) -> Tensor",
    "argsort": "(Tensor self, int dim=-1, bool descending=False) -> Tensor",
    "topk": "(Tensor self, SymInt k, int dim=-1, bool largest=True, bool sorted=True) "
            "-> (Tensor values, Tensor indices)",
    "kthvalue": "(Tensor self, SymInt k, int dim=-1, bool keepdim=False) "
                "-> (Tensor values, Tensor indices)",
    "median": "(Tensor self) -> Tensor",
    "median.dim": "(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
    "nanmedian": "(Tensor self) -> Tensor",
    "nanmedian.dim": "(Tensor self, int dim, bool keepdim=False) "
                     "-> (Tensor values, Tensor indices)",
    # the outputs of aten::_unique2 / aten::unique_dim; sizes depend on the data
    "unique": "(Tensor self, bool sorted=True, bool return_inverse=False, "
              "bool return_counts=False) -> (Tensor, Tensor, Tensor)",
    "unique_dim": "(Tensor self, int dim, bool sorted=True, bool return_inverse=False, "
                  "bool return_counts=False) -> (Tensor, Tensor, Tensor)",
}

_PAIR_OUT = "*, Tensor(a!) values, Tensor(b!) indices) -> (Tensor(a!) values, Tensor(b!) indices)"
_ONE_OUT = "*, Tensor(a!) out) -> Tensor(a!)"
# out= forms: name -> (functional op it writes, schema)
OUT = {
    "sort_out": ("sort", "(Tensor self, int dim=-1, bool descending=False, " + _PAIR_OUT),
    "sort_values_out": ("sort_values", "(Tensor self, int dim=-1, bool descending=False, "
                        + _ONE_OUT),
    "argsort_out": ("argsort", "(Tensor self, int dim=-1, bool descending=False, " + _ONE_OUT),
    "topk_out": ("topk", "(Tensor self, SymInt k, int dim=-1, bool largest=True, "
                 "bool sorted=True, " + _PAIR_OUT),
    "kthvalue_out": ("kthvalue", "(Tensor self, SymInt k, int dim=-1, bool keepdim=False, "
                     + _PAIR_OUT),
    "median_out": ("median.dim", "(Tensor self, int dim, bool keepdim=False, " + _PAIR_OUT),
    "nanmedian_out": ("nanmedian.dim", "(Tensor self, int dim, bool keepdim=False, "
                      + _PAIR_OUT),
    "median_all_out": ("median", "(Tensor self, " + _ONE_OUT),
    "nanmedian_all_out": ("nanmedian", "(Tensor self, " + _ONE_OUT),
}

for _name, _schema in FUNCTIONAL.items():
    LIB.define(_name + _schema)
for _name, (_, _schema) in OUT.items():
    LIB.define(_name + _schema, tags=(torch.Tag.out,))


def overload(name: str) -> "torch._ops.OpOverload":
    """torch.ops.kwker.<name> as an OpOverload ("median.dim", "sort", ...)."""
    packet, _, which = name.partition(".")
    return getattr(getattr(torch.ops.kwker, packet), which or "default")
