// Helpers shared by every op family's .cu file. engine/backends/nvrtc.py pastes this
// file in place of the `#include "common.cuh"` line before NVRTC compiles a family, so
// each .cu file is also a valid translation unit for nvcc.
//
// Conventions:
// - Every kernel is a template over the element type T (float, double) with thin
//   extern "C" wrappers: NAME for float, NAME_f64 for double.
// - Flat element counts and flat offsets are 64-bit (long long); shapes are int.
// - Arithmetic that must give numpy's bits (element-wise ops, the optimizer update,
//   normalisation) goes through mul_rn/add_rn/sub_rn, which the compiler never fuses
//   into an FMA; GEMM inner products use fma on purpose.
// - Reductions are deterministic: a fixed block size, each thread accumulating a fixed
//   strided subset in order, then a fixed tree in shared memory. No atomics anywhere.
#pragma once

#define KERNEL extern "C" __global__
#define REDUCE_THREADS 256

typedef long long i64;
typedef unsigned long long u64;

__device__ __forceinline__ float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ __forceinline__ double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ __forceinline__ float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ double add_rn(double a, double b) { return __dadd_rn(a, b); }
__device__ __forceinline__ float sub_rn(float a, float b) { return __fsub_rn(a, b); }
__device__ __forceinline__ double sub_rn(double a, double b) { return __dsub_rn(a, b); }

__device__ __forceinline__ float exp_t(float x) { return expf(x); }
__device__ __forceinline__ double exp_t(double x) { return exp(x); }
__device__ __forceinline__ float log_t(float x) { return logf(x); }
__device__ __forceinline__ double log_t(double x) { return log(x); }
__device__ __forceinline__ float tanh_t(float x) { return tanhf(x); }
__device__ __forceinline__ double tanh_t(double x) { return tanh(x); }
__device__ __forceinline__ float sqrt_t(float x) { return sqrtf(x); }
__device__ __forceinline__ double sqrt_t(double x) { return sqrt(x); }
__device__ __forceinline__ float sin_t(float x) { return sinf(x); }
__device__ __forceinline__ double sin_t(double x) { return sin(x); }
__device__ __forceinline__ float cos_t(float x) { return cosf(x); }
__device__ __forceinline__ double cos_t(double x) { return cos(x); }
__device__ __forceinline__ float erf_t(float x) { return erff(x); }
__device__ __forceinline__ double erf_t(double x) { return erf(x); }
__device__ __forceinline__ float pow_t(float x, float e) { return powf(x, e); }
__device__ __forceinline__ double pow_t(double x, double e) { return pow(x, e); }

template <typename T> __device__ __forceinline__ T neg_inf();
template <> __device__ __forceinline__ float neg_inf<float>() { return __int_as_float(0xff800000); }
template <> __device__ __forceinline__ double neg_inf<double>() { return __longlong_as_double(0xfff0000000000000ULL); }

template <typename T> __device__ __forceinline__ T quiet_nan();
template <> __device__ __forceinline__ float quiet_nan<float>() { return __int_as_float(0x7fc00000); }
template <> __device__ __forceinline__ double quiet_nan<double>() { return __longlong_as_double(0x7ff8000000000000ULL); }

// 16-byte vectors: float4 holds 4 floats, double2 holds 2 doubles.
template <typename T> struct Vec16;
template <> struct Vec16<float> { typedef float4 type; static constexpr int lanes = 4; };
template <> struct Vec16<double> { typedef double2 type; static constexpr int lanes = 2; };

__device__ __forceinline__ bool aligned16(const void* p) {
    return (reinterpret_cast<u64>(p) & 15ULL) == 0;
}

__device__ __forceinline__ i64 global_thread() {
    return (i64)blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ i64 global_stride() {
    return (i64)gridDim.x * blockDim.x;
}

// Sum of one value per thread over a block of REDUCE_THREADS threads, in a fixed tree
// order; every thread gets the result. `scratch` holds REDUCE_THREADS values.
template <typename T>
__device__ __forceinline__ T block_sum(T v, T* scratch) {
    const int t = threadIdx.x;
    scratch[t] = v;
    __syncthreads();
#pragma unroll
    for (int half = REDUCE_THREADS / 2; half > 0; half >>= 1) {
        if (t < half) scratch[t] = scratch[t] + scratch[t + half];
        __syncthreads();
    }
    T r = scratch[0];
    __syncthreads();
    return r;
}

// A row's mean and 1/sqrt(biased variance + eps) over D values, numpy's order: the sum of x,
// then the sum of squared deviations (layer norm's rows, instance norm's planes).
template <typename T>
__device__ __forceinline__ void row_mean_invstd(const T* xr, int D, T eps, T* scratch, T* mean, T* invstd) {
    T s = T(0);
    for (int j = threadIdx.x; j < D; j += REDUCE_THREADS) s = add_rn(s, xr[j]);
    const T mu = block_sum(s, scratch) / T(D);
    T q = T(0);
    for (int j = threadIdx.x; j < D; j += REDUCE_THREADS) {
        const T c = sub_rn(xr[j], mu);
        q = add_rn(q, mul_rn(c, c));
    }
    *mean = mu;
    *invstd = T(1) / sqrt_t(add_rn(block_sum(q, scratch) / T(D), eps));
}

// Maximum over a block (NaN-propagating, like numpy's max).
template <typename T>
__device__ __forceinline__ T block_max(T v, T* scratch) {
    const int t = threadIdx.x;
    scratch[t] = v;
    __syncthreads();
#pragma unroll
    for (int half = REDUCE_THREADS / 2; half > 0; half >>= 1) {
        if (t < half) {
            T a = scratch[t], b = scratch[t + half];
            scratch[t] = (a != a || a >= b) ? a : b;
        }
        __syncthreads();
    }
    T r = scratch[0];
    __syncthreads();
    return r;
}

// Warp-level sum in a fixed butterfly-free order (lane 0 gets the result).
template <typename T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v = v + __shfl_down_sync(0xffffffffu, v, off);
    return v;
}

