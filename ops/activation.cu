// GELU, tanh approximation, and its gradient (ops/activation.py), in numpy's evaluation
// order without FMA contraction; only tanh may differ from numpy's in the last bit.
#include "common.cuh"

#define GELU_C 0.7978845608028654
#define GELU_A 0.044715
#define GELU_A3 0.134145

// th = tanh(c * (x + a * (x*x*x)))
template <typename T>
__device__ __forceinline__ T gelu_tanh(T x, T x2) {
    return tanh_t(mul_rn(T(GELU_C), add_rn(x, mul_rn(T(GELU_A), mul_rn(x2, x)))));
}

// y = (0.5 * x) * (1 + th)
template <typename T>
__device__ __forceinline__ void gelu_fwd_t(T* y, const T* x, i64 n) {
    for (i64 i = global_thread(); i < n; i += global_stride()) {
        const T v = x[i], th = gelu_tanh(v, mul_rn(v, v));
        y[i] = mul_rn(mul_rn(T(0.5), v), add_rn(T(1), th));
    }
}

// dx = dy * (0.5*(1 + th) + (0.5*x) * ((1 - th*th) * (c * (1 + 3a*x^2))))
template <typename T>
__device__ __forceinline__ void gelu_bwd_t(T* dx, const T* x, const T* dy, i64 n) {
    for (i64 i = global_thread(); i < n; i += global_stride()) {
        const T v = x[i], v2 = mul_rn(v, v), th = gelu_tanh(v, v2);
        const T du = mul_rn(T(GELU_C), add_rn(T(1), mul_rn(T(GELU_A3), v2)));
        const T slope = add_rn(mul_rn(T(0.5), add_rn(T(1), th)),
                               mul_rn(mul_rn(T(0.5), v), mul_rn(sub_rn(T(1), mul_rn(th, th)), du)));
        dx[i] = mul_rn(dy[i], slope);
    }
}

KERNEL void gelu_fwd(float* y, const float* x, i64 n) { gelu_fwd_t(y, x, n); }
KERNEL void gelu_fwd_f64(double* y, const double* x, i64 n) { gelu_fwd_t(y, x, n); }
KERNEL void gelu_bwd(float* dx, const float* x, const float* dy, i64 n) { gelu_bwd_t(dx, x, dy, n); }
KERNEL void gelu_bwd_f64(double* dx, const double* x, const double* dy, i64 n) { gelu_bwd_t(dx, x, dy, n); }
