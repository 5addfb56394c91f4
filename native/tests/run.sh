#!/usr/bin/env bash
# Native unit tests: each native/tests/test_*.c against simple references
# (every size, input kinds, dtypes, both CPU targets, red zones), built once
# optimised and once under AddressSanitizer + UndefinedBehaviorSanitizer.
# The runs go two at a time (the machines here have 2 cores).
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
# (the full sweep is the default when a test binary is run by hand).
ci_args() {
    case "$1" in
        test_sort) echo "3 1" ;;
        test_select) echo "quick" ;;
        test_sort_san) echo "16 0" ;;
        test_select_san) echo "quick" ;;
        test_emu_words_san) echo "2000" ;;
        test_nomem_san) echo "quick" ;;
        *) echo "" ;;
    esac
}

runs=()
for test in native/tests/test_*.c; do
    name=$(basename "$test" .c)
    # a first line "/* link: FLAGS */" adds link flags (test_nomem wraps malloc)
    link=$(sed -n '1s|^/\* link: \(.*\) \*/$|\1|p' "$test")
    # shellcheck disable=SC2086
    $cc -O2 -std=c11 -ffp-contract=off -D_GNU_SOURCE -Wall -Wextra -Wno-unused-function -Inative/include \
        -o "$out/$name" "$test" $sources -lm $link
    runs+=("$name")
    if [ "${1:-}" != "--fast" ]; then
        $cc -O1 -g -std=c11 -ffp-contract=off -D_GNU_SOURCE -fno-omit-frame-pointer \
            -fsanitize=address,undefined -fno-sanitize-recover=undefined \
            -Inative/include -o "$out/${name}_san" "$test" $sources -lm $link
        runs+=("${name}_san")
    fi
done

run_one() {
    local name=$1 log="$out/$1.log"
    # shellcheck disable=SC2046
    if ASAN_OPTIONS=detect_leaks=1 "$out/$name" $(ci_args "$name") >"$log" 2>&1; then
        echo "== $name: ok ($(tail -n 1 "$log"))"
    else
        echo "== $name: FAILED"; cat "$log"; return 1
    fi
}
export -f run_one ci_args
export out
printf '%s\n' "${runs[@]}" | xargs -P 2 -I{} bash -c 'run_one {}'
echo "native tests: ok"
