#!/usr/bin/env bash
# Native unit tests: each native/tests/test_*.c against simple references
# (every size, input kinds, dtypes, both CPU targets, red zones), built once
# optimised and once under AddressSanitizer + UndefinedBehaviorSanitizer.
#
#   native/tests/run.sh            # both builds
#   native/tests/run.sh --fast     # optimised build only
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
sources="native/src/dispatch.c native/src/targets/portable.c native/src/targets/avx2.c"
cc=${CC:-gcc}

# Arguments that keep CI's runs short: every length up to 300, thinned above
# (the full sweep is the default when a test is run by hand).
ci_args() {
    case "$1" in
        test_sort) echo "3 1" ;;
        test_select) echo "quick" ;;
        *) echo "" ;;
    esac
}
sanitizer_args() {
    case "$1" in
        test_sort) echo "16 0" ;;
        test_select) echo "quick" ;;
        test_emu_words) echo "2000" ;;
        *) echo "" ;;
    esac
}

for test in native/tests/test_*.c; do
    name=$(basename "$test" .c)
    echo "== $name"
    $cc -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Inative/include -o "$out/$name" "$test" $sources -lm
    # shellcheck disable=SC2046
    "$out/$name" $(ci_args "$name") | tail -n 3
    if [ "${1:-}" != "--fast" ]; then
        echo "== $name (ASan + UBSan)"
        $cc -O1 -g -std=c11 -D_GNU_SOURCE -fno-omit-frame-pointer \
            -fsanitize=address,undefined -fno-sanitize-recover=undefined \
            -Inative/include -o "$out/${name}_san" "$test" $sources -lm
        # shellcheck disable=SC2046
        ASAN_OPTIONS=detect_leaks=1 "$out/${name}_san" $(sanitizer_args "$name") | tail -n 3
    fi
done
echo "native tests: ok"
