"""The benchmark corpus (catalogue, generators, calls) and a smoke run of its runner."""
import json
import math

import pytest
import torch

import kwker
from kwker.bench import runner
from kwker.bench.bitwise import difference
from kwker.bench import timing
from kwker.bench.corpus import (LAYER_REFERENCES, MAX_VARIANTS, QUICK_IDS, VARIANT_ELEMENTS, build_call,
                                load_catalogue, make_input, make_variants, select, variant_count)
from kwker.bench.dists import GENERATORS
from kwker.bench.layers_reference import median_pool2d_reference
from kwker.bench.machine import radix_bound_ns
from kwker.bench.plot import plot_speedups
from kwker.bench.report import format_copies, render_summary
from kwker.bench.results import InputResult, summarize
from kwker.bench.tie_order import reference_call

CATALOGUE = load_catalogue()
BY_ID = {e.id: e for e in CATALOGUE}
SMALLEST_PER_DIST = {}
for _entry in sorted(CATALOGUE, key=lambda e: e.numel, reverse=True):
    SMALLEST_PER_DIST[_entry.dist] = _entry

# Generating twice is the cost of a determinism test: distributions whose every
# entry is large are checked on a smaller input of the same kind (shape, params update).
SMALL_STAND_INS = {
    "neg_sqdist_points": ((2, 64, 64), {}),
    "rec_scores": ((4, 5000), {}),
    "sae_preacts": ((4, 1000), {}),
    "whisper_windows": ((2, 5, 100, 7), {}),
    "depth_bins": ((1, 8, 32, 32), {}),
    "depth_ensemble": ((3, 1, 48, 64), {}),
    "activations": ((768,), {"view": [2, 4, 96]}),
    "lovasz_errors": ((2, 5, 1024), {}),
    "grad": ((10000,), {}),
    "edge_keys": ((20000,), {}),
    "attn_accum": ((1, 4, 2000), {}),
    "segmap": ((80, 100), {}),
    "tal_metric": ((2, 4, 8400), {}),
    "objectness": ((2, 11400), {"hwa": [50, 76, 3]}),
    "node_ids": ((10000,), {"num_nodes": 100000}),
}


def values_of(entry_id):
    return make_input(BY_ID[entry_id])


def test_catalogue_is_packaged_whole():
    assert len(CATALOGUE) >= 97
    assert len(BY_ID) == len(CATALOGUE), "ids must be unique"
    assert {e.dist for e in CATALOGUE} <= set(GENERATORS)
    assert all(hasattr(torch, e.op) or e.op in LAYER_REFERENCES for e in CATALOGUE)


def test_quick_subset_exists_and_covers_every_op():
    assert set(QUICK_IDS) <= set(BY_ID)
    assert {BY_ID[i].op for i in QUICK_IDS} == {e.op for e in CATALOGUE}


def test_filter_searches_the_whole_catalogue():
    wanda = select(CATALOGUE, quick=True, substring="wanda_row")
    assert [e.id for e in wanda] == ["wanda_row_sort__llama2_7b"]
    assert all(e.op == "median_pool2d" for e in select(CATALOGUE, substring="median_pool2d"))


@pytest.mark.parametrize("entry", CATALOGUE, ids=lambda e: e.id)
def test_generator_gives_declared_shape_and_dtype(entry):
    x = make_input(entry)
    assert tuple(x.shape) == entry.shape and x.dtype == entry.dtype and x.is_contiguous()


@pytest.mark.parametrize("entry", SMALLEST_PER_DIST.values(), ids=lambda e: e.dist)
def test_generator_is_deterministic(entry):
    shape, params = entry.shape, entry.params
    if entry.dist in SMALL_STAND_INS:
        shape, update = SMALL_STAND_INS[entry.dist]
        params = dict(params, **update)
    generate = GENERATORS[entry.dist]
    first, again = (generate(shape, entry.dtype, params, entry.seed) for _ in range(2))
    assert tuple(first.shape) == shape
    assert torch.equal(first.view(torch.uint8), again.view(torch.uint8))


