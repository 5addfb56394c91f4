#!/usr/bin/env bash
# Native unit tests: each native/tests/test_*.c against simple references
# (every size, input kinds, dtypes, every CPU target, red zones), built once
# optimised and once under AddressSanitizer + UndefinedBehaviorSanitizer.
# The runs go two at a time (the machines here have 2 cores).
#
#   native/tests/run.sh            # both builds
#   native/tests/run.sh --fast     # optimised build only
#   native/tests/run.sh --san      # sanitized build only, and the fuzz
#                                  # corpus replayed through its library
#   native/tests/run.sh --opt-objects DIR
#                                  # the optimised tests against the library
#                                  # objects in DIR (CI: the install's own
#                                  # build, KWKER_CI_KEEP_OBJECTS in setup.py)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# (the slowest to compile first)
sources="native/src/targets/avx512.c native/src/targets/portable.c native/src/targets/avx2.c native/src/dispatch.c"
cc=${CC:-gcc}

# Arguments that keep CI's runs short: every length up to 300, thinned above
# (the full sweep is the default when a test binary is run by hand);
# test_simd_qsort's long rows up to 200000 (its rows of 1M and 3M were 25 of
# its 42 s here; the binary run by hand with no arguments keeps them).
ci_args() {
    case "$1" in
        test_sort) echo "3 2" ;;
        test_select) echo "quick" ;;
        test_simd_qsort) echo "1 200000" ;;
        test_sort_san) echo "16 0" ;;
        test_simd_qsort_san) echo "16 0" ;;
        test_select_san) echo "san" ;;
        test_emu_words_san | test_emu_words_avx2_san | test_emu_words_avx512_san) echo "2000" ;;
        test_nomem_san) echo "quick" ;;
        *) echo "" ;;
    esac
}

# The best SIMD target here: the sanitized build checks it and portable (the
# avx2 and avx512 targets compile the same kernel sources and differ in the
# AVX-512 paths (__AVX512F__) and in how the compiler vectorises plain
# loops, so on an AVX-512 machine the avx512 target covers both but for the
# AVX2 paths the AVX-512 ones replace, which the optimised build still checks
# on every target).  The other SIMD target is compiled plainly in that build,
# only to link: instrumenting it would add a minute of compiling to CI.
. native/best_simd_target.sh
best=$best_simd unchecked=$other_simd
san_targets="portable,$best"
# A CPU without AVX-512 cannot run the avx512 target, so no build here runs
# it (the tests skip it): compiled plainly, only to link, it saves the
# optimised build 13 s of compiling.  (With AVX-512, avx2 is the other
# target and the optimised build still runs it.)
unrunnable=""
[ "$best" = avx512 ] || unrunnable=avx512

# The sanitized build instruments the library; the harness of these tests
# is compiled optimised and plain: they hand the library heap buffers only
# (ASan's red zones around malloc's blocks guard those whether or not the
# harness is instrumented), and their references were a fifth of the
# sanitized runs' time (test_select 81 -> 66 s for its two targets).
# The other tests keep an instrumented harness: some pass stack arrays.
plain_harness="test_select test_sort"

flags_opt="-O2 -pthread -std=c11 -ffp-contract=off -D_GNU_SOURCE -Wall -Wextra -Wno-unused-function -Inative/include"
# -g1 (line tables): reports keep file:line, and the kernels compile in 60%
# of the time -g takes
flags_san="-O1 -g1 -pthread -std=c11 -ffp-contract=off -D_GNU_SOURCE -fno-omit-frame-pointer \
-fsanitize=address,undefined -fno-sanitize-recover=undefined -Inative/include"
flags_plain="-O0 -pthread -std=c11 -D_GNU_SOURCE -Inative/include"
flavours="opt san"
opt_objects=""
case "${1:-}" in
    "") ;;
    --fast) flavours=opt ;;
    --san) flavours=san ;;
    --opt-objects) flavours=opt; opt_objects=${2:?--opt-objects needs a folder} ;;
    *) echo "usage: $0 [--fast | --san | --opt-objects DIR]" >&2; exit 2 ;;
esac

