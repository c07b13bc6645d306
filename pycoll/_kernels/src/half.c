/*
 * float16 and bfloat16 loops.
 *
 * SUM, PROD, the division of AVG and the float32 conversions widen to
 * float32, compute, and round once back to 16 bits (round to nearest even),
 * exactly as numpy does for float16 and ml_dtypes for bfloat16. A NaN
 * rounds to bfloat16 as ml_dtypes does (sign kept, canonical quiet payload)
 * and to float16 as the F16C instruction does (quieted, top payload bits).
 *
 * gcc 12 does not vectorise _Float16 conversions on x86, so the float16
 * and bfloat16 arithmetic there is written with intrinsics at levels chosen
 * once at load time: AVX-512 (with or without AVX512_BF16), AVX2 + F16C,
 * and the portable C every other CPU runs ("baseline"; on AArch64 with its
 * float16 conversion instructions, and tested there under qemu by
 * tests/test_half_portable.py). Every level pushes the last values through
 * the same code as the others, from a zero-padded block, so every value is
 * computed by the same instructions whatever the buffer address or length
 * (Note [Operand order] in kernels.h).
 *
 * MAX and MIN never round: they compare and return one operand's bits
 * unchanged (NaN payloads included), as numpy.maximum does.
 */
#include <string.h>
#include "kernels.h"
#include "clones.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define PYCOLL_X86 1
#include <immintrin.h>
#endif

/* Internal op code for the division of AVG: out = a / divisor. */
#define HALF_DIV (-1)

/* ------------------------------------------------------------------ */
/* Element conversions (the portable level, and the rounding the vector levels match). */

static inline float bits_to_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint32_t f32_to_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float bf16_to_f32(uint16_t h)
{
    return bits_to_f32((uint32_t)h << 16);
}

/*
 * The conversions below have no branches: every case is computed and one
 * is selected, so that the portable loops vectorise (the select becomes a
 * blend). Checked bit for bit against the branching versions they replaced
 * on every float32 and every 16-bit input.
 *
 * pick(c, x, y) is c ? x : y (c 0 or 1) as a mask. Where x or y comes from
 * a floating-point operation, gcc turns a ?: into a branch, sinks the
 * operation into it, and then will not execute it unconditionally again
 * (under -ftrapping-math, its default, an operation may trap): the loop
 * stays scalar. A mask leaves no branch to sink into.
 */
static inline uint32_t pick(uint32_t c, uint32_t x, uint32_t y)
{
    uint32_t m = 0u - c;
    return (x & m) | (y & ~m);
}

static inline uint16_t f32_to_bf16(float f)
{
    uint32_t u = f32_to_bits(f);
    uint32_t nan = ((u >> 16) & 0x8000u) | 0x7fc0u;
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

#if defined(__aarch64__) && defined(__FLT16_MAX__) && defined(__ARM_NEON)
#include <arm_neon.h>
#define HALF_NEON 1
/* AArch64 converts float16 in hardware (FCVT; FCVTL and FCVTN in the
 * loops), by F16C's rules: a NaN is quieted and keeps its top payload
 * bits, rounding is to nearest even. tests/test_half_portable.py checks
 * the bytes against x86's under qemu-aarch64. */
static inline float f16_to_f32(uint16_t h)
{
    _Float16 x;
    memcpy(&x, &h, sizeof x);
    return (float)x;
}

static inline uint16_t f32_to_f16(float f)
{
    _Float16 x = (_Float16)f;
    uint16_t h;
    memcpy(&h, &x, sizeof h);
    return h;
}
#else
static inline float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
    /* normal: rebias the exponent */
    uint32_t normal = ((uint32_t)(h & 0x7fffu) << 13) + (112u << 23);
    /* inf, NaN (quieted) */
    uint32_t special = 0x7f800000u | (man << 13) | (man ? 0x400000u : 0u);
    /* zero or subnormal: man * 2^-24, exact in float32 */
    uint32_t subnormal = f32_to_bits((float)(int32_t)man * 0x1p-24f);
    return bits_to_f32(sign | pick(exp == 0x1f, special, pick(exp == 0, subnormal, normal)));
}

