"""python -m kwker [options] SCRIPT|-m MODULE|-c CODE [ARGS]: run a program
with Kwker installed, as `python SCRIPT ARGS` would run it (sys.argv,
__main__, sys.path[0], exit status and tracebacks).

The options also go into the environment (KWKER_INSTALL, KWKER_TIES, ...),
so the processes the program starts (DataLoader workers, spawn children,
torchrun ranks) install Kwker the same way through the start-up hook.
"""
import atexit
import builtins
import io
import os
import runpy
import sys
import types
import zipfile
from dataclasses import dataclass

USAGE = """\
usage: python -m kwker [options] SCRIPT [ARGS...]
       python -m kwker [options] -m MODULE [ARGS...]
       python -m kwker [options] -c CODE [ARGS...]
       python -m kwker [options] -- SCRIPT [ARGS...]   (a script named like a command)

options (before the program):
  --ops a,b            patch only these ops (default: all)
  --ties torch|stable  tie order (default torch: bit-identical to torch)
  --use-fast auto|1|0  auto (default): measured thresholds; 1: fast path at every
                       size; 0: always torch (still counted)
  --strict             a call that goes to torch raises kwker.KwkerFallbackError
  --verify[=raise|warn]  every fast call also runs torch and compares bitwise
  --report             print the per-op table (calls, reasons, times) to stderr at exit
  --log                log every call to stderr (the "kwker" logger at DEBUG)
"""

# option -> (environment variable, takes a value)
_OPTIONS = {
    "--ops": ("KWKER_INSTALL", True),
    "--ties": ("KWKER_TIES", True),
    "--use-fast": ("KWKER_USE_FAST", True),
    "--strict": ("KWKER_STRICT", False),
    "--verify": ("KWKER_VERIFY", False),
    "--log": ("KWKER_LOG", False),
    "--report": (None, False),
}


class UsageError(Exception):
    pass


@dataclass
class Command:
    env: dict       # environment variables the options set
    report: bool
    kind: str       # "script", "module" or "code"
    target: str     # the script, module name or code
    args: list      # the program's arguments
    options: list   # the option words as given


def parse(argv) -> Command:
    env = {}
    report = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            i += 1
            break
        if arg in ("-m", "-c") or not arg.startswith("-"):
            break
        name, _, value = arg.partition("=")
        if name not in _OPTIONS:
            raise UsageError(f"unknown option {arg!r}")
        var, takes_value = _OPTIONS[name]
        if takes_value and not value:
            if i + 1 >= len(argv):
                raise UsageError(f"{name} needs a value")
            i += 1
            value = argv[i]
        elif not takes_value:
            if value and name != "--verify":
                raise UsageError(f"{name} takes no value")
            value = value or ("raise" if name == "--verify" else "1")
        if name == "--report":
            report = True
        else:
            env[var] = value
        i += 1
    options = [a for a in argv[:i] if a != "--"]
    rest = argv[i:]
    if not rest:
        raise UsageError("no program to run")
    if rest[0] in ("-m", "-c") and (i == 0 or argv[i - 1] != "--"):
        if len(rest) < 2:
            raise UsageError(f"argument expected for {rest[0]}")
        kind = "module" if rest[0] == "-m" else "code"
        return Command(env, report, kind, rest[1], rest[2:], options)
    return Command(env, report, "script", rest[0], rest[1:], options)


def _print_report_at_exit(pid):
    if os.getpid() != pid:  # a forked child that exits through atexit
        return
    import kwker
    kwker.report(file=sys.stderr)


def _user_traceback(tb, kind):
    """The traceback as python shows it: without this module's frames, and
    without runpy's except under -m (where python shows them too)."""
    ours = (__name__,) if kind == "module" else (__name__, "runpy")
    while tb is not None and tb.tb_frame.f_globals.get("__name__") in ours:
        tb = tb.tb_next
    return tb


def _exec_as_main(source, filename, **attributes) -> None:
    """Run `source` as the __main__ module, as python does for a script or
    -c: the module stays sys.modules["__main__"] afterwards (atexit handlers
    and multiprocessing read it)."""
    code = compile(source, filename, "exec", dont_inherit=True)
    main = types.ModuleType("__main__")
    main.__dict__.update(__builtins__=builtins, __spec__=None, __package__=None, **attributes)
    sys.modules["__main__"] = main
    exec(code, main.__dict__)


def run(kind: str, target: str, args) -> None:
    """Run the program in this process (exceptions propagate)."""
    if kind == "module":
        sys.argv = [target] + list(args)  # replaced by the module's file, as python -m does
        run_as_main = getattr(runpy, "_run_module_as_main", None)
        if run_as_main is None:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
            return
        # python -m's own code path (so tracebacks show the same frames); it
        # runs the module in sys.modules["__main__"], which must be fresh
        sys.modules["__main__"] = types.ModuleType("__main__")
        run_as_main(target, alter_argv=True)
        return
    if kind == "code":
        sys.argv = ["-c"] + list(args)
        sys.path[0] = ""  # as python -c has it
        _exec_as_main(target, "<string>")
        return
    path = os.path.abspath(target)  # python gives the script an absolute __file__
    if not os.path.exists(path):
        print(f"{sys.executable}: can't open file {path!r}: "
              f"[Errno 2] No such file or directory", file=sys.stderr)
        raise SystemExit(2)
    sys.argv = [target] + list(args)
    sys.path[0] = os.path.dirname(os.path.realpath(path))
    if os.path.isdir(path) or zipfile.is_zipfile(path):  # a __main__.py inside
        runpy.run_path(path, run_name="__main__")
        return
    with io.open_code(path) as f:
        source = f.read()
    _exec_as_main(source, path, __file__=path, __cached__=None)


def _checked(command: Command):
    """(ops, environment) for the program; UsageError for bad option
    values, before anything is changed."""
    import kwker_install
    from kwker import patching, policy
    environ = dict(os.environ)
    environ.update(command.env)
    environ.setdefault("KWKER_INSTALL", "1")
    ops = kwker_install.requested_ops(environ["KWKER_INSTALL"])
    unknown = [op for op in ops or () if op not in patching.PATCH_TABLE]
    if unknown:
        raise UsageError(f"unknown op(s) {unknown} in --ops/KWKER_INSTALL; "
                         f"choose from {list(patching.ALL_OPS)}")
    try:
        policy.resolve(environ)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return ops, environ


def main(argv) -> int:
    try:
        command = parse(argv)
        ops, environ = _checked(command)
    except UsageError as exc:
        print(f"python -m kwker: {exc}\n\n{USAGE}", file=sys.stderr)
        return 2
    # the program's children inherit the settings through the start-up hook
    os.environ.update(environ)
    import kwker
    kwker.install(ops, timing=True if command.report else None)
    if command.report:
        atexit.register(_print_report_at_exit, os.getpid())
    try:
        run(command.kind, command.target, command.args)
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as exc:
        tb = _user_traceback(exc.__traceback__, command.kind)
        sys.excepthook(type(exc), exc.with_traceback(tb), tb)
        return 1
    return 0
