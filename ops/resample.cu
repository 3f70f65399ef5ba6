// Spatial resampling (ops/resample.py): bilinear upsampling and reflection padding of planes
// [P = N*C, H, W], and their gradients. Forward kernels: one thread per output pixel. Gradient
// kernels: one thread per input pixel, gathering from the output pixels that read it in
// ascending order (rows outside, columns inside), so sums are deterministic and no two threads
// write one address. Coefficients follow PyTorch's area_pixel_compute_source_index in T.
#include "common.cuh"

// Calls f(i, plane, h, w) for every pixel i of P planes of H x W, grid-stride.
template <typename F>
__device__ __forceinline__ void for_each_plane_pixel(int P, int H, int W, F f) {
    const i64 total = (i64)P * H * W;
    for (i64 i = global_thread(); i < total; i += global_stride())
        f(i, i / ((i64)W * H), (int)((i / W) % H), (int)(i % W));
}

// Output index p of n_out reads input indices i0 <= i1 with weights 1 - l and l.
template <typename T>
struct Taps {
    int i0, i1;
    T l;
    __device__ Taps(int p, int n_in, int n_out, int align) {
        T src;
        if (align) {
            const T scale = n_out > 1 ? T(n_in - 1) / T(n_out - 1) : T(0);
            src = mul_rn(scale, T(p));
        } else {
            src = sub_rn(mul_rn(T(n_in) / T(n_out), add_rn(T(p), T(0.5))), T(0.5));
            if (src < T(0)) src = T(0);
        }
        i0 = min((int)src, n_in - 1);
        i1 = min(i0 + 1, n_in - 1);
        l = sub_rn(src, T(i0));
    }
    __device__ T weight_of(int i) const {      // the weight output p gives input i (0 if none)
        T w = T(0);
        if (i0 == i) w = sub_rn(T(1), l);
        if (i1 == i) w = add_rn(w, l);
        return w;
    }
};

// The output indices that may read input index i: a range that contains every p whose i0 is
// i - 1 or i (a margin of one on each side for rounding); weight_of gives 0 to the others.
__device__ __forceinline__ void readers(int i, int n_in, int n_out, int align, int* lo, int* hi) {
    *lo = 0;
    *hi = n_out - 1;
    if (n_in < 2 || n_out < 2) return;
    double a, b;
    if (align) {
        const double r = double(n_out - 1) / double(n_in - 1);
        a = (i - 1) * r;
        b = (i + 1) * r;
    } else {
        const double r = double(n_out) / double(n_in);
        a = (i - 0.5) * r - 0.5;
        b = (i + 1.5) * r - 0.5;
    }
    *lo = max(0, (int)floor(a) - 1);
    *hi = min(n_out - 1, (int)ceil(b) + 1);
}

template <typename T>
__device__ __forceinline__ void upsample_fwd_t(T* y, const T* x, int P, int H, int W, int OH, int OW, int align) {
    for_each_plane_pixel(P, OH, OW, [&](i64 i, i64 plane, int p, int q) {
        const T* xc = x + plane * H * W;
        const Taps<T> r(p, H, OH, align), c(q, W, OW, align);
        const T l0 = sub_rn(T(1), c.l);
        const T top = add_rn(mul_rn(l0, xc[(i64)r.i0 * W + c.i0]), mul_rn(c.l, xc[(i64)r.i0 * W + c.i1]));
        const T bottom = add_rn(mul_rn(l0, xc[(i64)r.i1 * W + c.i0]), mul_rn(c.l, xc[(i64)r.i1 * W + c.i1]));
        y[i] = add_rn(mul_rn(sub_rn(T(1), r.l), top), mul_rn(r.l, bottom));
    });
}

