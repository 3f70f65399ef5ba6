// Element-wise operators (ops/elementwise.py): activations and their gradients, add,
// mul, scale, the n-ary gradient sum and fill. Vectorised 16-byte grid-stride loops.
// Every formula is written in numpy's evaluation order with non-fusing arithmetic, so
// relu, the gradients, add, mul, scale, sum_n and fill give numpy's bits; sigmoid and
// tanh differ from numpy by the last bits of exp/tanh.
#include "common.cuh"

template <typename T>
__device__ __forceinline__ void relu_fwd_t(T* y, const T* x, i64 n) {
    // np.maximum(x, 0): x when x >= 0 or x is NaN (so -0.0 stays -0.0).
    map1(y, x, n, [](T v) { return (v >= T(0) || v != v) ? v : T(0); });
}
KERNEL void relu_fwd(float* y, const float* x, i64 n) { relu_fwd_t(y, x, n); }
KERNEL void relu_fwd_f64(double* y, const double* x, i64 n) { relu_fwd_t(y, x, n); }

template <typename T>
__device__ __forceinline__ void relu_bwd_t(T* dx, const T* y, const T* dy, i64 n) {
    // dy * (y > 0), the bool read as 0 or 1.
    map2(dx, y, dy, n, [](T yv, T g) { return mul_rn(g, yv > T(0) ? T(1) : T(0)); });
}
KERNEL void relu_bwd(float* dx, const float* y, const float* dy, i64 n) { relu_bwd_t(dx, y, dy, n); }
KERNEL void relu_bwd_f64(double* dx, const double* y, const double* dy, i64 n) { relu_bwd_t(dx, y, dy, n); }

template <typename T>
__device__ __forceinline__ void sigmoid_fwd_t(T* y, const T* x, i64 n) {
    // 1 / (1 + exp(clip(-x, -80, 80))); NaN passes through the clip as in np.clip.
    map1(y, x, n, [](T v) {
        T t = -v;
        t = t < T(-80) ? T(-80) : (t > T(80) ? T(80) : t);
        return T(1) / add_rn(exp_t(t), T(1));
    });
}
KERNEL void sigmoid_fwd(float* y, const float* x, i64 n) { sigmoid_fwd_t(y, x, n); }
KERNEL void sigmoid_fwd_f64(double* y, const double* x, i64 n) { sigmoid_fwd_t(y, x, n); }

template <typename T>
__device__ __forceinline__ void sigmoid_bwd_t(T* dx, const T* y, const T* dy, i64 n) {
    // dy * (y * (1 - y))
    map2(dx, y, dy, n, [](T yv, T g) { return mul_rn(g, mul_rn(yv, sub_rn(T(1), yv))); });
}
KERNEL void sigmoid_bwd(float* dx, const float* y, const float* dy, i64 n) { sigmoid_bwd_t(dx, y, dy, n); }
KERNEL void sigmoid_bwd_f64(double* dx, const double* y, const double* dy, i64 n) { sigmoid_bwd_t(dx, y, dy, n); }

template <typename T>
__device__ __forceinline__ void tanh_fwd_t(T* y, const T* x, i64 n) {
    map1(y, x, n, [](T v) { return tanh_t(v); });
}
KERNEL void tanh_fwd(float* y, const float* x, i64 n) { tanh_fwd_t(y, x, n); }
KERNEL void tanh_fwd_f64(double* y, const double* x, i64 n) { tanh_fwd_t(y, x, n); }

template <typename T>
__device__ __forceinline__ void tanh_bwd_t(T* dx, const T* y, const T* dy, i64 n) {
    // dy * (1 - y * y)
    map2(dx, y, dy, n, [](T yv, T g) { return mul_rn(g, sub_rn(T(1), mul_rn(yv, yv))); });
}
KERNEL void tanh_bwd(float* dx, const float* y, const float* dy, i64 n) { tanh_bwd_t(dx, y, dy, n); }
KERNEL void tanh_bwd_f64(double* dx, const double* y, const double* dy, i64 n) { tanh_bwd_t(dx, y, dy, n); }

template <typename T>
__device__ __forceinline__ void add_fwd_t(T* y, const T* a, const T* b, i64 n) {
    map2(y, a, b, n, [](T u, T v) { return add_rn(u, v); });
}
KERNEL void add_fwd(float* y, const float* a, const float* b, i64 n) { add_fwd_t(y, a, b, n); }
KERNEL void add_fwd_f64(double* y, const double* a, const double* b, i64 n) { add_fwd_t(y, a, b, n); }

