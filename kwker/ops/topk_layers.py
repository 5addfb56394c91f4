"""The top-k layers on Kwker's kernels, on already-validated arguments: rows
along the last dim of a CPU tensor, results bit-identical to
kwker.nn.reference_topk.

Where the native selection or sort stands in for torch.topk / torch.sort it
runs in torch's order of equal elements (KWK_ORDER_TORCH), so ties at the
k-th value are broken as the reference breaks them.  Softmax and cumsum are
torch's own calls on the same values in the same layout as the reference
(their rounding is not reproduced natively: that is what keeps the results
exact); the work saved is the sort / topk / argsort / scatter of the
reference."""
import torch

from kwker import _native
from kwker.ops import selection, sorting
from kwker.ops._call import advise_fresh, lib

_TORCH_ORDER = _native.ORDER_TORCH
_dense = lib.kwk_topk_dense_addr if lib is not None and hasattr(lib, "kwk_topk_dense_addr") \
    else None
_dense_backward = lib.kwk_topk_dense_backward_addr if lib is not None else None
_filter = lib.kwk_filter_below_addr if lib is not None else None
_softmax = lib.kwk_softmax_f32_addr if lib is not None else None
_renormalize = lib.kwk_renormalize_f32_addr if lib is not None else None
_router_backward = lib.kwk_router_backward_f32_addr if lib is not None else None
_router_top1 = lib.kwk_router_top1_f32_addr if lib is not None else None
_DEFER = lib.KWK_DEFER if lib is not None else 1

# What the native kernels read; other dtypes run the same torch calls as
# the reference on the selection Kwker makes (still exact)
NATIVE_DTYPES = frozenset({torch.float32, torch.float64})
# kwk_topk_dense modes
DENSE_KEEP, DENSE_RELU, DENSE_FILTER = 0, 1, 2


def _rows(x):
    """x as a contiguous (rows, n) tensor."""
    return x.contiguous().view(-1, x.shape[-1])


def _dense_call(x, k, mode, fill):
    """kwk_topk_dense over x's rows (see kwker.h): (out, removed mask) for
    DENSE_FILTER, else (out, kept positions: x.shape[:-1] + (k,) int64)."""
    rows = _rows(x)
    out = torch.empty_like(rows)
    if mode == DENSE_FILTER:
        aux = torch.empty(rows.shape, dtype=torch.bool)
        mask, kept = aux.data_ptr(), 0
    else:
        aux = torch.empty(rows.shape[0], k, dtype=torch.int64)
        mask, kept = 0, aux.data_ptr()
    advise_fresh(out, aux)
    status = _dense(_native.DTYPE_CODES[x.dtype], rows.data_ptr(), rows.shape[0], rows.shape[1],
                    k, mode, fill, out.data_ptr(), mask, kept)
    if status:
        _native.check(status, "topk_dense")
    return out.view(x.shape), aux.view(x.shape if mode == DENSE_FILTER else
                                       x.shape[:-1] + (k,))


def _filter_below(rows, cutoff, fill, key=None):
    """(rows.masked_fill(removed, fill), removed) with removed = key <
    cutoff (key: rows when None), for contiguous (r, n) rows and key and
    (r, 1) cutoffs of rows' dtype: one native pass for float32/float64
    (32x128256: torch's compare and masked_fill 22 ms, this 1.3-2 ms)."""
    key = rows if key is None else key
    if _filter is None or rows.dtype not in NATIVE_DTYPES or key.dtype != rows.dtype \
            or cutoff.dtype != rows.dtype:
        removed = key < cutoff
        return rows.masked_fill(removed, fill), removed
    key, cutoff = key.contiguous(), cutoff.contiguous()
    out = torch.empty_like(rows)
    removed = torch.empty(rows.shape, dtype=torch.bool)
    advise_fresh(out, removed)
    status = _filter(_native.DTYPE_CODES[rows.dtype], key.data_ptr(), rows.data_ptr(),
                     rows.shape[0], rows.shape[1], cutoff.data_ptr(), fill, out.data_ptr(),
                     removed.data_ptr())
    if status:
        _native.check(status, "filter_below")
    return out, removed


