"""Argument checks for the operators' kernels: torch._check and friends
with a fast exit.

The kernels run their checks on every eager call, where each condition is
a plain bool, and torch._check costs about a microsecond (its message
lambda, its symbolic-shape handling); a kernel with five checks spent more
there than in its native call.  A condition that is True returns at once;
anything else (False, or a SymBool under torch.compile / export, which
torch must see to record a runtime assert instead of a guard) goes to
torch's own check, so errors, their types and messages are torch's."""
import torch

_check, _check_value, _check_index = torch._check, torch._check_value, torch._check_index


def check(cond, message):
    """torch._check: RuntimeError(message()) unless cond."""
    if cond is not True:
        _check(cond, message)


def check_value(cond, message):
    """torch._check_value: ValueError(message()) unless cond."""
    if cond is not True:
        _check_value(cond, message)


def check_index(cond, message):
    """torch._check_index: IndexError(message()) unless cond."""
    if cond is not True:
        _check_index(cond, message)
