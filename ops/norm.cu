// Batch normalization in training mode (ops/norm.py). x is [N,C] or [N,C,H,W]; channel c's
// m = N*HW values sit at (n*C + c)*HW + hw. Per-channel sums are two-stage and
// deterministic: a grid of (S splits) x (C channels) blocks each sums one contiguous
// chunk of the channel in a fixed order into scratch[c*S + s], then one thread per
// channel adds the S partials in split order. The forward pass sums x (for the mean),
// then squared deviations (for the biased variance), as numpy does; the normalising
// passes use numpy's operation order without FMA contraction, so given the same
// statistics they give numpy's bits. batch_norm launches partial, mean, partial, finalize, fwd;
// batch_norm_stats launches the first four and batch_norm_apply the last.
#include "common.cuh"

// mode 0: sum of x; mode 1: sum of (x - mean[c])^2; mode 2 (gradient): sums of dy and of
// dy * (x - mean[c]) * invstd[c], the second at scratch + C*S.
template <typename T>
__device__ __forceinline__ void bn_partial_t(T* scratch, const T* x, const T* dy, const T* mean, const T* invstd,
                                             int C, int HW, i64 m, int S, int mode) {
    __shared__ T red[REDUCE_THREADS];
    const int s = blockIdx.x, c = blockIdx.y;
    const i64 chunk = (m + S - 1) / S, begin = (i64)s * chunk, end = min(m, begin + chunk);
    const T mu = mode ? mean[c] : T(0), inv = mode == 2 ? invstd[c] : T(0);
    T acc = T(0), acc2 = T(0);
    for (i64 j = begin + threadIdx.x; j < end; j += REDUCE_THREADS) {
        const i64 n = j / HW, at = (n * C + c) * HW + (j - n * HW);
        const T v = x[at];
        if (mode == 0) {
            acc = add_rn(acc, v);
        } else if (mode == 1) {
            const T d = sub_rn(v, mu);
            acc = add_rn(acc, mul_rn(d, d));
        } else {
            const T g = dy[at];
            acc = add_rn(acc, g);
            acc2 = add_rn(acc2, mul_rn(g, mul_rn(sub_rn(v, mu), inv)));
        }
    }
    acc = block_sum(acc, red);
    if (mode == 2) acc2 = block_sum(acc2, red);
    if (threadIdx.x == 0) {
        scratch[(i64)c * S + s] = acc;
        if (mode == 2) scratch[(i64)C * S + (i64)c * S + s] = acc2;
    }
}

// The S partial sums of channel c, in split order.
template <typename T>
__device__ __forceinline__ T bn_total(const T* part, int c, int S) {
    T acc = part[(i64)c * S];
    for (int s = 1; s < S; ++s) acc = add_rn(acc, part[(i64)c * S + s]);
    return acc;
}

template <typename T>
__device__ __forceinline__ void bn_mean_t(T* mean, const T* scratch, int C, int S, i64 m) {
    for (i64 c = global_thread(); c < C; c += global_stride()) mean[c] = bn_total(scratch, (int)c, S) / T(m);
}

// invstd = 1 / sqrt(var + eps); running statistics move towards the batch's (unbiased
// variance). Running outputs may alias running inputs: one thread reads, then writes.
template <typename T>
__device__ __forceinline__ void bn_finalize_t(T* invstd, T* rm_out, T* rv_out, const T* scratch, const T* mean,
                                              const T* rm_in, const T* rv_in, int C, int S, i64 m, T eps, T mom) {
    for (i64 c = global_thread(); c < C; c += global_stride()) {
        const T var = bn_total(scratch, (int)c, S) / T(m);
        invstd[c] = T(1) / sqrt_t(add_rn(var, eps));
        const T keep = sub_rn(T(1), mom), rm = rm_in[c], rv = rv_in[c];
        rm_out[c] = add_rn(mul_rn(mom, rm), mul_rn(keep, mean[c]));
        rv_out[c] = add_rn(mul_rn(mom, rv), mul_rn(keep, mul_rn(var, T(m) / T(m - 1))));
    }
}

