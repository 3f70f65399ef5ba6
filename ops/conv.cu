// 2-D convolution (ops/conv.py): x [N,C,H,W], w [O,C/G,KH,KW], y [N,O,OH,OW], G groups,
// taps dh, dw apart (dilation; tap r of a window at row p reads h = p*sh - ph + r*dh).
//
// Implicit GEMM on the tiled GEMM of gemm.cuh, one GEMM per group (blockIdx.z), no
// im2col buffer: tile loads gather straight from the tensors.
//   forward      y[g]  (Og x N*OH*OW)     = w[g] (Og x Cg*KH*KW) . cols(x)[g]
//   data grad    dx[g] (Cg x N*H*W)       = w[g]^T (Cg x Og*KH*KW) . gathered dy, one GEMM per
//                stride phase: the input pixels with (h + ph) % sh == ah and (w + pw) % sw == aw
//                receive gradient only from the taps r = ah (mod sh), s = aw (mod sw), so each
//                phase multiplies only those (a stride-2 layer does a quarter of the
//                multiply-adds of one GEMM over every pixel and tap, whose other terms are zero);
//                with dilation only along axes of stride 1 (one phase, p = p0 + i - rr*dh): a
//                dilated and strided axis takes the direct kernel
//   weight grad  dw[g] (Og x Cg*KH*KW)    = dy[g] (Og x N*OH*OW) . cols(x)[g]^T
// The weight gradient's k (N*OH*OW) can be long and its output small, so it may be split:
// blockIdx.z = split * G + g, partial products go to scratch and conv2d_splitk_reduce adds
// them in split order. Suffix _s: 64x64 tiles. K orders are fixed ((c, r, s) and
// (n, p, q) ascending), so every result is deterministic.
//
// Depthwise and other thin groups (fewer than 16 rows per group) would waste most of a
// tile, so they use direct kernels: one thread per output element for the forward and
// data gradient, one block per weight for the weight gradient (a fixed-order tree sum).
#include "gemm.cuh"

struct ConvDims {
    int N, C, H, W, O, KH, KW, OH, OW, sh, sw, ph, pw, G, dh, dw;
    __device__ int Cg() const { return C / G; }
    __device__ int Og() const { return O / G; }
    __device__ int KK() const { return KH * KW; }
};

#define CONV_PARAMS int N, int C, int H, int W, int O, int KH, int KW, int OH, int OW, \
                    int sh, int sw, int ph, int pw, int G, int dil_h, int dil_w
#define CONV_ARGS ConvDims{N, C, H, W, O, KH, KW, OH, OW, sh, sw, ph, pw, G, dil_h, dil_w}

// The forward's B: x at k = (c, r, s) for output pixel col = (n, p, q), zero in the padding.
template <typename T>
struct ForwardColumns {
    const T* x; ConvDims d; int g; KDigits kd;     // kd: k's radices (KH, KW)
    __device__ ForwardColumns(const T* x, const ConvDims& d, int g) : x(x), d(d), g(g), kd(d.KH, d.KW) {}
    struct Row { i64 image; int h, w; };           // x's image n at the group's channel 0; the window's corner
    using K = KPos;                                // (c, r, s)
    __device__ Row row(int col) const {
        const int P = d.OH * d.OW, n = col / P, pq = col - n * P, p = pq / d.OW, q = pq - p * d.OW;
        return {((i64)n * d.C + g * d.Cg()) * d.H * d.W, p * d.sh - d.ph, q * d.sw - d.pw};
    }
    __device__ K at(int k) const { return KPos(k, kd); }
    __device__ void next(K& k) const { k.advance(kd); }
    __device__ T get(const Row& r, const K& k) const {
        const int h = r.h + k.mid * d.dh, w = r.w + k.lo * d.dw;
        if ((unsigned)h >= (unsigned)d.H || (unsigned)w >= (unsigned)d.W) return T(0);
        return x[r.image + ((i64)k.hi * d.H + h) * d.W + w];
    }
};

// The forward's output: y[n, g*Og + m, p, q] for col = (n, p, q).
template <typename T>
struct ForwardStore {
    T* y; ConvDims d; int g;
    using Col = i64;
    __device__ Col col(int col) const {
        const int P = d.OH * d.OW, n = col / P;
        return (i64)n * d.O * P + (col - n * P);
    }
    __device__ void put(int m, Col c, T v) const { y[c + (i64)(g * d.Og() + m) * d.OH * d.OW] = v; }
};

