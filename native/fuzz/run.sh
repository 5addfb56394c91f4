#!/usr/bin/env bash
# Coverage-guided fuzzing of every native entry point (libFuzzer, with
# AddressSanitizer and UndefinedBehaviorSanitizer) against the plain
# references in native/fuzz/fuzz_common.h; the portable kernels and the
# best SIMD target (each input picks one; fz_pick_target).
#
#   native/fuzz/run.sh [SECONDS]     fuzz all targets for SECONDS of wall time
#                                    in total (default 300), after replaying
#                                    the committed corpus
#   native/fuzz/run.sh --replay      replay the committed corpus only
#   native/fuzz/run.sh --merge DIR   minimise DIR/<target>/ (inputs a long
#                                    run found) plus the committed corpus
#                                    into native/fuzz/corpus/<target>/
#
# Environment: FUZZ_JOBS=N targets at a time (default 1: the machines are
# shared), FUZZ_TARGETS="sort topk ..." a subset, FUZZ_WORK=DIR keeps the
# inputs each target finds in DIR/<target>/ (default: a temporary folder),
# FUZZ_LIB_OBJECTS="a.o b.o ..." (--replay only) the library already built
# with ASan+UBSan and the flags below.
#
# Without clang's libFuzzer the script says "fuzz skipped: <reason>" and
# replays the committed corpus with $CC (gcc) under ASan+UBSan instead.
# A finding is saved as <work>/findings/<target>-crash-*; reproduce it with
# the target binary printed, or build a plain replayer:
#   gcc -g -std=c11 -D_GNU_SOURCE -Inative/include native/fuzz/fuzz_sort.c \
#       native/fuzz/replay_main.c native/src/dispatch.c native/src/targets/*.c -lm
#   ./a.out FINDING
set -euo pipefail
cd "$(dirname "$0")/../.."

mode=fuzz
budget=300
case "${1:-}" in
    --replay) mode=replay ;;
    --merge) mode=merge; found=${2:?--merge needs the folder of found inputs} ;;
    "") ;;
    *) budget=$1 ;;
esac
targets=${FUZZ_TARGETS:-"sort topk kthvalue median_dim median_all quantile unique"}
jobs=${FUZZ_JOBS:-1}
lib_sources="native/src/targets/avx512.c native/src/targets/portable.c native/src/targets/avx2.c native/src/dispatch.c" # slowest to compile first
# -g1 (line tables): reports keep file:line, and the kernels compile in 60%
# of the time -g takes
common="-O1 -g1 -pthread -std=c11 -ffp-contract=off -D_GNU_SOURCE -fno-omit-frame-pointer -fno-sanitize-recover=undefined -Inative/include"

build=$(mktemp -d)
trap 'rm -rf "$build"' EXIT

libfuzzer_problem() {
    # why libFuzzer cannot be used here, or nothing
    if ! command -v clang >/dev/null 2>&1; then echo "clang not found"; return; fi
    printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n){(void)d;(void)n;return 0;}\n' \
        > "$build/probe.c"
    if ! clang -fsanitize=fuzzer,address,undefined -o "$build/probe" "$build/probe.c" \
            >"$build/probe.log" 2>&1; then
        echo "clang cannot link -fsanitize=fuzzer ($(head -n 1 "$build/probe.log"))"
        return
    fi
    if ! "$build/probe" -runs=1 >/dev/null 2>&1; then echo "a libFuzzer binary does not run"; fi
}

replay() {
    # the committed corpus through a plain driver, with $CC's sanitizers.
    # FUZZ_LIB_OBJECTS: the library's objects, already built with these
    # flags (native/tests/run.sh hands over its sanitized build's: CI's
    # replay then compiles only the harnesses)
    local cc=${CC:-gcc} t src objs=${FUZZ_LIB_OBJECTS:-} sources=$lib_sources
    [ -z "$objs" ] || sources=""
    for src in $sources native/fuzz/replay_main.c; do
        $cc $common -fsanitize=address,undefined -c "$src" -o "$build/r_$(basename "$src" .c).o"
        objs="$objs $build/r_$(basename "$src" .c).o"
    done
    for t in $targets; do
        # shellcheck disable=SC2086
        $cc $common -fsanitize=address,undefined -o "$build/replay_$t" \
            "native/fuzz/fuzz_$t.c" $objs -lm
        printf '== %s: ' "$t"
        "$build/replay_$t" "native/fuzz/corpus/$t"
    done
}

problem=""
if [ "$mode" != replay ]; then problem=$(libfuzzer_problem); fi
if [ "$mode" = replay ] || [ -n "$problem" ]; then
    if [ -n "$problem" ]; then
        echo "fuzz skipped: $problem; replaying the committed corpus instead"
        [ "$mode" = merge ] && exit 1
    fi
    replay
    echo "fuzz corpus replay: ok"
    exit 0
fi

