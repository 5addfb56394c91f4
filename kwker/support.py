"""What takes the fast path: the single source of truth.

Every reason a call can go to torch instead of Kwker's kernels is a
`Condition` below.  The dispatcher (kwker.dispatch) checks them in the order
`OPS[op].conditions` lists and reports the first that fails; `explain()`,
the counters, strict mode and the generated compat_matrix/ all read the same
objects, so the documentation cannot drift from the code.

Anything doubtful goes to torch: the original function then validates the
arguments and raises torch's own errors.
"""
from dataclasses import dataclass
from typing import Dict, FrozenSet, Optional, Tuple

import torch
import torch.autograd.forward_ad as _forward_ad

from kwker import _native


@dataclass(frozen=True)
class Condition:
    key: str      # stable identifier (counters, JSON matrix)
    reason: str   # what failed, in words, when this condition is not met


NATIVE = Condition("native", "the native library is not loaded")
NO_TRANSFORM = Condition(
    "no_transform",
    "a trace or transform is active (torch.compile, TorchScript tracing, functorch, "
    "forward AD, a torch-function or dispatch mode)")
ARGUMENTS = Condition(
    "arguments", "argument form not handled by the fast path (out=, Dimname, "
    "non-int dim/k, non-bool flag, ...); torch validates it")
PLAIN_TENSOR = Condition("plain_tensor", "input is not a plain torch.Tensor (subclass or other type)")
CPU_DENSE = Condition(
    "cpu_dense", "input is not a dense CPU tensor (other device, sparse, nested, "
    "negative or zero view)")
NO_GRAD = Condition("no_grad", "input requires grad while grad mode is on, for a form "
                    "without Kwker's backward (median/nanmedian over all elements; "
                    "torch.ops.kwker has them)")
DTYPE = Condition("dtype", "dtype not handled by this op's kernel")
DIM = Condition("dim", "0-dim input, or dim/k out of range; torch handles or rejects it")
NONEMPTY = Condition("nonempty", "empty input or reduced dim; torch handles or rejects it")
TORCH_RAISES = Condition("torch_raises", "torch 2.13 raises for this input (1-D unsigned "
                         "sort through its radix path; quantile over more than 2^24 elements)")
TIE_BITS = Condition("tie_bits", "the result is one of several equal values with different "
                     "bits (+0.0 beside -0.0, NaN payloads) that torch's unstable sort chooses "
                     "between; torch computes it")
TORCH_ROWS = Condition("torch_rows", "topk in torch's order over many short rows whose first "
                       "rows, read by the kernel, show that torch selects them faster: short "
                       "rows whose best values tie (each would be redone by the emulation of "
                       "torch's order), or rows already in order with sorted=False (torch's "
                       "branches all predicted); the bounds are tk_probe_prefers_torch's in "
                       "native/src/select_kernels.h; install(use_fast=True) turns the probe off")
UNIQUE_DIM = Condition("unique_dim", "unique(dim=...) of a floating-point or uint64 input, or "
                       "of integer slices whose value ranges need more than 63 bits together "
                       "(Kwker sorts slices as packed 63-bit keys); torch computes it")
FLUSHED_DENORMALS = Condition(
    "denormals", "float32/float64/bfloat16 input while this thread flushes subnormals to zero "
    "(torch.set_flush_denormal(True), or other code setting DAZ/FTZ): torch then compares "
    "subnormals as zero, Kwker's keys by their bits")
SMALL = Condition("small", "input size or row length where torch was measured faster "
                  "(see SIZE_RULES; install(use_fast=True) turns the size rules off; under "
                  "ties=\"stable\" they do not apply to sort, argsort, msort, topk and "
                  "kthvalue, where torch's answer would not be the stable order)")
USE_FAST = Condition("use_fast", "install(use_fast=False): every call goes to torch "
                     "(the reference)")

ALL_CONDITIONS: Tuple[Condition, ...] = (
    USE_FAST, SMALL, NATIVE, NO_TRANSFORM, ARGUMENTS, PLAIN_TENSOR, CPU_DENSE, NO_GRAD, DTYPE, DIM,
    NONEMPTY, FLUSHED_DENORMALS, TORCH_RAISES, TIE_BITS, TORCH_ROWS, UNIQUE_DIM,
)

_ALL_SORTABLE = frozenset({
    torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
    torch.uint16, torch.uint32, torch.uint64, torch.float16, torch.bfloat16,
    torch.float32, torch.float64,
})
# torch 2.13 implements topk/kthvalue/median for these on the CPU
_SELECTABLE = frozenset({
    torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
    torch.float16, torch.bfloat16, torch.float32, torch.float64,
})
_QUANTILE = frozenset({torch.float32, torch.float64})
_UNSIGNED_WIDE = frozenset({torch.uint16, torch.uint32, torch.uint64})