// One stride phase (ah, aw) of the data gradient: columns are the phase's pixels (n, i, j) at
// h = h0 + i*sh, w = w0 + j*sw; k runs over (o, rr, ss) for the taps r = ah + rr*sh, s = aw + ss*sw.
struct ConvPhase {
    int h0, w0, Hp, Wp;      // the phase's first pixel row/column and its pixel counts
    int KHp, KWp;            // the phase's tap counts
    int p0, q0;              // dy's row/column reached by (i, rr) = (0, 0): p = p0 + i - rr
    __device__ ConvPhase(const ConvDims& d, int ah, int aw) {
        h0 = ((ah - d.ph) % d.sh + d.sh) % d.sh;
        w0 = ((aw - d.pw) % d.sw + d.sw) % d.sw;
        Hp = h0 < d.H ? (d.H - h0 + d.sh - 1) / d.sh : 0;
        Wp = w0 < d.W ? (d.W - w0 + d.sw - 1) / d.sw : 0;
        KHp = ah < d.KH ? (d.KH - ah + d.sh - 1) / d.sh : 0;
        KWp = aw < d.KW ? (d.KW - aw + d.sw - 1) / d.sw : 0;
        p0 = (h0 + d.ph - ah) / d.sh;      // h0 + ph - ah is a non-negative multiple of sh
        q0 = (w0 + d.pw - aw) / d.sw;
    }
};

// The data gradient's A: w[g*Og + o, c, r, s] for row c, k = (o, rr, ss) (the phase's taps).
template <typename T>
struct PhaseWeights {
    const T* w; ConvDims d; int g, ah, aw; KDigits kd;       // kd: k's radices (KHp, KWp)
    __device__ PhaseWeights(const T* w, const ConvDims& d, int g, int ah, int aw, const ConvPhase& f)
        : w(w), d(d), g(g), ah(ah), aw(aw), kd(f.KHp, f.KWp) {}
    using Row = i64;
    using K = KPos;                                          // (o, rr, ss)
    __device__ Row row(int c) const { return ((i64)g * d.Og() * d.Cg() + c) * d.KK(); }
    __device__ K at(int k) const { return KPos(k, kd); }
    __device__ void next(K& k) const { k.advance(kd); }
    __device__ T get(Row r, const K& k) const {
        return w[r + (i64)k.hi * d.Cg() * d.KK() + (ah + k.mid * d.sh) * d.KW + aw + k.lo * d.sw];
    }
};

// The data gradient's B: dy at the output that tap (r, s) maps the phase's pixel col = (n, i, j) to.
template <typename T>
struct PhaseColumns {
    const T* dy; ConvDims d; int g; ConvPhase f; KDigits kd;
    __device__ PhaseColumns(const T* dy, const ConvDims& d, int g, const ConvPhase& f)
        : dy(dy), d(d), g(g), f(f), kd(f.KHp, f.KWp) {}
    struct Row { i64 image; int p, q; };           // dy's image n at the group's channel 0; (p, q) at tap (0, 0)
    using K = KPos;                                // (o, rr, ss)
    __device__ Row row(int col) const {
        const int P = f.Hp * f.Wp, n = col / P, ij = col - n * P, i = ij / f.Wp, j = ij - i * f.Wp;
        return {((i64)n * d.O + g * d.Og()) * d.OH * d.OW, f.p0 + i, f.q0 + j};
    }
    __device__ K at(int k) const { return KPos(k, kd); }
    __device__ void next(K& k) const { k.advance(kd); }
    __device__ T get(const Row& r, const K& k) const {
        const int p = r.p - k.mid * d.dh, q = r.q - k.lo * d.dw;      // dh > 1 only where sh == 1
        if ((unsigned)p >= (unsigned)d.OH || (unsigned)q >= (unsigned)d.OW) return T(0);
        return dy[r.image + ((i64)k.hi * d.OH + p) * d.OW + q];
    }
};