template <typename T>
__device__ __forceinline__ void mul_fwd_t(T* y, const T* a, const T* b, i64 n) {
    map2(y, a, b, n, [](T u, T v) { return mul_rn(u, v); });
}
KERNEL void mul_fwd(float* y, const float* a, const float* b, i64 n) { mul_fwd_t(y, a, b, n); }
KERNEL void mul_fwd_f64(double* y, const double* a, const double* b, i64 n) { mul_fwd_t(y, a, b, n); }

template <typename T>
__device__ __forceinline__ void scale_fwd_t(T* y, const T* x, T factor, i64 n) {
    map1(y, x, n, [factor](T v) { return mul_rn(v, factor); });
}
KERNEL void scale_fwd(float* y, const float* x, float factor, i64 n) { scale_fwd_t(y, x, factor, n); }
KERNEL void scale_fwd_f64(double* y, const double* x, double factor, i64 n) { scale_fwd_t(y, x, factor, n); }

// y = x0 + x1 + ... + x(k-1), added left to right; k <= 8 per launch. Longer sums chain
// launches that pass y itself as x0, which keeps numpy's left-to-right order.
template <typename T>
__device__ __forceinline__ void sum_n_t(T* y, const T* x0, const T* x1, const T* x2, const T* x3,
                                        const T* x4, const T* x5, const T* x6, const T* x7, int k, i64 n) {
    const T* xs[8] = {x0, x1, x2, x3, x4, x5, x6, x7};
    typedef typename Vec16<T>::type V;
    constexpr int L = Vec16<T>::lanes;
    const i64 tid = global_thread(), stride = global_stride();
    bool aligned = aligned16(y);
#pragma unroll
    for (int j = 0; j < 8; ++j) aligned = aligned && (j >= k || aligned16(xs[j]));
    i64 done = 0;
    if (aligned) {
        const i64 nv = n / L;
        for (i64 i = tid; i < nv; i += stride) {
            V acc = reinterpret_cast<const V*>(x0)[i];
            T* pa = reinterpret_cast<T*>(&acc);
#pragma unroll
            for (int j = 1; j < 8; ++j) {       // unrolled, so xs stays in registers
                if (j >= k) break;
                V v = reinterpret_cast<const V*>(xs[j])[i];
                const T* pv = reinterpret_cast<const T*>(&v);
#pragma unroll
                for (int l = 0; l < L; ++l) pa[l] = add_rn(pa[l], pv[l]);
            }
            reinterpret_cast<V*>(y)[i] = acc;
        }
        done = nv * L;
    }
    for (i64 i = done + tid; i < n; i += stride) {
        T acc = x0[i];
#pragma unroll
        for (int j = 1; j < 8; ++j) {
            if (j >= k) break;
            acc = add_rn(acc, xs[j][i]);
        }
        y[i] = acc;
    }
}
KERNEL void sum_n_fwd(float* y, const float* x0, const float* x1, const float* x2, const float* x3,
                      const float* x4, const float* x5, const float* x6, const float* x7, int k, i64 n) {
    sum_n_t(y, x0, x1, x2, x3, x4, x5, x6, x7, k, n);
}
KERNEL void sum_n_fwd_f64(double* y, const double* x0, const double* x1, const double* x2, const double* x3,
                          const double* x4, const double* x5, const double* x6, const double* x7, int k, i64 n) {
    sum_n_t(y, x0, x1, x2, x3, x4, x5, x6, x7, k, n);
}

// fill: a bit pattern of 4 or 8 bytes (any dtype of that size), 16-byte stores when aligned.
template <typename W>
__device__ __forceinline__ void fill_t(W* y, W bits, i64 n) {
    constexpr int L = 16 / sizeof(W);
    const i64 tid = global_thread(), stride = global_stride();
    i64 done = 0;
    if (aligned16(y)) {
        const i64 nv = n / L;
        uint4 v;
        W* pv = reinterpret_cast<W*>(&v);
#pragma unroll
        for (int l = 0; l < L; ++l) pv[l] = bits;
        for (i64 i = tid; i < nv; i += stride) reinterpret_cast<uint4*>(y)[i] = v;
        done = nv * L;
    }
    for (i64 i = done + tid; i < n; i += stride) y[i] = bits;
}
KERNEL void fill_b32(unsigned int* y, unsigned int bits, i64 n) { fill_t(y, bits, n); }
KERNEL void fill_b64(u64* y, u64 bits, i64 n) { fill_t(y, bits, n); }
