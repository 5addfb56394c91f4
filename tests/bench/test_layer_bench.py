"""The layer benchmarks' timing helpers (kwker.nn.bench)."""
import torch

from kwker.bench.corpus import variant_count
from kwker.nn import bench


def test_variants_are_the_input_and_new_orders_of_its_values():
    x = torch.randn(64, 54, generator=torch.Generator().manual_seed(3))
    xs = bench.variants(x)
    assert len(xs) == variant_count(x.numel()) > 1 and xs[0] is x
    for v in xs[1:]:
        assert v.shape == x.shape and not torch.equal(v, x)
        assert torch.equal(v.flatten().sort().values, x.flatten().sort().values)
    assert len(bench.variants(torch.zeros(1 << 20))) == 1


def test_best_per_input_runs_each_input_and_divides_by_their_number(monkeypatch):
    seen = []

    def one_loop_of_six_seconds(fn, repeats):
        fn()
        return 6.0
    monkeypatch.setattr(bench, "best", one_loop_of_six_seconds)
    assert bench.best_per_input(lambda x: lambda: seen.append(x), [1, 2, 3], repeats=2) == 2.0
    assert seen == [1, 2, 3]
