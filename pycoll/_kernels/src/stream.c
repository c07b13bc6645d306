/*
 * Copies for the pack kernels. A large pack (a fusion bucket bigger than
 * the last-level cache) is written with non-temporal stores, as glibc's
 * memcpy does for one large copy: the packed buffer cannot stay in cache
 * anyway, and streaming it out avoids reading every destination line first.
 * SSE2 streaming stores are part of the x86-64 baseline.
 */
#include <string.h>
#include "kernels.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <emmintrin.h>

void pycoll_stream_copy(void *dst_, const void *src_, size_t n)
{
    char *dst = dst_;
    const char *src = src_;
    size_t head = (16 - ((uintptr_t)dst & 15)) & 15;
    if (head > n)
        head = n;
    memcpy(dst, src, head);
    dst += head, src += head, n -= head;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)(src + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(src + i + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(src + i + 32));
        __m128i d = _mm_loadu_si128((const __m128i *)(src + i + 48));
        _mm_stream_si128((__m128i *)(dst + i), a);
        _mm_stream_si128((__m128i *)(dst + i + 16), b);
        _mm_stream_si128((__m128i *)(dst + i + 32), c);
        _mm_stream_si128((__m128i *)(dst + i + 48), d);
    }
    memcpy(dst + i, src + i, n - i);
}

void pycoll_stream_fence(void)
{
    _mm_sfence();
}
#else
void pycoll_stream_copy(void *dst, const void *src, size_t n)
{
    memcpy(dst, src, n);
}

void pycoll_stream_fence(void)
{
}
#endif