static inline uint16_t f32_to_f16(float f)
{
    uint32_t u = f32_to_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    /* NaN: quiet, top payload bits */
    uint32_t nan = 0x7e00u | ((a >> 13) & 0x1ffu);
    /* normal half: rebias, round to nearest even */
    uint32_t r = a - 0x38000000u;
    uint32_t normal = (r + 0xfffu + ((r >> 13) & 1u)) >> 13;
    /* below 2^-14: adding 0.5, whose last bit is worth 2^-24 (the half's
     * last subnormal bit), rounds there, to nearest even in the default
     * rounding mode (which every level's arithmetic assumes); the bits
     * above 0.5's are the subnormal half (0x400 when it rounds up to 2^-14) */
    uint32_t subnormal = f32_to_bits(bits_to_f32(a) + 0.5f) - 0x3f000000u;
    uint32_t finite = pick(a >= 0x477ff000u, 0x7c00u,       /* rounds to 65536 or more */
                           pick(a >= 0x38800000u, normal, subnormal));
    return (uint16_t)(sign | pick(a > 0x7f800000u, nan, finite));
}
#endif

static inline float half_to_f32(int fmt, uint16_t h)
{
    return fmt == PYCOLL_BFLOAT16 ? bf16_to_f32(h) : f16_to_f32(h);
}

static inline uint16_t f32_to_half(int fmt, float f)
{
    return fmt == PYCOLL_BFLOAT16 ? f32_to_bf16(f) : f32_to_f16(f);
}

/* x op y, or x / y for HALF_DIV. Where x is NaN the result is x: x86's
 * vector add and multiply return their first operand's NaN, and saying so
 * here keeps the portable loops to it whatever operand order the compiler
 * picks (Note [Operand order] in kernels.h) and on any architecture. */
static inline float apply(int op, float x, float y)
{
    float r = op == PYCOLL_SUM ? x + y : op == PYCOLL_PROD ? x * y : x / y;
    return bits_to_f32(pick(x != x, f32_to_bits(x), f32_to_bits(r)));
}

/* ------------------------------------------------------------------ */
/* The levels: implementations of one interface.                        */

typedef struct {
    const char *name;
    /* out[i] = round(a[i] op b[i]); for HALF_DIV, b is unused and s divides */
    void (*binary)(int fmt, int op, uint16_t *out, const uint16_t *a,
                   const uint16_t *b, float s, size_t n);
    void (*widen)(int fmt, float *out, const uint16_t *x, size_t n);
    void (*narrow)(int fmt, uint16_t *out, const float *x, size_t n);
} half_impl;

/*
 * The portable loops: a loop per format and op over blocks of BASELINE_W
 * values, each block computed in local arrays (widen, op, round: three
 * loops) and copied out, so that the compiler sees no aliasing between the
 * output and the operands (a reduction in place passes one buffer as both)
 * and vectorises each loop for whatever the target has. On x86-64's
 * baseline (SSE2) SUM in place went from 0.69 to 1.09 GB/s for float16 and
 * from 1.69 to 4.24 GB/s for bfloat16 at 1 MiB (bench_kernels.py -k
 * level, three runs). The tail goes through the same block from
 * zero-padded copies, as at the vector levels.
 */
#define BASELINE_W 32

#if defined(__GNUC__)
#define HALF_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define HALF_ALWAYS_INLINE inline
#endif

static HALF_ALWAYS_INLINE void binary_block(int fmt, int op, uint16_t *out, const uint16_t *a,
                                            const uint16_t *b, float s)
{
    float x[BASELINE_W], y[BASELINE_W];
    uint16_t r[BASELINE_W];
    for (int j = 0; j < BASELINE_W; j++) {
        x[j] = half_to_f32(fmt, a[j]);
        y[j] = op == HALF_DIV ? s : half_to_f32(fmt, b[j]);
    }
    for (int j = 0; j < BASELINE_W; j++)
        x[j] = apply(op, x[j], y[j]);
#ifdef HALF_NEON
    if (fmt == PYCOLL_FLOAT16)      /* gcc 12 vectorises the widening (FCVTL), not this */
        for (int j = 0; j < BASELINE_W; j += 4)
            vst1_u16(r + j, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(x + j))));
    else