// y = (x - mean) * (invstd * gamma) + beta
template <typename T>
__device__ __forceinline__ void bn_fwd_t(T* y, const T* x, const T* mean, const T* invstd, const T* gamma,
                                         const T* beta, int C, int HW, i64 total) {
    for (i64 i = global_thread(); i < total; i += global_stride()) {
        const int c = (i / HW) % C;
        y[i] = add_rn(mul_rn(sub_rn(x[i], mean[c]), mul_rn(invstd[c], gamma[c])), beta[c]);
    }
}

template <typename T>
__device__ __forceinline__ void bn_bwd_reduce_t(T* dgamma, T* dbeta, const T* scratch, int C, int S) {
    for (i64 c = global_thread(); c < C; c += global_stride()) {
        dbeta[c] = bn_total(scratch, (int)c, S);
        dgamma[c] = bn_total(scratch + (i64)C * S, (int)c, S);
    }
}

// dx = (m*dy - dbeta - xhat*dgamma) * (gamma*invstd/m), xhat = (x - mean)*invstd
template <typename T>
__device__ __forceinline__ void bn_bwd_data_t(T* dx, const T* x, const T* dy, const T* mean, const T* invstd,
                                              const T* gamma, const T* dgamma, const T* dbeta, int C, int HW,
                                              i64 total, i64 m) {
    const T mt = T(m);
    for (i64 i = global_thread(); i < total; i += global_stride()) {
        const int c = (i / HW) % C;
        const T xhat = mul_rn(sub_rn(x[i], mean[c]), invstd[c]);
        const T inner = sub_rn(sub_rn(mul_rn(mt, dy[i]), dbeta[c]), mul_rn(xhat, dgamma[c]));
        dx[i] = mul_rn(inner, mul_rn(gamma[c], invstd[c]) / mt);
    }
}

KERNEL void __launch_bounds__(REDUCE_THREADS) batch_norm_partial(float* scratch, const float* x, const float* dy,
        const float* mean, const float* invstd, int C, int HW, i64 m, int S, int mode) {
    bn_partial_t(scratch, x, dy, mean, invstd, C, HW, m, S, mode);
}
KERNEL void __launch_bounds__(REDUCE_THREADS) batch_norm_partial_f64(double* scratch, const double* x,
        const double* dy, const double* mean, const double* invstd, int C, int HW, i64 m, int S, int mode) {
    bn_partial_t(scratch, x, dy, mean, invstd, C, HW, m, S, mode);
}
KERNEL void batch_norm_mean(float* mean, const float* scratch, int C, int S, i64 m) {
    bn_mean_t(mean, scratch, C, S, m);
}
KERNEL void batch_norm_mean_f64(double* mean, const double* scratch, int C, int S, i64 m) {
    bn_mean_t(mean, scratch, C, S, m);
}
KERNEL void batch_norm_finalize(float* invstd, float* rm_out, float* rv_out, const float* scratch,
        const float* mean, const float* rm_in, const float* rv_in, int C, int S, i64 m, float eps, float mom) {
    bn_finalize_t(invstd, rm_out, rv_out, scratch, mean, rm_in, rv_in, C, S, m, eps, mom);
}
KERNEL void batch_norm_finalize_f64(double* invstd, double* rm_out, double* rv_out, const double* scratch,
        const double* mean, const double* rm_in, const double* rv_in, int C, int S, i64 m, double eps, double mom) {
    bn_finalize_t(invstd, rm_out, rv_out, scratch, mean, rm_in, rv_in, C, S, m, eps, mom);
}
KERNEL void batch_norm_fwd(float* y, const float* x, const float* mean, const float* invstd, const float* gamma,
        const float* beta, int C, int HW, i64 total) {
    bn_fwd_t(y, x, mean, invstd, gamma, beta, C, HW, total);
}
KERNEL void batch_norm_fwd_f64(double* y, const double* x, const double* mean, const double* invstd,
        const double* gamma, const double* beta, int C, int HW, i64 total) {
    bn_fwd_t(y, x, mean, invstd, gamma, beta, C, HW, total);
}
KERNEL void batch_norm_bwd_reduce(float* dgamma, float* dbeta, const float* scratch, int C, int S) {
    bn_bwd_reduce_t(dgamma, dbeta, scratch, C, S);
}
KERNEL void batch_norm_bwd_reduce_f64(double* dgamma, double* dbeta, const double* scratch, int C, int S) {
    bn_bwd_reduce_t(dgamma, dbeta, scratch, C, S);
}
KERNEL void batch_norm_bwd_data(float* dx, const float* x, const float* dy, const float* mean, const float* invstd,
        const float* gamma, const float* dgamma, const float* dbeta, int C, int HW, i64 total, i64 m) {
    bn_bwd_data_t(dx, x, dy, mean, invstd, gamma, dgamma, dbeta, C, HW, total, m);
}
KERNEL void batch_norm_bwd_data_f64(double* dx, const double* x, const double* dy, const double* mean,
        const double* invstd, const double* gamma, const double* dgamma, const double* dbeta, int C, int HW,
        i64 total, i64 m) {
    bn_bwd_data_t(dx, x, dy, mean, invstd, gamma, dgamma, dbeta, C, HW, total, m);
}

