#!/usr/bin/env bash
# The differential (pytest) tests against a native library built with
# AddressSanitizer + UndefinedBehaviorSanitizer (KWKER_SANITIZE=1 in
# native/build_ffi.py), in a temporary copy of the tree so the normal build
# stays as it is.  Run from an activated venv that has torch and the test
# extras:
#
#   native/tests/pytest_sanitized.sh                      # the default selection
#   native/tests/pytest_sanitized.sh tests/test_exactness.py -x
#
# Python itself is not built with ASan: the sanitizer runtimes are preloaded
# and leak checking is off (the interpreter's own allocations would flood
# it; native leaks are LeakSanitizer's job in native/tests/run.sh and the
# fuzzers).
set -euo pipefail
cd "$(dirname "$0")/../.."
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
git ls-files -z | xargs -0 cp --parents -t "$tree"
(cd "$tree" && KWKER_SANITIZE=1 python native/build_ffi.py >/dev/null)
# install()'s C gate (native/python/kwker_gate.c), sanitized too
gate_so="$tree/kwker/_gate$(python -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')"
${CC:-gcc} -O1 -g -shared -fPIC -fsanitize=address,undefined -fno-sanitize-recover=undefined \
    -I"$(python -c 'import sysconfig; print(sysconfig.get_paths()["include"])')" \
    native/python/kwker_gate.c -o "$gate_so"
if [ $# -eq 0 ]; then
    set -- tests/test_exactness.py tests/test_native_targets.py tests/test_regressions.py \
        tests/test_properties.py tests/test_scale.py tests/test_gate.py \
        -k "not memory_growth and not allocation_failure"
fi
cd "$tree"
LD_PRELOAD="$(${CC:-gcc} -print-file-name=libasan.so) $(${CC:-gcc} -print-file-name=libubsan.so)" \
ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
PYTHONPATH="$tree" python -m pytest -q -p no:cacheprovider "$@"
