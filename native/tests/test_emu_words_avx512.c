/* test_emu_words.c compiled as the avx512 target compiles torch_order.h
 * (its AVX2 paths under AVX-512 code generation), run where the CPU has
 * AVX-512 (the flags dispatch.c asks of that target). */
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,bmi,bmi2,fma,popcnt")
#define EMU_TEST_CPU "avx512f"
#include "test_emu_words.c"