// ------------------------------------------------------------------ instance normalization
// One block per (n, c) plane of D = H*W values, fixed-tree block sums (deterministic), as
// layer_norm.cu's rows. No affine parameters (Pix2PixHD's InstanceNorm2d(affine=False)).

// mean = sum(x)/D; invstd = 1/sqrt(sum((x-mean)^2)/D + eps); y = (x-mean)*invstd
template <typename T>
__device__ __forceinline__ void in_fwd_t(T* y, T* invstd, const T* x, T eps, i64 rows, int D) {
    __shared__ T red[REDUCE_THREADS];
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const T* xr = x + r * D;
        T mu, inv;
        row_mean_invstd(xr, D, eps, red, &mu, &inv);
        if (threadIdx.x == 0) invstd[r] = inv;
        for (int j = threadIdx.x; j < D; j += REDUCE_THREADS) y[r * D + j] = mul_rn(sub_rn(xr[j], mu), inv);
    }
}

// y is xhat: dx = ((D*dy - sum dy) - y*sum(dy*y)) * (invstd/D)
template <typename T>
__device__ __forceinline__ void in_bwd_t(T* dx, const T* y, const T* invstd, const T* dy, i64 rows, int D) {
    __shared__ T red[REDUCE_THREADS];
    const T d = T(D);
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        T s1 = T(0), s2 = T(0);
        for (int j = threadIdx.x; j < D; j += REDUCE_THREADS) {
            s1 = add_rn(s1, dy[r * D + j]);
            s2 = add_rn(s2, mul_rn(dy[r * D + j], y[r * D + j]));
        }
        s1 = block_sum(s1, red);
        s2 = block_sum(s2, red);
        const T f = invstd[r] / d;
        for (int j = threadIdx.x; j < D; j += REDUCE_THREADS)
            dx[r * D + j] = mul_rn(sub_rn(sub_rn(mul_rn(d, dy[r * D + j]), s1), mul_rn(y[r * D + j], s2)), f);
    }
}

KERNEL void __launch_bounds__(REDUCE_THREADS) instance_norm_fwd(float* y, float* invstd, const float* x, float eps,
                                                                i64 rows, int D) {
    in_fwd_t(y, invstd, x, eps, rows, D);
}
KERNEL void __launch_bounds__(REDUCE_THREADS) instance_norm_fwd_f64(double* y, double* invstd, const double* x,
                                                                    double eps, i64 rows, int D) {
    in_fwd_t(y, invstd, x, eps, rows, D);
}
KERNEL void __launch_bounds__(REDUCE_THREADS) instance_norm_bwd(float* dx, const float* y, const float* invstd,
                                                                const float* dy, i64 rows, int D) {
    in_bwd_t(dx, y, invstd, dy, rows, D);
}
KERNEL void __launch_bounds__(REDUCE_THREADS) instance_norm_bwd_f64(double* dx, const double* y, const double* invstd,
                                                                    const double* dy, i64 rows, int D) {
    in_bwd_t(dx, y, invstd, dy, rows, D);
}