@dataclass(frozen=True)
class OpSupport:
    dtypes: FrozenSet[torch.dtype]
    conditions: Tuple[Condition, ...]
    note: str = ""


_TENSOR_CHECKS = (USE_FAST, SMALL, NATIVE, NO_TRANSFORM, ARGUMENTS, PLAIN_TENSOR, CPU_DENSE,
                  NO_GRAD, DTYPE, FLUSHED_DENORMALS, DIM, NONEMPTY)

# ops whose every form has torch's backward through kwker.ops.backward
_GRAD_CHECKS = tuple(c for c in _TENSOR_CHECKS if c is not NO_GRAD)

OPS: Dict[str, OpSupport] = {
    "sort": OpSupport(_ALL_SORTABLE, _GRAD_CHECKS + (TORCH_RAISES,)),
    "argsort": OpSupport(_ALL_SORTABLE, _GRAD_CHECKS + (TORCH_RAISES,)),
    "msort": OpSupport(_ALL_SORTABLE, _GRAD_CHECKS + (TORCH_RAISES,)),
    "topk": OpSupport(_SELECTABLE, _GRAD_CHECKS + (TORCH_ROWS,)),
    "median": OpSupport(_SELECTABLE, _TENSOR_CHECKS, "with dim, and over all elements"),
    "nanmedian": OpSupport(_SELECTABLE, _TENSOR_CHECKS, "with dim, and over all elements"),
    "kthvalue": OpSupport(_SELECTABLE, _GRAD_CHECKS),
    "unique": OpSupport(_ALL_SORTABLE, _TENSOR_CHECKS + (TORCH_RAISES, UNIQUE_DIM),
                        "the flattened form; dim=... for integer and bool slices"),
    "quantile": OpSupport(_QUANTILE, _TENSOR_CHECKS + (TORCH_RAISES, TIE_BITS),
                          "q a float or a 0/1-D tensor of the input's dtype; out= goes to torch"),
    "nanquantile": OpSupport(_QUANTILE, _TENSOR_CHECKS + (TORCH_RAISES, TIE_BITS),
                             "q a float or a 0/1-D tensor of the input's dtype; out= goes to "
                             "torch"),
}
# torch.quantile refuses longer reduced dims ("input tensor is too large")
QUANTILE_MAX_ROW = 1 << 24

@dataclass(frozen=True)
class SizeRule:
    """Where torch's own kernel beats Kwker's fixed per-call cost (argument
    checks, output allocation, the native call) or its per-row cost, so the
    call goes straight to torch."""
    min_numel: int            # fewer elements: torch (checked before any parsing)
    short_row: int = 16       # rows this short or shorter ...
    min_numel_short: int = 0  # ... need at least this many elements
    max_row: int = 0          # rows longer than this: torch (0: no limit)
    min_row: int = 0          # rows shorter than this: torch
    wide_torch_rows: Tuple[int, ...] = ()  # rows of 64-bit elements this long: torch
    # topk(sorted=False) in torch's tie order through its nth_element
    # branch (k > 1, k * 64 > row), which Kwker emulates row by row:
    nth_min_row: int = 0      # shorter rows: torch at any size
    nth_int64: bool = False   # int64 rows: torch at any size
    # topk in torch's order over many short rows: the kernel looks at the
    # first rows and leaves the call to torch (TORCH_ROWS) where they show
    # torch is faster (select_kernels.h tk_probe_prefers_torch)
    probe_rows: bool = False


