"""Two builds of the native module in one process, their kwk_topk (or,
with --op sort, kwk_sort; with --op short, short rows' sort, topk and
median) calls interleaved (tools/abtime.py): a kernel
change judged on a shared machine,
whose noise comes in phases longer than a process start, without timing
the builds minutes apart.  Each case's outputs must agree between builds.

    git stash && python setup.py -q build_ext --inplace && \
        cp kwker/_kwker_native.abi3.so /tmp/old.so && git stash pop
    python setup.py -q build_ext --inplace
    python tools/ab_builds.py /tmp/old.so kwker/_kwker_native.abi3.so [--target avx2] [--op sort|short]

Prints us per call (min of the rounds) and new / old; two copies of one
build read 0.95-1.05 on the Zen 5 machine here (session 62).  A case that
moves where the change cannot reach it, rerun with fresh copies of both
files: in session 66 one file's kwk_topk of 65536 float32 rows of 128 ran
1.8x slower than a byte-identical copy of that file, in every run of it
(the same code at the same offset: where the page cache put the file's
pages, it seems), and the copy ran as fast as the old build.  So each
build is loaded from --copies files (2 by default: the given one and a
fresh copy), its time is its best copy's, and copies that disagree are
shown beside the case."""
import argparse
import importlib.util
import os
import shutil
import sys
import tempfile

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from abtime import compare  # noqa: E402

from kwker._native import ORDER_STABLE, ORDER_TORCH  # noqa: E402
from kwker.bench import corpus  # noqa: E402
from kwker.ops._call import CODES  # noqa: E402


