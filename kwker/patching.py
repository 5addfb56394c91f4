"""The patch table and install()/uninstall().

The table is plain data: for each op, the torch function and the Tensor
method it replaces.  install() wraps each torch function in a
`KwkerFunctionWrapper` (wrapt: the wrapper compares and hashes equal to the
original, so dicts keyed on torch.sort still match, and proxies the rest,
which torch.compile relies on) and each Tensor method in a `KwkerMethod`
(the same equality, but binding `x.sort` as a plain method: a third of
wrapt's cost per access), and keeps the originals; uninstall() puts every
original back, so `torch.sort is <original>` again.  Names bound before
install (`from torch import sort`) keep the original.

The plain entries (dispatch.ENTRIES, no strict/verify/timing observing
them) start with the size rule's check, the most frequent fallback; where
the C extension kwker._gate is built, that check runs in C instead, with
one more (tensors on other devices go to torch at once;
native/python/kwker_gate.c): wrapt's wrapper function is a FunctionGate,
and Tensor methods are MethodGates, the C version of KwkerMethod, so a call
sent to torch by the size rule costs 1,100-1,750 instructions more than
torch's own (0.3-0.5 us) instead of 3,600-5,200 (0.5-1 us; README).  The
device check is support.CPU_DENSE's, made early: a call it sends to torch
is one the entry would send there too.  KWKER_NO_GATE=1 keeps the Python
wrappers (the tests run both).
"""
import importlib
import os
import threading
from types import FunctionType, MethodType
from typing import Dict, Iterable, List, Optional, Tuple

import torch
import wrapt

from kwker import dispatch

_FunctionWrapperBase = wrapt.FunctionWrapper.__mro__[1]  # wrapt's (C) base type

GATE_ENV_VAR = "KWKER_NO_GATE"
try:
    from kwker import _gate
except ImportError:  # not built (a compiler-less install): the Python wrappers
    _gate = None


def gate_module():
    """kwker._gate where it is built and not turned off by KWKER_NO_GATE=1
    (read at each install(), so a test can switch it)."""
    if os.environ.get(GATE_ENV_VAR, "").strip() in ("1", "true", "yes"):
        return None
    return _gate


def _gated(owner, original, entry):
    """(wrapper, gate): the C gate over `entry` for owner.<name>, or None
    where the entry has no size rule to check first (observing and
    torch-only entries) or the gate is not available."""
    gate = gate_module()
    op = getattr(entry, "size_rule_op", None)
    if gate is None or op is None:
        return None
    common = dict(op=op, body=entry.body, tensor_type=torch.Tensor,
                  namespace=vars(dispatch), name="_MIN_NUMEL")
    if owner is not torch.Tensor:
        function_gate = gate.FunctionGate(**common)
        return KwkerFunctionWrapper(original, function_gate), function_gate
    method = _named_as(gate.MethodGate(original=original, owner=torch.Tensor, **common),
                       original)
    method.__wrapped__ = original

    def bound(*args, **kwargs):  # x.<op> taken without a call: as KwkerMethod binds
        return method(*args, **kwargs)
    method.bind_as = _named_as(bound, original)
    return method, method


def _named_as(target, original):
    """target with original's __name__ (a bound x.<op> pickles as
    getattr(x, name)), __qualname__ and __doc__."""
    target.__name__ = original.__name__
    target.__qualname__ = getattr(original, "__qualname__", original.__name__)
    target.__doc__ = original.__doc__
    return target

# op -> (patch torch.<op>?, patch torch.Tensor.<op>?, TorchScript builtin)
# Tensor.unique is Python code that calls torch.unique at run time, so
# patching torch.unique reaches it.
PATCH_TABLE: Dict[str, Tuple[bool, bool, Optional[str]]] = {
    "sort": (True, True, "aten::sort"),
    "argsort": (True, True, "aten::argsort"),
    "msort": (True, True, "aten::msort"),
    "topk": (True, True, "aten::topk"),
    "kthvalue": (True, True, "aten::kthvalue"),
    "median": (True, True, "aten::median"),
    "nanmedian": (True, True, "aten::nanmedian"),
    "unique": (True, False, None),
    "quantile": (True, True, "aten::quantile"),
    "nanquantile": (True, True, "aten::nanquantile"),
}
ALL_OPS = tuple(PATCH_TABLE)


class _ImportedModule:
    """Pickles as `importlib.import_module(name)`: lets a pickled reference
    to torch.<name> be resolved at load time without needing kwker."""

    def __init__(self, name):
        self.name = name

    def __reduce__(self):
        return importlib.import_module, (self.name,)


class KwkerFunctionWrapper(wrapt.FunctionWrapper):
    """A wrapt wrapper that copies as itself (as torch's functions do) and
    pickles as the name it replaces."""

    def __init__(self, wrapped, wrapper):
        if not isinstance(wrapped, FunctionType):
            super().__init__(wrapped, wrapper)
            return
        # A Python function (torch.unique): wrapt's "function" binding looks
        # up wrapped.__self__ on every call (for a function bound before it
        # was wrapped), and the failed lookup raises and clears an
        # AttributeError: 0.32 us a call, a third of a fallback's cost.  The
        # "builtin" binding skips it; _bind gives back the method binding a
        # Python function has as a class attribute.
        _FunctionWrapperBase.__init__(self, wrapped, None, wrapper, None, "builtin")

    def __get__(self, instance, owner=None):
        if instance is None or not isinstance(self.__wrapped__, FunctionType):
            return super().__get__(instance, owner)
        return MethodType(self, instance)  # as the function's own __get__ binds

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce_ex__(self, protocol):
        # unpickles as whatever torch.<name> is then (torch.unique's own
        # module is torch.functional, so a plain global reference would not
        # find this wrapper there)
        return getattr, (_ImportedModule("torch"), self.__wrapped__.__name__)


