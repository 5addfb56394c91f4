"""Where the fast path's fixed cost goes: an op's installed call against
its entry, its kwker.ops function and the checks, on one small input."""
import sys

import torch

import kwker
from kwker import _native, dispatch, support
from kwker.ops import selection, sorting
from kwker.ops._call import CODES, lib

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from abtime import show  # noqa: E402

torch.set_num_threads(1)
x = torch.randint(0, 100, (64,))
m = torch.randn(20)
v, i = torch.empty_like(x), torch.empty_like(x, dtype=torch.int64)
xp, vp, ip = x.data_ptr(), v.data_ptr(), i.data_ptr()
kernel = lib.kwk_sort_addr
dispatch.use_size_rules(False)
orig_sort, orig_median = torch.sort, torch.median
kwker.install(use_fast=True)
cases = {
    "torch.sort (installed)": lambda: torch.sort(x),
    "sort_entry": lambda: dispatch.sort_entry(orig_sort, None, (x,), {}),
    "sorting.sort": lambda: sorting.sort(x, 0, False, 0),
    "kernel": lambda: kernel(CODES[x.dtype], xp, 1, 64, 1, 64, 1, 1, vp, ip, 64, 1, 1, False, 0),
    "context_failure": support.context_failure,
    "tensor_failure": lambda: support.tensor_failure(x, dispatch._SORT_DTYPES, True),
    "parse_sort": lambda: dispatch._parse_sort((x,), {}),
    "rows_failure": lambda: dispatch._rows_failure("sort", x, 0),
    "sort_is_stable": lambda: support.torch_sort_is_stable(x, 0, False),
    "unsigned_radix": lambda: support.torch_raises_unsigned_radix(x, False),
    "torch.median (installed)": lambda: torch.median(m),
    "median_entry": lambda: dispatch.median_entry(orig_median, None, (m,), {}),
    "median_all": lambda: selection.median_all(m, False),
}
show(cases, number=5000, rounds=int(sys.argv[1]) if len(sys.argv) > 1 else 15)
