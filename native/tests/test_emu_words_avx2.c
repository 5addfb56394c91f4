/* test_emu_words.c with torch_order.h's AVX2 paths (the block partition's
 * candidate lists, the leaf sort's ranks), run where the CPU has AVX2. */
#pragma GCC target("avx2,bmi,bmi2,fma,popcnt")
#define EMU_TEST_CPU "avx2"
#include "test_emu_words.c"
