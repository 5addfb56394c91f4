"""python -m kwker ab [options] SCRIPT|-m MODULE|-c CODE [ARGS...]

Runs the program without Kwker (plain python, KWKER_INSTALL removed) and
with it (python -m kwker), alternately, --repeats times each, in
subprocesses with the same environment, working directory and a fixed
PYTHONHASHSEED.  Reports the median wall time of each, the speed-up, and
whether the outputs matched:

  stdout   byte for byte;
  files    every run gets its own empty directory in KWKER_AB_OUTDIR: a
           program that saves what it computes there (torch.save(t,
           os.path.join(os.environ.get("KWKER_AB_OUTDIR", "."), "out.pt")))
           has those files compared too: byte for byte, or, for files
           torch.load reads, tensor by tensor (dtype, shape and every bit;
           strides may differ).

Exit status: 0 outputs identical; 1 they differ; 3 the program failed or its
output differs between runs without Kwker (nothing to compare against);
2 usage error.  stderr is not compared (warnings, timings).
"""
import argparse
import io
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import List, Optional

OUTDIR_VAR = "KWKER_AB_OUTDIR"
HASH_SEED = "0"
_FILE_LIMIT = 20  # differences listed


class Run:
    def __init__(self, variant, seconds, proc, outdir):
        self.variant = variant
        self.seconds = seconds
        self.returncode = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.outdir = outdir


def _files(root: str) -> List[str]:
    found = []
    for dirpath, _, names in os.walk(root):
        for name in names:
            found.append(os.path.relpath(os.path.join(dirpath, name), root))
    return sorted(found)


def _load(data: bytes):
    import torch
    try:
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception:
        # the program's own pickles, written by the run just made
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)


def same_objects(a, b, where="") -> Optional[str]:
    """None if a and b hold the same values (tensors bitwise), else where
    they first differ."""
    import torch
    from kwker.observe import difference
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            other = b if isinstance(a, torch.Tensor) else a
            return f"{where}: a tensor and a {type(other).__name__}"
        if a.device != b.device or a.layout != b.layout:
            return f"{where}: device/layout differ"
        problem = difference(a.detach().cpu(), b.detach().cpu())
        return None if problem is None else f"{where}: {problem}"
    if type(a) is not type(b):
        return f"{where}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, dict):
        if list(a) != list(b):
            return f"{where}: keys differ"
        for key in a:
            problem = same_objects(a[key], b[key], f"{where}[{key!r}]")
            if problem:
                return problem
        return None
    if isinstance(a, (list, tuple)):
        if len(a) != len(b):
            return f"{where}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            problem = same_objects(x, y, f"{where}[{i}]")
            if problem:
                return problem
        return None
    try:
        equal = a == b
        equal = bool(equal)
    except Exception:
        return f"{where}: cannot compare {type(a).__name__} values"
    return None if equal else f"{where}: {a!r} != {b!r}"


def compare_dirs(ref: str, other: str):
    """(problems, files compared, of which as tensors)."""
    ref_files, other_files = _files(ref), _files(other)
    problems = []
    for name in sorted(set(ref_files) ^ set(other_files)):
        problems.append(f"{name}: written by only one run")
    loaded = 0
    for name in sorted(set(ref_files) & set(other_files)):
        with open(os.path.join(ref, name), "rb") as f:
            a = f.read()
        with open(os.path.join(other, name), "rb") as f:
            b = f.read()
        if a == b:
            continue
        try:
            objects = _load(a), _load(b)
        except Exception:
            problems.append(f"{name}: bytes differ")
            continue
        loaded += 1
        problem = same_objects(*objects, where=name)
        if problem:
            problems.append(problem)
    return problems, len(set(ref_files) & set(other_files)), loaded


def _commands(kind, target, args, kwker_options):
    program = {"script": [target], "module": ["-m", target], "code": ["-c", target]}[kind]
    off = [sys.executable] + program + list(args)
    on = [sys.executable, "-m", "kwker"] + list(kwker_options) + \
        (["--"] if kind == "script" else []) + program + list(args)
    return {"off": off, "on": on}


def _env(variant, outdir):
    env = dict(os.environ)
    env.setdefault("PYTHONHASHSEED", HASH_SEED)
    env[OUTDIR_VAR] = outdir
    if variant == "off":
        env.pop("KWKER_INSTALL", None)  # the start-up hook stays off
    return env


