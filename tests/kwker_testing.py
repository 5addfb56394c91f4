"""Helpers shared by Kwker's tests (imported by conftest.py and the test
modules; a distinct name so that no other conftest.py can shadow it).

Every check compares Kwker against the torch originals captured here, at
import time, before anything is patched: the reference is always what torch
itself returns, never a value taken from Kwker.

Hypothesis: the "kwker" profile keeps the default run short; set
KWKER_HYPOTHESIS_EXAMPLES=N (e.g. 2000) for a deep run, or
KWKER_HYPOTHESIS_PROFILE=long for the reliability job (LONG_EXAMPLES per
property test, over a million cases in all; README "Reliability jobs").
KWKER_TEST_SEED=N reseeds every generated input of the non-hypothesis tests.
"""
import os

import pytest
import torch
from hypothesis import HealthCheck, settings

import kwker
from kwker import _native, patching, support

# ----------------------------------------------------------------- settings

HYPOTHESIS_EXAMPLES = int(os.environ.get("KWKER_HYPOTHESIS_EXAMPLES", "150"))
TEST_SEED = int(os.environ.get("KWKER_TEST_SEED", "0"))
settings.register_profile(
    "kwker",
    max_examples=HYPOTHESIS_EXAMPLES,
    deadline=None,
    database=None,  # the suite runs with -p no:cacheprovider: write nothing
    print_blob=True,
    # the fixtures only install kwker, which holds for every example
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.function_scoped_fixture],
)
# test_properties.py has 7 property tests: 150_000 examples each is over 10^6
# cases in all (KWKER_HYPOTHESIS_EXAMPLES overrides it here too)
LONG_EXAMPLES = int(os.environ.get("KWKER_HYPOTHESIS_EXAMPLES", "150000"))
settings.register_profile(
    "long",
    parent=settings.get_profile("kwker"),
    max_examples=LONG_EXAMPLES,
    # fresh random draws in every run: repeated long runs cover new cases
    derandomize=False,
)
settings.load_profile(os.environ.get("KWKER_HYPOTHESIS_PROFILE", "kwker"))

# ------------------------------------------------------- torch's originals

OPS = ("sort", "argsort", "msort", "topk", "median", "nanmedian", "kthvalue",
       "unique", "quantile", "nanquantile")
assert not kwker.is_installed(), "kwker must not be installed when the tests start"
assert set(OPS) == set(patching.ALL_OPS)
#: torch.<op> as torch defines it
ORIG = {op: getattr(torch, op) for op in OPS}
#: torch.Tensor.<op> as torch defines it (method descriptors of TensorBase,
#: except unique, which is Python code on torch.Tensor)
ORIG_METHOD = {op: getattr(torch.Tensor, op) for op in OPS}

SORT_DTYPES = (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
               torch.uint16, torch.uint32, torch.uint64, torch.float16, torch.bfloat16,
               torch.float32, torch.float64)
SELECT_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                 torch.float16, torch.bfloat16, torch.float32, torch.float64)
FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

_BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def has_target(name: str) -> bool:
    """Whether this CPU and build can run the native kernel set `name`."""
    try:
        _native.set_target(name)
    except ValueError:
        return False
    finally:
        _native.set_target("auto")
    return True


TARGET_NAMES = ("avx512", "avx2", "portable")


def best_target() -> str:
    """The kernel set "auto" picks: the first of TARGET_NAMES this machine runs."""
    return next(name for name in TARGET_NAMES if name == "portable" or has_target(name))


def native_target_params(every=False):
    """Kernel sets as pytest parameters, skipped where they cannot run:
    portable and the best SIMD target, or with `every` all three.  The
    suite's per-target tests take the first (CI's time: avx2 and avx512
    compile the same kernel sources and differ in the AVX-512 paths, which
    the native tests check on every target; test_native_targets.py takes
    all three)."""
    if every:
        names = ("avx2", "avx512")
    else:
        names = ("avx512",) if has_target("avx512") else ("avx2",)
    return ["portable"] + [
        pytest.param(name, marks=pytest.mark.skipif(not has_target(name),
                                                    reason=f"no {name} on this CPU/build"))
        for name in names]


# ------------------------------------------------------------- comparisons

