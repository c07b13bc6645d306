/*
 * pycoll element loops: the arithmetic under pycoll._kernels.reduce.
 *
 * Everything here works on raw, contiguous, naturally aligned buffers of n
 * elements; argument checking belongs to the Cython layer above. The loops
 * are built for the x86-64 baseline and pick their instruction set at run
 * time (gcc target_clones for the generic loops, cpuid for the half-precision
 * ones), so one wheel runs everywhere and uses AVX-512 where it exists.
 *
 * Note [Operand order]: every binary loop computes out[i] = a[i] OP b[i] with
 * a on the left, and its result depends only on the values, never on buffer
 * addresses or on where a vector body ends: the half-precision loops push
 * their tail through the same vector code. The collectives rely on this to
 * give bitwise-identical results on every rank (see pycoll/_p2p.py).
 */
#ifndef PYCOLL_KERNELS_H
#define PYCOLL_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* Reduction ops. AVG is not here: it is SUM followed by pycoll_scale. */
enum pycoll_op {
    PYCOLL_SUM, PYCOLL_PROD, PYCOLL_MAX, PYCOLL_MIN,
    PYCOLL_BAND, PYCOLL_BOR, PYCOLL_BXOR,
    PYCOLL_NUM_OPS
};

/* Element types. bfloat16 and float16 travel as uint16 bit patterns. */
enum pycoll_dtype {
    PYCOLL_BOOL,
    PYCOLL_INT8, PYCOLL_INT16, PYCOLL_INT32, PYCOLL_INT64,
    PYCOLL_UINT8, PYCOLL_UINT16, PYCOLL_UINT32, PYCOLL_UINT64,
    PYCOLL_FLOAT16, PYCOLL_BFLOAT16, PYCOLL_FLOAT32, PYCOLL_FLOAT64,
    PYCOLL_COMPLEX64, PYCOLL_COMPLEX128,
    PYCOLL_NUM_DTYPES
};

typedef void (*pycoll_binary_loop)(void *out, const void *a, const void *b, size_t n);

/* The dispatch table: the loop for (op, dtype), or NULL where the pair is
 * undefined (MAX on complex, bitwise ops on floating types). */
pycoll_binary_loop pycoll_reduce_loop(int op, int dtype);

/* Bytes per element of a dtype code. */
size_t pycoll_itemsize(int dtype);

/* out[i] = x[i] / divisor, for floating and complex dtypes (AVG's final
 * step). Half types divide in float32 and round once. Returns -1 for a dtype
 * that has no division. */
int pycoll_scale(int dtype, void *out, const void *x, double divisor, size_t n);

/* Widen float16/bfloat16 to float32, or round float32 to float16/bfloat16
 * (round to nearest even). Returns -1 for any other pair. */
int pycoll_convert(int src_dtype, int dst_dtype, void *out, const void *x, size_t n);

/* The instruction set of the half-precision loops: "avx512bf16", "avx512",
 * "avx2" or "baseline" (portable C; on AArch64 with its float16
 * conversion instructions). pycoll_set_half_isa picks one at or below what
 * the CPU has (the tests run every level); it returns -1 for a level the
 * CPU lacks. */
const char *pycoll_half_isa(void);
int pycoll_set_half_isa(const char *name);

/* Half-precision loops (half.c), registered in the table by loops.c. */
void pycoll_f16_sum(void *out, const void *a, const void *b, size_t n);
void pycoll_f16_prod(void *out, const void *a, const void *b, size_t n);
void pycoll_bf16_sum(void *out, const void *a, const void *b, size_t n);
void pycoll_bf16_prod(void *out, const void *a, const void *b, size_t n);
void pycoll_f16_max(void *out, const void *a, const void *b, size_t n);
void pycoll_f16_min(void *out, const void *a, const void *b, size_t n);
void pycoll_bf16_max(void *out, const void *a, const void *b, size_t n);
void pycoll_bf16_min(void *out, const void *a, const void *b, size_t n);
int pycoll_half_scale(int dtype, uint16_t *out, const uint16_t *x, float divisor, size_t n);
int pycoll_half_widen(int dtype, float *out, const uint16_t *x, size_t n);
int pycoll_half_narrow(int dtype, uint16_t *out, const float *x, size_t n);

/* memcpy with non-temporal stores (stream.c), for copies larger than the
 * last-level cache; pycoll_stream_fence orders them before later loads. */
void pycoll_stream_copy(void *dst, const void *src, size_t n);
void pycoll_stream_fence(void);

/* pages.c: which bytes of a buffer lie on huge pages. */
int pycoll_pages_ready(void);
long long pycoll_huge_bytes(const void *buf, size_t n);

#endif
