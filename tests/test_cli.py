"""python -m kwker: running a program with Kwker installed (as plain python
runs it), its options, the commands, and python -m kwker ab.  Subprocess
tests: each run imports torch, so several checks share one run."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from kwker import ab
from kwker_testing import TARGET_NAMES

# what python tells a program about itself; printed as JSON, compared
# between `python ...` and `python -m kwker ...` (torch is not imported by
# plain python runs: they stay cheap)
SEMANTICS = textwrap.dedent("""
    import json, os, sys
    main = sys.modules["__main__"]
    print(json.dumps({
        "name": __name__, "argv": sys.argv, "path0": sys.path[0],
        "file": globals().get("__file__"), "main_is_module": main.__dict__ is globals(),
        "spec": None if __spec__ is None else __spec__.name,
    }))
    kwker = sys.modules.get("kwker")
    print("installed", bool(kwker and kwker.is_installed()), file=sys.stderr)

    def inner():
        raise ValueError("boom")

    def outer():
        inner()

    if os.environ.get("END_WITH") == "raise":
        outer()
    sys.exit(int(os.environ.get("END_WITH", "0")))
""")


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("KWKER_")}
    env["PYTHONHASHSEED"] = "0"
    env.update(extra)
    return env


def _python(args, cwd, **env):
    return subprocess.run([sys.executable] + args, cwd=cwd, capture_output=True, text=True,
                          env=_env(**env), timeout=300)


def _kwker(args, cwd, **env):
    return _python(["-m", "kwker"] + args, cwd, **env)


@pytest.fixture
def programs(tmp_path):
    (tmp_path / "semantics.py").write_text(SEMANTICS)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "tool.py").write_text(SEMANTICS)
    return tmp_path


@pytest.mark.parametrize("args,end", [
    (["semantics.py", "a", "-b", "--c"], "5"),
    (["-m", "pkg.tool", "x"], "raise"),
    (["-c", SEMANTICS, "y", "-z"], "raise"),
])
def test_programs_run_as_python_runs_them(programs, args, end):
    """sys.argv, __name__, __file__, sys.path[0], the exit status and the
    traceback of an uncaught exception are python's own."""
    plain = _python(args, programs, END_WITH=end)
    kw = _kwker(args, programs, END_WITH=end)
    assert kw.returncode == plain.returncode == (1 if end == "raise" else int(end)), kw.stderr
    assert json.loads(kw.stdout) == json.loads(plain.stdout)
    assert plain.stderr.startswith("installed False")
    # the same traceback: no kwker or runpy frames
    assert kw.stderr == plain.stderr.replace("installed False", "installed True")
    if end == "raise":
        assert "ValueError: boom" in kw.stderr


def test_missing_script(programs, capsys, monkeypatch):
    from kwker import run
    plain = _python(["nope.py"], programs)
    monkeypatch.chdir(programs)
    with pytest.raises(SystemExit) as exit_:
        run.run("script", "nope.py", [])
    assert exit_.value.code == plain.returncode == 2
    err = capsys.readouterr().err
    assert err.split(":", 1)[1] == plain.stderr.split(":", 1)[1]  # after the interpreter name


WORK = textwrap.dedent("""
    import subprocess, sys, torch, kwker
    print(sys.argv)
    x = torch.randn(40, 300)
    torch.sort(x, 1)
    x.topk(3)
    print(kwker.info()["ties"], kwker.info()["installed_ops"])
    child = subprocess.run([sys.executable, "-c",
        "import torch, kwker; i = kwker.info(); "
        "print(i['ties'], i['strict'], i['installed_ops'])"],
        capture_output=True, text=True)
    print("child", child.stdout.strip() + child.stderr.strip())
    if sys.argv[1:] == ["fallback"]:
        torch.median(x.requires_grad_())
""")


def test_options_report_and_child_processes(programs):
    """--report, --ties, --ops; the settings reach a child process through
    the start-up hook; a script named like a command runs after --."""
    (programs / "info").write_text(WORK)
    run = _kwker(["--report", "--ties=stable", "--ops", "sort,topk", "--", "info", "q"],
                 programs)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == ["['info', 'q']", "stable ['sort', 'topk']",
                                       "child stable False ['sort', 'topk']"]
    report = run.stderr[run.stderr.index("kwker: calls to patched functions"):]
    rows = {line.split()[0]: line.split() for line in report.splitlines()[3:-1]}
    assert rows["sort"][1:3] == ["1", "0"] and rows["topk"][1:3] == ["1", "0"]
    assert "fast ms" in report and "total: 2 fast, 0 to torch" in report