# Library and harness with edge coverage but no comparison tracing (that
# tripled the time per input for no gain on these kernels).  The harness's
# own branches count as coverage too: a value class reaching a check (a
# bfloat16 NaN payload in topk's values, say) is new coverage even where the
# library runs the same code.  (Compiles run $jobs at a time.)
# The SIMD target fz_pick_target does not pick on this CPU is compiled
# plainly, only to link (instrumenting it would cost CI a minute).
. native/best_simd_target.sh
unpicked=native/src/targets/$other_simd.c
compile_jobs=()
for src in $lib_sources native/fuzz/fuzz_*.c; do
    case "$src" in native/fuzz/fuzz_*) t=${src#native/fuzz/fuzz_}; t=${t%.c}
        case " $targets " in *" $t "*) ;; *) continue ;; esac ;; esac
    # (A gap, known: clang's `#pragma clang attribute push(target(...))` in
    # targets/*.c enables the instructions but, unlike GCC's target pragma,
    # does not define __AVX2__, so the intrinsic kernels behind
    # #if defined(__AVX2__) are not in these builds: the "avx2" target
    # fuzzed is the portable code compiled for AVX2.  Adding -mavx2 -mbmi
    # -mbmi2 -mfma -mpopcnt to avx2.c brings them in, but clang 14 then took
    # 7.7 minutes on that file under the sanitizers (-ftime-trace: the
    # short-row network's sn_sort_columns 103 s and sn_sort_rows 48 s of
    # optimisation, the AVX2 quicksort's base cases 51 s, bm_select8 21 s);
    # the sanitized native unit tests (gcc) check those kernels.)
    if [ "$src" = "$unpicked" ]; then
        compile_jobs+=("clang -O0 -pthread -std=c11 -D_GNU_SOURCE -Inative/include -c $src -o $build/$(basename "$src" .c).o")
    else
        compile_jobs+=("clang $common -fsanitize=fuzzer-no-link,address,undefined \
            -fno-sanitize-coverage=trace-cmp -c $src -o $build/$(basename "$src" .c).o")
    fi
done
printf '%s\0' "${compile_jobs[@]}" | xargs -0 -P "$jobs" -I{} bash -c '{}'
for t in $targets; do
    clang -fsanitize=fuzzer,address,undefined -o "$build/fuzz_$t" "$build/fuzz_$t.o" \
        "$build/dispatch.o" "$build/portable.o" "$build/avx2.o" "$build/avx512.o" -lm
done

if [ "$mode" = merge ]; then
    for t in $targets; do
        fresh="$build/merged_$t"
        mkdir -p "$fresh" "native/fuzz/corpus/$t"
        # edge coverage only: hit-count buckets would keep many near copies
        "$build/fuzz_$t" -merge=1 -use_counters=0 -max_len=4096 "$fresh" \
            "native/fuzz/corpus/$t" "$found/$t" >"$build/merge_$t.log" 2>&1
        rm -f "native/fuzz/corpus/$t"/*
        cp "$fresh"/* "native/fuzz/corpus/$t"/ 2>/dev/null || true
        echo "== $t: $(ls "native/fuzz/corpus/$t" | wc -l) inputs," \
             "$(du -sk --apparent-size "native/fuzz/corpus/$t" | cut -f1) KiB"
    done
    exit 0
fi

work=${FUZZ_WORK:-$build/work}
mkdir -p "$work/findings"
ntargets=$(echo $targets | wc -w)
rounds=$(( (ntargets + jobs - 1) / jobs ))
per_target=$(( budget / rounds ))
[ "$per_target" -ge 1 ] || per_target=1
echo "fuzzing $ntargets targets, ${per_target}s each, $jobs at a time"

fuzz_one() {
    local t=$1 log="$work/$1.log"
    mkdir -p "$work/$t"
    # new inputs go to $work/$t; the committed corpus is read, not changed
    # -len_control=0: inputs may use the whole 4096 bytes from the start
    # (growing them slowly kept value mixes out of reach; measured with a
    # planted bug that a run with length control did not find in 150 s)
    if "$build/fuzz_$t" -max_total_time="$per_target" -max_len=4096 -len_control=0 -timeout=60 \
            -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$work/findings/$t-" \
            "$work/$t" "native/fuzz/corpus/$t" >"$log" 2>&1; then
        local runs cov
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
        cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1)
        echo "== $t: ok, $runs executions in ${per_target}s, $cov"
    else
        echo "== $t: FINDING (input saved under $work/findings/)"
        grep -E 'kwker fuzz FAIL|call:|outer=|ERROR: |SUMMARY|runtime error|Test unit written' "$log" | head -n 20
        echo "   reproduce: $build/fuzz_$t FINDING  (log: $log)"
        return 1
    fi
}
export -f fuzz_one
export build work per_target
status=0
printf '%s\n' $targets | xargs -P "$jobs" -I{} bash -c 'fuzz_one {}' || status=1
if [ "$status" -ne 0 ]; then
    trap - EXIT # keep the binaries for reproduction
    echo "fuzz: FAILED"
    exit 1
fi
echo "fuzz: ok"
