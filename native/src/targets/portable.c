/* The portable target: plain C11, whatever the compiler's baseline is. */
#define KWK_TABLE kwk_kernels_portable
#define KWK_TARGET_NAME "portable"
#include "../kernels_impl.h"