#endif
    for (int j = 0; j < BASELINE_W; j++)
        r[j] = f32_to_half(fmt, x[j]);
    memcpy(out, r, sizeof r);
}

static HALF_ALWAYS_INLINE void binary_blocks(int fmt, int op, uint16_t *out, const uint16_t *a,
                                             const uint16_t *b, float s, size_t n)
{
    size_t i = 0;
    for (; i + BASELINE_W <= n; i += BASELINE_W)
        binary_block(fmt, op, out + i, a + i, op == HALF_DIV ? b : b + i, s);
    if (i < n) {
        uint16_t ta[BASELINE_W] = {0}, tb[BASELINE_W] = {0}, to[BASELINE_W];
        memcpy(ta, a + i, (n - i) * 2);
        if (op != HALF_DIV)
            memcpy(tb, b + i, (n - i) * 2);
        binary_block(fmt, op, to, ta, tb, s);
        memcpy(out + i, to, (n - i) * 2);
    }
}

/* fmt is a constant at each call, and so is op at each binary_blocks. */
static HALF_ALWAYS_INLINE void binary_by_op(int fmt, int op, uint16_t *out, const uint16_t *a,
                                            const uint16_t *b, float s, size_t n)
{
    if (op == PYCOLL_SUM)
        binary_blocks(fmt, PYCOLL_SUM, out, a, b, s, n);
    else if (op == PYCOLL_PROD)
        binary_blocks(fmt, PYCOLL_PROD, out, a, b, s, n);
    else
        binary_blocks(fmt, HALF_DIV, out, a, b, s, n);
}

static void binary_baseline(int fmt, int op, uint16_t *out, const uint16_t *a,
                          const uint16_t *b, float s, size_t n)
{
    if (fmt == PYCOLL_BFLOAT16)
        binary_by_op(PYCOLL_BFLOAT16, op, out, a, b, s, n);
    else
        binary_by_op(PYCOLL_FLOAT16, op, out, a, b, s, n);
}

static void widen_baseline(int fmt, float *out, const uint16_t *x, size_t n)
{
    if (fmt == PYCOLL_BFLOAT16)
        for (size_t i = 0; i < n; i++)
            out[i] = bf16_to_f32(x[i]);
    else
        for (size_t i = 0; i < n; i++)
            out[i] = f16_to_f32(x[i]);
}

static void narrow_baseline(int fmt, uint16_t *out, const float *x, size_t n)
{
    if (fmt == PYCOLL_BFLOAT16)
        for (size_t i = 0; i < n; i++)
            out[i] = f32_to_bf16(x[i]);
    else
        for (size_t i = 0; i < n; i++)
            out[i] = f32_to_f16(x[i]);
}

static const half_impl impl_baseline = {"baseline", binary_baseline, widen_baseline, narrow_baseline};

#ifdef PYCOLL_X86

/*
 * The float32 conversions per instruction set, written once as a macro
 * over the lane count W and the load/store primitives of that set. The
 * tail goes through the same body from a zero-padded block.
 */
#define HALF_CONVERT_IMPL(SUFFIX, TARGET, W, VEC, LOAD, STORE)                       \
    __attribute__((target(TARGET)))                                                \
    static void widen_##SUFFIX(int fmt, float *out, const uint16_t *x, size_t n)    \
    {                                                                               \
        size_t i = 0;                                                               \
        for (; i + W <= n; i += W) {                                                \
            VEC v = LOAD(fmt, x + i);                                               \
            memcpy(out + i, &v, sizeof v);                                          \
        }                                                                           \
        if (i < n) {                                                                \
            uint16_t t[W] = {0};                                                    \
            memcpy(t, x + i, (n - i) * 2);                                          \
            VEC v = LOAD(fmt, t);                                                   \
            memcpy(out + i, &v, (n - i) * 4);                                       \
        }                                                                           \
    }                                                                               \
    __attribute__((target(TARGET)))                                                \
    static void narrow_##SUFFIX(int fmt, uint16_t *out, const float *x, size_t n)   \
    {                                                                               \
        size_t i = 0;                                                               \
        for (; i + W <= n; i += W) {                                                \
            VEC v;                                                                  \
            memcpy(&v, x + i, sizeof v);                                            \
            STORE(fmt, out + i, v);                                                 \
        }                                                                           \
        if (i < n) {                                                                \
            float t[W] = {0};                                                       \
            uint16_t to[W];                                                         \
            VEC v;                                                                  \
            memcpy(t, x + i, (n - i) * 4);                                          \
            memcpy(&v, t, sizeof v);                                                \
            STORE(fmt, to, v);                                                      \
            memcpy(out + i, to, (n - i) * 2);                                       \
        }                                                                           \
    }

