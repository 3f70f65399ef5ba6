// Element-wise math for imported PyTorch graphs (ops/math.py): unary functions and their
// gradients, a tensor and a scalar, dtype casts, strided slices and their gradient.
// Formulas follow ops/math.py's numpy evaluation order with non-fusing arithmetic, so
// only exp, log, sin, cos and pow may differ from numpy in the last bits. Function
// codes are indices into ops/math.py's UNARY_FNS, SCALAR_FNS and CAST_DTYPES.
#include "common.cuh"


// np.sign: -1, 0 or 1 (NaN stays NaN).
template <typename T>
__device__ __forceinline__ T sign_m(T x) {
    return x > T(0) ? T(1) : (x < T(0) ? T(-1) : x);
}

// UNARY_FNS: neg exp log sqrt rsqrt sin cos abs reciprocal silu
template <typename T>
__device__ __forceinline__ T unary_f(int fn, T x) {
    switch (fn) {
    case 0: return -x;
    case 1: return exp_t(x);
    case 2: return log_t(x);
    case 3: return sqrt_t(x);
    case 4: return T(1) / sqrt_t(x);
    case 5: return sin_t(x);
    case 6: return cos_t(x);
    case 7: return x < T(0) ? -x : (x == T(0) ? T(0) : x);        // np.abs: abs(-0.0) is +0.0
    case 8: return T(1) / x;
    case 9: return x / add_rn(exp_t(-x), T(1));
    default: return quiet_nan<T>();
    }
}

template <typename T>
__device__ __forceinline__ T unary_grad_f(int fn, T x, T y, T g) {
    switch (fn) {
    case 0: return -g;
    case 1: return mul_rn(g, y);
    case 2: return g / x;
    case 3: return g / mul_rn(T(2), y);
    case 4: return mul_rn(mul_rn(T(-0.5), g), mul_rn(mul_rn(y, y), y));
    case 5: return mul_rn(g, cos_t(x));
    case 6: return mul_rn(g, -sin_t(x));
    case 7: return mul_rn(g, sign_m(x));
    case 8: return mul_rn(-g, mul_rn(y, y));
    case 9: {
        const T sig = T(1) / add_rn(exp_t(-x), T(1));
        return mul_rn(mul_rn(g, sig), add_rn(T(1), mul_rn(x, sub_rn(T(1), sig))));
    }
    default: return quiet_nan<T>();
    }
}

template <typename T>
__device__ __forceinline__ void unary_t(T* y, const T* x, int fn, i64 n) {
    map1(y, x, n, [fn](T v) { return unary_f(fn, v); });
}
KERNEL void unary(float* y, const float* x, int fn, i64 n) { unary_t(y, x, fn, n); }
KERNEL void unary_f64(double* y, const double* x, int fn, i64 n) { unary_t(y, x, fn, n); }

template <typename T>
__device__ __forceinline__ void unary_grad_t(T* dx, const T* x, const T* y, const T* dy, int fn, i64 n) {
    for (i64 i = global_thread(); i < n; i += global_stride()) dx[i] = unary_grad_f(fn, x[i], y[i], dy[i]);
}
KERNEL void unary_grad(float* dx, const float* x, const float* y, const float* dy, int fn, i64 n) {
    unary_grad_t(dx, x, y, dy, fn, n);
}
KERNEL void unary_grad_f64(double* dx, const double* x, const double* y, const double* dy, int fn, i64 n) {
    unary_grad_t(dx, x, y, dy, fn, n);
}

// x ** e with PyTorch's special exponents (ops/math.py's _pow).
template <typename T>
__device__ __forceinline__ T pow_s(T x, T e) {
    if (e == T(0)) return T(1);
    if (e == T(1)) return x;
    if (e == T(2)) return mul_rn(x, x);
    if (e == T(3)) return mul_rn(mul_rn(x, x), x);
    if (e == T(0.5)) return sqrt_t(x);
    if (e == T(-0.5)) return T(1) / sqrt_t(x);
    if (e == T(-1)) return T(1) / x;
    if (e == T(-2)) return T(1) / mul_rn(x, x);
    return pow_t(x, e);
}

// SCALAR_FNS: add sub rsub mul div pow maximum minimum
template <typename T>
__device__ __forceinline__ T scalar_f(int fn, T x, T v) {
    switch (fn) {
    case 0: return add_rn(x, v);
    case 1: return sub_rn(x, v);
    case 2: return sub_rn(v, x);
    case 3: return mul_rn(x, v);
    case 4: return x / v;
    case 5: return pow_s(x, v);
    case 6: return (x >= v || x != x) ? x : v;       // np.maximum
    case 7: return (x <= v || x != x) ? x : v;       // np.minimum
    default: return quiet_nan<T>();
    }
}

template <typename T>
__device__ __forceinline__ T scalar_grad_f(int fn, T x, T g, T v, T vm1) {
    switch (fn) {
    case 0: case 1: return g;
    case 2: return -g;
    case 3: return mul_rn(g, v);
    case 4: return g / v;
    case 5: return v == T(0) ? T(0) : mul_rn(g, mul_rn(v, pow_s(x, vm1)));
    case 6: return x > v ? g : T(0);         // clamp_min: strictly above (PyTorch 2.x)
    case 7: return x < v ? g : T(0);
    default: return quiet_nan<T>();
    }
}

template <typename T>
__device__ __forceinline__ void scalar_t(T* y, const T* x, int fn, T v, i64 n) {
    map1(y, x, n, [fn, v](T u) { return scalar_f(fn, u, v); });
}
KERNEL void scalar(float* y, const float* x, int fn, float v, i64 n) { scalar_t(y, x, fn, v, n); }
KERNEL void scalar_f64(double* y, const double* x, int fn, double v, i64 n) { scalar_t(y, x, fn, v, n); }