template <typename T>
__device__ __forceinline__ void upsample_bwd_t(T* dx, const T* dy, int P, int H, int W, int OH, int OW, int align) {
    for_each_plane_pixel(P, H, W, [&](i64 i, i64 plane, int h, int w) {
        const T* dyc = dy + plane * OH * OW;
        int p0, p1, q0, q1;
        readers(h, H, OH, align, &p0, &p1);
        readers(w, W, OW, align, &q0, &q1);
        T acc = T(0);
        for (int p = p0; p <= p1; ++p) {
            const T wh = Taps<T>(p, H, OH, align).weight_of(h);
            if (wh == T(0)) continue;
            T row = T(0);
            for (int q = q0; q <= q1; ++q) {
                const T ww = Taps<T>(q, W, OW, align).weight_of(w);
                if (ww != T(0)) row = add_rn(row, mul_rn(ww, dyc[(i64)p * OW + q]));
            }
            acc = add_rn(acc, mul_rn(wh, row));
        }
        dx[i] = acc;
    });
}

#define RESAMPLE(NAME, IMPL, PARAMS, ARGS)                                         \
    KERNEL void NAME(float* out, const float* in, PARAMS) { IMPL(out, in, ARGS); } \
    KERNEL void NAME##_f64(double* out, const double* in, PARAMS) { IMPL(out, in, ARGS); }

#define UPSAMPLE_PARAMS int P, int H, int W, int OH, int OW, int align
#define UPSAMPLE_ARGS P, H, W, OH, OW, align
RESAMPLE(upsample_bilinear2d_fwd, upsample_fwd_t, UPSAMPLE_PARAMS, UPSAMPLE_ARGS)
RESAMPLE(upsample_bilinear2d_bwd, upsample_bwd_t, UPSAMPLE_PARAMS, UPSAMPLE_ARGS)

// ------------------------------------------------------------------ reflection padding

// The input index that padded index r (of n + 2*pad) reads: reflected at 0 and at n - 1.
__device__ __forceinline__ int reflected(int r, int n, int pad) {
    int i = r - pad;
    if (i < 0) i = -i;
    if (i >= n) i = 2 * (n - 1) - i;
    return i;
}

template <typename T>
__device__ __forceinline__ void reflection_pad_fwd_t(T* y, const T* x, int P, int H, int W, int ph, int pw) {
    for_each_plane_pixel(P, H + 2 * ph, W + 2 * pw, [&](i64 i, i64 plane, int r, int s) {
        y[i] = x[(plane * H + reflected(r, H, ph)) * W + reflected(s, W, pw)];
    });
}

// The padded indices that read input index i, ascending: the left mirror, itself, the right
// mirror (each only where it exists); returns how many.
__device__ __forceinline__ int mirrors(int i, int n, int pad, int out[3]) {
    int k = 0;
    if (i >= 1 && i <= pad) out[k++] = pad - i;
    out[k++] = pad + i;
    if (i <= n - 2 && i >= n - 1 - pad) out[k++] = pad + 2 * (n - 1) - i;
    return k;
}

template <typename T>
__device__ __forceinline__ void reflection_pad_bwd_t(T* dx, const T* dy, int P, int H, int W, int ph, int pw) {
    const int OH = H + 2 * ph, OW = W + 2 * pw;
    for_each_plane_pixel(P, H, W, [&](i64 i, i64 plane, int h, int w) {
        const T* dyc = dy + plane * OH * OW;
        int rows[3], cols[3];
        const int nr = mirrors(h, H, ph, rows), nc = mirrors(w, W, pw, cols);
        T acc = T(0);
        for (int a = 0; a < nr; ++a)
            for (int b = 0; b < nc; ++b) acc = add_rn(acc, dyc[(i64)rows[a] * OW + cols[b]]);
        dx[i] = acc;
    });
}

#define PAD_PARAMS int P, int H, int W, int ph, int pw
#define PAD_ARGS P, H, W, ph, pw
RESAMPLE(reflection_pad2d_fwd, reflection_pad_fwd_t, PAD_PARAMS, PAD_ARGS)
RESAMPLE(reflection_pad2d_bwd, reflection_pad_bwd_t, PAD_PARAMS, PAD_ARGS)
