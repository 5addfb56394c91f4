"""python -m kwker <command>

  info                 versions, native target, what takes the fast path
  bench [options]      the real-input benchmark (python -m kwker bench --help)
  crossover            where the fast path starts beating torch on small inputs
"""
import json
import sys


def _info(argv):
    import kwker
    from kwker import support
    info = kwker.info()
    if "--json" in argv:
        print(json.dumps(info, indent=2))
        return 0
    for key, value in info.items():
        print(f"{key:>15}: {value}")
    print("\nfast path per op (dtypes; everything else goes to torch):")
    for op, sup in support.OPS.items():
        dtypes = ", ".join(sorted(str(d).replace("torch.", "") for d in sup.dtypes)) or "-"
        print(f"  {op:<12} {dtypes}")
    return 0


def _bench(argv):
    from kwker.bench.runner import main
    return main(argv)


def _crossover(argv):
    from kwker.crossover import main
    return main(argv)


COMMANDS = {"info": _info, "bench": _bench, "crossover": _crossover}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        print(__doc__.strip())
        return 0 if not argv or argv[0] in ("-h", "--help") else 2
    return COMMANDS[argv[0]](argv[1:]) or 0


if __name__ == "__main__":
    sys.exit(main())