def _topk_indices(x, k):
    """torch.topk(x, k).indices (sorted, torch's ties) on Kwker's kernel."""
    return selection.topk(x, k, x.dim() - 1, True, True, _TORCH_ORDER)


def topk_activation(x, k, relu):
    """(out, kept): kept holds each row's k kept positions, ascending, j
    where the gradient passes and ~j (negative) where ReLU stops it (the
    kept value is <= 0; NaN passes): all the backward needs, k per row
    where a dense mask held one byte per element."""
    if _dense is not None and x.dtype in NATIVE_DTYPES:
        return _dense_call(x, k, DENSE_RELU if relu else DENSE_KEEP, 0.0)
    values, indices = _topk_indices(x, k)
    return scatter_activation(x, values, indices, relu)


def activation_backward(grad, kept):
    """The activation's gradient: grad at the positions kept holds (j >= 0),
    +0.0 elsewhere; one native pass for contiguous float32/float64 grads."""
    if (_dense_backward is not None and grad.dtype in NATIVE_DTYPES
            and type(grad) is torch.Tensor and type(kept) is torch.Tensor
            and grad.is_cpu and kept.is_cpu and grad.layout is torch.strided
            and kept.dtype == torch.int64 and grad.dim() >= 1
            and kept.shape == grad.shape[:-1] + kept.shape[-1:]
            and grad.is_contiguous() and kept.is_contiguous()):
        out = torch.empty_like(grad, memory_format=torch.contiguous_format)
        advise_fresh(out)  # 256x65536: 16384 page faults were 40 of its 65 ms
        rows = grad.numel() // grad.shape[-1] if grad.shape[-1] else 0
        status = _dense_backward(_native.DTYPE_CODES[grad.dtype], grad.data_ptr(),
                                 kept.data_ptr(), rows, grad.shape[-1], kept.shape[-1],
                                 out.data_ptr())
        if status:
            _native.check(status, "topk_dense_backward")
        return out
    return kept_backward(grad, kept)


def kept_backward(grad, kept):
    """activation_backward in torch ops (any device, differentiable in
    grad): the positions are distinct in each row, so the scatter is
    deterministic."""
    if grad.dim() == 0:  # a 0-dim input's topk: kept is 0-dim too
        return torch.where(kept >= 0, grad, 0)
    pos = torch.where(kept >= 0, kept, ~kept)
    return torch.zeros_like(grad).scatter(-1, pos, torch.where(kept >= 0,
                                                               grad.gather(-1, pos), 0))


def scatter_activation(x, values, indices, relu):
    """(out, kept) from torch.topk's (values, indices), as the reference
    builds out."""
    if relu:
        values = torch.relu(values)
    out = x.new_zeros(x.shape).scatter_(-1, indices, values)
    pos = indices.sort(-1).values if indices.dim() else indices
    kept = pos
    if relu:
        kept = torch.where(out.gather(-1, pos) <= 0, ~pos, pos)
    return out, kept


# The float32 vector width of the CPU kernels torch runs (ATen's capability),
# which fixes its softmax's summation order (native/src/softmax_torch.h);
# other capabilities keep torch's softmax.
_SOFTMAX_LANES = {"AVX512": 16, "AVX2": 8}
_softmax_lanes = None  # probed on first use: the lanes, or 0 (torch's softmax)
_vector_lanes = None  # torch's float vector here (16, 8), or 0: asked once


def _torch_lanes() -> int:
    global _vector_lanes
    if _vector_lanes is None:
        _vector_lanes = _SOFTMAX_LANES.get(torch.backends.cpu.get_cpu_capability(), 0)
    return _vector_lanes


