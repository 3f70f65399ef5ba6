// Softmax cross-entropy over integer labels (ops/loss.py). One 256-thread block per row:
// a block max, z = logits - max stored in probs, exp, a block sum, then probs /= sum.
// Each row's loss, log(sum) - z[label], goes to scratch; softmax_xent_loss adds the rows
// in a fixed tree order and divides by N. Labels outside [0, C) give a NaN loss (numpy
// raises instead). The gradient, (probs - onehot) * (dloss / N), gives numpy's bits.
// Label types: int32 (no suffix) and int64 (suffix _i64).
#include "common.cuh"

template <typename T, typename L>
__device__ __forceinline__ void xent_fwd_t(T* probs, T* row_loss, const T* logits, const L* labels, int N, int C) {
    __shared__ T red[REDUCE_THREADS];
    for (int r = blockIdx.x; r < N; r += gridDim.x) {
        const T* x = logits + (i64)r * C;
        T* p = probs + (i64)r * C;
        T mx = neg_inf<T>();
        for (int j = threadIdx.x; j < C; j += REDUCE_THREADS) {
            const T v = x[j];
            mx = (mx != mx || mx >= v) ? mx : v;
        }
        mx = block_max(mx, red);
        T total = T(0);
        for (int j = threadIdx.x; j < C; j += REDUCE_THREADS) {
            const T e = exp_t(sub_rn(x[j], mx));
            p[j] = e;
            total = add_rn(total, e);
        }
        total = block_sum(total, red);
        for (int j = threadIdx.x; j < C; j += REDUCE_THREADS) p[j] = p[j] / total;
        if (threadIdx.x == 0) {
            const L label = labels[r];
            row_loss[r] = (label >= 0 && label < C) ? sub_rn(log_t(total), sub_rn(x[label], mx)) : quiet_nan<T>();
        }
    }
}

template <typename T>
__device__ __forceinline__ void xent_loss_t(T* loss, const T* row_loss, int N) {
    __shared__ T red[REDUCE_THREADS];
    T acc = T(0);
    for (int r = threadIdx.x; r < N; r += REDUCE_THREADS) acc = add_rn(acc, row_loss[r]);
    acc = block_sum(acc, red);
    if (threadIdx.x == 0) loss[0] = acc / T(N);
}

template <typename T, typename L>
__device__ __forceinline__ void xent_bwd_t(T* dlogits, const T* probs, const L* labels, const T* dloss, int N, int C) {
    const T scale = dloss[0] / T(N);
    const i64 total = (i64)N * C;
    for (i64 i = global_thread(); i < total; i += global_stride()) {
        const int r = i / C, j = i - (i64)r * C;
        const L label = labels[r];
        const T p = probs[i];
        const T d = (label < 0 || label >= C) ? quiet_nan<T>() : (j == label ? sub_rn(p, T(1)) : p);
        dlogits[i] = mul_rn(d, scale);
    }
}

#define XENT(SUFFIX, T, L)                                                                                    \
    KERNEL void __launch_bounds__(REDUCE_THREADS) softmax_xent_fwd##SUFFIX(T* probs, T* row_loss,             \
                                                                           const T* logits, const L* labels,  \
                                                                           int N, int C) {                    \
        xent_fwd_t(probs, row_loss, logits, labels, N, C);                                                    \
    }                                                                                                         \
    KERNEL void softmax_xent_bwd##SUFFIX(T* dlogits, const T* probs, const L* labels, const T* dloss,        \
                                         int N, int C) {                                                      \
        xent_bwd_t(dlogits, probs, labels, dloss, N, C);                                                      \
    }

XENT(, float, int)
XENT(_i64, float, long long)
XENT(_f64, double, int)
XENT(_f64_i64, double, long long)

KERNEL void __launch_bounds__(REDUCE_THREADS) softmax_xent_loss(float* loss, const float* row_loss, int N) {
    xent_loss_t(loss, row_loss, N);
}
KERNEL void __launch_bounds__(REDUCE_THREADS) softmax_xent_loss_f64(double* loss, const double* row_loss, int N) {
    xent_loss_t(loss, row_loss, N);
}
