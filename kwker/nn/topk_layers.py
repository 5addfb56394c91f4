"""Kwker's top-k layers: functions on tensors (torch.ops.kwker) and
nn.Modules with the fast-path switch, each equal bit for bit to its
plain-torch reference in kwker.nn.reference_topk (forward and gradient).

- topk_activation / TopK: TopK sparse autoencoders' activation, as OpenAI's
  sparse_autoencoder TopK (topk, ReLU on the kept values, zeros elsewhere;
  relu=False: k-winners-take-all on raw values).  Of elements tied at the
  k-th value, those torch.topk(sorted=True) picks are kept.
- topk_softmax / TopKSoftmaxRouter: the MoE router (HF Mixtral / Qwen-MoE,
  vLLM's fused_topk): softmax over experts in float32, top-k, optionally
  renormalised; returns (weights float32, expert ids int64, as torch.topk
  and HF; vLLM's fused_topk hands out int32 ids: `ids.int()`).
- top_k_filter / top_p_filter / min_p_filter and TopKLogits / TopPLogits /
  MinPLogits: transformers' TopKLogitsWarper, TopPLogitsWarper and
  MinPLogitsWarper (filter_value, min_tokens_to_keep), same output bits.

Exactness: softmax and cumsum are torch's own calls on the same values as
the reference, so nothing differs by rounding (no KwkerRoundingWarning is
needed); dtypes: float32 and float64 natively, float16 and bfloat16 through
the same torch calls on Kwker's selection.
"""
import torch

import kwker.torch_ops  # noqa: F401  (registers torch.ops.kwker)
from kwker.nn import reference_topk as reference
from kwker.nn.modules import FastModule
from kwker.torch_ops.layers_topk import _takes

K = torch.ops.kwker


def topk_activation(x, k, relu=True):
    """The k largest of each row along the last dim (ReLU'd when relu), the
    rest 0; the gradient goes to the kept elements (and, with relu, only
    where the output is > 0 or NaN, as ReLU's)."""
    return K.topk_activation.default(x, k, relu)[0]


def topk_softmax(logits, k, renormalize=True):
    """(weights float32, expert ids int64) of the k most probable experts of
    each row (most probable first), differentiable in weights."""
    return K.topk_softmax.default(logits, k, renormalize)


def top_k_filter(scores, top_k, filter_value=-float("inf"), min_tokens_to_keep=1):
    """transformers' TopKLogitsWarper(top_k, filter_value,
    min_tokens_to_keep)(input_ids, scores): scores below the k-th largest
    (top_k raised to min_tokens_to_keep) become filter_value; scores tied
    with it are kept."""
    return K.top_k_filter.default(scores, top_k, filter_value, min_tokens_to_keep)[0]


def top_p_filter(scores, top_p, filter_value=-float("inf"), min_tokens_to_keep=1):
    """transformers' TopPLogitsWarper: the scores whose ascending-sorted
    cumulative softmax is <= 1 - top_p become filter_value (never the last
    min_tokens_to_keep of that order)."""
    return K.top_p_filter.default(scores, float(top_p), filter_value, min_tokens_to_keep)[0]


def min_p_filter(scores, min_p, filter_value=-float("inf"), min_tokens_to_keep=1):
    """transformers' MinPLogitsWarper: the scores whose softmax is below
    min_p times the largest become filter_value (never the
    min_tokens_to_keep highest)."""
    return K.min_p_filter.default(scores, float(min_p), filter_value, min_tokens_to_keep)[0]


class _Fast(FastModule):
    def _native_takes(self, x):
        return x.device.type == "cpu" and _takes(x)

    def extra_repr(self):
        return super().extra_repr() + f", use_fast={self.use_fast!r}"


class TopK(_Fast, reference.TopK):
    __doc__ = reference.TopK.__doc__ + """

    Kwker's torch.ops.kwker.topk_activation when use_fast says so: the same
    values and gradients bit for bit."""

    def __init__(self, k, relu=True, use_fast="auto"):
        super().__init__(k, relu)
        self._init_fast(use_fast)

    def forward(self, x):
        if self._fast_for(x):
            return topk_activation(x, self.k, self.relu)
        return super().forward(x)


class TopKSoftmaxRouter(_Fast, reference.TopKSoftmaxRouter):
    __doc__ = reference.TopKSoftmaxRouter.__doc__ + """

    Kwker's torch.ops.kwker.topk_softmax when use_fast says so: the same
    weights, ids and gradients bit for bit."""

    def __init__(self, k, renormalize=True, use_fast="auto"):
        super().__init__(k, renormalize)
        self._init_fast(use_fast)

    def forward(self, logits):
        if self._fast_for(logits):
            return topk_softmax(logits, self.k, self.renormalize)
        return super().forward(logits)


def _filter_module(ref_cls, op_name):
    class Filter(_Fast, ref_cls):
        __doc__ = ref_cls.__doc__ + f"""

        Kwker's torch.ops.kwker.{op_name} when use_fast says so: the same
        output bit for bit."""

        def __init__(self, value, filter_value=-float("inf"), min_tokens_to_keep=1,
                     use_fast="auto"):
            super().__init__(value, filter_value, min_tokens_to_keep)
            self._init_fast(use_fast)

        def forward(self, scores):
            if self._fast_for(scores):
                op = getattr(K, op_name).default
                return op(scores, getattr(self, self._param), self.filter_value,
                          self.min_tokens_to_keep)[0]
            return super().forward(scores)

    Filter.__name__ = Filter.__qualname__ = ref_cls.__name__
    return Filter


TopKLogits = _filter_module(reference.TopKLogits, "top_k_filter")
TopPLogits = _filter_module(reference.TopPLogits, "top_p_filter")
MinPLogits = _filter_module(reference.MinPLogits, "min_p_filter")
