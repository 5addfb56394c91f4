"""torch.ops.kwker: Kwker's sorting and selection as registered PyTorch
operators, usable wherever PyTorch code goes: autograd (gradcheck, double
backward, forward AD), torch.func (vmap, grad), torch.compile (no graph
breaks, dynamic shapes), torch.export and AOTInductor.

    import kwker.torch_ops
    values, indices = torch.ops.kwker.topk(scores, 10)       # as torch.topk
    u, counts = kwker.torch_ops.unique(x, return_counts=True)  # as torch.unique

Every operator orders equal elements by index (torch.sort(stable=True)
order); see eager.py for the exact rule per op.  Schemas follow aten's (see
schemas.py).  A process that loads an exported or AOTInductor-compiled model
holding these ops must import kwker.torch_ops first.
"""
import torch

from kwker.torch_ops import autograd, batching, eager, fake, out
from kwker.torch_ops.autograd import kernel_entry
from kwker.torch_ops.functions import nanquantile, quantile, unique
from kwker.torch_ops.schemas import FUNCTIONAL, LIB, OUT

__all__ = ["unique", "quantile", "nanquantile", "FUNCTIONAL", "OUT"]


def _register():
    for name, (cpu, other) in eager.KERNELS.items():
        # other devices use compositions of torch's own ops; the CPU
        # registration takes precedence over the composite one on CPU
        LIB.impl(name, kernel_entry(other), "CompositeExplicitAutograd")
        LIB.impl(name, kernel_entry(cpu), "CPU")
    for name in OUT:
        LIB.impl(name, kernel_entry(out.ANY[name]), "CompositeExplicitAutograd")
        LIB.impl(name, kernel_entry(out.CPU[name]), "CPU")
        torch.library.register_fake("kwker::" + name, out.FAKE[name], lib=LIB)
    fake.register()
    autograd.register(out.CPU)
    batching.register()


_register()

from kwker.torch_ops import layers  # noqa: E402,F401  (registers its ops)
from kwker.torch_ops import layers_sparse  # noqa: E402,F401  (registers its ops)
from kwker.torch_ops import layers_topk  # noqa: E402,F401  (registers its ops)
