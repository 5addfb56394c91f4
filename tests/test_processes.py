"""KWKER_INSTALL reaches every process a job starts: the start-up hook
itself, DataLoader workers (fork and spawn), torch.multiprocessing.spawn
children, torchrun ranks; and fork after install is safe.  Each worker
checks that Kwker is installed, that its call took the fast path, and that
the result is bit-identical to torch's own function."""
import os
import re
import socket
import subprocess
import sys
import textwrap

import pytest

# shared by every program below: one checked sort, run in the process that
# calls it
CHECK = textwrap.dedent("""
    import os, torch

    def data(seed):
        return torch.randn(16, 300, generator=torch.Generator().manual_seed(seed))

    def checked_sort(seed):
        \"\"\"[installed, took the fast path, equal to torch's, pid].\"\"\"
        import kwker
        from kwker import patching
        x = data(seed)
        kwker.reset_stats()
        values, indices = torch.sort(x, 1)
        fast = kwker.stats().get("sort", {}).get("fast", 0) == 1
        ref = patching.original("sort")(x, 1)
        same = torch.equal(values, ref.values) and torch.equal(indices, ref.indices)
        return [kwker.is_installed(), fast, same, os.getpid()]
""")

DATALOADER = CHECK + textwrap.dedent("""
    import sys
    from torch.utils.data import DataLoader, Dataset

    class Sorts(Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return torch.tensor(checked_sort(i))

    def fork_after_install():
        import multiprocessing
        torch.set_num_threads(2)
        torch.sort(torch.randn(64, 5000), 1)   # torch's thread pool has run
        torch.sort(data(0), 1)                 # and Kwker's kernel
        with multiprocessing.get_context("fork").Pool(2) as pool:
            return pool.map(checked_sort, range(4))

    if __name__ == "__main__":
        context = sys.argv[1]
        loader = DataLoader(Sorts(), batch_size=1, num_workers=2,
                            multiprocessing_context=context)
        rows = [row[0].tolist() for row in loader]
        if context == "fork":
            rows += fork_after_install()
        assert all(r[:3] == [1, 1, 1] for r in rows), rows
        assert os.getpid() not in {r[3] for r in rows}, rows   # ran in workers
        print("OK", len(rows))
""")

MP_SPAWN = CHECK + textwrap.dedent("""
    import torch.multiprocessing as mp

    def child(rank, out):
        with open(f"{out}.{rank}", "w") as f:
            f.write(repr(checked_sort(rank)))

    if __name__ == "__main__":
        import sys
        mp.spawn(child, args=(sys.argv[1],), nprocs=2, join=True)
        rows = [eval(open(f"{sys.argv[1]}.{rank}").read()) for rank in range(2)]
        assert all(r[:3] == [True, True, True] for r in rows), rows
        assert os.getpid() not in {r[3] for r in rows}, rows
        print("OK", len(rows))
""")

TORCHRUN = CHECK + textwrap.dedent("""
    import torch.distributed as dist
    from kwker import patching

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    installed, fast, _, _ = checked_sort(rank)
    values, indices = torch.sort(data(rank), 1)
    all_values = [torch.empty_like(values) for _ in range(world)]
    all_indices = [torch.empty_like(indices) for _ in range(world)]
    dist.all_gather(all_values, values)
    dist.all_gather(all_indices, indices)
    for r in range(world):
        ref = patching.original("sort")(data(r), 1)
        assert torch.equal(all_values[r], ref.values), r
        assert torch.equal(all_indices[r], ref.indices), r
    assert installed and fast, (installed, fast)
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank} OK")
""")


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("KWKER_")}
    env.update(OMP_NUM_THREADS="1", **extra)
    return env


def _run(args, cwd, timeout=300, **env):
    return subprocess.run([sys.executable] + args, cwd=cwd, capture_output=True, text=True,
                          env=_env(**env), timeout=timeout)


def test_hook_with_the_variable_unset_imports_nothing(tmp_path):
    probe = "import sys; print(sorted(m for m in ('torch', 'kwker', 'kwker_install', " \
            "'wrapt') if m in sys.modules))"
    run = _run(["-c", probe], tmp_path)
    assert run.returncode == 0 and run.stdout.strip() == "[]", run.stderr
    # set: only the hook module, until torch is imported
    run = _run(["-c", probe], tmp_path, KWKER_INSTALL="1")
    assert run.stdout.strip() == "['kwker_install']", run.stdout + run.stderr


def test_hook_installs_with_the_environments_settings(tmp_path):
    program = ("import torch, kwker; i = kwker.info(); "
               "print(sorted(i['installed_ops']), i['strict'], i['ties'], i['use_fast'])")
    run = _run(["-c", program], tmp_path, KWKER_INSTALL="topk,sort", KWKER_STRICT="1",
               KWKER_TIES="stable", KWKER_USE_FAST="1")
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "['sort', 'topk'] True stable True"
    # a bad setting: one warning, torch unchanged, the program runs
    run = _run(["-c", "import torch, kwker; print(kwker.is_installed())"], tmp_path,
               KWKER_INSTALL="1", KWKER_VERIFY="sometimes")
    assert run.returncode == 0 and run.stdout.strip() == "False"
    assert "KWKER_INSTALL is set but kwker.install() failed" in run.stderr


@pytest.mark.parametrize("context,launch", [("fork", "env"), ("spawn", "env"),
                                            ("spawn", "python -m kwker")])
def test_dataloader_workers(tmp_path, context, launch):
    """Under spawn the workers re-import the main script: also when
    python -m kwker ran it."""
    (tmp_path / "loader.py").write_text(DATALOADER)
    if launch == "env":
        run = _run(["loader.py", context], tmp_path, KWKER_INSTALL="1")
    else:
        run = _run(["-m", "kwker", "loader.py", context], tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.split() == ["OK", "8" if context == "fork" else "4"]


def test_multiprocessing_spawn_children(tmp_path):
    (tmp_path / "children.py").write_text(MP_SPAWN)
    run = _run(["children.py", str(tmp_path / "out")], tmp_path, KWKER_INSTALL="1")
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.split() == ["OK", "2"]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_torchrun_two_ranks_all_gather(tmp_path):
    (tmp_path / "ranks.py").write_text(TORCHRUN)
    run = _run(["-m", "torch.distributed.run", "--nnodes=1", "--nproc_per_node=2",
                "--master_addr=127.0.0.1", f"--master_port={_free_port()}", "ranks.py"],
               tmp_path, KWKER_INSTALL="1", GLOO_SOCKET_IFNAME="lo")
    assert run.returncode == 0, run.stdout + run.stderr
    # the two ranks share stdout: their lines may interleave mid-line
    assert sorted(re.findall(r"rank \d OK", run.stdout)) == ["rank 0 OK", "rank 1 OK"], run.stdout