// Element-wise maps over n elements, vectorised with 16-byte loads and stores when every
// pointer is 16-byte aligned, grid-stride otherwise. Outputs may alias inputs: each
// element is read and written by one thread, reads first.
template <typename T, class F>
__device__ __forceinline__ void map1(T* y, const T* x, i64 n, F f) {
    typedef typename Vec16<T>::type V;
    constexpr int L = Vec16<T>::lanes;
    const i64 tid = global_thread(), stride = global_stride();
    i64 done = 0;
    if (aligned16(y) && aligned16(x)) {
        const i64 nv = n / L;
        for (i64 i = tid; i < nv; i += stride) {
            V a = reinterpret_cast<const V*>(x)[i];
            V r;
            const T* pa = reinterpret_cast<const T*>(&a);
            T* pr = reinterpret_cast<T*>(&r);
#pragma unroll
            for (int k = 0; k < L; ++k) pr[k] = f(pa[k]);
            reinterpret_cast<V*>(y)[i] = r;
        }
        done = nv * L;
    }
    for (i64 i = done + tid; i < n; i += stride) y[i] = f(x[i]);
}

template <typename T, class F>
__device__ __forceinline__ void map2(T* y, const T* a, const T* b, i64 n, F f) {
    typedef typename Vec16<T>::type V;
    constexpr int L = Vec16<T>::lanes;
    const i64 tid = global_thread(), stride = global_stride();
    i64 done = 0;
    if (aligned16(y) && aligned16(a) && aligned16(b)) {
        const i64 nv = n / L;
        for (i64 i = tid; i < nv; i += stride) {
            V va = reinterpret_cast<const V*>(a)[i];
            V vb = reinterpret_cast<const V*>(b)[i];
            V r;
            const T* pa = reinterpret_cast<const T*>(&va);
            const T* pb = reinterpret_cast<const T*>(&vb);
            T* pr = reinterpret_cast<T*>(&r);
#pragma unroll
            for (int k = 0; k < L; ++k) pr[k] = f(pa[k], pb[k]);
            reinterpret_cast<V*>(y)[i] = r;
        }
        done = nv * L;
    }
    for (i64 i = done + tid; i < n; i += stride) y[i] = f(a[i], b[i]);
}

// Calls f(i, j, p, q) for every output window (p, q) of a strided, padded 2-D window (any
// dims with KH, KW, sh, sw, ph, pw, OH, OW: pooling's and convolution's) that covers input
// pixel (h, w) at window offset (i, j), in row-major offset order: gradients that add over
// the windows add in one fixed order. Offsets are taps dh, dw apart (a dilated convolution's).
template <typename Dims, typename F>
__device__ __forceinline__ void for_each_window_over(int h, int w, const Dims& d, F f, int dh = 1, int dw = 1) {
    for (int i = 0; i < d.KH; ++i) {
        const int hp = h + d.ph - i * dh;
        if (hp < 0 || hp % d.sh) continue;
        const int p = hp / d.sh;
        if (p >= d.OH) continue;
        for (int j = 0; j < d.KW; ++j) {
            const int wp = w + d.pw - j * dw;
            if (wp < 0 || wp % d.sw) continue;
            const int q = wp / d.sw;
            if (q >= d.OW) continue;
            f(i, j, p, q);
        }
    }
}

// Calls f(i, j, h, w) for every input pixel (h, w) inside the d.H x d.W image that output
// window (p, q) covers at window offset (i, j), in row-major offset order (padding skipped),
// taps dh, dw apart.
template <typename Dims, typename F>
__device__ __forceinline__ void for_each_pixel_in(int p, int q, const Dims& d, F f, int dh = 1, int dw = 1) {
    for (int i = 0; i < d.KH; ++i) {
        const int h = p * d.sh - d.ph + i * dh;
        if ((unsigned)h >= (unsigned)d.H) continue;
        for (int j = 0; j < d.KW; ++j) {
            const int w = q * d.sw - d.pw + j * dw;
            if ((unsigned)w >= (unsigned)d.W) continue;
            f(i, j, h, w);
        }
    }
}