# the library once per build (its sources two at a time), then each test
# compiled and linked against it: the kernels are the slow part to compile
jobs="$out/jobs"
: >"$jobs"
for f in $(echo "$flavours" | tr ' ' '\n' | sort -r); do # san first: slower
    for src in $sources; do
        if [ "$f" = opt ] && [ -n "$opt_objects" ]; then
            # the library as installed (its -O3 and build_ffi.py's flags): no
            # second optimised compile, and these tests check the shipped code
            obj="$opt_objects/$(basename "$src" .c).o"
            [ -f "$obj" ] || { echo "run.sh: $obj not found" >&2; exit 2; }
            cp "$obj" "$out/lib_opt_$(basename "$src" .c).o"
            continue
        fi
        flags_var="flags_$f"
        [ "$f" = san ] && [ "$src" = "native/src/targets/$unchecked.c" ] && flags_var=flags_plain
        [ "$src" = "native/src/targets/$unrunnable.c" ] && flags_var=flags_plain
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
        if [ "$f" = san ] && [[ " $plain_harness " == *" $name "* ]]; then
            echo "$cc $flags_opt -c $test -o $out/$bin.o && $cc -fsanitize=address,undefined -pthread \
-o $out/$bin $out/$bin.o $out/lib_${f}_*.o -lm $link" >>"$jobs"
        else
            echo "$cc ${!flags_var} -o $out/$bin $test $out/lib_${f}_*.o -lm $link" >>"$jobs"
        fi
        runs+=("$bin")
    done
done
xargs -P 2 -I{} sh -c '{}' <"$jobs"
echo "built in $SECONDS s"

# Runs: "binary targets" (targets: KWK_TEST_TARGETS, or "all").
# test_select goes one target per run: the longest test (its sanitized run
# most of all), split so that the two slots finish together.  test_sort
# checks its targets in one run, against references computed once.
# The sanitized builds check portable and the best SIMD target (above);
# test_select's optimised run checks every target this CPU runs: the
# selection differs between them (select_words.h's rank select through the
# AVX-512 or the AVX2 quicksort, with its own row limits).
jobs_run=()
for bin in "${runs[@]}"; do
    targets=all
    [[ $bin == *_san ]] && targets=$san_targets
    [[ $bin == test_select ]] && targets=portable,avx2,avx512
    if [[ $bin == test_select* ]]; then
        for t in ${targets//,/ }; do jobs_run+=("$bin $t"); done
    else
        jobs_run+=("$bin $targets")
    fi
done
# The sanitized build also replays the committed fuzz corpus (inputs that
# reached new coverage or once found a bug, every entry point) through its
# library objects: native/fuzz/run.sh --replay compiles only its harnesses.
# Each input picks portable or the best SIMD target itself (fz_pick_target).
[[ " $flavours " == *" san "* ]] && jobs_run+=("fuzz_corpus_replay all")

# seconds each run took on a 2-core CI machine (per target where split):
# only the order of the runs, longest first, comes from these
cost() {
    case "$1" in
        test_sort) echo 45 ;;
        test_sort_san) echo 26 ;;
        test_select_san) echo 21 ;;
        fuzz_corpus_replay) echo 17 ;;
        test_simd_qsort_san) echo 16 ;;
        test_unique_san) echo 13 ;;
        test_select | test_simd_qsort) echo 10 ;;
        *) echo 5 ;;
    esac
}

run_one() {
    local name=$1 targets=$2 log="$out/$1_$2.log"
    local start=$SECONDS
    [ "$targets" = all ] && targets=""
    local cmd=("$out/$name")
    [ "$name" = fuzz_corpus_replay ] &&
        cmd=(env FUZZ_LIB_OBJECTS="$(echo "$out"/lib_san_*.o)" native/fuzz/run.sh --replay)
    # shellcheck disable=SC2046
    if KWK_TEST_TARGETS=$targets ASAN_OPTIONS=detect_leaks=1 "${cmd[@]}" $(ci_args "$name") >"$log" 2>&1; then
        echo "== $name${targets:+ ($targets)}: ok ($(tail -n 1 "$log")) $((SECONDS - start)) s"
    else
        echo "== $name${targets:+ ($targets)}: FAILED"; cat "$log"; return 1
    fi
}
export -f run_one ci_args
export out
for job in "${jobs_run[@]}"; do
    echo "$(cost "${job%% *}") $job"
done | sort -rn -k 1,1 | cut -d' ' -f2- | xargs -P 2 -L 1 bash -c 'run_one "$@"' _
echo "native tests: ok in $SECONDS s"