/*
 * The arithmetic: out = a op b (op SUM or PROD), or a / s (HALF_DIV), over
 * blocks of W values, BLOCK(op, out, a, b, vs) computing one block. op is
 * a constant at each expansion of NAME##_blocks, so each op gets a loop
 * of its own: one loop testing the op, the format and the tail in every
 * iteration took float16 1.3-1.5x bfloat16's time in cache. The tail
 * goes through the same block from zero-padded copies.
 */
#define HALF_OP_LOOPS(NAME, TARGET, W, VEC, SET1, BLOCK)                             \
    __attribute__((target(TARGET), always_inline))                                  \
    static inline void NAME##_blocks(int op, uint16_t *out, const uint16_t *a,      \
                                     const uint16_t *b, float s, size_t n)          \
    {                                                                               \
        const VEC vs = SET1(s);                                                     \
        size_t i = 0;                                                               \
        for (; i + W <= n; i += W)                                                  \
            BLOCK(op, out + i, a + i, op == HALF_DIV ? b : b + i, vs);              \
        if (i < n) {                                                                \
            uint16_t ta[W] = {0}, tb[W] = {0}, to[W];                               \
            memcpy(ta, a + i, (n - i) * 2);                                         \
            if (op != HALF_DIV)                                                     \
                memcpy(tb, b + i, (n - i) * 2);                                     \
            BLOCK(op, to, ta, tb, vs);                                              \
            memcpy(out + i, to, (n - i) * 2);                                       \
        }                                                                           \
    }                                                                               \
    __attribute__((target(TARGET)))                                                \
    static void NAME(int op, uint16_t *out, const uint16_t *a, const uint16_t *b,   \
                     float s, size_t n)                                             \
    {                                                                               \
        if (op == PYCOLL_SUM)                                                       \
            NAME##_blocks(PYCOLL_SUM, out, a, b, s, n);                             \
        else if (op == PYCOLL_PROD)                                                 \
            NAME##_blocks(PYCOLL_PROD, out, a, b, s, n);                            \
        else                                                                        \
            NAME##_blocks(HALF_DIV, out, a, b, s, n);                               \
    }

/* AVX-512 (F and BW): 16 lanes. bfloat16 widens by a 16-bit shift and
 * rounds with the same integer arithmetic as f32_to_bf16 above. */
__attribute__((target("avx512f")))
static inline __m512 load16(int fmt, const uint16_t *p)
{
    __m256i h = _mm256_loadu_si256((const __m256i *)p);
    if (fmt == PYCOLL_FLOAT16)
        return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* bfloat16's 16-bit words, rounded as f32_to_bf16 does, in 32-bit lanes. */
__attribute__((target("avx512f")))
static inline __m512i bf16_round32(__m512 v)
{
    __m512i u = _mm512_castps_si512(v);
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(
        _mm512_add_epi32(u, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7fff))), 16);
    __m512i nan = _mm512_or_si512(
        _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x8000)),
        _mm512_set1_epi32(0x7fc0));
    return _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), r, nan);
}

__attribute__((target("avx512f")))
static inline void store16(int fmt, uint16_t *p, __m512 v)
{
    __m256i h;
    if (fmt == PYCOLL_FLOAT16)
        h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    else
        h = _mm512_cvtepi32_epi16(bf16_round32(v));
    _mm256_storeu_si256((__m256i *)p, h);
}

/* AVX2 + F16C: 8 lanes. */
__attribute__((target("avx2,f16c")))
static inline __m256 load8(int fmt, const uint16_t *p)
{
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    if (fmt == PYCOLL_FLOAT16)
        return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* bfloat16's 16-bit words, rounded as f32_to_bf16 does, in 32-bit lanes. */
__attribute__((target("avx2,f16c")))
static inline __m256i bf16_round8(__m256 v)
{
    __m256i u = _mm256_castps_si256(v);
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(
        _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff))), 16);
    __m256i nan = _mm256_or_si256(
        _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x8000)),
        _mm256_set1_epi32(0x7fc0));
    return _mm256_blendv_epi8(r, nan, _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)));
}