def _probe_softmax() -> int:
    """The lanes for kwk_softmax_f32 if it gives torch.softmax's bits here
    (rows shorter than, as long as, and longer than a vector, with and
    without a tail), else 0: a torch build whose softmax differs from
    2.13's keeps its own."""
    lanes = _torch_lanes()
    if not lanes or _softmax is None:
        return 0
    gen = torch.Generator().manual_seed(0)
    for n in (1, 3, lanes - 1, lanes, lanes + 5, 4 * lanes + 3, 300):
        x = torch.randn(32, n, generator=gen) * 6
        out = torch.empty_like(x)
        if _softmax(x.data_ptr(), 32, n, lanes, out.data_ptr()) != 0 or not torch.equal(
                out.view(torch.int32), torch.softmax(x, -1).view(torch.int32)):
            return 0
    return lanes


def softmax_f32(logits):
    """torch.softmax(logits, dim=-1, dtype=torch.float32), bit for bit, on
    Kwker's kernel where it can (CPU, a probe passed, no NaN or infinite
    row maximum): torch's kernel takes a slow path for rows shorter than a
    vector (4096x8: 0.52 ms, against 0.06 ms at 4096x16)."""
    global _softmax_lanes
    if _softmax_lanes is None:
        _softmax_lanes = _probe_softmax()
    if _softmax_lanes and logits.device.type == "cpu" and logits.dim() >= 1 \
            and logits.numel() > 0 and logits.is_floating_point():
        # torch.softmax(x, dtype=float32) converts first, then runs the
        # float32 kernel
        x = logits.to(torch.float32).contiguous()
        out = torch.empty(x.shape, dtype=torch.float32)
        n = x.shape[-1]
        if _softmax(x.data_ptr(), x.numel() // n, n, _softmax_lanes, out.data_ptr()) == 0:
            return out
    return torch.softmax(logits, dim=-1, dtype=torch.float32)


def topk_softmax(logits, k, renormalize):
    """(weights float32, ids int64) as the reference."""
    return router_parts(logits, k, renormalize)[:2]


def router_parts(logits, k, renormalize):
    """(weights, ids, probs): topk_softmax's results and the softmax they
    came from (what router_backward needs; None where the top-1 router
    below did without it: router_probs makes it then)."""
    if k == 1 and renormalize:
        top1 = _router_top1_parts(logits)
        if top1 is not None:
            return top1
    return _router_parts_softmax(logits, k, renormalize)


def router_probs(logits, probs):
    """router_parts' probs, made now if it did without them."""
    return softmax_f32(logits) if probs is None else probs


# Logits from which the top-1 router settles a call without the softmax: its
# few tensors cost ~2 us more than the softmax path's, which that path's
# passes take back from about here (one thread, Zen 5, us a call, top-1 ->
# softmax path: 64x64 10.0 -> 9.3, 128x64 10.1 -> 10.8, 32x256 9.9 -> 10.6,
# 512x8 14.2 -> 13.2, 256x256 15.3 -> 33.3, 4096x8 35 -> 56)
ROUTER_TOP1_MIN_NUMEL = 8192


def _router_top1_parts(logits):
    """topk_softmax(logits, 1, renormalize=True) without the softmax
    (kwk_router_top1_f32: weights all 1, the id the largest logit's where
    no other lies within 2^-19 of it, softmax_torch.h says why), the rows
    it leaves (a NaN, an infinite maximum, a near tie) computed the long
    way; None where it does not apply (then the caller does).  Measured
    (python -m kwker.nn.bench_topk, 4096 rows of 64 / 128 / 256 experts,
    forward): see the README's router rows."""
    if _router_top1 is None or logits.device.type != "cpu" or not logits.is_floating_point() \
            or logits.dim() < 1 or logits.shape[-1] < 1:
        return None
    if logits.numel() < ROUTER_TOP1_MIN_NUMEL:
        return None
    # the reference's softmax converts to float32 first (exact for bfloat16
    # and float16; float64 rounds, and the gap is then the rounded logits')
    x = _rows(logits.to(torch.float32))
    ids = torch.empty(x.shape[0], 1, dtype=torch.int64)
    unsettled = torch.zeros(1, dtype=torch.int64)
    status = _router_top1(x.data_ptr(), x.shape[0], x.shape[1], ids.data_ptr(),
                          unsettled.data_ptr())
    if status:
        _native.check(status, "router_top1")
    weights = torch.ones(x.shape[0], 1, dtype=torch.float32)
    if int(unsettled):
        rows = (ids[:, 0] < 0).nonzero()[:, 0]
        w_left, ids_left, _ = _router_parts_softmax(x.index_select(0, rows), 1, True)
        weights.index_copy_(0, rows, w_left)
        ids.index_copy_(0, rows, ids_left)
    shape = tuple(logits.shape[:-1]) + (1,)
    return weights.view(shape), ids.view(shape), None


def _router_parts_softmax(logits, k, renormalize):
    probs = softmax_f32(logits)
    weights, ids = _topk_indices(probs, k)
    if renormalize:
        if _renormalize_takes(k) and weights.is_contiguous() and weights.numel() > 0:
            # (one native pass instead of torch's sum and division, 22 us of
            # a 4096x8 top-2 router's ~95)
            status = _renormalize(weights.data_ptr(), weights.numel() // k, k)
            if status:
                _native.check(status, "renormalize")
        else:
            weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights, ids, probs


# The longest rows whose sum kwk_renormalize_f32 and kwk_router_backward_f32
# make as torch does on x86 (native/src/torch_sum.h); rows of 3 or more
# only where a probe found torch's sums so (one or two terms: one addition)
RENORMALIZE_MAX_K = 8
_sums_ok = None  # probed on first use


def _renormalize_takes(k) -> bool:
    """Whether kwk_renormalize_f32's sums of rows of k are torch's here."""
    global _sums_ok
    if _renormalize is None or not 1 <= k <= RENORMALIZE_MAX_K:
        return False
    if k <= 2:
        return True
    if _sums_ok is None:
        _sums_ok = _probe_sums()
    return _sums_ok


def _probe_sums() -> bool:
    if not _torch_lanes():  # (not x86's kernels)
        return False
    gen = torch.Generator().manual_seed(0)
    for k in range(3, RENORMALIZE_MAX_K + 1):
        w = torch.randn(64, k, generator=gen) * 10.0 ** torch.randint(-6, 7, (64, k),
                                                                   generator=gen)
        got = w.clone()
        if _renormalize(got.data_ptr(), 64, k) != 0 or not torch.equal(
                got.view(torch.int32), (w / w.sum(-1, keepdim=True)).view(torch.int32)):
            return False
    return True


_router_backward_lanes = None  # probed on first use: the lanes, or 0 (torch's ops)


def _probe_router_backward() -> int:
    """The lanes for kwk_router_backward_f32 if its softmax step gives
    torch._softmax_backward_data's bits here (rows shorter than a vector
    and of whole vectors: router_backward_takes), else 0."""
    lanes = _torch_lanes()
    if not lanes or _router_backward is None:
        return 0
    gen = torch.Generator().manual_seed(0)
    for n in (1, 3, lanes - 1, lanes, 2 * lanes, 4 * lanes, 16 * lanes):
        k = min(n, 5)
        probs = torch.softmax(torch.randn(32, n, generator=gen) * 3, -1)
        ids = torch.rand(32, n, generator=gen).argsort(-1)[:, :k].contiguous()
        g = torch.randn(32, k, generator=gen)
        out = torch.empty_like(probs)
        expected = torch._softmax_backward_data(torch.zeros_like(probs).scatter_(-1, ids, g),
                                                probs, -1, torch.float32)
        if _router_backward(probs.data_ptr(), ids.data_ptr(), g.data_ptr(), 32, n, k, 0, lanes,
                            out.data_ptr()) != 0 or not torch.equal(
                                out.view(torch.int32), expected.view(torch.int32)):
            return 0
    return lanes


def router_backward_lanes() -> int:
    """The lanes router_backward runs with here, 0 where it does not run
    (no native kernel, or a torch whose softmax backward differs)."""
    global _router_backward_lanes
    if _router_backward_lanes is None:
        _router_backward_lanes = _probe_router_backward()
    return _router_backward_lanes


def router_backward_takes(n) -> bool:
    """Whether router_backward gives torch's bits for rows of n experts
    here: a probe passed, and a row of whole vectors (or of less than one).
    torch's softmax backward adds a row's last, partial vector with a fused
    multiply-add in the copy of its loop that runs in the calling thread
    (one thread, or rows below its grain) and without one in the copy its
    thread pool runs: which one a call gets is torch's affair, so rows with
    such a tail keep torch's own steps (60 experts with 16 lanes, say)."""
    lanes = router_backward_lanes()
    return bool(lanes) and (n < lanes or n % lanes == 0)


def router_backward(probs, ids, grad, renormalize):
    """The float32 gradient of topk_softmax's input (before the reference's
    conversion back to the input's dtype) from its weights' gradient: torch's
    autograd of the reference (renormalisation, topk's scatter into zeros,
    _softmax_backward_data) bit for bit, in one native pass (renormalised
    there too for k <= RENORMALIZE_MAX_K; larger k by torch's own steps
    first).  Calls with a NaN in grad or probs take torch's steps
    throughout (see kwk_router_backward_f32).  probs (r, n), ids and grad
    (r, k) contiguous, 1 <= k <= n; the caller checks
    router_backward_takes(n) first."""
    n, k = probs.shape[-1], ids.shape[-1]
    lanes = router_backward_lanes()
    native_renormalize = renormalize and _renormalize_takes(k)
    g = _renormalize_backward(probs, ids, grad) if renormalize and not native_renormalize \
        else grad
    out = torch.empty(probs.shape, dtype=torch.float32)
    advise_fresh(out)
    status = _router_backward(probs.data_ptr(), ids.data_ptr(), g.data_ptr(), probs.numel() // n,
                              n, k, int(native_renormalize), lanes,
                              out.data_ptr())
    if status == _DEFER:
        if native_renormalize:
            g = _renormalize_backward(probs, ids, grad)
        return torch._softmax_backward_data(torch.zeros_like(probs).scatter_(-1, ids, g), probs,
                                            -1, torch.float32)
    if status:
        _native.check(status, "router_backward")
    return out


def _renormalize_backward(probs, ids, grad):
    """The gradient reaching the k selected probabilities t from that of
    w = t / t.sum(-1, keepdim=True), by the steps torch's autograd takes
    (DivBackward's two gradients, the second summed over the row, then
    added to the first: its arrival order), so with their bits."""
    t = probs.gather(-1, ids)
    s = t.sum(-1, keepdim=True)
    return (grad / s + (-grad * ((t / s) / s)).sum(-1, keepdim=True)).contiguous()


def top_k_filter(scores, top_k, filter_value, min_tokens_to_keep):
    """(out, removed) of TopKLogitsWarper."""
    top_k = min(max(top_k, min_tokens_to_keep), scores.shape[-1])
    if _dense is not None and scores.dtype in NATIVE_DTYPES:
        return _dense_call(scores, top_k, DENSE_FILTER, filter_value)
    kth = _topk_indices(scores, top_k)[0][..., -1:]
    removed = scores < kth
    return scores.masked_fill(removed, filter_value), removed


def _reference(name):
    # imported late: kwker.nn imports torch_ops, which imports this module
    from kwker.nn import reference_topk
    return getattr(reference_topk, name)


def _redo_rows(scores, out, removed, rows, removed_by_reference, filter_value, *args):
    """Rows the shortcut cannot decide exactly, computed by the reference
    (row by row it is the same computation)."""
    n = scores.shape[-1]
    sub = scores.reshape(-1, n)[rows]
    mask = removed_by_reference(sub, *args)
    removed.view(-1, n)[rows] = mask
    out.view(-1, n)[rows] = sub.masked_fill(mask, filter_value)


def _prefix_at_most(cumulative, bound):
    """(rows, 1) int64: how many of each row's values are `<= bound`, as
    (cumulative <= bound).sum(-1) counts them, for rows that never
    decrease (a cumsum of probabilities: its True entries are a prefix).
    A binary search per row instead of a compare and a sum over every
    element (30-38 ms of a 32x128256 top-p filter); each row's answer
    is checked with the comparison itself at the two entries around it,
    and a row failing the check (NaN, which the search does not order) is
    counted in full."""
    n = cumulative.shape[-1]
    probe = torch.full((cumulative.shape[0], 1), bound, dtype=cumulative.dtype)
    count = torch.searchsorted(cumulative, probe, right=True)
    last_in = cumulative.gather(-1, (count - 1).clamp_(min=0)) <= bound
    first_out = cumulative.gather(-1, count.clamp(max=n - 1)) <= bound
    wrong = ((count > 0) & ~last_in) | ((count < n) & first_out)
    if bool(wrong.any()):
        rows = wrong.view(-1).nonzero().view(-1)
        count[rows] = (cumulative[rows] <= bound).sum(dim=-1, keepdim=True)
    return count


def top_p_filter(scores, top_p, filter_value, min_tokens_to_keep):
    """(out, removed) of TopPLogitsWarper.  The reference removes a prefix of
    the ascending sort (the cumulative sum never decreases); its length c
    needs only the sorted values, and the prefix is then every score below
    sorted[c], unless sorted[c-1] == sorted[c] (equal scores straddling the
    boundary, where torch.sort's order of ties decides): such rows are
    redone by the reference."""
    rows = scores.contiguous().view(-1, scores.shape[-1])
    n = rows.shape[-1]
    ascending = sorting.sort(rows, 1, False, _TORCH_ORDER, want_indices=False)[0]
    cumulative = ascending.softmax(dim=-1).cumsum(dim=-1)
    count = _prefix_at_most(cumulative, 1 - top_p)
    # the reference's sorted_remove[..., -min_tokens_to_keep:] = 0, on a
    # prefix: its length capped at where that slice starts
    count.clamp_(max=slice(-min_tokens_to_keep, None).indices(n)[0])
    cutoff = ascending.gather(-1, count.clamp(max=n - 1))
    out, removed = _filter_below(rows, cutoff, filter_value)
    below = ascending.gather(-1, (count - 1).clamp(min=0))
    straddle = ((count > 0) & (below == cutoff)).view(-1)
    out, removed = out.view(scores.shape), removed.view(scores.shape)
    if bool(straddle.any()):
        _redo_rows(scores, out, removed, straddle.nonzero().view(-1), _reference("top_p_removed"),
                   filter_value, top_p, min_tokens_to_keep)
    return out, removed


def min_p_filter(scores, min_p, filter_value, min_tokens_to_keep):
    """(out, removed) of MinPLogitsWarper.  Its argsort only protects the
    min_tokens_to_keep highest scores; when none of the scores at or above
    the m-th highest is removed anyway that protection changes nothing, and
    the argsort, gather and scatter are skipped.  Other rows are redone by
    the reference."""
    probs = torch.softmax(scores, dim=-1)
    top_probs, _ = probs.max(dim=-1, keepdim=True)
    n = scores.shape[-1]
    out, removed = _filter_below(_rows(scores), (min_p * top_probs).reshape(-1, 1),
                                 filter_value, key=_rows(probs))
    out, removed = out.view(scores.shape), removed.view(scores.shape)
    m = min(min_tokens_to_keep, n)
    if m > 0:
        kth = _topk_indices(scores, m)[0][..., -1:]
        unprotected = (removed & (scores >= kth)).reshape(-1, n).any(dim=-1)
        if bool(unprotected.any()):
            _redo_rows(scores, out, removed, unprotected.nonzero().view(-1),
                       _reference("min_p_removed"),
                       filter_value, min_p, min_tokens_to_keep)
    return out, removed