def bits(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bit patterns as integers of the same width (NaN payloads,
    NaN signs and -0.0 all count)."""
    if t.dtype.is_complex:
        return bits(torch.view_as_real(t.resolve_conj()))
    return t.view(_BITS[t.element_size()])


def describe(t):
    return f"{t.dtype} shape={tuple(t.shape)} stride={t.stride()}"


def assert_tensor_same(ref: torch.Tensor, got: torch.Tensor, what="tensor"):
    assert isinstance(got, torch.Tensor), f"{what}: got {type(got)}"
    assert type(got) is type(ref), f"{what}: type {type(got)} != {type(ref)}"
    assert got.dtype == ref.dtype, f"{what}: dtype {got.dtype} != {ref.dtype}"
    assert got.shape == ref.shape, f"{what}: shape {tuple(got.shape)} != {tuple(ref.shape)}"
    assert got.device == ref.device, f"{what}: device {got.device} != {ref.device}"
    if ref.layout is not torch.strided:
        assert got.layout == ref.layout
        ref, got = ref.to_dense(), got.to_dense()
    elif ref.device.type != "meta":
        assert got.stride() == ref.stride(), f"{what}: stride {got.stride()} != {ref.stride()}"
    if ref.device.type == "meta":
        return
    if not torch.equal(bits(ref), bits(got)):
        diff = (bits(ref) != bits(got)).nonzero()
        first = tuple(diff[0].tolist()) if len(diff) else ()
        raise AssertionError(
            f"{what}: {len(diff)} elements differ in bits ({describe(ref)}); first at {first}: "
            f"torch {ref[first] if first else ref} vs kwker {got[first] if first else got}")


def assert_same(ref, got, what="result"):
    """Bit-for-bit equality of torch's and Kwker's results: the same result
    type (torch.return_types.*), and for every tensor the same dtype, shape,
    strides and bits."""
    if isinstance(ref, torch.Tensor):
        assert_tensor_same(ref, got, what)
    elif isinstance(ref, (tuple, list)):
        assert type(got) is type(ref), f"{what}: type {type(got)} != {type(ref)}"
        assert len(got) == len(ref), f"{what}: {len(got)} items != {len(ref)}"
        for i, (r, g) in enumerate(zip(ref, got)):
            assert_same(r, g, f"{what}[{i}]")
    else:
        assert type(got) is type(ref) and got == ref, f"{what}: {got!r} != {ref!r}"


class InputGuard:
    """Remembers a tensor's bits (and those of the storage it views) to check
    that an op left its input alone."""

    def __init__(self, x):
        self.x = x
        self.base = x._base if isinstance(x, torch.Tensor) and x._base is not None else x
        self.ok = isinstance(x, torch.Tensor) and x.layout is torch.strided \
            and x.device.type == "cpu" and not x.is_nested and not x.is_conj()
        if self.ok:
            self.bits = bits(self.base).clone()
            self.meta = (x.shape, x.stride(), x.storage_offset(), x.dtype, x.requires_grad)

    def check(self):
        if not self.ok:
            return
        x = self.x
        assert (x.shape, x.stride(), x.storage_offset(), x.dtype, x.requires_grad) == self.meta
        assert torch.equal(bits(self.base), self.bits), "the input was modified"


def run(fn, *args, **kwargs):
    """('ok', result) or ('raise', exception)."""
    try:
        return "ok", fn(*args, **kwargs)
    except Exception as exc:  # noqa: BLE001 - compared below
        return "raise", exc


def fast_count(op):
    return kwker.stats().get(op, {}).get("fast", 0)


def fallbacks(op):
    return kwker.stats().get(op, {}).get("fallback", {})


def compare(op, x, *args, method=False, fast=True, reference=None, **kwargs):
    """Call torch's original and the installed op (torch.<op> or x.<op>) on
    the same arguments; assert identical results, or identical exception
    type and message; assert the input was not modified; and check how
    Kwker served the call: fast=True (the kernel ran once), a condition key
    (that fallback was recorded, once), a set of keys (only those fallbacks,
    any number of times) or None (do not check).

    Kwker must be installed by the caller.  `reference` replaces torch's
    original when torch is known to be wrong (see test_median_expanded).
    """
    assert kwker.is_installed()
    patched = getattr(x, op) if method else getattr(torch, op)
    if method:
        original = ORIG_METHOD[op].__get__(x)
        call_args = args
    else:
        original = ORIG[op]
        call_args = (x,) + args
    guard = InputGuard(x)
    if reference is None:
        ref = run(original, *call_args, **kwargs)
    else:
        ref = run(reference, *call_args, **kwargs)
    guard.check()
    kwker.reset_stats()
    got = run(patched, *call_args, **kwargs)
    guard.check()
    snapshot = kwker.stats()
    if ref[0] == "raise":
        assert got[0] == "raise", f"torch raised {ref[1]!r}, kwker returned {got[1]!r}"
        assert type(got[1]) is type(ref[1]), f"{type(got[1])} != {type(ref[1])}: {got[1]}"
        assert str(got[1]) == str(ref[1])
    else:
        if got[0] == "raise":
            raise AssertionError(f"kwker raised, torch did not: {got[1]!r}") from got[1]
        assert_same(ref[1], got[1])
    entry = snapshot.get(op, {"fast": 0, "fallback": {}})
    if fast is True:
        assert entry == {"fast": 1, "fallback": {}}, f"expected the fast path: {snapshot}"
    elif isinstance(fast, str):
        assert entry["fast"] == 0 and entry["fallback"] == {fast: 1}, \
            f"expected one fallback {fast!r}: {snapshot}"
    elif isinstance(fast, (set, frozenset)):
        # torch may call the (patched) op again from __torch_function__
        assert entry["fast"] == 0 and set(entry["fallback"]) == fast, \
            f"expected only fallbacks {fast}: {snapshot}"
    return got[1] if got[0] == "ok" else got[1]


# ------------------------------------------------------------ input makers

def _nan_payloads(dtype):
    """Several NaN bit patterns (signs, quiet and signalling, payloads)."""
    pats = {
        torch.float16: [0x7E00, -0x0200, 0x7C01, 0x7D23, -0x0123],  # 0xFE00, 0xFEDD
        torch.bfloat16: [0x7FC0, -0x0040, 0x7F81, 0x7FA5, -0x0011],
        torch.float32: [0x7FC00000, -0x00400000, 0x7F800001, 0x7FC12345, -0x00012345],
        torch.float64: [0x7FF8000000000000, -0x0008000000000000, 0x7FF0000000000001,
                        0x7FF8DEAD00000000, -0x0000000000BEEF],
    }[dtype]
    t = torch.tensor(pats, dtype=_BITS[torch.empty((), dtype=dtype).element_size()])
    out = t.view(dtype)
    assert torch.isnan(out).all()
    return out


def _int_range(dtype):
    if dtype == torch.bool:
        return 0, 1
    info = torch.iinfo(dtype)
    return info.min, info.max


def random_full(shape, dtype, gen):
    """Values spread over the dtype's range (few ties)."""
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    if dtype.is_floating_point:
        x = torch.randn(shape, generator=gen, dtype=torch.float64) * 100
        return x.to(dtype)
    lo, hi = _int_range(dtype)
    if dtype in (torch.uint64, torch.int64):
        # randint cannot span 64 bits: build from two halves
        a = torch.randint(0, 2 ** 32, shape, generator=gen, dtype=torch.int64)
        b = torch.randint(0, 2 ** 32, shape, generator=gen, dtype=torch.int64)
        return ((a << 32) | b).view(dtype) if dtype == torch.int64 else \
            ((a << 32) | b).view(torch.uint64)
    if dtype == torch.uint32:
        return torch.randint(0, 2 ** 32, shape, generator=gen, dtype=torch.int64).to(torch.uint32)
    if dtype == torch.uint16:
        return torch.randint(0, 2 ** 16, shape, generator=gen, dtype=torch.int64).to(torch.uint16)
    return torch.randint(lo, hi + 1, shape, generator=gen, dtype=torch.int64).to(dtype)


def make_values(kind, shape, dtype, gen):
    """A contiguous tensor of `shape` and `dtype` with values of `kind`:
    random, ties, bf16ties, equal, sorted, reversed, nan, special."""
    shape = tuple(shape)
    numel = 1
    for s in shape:
        numel *= s
    fl = dtype.is_floating_point
    if kind == "random":
        return random_full(shape, dtype, gen)
    if kind == "ties":
        if dtype == torch.bool:
            return torch.randint(0, 2, shape, generator=gen).bool()
        lo = 0 if (not fl and not dtype.is_signed) else -3
        x = torch.randint(lo, 4, shape, generator=gen, dtype=torch.int64)
        return x.to(dtype)
    if kind == "bf16ties":
        if not fl:
            return make_values("ties", shape, dtype, gen)
        x = torch.randn(shape, generator=gen).to(torch.bfloat16)
        x = (x * 4).round() / 4  # a few dozen distinct values, with +-0.0
        x = torch.where(torch.rand(shape, generator=gen) < 0.1, -x, x)
        return x.to(dtype)
    if kind == "equal":
        v = random_full((1,), dtype, gen)
        return v.expand(shape).contiguous() if numel else v.reshape(-1)[:0].reshape(shape)
    if kind in ("sorted", "reversed"):
        x = make_values("ties" if numel > 64 else "random", shape, dtype, gen)
        if x.ndim == 0 or numel == 0:
            return x
        rows = x.reshape(1, -1) if x.ndim == 1 else x  # 2-D: never torch's radix path
        v = ORIG["sort"](rows, dim=-1, descending=(kind == "reversed"), stable=True).values
        return v.reshape(shape).contiguous()
    if kind == "nan":
        if not fl:
            return make_values("extremes", shape, dtype, gen)
        x = make_values("bf16ties", shape, dtype, gen).reshape(-1)
        nans = _nan_payloads(dtype)
        pick = torch.randint(0, len(nans), (numel,), generator=gen)
        mask = torch.rand(numel, generator=gen) < 0.4
        x = torch.where(mask, nans[pick], x)
        return x.reshape(shape).contiguous()
    if kind in ("special", "extremes"):
        if fl:
            info = torch.finfo(dtype)
            pool = torch.cat([
                torch.tensor([float("inf"), -float("inf"), 0.0, -0.0, 1.0, -1.0, info.max,
                              -info.max, info.tiny, -info.tiny, info.tiny / 4], dtype=dtype),
                _nan_payloads(dtype)])
        elif dtype == torch.bool:
            return torch.randint(0, 2, shape, generator=gen).bool()
        else:
            lo, hi = _int_range(dtype)
            vals = sorted({lo, lo + 1, hi, hi - 1, 0, 1, (lo + hi) // 2})
            if dtype == torch.uint64:
                pool = torch.tensor([v - 2 ** 64 if v >= 2 ** 63 else v for v in vals],
                                    dtype=torch.int64).view(torch.uint64)
            else:
                pool = torch.tensor(vals, dtype=torch.int64).to(dtype) \
                    if dtype not in (torch.uint32,) else torch.tensor(vals).to(torch.uint32)
        pick = torch.randint(0, len(pool), (numel,), generator=gen)
        return pool[pick].reshape(shape).contiguous()
    raise ValueError(kind)


VALUE_KINDS = ("random", "ties", "bf16ties", "equal", "sorted", "reversed", "nan", "special")


def layout(x, kind, dim=-1, gen=None):
    """A view with the same logical values as the contiguous `x`, laid out as
    `kind`: contiguous, transposed (reversed dim order), step (every other
    element of a larger buffer filled with junk), offset (storage offset 1),
    permuted (a 4-D-style permutation that cannot be collapsed)."""
    if kind == "contiguous" or x.ndim == 0:
        return x
    if kind == "transposed":
        perm = list(range(x.ndim))[::-1]
        return x.permute(perm).contiguous().permute(perm)
    if kind == "step":
        d = dim % x.ndim
        shape = list(x.shape)
        shape[d] *= 2
        big = torch.zeros(shape, dtype=x.dtype)
        if x.dtype.is_floating_point:
            big.fill_(float("nan"))
        else:
            big.fill_(1)
        idx = [slice(None)] * x.ndim
        idx[d] = slice(1, None, 2)
        big[tuple(idx)] = x
        return big[tuple(idx)]
    if kind == "offset":
        flat = torch.zeros(x.numel() + 3, dtype=x.dtype)
        flat[1:1 + x.numel()] = x.reshape(-1)
        return flat[1:1 + x.numel()].view(x.shape)
    if kind == "permuted":
        if x.ndim != 4:
            return layout(x, "transposed")
        # stored in dim order (1, 3, 0, 2): for every dim, the dims before or
        # after it cannot be walked with one stride
        order = [1, 3, 0, 2]
        inv = [order.index(i) for i in range(4)]
        return x.permute(order).contiguous().permute(inv)
    raise ValueError(kind)


LAYOUTS = ("contiguous", "transposed", "step", "offset", "permuted")


def kernel_thresholds():
    """kwker's per-op crossover sizes (below them calls go to torch), or {}."""
    return getattr(support, "MIN_FAST_NUMEL", {})
