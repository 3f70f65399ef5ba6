// GELU, the tanh approximation and the exact (erf) form, and its gradient (ops/activation.py),
// in numpy's evaluation order without FMA contraction; only tanh, erf and exp may differ from
// numpy's in the last bit.
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

// Exact GELU (approximate="none"), in PyTorch's evaluation order:
//   y = (x * 0.5) * (1 + erf(x * M_SQRT1_2))
//   dx = dy * (0.5 * (1 + erf(x * M_SQRT1_2)) + x * (kBeta * exp((x*x) * -0.5))), kBeta = 1/sqrt(2 pi)
#define GELU_SQRT1_2 0.7071067811865476
#define GELU_BETA 0.3989422804014327

template <typename T>
__device__ __forceinline__ void gelu_erf_fwd_t(T* y, const T* x, i64 n) {
    for (i64 i = global_thread(); i < n; i += global_stride()) {
        const T v = x[i];
        y[i] = mul_rn(mul_rn(v, T(0.5)), add_rn(T(1), erf_t(mul_rn(v, T(GELU_SQRT1_2)))));
    }
}

template <typename T>
__device__ __forceinline__ void gelu_erf_bwd_t(T* dx, const T* x, const T* dy, i64 n) {
    for (i64 i = global_thread(); i < n; i += global_stride()) {
        const T v = x[i];
        const T cdf = mul_rn(T(0.5), add_rn(T(1), erf_t(mul_rn(v, T(GELU_SQRT1_2)))));
        const T pdf = mul_rn(T(GELU_BETA), exp_t(mul_rn(mul_rn(v, v), T(-0.5))));
        dx[i] = mul_rn(dy[i], add_rn(cdf, mul_rn(v, pdf)));
    }
}

KERNEL void gelu_erf_fwd(float* y, const float* x, i64 n) { gelu_erf_fwd_t(y, x, n); }
KERNEL void gelu_erf_fwd_f64(double* y, const double* x, i64 n) { gelu_erf_fwd_t(y, x, n); }
KERNEL void gelu_erf_bwd(float* dx, const float* x, const float* dy, i64 n) { gelu_erf_bwd_t(dx, x, dy, n); }
KERNEL void gelu_erf_bwd_f64(double* dx, const double* x, const double* dy, i64 n) { gelu_erf_bwd_t(dx, x, dy, n); }
