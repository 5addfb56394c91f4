"""Plain-torch references of Kwker's top-k layers: the semantics the fast
operators reproduce bit for bit (forward and backward) and the baseline the
benchmark measures against.  Each works over the last dim.

- topk_activation: TopK sparse autoencoders' activation (OpenAI's
  sparse_autoencoder TopK: torch.topk, then ReLU on the kept values, then
  scatter into zeros); relu=False keeps the raw values (k-winners-take-all).
- topk_softmax: the MoE router of HF Mixtral / Qwen-MoE and vLLM's
  fused_topk: softmax over experts in float32, torch.topk, optionally divided
  by the kept weights' sum.
- top_k_filter / top_p_filter / min_p_filter: transformers' TopKLogitsWarper,
  TopPLogitsWarper and MinPLogitsWarper (filter_value, min_tokens_to_keep),
  the same torch calls in the same order, so the same bits."""
import torch


def topk_activation(x, k, relu=True):
    """The k largest of each row kept (ReLU'd when relu), the rest 0.
    Which of several elements tied at the k-th value are kept is torch.topk's
    choice (sorted=True, as OpenAI's code calls it)."""
    values, indices = torch.topk(x, k, dim=-1)
    if relu:
        values = torch.relu(values)
    return torch.zeros_like(x).scatter(-1, indices, values)


def topk_softmax(logits, k, renormalize=True):
    """(weights float32, expert ids int64) of the k most probable experts of
    each row, most probable first."""
    probs = torch.softmax(logits, dim=-1, dtype=torch.float32)
    weights, ids = torch.topk(probs, k, dim=-1)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, ids


def top_k_removed(scores, top_k, min_tokens_to_keep=1):
    """TopKLogitsWarper's mask: every score below the k-th largest (scores
    tied with the k-th largest are all kept)."""
    top_k = min(max(top_k, min_tokens_to_keep), scores.size(-1))
    kth = torch.topk(scores, top_k)[0][..., -1, None]
    return scores < kth


def top_k_filter(scores, top_k, filter_value=-float("inf"), min_tokens_to_keep=1):
    """TopKLogitsWarper: the scores top_k_removed marks replaced by
    filter_value."""
    return scores.masked_fill(top_k_removed(scores, top_k, min_tokens_to_keep), filter_value)


def top_p_removed(scores, top_p, min_tokens_to_keep=1):
    """TopPLogitsWarper's mask: sort ascending, cumulative softmax, the
    tokens whose cumulative probability is <= 1 - top_p (never the last
    min_tokens_to_keep of the sorted order)."""
    sorted_logits, sorted_indices = torch.sort(scores, descending=False)
    cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    sorted_remove = cumulative <= (1 - top_p)
    sorted_remove[..., -min_tokens_to_keep:] = 0
    return sorted_remove.scatter(-1, sorted_indices, sorted_remove)


def top_p_filter(scores, top_p, filter_value=-float("inf"), min_tokens_to_keep=1):
    """TopPLogitsWarper: the scores top_p_removed marks replaced by
    filter_value."""
    return scores.masked_fill(top_p_removed(scores, top_p, min_tokens_to_keep), filter_value)


def min_p_removed(scores, min_p, min_tokens_to_keep=1):
    """MinPLogitsWarper's mask: the tokens whose probability is below min_p
    times the largest, except the first min_tokens_to_keep of the
    descending argsort."""
    probs = torch.softmax(scores, dim=-1)
    top_probs, _ = probs.max(dim=-1, keepdim=True)
    remove = probs < min_p * top_probs
    sorted_indices = torch.argsort(scores, descending=True, dim=-1)
    sorted_remove = torch.gather(remove, dim=-1, index=sorted_indices)
    sorted_remove[..., :min_tokens_to_keep] = False
    return sorted_remove.scatter(-1, sorted_indices, sorted_remove)


def min_p_filter(scores, min_p, filter_value=-float("inf"), min_tokens_to_keep=1):
    """MinPLogitsWarper: the scores min_p_removed marks replaced by
    filter_value."""
    return scores.masked_fill(min_p_removed(scores, min_p, min_tokens_to_keep), filter_value)


class TopK(torch.nn.Module):
    """TopK activation (sparse autoencoders, k-winners-take-all) as plain
    torch: keep the k largest of each row (ReLU'd when relu, the default, as
    OpenAI's sparse_autoencoder), zero the rest.  No parameters."""

    def __init__(self, k, relu=True):
        super().__init__()
        self.k = k
        self.relu = relu

    def forward(self, x):
        return topk_activation(x, self.k, self.relu)

    def extra_repr(self):
        return f"k={self.k}, relu={self.relu}"


class TopKSoftmaxRouter(torch.nn.Module):
    """The MoE router's top-k softmax as plain torch: (weights, expert ids)
    from router logits (tokens, experts).  No parameters (the gate's Linear
    stays in the model)."""

    def __init__(self, k, renormalize=True):
        super().__init__()
        self.k = k
        self.renormalize = renormalize

    def forward(self, logits):
        return topk_softmax(logits, self.k, self.renormalize)

    def extra_repr(self):
        return f"k={self.k}, renormalize={self.renormalize}"


class _LogitsFilter(torch.nn.Module):
    def __init__(self, value, filter_value=-float("inf"), min_tokens_to_keep=1):
        super().__init__()
        self.filter_value = float(filter_value)
        self.min_tokens_to_keep = int(min_tokens_to_keep)
        self._set(value)

    def forward(self, scores):
        return self._reference(scores)

    def extra_repr(self):
        return (f"{self._param}={getattr(self, self._param)}, filter_value={self.filter_value}, "
                f"min_tokens_to_keep={self.min_tokens_to_keep}")


class TopKLogits(_LogitsFilter):
    """transformers' TopKLogitsWarper on a (batch, vocab) tensor."""
    _param = "top_k"

    def _set(self, top_k):
        if not isinstance(top_k, int) or top_k <= 0:
            raise ValueError(f"`top_k` has to be a strictly positive integer, but is {top_k}")
        self.top_k = top_k

    def _reference(self, scores):
        return top_k_filter(scores, self.top_k, self.filter_value, self.min_tokens_to_keep)


class TopPLogits(_LogitsFilter):
    """transformers' TopPLogitsWarper on a (batch, vocab) tensor."""
    _param = "top_p"

    def _set(self, top_p):
        top_p = float(top_p)
        if not 0 <= top_p <= 1:
            raise ValueError(f"`top_p` has to be a float in [0, 1], but is {top_p}")
        self.top_p = top_p

    def _reference(self, scores):
        return top_p_filter(scores, self.top_p, self.filter_value, self.min_tokens_to_keep)


class MinPLogits(_LogitsFilter):
    """transformers' MinPLogitsWarper on a (batch, vocab) tensor."""
    _param = "min_p"

    def _set(self, min_p):
        min_p = float(min_p)
        if not 0 <= min_p <= 1:
            raise ValueError(f"`min_p` has to be a float in [0, 1], but is {min_p}")
        self.min_p = min_p

    def _reference(self, scores):
        return min_p_filter(scores, self.min_p, self.filter_value, self.min_tokens_to_keep)