# Measured with fresh inputs for every timed call (tools/rule_sweep.py,
# forced fast path against torch, one thread, AMD Zen 4, float32 / int64 /
# float64 / int32 / bfloat16; random, sorted and tied values (0..15), one
# row and row shapes; `python -m kwker crossover` for float32 rows).  An
# input timed over and over is learnt by the branch predictors, and the
# rules below were first set that way: torch's sorts of 1000 random floats
# measured 13.6 us repeated against 53 us on new rows, topk(k=2) of 4096x8
# 104 against 296 us, so the old bounds (sort 2048, median 4096, rows of up
# to 16 from 8192) sent calls to torch that Kwker runs 1.5-4x faster.
# The bounds are where random and tied inputs of every dtype measured at
# least ~1.1x.  Inputs that are sorted already stay slower than torch near
# them (its introsort and nth_element are quick on sorted rows, Kwker's
# fixed cost is not): sort of a sorted row of 768..2048 0.57-1.16x (int64
# and int32, whose repeated values make torch order re-run the introsort,
# 0.57-0.65x; 0.75-0.84x at 4096, 1.3x at 16384), median of sorted rows of
# 1024..4096 0.56-0.87x, kthvalue 0.66-0.9x.
# sort/argsort/msort: one row of 768 1.1-3.1x (int ties 1.03-1.23x), 512
# 0.95-2.4x; rows of at most 128 need 2048 elements (rows of 96..128 of int
# ties 0.68-0.92x at 1024-1536; rows of 2..16 at 2048 1.13-2.5x, at 1024
# 0.93-1.65x).  median/nanmedian: 512 (at 1024: one row 1.5-2.4x, rows of
# 2..16 1.27-2.1x; at 512 1.09-1.6x; AMD Zen 5, float32 / int64 /
# bfloat16, random and tied: one row of 512 1.33-1.72x, 512 as rows of 8,
# 16 or 32 1.22-1.49x, but 384 as rows of 48 0.80-1.05x).  kthvalue: 512,
# rows of up to 16 from 1024 (at 1024: one row 1.18-1.81x, rows of 4..127
# 0.99-2.2x; int64 rows of 12 with ties measured 0.82-0.86x at every size
# up to 4096; Zen 5 at 512: one row 1.08-1.45x, rows of 32 1.08-1.51x,
# rows of 8 and 16 of int64 ties 0.93-0.95x; at 256 0.90-1.09x).  Sorted
# rows of 512 lose as at 1024 (median 0.55-0.57x, kthvalue 0.64-0.66x).
# unique: 1024 (0.98-3.7x, sorted float32 0.98x).
# topk keeps 8192: one row of 1024..4096 is 0.4-1.1x (torch's heap select
# of k = 2 is quick on a fresh row too), and rows of 4..16 of int64 or
# bfloat16 whose top values tie run the emulation of torch's introselect
# row by row (0.26-0.7x at 4096 for sorted or tied int64 rows of 8, any
# size; float32 rows of 8 1.4-3.7x there).
# Earlier measurements kept from the repeated-input sweeps (the shapes they
# name were not re-measured):
# Rows of 2-16 elements take the eight-rows-at-once kernels
# (native/src/short_rows.h); topk (k=2) of rows of 2-16 0.8-1.5x at 4096,
# 1.9-2.6x at 8192; rows of 1 (topk k=1) 0.93x at 8192.  kthvalue rows of
# up to 64 take the batch selection, longer ones a select by rank
# (native/src/kthvalue_kernels.h).
# Rows of 64-bit keys (int64, float64) do not fit the eight-rows kernels'
# 32-bit lanes: sort and sorted topk take rows of 2..8 eight at a time in
# 64-bit lanes (sort_kernels.h sw8_rank_pick).  AMD Zen 4, forced fast
# path, 4096 rows: sort 1.06-1.7x torch.sort, 4-6.8x stable argsort; topk
# of rows of 4..8 1.3-2.8x, but of 2..3 0.8-0.92x for k = 1 (the call's
# fixed cost: 1.7-2.3x at 16384 rows) and of 9..10 (a row at a time, no
# eight-rows kernel) 0.79-0.93x, so those lengths go to torch.  Rows of 2
# in kthvalue cost 41 us against torch's 25 for 4096 float32 rows (the
# batch network's set-up), every dtype alike.
# topk(sorted=False) through torch's nth_element branch returns the
# introselect's arrangement of the first k slots, which depends on every
# element, so Kwker (torch order) runs an emulation of the introselect on
# every row.  Fresh inputs, AMD Zen 4, float32 and bfloat16 (random or
# tied values alike): rows of 8 0.80-0.93x, 10 0.86-1.08x, 12 1.06-1.20x,
# 13 1.12-1.29x, 16 1.37-1.55x (512 to 4096 rows), 32 2.0-2.2x, 64..512
# 2.6-5.3x, at every size measured (8192 to 65536 elements); float16 rows of
# 13 1.35x, int32 0.94-0.97x (16: 1.10x).  int64 rows go to the emulation
# on records, 0.78-0.91x at every shape measured (float64's 1.0-1.3x).  (A
# sweep that timed one input over and over had found torch quick below
# 65536 elements, and a bound on the count: its branch predictors had
# learnt the input.)
SIZE_RULES: Dict[str, SizeRule] = {
    "sort": SizeRule(768, 128, 2048, min_row=2),
    "argsort": SizeRule(768, 128, 2048, min_row=2),
    "msort": SizeRule(768, 128, 2048, min_row=2),
    "topk": SizeRule(8192, 16, 8192, min_row=2, wide_torch_rows=(2, 3, 9, 10),
                     nth_min_row=13, nth_int64=True, probe_rows=True),
    "median": SizeRule(512),
    "nanmedian": SizeRule(512),
    "kthvalue": SizeRule(512, 16, 1024, min_row=3),
    "unique": SizeRule(1024, 0),
    "quantile": SizeRule(0, 0),
    "nanquantile": SizeRule(0, 0),
}
#: the rules as shipped (SIZE_RULES may be updated from this machine's
#: `python -m kwker calibrate` measurements: kwker.thresholds)
DEFAULT_SIZE_RULES: Dict[str, SizeRule] = dict(SIZE_RULES)
# the cheap first check, read on every call
MIN_FAST_NUMEL: Dict[str, int] = {op: rule.min_numel for op, rule in SIZE_RULES.items()}