def test_strict_option(programs):
    (programs / "work.py").write_text(WORK)
    strict = _kwker(["--strict", "work.py", "fallback"], programs)
    assert strict.returncode == 1
    assert "child torch True" in strict.stdout
    assert "KwkerFallbackError: kwker strict mode: torch.median fell back to torch: no_grad" \
        in strict.stderr


@pytest.mark.parametrize("args", [
    ["--bogus", "semantics.py"], ["--ties"], ["--strict"], ["-m"], [],
    ["--report=1", "x.py"], ["--ties", "random", "x.py"], ["--ops", "nope", "x.py"],
    ["--strict", "--use-fast", "0", "x.py"], ["--verify=maybe", "x.py"],
])
def test_usage_errors_change_nothing(args, capsys, monkeypatch):
    from kwker import run
    import kwker
    monkeypatch.delenv("KWKER_INSTALL", raising=False)
    before = dict(os.environ)
    assert run.main(args) == 2
    assert "python -m kwker: " in capsys.readouterr().err
    assert dict(os.environ) == before and not kwker.is_installed()


def test_commands_still_work(capsys):
    from kwker.__main__ import main
    assert main(["info", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["target"] in TARGET_NAMES
    assert main(["compat", "--check"]) == 0
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for word in ("ab", "calibrate", "compat", "--report", "--strict", "-- info"):
        assert word in out, word


# ---------------------------------------------------------------------- ab

AB_PROGRAM = textwrap.dedent("""
    import os, sys
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "random":
        print(os.urandom(8).hex())
        sys.exit(0)
    import torch
    torch.manual_seed(0)
    x = torch.randn(64, 300)
    values, indices = torch.sort(x, dim=1)
    top = torch.topk(x.flatten(), 40)
    print(float(values.sum()), int(indices.sum()), top.indices[:5].tolist())
    installed = type(torch.sort).__name__ == "KwkerFunctionWrapper"
    if mode == "differ" and installed:
        values[3, 7] = float("nan")
        print("extra")
    if mode == "strides" and installed:
        values = values.t().contiguous().t()   # same values, other strides
    out = os.environ.get("KWKER_AB_OUTDIR", ".")
    torch.save({"values": values, "indices": indices, "top": top.values},
               os.path.join(out, "result.pt"))
    with open(os.path.join(out, "note.txt"), "w") as f:
        f.write("done")
""")


@pytest.fixture
def ab_program(tmp_path, monkeypatch):
    path = tmp_path / "prog.py"
    path.write_text(AB_PROGRAM)
    for var in [v for v in os.environ if v.startswith("KWKER_")]:
        monkeypatch.delenv(var)
    return str(path)


def test_ab_identical_outputs(ab_program, capsys):
    """Tensors saved with other strides still match, bit for bit."""
    assert ab.main(["--repeats", "1", "--ties", "stable", ab_program, "strides"]) == 0
    out = capsys.readouterr().out
    assert "-m kwker --ties stable -- " in out and "runs: 1 each" in out
    assert "stdout: identical" in out and "speed-up" in out
    assert "files in KWKER_AB_OUTDIR: 2 identical (1 compared tensor by tensor)" in out
    assert out.rstrip().endswith("RESULT: outputs identical")


def test_ab_different_outputs(ab_program, capsys):
    assert ab.run_ab("script", ab_program, ["differ"], repeats=1) == 1
    out = capsys.readouterr().out
    assert "stdout differs" in out
    assert "result.pt['values']: 1 of 19200 elements differ, first at (3, 7)" in out
    assert out.rstrip().endswith("RESULT: outputs differ")


def test_ab_nondeterministic_program(ab_program, capsys):
    assert ab.run_ab("script", ab_program, ["random"], repeats=2) == 3
    assert "not deterministic" in capsys.readouterr().out


def test_ab_compares_nested_objects_bitwise():
    import torch
    nan = torch.tensor([float("nan")])
    assert ab.same_objects({"a": [nan, 1]}, {"a": [nan.clone(), 1]}) is None
    assert "1 of 1" in ab.same_objects({"a": [nan]}, {"a": [-nan]})
    assert "keys" in ab.same_objects({"a": 1}, {"b": 1})
    assert "length" in ab.same_objects([1], [1, 2])
    assert ab.same_objects((1, "x"), (1, "y")) == "[1]: 'x' != 'y'"
