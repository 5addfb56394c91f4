"""torch.ops.kwker top-k layers, each over the last dim, each bit-identical
to its plain-torch reference in kwker.nn.reference_topk:

    out, kept = torch.ops.kwker.topk_activation(x, k, relu)         # TopK SAE activation
    weights, ids = torch.ops.kwker.topk_softmax(logits, k, renormalize)  # MoE router
    out, removed = torch.ops.kwker.top_k_filter(scores, top_k, filter_value, min_tokens_to_keep)
    out, removed = torch.ops.kwker.top_p_filter(scores, top_p, filter_value, min_tokens_to_keep)
    out, removed = torch.ops.kwker.min_p_filter(scores, min_p, filter_value, min_tokens_to_keep)

The second output of each is what the backward needs: topk_activation's
kept positions (int64, x.shape[:-1] + (k,): each row's k kept positions
ascending, j where the gradient passes, ~j (negative) where ReLU stops it),
the filters' removed scores (a bool mask), topk_softmax's int64 expert
ids; kwker.nn's functions return the first.  On the CPU the kernels of
kwker.ops.topk_layers run (native selection and sort in torch's order of
ties; torch's softmax/cumsum on the same values); other devices run the
reference's torch calls.

Autograd: topk_activation is an autograd.Function whose backward copies
the gradient at the kept positions into zeros (for relu, those whose
output is not <= 0, as ReLU's backward; what the reference's topk and
scatter backward write); the others recompute the
differentiable part from the operator's selection (softmax + gather, or
masked_fill), the reference's own formulas.  Under forward-mode AD and
torch.func transforms the reference itself is differentiated.
"""
import torch
import torch.autograd.forward_ad as _forward_ad

from kwker._native import denormals_flushed
from kwker.nn import reference_topk as R
from kwker.ops import topk_layers as fast
from kwker.ops._call import lib
from kwker.torch_ops.autograd import (_below_autograd, _direct, function_kernel, _plain_cpu_call,
                                      _plain_cpu_tensors, _functorch_active,
                                      _may_need_grad, kernel_entry)
from kwker.torch_ops.checks import check
from kwker.torch_ops.schemas import LIB

LIB.define("topk_activation(Tensor self, int k, bool relu) -> (Tensor out, Tensor kept)")
LIB.define("topk_softmax(Tensor logits, int k, bool renormalize) "
           "-> (Tensor weights, Tensor ids)")
_FILTER = "float filter_value, int min_tokens_to_keep) -> (Tensor out, Tensor removed)"
LIB.define(f"top_k_filter(Tensor scores, int top_k, {_FILTER}")
LIB.define(f"top_p_filter(Tensor scores, float top_p, {_FILTER}")
LIB.define(f"min_p_filter(Tensor scores, float min_p, {_FILTER}")

_LOADED = lib is not None
_FLOATS = frozenset({torch.float16, torch.bfloat16, torch.float32, torch.float64})


def _takes(x):
    """The CPU kernels' inputs: a non-empty float tensor of at least 1 dim,
    strided, no lazy negation bit, subnormals not flushed (the reference's
    topk and softmax then read them as zeros); anything else runs the
    reference."""
    return (_LOADED and x.dtype in _FLOATS and not denormals_flushed()
            and x.layout is torch.strided and not x.is_neg()
            and x.dim() >= 1 and x.numel() > 0)


# ------------------------------------------------------ topk_activation

def topk_activation_any(x, k, relu):
    """The reference, with the kept positions."""
    values, indices = torch.topk(x, k, dim=-1)
    return fast.scatter_activation(x, values, indices, relu)


def topk_activation_cpu(x, k, relu):
    if _takes(x) and 0 <= k <= x.shape[-1]:
        return fast.topk_activation(x, k, relu)
    return topk_activation_any(x, k, relu)  # torch.topk's errors, odd inputs


def topk_activation_fake(x, k, relu):
    check(x.dim() == 0 or 0 <= k <= x.shape[-1],
                 lambda: "selected index k out of range")
    kept = tuple(x.shape[:-1]) + (k,) if x.dim() else ()  # torch.topk's indices' shape
    return x.new_empty(x.shape), x.new_empty(kept, dtype=torch.int64)


class _TopKActivation(torch.autograd.Function):
    # forward(ctx, ...) without setup_context: see layers_sparse.py
    @staticmethod
    def forward(ctx, x, k, relu):
        output = function_kernel(torch.ops.kwker.topk_activation.default, topk_activation_cpu,
                                 x, k, relu)
        ctx.mark_non_differentiable(output[1])
        ctx.save_for_backward(output[1])
        # no zeros for the positions' missing gradient
        ctx.set_materialize_grads(False)
        return output

    @staticmethod
    def backward(ctx, grad_out, grad_kept):
        if grad_out is None:
            return None, None, None
        # the gradient at the kept positions, zeros elsewhere: topk's
        # backward and ReLU's (not where its output is <= 0; NaN passes)
        (kept,) = ctx.saved_tensors
        if _plain_cpu_call((grad_out, kept)):
            return fast.activation_backward(grad_out, kept), None, None
        return fast.kept_backward(grad_out, kept), None, None