def load(path):
    """The cffi module at path, loaded beside any other copy (its own
    module object: extension modules are cached by file, not by name)."""
    spec = importlib.util.spec_from_file_location("_kwker_native", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.lib


def topk_call(lib, x, k, order, out):
    """kwk_topk of x's rows (contiguous 2-d), largest, sorted, into out."""
    rows, n = x.shape
    values, indices = out
    return lambda: lib.kwk_topk_addr(CODES[x.dtype], x.data_ptr(), rows, n, 1, n, 1, 0, k,
                                     values.data_ptr(), indices.data_ptr(), k, 1, 0, 1, 1, order)


def sort_call(lib, x, order, out):
    """kwk_sort of x's rows (contiguous 2-d), ascending: values and indices,
    or values only where out's indices are None."""
    rows, n = x.shape
    values, indices = out
    ip = indices.data_ptr() if indices is not None else 0
    return lambda: lib.kwk_sort_addr(CODES[x.dtype], x.data_ptr(), rows, n, 1, n, 1, 0,
                                     values.data_ptr(), ip, n, 1, 0, 0, order)


def random_rows(rows, n, dtype, g, int_bits=62):
    """rows x n: randn for a float dtype, else integers of int_bits bits either sign."""
    if dtype.is_floating_point:
        return torch.randn(rows, n, generator=g).to(dtype)
    return torch.randint(-(1 << int_bits), 1 << int_bits, (rows, n), generator=g)


def topk_outputs(k):
    return lambda x: (torch.empty(x.shape[0], k, dtype=x.dtype),
                      torch.empty(x.shape[0], k, dtype=torch.int64))


def sort_outputs(indexed=True):
    return lambda x: (torch.empty_like(x),
                      torch.empty(x.shape, dtype=torch.int64) if indexed else None)


def sorting(order):
    return lambda lib, x, out: sort_call(lib, x, order, out)


def topk_taking(k, order=ORDER_TORCH):
    return lambda lib, x, out: topk_call(lib, x, k, order, out)


def sort_cases():
    """The quicksort's base cases (rows of up to 512 keys) and the partitions
    above them, values only and with indices, 32- and 64-bit keys."""
    g = torch.Generator().manual_seed(4)
    shapes = [(4096, 64), (2048, 128), (1024, 256), (512, 512), (64, 1000), (64, 4096),
              (4, 65536), (1, 1 << 20)]
    for rows, n in shapes:
        for dtype in (torch.float32, torch.int64):
            x = random_rows(rows, n, dtype, g)
            tag = f"{str(dtype)[6:]} {rows}x{n}"
            number = 3 if x.numel() >= 1 << 20 else 5
            yield f"values {tag}", x, sorting(ORDER_TORCH), sort_outputs(False), number
            yield f"indexed {tag}", x, sorting(ORDER_TORCH), sort_outputs(), number
            yield f"stable {tag}", x, sorting(ORDER_STABLE), sort_outputs(), number


def median_call(lib, x, out):
    """kwk_median_dim of x's rows (contiguous 2-d): values and indices."""
    rows, n = x.shape
    values, indices = out
    return lambda: lib.kwk_median_dim_addr(CODES[x.dtype], x.data_ptr(), rows, n, 1, n, 1, 0,
                                           values.data_ptr(), indices.data_ptr(), 1, 0, 0)


def short_cases():
    """Short rows, 2^22..2^23 elements of them (beyond the caches: the rows
    stream from memory, where the kernels' per-row loads matter)."""
    g = torch.Generator().manual_seed(5)
    for n in (4, 7, 16):
        for dtype in (torch.float32, torch.int64):
            x = random_rows((1 << 22) // n, n, dtype, g, int_bits=40)
            yield f"sort {str(dtype)[6:]} rows of {n}", x, sorting(ORDER_TORCH), sort_outputs(), 2
    for n, k in ((8, 2), (64, 8), (128, 8), (256, 8)):
        for dtype in (torch.float32, torch.int64):
            x = random_rows((1 << 23) // n, n, dtype, g, int_bits=40)
            yield f"topk {str(dtype)[6:]} rows of {n} k={k}", x, topk_taking(k), topk_outputs(k), 2
    for n in (5, 9, 25):
        x = torch.randn((1 << 23) // n, n, generator=g)
        yield (f"median float32 rows of {n}", x, median_call,
               lambda x: (torch.empty(x.shape[0], dtype=x.dtype),
                          torch.empty(x.shape[0], dtype=torch.int64)), 2)


# Copies of one build whose times differ by more than this are flagged.
COPIES_DISAGREE = 1.15


def run(libs, cases, rounds):
    """Each case (name, x, make_call, make_out, number): every loaded file's
    calls on x into outputs of their own, checked to succeed and to agree,
    then timed interleaved (number calls a round).  libs maps "old", "new"
    and any further copies of either ("old#2", ...) to their modules; a
    build's time is the best of its copies', and copies that disagree by
    more than COPIES_DISAGREE are shown (see the module's docstring)."""
    for name, x, make_call, make_out, number in cases:
        outs = {tag: make_out(x) for tag in libs}
        calls = {tag: make_call(lib, x, outs[tag]) for tag, lib in libs.items()}
        for tag, call in calls.items():
            if call() != 0:
                sys.exit(f"{name}: the call failed in the {tag} build")
        same = all(a is None or torch.equal(a, b)
                   for tag in libs for a, b in zip(outs["old"], outs[tag]))
        best = compare(calls, number=number, rounds=rounds)
        build = {b: min(t for tag, t in best.items() if tag.split("#")[0] == b)
                 for b in ("old", "new")}
        spread = ""
        for b in ("old", "new"):
            times = [t for tag, t in best.items() if tag.split("#")[0] == b]
            if max(times) > COPIES_DISAGREE * min(times):
                spread += f"  {b}'s copies {' / '.join(f'{t:.1f}' for t in times)}"
        print(f"{name:38s} old {build['old']:9.1f} us  new {build['new']:9.1f} us  "
              f"new/old {build['new'] / build['old']:5.2f}{'' if same else '  OUTPUTS DIFFER'}"
              f"{spread}")


def load_copies(old, new, copies, directory):
    """{"old": module, "new": module, "old#2": ..., ...}: each file loaded,
    and copies - 1 fresh copies of each (written into directory)."""
    libs = {"old": load(old), "new": load(new)}
    for c in range(2, copies + 1):
        for tag, path in (("old", old), ("new", new)):
            copy = os.path.join(directory, f"{tag}{c}.so")
            shutil.copyfile(path, copy)
            libs[f"{tag}#{c}"] = load(copy)
    return libs


def topk_cases():
    """Long rows of each kind the topk kernels tell apart."""
    g = torch.Generator().manual_seed(3)
    warper = next(e for e in corpus.load_catalogue() if e.id.startswith("hf_topk_warper"))
    xw = corpus.make_input(warper)
    yield "hf_topk_warper 8x128256 k=50", xw, topk_taking(50), topk_outputs(50), 5
    yield ("hf_topk_warper 8x128256 k=50 stable", xw, topk_taking(50, ORDER_STABLE),
           topk_outputs(50), 5)
    for (rows, n), k in [((64, 65536), 48), ((64, 65536), 128), ((64, 65536), 256),
                         ((32, 128256), 100), ((4, 1 << 20), 128), ((16, 1 << 18), 256),
                         ((32, 32768), 40)]:
        yield (f"randn {rows}x{n} k={k}", torch.randn(rows, n, generator=g), topk_taking(k),
               topk_outputs(k), 5)
    rounded = torch.randn(32, 128256, generator=g).bfloat16().float()
    yield "bf16-rounded 32x128256 k=64", rounded, topk_taking(64), topk_outputs(64), 5


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--target", help="kwk_set_target for both builds (e.g. avx2)")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--op", choices=("topk", "sort", "short"), default="topk",
                        help="topk: long rows; sort: the quicksort's cases; short: short rows "
                        "streamed from memory (sort, topk, median)")
    parser.add_argument("--copies", type=int, default=2,
                        help="load each build from this many files (fresh copies beside the "
                        "given one); each build's time is its best copy's")
    args = parser.parse_args()
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as directory:
        libs = load_copies(args.old, args.new, max(1, args.copies), directory)
        if args.target:
            for lib in libs.values():
                if lib.kwk_set_target(args.target.encode()) != 0:
                    sys.exit(f"target {args.target} not available here")
        run(libs, {"topk": topk_cases, "sort": sort_cases, "short": short_cases}[args.op](),
            args.rounds)


if __name__ == "__main__":
    main()