def row_shape_failure(op: str, numel: int, row: int, x=None) -> Optional[Condition]:
    """SMALL when this op's size rule sends rows of this shape (of tensor x)
    to torch.  (x's element size is read only for a row length the rule
    lists for 64-bit elements: every call runs this.)"""
    rule = SIZE_RULES[op]
    if row <= rule.short_row and numel < rule.min_numel_short:
        return SMALL
    if rule.max_row and row > rule.max_row:
        return SMALL
    if row < rule.min_row or (row in rule.wide_torch_rows and x is not None
                              and x.element_size() == 8):
        return SMALL
    return None


def topk_nth_failure(row: int, k: int, torch_order: bool, dtype: torch.dtype) -> Optional[Condition]:
    """For topk(sorted=False): SMALL where torch's nth_element branch (k > 1,
    k * 64 > row) is emulated in torch's order and the emulation was
    measured slower than torch: rows shorter than nth_min_row, and int64
    rows (nth_int64)."""
    if not torch_order or k < 2 or k * 64 <= row:
        return None
    rule = SIZE_RULES["topk"]
    if row < rule.nth_min_row or (rule.nth_int64 and dtype is torch.int64):
        return SMALL
    return None


# The ops whose result shows how equal elements are ordered (indices; a
# zero's sign or a NaN's payload among equal values): under
# install(ties="stable") the size rules do not send them to torch, whose
# answer would then be its own order, not the stable one that the fast path
# gives at every other size (dispatch.use_size_rules).  Their speed rules
# are a choice between two equal answers; under ties="stable" the answers
# differ, and the answer wins.
TIE_ORDER_OPS = frozenset({"sort", "argsort", "msort", "topk", "kthvalue"})


def topk_order(order: int) -> int:
    """The order topk's kernel is asked for: torch's with the probe of its
    rows (kwk_topk's KWK_ORDER_TORCH_PROBE) where the size rule has it."""
    if order == _native.ORDER_TORCH and SIZE_RULES["topk"].probe_rows:
        return _native.ORDER_TORCH_PROBE
    return order


# ------------------------------------------------------------------ checks
# Bound once: these run on every call.
_C = torch._C
_torch_function_mode = _C._is_torch_function_mode_enabled
_dispatch_modes = _C._len_torch_dispatch_stack
_functorch_active = _C._are_functorch_transforms_active
_tracing_state = _C._get_tracing_state
_grad_enabled = torch.is_grad_enabled
_Tensor = torch.Tensor
_strided = torch.strided
_LOADED = _native.available()
_FLUSHABLE = _native.FLUSHABLE_DTYPES
_denormals_flushed = _native.denormals_flushed


def context_failure() -> Optional[Condition]:
    """Global state that rules out the fast path whatever the arguments."""
    if not _LOADED:
        return NATIVE
    if (_torch_function_mode() or _dispatch_modes() or _functorch_active()
            or _tracing_state() is not None or _forward_ad._current_level >= 0):
        return NO_TRANSFORM
    return None


def tensor_failure(x, dtypes, grad_ok=False) -> Optional[Condition]:
    """The input tensor itself: plain, dense, CPU, no autograd (unless the
    caller attaches torch's backward: grad_ok), dtype, and no subnormal
    flushing where torch's comparisons would show it."""
    if type(x) is not _Tensor:
        return PLAIN_TENSOR
    if (not x.is_cpu or x.layout is not _strided or x.is_nested or x.is_neg()
            or x._is_zerotensor()):
        return CPU_DENSE
    if x.requires_grad and not grad_ok and _grad_enabled():
        return NO_GRAD
    dtype = x.dtype
    if dtype not in dtypes:
        return DTYPE
    if dtype in _FLUSHABLE and _denormals_flushed():
        return FLUSHED_DENORMALS
    return None