// The data gradient's output: dx[n, g*Cg + c, h0 + i*sh, w0 + j*sw] for col = (n, i, j).
template <typename T>
struct PhaseStore {
    T* dx; ConvDims d; int g; ConvPhase f;
    using Col = i64;
    __device__ Col col(int col) const {
        const int P = f.Hp * f.Wp, n = col / P, ij = col - n * P, i = ij / f.Wp, j = ij - i * f.Wp;
        return ((i64)n * d.C * d.H + f.h0 + i * d.sh) * d.W + f.w0 + j * d.sw;
    }
    __device__ void put(int c, Col col, T v) const { dx[col + (i64)(g * d.Cg() + c) * d.H * d.W] = v; }
};

// The weight gradient's A: dy[n, g*Og + o, p, q] for row o, k = (n, p, q).
template <typename T>
struct GradRows {
    const T* dy; ConvDims d; int g; KDigits kd;    // kd: k's radices (OH, OW)
    __device__ GradRows(const T* dy, const ConvDims& d, int g) : dy(dy), d(d), g(g), kd(d.OH, d.OW) {}
    using Row = i64;
    using K = KPos;                                // (n, p, q)
    __device__ Row row(int o) const { return (i64)(g * d.Og() + o) * d.OH * d.OW; }
    __device__ K at(int k) const { return KPos(k, kd); }
    __device__ void next(K& k) const { k.advance(kd); }
    __device__ T get(Row r, const K& k) const {
        return dy[r + (i64)k.hi * d.O * d.OH * d.OW + k.mid * d.OW + k.lo];
    }
};

// The weight gradient's B: x at k = (n, p, q) for weight col = (c, r, s), zero in the padding.
template <typename T>
struct WeightColumns {
    const T* x; ConvDims d; int g; KDigits kd;     // kd: k's radices (OH, OW)
    __device__ WeightColumns(const T* x, const ConvDims& d, int g) : x(x), d(d), g(g), kd(d.OH, d.OW) {}
    struct Row { i64 channel; int h, w; };         // x's channel g*Cg + c in image 0; the tap's offset
    using K = KPos;                                // (n, p, q)
    __device__ Row row(int col) const {
        const int c = col / d.KK(), rs = col - c * d.KK(), r = rs / d.KW, s = rs - r * d.KW;
        return {(i64)(g * d.Cg() + c) * d.H * d.W, r * d.dh - d.ph, s * d.dw - d.pw};
    }
    __device__ K at(int k) const { return KPos(k, kd); }
    __device__ void next(K& k) const { k.advance(kd); }
    __device__ T get(const Row& r, const K& k) const {
        const int h = k.mid * d.sh + r.h, w = k.lo * d.sw + r.w;
        if ((unsigned)h >= (unsigned)d.H || (unsigned)w >= (unsigned)d.W) return T(0);
        return x[r.channel + (i64)k.hi * d.C * d.H * d.W + (i64)h * d.W + w];
    }
};

template <typename T, class Tile>
__device__ __forceinline__ void conv_fwd_gemm(T* y, const T* x, const T* w, ConvDims d) {
    const int g = blockIdx.z, K = d.Cg() * d.KK();
    const Strided<T> weights{w + (i64)g * d.Og() * K, K, 1};
    gemm_tile<T, Tile, true, false>(weights, ForwardColumns<T>(x, d, g), ForwardStore<T>{y, d, g}, d.Og(),
                                    d.N * d.OH * d.OW, 0, K);
}

template <typename T, class Tile>
__device__ __forceinline__ void conv_grad_data_gemm(T* dx, const T* w, const T* dy, ConvDims d, int ah, int aw) {
    const int g = blockIdx.z;
    const ConvPhase f(d, ah, aw);
    gemm_tile<T, Tile, true, false>(PhaseWeights<T>(w, d, g, ah, aw, f), PhaseColumns<T>(dy, d, g, f),
                                    PhaseStore<T>{dx, d, g, f}, d.Cg(), d.N * f.Hp * f.Wp, 0,
                                    d.Og() * f.KHp * f.KWp);
}