class KwkerMethod:
    """What torch.Tensor.<op> is while installed: `x.<op>` binds, in one
    Python call, a plain method that passes (x, *args) to the entry as a
    function-form call (`Tensor.<op>(x, ...)` is `x.<op>(...)`, and the
    entry falls back to the unbound original with the same arguments).
    Through the class it is itself: it calls, compares, hashes, copies and
    pickles as the original method does (wrapt's bound wrapper, which did
    the same, cost 0.7 us more per `x.<op>` access)."""

    def __init__(self, original, entry):
        self.__wrapped__ = original
        _named_as(self, original)

        def method(*args, **kwargs):
            return entry(original, None, args, kwargs)
        self._method = _named_as(method, original)

    def __get__(self, instance, owner=None, _bind=MethodType):
        if instance is None:
            return self
        return _bind(self._method, instance)

    def __call__(self, *args, **kwargs):
        return self._method(*args, **kwargs)

    def __eq__(self, other):
        if isinstance(other, KwkerMethod):
            other = other.__wrapped__
        return self.__wrapped__ == other

    def __hash__(self):
        return hash(self.__wrapped__)

    def __repr__(self):
        return f"<kwker method {self.__qualname__} wrapping {self.__wrapped__!r}>"

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce_ex__(self, protocol):
        return getattr, (torch.Tensor, self.__name__)


class _Patch:
    __slots__ = ("owner", "name", "original", "had_own_attr", "wrapper", "entry", "gate")

    def __init__(self, owner, name, entry):
        self.owner = owner
        self.name = name
        self.had_own_attr = name in vars(owner)
        self.original = vars(owner)[name] if self.had_own_attr else getattr(owner, name)
        self.entry = entry
        gated = _gated(owner, self.original, entry)
        if gated is None:
            wrapper_type = KwkerMethod if owner is torch.Tensor else KwkerFunctionWrapper
            self.wrapper, self.gate = wrapper_type(self.original, entry), None
        else:
            self.wrapper, self.gate = gated

    def apply(self):
        setattr(self.owner, self.name, self.wrapper)
        if self.gate is not None:
            dispatch.STATS.add_gate(self.gate)

    def undo(self):
        if self.gate is not None:
            dispatch.STATS.remove_gate(self.gate)
        if self.had_own_attr:
            setattr(self.owner, self.name, self.original)
        else:
            # Tensor methods live on the C base class; deleting our attribute
            # makes torch.Tensor.<name> resolve to the original again
            delattr(self.owner, self.name)


lock = threading.RLock()
_applied: List[_Patch] = []


def _register_torchscript_builtin(wrapper, aten_name):
    """TorchScript resolves torch.sort by the function's identity: tell it the
    wrapper is the same aten op, so scripting code that calls it still works."""
    if aten_name is None:
        return
    try:
        torch.jit._builtins._register_builtin(wrapper, aten_name)
    except Exception:  # private API; scripting simply loses the mapping
        pass


def _make_patches(ops: Iterable[str], entries) -> List[_Patch]:
    patches = []
    for op in ops:
        on_torch, on_tensor, aten_name = PATCH_TABLE[op]
        if on_torch:
            patch = _Patch(torch, op, entries[op])
            _register_torchscript_builtin(patch.wrapper, aten_name)
            patches.append(patch)
        if on_tensor:
            patches.append(_Patch(torch.Tensor, op, entries[op]))
    return patches


def install(ops: Iterable[str], entries=None) -> None:
    """Patch `ops` to call `entries[op]` (default: dispatch.ENTRIES).  All
    or nothing; an op already patched with the same entry keeps its
    wrapper, one patched with another entry is re-wrapped."""
    entries = dispatch.ENTRIES if entries is None else entries
    with lock:
        ops = list(dict.fromkeys(ops))
        replaced = [p for p in _applied if p.name in ops and p.entry is not entries[p.name]]
        for p in reversed(replaced):
            p.undo()
            _applied.remove(p)
        done = {p.name for p in _applied}
        applied = []
        try:
            for p in _make_patches([op for op in ops if op not in done], entries):
                p.apply()
                applied.append(p)
        except BaseException:
            for p in reversed(applied):
                p.undo()
            for p in replaced:
                p.apply()
                _applied.append(p)
            raise
        _applied.extend(applied)


def uninstall() -> None:
    with lock:
        while _applied:
            _applied.pop().undo()


def installed_ops() -> Tuple[str, ...]:
    with lock:
        return tuple(dict.fromkeys(p.name for p in _applied))


def original(op: str):
    """The torch function `op` as it was before install()."""
    with lock:
        for p in _applied:
            if p.owner is torch and p.name == op:
                return p.original
    return getattr(torch, op)