def run_ab(kind, target, args, repeats=3, kwker_options=(), timeout=None, keep=False):
    commands = _commands(kind, target, args, kwker_options)
    base = tempfile.mkdtemp(prefix="kwker-ab-")
    runs = {"off": [], "on": []}
    try:
        for i in range(repeats):
            for variant in (("off", "on") if i % 2 == 0 else ("on", "off")):
                outdir = os.path.join(base, f"{variant}-{i}")
                os.makedirs(outdir)
                start = time.perf_counter()
                proc = subprocess.run(commands[variant], env=_env(variant, outdir),
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      timeout=timeout)
                runs[variant].append(Run(variant, time.perf_counter() - start, proc, outdir))
        return _verdict(runs, commands)
    finally:
        if keep:
            print(f"run directories kept in {base}", file=sys.stderr)
        else:
            shutil.rmtree(base, ignore_errors=True)


def _tail(data: bytes, lines=15) -> str:
    return "\n".join(data.decode(errors="replace").splitlines()[-lines:])


def _verdict(runs, commands) -> int:
    off, on = runs["off"], runs["on"]
    t_off = statistics.median(r.seconds for r in off)
    t_on = statistics.median(r.seconds for r in on)
    print(f"without kwker: {' '.join(commands['off'])}")
    print(f"with kwker:    {' '.join(commands['on'])}")
    print(f"runs: {len(off)} each, interleaved; PYTHONHASHSEED="
          f"{os.environ.get('PYTHONHASHSEED', HASH_SEED)}")
    print(f"wall time (median): without {t_off:.3f} s, with {t_on:.3f} s; "
          f"speed-up {t_off / t_on:.2f}x")
    print(f"  without: {', '.join(f'{r.seconds:.3f}' for r in off)}")
    print(f"  with:    {', '.join(f'{r.seconds:.3f}' for r in on)}")

    failed = [r for r in off + on if r.returncode != 0]
    if failed:
        for r in failed[:2]:
            print(f"run {'with' if r.variant == 'on' else 'without'} kwker exited with "
                  f"{r.returncode}; its stderr ends:\n{_tail(r.stderr)}")
        codes_off = {r.returncode for r in off}
        codes_on = {r.returncode for r in on}
        if codes_off != codes_on:
            print("RESULT: exit status differs with kwker")
            return 1
        print("RESULT: the program failed; nothing compared")
        return 3

    ref = off[0]
    baseline_problems = [p for r in off[1:] for p in compare_dirs(ref.outdir, r.outdir)[0]]
    if any(r.stdout != ref.stdout for r in off[1:]) or baseline_problems:
        print("RESULT: the output differs between runs without kwker (the program is not "
              "deterministic); nothing to compare against")
        for p in baseline_problems[:_FILE_LIMIT]:
            print(f"  {p}")
        return 3

    differ = False
    for r in on:
        if r.stdout != ref.stdout:
            differ = True
            print(f"stdout differs ({len(ref.stdout)} bytes without, {len(r.stdout)} with); "
                  f"first difference at byte {_first_difference(ref.stdout, r.stdout)}")
            break
    else:
        print(f"stdout: identical ({len(ref.stdout)} bytes)")
    problems, compared, loaded = [], 0, 0
    for r in on:
        problems, compared, loaded = compare_dirs(ref.outdir, r.outdir)
        if problems:
            break
    if problems:
        differ = True
        print(f"files in {OUTDIR_VAR} differ:")
        for p in problems[:_FILE_LIMIT]:
            print(f"  {p}")
    else:
        print(f"files in {OUTDIR_VAR}: {compared} identical"
              + (f" ({loaded} compared tensor by tensor)" if loaded else ""))
    print("RESULT: outputs differ" if differ else "RESULT: outputs identical")
    return 1 if differ else 0


def _first_difference(a: bytes, b: bytes) -> int:
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b))


def main(argv=None) -> int:
    from kwker import run
    parser = argparse.ArgumentParser(
        prog="python -m kwker ab", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="python -m kwker ab [--repeats N] [--timeout S] [--keep] [kwker options] "
              "SCRIPT|-m MODULE|-c CODE [ARGS...]")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each (default 3)")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per run")
    parser.add_argument("--keep", action="store_true", help="keep the runs' output directories")
    # ab's own options come first; the rest is python -m kwker's command line
    own, rest = [], list(sys.argv[2:] if argv is None else argv)
    while rest and rest[0].split("=")[0] in ("--repeats", "--timeout", "--keep", "-h",
                                             "--help"):
        arg = rest.pop(0)
        own.append(arg)
        if arg in ("--repeats", "--timeout") and rest:
            own.append(rest.pop(0))
    args = parser.parse_args(own)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    try:
        command = run.parse(rest)
    except run.UsageError as exc:
        parser.error(str(exc))
    return run_ab(command.kind, command.target, command.args, args.repeats, command.options,
                  args.timeout, args.keep)