def torch_raises_unsigned_radix(x, descending: bool, flattened: bool = False) -> bool:
    """torch 2.13 routes 1-D ascending integer sorts of >= 32768 elements to
    fbgemm's radix sort, which has no uint16/32/64 instance and raises.
    flattened: the sort is of x.reshape(-1) (unique), which is 1-D."""
    return (x.dtype in _UNSIGNED_WIDE and (flattened or x.ndim == 1) and not descending
            and x.numel() >= 32768)


def torch_sort_is_stable(x, dim: int, descending: bool) -> bool:
    """Calls where torch.sort(stable=False) gives the stable order anyway:
    a stride-0 (expanded) sort dim is not sorted at all (indices arange), and
    1-D ascending integer sorts of >= 32768 elements use a radix sort."""
    if x.stride()[dim] == 0:  # (stride() parses no argument: half stride(dim)'s cost)
        return True
    return (x.ndim == 1 and not descending and x.numel() >= 32768
            and not x.dtype.is_floating_point and x.dtype is not torch.bool)


# --------------------------------------------------------------- frameworks
@dataclass(frozen=True)
class Framework:
    """How Kwker behaves inside a framework feature, under install() and
    for torch.ops.kwker, and the tests that exercise it (file::test)."""
    name: str
    under_install: str
    torch_ops: str
    tests: Tuple[str, ...]


FRAMEWORKS: Tuple[Framework, ...] = (
    Framework("autograd (inputs requiring grad)",
              "fast for sort/argsort/msort/topk/kthvalue/median(dim) with torch's own "
              "backward, bit-identical; median()/nanmedian() over all elements and "
              "quantile: torch (`no_grad`)",
              "hand-written autograd kernels; gradcheck and double backward",
              ("tests/test_dispatch.py::test_requires_grad_backward_matches",
               "tests/test_torch_ops.py::test_gradients")),
    Framework("forward-mode AD", "torch (`no_transform`)", "supported",
              ("tests/test_dispatch.py::test_forward_ad", "tests/test_torch_ops.py::test_gradients")),
    Framework("torch.func (vmap, grad)", "torch (`no_transform`)",
              "vmap rules, torch.func.grad",
              ("tests/test_dispatch.py::test_vmap", "tests/test_torch_ops.py::test_vmap",
               "tests/test_torch_ops.py::test_vmap_of_grad")),
    Framework("torch.compile", "compiles with no graph break; the graph holds torch's "
              "own ops (`no_transform` while tracing)",
              "fullgraph=True, dynamic shapes, Inductor",
              ("tests/test_torch_ops.py::test_compile_of_patched_torch_calls_has_no_graph_break",
               "tests/test_torch_ops.py::test_compile_fullgraph_dynamic")),
    Framework("torch.export / AOTInductor", "the exported graph holds torch's ops",
              "exported and AOTInductor-packaged; the package runs in a fresh process",
              ("tests/test_torch_ops.py::test_export", "tests/test_torch_ops.py::test_aoti_round_trip")),
    Framework("TorchScript", "torch.jit.script of code calling the patched functions works "
              "(scripted code calls aten)", "not registered for TorchScript",
              ("tests/test_patching.py::test_jit_script_while_installed",)),
    Framework("DataLoader workers (fork, spawn)", "installed in every worker by "
              "KWKER_INSTALL=1 (fork and spawn); fast path in workers", "-",
              ("tests/test_processes.py::test_dataloader_workers",)),
    Framework("torch.distributed (torchrun, gloo)", "installed in every rank by "
              "KWKER_INSTALL=1", "-",
              ("tests/test_processes.py::test_torchrun_two_ranks_all_gather",)),
    Framework("threads", "8 Python threads at once, install()/uninstall() racing with calls",
              "-", ("tests/test_patching.py::test_threads_concurrent_calls",
                    "tests/test_patching.py::test_install_uninstall_racing_with_calls")),
    Framework("tensor subclasses", "torch (`plain_tensor`)", "dispatched by torch",
              ("tests/test_dispatch.py::test_tensor_subclass",)),
    Framework("other devices (CUDA, meta, ...)", "torch (`cpu_dense`)",
              "torch's own ops for non-CPU tensors",
              ("tests/test_dispatch.py::test_meta_device",
               "tests/test_torch_ops.py::test_meta_tensors_have_torchs_shapes")),
)