def topk_activation_autograd(x, k, relu):
    if _direct(x):
        return topk_activation_cpu(x, k, relu)
    if x.is_floating_point() and _may_need_grad(x):
        if _forward_ad._current_level < 0 and not _functorch_active():
            return _TopKActivation.apply(x, k, relu)
        return topk_activation_any(x, k, relu)
    with _below_autograd():
        return torch.ops.kwker.topk_activation.default(x, k, relu)


# --------------------------------------------------------- topk_softmax

def topk_softmax_any(logits, k, renormalize):
    return R.topk_softmax(logits, k, renormalize)


def topk_softmax_cpu(logits, k, renormalize):
    if _takes(logits) and 0 <= k <= logits.shape[-1]:
        return fast.topk_softmax(logits, k, renormalize)
    return topk_softmax_any(logits, k, renormalize)


def topk_softmax_fake(logits, k, renormalize):
    check(logits.dim() >= 1 and 0 <= k <= logits.shape[-1],
                 lambda: "selected index k out of range")
    shape = tuple(logits.shape[:-1]) + (k,)
    return (logits.new_empty(shape, dtype=torch.float32),
            logits.new_empty(shape, dtype=torch.int64))


class _SoftmaxF32(torch.autograd.Function):
    """torch.softmax(x, -1, dtype=torch.float32) on Kwker's kernel (the same
    bits), differentiated as torch differentiates it: SoftmaxBackward's
    _softmax_backward_data, then the dtype conversion's backward."""
    @staticmethod
    def forward(ctx, x):
        probs = fast.softmax_f32(x)
        ctx.dtype = x.dtype
        ctx.save_for_backward(probs)
        return probs

    @staticmethod
    def backward(ctx, grad):
        # (probs is this Function's output: a double backward comes back
        # through it)
        (probs,) = ctx.saved_tensors
        return torch._softmax_backward_data(grad, probs, -1, torch.float32).to(ctx.dtype)


class _TopkSoftmax(torch.autograd.Function):
    """The whole router as one autograd node (plain eager CPU calls, k >= 1,
    where fast.router_backward_takes(experts) says the native backward
    gives torch's bits): Kwker's forward, and a backward of one native pass per
    row (the renormalisation's gradient, topk's scatter and the softmax's
    backward) where the reference's autograd runs four nodes and fills a
    dense zero tensor (backward alone, 4096x64, k = 2: the reference's
    285 us, this 149).  A backward that builds a graph (create_graph=True)
    differentiates the reference's steps instead, as the composite path
    does."""
    @staticmethod
    def forward(ctx, logits, k, renormalize):
        weights, ids, probs = fast.router_parts(logits, k, renormalize)
        ctx.mark_non_differentiable(ids)
        ctx.save_for_backward(logits, probs, ids)
        ctx.k, ctx.renormalize = k, renormalize
        return weights, ids

    @staticmethod
    def backward(ctx, grad, _ids_grad):
        logits, probs, ids = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph: the reference's steps, differentiable
            with torch.enable_grad():
                weights = _selected_weights(_SoftmaxF32.apply(logits), ids, ctx.renormalize)
                return torch.autograd.grad(weights, logits, grad, create_graph=True)[0], None, None
        probs = fast.router_probs(logits, probs)
        out = fast.router_backward(probs, ids, grad.contiguous(), ctx.renormalize)
        return out.to(logits.dtype), None, None


class _Selected(torch.autograd.Function):
    """probs.gather(-1, ids) differentiated as torch.topk's values are
    (value_selecting_reduction_backward: the gradient scattered into zeros;
    gather's own backward adds it to zeros, which makes a -0.0 +0.0).
    Its backward is differentiable (scatter's gradient is a gather)."""
    @staticmethod
    def forward(ctx, probs, ids):
        ctx.save_for_backward(ids)
        ctx.shape = probs.shape
        return probs.gather(-1, ids)

    @staticmethod
    def backward(ctx, grad):
        (ids,) = ctx.saved_tensors
        return torch.zeros(ctx.shape, dtype=grad.dtype).scatter(-1, ids, grad), None


def _selected_weights(probs, ids, renormalize):
    """The router's weights from its softmax's probabilities and the ids, by
    differentiable steps whose gradient is the reference's."""
    weights = _Selected.apply(probs, ids)
    if renormalize:
        weights = weights / weights.sum(dim=-1, keepdim=True)
    return weights


