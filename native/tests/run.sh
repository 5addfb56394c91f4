#!/usr/bin/env bash
# Native unit tests: each native/tests/test_*.c against simple references
# (every size, input kinds, dtypes, every CPU target, red zones), built once
# optimised and once under AddressSanitizer + UndefinedBehaviorSanitizer.
# The runs go two at a time (the machines here have 2 cores).
#
#   native/tests/run.sh            # both builds
#   native/tests/run.sh --fast     # optimised build only
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
sources="native/src/dispatch.c native/src/targets/portable.c native/src/targets/avx2.c native/src/targets/avx512.c"
cc=${CC:-gcc}

# Arguments that keep CI's runs short: every length up to 300, thinned above
# (the full sweep is the default when a test binary is run by hand).
ci_args() {
    case "$1" in
        test_sort) echo "3 1" ;;
        test_select) echo "quick" ;;
        test_sort_san) echo "16 0" ;;
        test_simd_qsort_san) echo "16 0" ;;
        test_select_san) echo "quick" ;;
        test_emu_words_san) echo "2000" ;;
        test_nomem_san) echo "quick" ;;
        *) echo "" ;;
    esac
}

flags_opt="-O2 -std=c11 -ffp-contract=off -D_GNU_SOURCE -Wall -Wextra -Wno-unused-function -Inative/include"
flags_san="-O1 -g -std=c11 -ffp-contract=off -D_GNU_SOURCE -fno-omit-frame-pointer \
-fsanitize=address,undefined -fno-sanitize-recover=undefined -Inative/include"
flavours="opt"
[ "${1:-}" = "--fast" ] || flavours="opt san"

# the library once per build (its sources two at a time), then each test
# compiled and linked against it: the kernels are the slow part to compile
jobs="$out/jobs"
: >"$jobs"
for f in $flavours; do
    flags_var="flags_$f"
    for src in $sources; do
        echo "$cc ${!flags_var} -c $src -o $out/lib_${f}_$(basename "$src" .c).o" >>"$jobs"
    done
done
xargs -P 2 -I{} sh -c '{}' <"$jobs"
runs=()
: >"$jobs"
for test in native/tests/test_*.c; do
    name=$(basename "$test" .c)
    # a first line "/* link: FLAGS */" adds link flags (test_nomem wraps malloc)
    link=$(sed -n '1s|^/\* link: \(.*\) \*/$|\1|p' "$test")
    for f in $flavours; do
        flags_var="flags_$f"
        bin=$name
        [ "$f" = san ] && bin=${name}_san
        echo "$cc ${!flags_var} -o $out/$bin $test $out/lib_${f}_*.o -lm $link" >>"$jobs"
        runs+=("$bin")
    done
done
xargs -P 2 -I{} sh -c '{}' <"$jobs"
echo "built in $SECONDS s"

# The sanitized build checks the portable target and the best x86 one: the
# avx2 and avx512 targets compile the same kernel sources and differ in the
# AVX-512 paths (__AVX512F__) and in how the compiler vectorises plain
# loops, so on an AVX-512 machine the avx512 target covers both but for the
# AVX2 paths the AVX-512 ones replace, which the optimised build still checks
# on every target.  (A third target under ASan would add about two minutes
# to CI.)
if grep -qw avx512bw /proc/cpuinfo 2>/dev/null && grep -qw avx512vl /proc/cpuinfo 2>/dev/null; then
    san_targets="portable,avx512"
else
    san_targets="portable,avx2"
fi

run_one() {
    local name=$1 log="$out/$1.log" targets=""
    [[ $name == *_san ]] && targets=$san_targets
    # selection has no AVX-512 path: its avx2 build is the avx512 one's source
    # compiled the same way but for codegen (and tests/test_native_targets.py
    # checks topk and median against torch on all three targets)
    [[ $name == test_select ]] && targets=$san_targets
    # shellcheck disable=SC2046
    local start=$SECONDS
    if KWK_TEST_TARGETS=$targets ASAN_OPTIONS=detect_leaks=1 "$out/$name" $(ci_args "$name") >"$log" 2>&1; then
        echo "== $name: ok ($(tail -n 1 "$log")) $((SECONDS - start)) s"
    else
        echo "== $name: FAILED"; cat "$log"; return 1
    fi
}
export -f run_one ci_args
export out san_targets
# longest first (the sanitized selection test), so the two slots finish together
printf '%s\n' "${runs[@]}" | awk '{print (/_san$/ ? 0 : 1) (/select|sort/ ? 0 : 1), $0}' | sort |
    cut -d' ' -f2 | xargs -P 2 -I{} bash -c 'run_one {}'
echo "native tests: ok"
