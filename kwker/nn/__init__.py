"""kwker.nn: layers built on sorting, each an nn.Module with the
parameters and state_dict of its plain-torch reference (kwker.nn.reference)
and a fast path through torch.ops.kwker chosen by use_fast.

    model = torch.nn.Sequential(kwker.nn.MedianPool2d(3), ...)
    kwker.nn.deactivate(model)          # every module back to its reference
"""
from kwker.nn import functional, reference
from kwker.nn.modules import (FastModule, MedianPool1d, MedianPool2d, deactivate, fast_modules,
                              set_use_fast)
from kwker.nn import reference_sparse, sparse
from kwker.nn.sparse import Entmax15, GroupSort, SortPooling, Sparsemax
from kwker.nn import reference_topk, topk_layers
from kwker.nn.topk_layers import MinPLogits, TopK, TopKLogits, TopKSoftmaxRouter, TopPLogits

__all__ = ["MedianPool1d", "MedianPool2d", "FastModule", "set_use_fast", "fast_modules",
           "deactivate", "functional", "reference"]
__all__ += ["Sparsemax", "Entmax15", "GroupSort", "SortPooling", "sparse", "reference_sparse"]
__all__ += ["TopK", "TopKSoftmaxRouter", "TopKLogits", "TopPLogits", "MinPLogits",
            "topk_layers", "reference_topk"]
