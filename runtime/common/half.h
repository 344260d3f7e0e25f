/*
 * half.h — bf16/f16 <-> f32 conversion and dtype-generic element load/store,
 * compiled both as C (CPU backend) and as CUDA C++ (device code). Arithmetic
 * is always f32; 16-bit types are storage only. Rounding is to nearest even,
 * NaN stays NaN, f16 overflow gives infinity, f16 subnormals are exact.
 */
#ifndef COLRT_HALF_H
#define COLRT_HALF_H

#include <math.h>
#include <stdint.h>

#include "colossal/colrt.h"

#ifdef __CUDACC__
#define COLRT_HD __host__ __device__ __forceinline__
#else
#define COLRT_HD __attribute__((always_inline)) inline
#endif

COLRT_HD static float colrt_bits_f32(uint32_t u) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    union { uint32_t u; float f; } c;
    c.u = u;
    return c.f;
#endif
}

COLRT_HD static uint32_t colrt_f32_bits(float f) {
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    union { uint32_t u; float f; } c;
    c.f = f;
    return c.u;
#endif
}

COLRT_HD static float colrt_bf16_f32(uint16_t h) { return colrt_bits_f32((uint32_t)h << 16); }

COLRT_HD static uint16_t colrt_f32_bf16(float f) {
    uint32_t x = colrt_f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

COLRT_HD static float colrt_f16_f32(uint16_t h) {
    uint32_t s = (uint32_t)(h >> 15) << 31, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        float v = (float)m * 5.9604644775390625e-8f; /* m * 2^-24 */
        return s ? -v : v;
    }
    if (e == 31) return colrt_bits_f32(s | 0x7f800000u | (m << 13));
    return colrt_bits_f32(s | ((e + 112u) << 23) | (m << 13));
}

COLRT_HD static uint16_t colrt_f32_f16(float f) {
    uint32_t x = colrt_f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    x &= 0x7fffffffu;
    if (x > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);  /* NaN */
    if (x >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
    if (x < 0x38800000u) {                                   /* below 2^-14: subnormal */
        uint32_t m = (uint32_t)rintf(colrt_bits_f32(x) * 16777216.0f);
        return (uint16_t)(sign | m);
    }
    uint32_t h = (((x >> 23) - 112u) << 10) | ((x & 0x7fffffu) >> 13);
    uint32_t rem = x & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;
    return (uint16_t)(sign | h);
}

/* Element i of p, stored as t, as f32 (I32 converts the integer). */
COLRT_HD static float colrt_ld(const void *p, int t, int64_t i) {
    switch (t) {
    case COLRT_F32: return ((const float *)p)[i];
    case COLRT_BF16: return colrt_bf16_f32(((const uint16_t *)p)[i]);
    case COLRT_F16: return colrt_f16_f32(((const uint16_t *)p)[i]);
    default: return (float)((const int32_t *)p)[i];
    }
}

COLRT_HD static void colrt_st(void *p, int t, int64_t i, float v) {
    switch (t) {
    case COLRT_F32: ((float *)p)[i] = v; break;
    case COLRT_BF16: ((uint16_t *)p)[i] = colrt_f32_bf16(v); break;
    case COLRT_F16: ((uint16_t *)p)[i] = colrt_f32_f16(v); break;
    default: ((int32_t *)p)[i] = (int32_t)v; break;
    }
}

#endif
