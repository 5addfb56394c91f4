"""What the worker processes of test_processes.py run.  A module of its own
that imports neither kwker_testing nor the tests: a spawned worker imports
it fresh, with Kwker already installed by the start-up hook."""
import os

import torch
from torch.utils.data import Dataset

import kwker

# (op, args) for every op with a kernel
CALLS = [("sort", (1,)), ("argsort", (0, True)), ("msort", ()), ("topk", (6,)),
         ("kthvalue", (5, 1)), ("median", (1,)), ("median", ()), ("nanmedian", (0,)),
         ("nanmedian", ())]


def make_input(seed):
    """Ties, -0.0 and NaN: results that show the order of equal elements.
    The shape passes every op's size rule (spawned workers keep the real
    thresholds): kthvalue needs 4096 elements in rows of at most 127."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-4, 5, (2048, 40), generator=g).float() / 2
    x = torch.where(torch.rand(x.shape, generator=g) < 0.1, -x, x)  # -0.0 among the 0.0
    if seed % 2:
        x = torch.where(torch.rand(x.shape, generator=g) < 0.05, float("nan"), x)
    return x


def patched_results(x):
    return [getattr(torch, op)(x, *args) for op, args in CALLS]


def fast_calls():
    return sum(entry["fast"] for entry in kwker.stats().values())


class OpsDataset(Dataset):
    """Item i: the (patched) ops' results on input i, and how the worker ran
    them (pid, fast calls, whether Kwker was installed there)."""

    def __len__(self):
        return 6

    def __getitem__(self, i):
        kwker.reset_stats()
        results = patched_results(make_input(i))
        return {"results": results, "pid": os.getpid(), "fast": fast_calls(),
                "installed": kwker.is_installed()}


def collate_one(batch):
    (item,) = batch
    return item