def topk_softmax_autograd(logits, k, renormalize):
    if _direct(logits):
        return topk_softmax_cpu(logits, k, renormalize)
    if logits.is_floating_point() and _may_need_grad(logits):
        if _forward_ad._current_level < 0 and not _functorch_active():
            # the reference's softmax (on Kwker's kernel, with torch's
            # gradient), computed once; the ids from Kwker's topk on its
            # values (torch.topk's, ties included)
            if _plain_cpu_tensors(logits) and _takes(logits) and 0 <= k <= logits.shape[-1]:
                if k >= 1 and fast.router_backward_takes(logits.shape[-1]):
                    return _TopkSoftmax.apply(logits, k, renormalize)
                probs = _SoftmaxF32.apply(logits)
                ids = fast._topk_indices(probs.detach(), k)[1]
                return _selected_weights(probs, ids, renormalize), ids
            # traced, or under a mode: the operator, which they see
            probs = torch.softmax(logits, dim=-1, dtype=torch.float32)
            with _below_autograd():
                ids = torch.ops.kwker.topk_softmax.default(logits, k, renormalize)[1]
            weights = probs.gather(-1, ids)
            if renormalize:
                weights = weights / weights.sum(dim=-1, keepdim=True)
            return weights, ids
        return topk_softmax_any(logits, k, renormalize)
    with _below_autograd():
        return torch.ops.kwker.topk_softmax.default(logits, k, renormalize)


# -------------------------------------------------------------- filters

def _filter_ops(name, removed_by_reference, fast_fn, valid):
    """(any, cpu, fake, autograd) kernels of a logits filter."""
    op = getattr(torch.ops.kwker, name).default

    def any_(scores, value, filter_value, min_tokens_to_keep):
        removed = removed_by_reference(scores, value, min_tokens_to_keep)
        return scores.masked_fill(removed, filter_value).contiguous(), removed.contiguous()

    def cpu(scores, value, filter_value, min_tokens_to_keep):
        if _takes(scores) and valid(scores, value, min_tokens_to_keep):
            out, removed = fast_fn(scores, value, filter_value, min_tokens_to_keep)
            return out.contiguous(), removed.contiguous()
        return any_(scores, value, filter_value, min_tokens_to_keep)

    def fake(scores, value, filter_value, min_tokens_to_keep):
        return scores.new_empty(scores.shape), scores.new_empty(scores.shape, dtype=torch.bool)

    def autograd(scores, value, filter_value, min_tokens_to_keep):
        if _direct(scores):
            return cpu(scores, value, filter_value, min_tokens_to_keep)
        if scores.is_floating_point() and _may_need_grad(scores):
            if _forward_ad._current_level < 0 and not _functorch_active():
                with _below_autograd():
                    removed = op(scores, value, filter_value, min_tokens_to_keep)[1]
                return scores.masked_fill(removed, filter_value), removed
            return any_(scores, value, filter_value, min_tokens_to_keep)
        with _below_autograd():
            return op(scores, value, filter_value, min_tokens_to_keep)

    return any_, cpu, fake, autograd


def _top_k_valid(scores, top_k, min_tokens_to_keep):
    return scores.dim() >= 1 and min(max(top_k, min_tokens_to_keep), scores.shape[-1]) >= 1


def _top_p_valid(scores, top_p, min_tokens_to_keep):
    return min_tokens_to_keep >= 0


def _min_p_valid(scores, min_p, min_tokens_to_keep):
    return min_tokens_to_keep >= 0


_FILTERS = {
    "top_k_filter": _filter_ops("top_k_filter", R.top_k_removed, fast.top_k_filter,
                                _top_k_valid),
    "top_p_filter": _filter_ops("top_p_filter", R.top_p_removed, fast.top_p_filter,
                                _top_p_valid),
    "min_p_filter": _filter_ops("min_p_filter", R.min_p_removed, fast.min_p_filter,
                                _min_p_valid),
}


# ---------------------------------------------------------------- vmap

def _rowwise_vmap(name):
    """Every op works on the last dim, each row apart: a vmapped dim is one
    more leading dim."""
    op = getattr(torch.ops.kwker, name).default

    def rule(info, in_dims, x, *args):
        if in_dims[0] is None:
            return op(x, *args), (None, None)
        return op(x.movedim(in_dims[0], 0), *args), (0, 0)
    return rule


def _register():
    table = {
        "topk_activation": (topk_activation_any, topk_activation_cpu, topk_activation_fake,
                            topk_activation_autograd),
        "topk_softmax": (topk_softmax_any, topk_softmax_cpu, topk_softmax_fake,
                         topk_softmax_autograd),
        **_FILTERS,
    }
    for name, (any_, cpu, fake, autograd) in table.items():
        LIB.impl(name, kernel_entry(any_), "CompositeExplicitAutograd")
        LIB.impl(name, kernel_entry(cpu), "CPU")
        LIB.impl(name, kernel_entry(autograd), "Autograd")
        torch.library.register_fake("kwker::" + name, fake, lib=LIB)
        torch.library.register_vmap("kwker::" + name, _rowwise_vmap(name), lib=LIB)


_register()