def test_seed_changes_the_values():
    entry = BY_ID["hf_topk_warper__llama3_8b"]
    generate = GENERATORS[entry.dist]
    assert not torch.equal(generate(entry.shape, entry.dtype, entry.params, 1),
                           generate(entry.shape, entry.dtype, entry.params, 2))


def test_bf16_rounded_logits_have_many_exact_ties():
    x = values_of("hf_topk_warper__llama3_8b")
    assert torch.equal(x, x.bfloat16().float()), "values must be bf16-representable"
    for row in x:
        assert row.unique().numel() < 0.1 * row.numel()


def test_masked_logits_keep_top_k_finite_and_the_rest_minus_inf():
    x = values_of("hf_topp_after_topk__llama2_7b_chat")
    finite = torch.isfinite(x).sum(-1)
    assert (finite >= 50).all() and (finite < 60).all()
    assert (torch.isneginf(x) | torch.isfinite(x)).all()
    routed = values_of("dsv3_gate_expert_top8")
    assert (torch.isneginf(routed).sum(-1) == 128).all()


def test_timeseries_rows_contain_nan():
    x = values_of("lagllama_robust_scaler_nanmedian")
    left_padded = torch.isnan(x[:, 0]).float().mean()
    assert 0.2 < left_padded < 0.6
    assert torch.isnan(x).any(-1).all(), "2% sporadic NaN reach every row"
    assert (x[~torch.isnan(x)] > 0).all()


def test_permutation_rows_are_permutations():
    x = values_of("mae_random_masking_restore__vit_b16")
    assert torch.equal(x.sort(-1).values, torch.arange(x.shape[-1]).expand_as(x))


def test_other_named_properties():
    cosines = values_of("st_paraphrase_mining_topk__minilm")
    assert cosines.abs().max() <= 1.0 and torch.equal(cosines.diagonal(), torch.ones(2000))
    times = values_of("pyg_temporal_sort_by_time__wikipedia")
    descents = (times[1:] < times[:-1]).float().mean()
    assert 0 < descents < 0.1, "nearly sorted"
    assert (times[1:] == times[:-1]).any(), "ties"
    votes = values_of("dino_knn_probs_sort__in1k")
    assert ((votes == 0).sum(-1) >= 980).all()
    tabnet = values_of("tabnet_sparsemax_sort__covertype")
    assert ((tabnet == 0) & torch.signbit(tabnet)).any(), "-0.0 from x * 0 prior"
    assert len(values_of("torchmetrics_spearman_rank_unique").unique()) == 26


def test_build_call_makes_torch_ready_arguments():
    fn_name, args, kwargs = build_call(BY_ID["chronos_sample_quantile__t5_small"])
    assert fn_name == "quantile" and isinstance(kwargs["q"], torch.Tensor)
    assert kwargs["q"].dtype == args[0].dtype
    torch.quantile(*args, **kwargs)
    fn_name, args, kwargs = build_call(BY_ID["hf_topk_warper__llama3_8b"])
    assert (fn_name, kwargs) == ("topk", {"k": 50, "dim": -1, "largest": True, "sorted": True})


@pytest.mark.parametrize("padding_mode", ["reflect", "zeros"])
def test_median_pool2d_reference_matches_a_direct_loop(padding_mode):
    x = torch.rand(1, 2, 7, 6, generator=torch.Generator().manual_seed(0))
    got = median_pool2d_reference(x, kernel_size=3, stride=1, padding=1, padding_mode=padding_mode)
    mode = "reflect" if padding_mode == "reflect" else "constant"
    padded = torch.nn.functional.pad(x, (1, 1, 1, 1), mode=mode)
    want = torch.empty_like(x)
    for i in range(7):
        for j in range(6):
            window = padded[:, :, i:i + 3, j:j + 3].reshape(1, 2, 9)
            want[:, :, i, j] = window.sort(-1).values[..., 4]
    assert torch.equal(got, want)


