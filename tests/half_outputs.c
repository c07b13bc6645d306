/*
 * The float16/bfloat16 loops of pycoll/_kernels/src/half.c over fixed
 * inputs, every output byte written to stdout: built for this machine and
 * for AArch64 by tests/test_half_portable.py, which compares the bytes.
 *
 *     half_outputs [level]      level: as pycoll_set_half_isa takes it
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "kernels.h"

#define N 65536             /* every 16-bit pattern */
#define M (1u << 22)        /* float32 patterns, spread over all 2^32 */

int main(int argc, char **argv)
{
    if (argc > 1 && pycoll_set_half_isa(argv[1]) != 0)
        return 2;
    static uint16_t a[N], b[N], out[N];
    static float wide[N];
    uint32_t *x = malloc(sizeof *x * (size_t)M);
    uint16_t *narrow = malloc(sizeof *narrow * (size_t)M);
    if (!x || !narrow)
        return 3;
    for (uint32_t i = 0; i < N; i++) {
        a[i] = (uint16_t)i;
        b[i] = (uint16_t)(i * 40503u + 12345u);     /* a permutation: the multiplier is odd */
    }
    for (uint32_t i = 0; i < M; i++)
        x[i] = i * 1025u + (i >> 10);         /* every exponent, both signs */
    /* and the edges: +-inf, float16's overflow bound (65520) and largest
     * value, the top and bottom of its subnormals, a subnormal tie */
    const uint32_t edges[] = {0x7f800000u, 0xff800000u, 0x477ff000u, 0x477fefffu, 0x477fe000u,
                              0x38800000u, 0x387fe000u, 0x33800000u, 0x33000000u, 0x33000001u,
                              0x34400000u, 0xb3000001u};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++)
        x[i + 1] = edges[i];
    pycoll_binary_loop loops[] = {pycoll_f16_sum, pycoll_f16_prod, pycoll_bf16_sum,
                                  pycoll_bf16_prod};
    for (size_t k = 0; k < sizeof loops / sizeof loops[0]; k++) {
        loops[k](out, a, b, N);
        fwrite(out, 2, N, stdout);
        loops[k](out, b, a, N - 5);                 /* b first, and a tail */
        fwrite(out, 2, N - 5, stdout);
    }
    for (int dtype = PYCOLL_FLOAT16; dtype <= PYCOLL_BFLOAT16; dtype++) {
        pycoll_half_scale(dtype, out, a, 3.0f, N - 3);
        fwrite(out, 2, N - 3, stdout);
        pycoll_half_widen(dtype, wide, a, N);
        fwrite(wide, 4, N, stdout);
        pycoll_half_narrow(dtype, narrow, (const float *)x, M);
        fwrite(narrow, 2, M, stdout);
    }
    free(x);
    free(narrow);
    return 0;
}
