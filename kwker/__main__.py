"""python -m kwker: run a program with Kwker installed, or a command.

  python -m kwker [options] SCRIPT [ARGS...]    run SCRIPT (also -m MODULE, -c CODE)
                                                with Kwker installed: python -m kwker --help
  python -m kwker ab [options] SCRIPT [ARGS...] run it with and without Kwker: times, outputs
  python -m kwker info                          versions, native target, what takes the fast path
  python -m kwker bench [options]               the real-input benchmark
  python -m kwker bench --grid [--quick]         ops x dtypes x row lengths vs torch and numpy
  python -m kwker crossover                     where the fast path starts beating torch
  python -m kwker calibrate                     measure this machine's crossover sizes and
                                                save them for install(use_fast="auto")
  python -m kwker compat [--check]              regenerate (check) compat_matrix/

A script named like a command runs with `python -m kwker -- info` (or ./info).
"""
import json
import sys


def _info(argv):
    import kwker
    from kwker import support, thresholds
    info = kwker.info()
    path = thresholds.cache_path()
    info["calibration"] = f"{path} ({'used' if thresholds.load() else 'none'})"
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
    if "--grid" in argv:
        from kwker.bench.grid import main
    else:
        from kwker.bench.runner import main
    return main(argv)


def _crossover(argv):
    from kwker.crossover import main
    return main(argv)


def _calibrate(argv):
    from kwker.calibrate import main
    return main(argv)


def _compat(argv):
    from kwker.compat import main
    return main(argv)


def _ab(argv):
    from kwker.ab import main
    return main(argv)


COMMANDS = {"info": _info, "bench": _bench, "crossover": _crossover, "calibrate": _calibrate,
            "compat": _compat, "ab": _ab}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] == "-h":
        print(__doc__.strip())
        return 0
    if argv[0] == "--help":
        from kwker.run import USAGE
        print(__doc__.strip() + "\n\n" + USAGE)
        return 0
    if argv[0] in COMMANDS:
        return COMMANDS[argv[0]](argv[1:]) or 0
    from kwker.run import main as run_main
    return run_main(argv)


if __name__ == "__main__":
    sys.exit(main())
