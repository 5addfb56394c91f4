"""Start-up hook: KWKER_INSTALL=1 (or a comma list of op names) installs
Kwker in any Python process, as soon as torch has been imported.

kwker_install.pth, at the top of site-packages, runs one cheap check of the
environment variable in every interpreter start; only when it is set is this
module imported.  It stays light: it imports neither torch nor kwker (nor
wrapt); it puts a finder on sys.meta_path that lets torch import normally
and then calls kwker.install().  Child processes (DataLoader workers under
spawn, torchrun ranks) inherit the variable and so the behaviour.
install() takes its other settings from KWKER_TIES, KWKER_USE_FAST,
KWKER_STRICT, KWKER_VERIFY, KWKER_TIMING and KWKER_LOG (kwker.policy); a
bad value gives one warning and leaves torch unchanged.
"""
import importlib.machinery
import os
import sys

ENV_VAR = "KWKER_INSTALL"
_ALL = {"1", "true", "yes", "on", "all"}


def requested_ops(value: str):
    """None for every op, else the list of op names in the variable."""
    value = value.strip()
    if value.lower() in _ALL:
        return None
    return [name.strip() for name in value.split(",") if name.strip()]


def _install_now() -> None:
    try:
        import kwker
        kwker.install(requested_ops(os.environ.get(ENV_VAR, "1")))
    except Exception as exc:  # never break the user's program at start-up
        import warnings
        warnings.warn(f"{ENV_VAR} is set but kwker.install() failed: {exc!r}; "
                      "torch runs unchanged", RuntimeWarning, stacklevel=2)


class _AfterTorchImport:
    """Meta-path finder that finds torch the normal way, then runs install()
    once torch's module body has finished executing."""

    def __init__(self):
        self._finding = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch" or self._finding:
            return None
        self._finding = True
        try:
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        finally:
            self._finding = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader_exec = spec.loader.exec_module
        finder = self

        def exec_module(module):
            loader_exec(module)
            if finder in sys.meta_path:
                sys.meta_path.remove(finder)
            _install_now()

        spec.loader.exec_module = exec_module
        return spec


def activate() -> None:
    """Called from kwker_install.pth when KWKER_INSTALL is set.  Idempotent
    (the .pth can run twice when lib64 links to lib)."""
    try:
        if any(isinstance(f, _AfterTorchImport) for f in sys.meta_path):
            return
        if "torch" in sys.modules:
            _install_now()
        else:
            sys.meta_path.insert(0, _AfterTorchImport())
    except Exception:  # site.py would print a traceback at every start-up
        pass