def test_difference_sees_every_bit():
    values = torch.tensor([0.0, 1.0, float("nan")])
    assert difference(values, values.clone()) is None
    assert "differ" in difference(values, torch.tensor([-0.0, 1.0, float("nan")]))
    other_nan = values.clone()
    other_nan.view(torch.int32)[2] += 1  # another NaN payload
    assert "differ" in difference(values, other_nan)
    assert "dtype" in difference(values, values.double())
    sorted_ = torch.sort(values)
    assert "indices" in difference(sorted_, (sorted_.values, sorted_.indices.flip(0)))


def test_stable_tie_reference_orders_ties_by_index():
    x = torch.tensor([[1.0, 3.0, 3.0, 2.0, 3.0]])
    top = reference_call("topk", torch.topk, (x,), {"k": 2}, ties="stable")()
    assert top.indices.tolist() == [[1, 2]] and top.values.tolist() == [[3.0, 3.0]]
    ordered = reference_call("sort", torch.sort, (x,), {"descending": True}, ties="stable")()
    assert ordered.indices.tolist() == [[1, 2, 4, 3, 0]]
    # sorted=False leaves the order open; Kwker's stable mode returns it sorted
    unsorted = reference_call("topk", torch.topk, (x,), {"k": 2, "sorted": False}, ties="stable")()
    assert unsorted.indices.tolist() == [[1, 2]]


def test_radix_bound_counts_passes_and_bytes():
    # float32 key: 4 byte-passes, each reading and writing 4 + 8 bytes
    assert math.isclose(radix_bound_ns(torch.float32, bandwidth=1e9), 96.0)
    assert math.isclose(radix_bound_ns(torch.int64, bandwidth=1e9), 256.0)


def test_variant_count_fills_the_element_budget():
    assert variant_count(0) == variant_count(1) == MAX_VARIANTS
    assert variant_count(VARIANT_ELEMENTS) == variant_count(10 ** 8) == 1
    for numel in (20, 64, 512, 1000, 4700, 32768, 65536, VARIANT_ELEMENTS - 1):
        count = variant_count(numel)
        assert count == MAX_VARIANTS or count * numel >= VARIANT_ELEMENTS > (count - 1) * numel


def test_variants_start_with_the_input_and_are_new_inputs_of_its_kind():
    entry = BY_ID["torchcp_weighted_scores_sort"]
    variants = make_variants(entry)
    assert len(variants) == variant_count(entry.numel) > 1
    assert difference(variants[0], make_input(entry)) is None
    assert all(v.shape == entry.shape and v.dtype == entry.dtype for v in variants)
    assert len({v.numpy().tobytes() for v in variants}) == len(variants)
    assert len(make_variants(entry, 3)) == 3


class _RunsCounted:
    """Stands in for torch.utils.benchmark.Timer: runs the statement's call `number`
    times and says each run took one second."""

    def __init__(self, stmt, globals, num_threads):
        self.call = globals["call"]

    def timeit(self, number):
        for _ in range(number):
            self.call()
        return type("Measurement", (), {"mean": 1.0})()


def test_a_cycle_runs_every_variant_and_is_timed_per_call(monkeypatch):
    monkeypatch.setattr(timing, "Timer", _RunsCounted)
    made = []
    cycle = timing.Cycle([lambda i=i: made.append(i) for i in range(4)])
    assert timing.block_time(cycle, 3, 1) == 0.25
    assert made == [0, 1, 2, 3] * 3
    assert timing.block_time(lambda: made.append(9), 2, 1) == 1.0


