// Attention's kernels (ops/attention.py): batched GEMMs with transposes, the row softmax
// (scaled, optionally causal) and its gradient, and a four-axis permutation.
//   bmm_<ta><tb>: C[z][M,N] = op(A[z]) @ op(B[z]), A[z] stored [M,K] (or [K,M] when ta = t),
//                 B[z] stored [K,N] (or [N,K] when tb = t); z = blockIdx.z, one batch index.
// Softmax rows are one block each; sums and maxima are fixed trees (block_sum, block_max):
// deterministic, no atomics.
#include "gemm.cuh"

template <typename T, class Tile, bool TA, bool TB>
__device__ __forceinline__ void bmm_t(T* C, const T* A, const T* B, int M, int N, int K) {
    const i64 z = blockIdx.z;
    A += z * M * K;
    B += z * K * N;
    const Strided<T> a = TA ? Strided<T>{A, 1, M} : Strided<T>{A, K, 1};
    const Strided<T> b = TB ? Strided<T>{B, K, 1} : Strided<T>{B, 1, N};
    gemm_tile<T, Tile, !TA, TB>(a, b, RowMajorStore<T>{C + z * M * N, N, nullptr}, M, N, 0, K);
}

#define BMM(NAME, TILE, TA, TB)                                                                          \
    KERNEL void __launch_bounds__(GEMM_THREADS, 2) NAME(float* C, const float* A, const float* B, int M,    \
                                                     int N, int K) {                                     \
        bmm_t<float, TILE, TA, TB>(C, A, B, M, N, K);                                                    \
    }                                                                                                    \
    KERNEL void __launch_bounds__(GEMM_THREADS) NAME##_f64(double* C, const double* A, const double* B,    \
                                                           int M, int N, int K) {                        \
        bmm_t<double, TILE, TA, TB>(C, A, B, M, N, K);                                                   \
    }

BMM(bmm_nn, TileLarge, false, false)
BMM(bmm_nn_s, TileSmall, false, false)
BMM(bmm_nt, TileLarge, false, true)
BMM(bmm_nt_s, TileSmall, false, true)
BMM(bmm_tn, TileLarge, true, false)
BMM(bmm_tn_s, TileSmall, true, false)
BMM(bmm_tt, TileLarge, true, true)
BMM(bmm_tt_s, TileSmall, true, true)

// Row r's keys [0, limit): every key, or with a causal mask (query_len > 0) the keys up to
// and including its query index r % query_len.
__device__ __forceinline__ int row_limit(i64 row, int cols, int query_len) {
    return query_len > 0 ? (int)(row % query_len) + 1 : cols;
}

// y = softmax(scale * x) over each row: z = x*scale, m = max z, e = exp(z - m), y = e / sum e;
// masked keys get 0. y may not alias x (the row is read twice).
template <typename T>
__device__ __forceinline__ void softmax_fwd_t(T* y, const T* x, T scale, i64 rows, int cols, int query_len) {
    __shared__ T red[REDUCE_THREADS];
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const T* xr = x + r * cols;
        T* yr = y + r * cols;
        const int limit = row_limit(r, cols, query_len);
        T m = neg_inf<T>();
        for (int j = threadIdx.x; j < limit; j += REDUCE_THREADS) {
            const T z = mul_rn(xr[j], scale);
            m = (m != m || m >= z) ? m : z;
        }
        m = block_max(m, red);
        T s = T(0);
        for (int j = threadIdx.x; j < limit; j += REDUCE_THREADS) s = add_rn(s, exp_t(sub_rn(mul_rn(xr[j], scale), m)));
        s = block_sum(s, red);
        for (int j = threadIdx.x; j < cols; j += REDUCE_THREADS)
            yr[j] = j < limit ? exp_t(sub_rn(mul_rn(xr[j], scale), m)) / s : T(0);
    }
}

// dx = (y * (dy - sum(dy * y))) * scale over each row (masked keys: y = 0, so dx = 0).
template <typename T>
__device__ __forceinline__ void softmax_bwd_t(T* dx, const T* y, const T* dy, T scale, i64 rows, int cols,
                                              int query_len) {
    __shared__ T red[REDUCE_THREADS];
    for (i64 r = blockIdx.x; r < rows; r += gridDim.x) {
        const T *yr = y + r * cols, *dyr = dy + r * cols;
        T* dxr = dx + r * cols;
        T s = T(0);
        for (int j = threadIdx.x; j < cols; j += REDUCE_THREADS) s = add_rn(s, mul_rn(dyr[j], yr[j]));
        s = block_sum(s, red);
        for (int j = threadIdx.x; j < cols; j += REDUCE_THREADS)
            dxr[j] = mul_rn(mul_rn(yr[j], sub_rn(dyr[j], s)), scale);
    }
}

KERNEL void __launch_bounds__(REDUCE_THREADS) softmax_fwd(float* y, const float* x, float scale, i64 rows, int cols,
                                                          int query_len) {
    softmax_fwd_t(y, x, scale, rows, cols, query_len);
}
KERNEL void __launch_bounds__(REDUCE_THREADS) softmax_fwd_f64(double* y, const double* x, double scale, i64 rows,
                                                              int cols, int query_len) {
    softmax_fwd_t(y, x, scale, rows, cols, query_len);
}
KERNEL void __launch_bounds__(REDUCE_THREADS) softmax_bwd(float* dx, const float* y, const float* dy, float scale,
                                                          i64 rows, int cols, int query_len) {
    softmax_bwd_t(dx, y, dy, scale, rows, cols, query_len);
}
KERNEL void __launch_bounds__(REDUCE_THREADS) softmax_bwd_f64(double* dx, const double* y, const double* dy,
                                                              double scale, i64 rows, int cols, int query_len) {
    softmax_bwd_t(dx, y, dy, scale, rows, cols, query_len);
}

// y[i0,i1,i2,i3] = x[i0*s0 + i1*s1 + i2*s2 + i3*s3]: y's (padded) dims d0..d3 and x's stride
// along each of y's axes. A pure copy: numpy's bits.
template <typename T>
__device__ __forceinline__ void permute4_t(T* y, const T* x, int d0, int d1, int d2, int d3, i64 s0, i64 s1,
                                           i64 s2, i64 s3, i64 n) {
    for (i64 i = global_thread(); i < n; i += global_stride()) {
        i64 r = i;
        const i64 i3 = r % d3; r /= d3;
        const i64 i2 = r % d2; r /= d2;
        const i64 i1 = r % d1;
        const i64 i0 = r / d1;
        y[i] = x[i0 * s0 + i1 * s1 + i2 * s2 + i3 * s3];
    }
}

KERNEL void permute4(float* y, const float* x, int d0, int d1, int d2, int d3, i64 s0, i64 s1, i64 s2, i64 s3,
                     i64 n) {
    permute4_t(y, x, d0, d1, d2, d3, s0, s1, s2, s3, n);
}
KERNEL void permute4_f64(double* y, const double* x, int d0, int d1, int d2, int d3, i64 s0, i64 s1, i64 s2,
                         i64 s3, i64 n) {
    permute4_t(y, x, d0, d1, d2, d3, s0, s1, s2, s3, n);
}
