"""This machine's crossover sizes: the calibration cache file (written by
python -m kwker calibrate, read by install(use_fast="auto"))."""
import json
import os
import warnings

import pytest
import torch

import kwker
from kwker import calibrate, support, thresholds
from kwker_testing import compare, make_values


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache directory, and the size tables restored afterwards."""
    monkeypatch.setenv(thresholds.CACHE_ENV_VAR, str(tmp_path))
    monkeypatch.setattr(thresholds, "_warned", set())
    for op in support.SIZE_RULES:
        monkeypatch.setitem(support.SIZE_RULES, op, support.SIZE_RULES[op])
        monkeypatch.setitem(support.MIN_FAST_NUMEL, op, support.MIN_FAST_NUMEL[op])
    return tmp_path


def test_cache_path_is_versioned_and_per_user(cache, monkeypatch):
    path = thresholds.cache_path()
    assert os.path.dirname(path) == str(cache)
    assert os.path.basename(path).startswith(f"thresholds-{kwker.__version__}-")
    monkeypatch.delenv(thresholds.CACHE_ENV_VAR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache / "xdg"))
    assert thresholds.cache_path().startswith(str(cache / "xdg" / "kwker") + os.sep)


def test_no_file_changes_nothing(cache):
    before = dict(support.SIZE_RULES)
    assert thresholds.load() is None and not thresholds.load_calibration()
    assert support.SIZE_RULES == before


@pytest.mark.real_thresholds
def test_install_auto_loads_the_calibration(cache, gen):
    x = make_values("random", (1, 300), torch.float32, gen)  # below the shipped sort rule
    kwker.install()
    compare("sort", x, fast="small")
    path = thresholds.save({"sort": 256, "topk": 100000})
    assert json.load(open(path))["torch"] == torch.__version__
    kwker.install()
    assert support.MIN_FAST_NUMEL["sort"] == 256 and support.SIZE_RULES["sort"].min_numel == 256
    # only min_numel changes: the row-shape rules stay as shipped
    shipped = support.DEFAULT_SIZE_RULES["sort"]
    assert support.SIZE_RULES["sort"].min_row == shipped.min_row
    assert support.MIN_FAST_NUMEL["topk"] == 100000
    compare("sort", x)
    compare("topk", make_values("random", (8, 4000), torch.float32, gen), 3, fast="small")
    # use_fast=True does not read it; the tables are untouched
    kwker.install(use_fast=True)
    assert support.MIN_FAST_NUMEL["sort"] == 256


@pytest.mark.parametrize("content,why", [
    ("{not json", "corrupt"),
    ('{"format": 99}', "corrupt"),
    (None, "stale"),   # measured with another torch
    ('{"format": 1}', "stale"),
])
def test_unusable_file_is_ignored_with_one_warning(cache, content, why):
    path = thresholds.save({"sort": 256})
    if content is None:
        data = json.load(open(path))
        data["torch"] = "1.0.0"
        content = json.dumps(data)
    with open(path, "w") as f:
        f.write(content)
    before = dict(support.MIN_FAST_NUMEL)
    with pytest.warns(kwker.KwkerWarning, match=why):
        assert kwker.install() is True
    assert support.MIN_FAST_NUMEL == before
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per file and process
        kwker.install()


def test_bad_counts_are_corrupt(cache):
    path = thresholds.save({"sort": 256})
    data = json.load(open(path))
    for bad in ({"sort": -1}, {"sort": "256"}, {"nope": 3}, [1, 2]):
        data["min_numel"] = bad
        with open(path, "w") as f:
            json.dump(data, f)
        thresholds._warned.clear()
        with pytest.warns(kwker.KwkerWarning, match="corrupt"):
            assert thresholds.load() is None


def test_calibrate_command_measures_and_saves(cache, capsys):
    """A real (tiny) calibration run: the file it writes is what install()
    then uses."""
    assert calibrate.main(["--ops", "sort,topk", "--sizes", "64,4096", "--repeats", "1",
                           "--min-time", "0.001"]) == 0
    out = capsys.readouterr().out
    assert "saved" in out
    data = json.load(open(thresholds.cache_path()))
    assert set(data["min_numel"]) == {"sort", "topk"}
    for op, n in data["min_numel"].items():
        assert n in (64, 4096, 8192), (op, n)  # a measured size, or twice the largest
        assert len(data["details"]["us"][op]) == 2
    assert thresholds.load() == data["min_numel"]


def test_calibrate_rejects_unknown_ops(cache):
    with pytest.raises(SystemExit):
        calibrate.main(["--ops", "kthvalue"])
    assert not os.path.exists(thresholds.cache_path())