template <typename T>
__device__ __forceinline__ void scalar_grad_t(T* dx, const T* x, const T* dy, int fn, T v, T vm1, i64 n) {
    map2(dx, x, dy, n, [fn, v, vm1](T u, T g) { return scalar_grad_f(fn, u, g, v, vm1); });
}
KERNEL void scalar_grad(float* dx, const float* x, const float* dy, int fn, float v, float vm1, i64 n) {
    scalar_grad_t(dx, x, dy, fn, v, vm1, n);
}
KERNEL void scalar_grad_f64(double* dx, const double* x, const double* dy, int fn, double v, double vm1, i64 n) {
    scalar_grad_t(dx, x, dy, fn, v, vm1, n);
}

// cast: CAST_DTYPES float32 float64 int32 int64 bool (one byte, 0 or 1). C conversions:
// float to int truncates toward zero; to bool is "nonzero" (NaN is nonzero).
template <typename D, typename S>
__device__ __forceinline__ D cast_one(S v) { return static_cast<D>(v); }
template <> __device__ __forceinline__ unsigned char cast_one<unsigned char, float>(float v) { return v != 0.0f; }
template <> __device__ __forceinline__ unsigned char cast_one<unsigned char, double>(double v) { return v != 0.0; }
template <> __device__ __forceinline__ unsigned char cast_one<unsigned char, int>(int v) { return v != 0; }
template <> __device__ __forceinline__ unsigned char cast_one<unsigned char, long long>(long long v) { return v != 0; }
template <> __device__ __forceinline__ unsigned char cast_one<unsigned char, unsigned char>(unsigned char v) {
    return v != 0;
}

template <typename D, typename S>
__device__ __forceinline__ void cast_loop(void* y, const void* x, i64 n) {
    D* d = static_cast<D*>(y);
    const S* s = static_cast<const S*>(x);
    for (i64 i = global_thread(); i < n; i += global_stride()) d[i] = cast_one<D, S>(s[i]);
}

template <typename S>
__device__ __forceinline__ void cast_from(void* y, const void* x, int dst, i64 n) {
    switch (dst) {
    case 0: cast_loop<float, S>(y, x, n); break;
    case 1: cast_loop<double, S>(y, x, n); break;
    case 2: cast_loop<int, S>(y, x, n); break;
    case 3: cast_loop<long long, S>(y, x, n); break;
    case 4: cast_loop<unsigned char, S>(y, x, n); break;
    }
}

__device__ __forceinline__ void cast_any(void* y, const void* x, int src, int dst, i64 n) {
    switch (src) {
    case 0: cast_from<float>(y, x, dst, n); break;
    case 1: cast_from<double>(y, x, dst, n); break;
    case 2: cast_from<int>(y, x, dst, n); break;
    case 3: cast_from<long long>(y, x, dst, n); break;
    case 4: cast_from<unsigned char>(y, x, dst, n); break;
    }
}
// The same code under two names: cast_f64 for casts from or to float64, cast for the rest.
KERNEL void cast(void* y, const void* x, int src, int dst, i64 n) { cast_any(y, x, src, dst, n); }
KERNEL void cast_f64(void* y, const void* x, int src, int dst, i64 n) { cast_any(y, x, src, dst, n); }

// slice with step > 1: y[o, k, i] = x[o, start + k*step, i] over y's (outer, count, inner)
// and x's (outer, length, inner) views.
template <typename T>
__device__ __forceinline__ void slice_fwd_t(T* y, const T* x, i64 count, i64 inner, i64 length, i64 start, i64 step,
                                            i64 n) {
    for (i64 e = global_thread(); e < n; e += global_stride()) {
        const i64 i = e % inner, r = e / inner, k = r % count, o = r / count;
        y[e] = x[(o * length + start + k * step) * inner + i];
    }
}
KERNEL void slice_fwd(float* y, const float* x, i64 count, i64 inner, i64 length, i64 start, i64 step, i64 n) {
    slice_fwd_t(y, x, count, inner, length, start, step, n);
}
KERNEL void slice_fwd_f64(double* y, const double* x, i64 count, i64 inner, i64 length, i64 start, i64 step,
                          i64 n) {
    slice_fwd_t(y, x, count, inner, length, start, step, n);
}

// slice_grad: every element of dx (outer, length, inner) written once, dy's where the
// slice took it, zero elsewhere.
template <typename T>
__device__ __forceinline__ void slice_bwd_t(T* dx, const T* dy, i64 count, i64 inner, i64 length, i64 start,
                                            i64 step, i64 n) {
    for (i64 e = global_thread(); e < n; e += global_stride()) {
        const i64 i = e % inner, r = e / inner, j = r % length, o = r / length;
        const i64 off = j - start, k = off / step;
        const bool taken = off >= 0 && off % step == 0 && k < count;
        dx[e] = taken ? dy[(o * count + k) * inner + i] : T(0);
    }
}
KERNEL void slice_bwd(float* dx, const float* dy, i64 count, i64 inner, i64 length, i64 start, i64 step, i64 n) {
    slice_bwd_t(dx, dy, count, inner, length, start, step, n);
}
KERNEL void slice_bwd_f64(double* dx, const double* dy, i64 count, i64 inner, i64 length, i64 start, i64 step,
                          i64 n) {
    slice_bwd_t(dx, dy, count, inner, length, start, step, n);
}
