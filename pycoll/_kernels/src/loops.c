/*
 * Generic element loops and the (op, dtype) dispatch table.
 *
 * Each loop is one macro instantiation per element type: the same C source
 * for every dtype, vectorised by gcc in three clones (clones.h). Semantics
 * follow numpy exactly:
 *   - integers wrap (the arithmetic is done in an unsigned type wide enough
 *     that C has no undefined overflow);
 *   - MAX/MIN: max(a, b) = a if a > b or a is NaN, else b (NaN propagates,
 *     the first NaN wins, b wins ties such as max(-0.0, +0.0));
 *   - bool: SUM = MAX = BOR = or, PROD = MIN = BAND = and, BXOR = xor;
 *   - complex PROD is (ar*br - ai*bi, ar*bi + ai*br), each product rounded
 *     (the build forbids fused multiply-add);
 *   - float16 and bfloat16 live in half.c.
 */
#include "kernels.h"
#include "clones.h"

/*
 * Elements to handle before out reaches a 64-byte boundary. Large numpy
 * arrays start 16 bytes past a page, so without this head every vector
 * store straddles two cache lines: 15-20% of memory-bound throughput. The
 * head runs the same expression in scalar code, which gives the same bits
 * (tests/test_kernels.py checks every loop at every offset).
 */
static inline size_t head_count(const void *out, size_t itemsize, size_t n)
{
    size_t head = ((64 - ((uintptr_t)out & 63)) & 63) / itemsize;
    return head < n ? head : n;
}

#define BINARY_LOOP(NAME, T, EXPR)                                                \
    PYCOLL_CLONES static void NAME(void *out_, const void *a_, const void *b_,   \
                                   size_t n)                                      \
    {                                                                             \
        T *out = (T *)out_;                                                       \
        const T *a = (const T *)a_, *b = (const T *)b_;                           \
        size_t i = 0, head = head_count(out, sizeof(T), n);                       \
        for (; i < head; i++) {                                                   \
            T x = a[i], y = b[i];                                                 \
            out[i] = (T)(EXPR);                                                   \
        }                                                                         \
        for (; i < n; i++) {                                                      \
            T x = a[i], y = b[i];                                                 \
            out[i] = (T)(EXPR);                                                   \
        }                                                                         \
    }

/* Integers: W is an unsigned type at least as wide as int, so that neither
 * the promotion of 8- and 16-bit values nor 32/64-bit overflow is undefined. */
