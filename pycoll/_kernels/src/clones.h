/*
 * PYCOLL_CLONES: compile a loop for x86-64-v4 (AVX-512), x86-64-v3 (AVX2,
 * FMA, F16C) and the x86-64 baseline, and let the loader pick one clone per
 * process from cpuid (gcc's target_clones, an ifunc). Elsewhere it is empty
 * and the loop is built once for the target.
 *
 * The build passes -ffp-contract=off: the v3 and v4 clones must not fuse a
 * multiply and an add (complex products would round differently from
 * numpy's and from the baseline clone). gcc 12's vectoriser still turns a
 * complex product into vfmaddsub under that flag, so a loop whose result a
 * fused multiply-add would change uses PYCOLL_CLONES_NO_FMA: AVX2 without
 * FMA (and AVX-512, which has its own FMA, left out).
 */
#ifndef PYCOLL_CLONES_H
#define PYCOLL_CLONES_H

#include <stddef.h>   /* and through it the libc feature macros below */
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && defined(__GLIBC__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define PYCOLL_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define PYCOLL_CLONES_NO_FMA __attribute__((target_clones("avx2", "default")))
#endif
#endif

#ifndef PYCOLL_CLONES
#define PYCOLL_CLONES
#define PYCOLL_CLONES_NO_FMA
#endif

#endif
