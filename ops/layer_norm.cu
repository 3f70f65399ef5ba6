// Layer and RMS normalization over the last axis (ops/layer_norm.py). x is [rows, D]
// row-major. Row statistics: one block per row, fixed-tree block sums (deterministic). The
// parameter gradients: one thread per column adding the rows in order (no atomics). Element
// arithmetic follows numpy's order without FMA contraction.
#include "common.cuh"

// mean = sum(x)/D; invstd = 1/sqrt(sum((x-mean)^2)/D + eps); y = ((x-mean)*invstd)*gamma + beta
template <typename T>
__device__ __forceinline__ void ln_fwd_t(T* y, T* mean, T* invstd, const T* x, const T* gamma, const T* beta,
                                         T eps, i64 rows, int D) {
    __shared__ T red[REDUCE_THREADS];
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const T* xr = x + r * D;
        T mu, inv;
        row_mean_invstd(xr, D, eps, red, &mu, &inv);
        if (threadIdx.x == 0) {
            mean[r] = mu;
            invstd[r] = inv;
        }
        for (int j = threadIdx.x; j < D; j += REDUCE_THREADS)
            y[r * D + j] = add_rn(mul_rn(mul_rn(sub_rn(xr[j], mu), inv), gamma[j]), beta[j]);
    }
}

// g = dy*gamma, xhat = (x-mean)*invstd: dx = ((D*g - sum g) - xhat*sum(g*xhat)) * (invstd/D)
template <typename T>
__device__ __forceinline__ void ln_bwd_data_t(T* dx, const T* x, const T* gamma, const T* mean, const T* invstd,
                                              const T* dy, i64 rows, int D) {
    __shared__ T red[REDUCE_THREADS];
    const T d = T(D);
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const T mu = mean[r], inv = invstd[r];
        T s1 = T(0), s2 = T(0);
        for (int j = threadIdx.x; j < D; j += REDUCE_THREADS) {
            const T g = mul_rn(dy[r * D + j], gamma[j]);
            s1 = add_rn(s1, g);
            s2 = add_rn(s2, mul_rn(g, mul_rn(sub_rn(x[r * D + j], mu), inv)));
        }
        s1 = block_sum(s1, red);
        s2 = block_sum(s2, red);
        const T f = inv / d;
        for (int j = threadIdx.x; j < D; j += REDUCE_THREADS) {
            const T g = mul_rn(dy[r * D + j], gamma[j]);
            const T xhat = mul_rn(sub_rn(x[r * D + j], mu), inv);
            dx[r * D + j] = mul_rn(sub_rn(sub_rn(mul_rn(d, g), s1), mul_rn(xhat, s2)), f);
        }
    }
}

// dgamma[c] = sum over rows of dy*xhat, dbeta[c] = sum over rows of dy, rows in order.
template <typename T>
__device__ __forceinline__ void ln_bwd_params_t(T* dgamma, T* dbeta, const T* x, const T* mean, const T* invstd,
                                                const T* dy, i64 rows, int D) {
    for (i64 c = global_thread(); c < D; c += global_stride()) {
        T sg = T(0), sb = T(0);
        for (i64 r = 0; r < rows; ++r) {
            const T g = dy[r * D + c];
            sg = add_rn(sg, mul_rn(g, mul_rn(sub_rn(x[r * D + c], mean[r]), invstd[r])));
            sb = add_rn(sb, g);
        }
        dgamma[c] = sg;
        dbeta[c] = sb;
    }
}

// invrms = 1/sqrt(sum(x*x)/D + eps); y = (x*invrms)*gamma
template <typename T>
__device__ __forceinline__ void rms_fwd_t(T* y, T* invrms, const T* x, const T* gamma, T eps, i64 rows, int D) {
    __shared__ T red[REDUCE_THREADS];
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const T* xr = x + r * D;
        T q = T(0);
        for (int j = threadIdx.x; j < D; j += REDUCE_THREADS) q = add_rn(q, mul_rn(xr[j], xr[j]));
        const T inv = T(1) / sqrt_t(add_rn(block_sum(q, red) / T(D), eps));
        if (threadIdx.x == 0) invrms[r] = inv;
        for (int j = threadIdx.x; j < D; j += REDUCE_THREADS) y[r * D + j] = mul_rn(mul_rn(xr[j], inv), gamma[j]);
    }
}