__attribute__((target("avx2,f16c")))
static inline void store8(int fmt, uint16_t *p, __m256 v)
{
    __m128i h;
    if (fmt == PYCOLL_FLOAT16) {
        h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    } else {
        __m256i r = bf16_round8(v);
        h = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    }
    _mm_storeu_si128((__m128i *)p, h);
}

HALF_CONVERT_IMPL(avx512, "avx512f", 16, __m512, load16, store16)

/* x + y and x * y with x the first source operand, written out: where both
 * are NaN, x86 returns the first source's payload, and gcc, which takes
 * addition and multiplication as commutative, swapped the operands of
 * _mm512_add_ps in float16's per-op loop (test_half_levels_agree_bitwise
 * caught it: 53 of 65536 patterns carried b's NaN). Every vector loop's
 * add and multiply below goes through these. REG is the register
 * constraint of VEC: "v" reaches zmm0-31, "x" ymm0-15. */
#define ORDERED_OP(NAME, TARGET, VEC, INSN, REG)                                    \
    __attribute__((target(TARGET)))                                                \
    static inline VEC NAME(VEC x, VEC y)                                            \
    {                                                                               \
        VEC r;                                                                      \
        __asm__(INSN " %2, %1, %0" : "=" REG(r) : REG(x), REG(y));                  \
        return r;                                                                   \
    }

