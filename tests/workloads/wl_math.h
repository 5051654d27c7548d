/*
 * wl_math.h: the per-element arithmetic of the workload kernels, shared by the
 * emulated module (wl_kernels.c, plain C) and the CUDA C kernels
 * (wl_kernels.cu), so that both compute bit-identical results.
 *
 * Rules that keep the two identical: integer math wraps modulo 2^32; the only
 * floating-point operations are one multiply and one add with separate
 * rounding (C: -ffp-contract=off, nvcc: -fmad=false) on finite, normal
 * values built from integers below 2^24, so no NaN payloads, no denormals
 * and no fused multiply-add can make the results differ.
 */
#ifndef WL_MATH_H
#define WL_MATH_H

#include <string.h>
#ifdef __CUDACC__
#define WL_FN static __host__ __device__ __forceinline__
#else
#include <stdint.h>
#define WL_FN static inline
#endif

WL_FN unsigned wl_rotl(unsigned x, unsigned r) { return (x << r) | (x >> (32u - r)); }

/* A 32-bit finalizer (murmur3 fmix32). */
WL_FN unsigned wl_hash(unsigned x)
{
    x ^= x >> 16; x *= 0x85ebca6bu;
    x ^= x >> 13; x *= 0xc2b2ae35u;
    x ^= x >> 16;
    return x;
}

/* Device code uses the intrinsic; host code (C, and nvcc's host pass for the
 * runtime workloads) copies the bytes. */
WL_FN unsigned wl_float_bits(float f)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    unsigned u;
    memcpy(&u, &f, sizeof u);
    return u;
#endif
}

/* wl_seed: first-layer element: input, salt, previous result. */
WL_FN unsigned wl_seed_elem(unsigned in, unsigned prev, unsigned salt, unsigned e)
{
    return wl_hash(in + salt + e * 0x9e3779b9u) ^ prev;
}

/* wl_mix: combine x into y (x may alias y: one element read, then written). */
WL_FN unsigned wl_mix_elem(unsigned x, unsigned y, unsigned k)
{
    return wl_rotl(y ^ (x * 0x9e3779b1u), 13) + k;
}

/* wl_fscale: y ^ x ^ bits(a * float(x & 0xffffff) + b), two roundings. */
WL_FN unsigned wl_fscale_elem(unsigned x, unsigned y, float a, float b)
{
    float f = (float)(x & 0xffffffu);
    float p = a * f;
    float r = p + b;
    return wl_float_bits(r) ^ x ^ y;
}

/* wl_stencil: element e of the output from x[e-1], x[e], x[e+1] (cyclic). */
WL_FN unsigned wl_stencil_elem(unsigned left, unsigned mid, unsigned right)
{
    return mid ^ wl_rotl(right, 7) ^ (left >> 3);
}

#endif /* WL_MATH_H */