#define INTEGER_LOOPS(SUFFIX, T, W)                                               \
    BINARY_LOOP(sum_##SUFFIX, T, (W)x + (W)y)                                     \
    BINARY_LOOP(prod_##SUFFIX, T, (W)x * (W)y)                                    \
    BINARY_LOOP(max_##SUFFIX, T, x > y ? x : y)                                   \
    BINARY_LOOP(min_##SUFFIX, T, x < y ? x : y)                                   \
    BINARY_LOOP(band_##SUFFIX, T, x & y)                                          \
    BINARY_LOOP(bor_##SUFFIX, T, x | y)                                           \
    BINARY_LOOP(bxor_##SUFFIX, T, x ^ y)

INTEGER_LOOPS(i8, int8_t, unsigned int)
INTEGER_LOOPS(i16, int16_t, unsigned int)
INTEGER_LOOPS(i32, int32_t, uint32_t)
INTEGER_LOOPS(i64, int64_t, uint64_t)
INTEGER_LOOPS(u8, uint8_t, unsigned int)
INTEGER_LOOPS(u16, uint16_t, unsigned int)
INTEGER_LOOPS(u32, uint32_t, uint32_t)
INTEGER_LOOPS(u64, uint64_t, uint64_t)

BINARY_LOOP(or_bool, uint8_t, (x | y) != 0)
BINARY_LOOP(and_bool, uint8_t, (x != 0) & (y != 0))
BINARY_LOOP(xor_bool, uint8_t, (x != 0) ^ (y != 0))

#define FLOAT_LOOPS(SUFFIX, T)                                                    \
    BINARY_LOOP(sum_##SUFFIX, T, x + y)                                           \
    BINARY_LOOP(prod_##SUFFIX, T, x * y)                                          \
    BINARY_LOOP(max_##SUFFIX, T, (x > y || x != x) ? x : y)                       \
    BINARY_LOOP(min_##SUFFIX, T, (x < y || x != x) ? x : y)

FLOAT_LOOPS(f32, float)
FLOAT_LOOPS(f64, double)

/* Complex numbers are (re, im) pairs of T; a complex sum is the real sum of
 * 2n components, a product needs its own loop. */
#define COMPLEX_LOOPS(SUFFIX, T, REAL_SUM)                                        \
    static void sum_##SUFFIX(void *out, const void *a, const void *b, size_t n)  \
    {                                                                             \
        REAL_SUM(out, a, b, 2 * n);                                               \
    }                                                                             \
    PYCOLL_CLONES_NO_FMA static void prod_##SUFFIX(void *out_, const void *a_,   \
                                            const void *b_, size_t n)             \
    {                                                                             \
        T *out = (T *)out_;                                                       \
        const T *a = (const T *)a_, *b = (const T *)b_;                           \
        for (size_t i = 0; i < n; i++) {                                          \
            T ar = a[2 * i], ai = a[2 * i + 1], br = b[2 * i], bi = b[2 * i + 1]; \
            out[2 * i] = ar * br - ai * bi;                                       \
            out[2 * i + 1] = ar * bi + ai * br;                                   \
        }                                                                         \
    }

COMPLEX_LOOPS(c64, float, sum_f32)
COMPLEX_LOOPS(c128, double, sum_f64)

#define INTEGER_ROW(S) {sum_##S, prod_##S, max_##S, min_##S, band_##S, bor_##S, bxor_##S}
#define FLOAT_ROW(S) {sum_##S, prod_##S, max_##S, min_##S, NULL, NULL, NULL}

/* Indexed [dtype][op]: one row per dtype reads better than one per op. */
static const pycoll_binary_loop table[PYCOLL_NUM_DTYPES][PYCOLL_NUM_OPS] = {
    [PYCOLL_BOOL] = {or_bool, and_bool, or_bool, and_bool, and_bool, or_bool, xor_bool},
    [PYCOLL_INT8] = INTEGER_ROW(i8),
    [PYCOLL_INT16] = INTEGER_ROW(i16),
    [PYCOLL_INT32] = INTEGER_ROW(i32),
    [PYCOLL_INT64] = INTEGER_ROW(i64),
    [PYCOLL_UINT8] = INTEGER_ROW(u8),
    [PYCOLL_UINT16] = INTEGER_ROW(u16),
    [PYCOLL_UINT32] = INTEGER_ROW(u32),
    [PYCOLL_UINT64] = INTEGER_ROW(u64),
    [PYCOLL_FLOAT16] = {pycoll_f16_sum, pycoll_f16_prod, pycoll_f16_max, pycoll_f16_min},
    [PYCOLL_BFLOAT16] = {pycoll_bf16_sum, pycoll_bf16_prod, pycoll_bf16_max, pycoll_bf16_min},
    [PYCOLL_FLOAT32] = FLOAT_ROW(f32),
    [PYCOLL_FLOAT64] = FLOAT_ROW(f64),
    [PYCOLL_COMPLEX64] = {sum_c64, prod_c64},
    [PYCOLL_COMPLEX128] = {sum_c128, prod_c128},
};

pycoll_binary_loop pycoll_reduce_loop(int op, int dtype)
{
    if (op < 0 || op >= PYCOLL_NUM_OPS || dtype < 0 || dtype >= PYCOLL_NUM_DTYPES)
        return NULL;
    return table[dtype][op];
}

size_t pycoll_itemsize(int dtype)
{
    static const size_t sizes[PYCOLL_NUM_DTYPES] = {
        [PYCOLL_BOOL] = 1,
        [PYCOLL_INT8] = 1, [PYCOLL_INT16] = 2, [PYCOLL_INT32] = 4, [PYCOLL_INT64] = 8,
        [PYCOLL_UINT8] = 1, [PYCOLL_UINT16] = 2, [PYCOLL_UINT32] = 4, [PYCOLL_UINT64] = 8,
        [PYCOLL_FLOAT16] = 2, [PYCOLL_BFLOAT16] = 2, [PYCOLL_FLOAT32] = 4, [PYCOLL_FLOAT64] = 8,
        [PYCOLL_COMPLEX64] = 8, [PYCOLL_COMPLEX128] = 16,
    };
    return dtype >= 0 && dtype < PYCOLL_NUM_DTYPES ? sizes[dtype] : 0;
}

/* Division by a scalar; complex values divide component-wise (numpy's
 * complex division by (p + 0j) would turn a -0.0 real part into +0.0). */
#define SCALE_LOOP(NAME, T)                                                       \
    PYCOLL_CLONES static void NAME(T *out, const T *x, T divisor, size_t n)      \
    {                                                                             \
        size_t i = 0, head = head_count(out, sizeof(T), n);                       \
        for (; i < head; i++)                                                     \
            out[i] = x[i] / divisor;                                              \
        for (; i < n; i++)                                                        \
            out[i] = x[i] / divisor;                                              \
    }

SCALE_LOOP(scale_f32, float)
SCALE_LOOP(scale_f64, double)

int pycoll_scale(int dtype, void *out, const void *x, double divisor, size_t n)
{
    switch (dtype) {
    case PYCOLL_FLOAT32:
        scale_f32(out, x, (float)divisor, n);
        return 0;
    case PYCOLL_COMPLEX64:
        scale_f32(out, x, (float)divisor, 2 * n);
        return 0;
    case PYCOLL_FLOAT64:
        scale_f64(out, x, divisor, n);
        return 0;
    case PYCOLL_COMPLEX128:
        scale_f64(out, x, divisor, 2 * n);
        return 0;
    default:
        return pycoll_half_scale(dtype, out, x, (float)divisor, n);
    }
}

int pycoll_convert(int src_dtype, int dst_dtype, void *out, const void *x, size_t n)
{
    if (dst_dtype == PYCOLL_FLOAT32)
        return pycoll_half_widen(src_dtype, out, x, n);
    if (src_dtype == PYCOLL_FLOAT32)
        return pycoll_half_narrow(dst_dtype, out, x, n);
    return -1;
}
