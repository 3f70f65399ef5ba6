// Pooling (ops/pooling.py): max and average over windows, global average, and gradients.
// x [N,C,H,W] -> y [N,C,OH,OW]; padding counts as -inf for max and 0 for average.
//
// Forward kernels: one thread per output, the window read in row-major order. Gradient
// kernels: one thread per input element, gathering from the windows that contain it in
// numpy's fixed order (kernel row i, then column j), so no two threads write one address
// and sums are deterministic. Max pooling's gradient goes to each window's first
// element equal to the window's maximum y. Max and average pooling and both gradients
// follow numpy's operation order and give its bits; the global average's sum does not.

#include "common.cuh"

struct PoolDims {
    int N, C, H, W, OH, OW, KH, KW, sh, sw, ph, pw;
};
#define POOL_PARAMS int N, int C, int H, int W, int OH, int OW, int KH, int KW, int sh, int sw, int ph, int pw
#define POOL_ARGS PoolDims{N, C, H, W, OH, OW, KH, KW, sh, sw, ph, pw}

// The first offset (kh * KW + kw, row-major) of window (p, q) of plane xc whose element
// equals the window's maximum ym, as numpy's gradient routes it; -1 if none does (NaN).
template <typename T>
__device__ __forceinline__ int window_first_max(const T* xc, T ym, int p, int q, const PoolDims& d) {
    for (int i = 0; i < d.KH; ++i) {
        const int h = p * d.sh - d.ph + i;
        for (int j = 0; j < d.KW; ++j) {
            const int w = q * d.sw - d.pw + j;
            const T v = ((unsigned)h < (unsigned)d.H && (unsigned)w < (unsigned)d.W) ? xc[(i64)h * d.W + w]
                                                                                    : neg_inf<T>();
            if (v == ym) return i * d.KW + j;
        }
    }
    return -1;
}

template <typename T>
__device__ __forceinline__ void max_pool_fwd_t(T* y, const T* x, PoolDims d) {
    const i64 total = (i64)d.N * d.C * d.OH * d.OW;
    for (i64 i = global_thread(); i < total; i += global_stride()) {
        const int q = i % d.OW, p = (i / d.OW) % d.OH;
        const i64 plane = i / ((i64)d.OW * d.OH);
        const T* xc = x + plane * d.H * d.W;
        T best = neg_inf<T>();
        for_each_pixel_in(p, q, d, [&](int, int, int h, int w) {
            const T v = xc[(i64)h * d.W + w];
            if (best == best && (v != v || v > best)) best = v;   // NaN propagates, as in np.max
        });
        y[i] = best;
    }
}
KERNEL void max_pool2d_fwd(float* y, const float* x, POOL_PARAMS) { max_pool_fwd_t(y, x, POOL_ARGS); }
KERNEL void max_pool2d_fwd_f64(double* y, const double* x, POOL_PARAMS) { max_pool_fwd_t(y, x, POOL_ARGS); }

template <typename T>
__device__ __forceinline__ void max_pool_bwd_t(T* dx, const T* x, const T* y, const T* dy, PoolDims d) {
    const i64 total = (i64)d.N * d.C * d.H * d.W;
    for (i64 idx = global_thread(); idx < total; idx += global_stride()) {
        const int w = idx % d.W, h = (idx / d.W) % d.H;
        const i64 plane = idx / ((i64)d.W * d.H);
        const T* xc = x + plane * d.H * d.W;
        const T* yc = y + plane * d.OH * d.OW;
        const T* dyc = dy + plane * d.OH * d.OW;
        T acc = T(0);
        for_each_window_over(h, w, d, [&](int i, int j, int p, int q) {
            const i64 o = (i64)p * d.OW + q;
            acc = add_rn(acc, window_first_max(xc, yc[o], p, q, d) == i * d.KW + j ? dyc[o] : T(0));
        });
        dx[idx] = acc;
    }
}
KERNEL void max_pool2d_bwd(float* dx, const float* x, const float* y, const float* dy, POOL_PARAMS) {
    max_pool_bwd_t(dx, x, y, dy, POOL_ARGS);
}
KERNEL void max_pool2d_bwd_f64(double* dx, const double* x, const double* y, const double* dy, POOL_PARAMS) {
    max_pool_bwd_t(dx, x, y, dy, POOL_ARGS);
}

// The number of elements averaged at output (p, q): the kernel area, or the ones inside x.
template <typename T>
__device__ __forceinline__ T avg_divisor(int p, int q, const PoolDims& d, int include_pad) {
    if (include_pad) return T(d.KH * d.KW);
    const int h0 = p * d.sh - d.ph, w0 = q * d.sw - d.pw;
    const int hs = min(h0 + d.KH, d.H) - max(h0, 0), ws = min(w0 + d.KW, d.W) - max(w0, 0);
    return T(max(hs, 0) * max(ws, 0));
}