def test_torch_kwker_and_numpy_blocks_alternate_each_round(monkeypatch):
    """One block of each path per round, the order reversed every other
    round, Kwker's inside its context: drift reaches the three alike."""
    monkeypatch.setattr(timing, "Timer", _RunsCounted)
    log, inside = [], []

    class KwkerOn:
        def __enter__(self):
            inside.append(1)

        def __exit__(self, *exc):
            inside.pop()

    def path(name):
        return lambda: log.append((name, bool(inside)))

    plan = timing.TimingPlan(rounds=4, min_rounds=3, block_s=0.0, budget_s=1.0, bandwidth_repeats=1)
    stats = timing.time_interleaved(path("torch"), path("kwker"), KwkerOn, plan, 1,
                                    numpy_call=path("numpy"))
    assert all(s is not None for s in stats)
    assert all(on == (name == "kwker") for name, on in log)
    blocks = [name for i, (name, _) in enumerate(log) if i == 0 or log[i - 1][0] != name]
    # the warm-up calls (block_shape) first, one per path, then the rounds
    assert blocks[:3] == ["torch", "kwker", "numpy"]
    rounds = blocks[3:]
    forward, backward = ["torch", "kwker", "numpy"], ["numpy", "kwker", "torch"]
    # (a reversed round starts with the path the one before ended with, so
    # the two blocks merge into one run)
    assert rounds == forward + backward[1:] + forward[1:] + backward[1:]
    torch_stats, kwker_stats, numpy_stats = timing.time_interleaved(
        path("torch"), path("kwker"), KwkerOn, plan, 1)
    assert numpy_stats is None and torch_stats is not None and kwker_stats is not None


def test_a_later_variant_that_differs_fails_the_input(monkeypatch):
    entry = BY_ID["torchcp_weighted_scores_sort"]
    checks = []

    def second_differs(expected, actual):
        checks.append(1)
        return "values differ" if len(checks) == 2 else None

    monkeypatch.setattr(runner, "difference", second_differs)
    result, torch_calls, kwker_calls = runner.check_variants(entry, make_variants(entry, 3),
                                                             runner.KwkerSwitch())
    assert len(checks) == 3 and len(kwker_calls) == 3
    assert not result.correct and result.mismatch.startswith("variant 1 ") and result.variants == 3


def test_peak_memory_is_taken_on_a_second_call(monkeypatch):
    """The first call of an input's kind pays one-time set-up (~0.5-1 MiB, which made a
    sort of 157474 int64 read 2.6 copies of its input in one run and 1.0 in the next):
    each path's peak comes from another call after its checked one."""
    entry = BY_ID["torchcp_weighted_scores_sort"]
    runs = {}  # call -> how many times it ran

    def counted(call):
        def run():
            runs[run] = runs.get(run, 0) + 1
            return call()
        return run

    before_measured = []

    def fake_peak(call):
        before_measured.append(runs.get(call, 0))
        return call(), 12345

    real_bound, real_reference = runner.bound_call, runner.reference_call
    monkeypatch.setattr(runner, "bound_call", lambda *a: counted(real_bound(*a)))
    monkeypatch.setattr(runner, "reference_call", lambda *a: counted(real_reference(*a)))
    monkeypatch.setattr(runner, "call_with_peak", fake_peak)
    x = make_variants(entry, 1)[0]
    result, _, _ = runner.check_entry(entry, x, runner.KwkerSwitch())
    assert result.correct and result.torch_peak_bytes == result.kwker_peak_bytes == 12345
    assert before_measured == [1, 1]  # Kwker's, then torch's: each after its checked call


def _measured(id_, op, input_mib, output_mib, peak_mib, section="ops"):
    mib = 1 << 20
    return InputResult(id=id_, op=op, section=section, shape=(1,), dtype="float32", numel=1,
                       correct=True, kwker_peak_bytes=int(peak_mib * mib),
                       input_bytes=int(input_mib * mib), output_bytes=int(output_mib * mib))


def test_memory_budget_is_outputs_and_one_input_copy():
    within = _measured("a", "sort", 2, 6, 8)        # outputs + exactly one copy
    over = _measured("b", "sort", 2, 6, 15.4)       # a words buffer and its radix scratch
    more = _measured("c", "topk", 1, 1, 9)
    layer = _measured("d", "median_pool2d", 1, 1, 30, section="layers")
    unmeasured = InputResult(id="e", op="sort", section="ops", shape=(1,), dtype="float32",
                             numel=1, correct=True)
    assert within.within_memory_budget and within.kwker_extra_copies == pytest.approx(1.0)
    assert not over.within_memory_budget and over.kwker_extra_copies == pytest.approx(4.7)
    assert unmeasured.within_memory_budget is None
    summary = summarize([within, over, more, layer, unmeasured])
    assert summary["memory_measured"] == 3 and summary["memory_within"] == 1
    assert summary["memory_sort_family"] == 2 and summary["memory_sort_family_within"] == 1
    assert [i for i, _, _ in summary["memory_over"]] == ["c", "b"]  # most copies first
    text = render_summary(summary)
    assert "1 of 3 inputs, sort family 1 of 2; over: c (topk) 8.0, b (sort) 4.7" in text
    assert format_copies(over) == "4.7*" and format_copies(within) == "1.0"
    assert format_copies(layer) == "-"


