"""kwker.explain(fn, *args, **kwargs): would this call take the fast path?

The answer comes from the dispatcher's own entry (decide_only=True), the one
installed for the current settings, so it cannot disagree with what a real
call does; nothing is executed.
"""
from dataclasses import dataclass
from typing import Optional

import torch

from kwker import patching, policy
from kwker.support import Condition


@dataclass(frozen=True)
class Explanation:
    op: str
    fast: bool                     # Kwker's kernel would run
    condition: Optional[Condition]  # why not, when not
    installed: bool                # the op is patched right now

    def __str__(self) -> str:
        if self.fast:
            text = f"torch.{self.op}: fast path (Kwker's kernel)"
        else:
            text = f"torch.{self.op}: torch ({self.condition.key}: {self.condition.reason})"
        if not self.installed:
            text += f" [if installed: torch.{self.op} is not patched now, so torch runs it]"
        return text


def _op_of(fn):
    """(op name, bound tensor or None) for torch.<op>, torch.Tensor.<op>,
    x.<op> (patched or not) or the op's name."""
    if isinstance(fn, str):
        name, instance = fn, None
    else:
        name = getattr(fn, "__name__", None)
        instance = getattr(fn, "__self__", None)
        if not isinstance(instance, torch.Tensor):
            instance = None
            # the function or the unbound method, patched (the wrappers compare
            # equal to the original) or not
            if name not in patching.PATCH_TABLE or not (
                    fn == getattr(torch, name, None) or fn == getattr(torch.Tensor, name, None)
                    or fn is patching.original(name)):
                name = None
    if name not in patching.PATCH_TABLE:
        raise ValueError(f"kwker.explain: {fn!r} is not one of the torch functions Kwker "
                         f"patches ({', '.join(patching.ALL_OPS)})")
    return name, instance


def explain(fn, *args, **kwargs) -> Explanation:
    op, instance = _op_of(fn)
    entry = policy.current_entries()[op]
    condition = entry(None, instance, args, kwargs, True)
    return Explanation(op, condition is None, condition, op in patching.installed_ops())