template <typename T>
__device__ __forceinline__ void avg_pool_fwd_t(T* y, const T* x, PoolDims d, int include_pad) {
    const i64 total = (i64)d.N * d.C * d.OH * d.OW;
    for (i64 i = global_thread(); i < total; i += global_stride()) {
        const int q = i % d.OW, p = (i / d.OW) % d.OH;
        const T* xc = x + (i / ((i64)d.OW * d.OH)) * d.H * d.W;
        // numpy's order: the first offset's value (padding reads 0), then the others added.
        T acc = T(0);
        for (int a = 0; a < d.KH; ++a) {
            const int h = p * d.sh - d.ph + a;
            for (int b = 0; b < d.KW; ++b) {
                const int w = q * d.sw - d.pw + b;
                const T v = ((unsigned)h < (unsigned)d.H && (unsigned)w < (unsigned)d.W) ? xc[(i64)h * d.W + w] : T(0);
                acc = (a == 0 && b == 0) ? v : add_rn(acc, v);
            }
        }
        y[i] = acc / avg_divisor<T>(p, q, d, include_pad);
    }
}
KERNEL void avg_pool2d_fwd(float* y, const float* x, POOL_PARAMS, int include_pad) {
    avg_pool_fwd_t(y, x, POOL_ARGS, include_pad);
}
KERNEL void avg_pool2d_fwd_f64(double* y, const double* x, POOL_PARAMS, int include_pad) {
    avg_pool_fwd_t(y, x, POOL_ARGS, include_pad);
}

template <typename T>
__device__ __forceinline__ void avg_pool_bwd_t(T* dx, const T* dy, PoolDims d, int include_pad) {
    const i64 total = (i64)d.N * d.C * d.H * d.W;
    for (i64 idx = global_thread(); idx < total; idx += global_stride()) {
        const int w = idx % d.W, h = (idx / d.W) % d.H;
        const T* dyc = dy + (idx / ((i64)d.W * d.H)) * d.OH * d.OW;
        T acc = T(0);
        for_each_window_over(h, w, d, [&](int, int, int p, int q) {
            acc = add_rn(acc, dyc[(i64)p * d.OW + q] / avg_divisor<T>(p, q, d, include_pad));
        });
        dx[idx] = acc;
    }
}
KERNEL void avg_pool2d_bwd(float* dx, const float* dy, POOL_PARAMS, int include_pad) {
    avg_pool_bwd_t(dx, dy, POOL_ARGS, include_pad);
}
KERNEL void avg_pool2d_bwd_f64(double* dx, const double* dy, POOL_PARAMS, int include_pad) {
    avg_pool_bwd_t(dx, dy, POOL_ARGS, include_pad);
}

// y[n, c] = sum over the plane / (H*W): one warp per plane, lanes striding the plane in
// order, then a fixed shuffle tree. Eight planes per 256-thread block.
template <typename T>
__device__ __forceinline__ void global_avg_pool_fwd_t(T* y, const T* x, i64 planes, int hw) {
    const int lane = threadIdx.x & 31;
    const i64 warp = global_thread() >> 5, warps = global_stride() >> 5;
    for (i64 pl = warp; pl < planes; pl += warps) {
        const T* xc = x + pl * hw;
        T acc = T(0);
        for (int k = lane; k < hw; k += 32) acc = add_rn(acc, xc[k]);
        acc = warp_sum(acc);
        if (lane == 0) y[pl] = acc / T(hw);
    }
}
KERNEL void global_avg_pool_fwd(float* y, const float* x, i64 planes, int hw) {
    global_avg_pool_fwd_t(y, x, planes, hw);
}
KERNEL void global_avg_pool_fwd_f64(double* y, const double* x, i64 planes, int hw) {
    global_avg_pool_fwd_t(y, x, planes, hw);
}

// dx[n, c, h, w] = dy[n, c] / (H*W)
template <typename T>
__device__ __forceinline__ void global_avg_pool_bwd_t(T* dx, const T* dy, i64 planes, int hw) {
    const i64 total = planes * hw;
    for (i64 i = global_thread(); i < total; i += global_stride()) dx[i] = dy[i / hw] / T(hw);
}
KERNEL void global_avg_pool_bwd(float* dx, const float* dy, i64 planes, int hw) {
    global_avg_pool_bwd_t(dx, dy, planes, hw);
}
KERNEL void global_avg_pool_bwd_f64(double* dx, const double* dy, i64 planes, int hw) {
    global_avg_pool_bwd_t(dx, dy, planes, hw);
}
