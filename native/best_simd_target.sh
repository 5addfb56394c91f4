# Sourced by native/tests/run.sh and native/fuzz/run.sh: the SIMD target
# the library picks at run time on this CPU (dispatch.c prefers avx512 where
# the CPU has AVX-512 BW and VL, as these flags say; the OS check it also
# makes holds on the Linux machines these scripts run on), and the other one.
if grep -qw avx512bw /proc/cpuinfo 2>/dev/null && grep -qw avx512vl /proc/cpuinfo 2>/dev/null; then
    best_simd=avx512 other_simd=avx2
else
    best_simd=avx2 other_simd=avx512
fi