def test_check_smoke_passes(capsys):
    assert runner.main(["--check", "--quick", "--filter", "mae_random_masking"]) == 0
    assert "2 of 2 inputs bit-identical" in capsys.readouterr().out


def test_timing_run_writes_json_and_flags_regressions(tmp_path, capsys):
    entry_id = "smoothed_value_median_window20"
    old, saved = tmp_path / "old.json", tmp_path / "run.json"
    old.write_text(json.dumps({"results": [{"id": entry_id, "speedup": 1000.0}]}))
    assert runner.main(["--quick", "--filter", entry_id, "--json", str(saved), "--compare", str(old)]) == 0
    record = json.loads(saved.read_text())
    (result,) = record["results"]
    assert result["correct"] and result["speedup"] > 0 and result["numpy_s"] > 0
    assert record["summary"]["timed_correct"] == 1 and record["machine"]["threads"] == 1
    if result["kwker_peak_bytes"] is not None:  # Linux with a writable clear_refs
        assert result["input_bytes"] == 20 * 4 and result["output_bytes"] == 4
        assert record["summary"]["memory_measured"] == 1
    out = capsys.readouterr().out
    assert "REGRESSION" in out and "1 regression(s) among 1 inputs" in out


def test_unreadable_compare_file_is_refused_before_timing(tmp_path, capsys):
    missing = tmp_path / "no-such.json"
    assert runner.main(["--quick", "--filter", "smoothed_value", "--compare", str(missing)]) \
        == runner.EXIT_USAGE
    captured = capsys.readouterr()
    assert "error: --compare" in captured.err and "speed-up over" not in captured.out


def test_missing_kwker_api_is_said_out_loud(monkeypatch, capsys):
    monkeypatch.delattr(kwker, "install", raising=False)
    assert runner.main(["--check", "--filter", "smoothed_value"]) == 0
    assert "kwker not available: timing torch against itself" in capsys.readouterr().err
    assert runner.main(["--check", "--filter", "smoothed_value", "--ties", "stable"]) == runner.EXIT_USAGE


def test_plot_writes_a_png_or_says_why_not(tmp_path):
    result = InputResult(id="x", op="sort", section="ops", shape=(4,), dtype="float32", numel=4,
                         correct=True, torch_s=2e-6, kwker_s=1e-6)
    path = tmp_path / "speedups.png"
    problem = plot_speedups([result], str(path))
    assert (problem is None and path.stat().st_size > 0) or "matplotlib" in problem


def test_grid_checks_and_times_each_case(capsys):
    """The synthetic grid: every case checked bit for bit against torch,
    timed against torch and numpy; the numpy column is empty for bfloat16."""
    from kwker.bench import grid
    assert grid.main(["--grid", "--quick", "--filter", "4096x8"]) == 0
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if "4096x8" in line]
    quick = [c for c in grid.cases(True) if "4096x8" in c.label]
    assert len(lines) == len(quick) and all(line.endswith("yes") for line in lines)
    # columns from the right: same, radix, ns/el, vs numpy, vs torch, kwker, numpy
    assert all((line.split()[-7] == "-") == (line.split()[1] == "bfloat16") for line in lines)
    assert "median speed-up per op" in out


def test_grid_covers_every_sort_dtype_and_the_long_rows():
    from kwker.bench import grid
    full = grid.cases(False)
    assert {c.dtype for c in full if c.op == "sort"} == set(grid.SORT_DTYPES)
    assert any(c.length == 1 << 24 for c in full)
    for c in full:  # every generator gives the dtype its name promises
        x = grid.VALUES[c.dtype]((2, 3), torch.Generator())
        assert str(x.dtype).endswith(c.dtype.split("/")[0])
