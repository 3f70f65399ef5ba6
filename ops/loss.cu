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

// ---------------------------------------------------------------- log_softmax, nll_loss
// log_softmax over the last axis, one block per row: m = block max, s = block sum of
// exp(x - m), y = (x - m) - log(s) (PyTorch's formula). Its gradient, one block per row:
// dx = dy - exp(y) * sum(dy). Sums are fixed trees (block_sum): deterministic.
template <typename T>
__device__ __forceinline__ void log_softmax_fwd_t(T* y, const T* x, i64 rows, int cols) {
    __shared__ T red[REDUCE_THREADS];
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const T* xr = x + r * cols;
        T* yr = y + r * cols;
        T mx = neg_inf<T>();
        for (int j = threadIdx.x; j < cols; j += REDUCE_THREADS) {
            const T v = xr[j];
            mx = (mx != mx || mx >= v) ? mx : v;
        }
        mx = block_max(mx, red);
        T total = T(0);
        for (int j = threadIdx.x; j < cols; j += REDUCE_THREADS) total = add_rn(total, exp_t(sub_rn(xr[j], mx)));
        const T lse = log_t(block_sum(total, red));
        for (int j = threadIdx.x; j < cols; j += REDUCE_THREADS) yr[j] = sub_rn(sub_rn(xr[j], mx), lse);
    }
}

template <typename T>
__device__ __forceinline__ void log_softmax_bwd_t(T* dx, const T* y, const T* dy, i64 rows, int cols) {
    __shared__ T red[REDUCE_THREADS];
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const T* yr = y + r * cols;
        const T* dyr = dy + r * cols;
        T* dxr = dx + r * cols;
        T total = T(0);
        for (int j = threadIdx.x; j < cols; j += REDUCE_THREADS) total = add_rn(total, dyr[j]);
        total = block_sum(total, red);
        for (int j = threadIdx.x; j < cols; j += REDUCE_THREADS) dxr[j] = sub_rn(dyr[j], mul_rn(exp_t(yr[j]), total));
    }
}

KERNEL void __launch_bounds__(REDUCE_THREADS) log_softmax_fwd(float* y, const float* x, i64 rows, int cols) {
    log_softmax_fwd_t(y, x, rows, cols);
}
KERNEL void __launch_bounds__(REDUCE_THREADS) log_softmax_fwd_f64(double* y, const double* x, i64 rows, int cols) {
    log_softmax_fwd_t(y, x, rows, cols);
}
KERNEL void __launch_bounds__(REDUCE_THREADS) log_softmax_bwd(float* dx, const float* y, const float* dy, i64 rows,
                                                             int cols) {
    log_softmax_bwd_t(dx, y, dy, rows, cols);
}
KERNEL void __launch_bounds__(REDUCE_THREADS) log_softmax_bwd_f64(double* dx, const double* y, const double* dy,
                                                                 i64 rows, int cols) {
    log_softmax_bwd_t(dx, y, dy, rows, cols);
}

// nll_loss, one block: thread t adds -logp[r, label] over rows r = t, t + 256, ... whose label
// is not ignore_index, in order, and counts them; fixed trees add the sums and the counts;
// loss = sum / count ("mean") or sum. A kept label outside [0, C) gives NaN (numpy raises).
template <typename T, typename L>
__device__ __forceinline__ void nll_fwd_t(T* loss, const T* logp, const L* labels, int N, int C, i64 ignore_index,
                                          int mean) {
    __shared__ T red[REDUCE_THREADS];
    __shared__ int cnt[REDUCE_THREADS];
    T acc = T(0);
    int kept = 0;
    for (int r = threadIdx.x; r < N; r += REDUCE_THREADS) {
        const L label = labels[r];
        if ((i64)label == ignore_index) continue;
        acc = sub_rn(acc, (label >= 0 && label < C) ? logp[(i64)r * C + label] : quiet_nan<T>());
        ++kept;
    }
    acc = block_sum(acc, red);
    kept = block_sum(kept, cnt);
    if (threadIdx.x == 0) loss[0] = mean ? acc / T(kept) : acc;
}

// nll_loss's gradient: one block counts the kept rows and writes g = -(dloss / count) ("mean")
// or -dloss; then dlogp[r, j] = g where j is row r's kept label, 0 elsewhere (a row whose kept
// label lies outside [0, C) is NaN).
template <typename T, typename L>
__device__ __forceinline__ void nll_grad_scale_t(T* g, const L* labels, const T* dloss, int N, i64 ignore_index,
                                                 int mean) {
    __shared__ int cnt[REDUCE_THREADS];
    int kept = 0;
    for (int r = threadIdx.x; r < N; r += REDUCE_THREADS) kept += (i64)labels[r] != ignore_index;
    kept = block_sum(kept, cnt);
    if (threadIdx.x == 0) g[0] = -(mean ? dloss[0] / T(kept) : dloss[0]);
}

template <typename T, typename L>
__device__ __forceinline__ void nll_bwd_t(T* dlogp, const T* g, const L* labels, int N, int C, i64 ignore_index) {
    const T v = g[0];
    const i64 total = (i64)N * C;
    for (i64 i = global_thread(); i < total; i += global_stride()) {
        const int r = i / C, j = i - (i64)r * C;
        const L label = labels[r];
        T d = T(0);
        if ((i64)label != ignore_index) d = (label < 0 || label >= C) ? quiet_nan<T>() : (j == label ? v : T(0));
        dlogp[i] = d;
    }
}

#define NLL(SUFFIX, T, L)                                                                                     \
    KERNEL void __launch_bounds__(REDUCE_THREADS) nll_loss_fwd##SUFFIX(T* loss, const T* logp, const L* labels, \
                                                                       int N, int C, i64 ignore_index,        \
                                                                       int mean) {                            \
        nll_fwd_t(loss, logp, labels, N, C, ignore_index, mean);                                              \
    }                                                                                                         \
    KERNEL void __launch_bounds__(REDUCE_THREADS) nll_loss_grad_scale##SUFFIX(T* g, const L* labels,         \
                                                                              const T* dloss, int N,          \
                                                                              i64 ignore_index, int mean) {   \
        nll_grad_scale_t(g, labels, dloss, N, ignore_index, mean);                                            \
    }                                                                                                         \
    KERNEL void nll_loss_bwd##SUFFIX(T* dlogp, const T* g, const L* labels, int N, int C, i64 ignore_index) {  \
        nll_bwd_t(dlogp, g, labels, N, C, ignore_index);                                                      \
    }

NLL(, float, int)
NLL(_i64, float, long long)
NLL(_f64, double, int)
NLL(_f64_i64, double, long long)
