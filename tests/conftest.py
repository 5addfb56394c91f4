"""pytest fixtures and hooks for Kwker's tests; the helpers live in
kwker_testing.py."""
import os
import tempfile

# The suite does not depend on the caller's environment: no install()
# defaults from KWKER_* variables, and no calibration file from the user's
# cache (a directory that does not exist).
for _var in ("KWKER_TIES", "KWKER_USE_FAST", "KWKER_STRICT", "KWKER_VERIFY", "KWKER_TIMING",
             "KWKER_LOG"):
    os.environ.pop(_var, None)
os.environ["KWKER_CACHE_DIR"] = os.path.join(tempfile.gettempdir(),
                                             f"kwker-tests-no-calibration-{os.getpid()}")

import pytest  # noqa: E402

import kwker
from kwker import support
from kwker import _native
from kwker_testing import ORIG, ORIG_METHOD, TEST_SEED, kernel_thresholds, native_target_params
import torch


# ----------------------------------------------------------------- fixtures

NATIVE_TARGETS = native_target_params()


@pytest.fixture(autouse=True, scope="session")
def _thread_pool_started_unflushed():
    """torch's thread pool started before any test flushes subnormals:
    torch.set_flush_denormal sets the calling thread's flags, and threads
    the pool starts while they are set inherit them for good, so later
    tests' torch references would flush where Kwker does not."""
    torch.ones(1 << 22).sum()
    yield


@pytest.fixture(params=NATIVE_TARGETS)
def target(request):
    """Each native kernel set in turn (test_native_targets.py has its own,
    which also installs Kwker)."""
    _native.set_target(request.param)
    yield request.param
    _native.set_target("auto")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "real_thresholds: keep kwker's small-input crossover (MIN_FAST_NUMEL); "
        "other tests set it to 0 so that the kernels run at every size")


@pytest.fixture(autouse=True)
def _kernels_at_every_size(request, monkeypatch):
    """Exactness tests must reach the kernels on tiny inputs too: unless a
    test is marked real_thresholds, the small-input crossover is 0."""
    if request.node.get_closest_marker("real_thresholds") is None:
        for op in list(kernel_thresholds()):
            monkeypatch.setitem(kernel_thresholds(), op, 0)
        for op in list(getattr(support, "SIZE_RULES", {})):
            monkeypatch.setitem(support.SIZE_RULES, op, support.SizeRule(0))
    yield


@pytest.fixture(autouse=True)
def _restore_torch():
    """Every test starts and ends with torch unpatched and the native target
    on auto, whatever it did."""
    kwker.uninstall()
    yield
    kwker.uninstall()
    from kwker import dispatch
    dispatch.Policy.order = _native.ORDER_TORCH
    if _native.available():
        _native.set_target("auto")
    assert torch.sort is ORIG["sort"] and torch.Tensor.sort is ORIG_METHOD["sort"]


@pytest.fixture
def hash_spy(monkeypatch):
    """A list with one entry per unique() call that tried the hashing pass
    (kwker.ops.unique): True where it answered, False where it declined and
    the input was sorted.  The bitmap pass is switched off meanwhile, so that
    integer inputs of a short range reach the hashing pass too."""
    from kwker.ops import unique as unique_ops
    monkeypatch.setattr(unique_ops, "_DENSE_DTYPES", frozenset())
    return _spy_on(monkeypatch, unique_ops, "_unique_by_hash")


@pytest.fixture
def dense_spy(monkeypatch):
    """A list with one entry per unique() call that tried the bitmap pass
    (kwker.ops.unique): True where it answered, False where it declined."""
    from kwker.ops import unique as unique_ops
    return _spy_on(monkeypatch, unique_ops, "_unique_dense")


def _spy_on(monkeypatch, module, name):
    taken = []
    real = getattr(module, name)

    def spy(*args):
        result = real(*args)
        taken.append(result is not None)
        return result
    monkeypatch.setattr(module, name, spy)
    return taken


@pytest.fixture
def kw():
    """Kwker installed (ties="torch"), counters reset."""
    assert kwker.install() is True
    kwker.reset_stats()
    yield kwker
    kwker.uninstall()


@pytest.fixture
def kw_stable():
    """Kwker installed with ties="stable"."""
    assert kwker.install(ties="stable") is True
    kwker.reset_stats()
    yield kwker
    kwker.uninstall()


@pytest.fixture
def gen(request):
    """A torch.Generator seeded from the test's id (reproducible per test;
    KWKER_TEST_SEED=N draws other values for a deeper run)."""
    import zlib
    g = torch.Generator()
    g.manual_seed(zlib.crc32(request.node.nodeid.encode()) ^ TEST_SEED)
    return g