// g = dy*gamma, xhat = x*invrms: dx = (g - xhat*(sum(g*xhat)/D)) * invrms
template <typename T>
__device__ __forceinline__ void rms_bwd_data_t(T* dx, const T* x, const T* gamma, const T* invrms, const T* dy,
                                               i64 rows, int D) {
    __shared__ T red[REDUCE_THREADS];
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const T inv = invrms[r];
        T s = T(0);
        for (int j = threadIdx.x; j < D; j += REDUCE_THREADS)
            s = add_rn(s, mul_rn(mul_rn(dy[r * D + j], gamma[j]), mul_rn(x[r * D + j], inv)));
        const T mean_gx = block_sum(s, red) / T(D);
        for (int j = threadIdx.x; j < D; j += REDUCE_THREADS) {
            const T g = mul_rn(dy[r * D + j], gamma[j]);
            dx[r * D + j] = mul_rn(sub_rn(g, mul_rn(mul_rn(x[r * D + j], inv), mean_gx)), inv);
        }
    }
}

template <typename T>
__device__ __forceinline__ void rms_bwd_params_t(T* dgamma, const T* x, const T* invrms, const T* dy, i64 rows,
                                                 int D) {
    for (i64 c = global_thread(); c < D; c += global_stride()) {
        T s = T(0);
        for (i64 r = 0; r < rows; ++r) s = add_rn(s, mul_rn(dy[r * D + c], mul_rn(x[r * D + c], invrms[r])));
        dgamma[c] = s;
    }
}

#define LN_KERNELS(T, SUFFIX)                                                                                    \
    KERNEL void __launch_bounds__(REDUCE_THREADS) layer_norm_fwd##SUFFIX(T* y, T* mean, T* invstd, const T* x,   \
            const T* gamma, const T* beta, T eps, i64 rows, int D) {                                          \
        ln_fwd_t(y, mean, invstd, x, gamma, beta, eps, rows, D);                                              \
    }                                                                                                         \
    KERNEL void __launch_bounds__(REDUCE_THREADS) layer_norm_bwd_data##SUFFIX(T* dx, const T* x,                 \
            const T* gamma, const T* mean, const T* invstd, const T* dy, i64 rows, int D) {                   \
        ln_bwd_data_t(dx, x, gamma, mean, invstd, dy, rows, D);                                               \
    }                                                                                                         \
    KERNEL void layer_norm_bwd_params##SUFFIX(T* dgamma, T* dbeta, const T* x, const T* mean, const T* invstd,    \
            const T* dy, i64 rows, int D) {                                                                   \
        ln_bwd_params_t(dgamma, dbeta, x, mean, invstd, dy, rows, D);                                         \
    }                                                                                                         \
    KERNEL void __launch_bounds__(REDUCE_THREADS) rms_norm_fwd##SUFFIX(T* y, T* invrms, const T* x,              \
            const T* gamma, T eps, i64 rows, int D) {                                                         \
        rms_fwd_t(y, invrms, x, gamma, eps, rows, D);                                                         \
    }                                                                                                         \
    KERNEL void __launch_bounds__(REDUCE_THREADS) rms_norm_bwd_data##SUFFIX(T* dx, const T* x, const T* gamma,   \
            const T* invrms, const T* dy, i64 rows, int D) {                                                  \
        rms_bwd_data_t(dx, x, gamma, invrms, dy, rows, D);                                                    \
    }                                                                                                         \
    KERNEL void rms_norm_bwd_params##SUFFIX(T* dgamma, const T* x, const T* invrms, const T* dy, i64 rows,       \
            int D) {                                                                                          \
        rms_bwd_params_t(dgamma, x, invrms, dy, rows, D);                                                     \
    }

LN_KERNELS(float, )
LN_KERNELS(double, _f64)