// dst is dw (one split) or scratch of splits x O*Cg*KH*KW partial products.
template <typename T, class Tile>
__device__ __forceinline__ void conv_grad_weight_gemm(T* dst, const T* x, const T* dy, ConvDims d, int k_chunk) {
    const int g = blockIdx.z % d.G, split = blockIdx.z / d.G, cols = d.Cg() * d.KK();
    const RowMajorStore<T> out{dst + (i64)split * d.O * cols + (i64)g * d.Og() * cols, cols, nullptr};
    const int K = d.N * d.OH * d.OW, k_begin = split * k_chunk;
    gemm_tile<T, Tile, true, true>(GradRows<T>(dy, d, g), WeightColumns<T>(x, d, g), out, d.Og(), cols, k_begin,
                                   min(K, k_begin + k_chunk));
}

#define CONV_GEMM(NAME, IMPL, TILE, A0, A1, A2)                                                          \
    KERNEL void __launch_bounds__(GEMM_THREADS, 2) NAME(float* A0, const float* A1, const float* A2,     \
                                                        CONV_PARAMS) {                                   \
        IMPL<float, TILE>(A0, A1, A2, CONV_ARGS);                                                        \
    }                                                                                                    \
    KERNEL void __launch_bounds__(GEMM_THREADS) NAME##_f64(double* A0, const double* A1, const double* A2, \
                                                           CONV_PARAMS) {                                \
        IMPL<double, TILE>(A0, A1, A2, CONV_ARGS);                                                       \
    }

CONV_GEMM(conv2d_fwd_gemm, conv_fwd_gemm, TileLarge, y, x, w)
CONV_GEMM(conv2d_fwd_gemm_s, conv_fwd_gemm, TileSmall, y, x, w)

#define CONV_GRAD_DATA_GEMM(NAME, TILE)                                                                   \
    KERNEL void __launch_bounds__(GEMM_THREADS, 2) NAME(float* dx, const float* w, const float* dy,      \
                                                        CONV_PARAMS, int ah, int aw) {                   \
        conv_grad_data_gemm<float, TILE>(dx, w, dy, CONV_ARGS, ah, aw);                                  \
    }                                                                                                    \
    KERNEL void __launch_bounds__(GEMM_THREADS) NAME##_f64(double* dx, const double* w, const double* dy, \
                                                           CONV_PARAMS, int ah, int aw) {                \
        conv_grad_data_gemm<double, TILE>(dx, w, dy, CONV_ARGS, ah, aw);                                 \
    }
CONV_GRAD_DATA_GEMM(conv2d_grad_data_gemm, TileLarge)
CONV_GRAD_DATA_GEMM(conv2d_grad_data_gemm_s, TileSmall)

#define CONV_GRAD_WEIGHT_GEMM(NAME, TILE)                                                                 \
    KERNEL void __launch_bounds__(GEMM_THREADS, 2) NAME(float* dst, const float* x, const float* dy,     \
                                                        CONV_PARAMS, int k_chunk) {                      \
        conv_grad_weight_gemm<float, TILE>(dst, x, dy, CONV_ARGS, k_chunk);                              \
    }                                                                                                    \
    KERNEL void __launch_bounds__(GEMM_THREADS) NAME##_f64(double* dst, const double* x, const double* dy, \
                                                           CONV_PARAMS, int k_chunk) {                   \
        conv_grad_weight_gemm<double, TILE>(dst, x, dy, CONV_ARGS, k_chunk);                             \
    }

CONV_GRAD_WEIGHT_GEMM(conv2d_grad_weight_gemm, TileLarge)
CONV_GRAD_WEIGHT_GEMM(conv2d_grad_weight_gemm_s, TileSmall)

KERNEL void conv2d_splitk_reduce(float* out, const float* part, i64 total, int splits) {
    splitk_reduce_t(out, part, part, total, splits, 1, 0);
}
KERNEL void conv2d_splitk_reduce_f64(double* out, const double* part, i64 total, int splits) {
    splitk_reduce_t(out, part, part, total, splits, 1, 0);
}

// ------------------------------------------------------------------ direct kernels (thin groups)