/* applyW(op, x, y, s): x + y, x * y, or for HALF_DIV x / s. */
#define HALF_ARITH(W, TARGET, VEC, REG, DIV)                                         \
    ORDERED_OP(add##W##_ordered, TARGET, VEC, "vaddps", REG)                        \
    ORDERED_OP(mul##W##_ordered, TARGET, VEC, "vmulps", REG)                        \
    __attribute__((target(TARGET)))                                                \
    static inline VEC apply##W(int op, VEC x, VEC y, VEC s)                         \
    {                                                                               \
        return op == PYCOLL_SUM ? add##W##_ordered(x, y)                            \
             : op == PYCOLL_PROD ? mul##W##_ordered(x, y) : DIV(x, s);              \
    }

HALF_ARITH(16, "avx512f", __m512, "v", _mm512_div_ps)

/*
 * bfloat16 arithmetic at 32 lanes: interleaving each bfloat16 with a zero
 * 16-bit word (unpacklo/hi) gives its float32 directly, and packus puts the
 * rounded words back where they came from, since both work within the same
 * 128-bit lanes. No lane-crossing widen or narrow: 1.4x the 16-lane loop
 * here, the same bits.
 */

__attribute__((target("avx512f,avx512bw")))
static inline void bf16_block_avx512(int op, uint16_t *po, const uint16_t *pa,
                                     const uint16_t *pb, __m512 vs)
{
    const __m512i zero = _mm512_setzero_si512();
    __m512i x = _mm512_loadu_si512(pa), y = _mm512_loadu_si512(pb);
    __m512 lo = apply16(op, _mm512_castsi512_ps(_mm512_unpacklo_epi16(zero, x)),
                           _mm512_castsi512_ps(_mm512_unpacklo_epi16(zero, y)), vs);
    __m512 hi = apply16(op, _mm512_castsi512_ps(_mm512_unpackhi_epi16(zero, x)),
                           _mm512_castsi512_ps(_mm512_unpackhi_epi16(zero, y)), vs);
    _mm512_storeu_si512(po, _mm512_packus_epi32(bf16_round32(lo), bf16_round32(hi)));
}

HALF_OP_LOOPS(bf16_binary_avx512, "avx512f,avx512bw", 32, __m512, _mm512_set1_ps,
              bf16_block_avx512)

/*
 * float16 at AVX-512: 32 values per block, two 16-lane halves. Each value
 * goes through VCVTPH2PS, the op and VCVTPS2PH rounding to nearest even.
 */
__attribute__((target("avx512f")))
static inline __m512 f16_load16(const uint16_t *p)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

__attribute__((target("avx512f")))
static inline void f16_store16(uint16_t *p, __m512 v)
{
    _mm256_storeu_si256((__m256i *)p,
                        _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}


__attribute__((target("avx512f"), always_inline))
static inline void f16_block_avx512(int op, uint16_t *po, const uint16_t *pa,
                                    const uint16_t *pb, __m512 vs)
{
    /* op is a constant here (HALF_OP_LOOPS), so HALF_DIV reads no b. */
    __m512 lo = apply16(op, f16_load16(pa), op == HALF_DIV ? vs : f16_load16(pb), vs);
    __m512 hi = apply16(op, f16_load16(pa + 16), op == HALF_DIV ? vs : f16_load16(pb + 16), vs);
    f16_store16(po, lo);
    f16_store16(po + 16, hi);
}

HALF_OP_LOOPS(f16_binary_avx512, "avx512f", 32, __m512, _mm512_set1_ps, f16_block_avx512)

__attribute__((target("avx512f,avx512bw")))
static void binary_avx512(int fmt, int op, uint16_t *out, const uint16_t *a,
                          const uint16_t *b, float s, size_t n)
{
    if (fmt == PYCOLL_BFLOAT16)
        bf16_binary_avx512(op, out, a, b, s, n);
    else
        f16_binary_avx512(op, out, a, b, s, n);
}

static const half_impl impl_avx512 = {"avx512", binary_avx512, widen_avx512,
                                      narrow_avx512};

/*
 * AVX512_BF16: VCVTNE2PS2BF16 rounds 32 float32 values to nearest even in
 * one instruction, the rounding of f32_to_bf16, except that it reads a
 * subnormal input as zero and keeps a NaN's payload (f32_to_bf16 and
 * ml_dtypes give the canonical quiet NaN). A block of 32 whose float32
 * values hold either (VFPCLASSPS: QNaN, SNaN, denormal) is rounded by
 * f32_to_bf16 instead, so the bits are those of every other level.
 * Widening is exact at any level: a 16-bit shift.
 */
#define BF16_SPECIAL 0xA1

__attribute__((target("avx512f,avx512bw,avx512dq,avx512bf16")))
static inline __m512 bf16_widen16(const uint16_t *p)
{
    __m256i h = _mm256_loadu_si256((const __m256i *)p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

__attribute__((target("avx512f,avx512bw,avx512dq,avx512bf16")))
static inline void bf16_round_store32(uint16_t *p, __m512 lo, __m512 hi)
{
    if (_mm512_fpclass_ps_mask(lo, BF16_SPECIAL) | _mm512_fpclass_ps_mask(hi, BF16_SPECIAL)) {
        float f[32];
        _mm512_storeu_ps(f, lo);
        _mm512_storeu_ps(f + 16, hi);
        for (int j = 0; j < 32; j++)
            p[j] = f32_to_bf16(f[j]);
        return;
    }
    _mm512_storeu_si512(p, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
}

__attribute__((target("avx512f,avx512bw,avx512dq,avx512bf16")))
static inline void bf16_block_avx512bf16(int op, uint16_t *po, const uint16_t *pa,
                                         const uint16_t *pb, __m512 vs)
{
    __m512 lo = apply16(op, bf16_widen16(pa), bf16_widen16(pb), vs);
    __m512 hi = apply16(op, bf16_widen16(pa + 16), bf16_widen16(pb + 16), vs);
    bf16_round_store32(po, lo, hi);
}

HALF_OP_LOOPS(bf16_binary_avx512bf16, "avx512f,avx512bw,avx512dq,avx512bf16", 32, __m512,
              _mm512_set1_ps, bf16_block_avx512bf16)

__attribute__((target("avx512f,avx512bw,avx512dq,avx512bf16")))
static void binary_avx512bf16(int fmt, int op, uint16_t *out, const uint16_t *a,
                              const uint16_t *b, float s, size_t n)
{
    if (fmt == PYCOLL_BFLOAT16)
        bf16_binary_avx512bf16(op, out, a, b, s, n);
    else
        f16_binary_avx512(op, out, a, b, s, n);
}

__attribute__((target("avx512f,avx512bw,avx512dq,avx512bf16")))
static void narrow_avx512bf16(int fmt, uint16_t *out, const float *x, size_t n)
{
    size_t i = 0;
    if (fmt == PYCOLL_BFLOAT16)
        for (; i + 32 <= n; i += 32)
            bf16_round_store32(out + i, _mm512_loadu_ps(x + i), _mm512_loadu_ps(x + i + 16));
    narrow_avx512(fmt, out + i, x + i, n - i);
}

static const half_impl impl_avx512bf16 = {"avx512bf16", binary_avx512bf16, widen_avx512,
                                          narrow_avx512bf16};

/*
 * AVX2 + F16C: 16 values per block, two 8-lane halves. float16 converts
 * with VCVTPH2PS and VCVTPS2PH; bfloat16 widens by interleaving each value
 * with a zero word and packs the rounded words back (both within 128-bit
 * lanes, as at AVX-512), rounding with f32_to_bf16's integer arithmetic.
 * The add and multiply keep a first, as at AVX-512.
 */
HALF_CONVERT_IMPL(avx2, "avx2,f16c", 8, __m256, load8, store8)

HALF_ARITH(8, "avx2,f16c", __m256, "x", _mm256_div_ps)

__attribute__((target("avx2,f16c"), always_inline))
static inline __m256 f16_half8(const uint16_t *p, int half)
{
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 8 * half)));
}

__attribute__((target("avx2,f16c"), always_inline))
static inline void f16_block_avx2(int op, uint16_t *po, const uint16_t *pa,
                                  const uint16_t *pb, __m256 vs)
{
    __m256 lo = apply8(op, f16_half8(pa, 0), op == HALF_DIV ? vs : f16_half8(pb, 0), vs);
    __m256 hi = apply8(op, f16_half8(pa, 1), op == HALF_DIV ? vs : f16_half8(pb, 1), vs);
    _mm_storeu_si128((__m128i *)po, _mm256_cvtps_ph(lo, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    _mm_storeu_si128((__m128i *)(po + 8),
                     _mm256_cvtps_ph(hi, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

/* half 0: the values of each 128-bit lane's low four words; 1: the high. */
__attribute__((target("avx2,f16c"), always_inline))
static inline __m256 bf16_half8(const uint16_t *p, int half)
{
    __m256i x = _mm256_loadu_si256((const __m256i *)p), zero = _mm256_setzero_si256();
    return _mm256_castsi256_ps(half ? _mm256_unpackhi_epi16(zero, x)
                                    : _mm256_unpacklo_epi16(zero, x));
}

__attribute__((target("avx2,f16c"), always_inline))
static inline void bf16_block_avx2(int op, uint16_t *po, const uint16_t *pa,
                                   const uint16_t *pb, __m256 vs)
{
    __m256 lo = apply8(op, bf16_half8(pa, 0), op == HALF_DIV ? vs : bf16_half8(pb, 0), vs);
    __m256 hi = apply8(op, bf16_half8(pa, 1), op == HALF_DIV ? vs : bf16_half8(pb, 1), vs);
    _mm256_storeu_si256((__m256i *)po, _mm256_packus_epi32(bf16_round8(lo), bf16_round8(hi)));
}

HALF_OP_LOOPS(f16_binary_avx2, "avx2,f16c", 16, __m256, _mm256_set1_ps, f16_block_avx2)
HALF_OP_LOOPS(bf16_binary_avx2, "avx2,f16c", 16, __m256, _mm256_set1_ps, bf16_block_avx2)

__attribute__((target("avx2,f16c")))
static void binary_avx2(int fmt, int op, uint16_t *out, const uint16_t *a, const uint16_t *b,
                        float s, size_t n)
{
    if (fmt == PYCOLL_BFLOAT16)
        bf16_binary_avx2(op, out, a, b, s, n);
    else
        f16_binary_avx2(op, out, a, b, s, n);
}

static const half_impl impl_avx2 = {"avx2", binary_avx2, widen_avx2, narrow_avx2};

static const half_impl *detect_impl(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) {
        if (__builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bf16"))
            return &impl_avx512bf16;
        return &impl_avx512;
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c"))
        return &impl_avx2;
    return &impl_baseline;
}
#else
static const half_impl *detect_impl(void)
{
    return &impl_baseline;
}
#endif

/* Chosen on first use; pycoll_set_half_isa lets the tests run every level. */
static const half_impl *impl;

static inline const half_impl *current(void)
{
    if (!impl)
        impl = detect_impl();
    return impl;
}

const char *pycoll_half_isa(void)
{
    return current()->name;
}

int pycoll_set_half_isa(const char *name)
{
    const half_impl *best = detect_impl();
    const half_impl *all[] = {
#ifdef PYCOLL_X86
        &impl_avx512bf16, &impl_avx512, &impl_avx2,
#endif
        &impl_baseline,
    };
    int usable = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (all[i] == best)
            usable = 1;            /* the detected level and those below it */
        if (usable && strcmp(all[i]->name, name) == 0) {
            impl = all[i];
            return 0;
        }
    }
    return -1;
}

/* ------------------------------------------------------------------ */
/* Entry points registered in the dispatch table (loops.c).             */

void pycoll_f16_sum(void *out, const void *a, const void *b, size_t n)
{
    current()->binary(PYCOLL_FLOAT16, PYCOLL_SUM, out, a, b, 0.0f, n);
}

void pycoll_f16_prod(void *out, const void *a, const void *b, size_t n)
{
    current()->binary(PYCOLL_FLOAT16, PYCOLL_PROD, out, a, b, 0.0f, n);
}

void pycoll_bf16_sum(void *out, const void *a, const void *b, size_t n)
{
    current()->binary(PYCOLL_BFLOAT16, PYCOLL_SUM, out, a, b, 0.0f, n);
}

void pycoll_bf16_prod(void *out, const void *a, const void *b, size_t n)
{
    current()->binary(PYCOLL_BFLOAT16, PYCOLL_PROD, out, a, b, 0.0f, n);
}

int pycoll_half_scale(int dtype, uint16_t *out, const uint16_t *x, float divisor, size_t n)
{
    if (dtype != PYCOLL_FLOAT16 && dtype != PYCOLL_BFLOAT16)
        return -1;
    current()->binary(dtype, HALF_DIV, out, x, x, divisor, n);
    return 0;
}

int pycoll_half_widen(int dtype, float *out, const uint16_t *x, size_t n)
{
    if (dtype != PYCOLL_FLOAT16 && dtype != PYCOLL_BFLOAT16)
        return -1;
    current()->widen(dtype, out, x, n);
    return 0;
}

int pycoll_half_narrow(int dtype, uint16_t *out, const float *x, size_t n)
{
    if (dtype != PYCOLL_FLOAT16 && dtype != PYCOLL_BFLOAT16)
        return -1;
    current()->narrow(dtype, out, x, n);
    return 0;
}

/*
 * MAX and MIN compare without rounding. A half-precision bit pattern maps to
 * an integer key that orders like the value, with -0 and +0 equal; NaN is
 * tested on the bits. The rule is numpy's: max(a, b) = a if a > b or a is
 * NaN, else b (so b wins ties, and the first NaN wins).
 */
static inline int32_t order_key(uint16_t h)
{
    int32_t mag = h & 0x7fff;
    return (h & 0x8000) ? -mag : mag;
}

#define HALF_MINMAX(NAME, INF, CMP)                                                 \
    PYCOLL_CLONES void NAME(void *out_, const void *a_, const void *b_, size_t n)   \
    {                                                                               \
        uint16_t *out = out_;                                                       \
        const uint16_t *a = a_, *b = b_;                                            \
        for (size_t i = 0; i < n; i++) {                                            \
            uint16_t x = a[i], y = b[i];                                            \
            int x_nan = (x & 0x7fff) > (INF), y_nan = (y & 0x7fff) > (INF);         \
            int x_wins = x_nan | (!y_nan & (order_key(x) CMP order_key(y)));        \
            out[i] = x_wins ? x : y;                                                \
        }                                                                           \
    }

HALF_MINMAX(pycoll_f16_max, 0x7c00, >)
HALF_MINMAX(pycoll_f16_min, 0x7c00, <)
HALF_MINMAX(pycoll_bf16_max, 0x7f80, >)
HALF_MINMAX(pycoll_bf16_min, 0x7f80, <)
