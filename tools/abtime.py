"""Round-robin min-of-repeats timing of several callables in one process
(a noisy, shared machine: interleaving spreads the noise over all of them)."""
import timeit


def compare(cases, number=2000, rounds=15):
    """cases: {name: zero-argument callable} -> {name: best microseconds}."""
    best = {name: float("inf") for name in cases}
    for _ in range(rounds):
        for name, f in cases.items():
            t = timeit.timeit(f, number=number) / number * 1e6
            if t < best[name]:
                best[name] = t
    return best


def show(cases, **kw):
    for name, t in compare(cases, **kw).items():
        print(f"{name:28s} {t:7.3f} us")