template <typename T>
__device__ __forceinline__ void conv_fwd_direct_t(T* y, const T* x, const T* w, ConvDims d) {
    const i64 total = (i64)d.N * d.O * d.OH * d.OW;
    const int Cg = d.Cg(), Og = d.Og();
    for (i64 i = global_thread(); i < total; i += global_stride()) {
        const int q = i % d.OW, p = (i / d.OW) % d.OH, o = (i / ((i64)d.OW * d.OH)) % d.O;
        const int n = i / ((i64)d.OW * d.OH * d.O), g = o / Og;
        const T* wo = w + (i64)o * Cg * d.KK();
        T acc = T(0);
        for (int c = 0; c < Cg; ++c) {
            const T* xc = x + ((i64)n * d.C + g * Cg + c) * d.H * d.W;
            for_each_pixel_in(p, q, d, [&](int r, int s, int h, int wc) {
                acc = fma(wo[(c * d.KH + r) * d.KW + s], xc[(i64)h * d.W + wc], acc);
            }, d.dh, d.dw);
        }
        y[i] = acc;
    }
}

template <typename T>
__device__ __forceinline__ void conv_grad_data_direct_t(T* dx, const T* w, const T* dy, ConvDims d) {
    const i64 total = (i64)d.N * d.C * d.H * d.W;
    const int Cg = d.Cg(), Og = d.Og();
    for (i64 i = global_thread(); i < total; i += global_stride()) {
        const int wc = i % d.W, h = (i / d.W) % d.H, c = (i / ((i64)d.W * d.H)) % d.C;
        const int n = i / ((i64)d.W * d.H * d.C), g = c / Cg, cl = c - g * Cg;
        T acc = T(0);
        for (int ol = 0; ol < Og; ++ol) {
            const int o = g * Og + ol;
            const T* dyo = dy + ((i64)n * d.O + o) * d.OH * d.OW;
            const T* wo = w + ((i64)o * Cg + cl) * d.KK();
            for_each_window_over(h, wc, d, [&](int r, int s, int p, int q) {
                acc = fma(wo[r * d.KW + s], dyo[(i64)p * d.OW + q], acc);
            }, d.dh, d.dw);
        }
        dx[i] = acc;
    }
}

// One block per weight element (o, c, r, s); the block sums over (n, p, q) in a fixed order.
template <typename T>
__device__ __forceinline__ void conv_grad_weight_direct_t(T* dw, const T* x, const T* dy, ConvDims d) {
    __shared__ T scratch[REDUCE_THREADS];
    const int Cg = d.Cg(), Og = d.Og(), KK = d.KK(), P = d.OH * d.OW;
    const i64 weights = (i64)d.O * Cg * KK, K = (i64)d.N * P;
    for (i64 e = blockIdx.x; e < weights; e += gridDim.x) {
        const int rs = e % KK, c = (e / KK) % Cg, o = e / ((i64)KK * Cg);
        const int r = rs / d.KW, s = rs - r * d.KW, g = o / Og;
        T acc = T(0);
        for (i64 j = threadIdx.x; j < K; j += REDUCE_THREADS) {
            const int n = j / P, pq = j - (i64)n * P, p = pq / d.OW, q = pq - p * d.OW;
            const int h = p * d.sh - d.ph + r * d.dh, wc = q * d.sw - d.pw + s * d.dw;
            if ((unsigned)h >= (unsigned)d.H || (unsigned)wc >= (unsigned)d.W) continue;
            acc = fma(dy[((i64)n * d.O + o) * P + pq], x[(((i64)n * d.C + g * Cg + c) * d.H + h) * d.W + wc], acc);
        }
        acc = block_sum(acc, scratch);
        if (threadIdx.x == 0) dw[e] = acc;
    }
}

#define CONV_DIRECT(NAME, IMPL, A0, A1, A2, BOUNDS)                                                  \
    KERNEL void BOUNDS NAME(float* A0, const float* A1, const float* A2, CONV_PARAMS) {             \
        IMPL(A0, A1, A2, CONV_ARGS);                                                                 \
    }                                                                                                \
    KERNEL void BOUNDS NAME##_f64(double* A0, const double* A1, const double* A2, CONV_PARAMS) {    \
        IMPL(A0, A1, A2, CONV_ARGS);                                                                 \
    }

CONV_DIRECT(conv2d_fwd_direct, conv_fwd_direct_t, y, x, w, )
CONV_DIRECT(conv2d_grad_data_direct, conv_grad_data_direct_t, dx, w, dy, )
CONV_DIRECT(conv2d_grad_weight_direct, conv_grad_weight_direct_t, dw, x, dy, __launch_bounds__(REDUCE_THREADS))
