"""Instructions a native kernel executes on corpus inputs, for this tree and
for another commit: a repeatable measure where timings on the shared
machines move by 20-40% between runs minutes apart.

    python tools/kernel_icount.py ID [ID ...] [--rev REV] [--order torch|stable]
                                  [--target avx2|avx512|portable]

For each corpus entry whose id contains an ID (topk and sort/argsort calls
along the last dim), the input is dumped, a C harness calls kwk_topk /
kwk_sort once on it (as the entry's call, contiguous), and callgrind counts
the instructions inside the kernel call; the output's hash is printed
beside, so a change that should not alter results can be checked too.
With --rev the same runs on a `git worktree` of REV, side by side.

valgrind's CPUID hides AVX2 from the dispatcher: KWKER_TARGET names the
target instead.  Counts do not see cache misses or mispredicted branches:
use them for CPU-bound kernels and refactors, and interleaved timings
(tools/abtime.py) for a speed claim.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from kwker import _native  # noqa: E402
from kwker.bench import corpus  # noqa: E402

# Only the kernel call is counted (callgrind's --toggle-collect on run_call).
HARNESS = r"""
#include "kwker.h"
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
static uint64_t hash(const void *p, size_t n, uint64_t h)
{
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) { h ^= c[i]; h *= 1099511628211ull; }
    return h;
}
__attribute__((noinline)) int run_call(int op, int dt, const void *x, int64_t rows, int64_t n,
                                       int64_t k, void *vals, int64_t *idx, int flag, int sorted,
                                       int order)
{
    if (op == 0)
        return kwk_topk(dt, x, rows, n, 1, n, 1, 1, k, vals, idx, k, 1, 1, flag, sorted, order);
    /* argsort (op 2) asks for no values, as kwker.ops.sorting does */
    return kwk_sort(dt, x, rows, n, 1, n, 1, 1, op == 2 ? NULL : vals, idx, n, 1, 1, flag, order);
}
int main(int argc, char **argv)
{
    /* file op dtype es rows n k flag sorted order */
    if (argc != 11) return 2;
    const int op = atoi(argv[2]), dt = atoi(argv[3]), es = atoi(argv[4]);
    const int64_t rows = atoll(argv[5]), n = atoll(argv[6]), k = atoll(argv[7]);
    const int64_t out_n = op == 0 ? k : n;
    void *x = malloc((size_t)(es * rows * n) + 1), *vals = malloc((size_t)(es * rows * out_n) + 1);
    int64_t *idx = malloc((size_t)(8 * rows * out_n) + 8);
    FILE *f = fopen(argv[1], "rb");
    if (!f || fread(x, (size_t)es, (size_t)(rows * n), f) != (size_t)(rows * n)) return 3;
    fclose(f);
    if (op == 2) for (int64_t i = 0; i < es * rows * out_n; ++i) ((char *)vals)[i] = 0;
    const int rc = run_call(op, dt, x, rows, n, k, vals, idx, atoi(argv[8]), atoi(argv[9]),
                            atoi(argv[10]));
    uint64_t h = hash(vals, (size_t)(es * rows * out_n), 1469598103934665603ull);
    h = hash(idx, (size_t)(8 * rows * out_n), h);
    printf("rc %d target %s hash %016llx\n", rc, kwk_target(), (unsigned long long)h);
    return rc != 0;
}
"""

DTYPES = _native.DTYPE_CODES  # kwker.h's dtype codes


def cflags(tree):
    """The flags `tree`'s native/build_ffi.py compiles the library with."""
    sys.path.insert(0, os.path.join(tree, "native"))
    try:
        import build_ffi
        return list(build_ffi.compile_args())
    finally:
        sys.path.pop(0)
        sys.modules.pop("build_ffi", None)


def build(tree, work, name):
    src = os.path.join(work, "harness.c")
    with open(src, "w") as f:
        f.write(HARNESS)
    exe = os.path.join(work, name)
    native = os.path.join(tree, "native")
    sources = [os.path.join(native, "src", "dispatch.c")] + sorted(
        os.path.join(native, "src", "targets", t)
        for t in os.listdir(os.path.join(native, "src", "targets")) if t.endswith(".c"))
    subprocess.run(["gcc", *cflags(tree), "-I" + os.path.join(native, "include"), "-o", exe, src,
                    *sources, "-lm"], check=True)
    return exe


def calls(ids, order):
    for e in corpus.load_catalogue():
        if e.op not in ("topk", "sort", "argsort") or not any(i in e.id for i in ids):
            continue
        x = corpus.make_input(e)
        a = dict(e.args)
        if a.get("dim", -1) % x.dim() != x.dim() - 1 or x.dtype not in DTYPES:
            print(f"{e.id}: not a last-dim call of a dtype the harness knows; skipped")
            continue
        x = x.contiguous()
        n = x.shape[-1]
        rows = x.numel() // n
        if e.op == "topk":
            args = (0, a["k"], int(a.get("largest", True)), int(a.get("sorted", True)))
        else:
            args = (1 if e.op == "sort" else 2, 0, int(a.get("descending", False)), 1)
        stable = order == "stable" or (e.op != "topk" and a.get("stable", False))
        yield e.id, x, rows, n, args, 0 if stable else 1


def count(exe, path, x, rows, n, args, order, target):
    op, k, flag, sorted_ = args
    cmd = ["valgrind", "--tool=callgrind", "--toggle-collect=run_call",
           "--callgrind-out-file=/dev/null", exe, path, str(op), str(DTYPES[x.dtype]),
           str(x.element_size()), str(rows), str(n), str(k), str(flag), str(sorted_), str(order)]
    r = subprocess.run(cmd, capture_output=True, text=True,
                       env={**os.environ, "KWKER_TARGET": target})
    refs = re.search(r"I\s+refs:\s+([\d,]+)", r.stderr)
    line = r.stdout.strip() or r.stderr.strip().splitlines()[-1]
    return (int(refs.group(1).replace(",", "")) if refs else None), line


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("ids", nargs="+")
    p.add_argument("--rev", help="another commit to count beside this tree")
    p.add_argument("--order", choices=("torch", "stable"), default="torch")
    p.add_argument("--target", default="avx2")
    o = p.parse_args()
    work = tempfile.mkdtemp(prefix="kwk_icount_")
    trees = [("tree", ROOT)]
    try:
        if o.rev:
            wt = os.path.join(work, "rev")
            subprocess.run(["git", "-C", ROOT, "worktree", "add", "-q", "--detach", wt, o.rev],
                           check=True)
            trees.append((o.rev, wt))
        exes = [(label, build(tree, work, "h_%d" % i)) for i, (label, tree) in enumerate(trees)]
        for eid, x, rows, n, args, order in calls(o.ids, o.order):
            path = os.path.join(work, "input.bin")
            x.view(-1).view(torch.uint8).numpy().tofile(path)
            for label, exe in exes:
                ir, line = count(exe, path, x, rows, n, args, order, o.target)
                shown = f"{ir:,}" if ir is not None else "?"
                print(f"{eid:45s} {label:10s} {shown:>14} Ir  {line}")
    finally:
        if o.rev:
            subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force",
                            os.path.join(work, "rev")], check=False)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
